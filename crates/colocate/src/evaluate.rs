//! KACE's evaluation: for each target workload, a policy picks one of the
//! measured groups that contain it; the score is that group's summed
//! throughput over the best such group's. Reported per seed (split) and as
//! the mean over seeds.
//!
//! * **P3**: train on a split's training rows, choose among its test rows,
//!   for every workload that appears in the test rows.
//! * **LOWO** (leave one workload family out): for each workload W, train on
//!   every row with no workload of W's model family and task, and choose
//!   among all rows containing W.
//!
//! A policy chooses the candidate with the highest score, the first in row
//! order on ties; `random` is the expected value of a uniform choice.

use tessera_core::Colocation;

use crate::gbm::GbmParams;
use crate::models::{KaceModel, SlowdownModel, ThroughputModel};

/// A way to choose partners.
#[derive(Debug, Clone, PartialEq)]
pub enum Policy {
    /// The slowdown model with these parameters.
    Slowdown(GbmParams),
    /// KACE's least squares on group features.
    Kace,
    /// A uniform choice (expected value).
    Random,
    /// The lowest summed memory footprint.
    LowestMemory,
    /// The lowest mean memory utilisation.
    LowestMemoryUtilisation,
    /// The highest mean SM utilisation.
    HighestSmUtilisation,
    /// The highest summed SM throughput (kernel metric).
    HighestSmThroughput,
}

impl Policy {
    /// Every policy, the default model first.
    pub fn all(slowdown: GbmParams) -> Vec<Policy> {
        vec![
            Policy::Slowdown(slowdown),
            Policy::Kace,
            Policy::Random,
            Policy::LowestMemory,
            Policy::LowestMemoryUtilisation,
            Policy::HighestSmUtilisation,
            Policy::HighestSmThroughput,
        ]
    }

    /// The policy's name in tables.
    pub fn name(&self) -> &'static str {
        match self {
            Policy::Slowdown(_) => "slowdown",
            Policy::Kace => "kace",
            Policy::Random => "random (expected)",
            Policy::LowestMemory => "lowest memory footprint",
            Policy::LowestMemoryUtilisation => "lowest memory utilisation",
            Policy::HighestSmUtilisation => "highest SM utilisation",
            Policy::HighestSmThroughput => "highest summed SM throughput",
        }
    }

    /// A scorer of candidate groups after training on `train` (higher is
    /// chosen); `None` for the random policy.
    fn scorer(&self, train: &[Colocation]) -> Option<Scorer> {
        let mean = |g: &Colocation, f: fn(&tessera_core::WorkloadMetrics) -> f64| {
            g.members.iter().map(|m| f(&m.metrics)).sum::<f64>() / g.members.len() as f64
        };
        let sum = |g: &Colocation, f: fn(&tessera_core::WorkloadMetrics) -> f64| {
            g.members.iter().map(|m| f(&m.metrics)).sum::<f64>()
        };
        Some(match self {
            // Nothing to learn from (possible in LOWO on small files): the
            // first candidate is chosen.
            Policy::Slowdown(_) | Policy::Kace if train.is_empty() => Box::new(|_| 0.0),
            Policy::Slowdown(params) => {
                let model = SlowdownModel::fit(train, params);
                Box::new(move |g| model.predict_total(g))
            }
            Policy::Kace => {
                let model = KaceModel::fit(train);
                Box::new(move |g| model.predict_total(g))
            }
            Policy::Random => return None,
            Policy::LowestMemory => Box::new(move |g| -sum(g, |m| m.memory_gb)),
            Policy::LowestMemoryUtilisation => Box::new(move |g| -mean(g, |m| m.mem_util_pct)),
            Policy::HighestSmUtilisation => Box::new(move |g| mean(g, |m| m.sm_util_pct)),
            Policy::HighestSmThroughput => Box::new(move |g| sum(g, |m| m.kernel[1])),
        })
    }
}

/// Scores a candidate group; the highest is chosen.
type Scorer = Box<dyn Fn(&Colocation) -> f64>;

/// A policy's scores.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PolicyScores {
    /// The policy's name.
    pub name: String,
    /// Score per seed (one entry for LOWO).
    pub per_seed: Vec<f64>,
    /// Mean over seeds.
    pub mean: f64,
}

/// One train/test split.
#[derive(Debug, Clone, PartialEq)]
pub struct Split {
    /// The split's name, e.g. its seed.
    pub name: String,
    /// Rows to train on.
    pub train: Vec<Colocation>,
    /// Rows to choose among.
    pub test: Vec<Colocation>,
}

/// Protocol P3 over `splits`.
pub fn p3(splits: &[Split], policies: &[Policy]) -> Vec<PolicyScores> {
    policies
        .iter()
        .map(|policy| {
            let per_seed = splits
                .iter()
                .map(|split| {
                    let scorer = policy.scorer(&split.train);
                    let targets = workloads(&split.test);
                    mean_score(targets.iter().map(|t| choice_score(&split.test, t, scorer.as_deref())))
                })
                .collect();
            scores(policy.name(), per_seed)
        })
        .collect()
}

/// Protocol LOWO over every row of `rows`.
pub fn lowo(rows: &[Colocation], policies: &[Policy]) -> Vec<PolicyScores> {
    let targets = workloads(rows);
    policies
        .iter()
        .map(|policy| {
            let per_target = targets.iter().map(|target| {
                let family = family_of(rows, target);
                let train: Vec<Colocation> =
                    rows.iter().filter(|g| g.members.iter().all(|m| m.metrics.family() != family)).cloned().collect();
                let scorer = policy.scorer(&train);
                choice_score(rows, target, scorer.as_deref())
            });
            scores(policy.name(), vec![mean_score(per_target)])
        })
        .collect()
}

