//! Which unmeasured configurations are assumed to fit in memory.
//!
//! Memory is never predicted, only inferred from what was measured. A
//! configuration fits when a measured one that fits needs at least as much
//! memory: the same instance size or one with strictly less memory, a batch
//! at least as large and at least as many processes. It runs out of memory
//! when it needs at least as much as one measured out of memory (the same
//! size or one with strictly more memory, a batch and processes at least as
//! large). Everything else — a configuration next to a measured
//! out-of-memory one included — is not assumed to fit.
//!
//! Two things the data show rule out bolder inference. Instance sizes with
//! the same nominal memory differ: on ParvaGPU's A100 profiles a 4g.40gb
//! instance holds configurations a 3g.40gb one does not. And a linear
//! memory model (a context per process plus activations per request) is
//! wrong in the direction that matters: a model that fits 4 processes of
//! batch 32 need not fit 2 of batch 64.

use tessera_core::{GpuModel, SegmentConfig};

use super::Feasibility;

/// What the measured points say about one model's memory.
pub(crate) struct MemoryEvidence {
    gpu_model: GpuModel,
    fits: Vec<SegmentConfig>,
    out_of_memory: Vec<SegmentConfig>,
}

impl MemoryEvidence {
    /// The evidence of the measured fitting configurations `fits` and the
    /// configurations measured out of memory.
    pub fn new(gpu_model: GpuModel, fits: Vec<SegmentConfig>, out_of_memory: Vec<SegmentConfig>) -> MemoryEvidence {
        MemoryEvidence { gpu_model, fits, out_of_memory }
    }

    /// Whether `config` is assumed to fit.
    pub fn feasibility(&self, config: SegmentConfig) -> Feasibility {
        if self.out_of_memory.iter().any(|&oom| self.needs_at_least(config, oom)) {
            Feasibility::OutOfMemory
        } else if self.fits.iter().any(|&fit| self.needs_at_least(fit, config)) {
            Feasibility::Fits
        } else {
            Feasibility::Unsure
        }
    }

    /// Whether `a` needs at least as much of its instance's memory as `b`
    /// of its own.
    fn needs_at_least(&self, a: SegmentConfig, b: SegmentConfig) -> bool {
        let memory = |c: SegmentConfig| {
            self.gpu_model.spec().profile_for_size(c.size_gpcs).map_or(0, |profile| profile.memory_gb)
        };
        let smaller_or_same = a.size_gpcs == b.size_gpcs || memory(a) < memory(b);
        smaller_or_same && a.batch >= b.batch && a.procs >= b.procs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(size_gpcs: u8, batch: u32, procs: u32) -> SegmentConfig {
        SegmentConfig { size_gpcs, batch, procs }
    }

    #[test]
    fn measured_points_decide_what_they_dominate_and_nothing_else() {
        let evidence = MemoryEvidence::new(GpuModel::A100_80GB, vec![config(3, 32, 2)], vec![config(3, 64, 2)]);
        assert_eq!(evidence.feasibility(config(3, 16, 1)), Feasibility::Fits, "less load");
        assert_eq!(evidence.feasibility(config(7, 32, 2)), Feasibility::Fits, "as much load, more memory");
        assert_eq!(evidence.feasibility(config(2, 128, 3)), Feasibility::OutOfMemory, "more load, less memory");
        assert_eq!(evidence.feasibility(config(3, 128, 2)), Feasibility::OutOfMemory, "more load");
        // 4g has as much memory as 3g, no more: it is compared with neither.
        assert_eq!(evidence.feasibility(config(4, 32, 2)), Feasibility::Unsure);
        assert_eq!(evidence.feasibility(config(4, 64, 2)), Feasibility::Unsure);
        // Half the processes at twice the batch is not vouched for, nor is a
        // neighbour of the out-of-memory point.
        assert_eq!(evidence.feasibility(config(3, 64, 1)), Feasibility::Unsure);
        assert_eq!(evidence.feasibility(config(3, 32, 3)), Feasibility::Unsure);
        let empty = MemoryEvidence::new(GpuModel::A100_80GB, vec![], vec![]);
        assert_eq!(empty.feasibility(config(7, 1, 1)), Feasibility::Unsure);
    }
}
