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

use super::interface::Feasibility;

/// What the measured points say about one model's memory.
pub(crate) struct MemoryEvidence {
    gpu_model: GpuModel,
    fits: Vec<SegmentConfig>,
    out_of_memory: Vec<SegmentConfig>,
}

/// A best guess of memory use, `p · (c + a · b)` GB: not safe enough to
/// plan on (see the module docs), but a guide to which configurations are
/// worth measuring.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct MemoryGuess {
    /// GB per process.
    per_process_gb: f64,
    /// GB per request of a batch.
    per_request_gb: f64,
}

/// Per-process memories the guess tries, GB (and none).
const GUESS_STEPS: usize = 40;

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

    /// The linear memory use that misclassifies the fewest measured
    /// configurations, with the widest margin among those: tried on a
    /// logarithmic grid of per-process (0.01–100 GB) and per-request
    /// (0.0001–10 GB) memories, and zero.
    pub fn guess(&self) -> MemoryGuess {
        let steps = |low: f64, high: f64| {
            std::iter::once(0.0)
                .chain((0..GUESS_STEPS).map(move |i| low * (high / low).powf(i as f64 / (GUESS_STEPS - 1) as f64)))
        };
        let mut best: Option<((usize, f64), MemoryGuess)> = None;
        for per_process_gb in steps(0.01, 100.0) {
            for per_request_gb in steps(1e-4, 10.0) {
                let guess = MemoryGuess { per_process_gb, per_request_gb };
                let mut errors = 0;
                let mut margin = f64::INFINITY;
                for (&config, fits) in
                    self.fits.iter().map(|c| (c, true)).chain(self.out_of_memory.iter().map(|c| (c, false)))
                {
                    let share = guess.share(self.gpu_model, config);
                    let slack = if fits { 1.0 - share } else { share - 1.0 };
                    if slack < 0.0 {
                        errors += 1;
                    }
                    margin = margin.min(slack);
                }
                let score = (errors, -margin);
                if best.is_none_or(|(b, _)| score.0 < b.0 || (score.0 == b.0 && score.1 < b.1)) {
                    best = Some((score, guess));
                }
            }
        }
        best.map_or(MemoryGuess { per_process_gb: 0.0, per_request_gb: 0.0 }, |(_, guess)| guess)
    }

    /// Whether `a` needs at least as much of its instance's memory as `b`
    /// of its own.
    pub fn needs_at_least(&self, a: SegmentConfig, b: SegmentConfig) -> bool {
        let memory = |c: SegmentConfig| {
            self.gpu_model.spec().profile_for_size(c.size_gpcs).map_or(0, |profile| profile.memory_gb)
        };
        let smaller_or_same = a.size_gpcs == b.size_gpcs || memory(a) < memory(b);
        smaller_or_same && a.batch >= b.batch && a.procs >= b.procs
    }
}

impl MemoryGuess {
    /// The share of its instance's memory `config` is guessed to need.
    fn share(&self, gpu_model: GpuModel, config: SegmentConfig) -> f64 {
        let memory = gpu_model.spec().profile_for_size(config.size_gpcs).map_or(0, |profile| profile.memory_gb);
        let procs = f64::from(config.procs);
        procs * (self.per_process_gb + self.per_request_gb * f64::from(config.batch)) / f64::from(memory.max(1))
    }

    /// Whether `config` is guessed to fit.
    pub fn fits(&self, gpu_model: GpuModel, config: SegmentConfig) -> bool {
        self.share(gpu_model, config) <= 1.0
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

    #[test]
    fn the_memory_guess_separates_what_was_measured() {
        // 1g (10 GB): 2 processes of batch 16 fit, 3 do not; batch 64 fits alone, 128 does not.
        let evidence = MemoryEvidence::new(
            GpuModel::A100_80GB,
            vec![config(1, 16, 2), config(1, 64, 1)],
            vec![config(1, 16, 3), config(1, 128, 1)],
        );
        let guess = evidence.guess();
        for (c, fits) in
            [(config(1, 16, 2), true), (config(1, 64, 1), true), (config(1, 16, 3), false), (config(1, 128, 1), false)]
        {
            assert_eq!(guess.fits(GpuModel::A100_80GB, c), fits, "{c}");
        }
        assert!(guess.fits(GpuModel::A100_80GB, config(7, 64, 4)));
        assert!(!guess.fits(GpuModel::A100_80GB, config(7, 256, 5)));
    }
}
