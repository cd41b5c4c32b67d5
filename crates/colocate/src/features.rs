//! Features of a colocation group (KACE's) and of a member in its group
//! (the slowdown model's).
//!
//! Each workload contributes ten metrics: the six kernel metrics, its
//! exclusive throughput, SM and memory utilisation, and memory footprint.
//! KACE's group features sum each metric over the group, except the two
//! utilisation percentages, which are averaged; they work for any K. The
//! slowdown model sees one member at a time beside its partners, through
//! one of three [`FeatureSet`]s: its own metrics, its partners' summed and
//! largest metrics, the group's summed demand and its own share of it, and
//! the group's size K; none depends on the order of the members, and for a
//! pair they are the member's and its partner's metrics.

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

/// What a member's partners in a group demand together: each metric summed
/// and its largest value over the partners, and how many there are. It does
/// not depend on the partners' order; for one partner, the sums and maxima
/// are that partner's metrics.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Partners {
    /// Each metric summed over the partners.
    sum: [f64; METRICS],
    /// Each metric's largest value over the partners.
    max: [f64; METRICS],
    /// How many partners.
    count: usize,
}

impl Partners {
    /// The partners of member `index` of `group`: every other member.
    pub fn of_member(group: &Colocation, index: usize) -> Self {
        Partners::of(group.members.iter().enumerate().filter(|&(i, _)| i != index).map(|(_, m)| &m.metrics))
    }

    /// The aggregate of `partners`.
    pub fn of<'a>(partners: impl Iterator<Item = &'a WorkloadMetrics>) -> Self {
        let mut aggregate = Partners { sum: [0.0; METRICS], max: [f64::NEG_INFINITY; METRICS], count: 0 };
        for partner in partners {
            for ((sum, max), value) in aggregate.sum.iter_mut().zip(&mut aggregate.max).zip(metrics(partner)) {
                *sum += value;
                *max = max.max(value);
            }
            aggregate.count += 1;
        }
        if aggregate.count == 0 {
            aggregate.max = [0.0; METRICS];
        }
        aggregate
    }

    /// Workloads in the group: the partners and the member.
    pub fn group_size(&self) -> usize {
        self.count + 1
    }

    /// The partners' mean of metric `m`.
    fn mean(&self, m: usize) -> f64 {
        self.sum[m] / self.count.max(1) as f64
    }
}

/// Number of features derived from a member and its partners together.
const DERIVED: usize = 7;

/// Names of the derived features.
const DERIVED_NAMES: [&str; DERIVED] = [
    "group's summed SM utilisation %",
    "group's summed memory throughput %",
    "own share of the group's SM utilisation",
    "own share of the group's SM throughput",
    "own share of the group's DRAM throughput",
    "log threads, own over the partners' mean",
    "log registers, own over the partners' mean",
];

/// How a member's slowdown may move as each derived feature grows: more
/// demand in total never slows the member less, a larger own share of a
/// contended resource never slows it more.
const DERIVED_MONOTONE: [Monotone; DERIVED] = {
    use Monotone::{Decreasing, Free, Increasing};
    [Increasing, Increasing, Decreasing, Decreasing, Decreasing, Free, Free]
};

/// Sums, shares and ratios of `own` and its `partners`.
fn derived(own: &[f64; METRICS], partners: &Partners) -> [f64; DERIVED] {
    let share = |m: usize| {
        let total = own[m] + partners.sum[m];
        if total > 0.0 {
            own[m] / total
        } else {
            1.0 / partners.group_size() as f64
        }
    };
    let log_ratio = |m: usize| (own[m].max(1.0) / partners.mean(m).max(1.0)).ln();
    [own[7] + partners.sum[7], own[3] + partners.sum[3], share(7), share(1), share(2), log_ratio(0), log_ratio(4)]
}

