//! KACE's evaluation, nested, on the folds of its protocols
//! ([`crate::p3_folds`], [`crate::holdout_folds`]).
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

use tessera_core::{Colocation, WorkloadMetrics};

use crate::fallback::FallbackReason;
use crate::folds::{choose, grouped_folds, mean, mean_over_targets, Fold, GroupSource, Protocol};
use crate::groups::Composition;
use crate::model_file::{ModelKind, TrainedModel};
use crate::models::{Basis, SlowdownModel, ThroughputModel};
use crate::rules::Rule;
use crate::selection::grid;

/// A way to choose partners.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Policy {
    /// The slowdown model, trained by the product's procedure (nested
    /// selection with this seed); with `fallback`, a rule chooses instead
    /// at a group size where the selection found it better.
    Slowdown {
        /// Seed of the inner row folds.
        seed: u64,
        /// Whether a rule the selection found better chooses instead.
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
    /// Where the groups chosen among came from.
    pub source: GroupSource,
    /// How the policy's model predicted them (the first fold's; `None`
    /// for a policy without a model).
    pub basis: Option<Basis>,
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
    /// Targets chosen for by the fallback rule, per group size.
    pub fallbacks: Vec<usize>,
    /// Per group size, the targets' median novelty to their fold's
    /// training workloads (trained models only).
    pub median_novelty: Vec<f64>,
    /// Per group size, targets more novel than any the inner folds tested
    /// the model on (trained models with a fallback only).
    pub untested: Vec<usize>,
}

/// The metrics of `target`, a member of some of `candidates`.
fn target_metrics<'a>(candidates: &'a [Colocation], target: &str) -> Option<&'a WorkloadMetrics> {
    candidates.iter().flat_map(|g| &g.members).map(|m| &m.metrics).find(|m| m.workload == target)
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
                let group_size = candidates.first().map_or(2, |g| g.members.len());
                let rule = target_metrics(candidates, target)
                    .and_then(|metrics| model.fallback_for(group_size, metrics))
                    .filter(|_| *fallback);
                match rule {
                    Some((rule, _)) => (choose(candidates, target, |g| rule.score(&candidates[g])), true),
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

    /// How novel `target` is to the chooser's model, and whether it lies
    /// beyond what the model's inner folds tested; `None` without a model.
    fn novelty(&self, candidates: &[Colocation], target: &str) -> Option<(f64, bool)> {
        let Chooser::Model { model, .. } = self else { return None };
        let metrics = target_metrics(candidates, target)?;
        let group_size = candidates.first().map_or(2, |g| g.members.len());
        let untested = model.fallback_for(group_size, metrics).is_some_and(|(_, r)| r == FallbackReason::Untested);
        Some((model.novelty(metrics), untested))
    }

    /// How the chooser's model predicts groups of `size`.
    fn basis(&self, size: usize) -> Option<Basis> {
        match self {
            Chooser::Model { model, .. } => Some(model.as_model().basis(size)),
            _ => None,
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
    let grouped: Vec<(GroupSource, Vec<Fold>)> =
        group_sizes.iter().map(|&k| grouped_folds(folds, k, composition)).collect();
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
                median_novelty: Vec::new(),
                untested: Vec::new(),
            };
            for (&group_size, (source, folds_k)) in group_sizes.iter().zip(&grouped) {
                let mut per_fold = Vec::new();
                let (mut fallbacks, mut covered, mut groups, mut widths) = (0, 0, 0, Vec::new());
                let mut has_coverage = false;
                let mut novelties: Vec<(f64, bool)> = Vec::new();
                for fold_k in folds_k {
                    let chooser = &choosers[folds.iter().position(|f| f.name == fold_k.name).expect("same folds")];
                    let scores: Vec<(f64, bool)> =
                        fold_k.targets.iter().map(|t| chooser.score(&fold_k.candidates, t)).collect();
                    fallbacks += scores.iter().filter(|(_, fell_back)| *fell_back).count();
                    novelties.extend(fold_k.targets.iter().filter_map(|t| chooser.novelty(&fold_k.candidates, t)));
                    per_fold.push((mean(scores.iter().map(|(s, _)| *s)), fold_k.targets.len()));
                    if let Some((c, n, w)) = chooser.coverage(fold_k, group_size) {
                        has_coverage = true;
                        (covered, groups) = (covered + c, groups + n);
                        widths.extend(w);
                    }
                }
                result.scores.push(GroupScores {
                    group_size,
                    source: *source,
                    basis: choosers.iter().find_map(|c| c.basis(group_size)),
                    targets: per_fold.iter().map(|(_, n)| n).sum(),
                    per_fold: per_fold.iter().map(|(s, _)| *s).collect(),
                    mean: mean_over_targets(protocol, &per_fold),
                });
                result.fallbacks.push(fallbacks);
                if !novelties.is_empty() {
                    novelties.sort_by(|a, b| a.0.total_cmp(&b.0));
                    result.median_novelty.push(novelties[novelties.len() / 2].0);
                    result.untested.push(novelties.iter().filter(|(_, untested)| *untested).count());
                }
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
    let grouped: Vec<(GroupSource, Vec<Fold>)> =
        group_sizes.iter().map(|&k| grouped_folds(folds, k, composition)).collect();
    let models: Vec<Option<SlowdownModel>> = folds.iter().map(|fold| SlowdownModel::fit(&fold.train, &grid)).collect();
    let scores_of = |c: usize| -> Vec<GroupScores> {
        group_sizes
            .iter()
            .zip(&grouped)
            .map(|(&group_size, (source, folds_k))| {
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
                    source: *source,
                    basis: models.iter().flatten().next().map(|m| m.basis(group_size)),
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
        median_novelty: Vec::new(),
        untested: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::tests::{pair, workload};
    use crate::folds::tests::three_way_rows;
    use crate::folds::{choose, holdout_folds, p3_folds, Split};

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

    #[test]
    fn every_protocol_scores_every_policy_on_measured_and_built_groups() {
        let rows = three_way_rows();
        let policies = Policy::all(0);
        let split = Split { name: "s".to_string(), train: rows[..9].to_vec(), test: rows[9..].to_vec() };
        for (protocol, folds) in [
            (Protocol::P3, p3_folds(&[split])),
            (Protocol::Lowo, holdout_folds(&rows, Protocol::Lowo)),
            (Protocol::Lofo, holdout_folds(&rows, Protocol::Lofo)),
        ] {
            let results = evaluate(protocol, &folds, &[2, 3, 4], Composition::Additive, &policies);
            assert_eq!(results.len(), policies.len());
            for result in &results {
                let scored: Vec<&GroupScores> = result.scores.iter().filter(|s| s.targets > 0).collect();
                assert!(!scored.is_empty(), "{protocol:?} {result:?}");
                for scores in scored {
                    assert!(scores.mean > 0.0 && scores.mean <= 1.0 + 1e-12, "{protocol:?} {result:?}");
                }
            }
            let sources: Vec<GroupSource> = results[0].scores.iter().map(|s| s.source).collect();
            let built = GroupSource::BuiltFromPairs { composition: Composition::Additive };
            // The split's test rows and the hold-out folds' candidates hold the triple.
            assert_eq!(sources, [GroupSource::Measured, GroupSource::Measured, built], "{protocol:?}");
            assert_eq!(results[0].scores[2].basis, Some(Basis::ComposedFromPairs), "groups of 4 from pairs");
            assert_eq!(results[0].coverage.len(), 3, "the slowdown model has intervals");
            assert!(results[2].coverage.is_empty(), "random has none");
        }
    }
}
