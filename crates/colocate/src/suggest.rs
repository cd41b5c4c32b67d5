//! Which colocations to measure next, and how much that helps.
//!
//! Measuring a colocation costs minutes of GPU time, so the measurements
//! that matter are those that can change a recommendation. For every
//! workload, the best known lower bound of what its best group gives is
//! the highest measured total of its measured groups and the highest lower
//! interval end of its unmeasured ones. An unmeasured group **could
//! improve** a member's choice by how far its interval's upper end reaches
//! above that bound (relative to it); its gain is the sum over its distinct
//! members. The suggestions are chosen greedily by gain; after each one the
//! bounds of its members are raised to its predicted total (as if it had
//! been measured at the prediction), so the next suggestion goes where
//! uncertainty is still left rather than to the same workload again.
//!
//! [`learning_curve`] measures the value of that on data where every
//! candidate was measured: starting from a few random measurements, it
//! adds measurements either at random or as suggested, retrains the
//! product's model after each step, and scores the recommendation (the
//! measured total where a group was measured, the prediction elsewhere) as
//! a fraction of the best choice for every workload.

use std::collections::{HashMap, HashSet};

use tessera_core::rng::SplitMix64;
use tessera_core::{Colocation, GroupMember, WorkloadMetrics};

use crate::error::ColocateError;
use crate::folds::{choose, workloads};
use crate::groups::MemberSets;
use crate::model_file::TrainedModel;
use crate::recommend::EXHAUSTIVE_MAX_GROUPS;

/// What to suggest.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SuggestQuery {
    /// Workloads per group (at least 2).
    pub group_size: usize,
    /// Measurements to suggest (at least 1).
    pub budget: usize,
    /// GPU memory, GB: groups whose footprints exceed it are not suggested.
    pub gpu_memory_gb: f64,
}

/// A group worth measuring.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Suggestion {
    /// The workloads, in name order.
    pub workloads: Vec<String>,
    /// Predicted summed throughput, samples/s.
    pub predicted_total_rps: f64,
    /// Its interval, samples/s: `[lower, upper]`.
    pub interval_rps: [f64; 2],
    /// How far its upper end reaches above its members' best known lower
    /// bounds, relative to them, summed over its distinct members (when
    /// chosen).
    pub gain: f64,
    /// The members whose choice it could improve.
    pub could_improve: Vec<String>,
}

/// The `query.budget` unmeasured groups of `query.group_size` workloads of
/// `pool` (each workload at most twice, footprints within the GPU's memory)
/// that could most improve the recommendations, given the `measured`
/// colocations (see the module documentation). Fewer when fewer groups are
/// left to measure.
pub fn suggest(
    model: &TrainedModel,
    pool: &[WorkloadMetrics],
    measured: &[Colocation],
    query: &SuggestQuery,
) -> Result<Vec<Suggestion>, ColocateError> {
    if query.group_size < 2 {
        return Err(ColocateError::GroupSize(query.group_size));
    }
    if query.budget == 0 {
        return Err(ColocateError::Budget);
    }
    let known: HashSet<Vec<&str>> = measured.iter().map(names).collect();
    let mut candidates = Vec::new();
    for members in MemberSets::new(pool.len(), query.group_size) {
        let memory_gb: f64 = members.iter().map(|&i| pool[i].memory_gb).sum();
        if memory_gb > query.gpu_memory_gb {
            continue;
        }
        let group = Colocation {
            members: members.iter().map(|&i| GroupMember { metrics: pool[i].clone(), colocated_rps: 0.0 }).collect(),
        };
        if !known.contains(&names(&group)) {
            if candidates.len() as u128 >= EXHAUSTIVE_MAX_GROUPS {
                return Err(ColocateError::TooManyGroups { limit: EXHAUSTIVE_MAX_GROUPS });
            }
            candidates.push(group);
        }
    }
    let measured: Vec<Colocation> = measured.iter().filter(|g| g.members.len() == query.group_size).cloned().collect();
    Ok(suggest_among(model, &candidates, &measured, query.budget))
}

/// The workload names of `group`, sorted.
fn names(group: &Colocation) -> Vec<&str> {
    let mut names: Vec<&str> = group.members.iter().map(|m| m.metrics.workload.as_str()).collect();
    names.sort_unstable();
    names
}

