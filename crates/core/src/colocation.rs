//! Workloads sharing a GPU under MPS: per-workload metrics and measured
//! colocations of K ≥ 2 workloads.

/// Names of the six Nsight Compute kernel metrics, in KACE's order.
pub const KERNEL_METRIC_NAMES: [&str; 6] =
    ["Threads", "Compute (SM) Throughput", "DRAM Throughput", "Memory Throughput", "Registers", "Static Shared Memory"];

/// Offline metrics of one workload running alone.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct WorkloadMetrics {
    /// Workload name, e.g. `bert-base-cased_batch8-inf`.
    pub workload: String,
    /// The kernel metrics, kernel-duration-weighted, in
    /// [`KERNEL_METRIC_NAMES`] order: threads (grid × block), SM throughput
    /// %, DRAM throughput %, memory throughput %, registers (threads ×
    /// registers per thread), static shared memory (grid × bytes per block).
    pub kernel: [f64; 6],
    /// Throughput alone, samples/s.
    pub exclusive_rps: f64,
    /// Mean SM utilisation alone, %.
    pub sm_util_pct: f64,
    /// Mean memory utilisation alone, %.
    pub mem_util_pct: f64,
    /// Device memory footprint, GB.
    pub memory_gb: f64,
}

impl WorkloadMetrics {
    /// The model family and task: `bert-base-cased_batch8-inf` →
    /// (`bert-base-cased`, `inf`). Names without `_batch` are their own
    /// family with an empty task.
    pub fn family(&self) -> (&str, &str) {
        match self.workload.rsplit_once("_batch") {
            Some((model, rest)) => (model, rest.split_once('-').map_or("", |(_, task)| task)),
            None => (self.workload.as_str(), ""),
        }
    }
}

/// One workload of a colocation and its measured throughput there.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GroupMember {
    /// Its metrics alone.
    pub metrics: WorkloadMetrics,
    /// Its throughput while colocated, samples/s.
    pub colocated_rps: f64,
}

impl GroupMember {
    /// Colocated / exclusive throughput.
    pub fn retained_fraction(&self) -> f64 {
        self.colocated_rps / self.metrics.exclusive_rps
    }
}

/// A measured colocation of K ≥ 2 workloads.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Colocation {
    /// The workloads, in the order measured.
    pub members: Vec<GroupMember>,
}

impl Colocation {
    /// Summed colocated throughput, samples/s.
    pub fn total_rps(&self) -> f64 {
        self.members.iter().map(|m| m.colocated_rps).sum()
    }

    /// `true` when `workload` is one of the members.
    pub fn contains(&self, workload: &str) -> bool {
        self.members.iter().any(|m| m.metrics.workload == workload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metrics(name: &str) -> WorkloadMetrics {
        WorkloadMetrics {
            workload: name.to_string(),
            kernel: [0.0; 6],
            exclusive_rps: 100.0,
            sm_util_pct: 50.0,
            mem_util_pct: 20.0,
            memory_gb: 2.0,
        }
    }

    #[test]
    fn families_come_from_names() {
        assert_eq!(metrics("bert-base-cased_batch8-inf").family(), ("bert-base-cased", "inf"));
        assert_eq!(metrics("vit_h_14_batch16-train").family(), ("vit_h_14", "train"));
        assert_eq!(metrics("custom").family(), ("custom", ""));
    }

    #[test]
    fn totals_and_fractions() {
        let group = Colocation {
            members: vec![
                GroupMember { metrics: metrics("a_batch1-inf"), colocated_rps: 60.0 },
                GroupMember { metrics: metrics("b_batch1-inf"), colocated_rps: 30.0 },
            ],
        };
        assert_eq!(group.total_rps(), 90.0);
        assert!(group.contains("b_batch1-inf") && !group.contains("c"));
        assert_eq!(group.members[0].retained_fraction(), 0.6);
    }
}
