//! Features of a colocation group (KACE's) and of a workload beside one
//! partner (the slowdown model's).
//!
//! Each workload contributes ten metrics: the six kernel metrics, its
//! exclusive throughput, SM and memory utilisation, and memory footprint.
//! KACE's group features sum each metric over the group, except the two
//! utilisation percentages, which are averaged; they work for any K. The
//! slowdown model sees a workload and one partner at a time, through one of
//! three [`FeatureSet`]s, and composes partners itself.

use tessera_core::{Colocation, WorkloadMetrics};

use crate::gbm::Monotone;

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

/// Indices of the metrics that are percentages of the device: SM, DRAM
/// and memory throughput, SM and memory utilisation.
const PERCENTAGES: [usize; 5] = [1, 2, 3, 7, 8];

/// Number of features derived from a workload and its partner together.
const DERIVED: usize = 7;

/// Names of the derived features.
const DERIVED_NAMES: [&str; DERIVED] = [
    "summed SM utilisation %",
    "summed memory throughput %",
    "own share of SM utilisation",
    "own share of SM throughput",
    "own share of DRAM throughput",
    "log threads, own over partner's",
    "log registers, own over partner's",
];

/// How a member's slowdown may move as each derived feature grows: more
/// demand in total never slows the member less, a larger own share of a
/// contended resource never slows it more.
const DERIVED_MONOTONE: [Monotone; DERIVED] = {
    use Monotone::{Decreasing, Free, Increasing};
    [Increasing, Increasing, Decreasing, Decreasing, Decreasing, Free, Free]
};

/// Sums, shares and ratios of `own` and its `partner`.
fn derived(own: &WorkloadMetrics, partner: &WorkloadMetrics) -> [f64; DERIVED] {
    let share = |a: f64, b: f64| if a + b > 0.0 { a / (a + b) } else { 0.5 };
    let log_ratio = |a: f64, b: f64| (a.max(1.0) / b.max(1.0)).ln();
    let (o, p) = (&own.kernel, &partner.kernel);
    [
        own.sm_util_pct + partner.sm_util_pct,
        o[3] + p[3],
        share(own.sm_util_pct, partner.sm_util_pct),
        share(o[1], p[1]),
        share(o[2], p[2]),
        log_ratio(o[0], p[0]),
        log_ratio(o[4], p[4]),
    ]
}

/// How a member's slowdown may move as each of a partner's ten metrics
/// grows: more SM, DRAM or memory throughput and more SM or memory
/// utilisation never slow the member less; the rest are free.
const PARTNER_MONOTONE: [Monotone; METRICS] = {
    use Monotone::{Free, Increasing};
    [Free, Increasing, Increasing, Increasing, Free, Free, Free, Increasing, Increasing, Free]
};

/// The most features any [`FeatureSet`] has.
pub const MAX_FEATURES: usize = 2 * METRICS + DERIVED;

/// Which features the slowdown model sees for a workload beside a partner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FeatureSet {
    /// The ten metrics of the workload and the ten of its partner, as
    /// measured (magnitudes included).
    Raw,
    /// The percentages of the device (SM, DRAM and memory throughput, SM
    /// and memory utilisation) of both, and their sums, shares and ratios:
    /// no magnitude (a throughput in samples/s or a thread count says as
    /// much about batch and model size as about contention, and moves far
    /// outside the training range on a new model).
    Physical,
    /// Both of the above.
    Both,
}

impl FeatureSet {
    /// Every feature set.
    pub const ALL: [FeatureSet; 3] = [FeatureSet::Raw, FeatureSet::Physical, FeatureSet::Both];

    /// Number of features.
    pub fn width(self) -> usize {
        match self {
            FeatureSet::Raw => 2 * METRICS,
            FeatureSet::Physical => 2 * PERCENTAGES.len() + DERIVED,
            FeatureSet::Both => 2 * METRICS + DERIVED,
        }
    }

