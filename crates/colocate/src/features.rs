//! Features of a colocation group and of one member in it.
//!
//! Each workload contributes ten metrics: the six kernel metrics, its
//! exclusive throughput, SM and memory utilisation, and memory footprint.
//! KACE's group features sum each metric over the group, except the two
//! utilisation percentages, which are averaged; they work for any K.

use tessera_core::{Colocation, WorkloadMetrics};

/// Metrics per workload.
pub const METRICS: usize = 10;

/// Names of the ten per-workload metrics, in feature order.
pub const METRIC_NAMES: [&str; METRICS] = [
    "threads",
    "SM throughput %",
    "DRAM throughput %",
    "memory throughput %",
    "registers",
    "static shared memory",
    "exclusive throughput",
    "SM utilisation %",
    "memory utilisation %",
    "memory footprint GB",
];

/// Indices of the metrics that are averaged rather than summed.
const AVERAGED: [usize; 2] = [7, 8];

/// The ten metrics of one workload, in [`METRIC_NAMES`] order.
pub fn metrics(workload: &WorkloadMetrics) -> [f64; METRICS] {
    let k = workload.kernel;
    [
        k[0],
        k[1],
        k[2],
        k[3],
        k[4],
        k[5],
        workload.exclusive_rps,
        workload.sm_util_pct,
        workload.mem_util_pct,
        workload.memory_gb,
    ]
}

/// Aggregates workloads the KACE way: sums, means for utilisation.
fn aggregate<'a>(workloads: impl Iterator<Item = &'a WorkloadMetrics>) -> [f64; METRICS] {
    let mut total = [0.0; METRICS];
    let mut count = 0.0;
    for workload in workloads {
        for (sum, value) in total.iter_mut().zip(metrics(workload)) {
            *sum += value;
        }
        count += 1.0;
    }
    if count > 0.0 {
        for index in AVERAGED {
            total[index] /= count;
        }
    }
    total
}

/// KACE's group features: each metric summed over the members, the two
/// utilisation percentages averaged.
pub fn group_features(group: &Colocation) -> [f64; METRICS] {
    aggregate(group.members.iter().map(|m| &m.metrics))
}

/// Number of [`member_features`].
pub const MEMBER_FEATURES: usize = 2 * METRICS + 1;

/// Features of member `index` for the slowdown model: its own metrics, the
/// aggregate of its partners (KACE-style), and the number of partners.
pub fn member_features(group: &Colocation, index: usize) -> [f64; MEMBER_FEATURES] {
    let own = metrics(&group.members[index].metrics);
    let partners = aggregate(group.members.iter().enumerate().filter(|(i, _)| *i != index).map(|(_, m)| &m.metrics));
    let mut features = [0.0; MEMBER_FEATURES];
    features[..METRICS].copy_from_slice(&own);
    features[METRICS..2 * METRICS].copy_from_slice(&partners);
    features[2 * METRICS] = (group.members.len() - 1) as f64;
    features
}

/// Names of [`member_features`], for explanations.
pub fn member_feature_names() -> Vec<String> {
    let own = METRIC_NAMES.iter().map(|n| format!("own {n}"));
    let partners = METRIC_NAMES.iter().map(|n| format!("partners' {n}"));
    own.chain(partners).chain(std::iter::once("partners".to_string())).collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use tessera_core::GroupMember;

    pub(crate) fn workload(name: &str, exclusive_rps: f64, sm: f64, mem: f64, memory_gb: f64) -> WorkloadMetrics {
        WorkloadMetrics {
            workload: name.to_string(),
            kernel: [1000.0, sm, 10.0, 20.0, 5000.0, 100.0],
            exclusive_rps,
            sm_util_pct: sm,
            mem_util_pct: mem,
            memory_gb,
        }
    }

    pub(crate) fn pair(a: WorkloadMetrics, a_rps: f64, b: WorkloadMetrics, b_rps: f64) -> Colocation {
        Colocation {
            members: vec![
                GroupMember { metrics: a, colocated_rps: a_rps },
                GroupMember { metrics: b, colocated_rps: b_rps },
            ],
        }
    }

    #[test]
    fn group_features_sum_and_average() {
        let group = pair(workload("a", 100.0, 40.0, 10.0, 2.0), 50.0, workload("b", 60.0, 80.0, 30.0, 3.0), 30.0);
        let f = group_features(&group);
        assert_eq!(f[0], 2000.0);
        assert_eq!(f[6], 160.0, "exclusive throughput is summed");
        assert_eq!(f[7], 60.0, "SM utilisation is averaged");
        assert_eq!(f[8], 20.0, "memory utilisation is averaged");
        assert_eq!(f[9], 5.0, "memory footprint is summed");
    }

    #[test]
    fn member_features_see_own_and_partner_metrics() {
        let group = pair(workload("a", 100.0, 40.0, 10.0, 2.0), 50.0, workload("b", 60.0, 80.0, 30.0, 3.0), 30.0);
        let f = member_features(&group, 1);
        assert_eq!(f.len(), member_feature_names().len());
        assert_eq!((f[6], f[16], f[20]), (60.0, 100.0, 1.0));
    }
}