fn scores(name: &str, per_seed: Vec<f64>) -> PolicyScores {
    let mean = mean_score(per_seed.iter().copied());
    PolicyScores { name: name.to_string(), per_seed, mean }
}

fn mean_score(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, count) = values.fold((0.0, 0usize), |(s, c), v| (s + v, c + 1));
    if count == 0 {
        0.0
    } else {
        sum / count as f64
    }
}

/// Every workload appearing in `rows`, sorted.
pub fn workloads(rows: &[Colocation]) -> Vec<String> {
    let mut names: Vec<String> =
        rows.iter().flat_map(|g| g.members.iter().map(|m| m.metrics.workload.clone())).collect();
    names.sort();
    names.dedup();
    names
}

fn family_of<'a>(rows: &'a [Colocation], workload: &str) -> (&'a str, &'a str) {
    rows.iter()
        .flat_map(|g| &g.members)
        .find(|m| m.metrics.workload == workload)
        .map(|m| m.metrics.family())
        .expect("targets come from the rows")
}

/// The score of choosing for `target` among `rows` with `scorer` (the
/// expected score of a uniform choice when `None`).
pub fn choice_score(rows: &[Colocation], target: &str, scorer: Option<&dyn Fn(&Colocation) -> f64>) -> f64 {
    let candidates: Vec<&Colocation> = rows.iter().filter(|g| g.contains(target)).collect();
    let best = candidates.iter().map(|g| g.total_rps()).fold(f64::MIN, f64::max);
    match scorer {
        None => candidates.iter().map(|g| g.total_rps() / best).sum::<f64>() / candidates.len() as f64,
        Some(score) => {
            let mut chosen = candidates[0];
            let mut chosen_score = score(chosen);
            for &candidate in &candidates[1..] {
                let value = score(candidate);
                if value > chosen_score {
                    (chosen, chosen_score) = (candidate, value);
                }
            }
            chosen.total_rps() / best
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::tests::{pair, workload};

    #[test]
    fn choice_takes_the_best_score_and_the_first_on_ties() {
        let a = workload("a_batch1-inf", 100.0, 50.0, 10.0, 1.0);
        let b = workload("b_batch1-inf", 100.0, 50.0, 10.0, 5.0);
        let c = workload("c_batch1-inf", 100.0, 50.0, 10.0, 5.0);
        let rows = vec![pair(a.clone(), 50.0, b, 30.0), pair(a.clone(), 60.0, c, 40.0)];
        // Summed memory 6 vs 6: a tie, the first row wins (80 of 100).
        let low_memory = Policy::LowestMemory.scorer(&rows).unwrap();
        assert!((choice_score(&rows, "a_batch1-inf", Some(&*low_memory)) - 0.8).abs() < 1e-12);
        assert!((choice_score(&rows, "a_batch1-inf", None) - 0.9).abs() < 1e-12, "random: (0.8 + 1) / 2");
        let oracle: &dyn Fn(&Colocation) -> f64 = &|g| g.total_rps();
        assert_eq!(choice_score(&rows, "a_batch1-inf", Some(oracle)), 1.0);
    }

    #[test]
    fn protocols_work_on_three_way_groups() {
        use tessera_core::GroupMember;
        let names = ["a_batch1-inf", "b_batch1-inf", "c_batch1-train", "d_batch2-inf", "e_batch1-train"];
        let metrics = |i: usize| {
            workload(names[i], 100.0 + 10.0 * i as f64, 30.0 + 12.0 * i as f64, 10.0 + 5.0 * i as f64, 1.0 + i as f64)
        };
        // Groups lose throughput with the members' summed SM utilisation.
        let group = |ids: [usize; 3]| {
            let load: f64 = ids.iter().map(|&i| metrics(i).sm_util_pct).sum();
            Colocation {
                members: ids
                    .iter()
                    .map(|&i| GroupMember {
                        metrics: metrics(i),
                        colocated_rps: metrics(i).exclusive_rps * 60.0 / load,
                    })
                    .collect(),
            }
        };
        let rows: Vec<Colocation> =
            [[0, 1, 2], [0, 1, 3], [0, 2, 4], [1, 3, 4], [0, 3, 4], [1, 2, 3], [2, 3, 4], [0, 1, 4]]
                .map(group)
                .to_vec();
        let policies = Policy::all(crate::DEFAULT_SLOWDOWN);
        let split = Split { name: "s".to_string(), train: rows[..5].to_vec(), test: rows.clone() };
        for results in [p3(&[split], &policies), lowo(&rows, &policies)] {
            assert_eq!(results.len(), policies.len());
            assert!(results.iter().all(|r| r.mean > 0.0 && r.mean <= 1.0 + 1e-12), "{results:?}");
        }
    }

    #[test]
    fn lowo_trains_without_the_targets_family() {
        let w = |name: &str, mem| workload(name, 100.0, 50.0, mem, 1.0);
        let rows = vec![
            pair(w("x_batch1-inf", 10.0), 50.0, w("y_batch1-inf", 20.0), 40.0),
            pair(w("x_batch2-inf", 10.0), 45.0, w("z_batch1-inf", 30.0), 20.0),
            pair(w("y_batch1-inf", 20.0), 35.0, w("z_batch1-inf", 30.0), 25.0),
        ];
        let results = lowo(&rows, &[Policy::LowestMemoryUtilisation]);
        assert_eq!(results[0].per_seed.len(), 1);
        assert!(results[0].mean > 0.0 && results[0].mean <= 1.0);
    }
}
