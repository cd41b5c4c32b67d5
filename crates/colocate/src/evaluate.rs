//! KACE's evaluation, nested: for each target workload a policy picks one
//! of the measured groups that contain it; the score is that group's summed
//! throughput over the best such group's.
//!
//! * **P3**: train on a split's training rows, choose among its test rows,
//!   for every workload that appears in the test rows; the mean over
//!   targets per split, then over splits.
//! * **LOWO** (leave one workload family out): for each family of model and
//!   task, train on every row with none of its workloads, and choose among
//!   all rows for each of them; the mean over every target.
//! * **LOFO** (leave one model family out): the same with a family being a
//!   whole model, every batch size, inference and training, so that no
//!   variant of the target is ever in training.
//!
//! Each protocol also runs on groups of 3 and 4 built from the candidate
//! pairs ([`crate::build_groups`]), training on the same rows.
//!
//! A trained policy is trained by the product's own procedure on the
//! fold's training rows alone: the slowdown model chooses its
//! configuration, fallback rule and intervals with inner folds of the same
//! protocol ([`crate::select_slowdown`]), so no choice ever sees the rows
//! it is scored on. A policy chooses the candidate with the highest score,
//! the first in row order on ties; `random` is the expected value of a
//! uniform choice.

use tessera_core::rng::SplitMix64;
use tessera_core::{Colocation, WorkloadMetrics};

use crate::groups::{build_groups, Composition};
use crate::model_file::{ModelKind, TrainedModel};
use crate::models::{SlowdownModel, ThroughputModel};
use crate::rules::Rule;
use crate::selection::grid;

/// A way to choose partners.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Policy {
    /// The slowdown model, trained by the product's procedure (nested
    /// selection with this seed); with `fallback`, a target outside the
    /// training range is chosen for by the selected rule.
    Slowdown {
        /// Seed of the inner row folds.
        seed: u64,
        /// Whether out-of-range targets fall back to the rule.
        fallback: bool,
    },
    /// KACE's least squares on group features.
    Kace,
    /// A uniform choice (expected value).
    Random,
    /// A rule.
    Rule(Rule),
}

impl Policy {
    /// Every policy, the default model first.
    pub fn all(seed: u64) -> Vec<Policy> {
        let mut all = vec![Policy::Slowdown { seed, fallback: true }, Policy::Kace, Policy::Random];
        all.extend(Rule::ALL.map(Policy::Rule));
        all
    }

    /// The policy's name in tables.
    pub fn name(&self) -> &'static str {
        match self {
            Policy::Slowdown { fallback: true, .. } => "slowdown",
            Policy::Slowdown { fallback: false, .. } => "slowdown without fallback",
            Policy::Kace => "kace",
            Policy::Random => "random (expected)",
            Policy::Rule(rule) => rule.name(),
        }
    }
}

/// A policy's scores on one group size.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct GroupScores {
    /// Workloads per group.
    pub group_size: usize,
    /// Targets scored (0 when no group of this size could be built).
    pub targets: usize,
    /// Mean score of each fold's targets, in the order of the folds that
    /// have any.
    pub per_fold: Vec<f64>,
    /// The protocol's score: the mean over folds for P3 (KACE's headline),
    /// the mean over every target for the hold-out protocols.
    pub mean: f64,
}

/// How often the intervals held the measured total.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Coverage {
    /// Workloads per group.
    pub group_size: usize,
    /// The stated coverage.
    pub level: f64,
    /// Held-out groups whose measured total lay within the interval.
    pub covered: usize,
    /// Held-out groups.
    pub groups: usize,
    /// `covered / groups`.
    pub measured: f64,
    /// Median interval width over the prediction.
    pub median_relative_width: f64,
}

/// A policy's results on a protocol.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PolicyScores {
    /// The policy's name.
    pub name: String,
    /// Scores per group size, in the order asked for.
    pub scores: Vec<GroupScores>,
    /// Interval coverage per group size (trained models only).
    pub coverage: Vec<Coverage>,
    /// Targets chosen for by the fallback rule (out of the training range),
    /// per group size.
    pub fallbacks: Vec<usize>,
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

/// An evaluation protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// KACE's published splits: train on a split's training rows, choose
    /// among its test rows.
    P3,
    /// Leave one workload family (model and task) out of training.
    Lowo,
    /// Leave one model family (every batch size, inference and training)
    /// out of training.
    Lofo,
}

impl Protocol {
    /// Every protocol.
    pub const ALL: [Protocol; 3] = [Protocol::P3, Protocol::Lowo, Protocol::Lofo];