/// How a member's slowdown may move as each of its partners' summed (or
/// largest) metrics grows: more SM, DRAM or memory throughput and more SM
/// or memory utilisation never slow the member less; the rest are free.
const PARTNER_MONOTONE: [Monotone; METRICS] = {
    use Monotone::{Free, Increasing};
    [Free, Increasing, Increasing, Increasing, Free, Free, Free, Increasing, Increasing, Free]
};

/// The most features any [`FeatureSet`] has.
pub const MAX_FEATURES: usize = 3 * METRICS + DERIVED + 1;

/// Which features the slowdown model sees for a member of a group: its own
/// metrics, its partners' summed metrics, features of the two together,
/// the partners' largest metrics, and the group's size. Every feature is
/// the same whatever the order of the partners; for a pair, the partners'
/// sums and maxima are the partner's own metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FeatureSet {
    /// The ten metrics of the member, and the sums and maxima of its
    /// partners', as measured (magnitudes included).
    Raw,
    /// The percentages of the device (SM, DRAM and memory throughput, SM
    /// and memory utilisation) of the member and its partners, and the
    /// group's sums, the member's shares and ratios: no magnitude (a
    /// throughput in samples/s or a thread count says as much about batch
    /// and model size as about contention, and moves far outside the
    /// training range on a new model).
    Physical,
    /// Both of the above.
    Both,
}

impl FeatureSet {
    /// Every feature set.
    pub const ALL: [FeatureSet; 3] = [FeatureSet::Raw, FeatureSet::Physical, FeatureSet::Both];