    /// Writes the features of `own` beside `partner` into the front of
    /// `out` and returns them.
    pub fn write<'a>(
        self,
        own: &WorkloadMetrics,
        partner: &WorkloadMetrics,
        out: &'a mut [f64; MAX_FEATURES],
    ) -> &'a [f64] {
        let (own, partner, derived) = (metrics(own), metrics(partner), derived(own, partner));
        let metrics = match self {
            FeatureSet::Raw | FeatureSet::Both => {
                out[..METRICS].copy_from_slice(&own);
                out[METRICS..2 * METRICS].copy_from_slice(&partner);
                2 * METRICS
            }
            FeatureSet::Physical => {
                for (i, &m) in PERCENTAGES.iter().enumerate() {
                    (out[i], out[PERCENTAGES.len() + i]) = (own[m], partner[m]);
                }
                2 * PERCENTAGES.len()
            }
        };
        if self != FeatureSet::Raw {
            out[metrics..metrics + DERIVED].copy_from_slice(&derived);
        }
        &out[..self.width()]
    }

    /// The features' names, in order.
    pub fn names(self) -> Vec<String> {
        let chosen: Vec<usize> = match self {
            FeatureSet::Raw | FeatureSet::Both => (0..METRICS).collect(),
            FeatureSet::Physical => PERCENTAGES.to_vec(),
        };
        let own = chosen.iter().map(|&m| format!("own {}", METRIC_NAMES[m]));
        let partner = chosen.iter().map(|&m| format!("partner's {}", METRIC_NAMES[m]));
        let derived = DERIVED_NAMES.iter().filter(|_| self != FeatureSet::Raw).map(|n| n.to_string());
        own.chain(partner).chain(derived).collect()
    }

    /// How the slowdown may move as each feature grows.
    pub fn monotone(self) -> Vec<Monotone> {
        let chosen: Vec<usize> = match self {
            FeatureSet::Raw | FeatureSet::Both => (0..METRICS).collect(),
            FeatureSet::Physical => PERCENTAGES.to_vec(),
        };
        let own = chosen.iter().map(|_| Monotone::Free);
        let partner = chosen.iter().map(|&m| PARTNER_MONOTONE[m]);
        let derived = DERIVED_MONOTONE.iter().copied().filter(|_| self != FeatureSet::Raw);
        own.chain(partner).chain(derived).collect()
    }
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
    fn feature_sets_see_own_and_partner_metrics() {
        let (a, b) = (workload("a", 100.0, 40.0, 10.0, 2.0), workload("b", 60.0, 80.0, 30.0, 3.0));
        let mut buffer = [0.0; MAX_FEATURES];
        for set in FeatureSet::ALL {
            let f = set.write(&a, &b, &mut buffer).to_vec();
            assert_eq!((f.len(), set.names().len(), set.monotone().len()), (set.width(), set.width(), set.width()));
            assert!(f.iter().all(|v| v.is_finite()), "{set:?}: {f:?}");
        }
        let raw = FeatureSet::Raw.write(&a, &b, &mut buffer);
        assert_eq!((raw[6], raw[16]), (100.0, 60.0), "own, then the partner's exclusive throughput");
        let physical = FeatureSet::Physical.write(&a, &b, &mut buffer);
        assert_eq!((physical[3], physical[8]), (40.0, 80.0), "own, then the partner's SM utilisation");
        assert_eq!(physical[10], 120.0, "summed SM utilisation");
        assert!((physical[12] - 1.0 / 3.0).abs() < 1e-12, "own share of SM utilisation");
        let both = FeatureSet::Both.write(&a, &b, &mut buffer).to_vec();
        assert_eq!(both[..20], FeatureSet::Raw.write(&a, &b, &mut buffer)[..]);
        // The partner's SM throughput may only slow the member more.
        let names = FeatureSet::Both.names();
        let monotone = FeatureSet::Both.monotone();
        let at = |name: &str| monotone[names.iter().position(|n| n == name).unwrap()];
        assert_eq!(at("partner's SM throughput %"), Monotone::Increasing);
        assert_eq!(at("own share of SM utilisation"), Monotone::Decreasing);
        assert_eq!(at("own exclusive throughput"), Monotone::Free);
    }
}