    /// The protocol's name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::P3 => "p3",
            Protocol::Lowo => "lowo",
            Protocol::Lofo => "lofo",
        }
    }

    /// The family a workload belongs to under a hold-out protocol (under
    /// P3, which holds out rows, every workload is its own).
    fn family(self, workload: &WorkloadMetrics) -> String {
        match self {
            Protocol::P3 => workload.workload.clone(),
            Protocol::Lowo => {
                let (model, task) = workload.family();
                format!("{model}-{task}")
            }
            Protocol::Lofo => workload.family().0.to_string(),
        }
    }
}

/// Rows to train on, rows to choose among, and the workloads to choose for.
#[derive(Debug, Clone, PartialEq)]
pub struct Fold {
    /// The fold's name: a split, or the family held out.
    pub name: String,
    /// Rows to train on.
    pub train: Vec<Colocation>,
    /// Rows to choose among.
    pub candidates: Vec<Colocation>,
    /// The workloads to choose for, each with at least one candidate.
    pub targets: Vec<String>,
}

/// P3's folds: one per split, every workload of its test rows a target.
pub fn p3_folds(splits: &[Split]) -> Vec<Fold> {
    splits
        .iter()
        .map(|split| Fold {
            name: split.name.clone(),
            train: split.train.clone(),
            candidates: split.test.clone(),
            targets: workloads(&split.test),
        })
        .collect()
}

/// The hold-out folds of `protocol` over `rows`: one per family, in name
/// order, training on every row with no workload of it and choosing among
/// all rows for each of its workloads. For [`Protocol::P3`], which holds
/// out rows rather than families, every workload is its own family.
pub fn holdout_folds(rows: &[Colocation], protocol: Protocol) -> Vec<Fold> {
    let mut families: Vec<(String, String)> = rows
        .iter()
        .flat_map(|g| g.members.iter().map(|m| (protocol.family(&m.metrics), m.metrics.workload.clone())))
        .collect();
    families.sort();
    families.dedup();
    let mut folds: Vec<Fold> = Vec::new();
    for (family, workload) in families {
        match folds.last_mut() {
            Some(fold) if fold.name == family => fold.targets.push(workload),
            _ => {
                let train = rows
                    .iter()
                    .filter(|g| g.members.iter().all(|m| protocol.family(&m.metrics) != family))
                    .cloned()
                    .collect();
                folds.push(Fold { name: family, train, candidates: rows.to_vec(), targets: vec![workload] });
            }
        }
    }
    folds
}

/// `folds` folds of `rows` drawn at random (seeded): each chooses among
/// its own rows for their workloads and trains on the others.
pub fn row_folds(rows: &[Colocation], folds: usize, seed: u64) -> Vec<Fold> {
    let mut order: Vec<usize> = (0..rows.len()).collect();
    let mut rng = SplitMix64::new(seed);
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i + 1));
    }
    let mut fold_of = vec![0; rows.len()];
    for (position, &row) in order.iter().enumerate() {
        fold_of[row] = position % folds.max(1);
    }
    (0..folds.max(1))
        .map(|f| {
            let pick = |inside: bool| -> Vec<Colocation> {
                rows.iter().zip(&fold_of).filter(|(_, &g)| (g == f) == inside).map(|(r, _)| r.clone()).collect()
            };
            let candidates = pick(true);
            Fold { name: format!("rows {}", f + 1), train: pick(false), targets: workloads(&candidates), candidates }
        })
        .filter(|fold| !fold.targets.is_empty())
        .collect()
}

/// The folds with their candidates replaced by the groups of `group_size`
/// built from their pairs by `composition` ([`crate::build_groups`]; 2
/// keeps them as they are); targets with no such group are dropped, and so
/// are folds left with no target. The training rows stay as they were.
pub fn grouped_folds(folds: &[Fold], group_size: usize, composition: Composition) -> Vec<Fold> {
    if group_size == 2 {
        return folds.to_vec();
    }
    folds
        .iter()
        .filter_map(|fold| {
            let candidates = build_groups(&fold.candidates, group_size, composition);
            let present = workloads(&candidates);
            let targets: Vec<String> =
                fold.targets.iter().filter(|t| present.binary_search(t).is_ok()).cloned().collect();
            (!targets.is_empty()).then(|| Fold {
                name: fold.name.clone(),
                train: fold.train.clone(),
                candidates,
                targets,
            })
        })
        .collect()
}