/// The `budget` groups of `candidates` (unmeasured) to measure next, given
/// the `measured` ones (see the module documentation).
pub(crate) fn suggest_among(
    model: &TrainedModel,
    candidates: &[Colocation],
    measured: &[Colocation],
    budget: usize,
) -> Vec<Suggestion> {
    let predictions: Vec<(f64, f64, f64)> = candidates
        .iter()
        .map(|group| {
            let predicted = model.as_model().predict_total(group);
            let (lower, upper) = model.interval(group);
            // Without a calibrated interval, the prediction is all there is.
            (predicted, lower.min(predicted), if upper.is_finite() { upper } else { predicted })
        })
        .collect();
    let mut bound: HashMap<String, f64> = HashMap::new();
    let raise = |bound: &mut HashMap<String, f64>, name: &str, value: f64| {
        let entry = bound.entry(name.to_string()).or_insert(f64::MIN_POSITIVE);
        *entry = entry.max(value);
    };
    for group in measured {
        for member in &group.members {
            raise(&mut bound, member.metrics.workload.as_str(), group.total_rps());
        }
    }
    for (group, &(_, lower, _)) in candidates.iter().zip(&predictions) {
        for member in &group.members {
            raise(&mut bound, member.metrics.workload.as_str(), lower);
        }
    }
    let mut left: Vec<usize> = (0..candidates.len()).collect();
    let mut chosen = Vec::new();
    while chosen.len() < budget && !left.is_empty() {
        let gain = |g: usize| -> (f64, Vec<String>) {
            let upper = predictions[g].2;
            let mut members: Vec<&str> = names(&candidates[g]);
            members.dedup();
            let mut total = 0.0;
            let mut improved = Vec::new();
            for name in members {
                let best = bound.get(name).copied().unwrap_or(f64::MIN_POSITIVE);
                if upper > best {
                    total += (upper - best) / best;
                    improved.push(name.to_string());
                }
            }
            (total, improved)
        };
        let (position, (best_gain, could_improve)) = left
            .iter()
            .map(|&g| gain(g))
            .enumerate()
            .fold((0, (f64::NEG_INFINITY, Vec::new())), |best, (i, g)| if g.0 > best.1 .0 { (i, g) } else { best });
        let g = left.remove(position);
        let (predicted, lower, upper) = predictions[g];
        for member in &candidates[g].members {
            raise(&mut bound, member.metrics.workload.as_str(), predicted);
        }
        chosen.push(Suggestion {
            workloads: names(&candidates[g]).iter().map(|n| n.to_string()).collect(),
            predicted_total_rps: predicted,
            interval_rps: [lower, upper],
            gain: best_gain.max(0.0),
            could_improve,
        });
    }
    chosen
}

/// One point of the learning curve: the mean score over seeds of the
/// recommendations after `measured` measurements.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct CurvePoint {
    /// Measured colocations.
    pub measured: usize,
    /// Score with measurements chosen at random.
    pub random: f64,
    /// Score with measurements chosen by [`suggest`]'s rule.
    pub suggested: f64,
}

/// The learning curve on `rows`, where every candidate group was measured:
/// for each seed, the same `sizes[0]` random rows start both strategies,
/// which then grow to each of `sizes` (ascending) by random rows or by
/// suggested ones; the model is retrained by the product's procedure at
/// each size (inner LOFO folds, `seed`) and its recommendation for every
/// workload among all rows scored (see the module documentation).
pub fn learning_curve(rows: &[Colocation], sizes: &[usize], seeds: &[u64]) -> Result<Vec<CurvePoint>, ColocateError> {
    // Seeds run independently: one thread each, summed in order.
    let per_seed: Vec<Result<Vec<(f64, f64)>, ColocateError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = seeds.iter().map(|&seed| scope.spawn(move || curve_of_seed(rows, sizes, seed))).collect();
        handles.into_iter().map(|h| h.join().expect("training does not panic")).collect()
    });
    let mut totals = vec![(0.0, 0.0); sizes.len()];
    for curve in per_seed {
        for (total, (random, suggested)) in totals.iter_mut().zip(curve?) {
            total.0 += random;
            total.1 += suggested;
        }
    }
    let count = seeds.len().max(1) as f64;
    Ok(sizes
        .iter()
        .zip(totals)
        .map(|(&measured, (random, suggested))| CurvePoint {
            measured: measured.min(rows.len()),
            random: random / count,
            suggested: suggested / count,
        })
        .collect())
}

/// One seed's `(random, suggested)` score at each of `sizes`.
fn curve_of_seed(rows: &[Colocation], sizes: &[usize], seed: u64) -> Result<Vec<(f64, f64)>, ColocateError> {
    let mut scores = Vec::with_capacity(sizes.len());
    let mut order: Vec<usize> = (0..rows.len()).collect();
    let mut rng = SplitMix64::new(seed);
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i + 1));
    }
    let start = sizes.first().copied().unwrap_or(0).min(rows.len());
    let mut suggested_rows: Vec<usize> = order[..start].to_vec();
    // The model trained on the suggested rows so far.
    let mut model: Option<TrainedModel> = None;
    for &size in sizes {
        let size = size.min(rows.len());
        let (random_score, _) = recommendation_score(rows, &order[..size], seed)?;
        if suggested_rows.len() < size {
            let model = match model.take() {
                Some(model) => model,
                None => TrainedModel::slowdown(&pick(rows, &suggested_rows), seed)?,
            };
            let unmeasured: Vec<usize> = (0..rows.len()).filter(|i| !suggested_rows.contains(i)).collect();
            let budget = size - suggested_rows.len();
            let chosen = suggest_among(&model, &pick(rows, &unmeasured), &pick(rows, &suggested_rows), budget);
            for suggestion in chosen {
                let index = unmeasured
                    .iter()
                    .copied()
                    .find(|&i| names(&rows[i]) == suggestion.workloads && !suggested_rows.contains(&i))
                    .expect("suggested among these rows");
                suggested_rows.push(index);
            }
        }
        let (suggested_score, trained) = recommendation_score(rows, &suggested_rows, seed)?;
        model = Some(trained);
        scores.push((random_score, suggested_score));
    }
    Ok(scores)
}