    /// The metrics (indices) the set sees of the member and its partners.
    fn chosen(self) -> &'static [usize] {
        const ALL_METRICS: [usize; METRICS] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9];
        match self {
            FeatureSet::Raw | FeatureSet::Both => &ALL_METRICS,
            FeatureSet::Physical => &PERCENTAGES,
        }
    }

    /// Number of features.
    pub fn width(self) -> usize {
        let derived = if self == FeatureSet::Raw { 0 } else { DERIVED };
        3 * self.chosen().len() + derived + 1
    }

    /// Writes the features of `own` beside `partners` into the front of
    /// `out` and returns them: own metrics, the partners' sums, the derived
    /// features (not for [`FeatureSet::Raw`]), the partners' maxima, the
    /// group's size.
    pub(crate) fn write<'a>(
        self,
        own: &WorkloadMetrics,
        partners: &Partners,
        out: &'a mut [f64; MAX_FEATURES],
    ) -> &'a [f64] {
        let own = metrics(own);
        let chosen = self.chosen();
        let n = chosen.len();
        for (i, &m) in chosen.iter().enumerate() {
            (out[i], out[n + i]) = (own[m], partners.sum[m]);
        }
        let mut at = 2 * n;
        if self != FeatureSet::Raw {
            out[at..at + DERIVED].copy_from_slice(&derived(&own, partners));
            at += DERIVED;
        }
        for (i, &m) in chosen.iter().enumerate() {
            out[at + i] = partners.max[m];
        }
        out[at + n] = partners.group_size() as f64;
        &out[..self.width()]
    }

    /// The features' names, in order.
    pub fn names(self) -> Vec<String> {
        let chosen = self.chosen();
        let own = chosen.iter().map(|&m| format!("own {}", METRIC_NAMES[m]));
        let sum = chosen.iter().map(|&m| format!("partners' summed {}", METRIC_NAMES[m]));
        let derived = DERIVED_NAMES.iter().filter(|_| self != FeatureSet::Raw).map(|n| n.to_string());
        let max = chosen.iter().map(|&m| format!("partners' largest {}", METRIC_NAMES[m]));
        own.chain(sum).chain(derived).chain(max).chain(["workloads in the group".to_string()]).collect()
    }

    /// How the slowdown may move as each feature grows (more workloads in
    /// the group never slow a member less).
    pub fn monotone(self) -> Vec<Monotone> {
        let chosen = self.chosen();
        let own = chosen.iter().map(|_| Monotone::Free);
        let partners = chosen.iter().map(|&m| PARTNER_MONOTONE[m]);
        let derived = DERIVED_MONOTONE.iter().copied().filter(|_| self != FeatureSet::Raw);
        own.chain(partners.clone()).chain(derived).chain(partners).chain([Monotone::Increasing]).collect()
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
        let ab = pair(a.clone(), 50.0, b.clone(), 30.0);
        let mut buffer = [0.0; MAX_FEATURES];
        for set in FeatureSet::ALL {
            let f = set.write(&a, &Partners::of_member(&ab, 0), &mut buffer).to_vec();
            assert_eq!((f.len(), set.names().len(), set.monotone().len()), (set.width(), set.width(), set.width()));
            assert!(f.iter().all(|v| v.is_finite()), "{set:?}: {f:?}");
            assert_eq!(f[set.width() - 1], 2.0, "{set:?}: the group's size comes last");
        }
        let partner = Partners::of_member(&ab, 0);
        let raw = FeatureSet::Raw.write(&a, &partner, &mut buffer).to_vec();
        assert_eq!((raw[6], raw[16], raw[26]), (100.0, 60.0, 60.0), "own, the partners' sum and maximum");
        let physical = FeatureSet::Physical.write(&a, &partner, &mut buffer);
        assert_eq!((physical[3], physical[8]), (40.0, 80.0), "own, then the partner's SM utilisation");
        assert_eq!(physical[10], 120.0, "summed SM utilisation");
        assert!((physical[12] - 1.0 / 3.0).abs() < 1e-12, "own share of SM utilisation");
        let both = FeatureSet::Both.write(&a, &partner, &mut buffer).to_vec();
        assert_eq!(both[..20], raw[..20]);
        // The partners' SM throughput may only slow the member more.
        let names = FeatureSet::Both.names();
        let monotone = FeatureSet::Both.monotone();
        let at = |name: &str| monotone[names.iter().position(|n| n == name).unwrap()];
        assert_eq!(at("partners' summed SM throughput %"), Monotone::Increasing);
        assert_eq!(at("partners' largest DRAM throughput %"), Monotone::Increasing);
        assert_eq!(at("own share of the group's SM utilisation"), Monotone::Decreasing);
        assert_eq!(at("own exclusive throughput"), Monotone::Free);
        assert_eq!(at("workloads in the group"), Monotone::Increasing);
    }

    #[test]
    fn member_features_do_not_depend_on_the_partners_order() {
        let w = |name: &str, sm: f64| workload(name, 50.0 + sm, sm, sm / 2.0, 1.0);
        let (a, b, c, d) = (w("a", 40.0), w("b", 80.0), w("c", 20.0), w("d", 60.0));
        let group = |members: [&WorkloadMetrics; 4]| Colocation {
            members: members.iter().map(|m| GroupMember { metrics: (*m).clone(), colocated_rps: 1.0 }).collect(),
        };
        let (one, other) = (group([&a, &b, &c, &d]), group([&d, &c, &a, &b]));
        let (mut x, mut y) = ([0.0; MAX_FEATURES], [0.0; MAX_FEATURES]);
        for set in FeatureSet::ALL {
            let f = set.write(&a, &Partners::of_member(&one, 0), &mut x).to_vec();
            assert_eq!(f, set.write(&a, &Partners::of_member(&other, 2), &mut y));
            let names = set.names();
            let value = |name: &str| f[names.iter().position(|n| n == name).unwrap()];
            assert_eq!(value("workloads in the group"), 4.0);
            assert_eq!(value("partners' summed SM utilisation %"), 160.0);
            assert_eq!(value("partners' largest SM utilisation %"), 80.0);
            if set != FeatureSet::Raw {
                assert_eq!(value("own share of the group's SM utilisation"), 0.2);
                assert_eq!(value("group's summed SM utilisation %"), 200.0);
            }
        }
    }
}