/// A policy trained on one fold's rows.
enum Chooser {
    Model {
        model: Box<TrainedModel>,
        fallback: bool,
    },
    Rule(Rule),
    Random,
    /// Nothing to learn from: the first candidate.
    First,
}

impl Chooser {
    fn train(policy: &Policy, train: &[Colocation], protocol: Protocol) -> Chooser {
        let trained = |kind, seed| TrainedModel::train(kind, train, protocol, seed).ok();
        match *policy {
            Policy::Slowdown { seed, fallback } => match trained(ModelKind::Slowdown, seed) {
                Some(model) => Chooser::Model { model: Box::new(model), fallback },
                None => Chooser::First,
            },
            Policy::Kace => match trained(ModelKind::Kace, 0) {
                Some(model) => Chooser::Model { model: Box::new(model), fallback: false },
                None => Chooser::First,
            },
            Policy::Random => Chooser::Random,
            Policy::Rule(rule) => Chooser::Rule(rule),
        }
    }

    /// The score of choosing for `target` among `candidates`, and whether
    /// the fallback rule chose.
    fn score(&self, candidates: &[Colocation], target: &str) -> (f64, bool) {
        match self {
            Chooser::Model { model, fallback } => {
                let metrics = candidates
                    .iter()
                    .flat_map(|g| &g.members)
                    .find(|m| m.metrics.workload == target)
                    .map(|m| &m.metrics)
                    .expect("targets have candidates");
                let group_size = candidates.first().map_or(2, |g| g.members.len());
                match model.fallback_for(metrics, group_size).filter(|_| *fallback) {
                    Some(rule) => (choose(candidates, target, |g| rule.score(&candidates[g])), true),
                    None => (choose(candidates, target, |g| model.as_model().predict_total(&candidates[g])), false),
                }
            }
            Chooser::Rule(rule) => (choose(candidates, target, |g| rule.score(&candidates[g])), false),
            Chooser::First => (choose(candidates, target, |_| 0.0), false),
            Chooser::Random => {
                let totals: Vec<f64> =
                    candidates.iter().filter(|g| g.contains(target)).map(|g| g.total_rps()).collect();
                let best = totals.iter().copied().fold(f64::MIN, f64::max);
                (totals.iter().map(|t| t / best).sum::<f64>() / totals.len() as f64, false)
            }
        }
    }

    /// Interval coverage on the candidates that hold a target.
    fn coverage(&self, fold: &Fold, group_size: usize) -> Option<(usize, usize, Vec<f64>)> {
        let Chooser::Model { model, .. } = self else { return None };
        let (mut covered, mut groups, mut widths) = (0, 0, Vec::new());
        for group in fold.candidates.iter().filter(|g| fold.targets.iter().any(|t| g.contains(t))) {
            let predicted = model.as_model().predict_total(group);
            let (lower, upper) = model.interval(group);
            covered += usize::from((lower..=upper).contains(&group.total_rps()));
            groups += 1;
            widths.push((upper - lower) / predicted);
        }
        debug_assert!(group_size >= 2);
        Some((covered, groups, widths))
    }
}

/// Scores `policies` on `folds` of `protocol`, on each of `group_sizes`
/// (groups of 3 and more built from the folds' candidate pairs by
/// `composition`); every
/// policy trains once per fold, the folds in parallel (the results do not
/// depend on the order).
pub fn evaluate(
    protocol: Protocol,
    folds: &[Fold],
    group_sizes: &[usize],
    composition: Composition,
    policies: &[Policy],
) -> Vec<PolicyScores> {
    let grouped: Vec<Vec<Fold>> = group_sizes.iter().map(|&k| grouped_folds(folds, k, composition)).collect();
    policies
        .iter()
        .map(|policy| {
            // Folds train independently: one thread each, joined in order.
            let choosers: Vec<Chooser> = std::thread::scope(|scope| {
                let handles: Vec<_> = folds
                    .iter()
                    .map(|fold| scope.spawn(move || Chooser::train(policy, &fold.train, protocol)))
                    .collect();
                handles.into_iter().map(|h| h.join().expect("training does not panic")).collect()
            });
            let mut result = PolicyScores {
                name: policy.name().to_string(),
                scores: Vec::new(),
                coverage: Vec::new(),
                fallbacks: Vec::new(),
            };
            for (&group_size, folds_k) in group_sizes.iter().zip(&grouped) {
                let mut per_fold = Vec::new();
                let (mut fallbacks, mut covered, mut groups, mut widths) = (0, 0, 0, Vec::new());
                let mut has_coverage = false;
                for fold_k in folds_k {
                    let chooser = &choosers[folds.iter().position(|f| f.name == fold_k.name).expect("same folds")];
                    let scores: Vec<(f64, bool)> =
                        fold_k.targets.iter().map(|t| chooser.score(&fold_k.candidates, t)).collect();
                    fallbacks += scores.iter().filter(|(_, fell_back)| *fell_back).count();
                    per_fold.push((mean(scores.iter().map(|(s, _)| *s)), fold_k.targets.len()));
                    if let Some((c, n, w)) = chooser.coverage(fold_k, group_size) {
                        has_coverage = true;
                        (covered, groups) = (covered + c, groups + n);
                        widths.extend(w);
                    }
                }
                result.scores.push(GroupScores {
                    group_size,
                    targets: per_fold.iter().map(|(_, n)| n).sum(),
                    per_fold: per_fold.iter().map(|(s, _)| *s).collect(),
                    mean: mean_over_targets(protocol, &per_fold),
                });
                result.fallbacks.push(fallbacks);
                if has_coverage {
                    widths.sort_by(f64::total_cmp);
                    result.coverage.push(Coverage {
                        group_size,
                        level: crate::selection::INTERVAL_LEVEL,
                        covered,
                        groups,
                        measured: covered as f64 / groups.max(1) as f64,
                        median_relative_width: widths.get(widths.len() / 2).copied().unwrap_or(f64::NAN),
                    });
                }
            }
            result
        })
        .collect()
}