fn pick(rows: &[Colocation], indices: &[usize]) -> Vec<Colocation> {
    indices.iter().map(|&i| rows[i].clone()).collect()
}

/// The mean score, over every workload of `rows`, of recommending among all
/// rows with the model trained on the `measured` ones (their measured
/// totals known, the others predicted), and the model.
fn recommendation_score(
    rows: &[Colocation],
    measured: &[usize],
    seed: u64,
) -> Result<(f64, TrainedModel), ColocateError> {
    let model = TrainedModel::slowdown(&pick(rows, measured), seed)?;
    let known: HashSet<usize> = measured.iter().copied().collect();
    let targets = workloads(rows);
    let value: Vec<f64> = rows
        .iter()
        .enumerate()
        .map(|(i, g)| if known.contains(&i) { g.total_rps() } else { model.as_model().predict_total(g) })
        .collect();
    let total: f64 = targets.iter().map(|t| choose(rows, t, |g| value[g])).sum();
    Ok((total / targets.len().max(1) as f64, model))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::tests::workload;

    /// Pairs of 8 workloads where throughput falls with summed SM use.
    fn universe() -> (Vec<WorkloadMetrics>, Vec<Colocation>) {
        let pool: Vec<WorkloadMetrics> = (0..8)
            .map(|i| {
                let f = f64::from(i);
                workload(&format!("w{i}_batch1-inf"), 50.0 + 10.0 * f, 20.0 + 9.0 * f, 5.0 + 4.0 * f, 1.0 + f)
            })
            .collect();
        let mut rows = Vec::new();
        for i in 0..8 {
            for j in i..8 {
                let load = (pool[i].sm_util_pct + pool[j].sm_util_pct) / 100.0;
                let keep = |w: &WorkloadMetrics| w.exclusive_rps / load.max(1.0);
                rows.push(Colocation {
                    members: vec![
                        GroupMember { metrics: pool[i].clone(), colocated_rps: keep(&pool[i]) },
                        GroupMember { metrics: pool[j].clone(), colocated_rps: keep(&pool[j]) },
                    ],
                });
            }
        }
        (pool, rows)
    }

    #[test]
    fn suggests_unmeasured_groups_that_fit_and_spreads_them() {
        let (pool, rows) = universe();
        let measured = &rows[..12];
        let model = TrainedModel::slowdown(measured, 0).unwrap();
        let query = SuggestQuery { group_size: 2, budget: 5, gpu_memory_gb: 12.0 };
        let suggestions = suggest(&model, &pool, measured, &query).unwrap();
        assert_eq!(suggestions.len(), 5);
        let measured_names: Vec<Vec<&str>> = measured.iter().map(names).collect();
        for s in &suggestions {
            let as_str: Vec<&str> = s.workloads.iter().map(String::as_str).collect();
            assert!(!measured_names.contains(&as_str), "{as_str:?} was measured");
            let memory: f64 =
                s.workloads.iter().map(|w| pool.iter().find(|p| &p.workload == w).unwrap().memory_gb).sum();
            assert!(memory <= 12.0, "{s:?}");
            assert!(s.interval_rps[0] <= s.predicted_total_rps && s.predicted_total_rps <= s.interval_rps[1]);
        }
        assert!(suggestions.windows(2).all(|w| w[0].workloads != w[1].workloads));
        assert_eq!(suggest(&model, &pool, measured, &query).unwrap(), suggestions, "deterministic");
        assert_eq!(
            suggest(&model, &pool, measured, &SuggestQuery { budget: 0, ..query }).unwrap_err(),
            ColocateError::Budget
        );
        // Everything measured: nothing left to suggest.
        assert!(suggest(&model, &pool, &rows, &SuggestQuery { gpu_memory_gb: 100.0, ..query }).unwrap().is_empty());
    }

    #[test]
    fn the_learning_curve_reaches_the_oracle_when_everything_is_measured() {
        let (_, rows) = universe();
        let curve = learning_curve(&rows, &[8, 16, rows.len()], &[1, 2]).unwrap();
        assert_eq!(curve.len(), 3);
        assert!(curve.iter().all(|p| p.random > 0.0 && p.random <= 1.0 && p.suggested > 0.0 && p.suggested <= 1.0));
        let last = curve.last().unwrap();
        assert_eq!((last.measured, last.random, last.suggested), (rows.len(), 1.0, 1.0));
    }
}