/// The slowdown model the old way, for comparison only: every single
/// configuration of the grid fitted on each fold, and the one with the
/// best mean on the first of `group_sizes` **judged on the test rows
/// themselves** reported (optimistic: its choice saw the answers).
pub fn tuned_on_test(
    protocol: Protocol,
    folds: &[Fold],
    group_sizes: &[usize],
    composition: Composition,
) -> PolicyScores {
    let grid = grid();
    let grouped: Vec<Vec<Fold>> = group_sizes.iter().map(|&k| grouped_folds(folds, k, composition)).collect();
    let models: Vec<Option<SlowdownModel>> = folds.iter().map(|fold| SlowdownModel::fit(&fold.train, &grid)).collect();
    let scores_of = |c: usize| -> Vec<GroupScores> {
        group_sizes
            .iter()
            .zip(&grouped)
            .map(|(&group_size, folds_k)| {
                let per_fold: Vec<(f64, usize)> = folds_k
                    .iter()
                    .map(|fold_k| {
                        let model =
                            models[folds.iter().position(|f| f.name == fold_k.name).expect("same folds")].as_ref();
                        let totals: Vec<f64> = fold_k
                            .candidates
                            .iter()
                            .map(|g| model.map_or(0.0, |m| m.subset(&[c]).predict_total(g)))
                            .collect();
                        let scores = fold_k.targets.iter().map(|t| choose(&fold_k.candidates, t, |g| totals[g]));
                        (mean(scores), fold_k.targets.len())
                    })
                    .collect();
                GroupScores {
                    group_size,
                    targets: per_fold.iter().map(|(_, n)| n).sum(),
                    per_fold: per_fold.iter().map(|(s, _)| *s).collect(),
                    mean: mean_over_targets(protocol, &per_fold),
                }
            })
            .collect()
    };
    let best = (0..grid.len())
        .map(|c| (c, scores_of(c)))
        .max_by(|a, b| a.1[0].mean.total_cmp(&b.1[0].mean).then(b.0.cmp(&a.0)))
        .expect("the grid is not empty");
    PolicyScores {
        name: "slowdown, tuned on the test data".to_string(),
        scores: best.1,
        coverage: Vec::new(),
        fallbacks: Vec::new(),
    }
}

/// The protocol's mean of per-fold `(mean score, targets)`: over folds for
/// P3, over targets for the hold-out protocols.
pub(crate) fn mean_over_targets(protocol: Protocol, per_fold: &[(f64, usize)]) -> f64 {
    match protocol {
        Protocol::P3 => mean(per_fold.iter().map(|(s, _)| *s)),
        Protocol::Lowo | Protocol::Lofo => {
            let targets: usize = per_fold.iter().map(|(_, n)| n).sum();
            per_fold.iter().map(|(s, n)| s * *n as f64).sum::<f64>() / targets.max(1) as f64
        }
    }
}

fn mean(values: impl Iterator<Item = f64>) -> f64 {
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

/// The score of choosing for `target` among `candidates` the one with the
/// highest `score(index)` (the first on ties): its measured total over the
/// best measured total of the target's candidates.
pub(crate) fn choose(candidates: &[Colocation], target: &str, score: impl Fn(usize) -> f64) -> f64 {
    let mut best_total = f64::MIN;
    let mut chosen: Option<(usize, f64)> = None;
    for (index, group) in candidates.iter().enumerate().filter(|(_, g)| g.contains(target)) {
        best_total = best_total.max(group.total_rps());
        let value = score(index);
        if chosen.is_none_or(|(_, best)| value > best) {
            chosen = Some((index, value));
        }
    }
    chosen.map_or(0.0, |(index, _)| candidates[index].total_rps() / best_total)
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
        let low_memory = Chooser::Rule(Rule::LowestMemory);
        assert!((low_memory.score(&rows, "a_batch1-inf").0 - 0.8).abs() < 1e-12);
        assert!((Chooser::Random.score(&rows, "a_batch1-inf").0 - 0.9).abs() < 1e-12, "random: (0.8 + 1) / 2");
        assert_eq!(choose(&rows, "a_batch1-inf", |g| rows[g].total_rps()), 1.0);
    }

    /// Five workloads of three families; groups lose throughput with the
    /// members' summed SM utilisation.
    fn three_way_rows() -> Vec<Colocation> {
        use tessera_core::GroupMember;
        let names = ["a_batch1-inf", "a_batch2-inf", "c_batch1-train", "d_batch2-inf", "c_batch1-inf"];
        let metrics = |i: usize| {
            workload(names[i], 100.0 + 10.0 * i as f64, 30.0 + 12.0 * i as f64, 10.0 + 5.0 * i as f64, 1.0 + i as f64)
        };
        let group = |ids: &[usize]| {
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
        let mut rows = Vec::new();
        for i in 0..5 {
            for j in i..5 {
                rows.push(group(&[i, j]));
            }
        }
        rows.push(group(&[0, 1, 2]));
        rows
    }

    #[test]
    fn every_protocol_scores_every_policy_on_pairs_and_built_groups() {
        let rows = three_way_rows();
        let policies = Policy::all(0);
        let split = Split { name: "s".to_string(), train: rows[..9].to_vec(), test: rows[9..].to_vec() };
        for (protocol, folds) in [
            (Protocol::P3, p3_folds(&[split])),
            (Protocol::Lowo, holdout_folds(&rows, Protocol::Lowo)),
            (Protocol::Lofo, holdout_folds(&rows, Protocol::Lofo)),
        ] {
            let results = evaluate(protocol, &folds, &[2, 3], Composition::Additive, &policies);
            assert_eq!(results.len(), policies.len());
            for result in &results {
                assert_eq!(result.scores.len(), 2);
                for scores in &result.scores {
                    assert!(scores.mean > 0.0 && scores.mean <= 1.0 + 1e-12, "{protocol:?} {result:?}");
                }
            }
            assert_eq!(results[0].coverage.len(), 2, "the slowdown model has intervals");
            assert!(results[2].coverage.is_empty(), "random has none");
        }
    }

    #[test]
    fn hold_out_folds_train_without_the_family() {
        let rows = three_way_rows();
        let lowo = holdout_folds(&rows, Protocol::Lowo);
        let lofo = holdout_folds(&rows, Protocol::Lofo);
        let names = |folds: &[Fold]| folds.iter().map(|f| f.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&lowo), ["a-inf", "c-inf", "c-train", "d-inf"]);
        assert_eq!(names(&lofo), ["a", "c", "d"]);
        let c = &lofo[1];
        assert_eq!(c.targets, ["c_batch1-inf", "c_batch1-train"], "inference and training are one model family");
        assert!(c.train.iter().all(|g| g.members.iter().all(|m| !m.metrics.workload.starts_with("c_"))));
        assert!(!c.train.is_empty() && c.candidates.len() == rows.len());
        // LOWO keeps the other task of the same model in training.
        assert!(lowo[2].train.iter().any(|g| g.contains("c_batch1-inf")));
    }

    #[test]
    fn row_folds_partition_the_rows_deterministically() {
        let rows = three_way_rows();
        let folds = row_folds(&rows, 4, 7);
        assert_eq!(folds.len(), 4);
        assert_eq!(folds.iter().map(|f| f.candidates.len()).sum::<usize>(), rows.len());
        for fold in &folds {
            assert_eq!(fold.train.len() + fold.candidates.len(), rows.len());
        }
        assert_eq!(folds, row_folds(&rows, 4, 7));
        assert_ne!(folds, row_folds(&rows, 4, 8));
    }
}
