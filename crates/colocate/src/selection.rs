//! Choosing the slowdown model's configuration, the fallback rule and the
//! width of the prediction intervals on the training data alone.
//!
//! The training rows are split into inner folds of the protocol the model
//! will face (row folds for P3, one family held out at a time for LOWO and
//! LOFO). Every configuration of [`grid`] is fitted on each inner fold's
//! training rows and chooses partners among its candidates, at every group
//! size measured (each target among the candidates of one size); the
//! configuration with the best mean score over those sizes of each feature
//! set (ties: grid order) make the model, which averages them: views that
//! extrapolate differently to a new model family, so that one that fails
//! on it is outvoted (the best three overall were often of one view, and
//! failed together on groups of four).
//!
//! Then, for every size the model will be asked about ([`decided_sizes`]:
//! the sizes measured, and groups of 3 and 4 built from pairs when pairs
//! were measured), on the inner candidates of that size:
//!
//! * the inner targets decide whether a rule chooses better than the
//!   averaged model: if the best rule does, it chooses instead of the model
//!   at that size (the fallback, which the evaluation and the
//!   recommendations report);
//! * the averaged model's predictions for the groups each inner fold held
//!   out calibrate that size's intervals (split-conformal, normalized by
//!   the ensemble's spread).
//!
//! Nothing here ever sees the rows a model is later scored on.

use tessera_core::{Colocation, WorkloadMetrics};

use crate::fallback::{self, Fallback, InnerTarget};
use crate::features::FeatureSet;
use crate::folds::{choose, grouped_folds, holdout_folds, mean_over_targets, row_folds, Fold, Protocol};
use crate::gbm::GbmParams;
use crate::groups::Composition;
use crate::models::{mean, KaceModel, SlowdownConfig, SlowdownModel, ThroughputModel};
use crate::novelty::TrainingWorkloads;
use crate::rules::Rule;

/// Configurations averaged into the slowdown model: the best of each
/// feature set.
pub const AVERAGED: usize = 3;

/// Inner folds of the P3 kind (rows split at random): each trains on 90%
/// of the rows, close to what the model itself trains on, so that its
/// errors, and the intervals calibrated on them, are like the model's.
pub const INNER_ROW_FOLDS: usize = 10;

/// Sizes of the groups built from measured pairs that the fallback and the
/// intervals are decided for (when those sizes were not measured; larger
/// groups follow the largest size decided).
pub const BUILT_GROUP_SIZES: [usize; 2] = [3, 4];

/// The stated coverage of the prediction intervals.
pub const INTERVAL_LEVEL: f64 = 0.9;

/// Fewest held-out groups built from pairs that intervals of their size
/// are calibrated on (else that size takes the intervals of the size
/// below).
pub const MIN_CALIBRATION_SAMPLES: usize = 30;

/// The slowdown model's candidate configurations: every feature set with
/// three tree settings (many shallow slow trees, the middle, few deep fast
/// ones), in order of preference on ties.
pub fn grid() -> Vec<SlowdownConfig> {
    let tree_settings = [(100, 3, 0.1, 3), (200, 2, 0.05, 3), (80, 3, 0.2, 1)];
    FeatureSet::ALL
        .iter()
        .flat_map(|&features| {
            tree_settings.iter().map(move |&(trees, max_depth, learning_rate, min_samples_leaf)| SlowdownConfig {
                features,
                params: GbmParams {
                    trees,
                    max_depth,
                    learning_rate,
                    min_samples_leaf,
                    subsample: 1.0,
                    l2: 1.0,
                    seed: 0,
                },
            })
        })
        .collect()
}

/// Split-conformal intervals on the summed throughput of groups of one
/// size: the prediction times `exp(±quantile × (spread + spread_floor))`,
/// where `spread` is the model's own disagreement on the group.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Calibration {
    /// Workloads per group it was calibrated on.
    pub group_size: usize,
    /// The stated coverage, e.g. 0.9.
    pub level: f64,
    /// The calibrated multiplier (infinite when there was too little to
    /// calibrate on: `null` in a model file).
    #[serde(with = "infinite_as_null")]
    pub quantile: f64,
    /// Added to every spread (the lower quartile of the calibration
    /// rows' spreads, at least 0.01), so a group the ensemble agrees on
    /// still gets an interval.
    pub spread_floor: f64,
    /// Held-out predictions it was calibrated on.
    pub samples: usize,
}

impl Calibration {
    /// Calibrates on held-out `(measured, predicted, spread)` totals of
    /// groups of `group_size`: the ⌈(n + 1) × level⌉-th smallest
    /// normalized error.
    pub fn new(group_size: usize, level: f64, held_out: &[(f64, f64, f64)]) -> Self {
        let mut spreads: Vec<f64> = held_out.iter().map(|(_, _, s)| *s).collect();
        spreads.sort_by(f64::total_cmp);
        let spread_floor = spreads.get(spreads.len() / 4).copied().unwrap_or(0.0).max(0.01);
        let mut scores: Vec<f64> = held_out
            .iter()
            .map(|&(measured, predicted, spread)| log_error(measured, predicted) / (spread + spread_floor))
            .collect();
        scores.sort_by(f64::total_cmp);
        let rank = ((scores.len() + 1) as f64 * level).ceil() as usize;
        let quantile = if rank == 0 { 0.0 } else { scores.get(rank - 1).copied().unwrap_or(f64::INFINITY) };
        Calibration { group_size, level, quantile, spread_floor, samples: held_out.len() }
    }

    /// The interval around `predicted` for a group the model's parts
    /// disagree on by `spread`: (lower, upper), samples/s.
    pub fn interval(&self, predicted: f64, spread: f64) -> (f64, f64) {
        let factor = (self.quantile * (spread + self.spread_floor)).exp();
        if predicted <= 0.0 || !factor.is_finite() {
            return (0.0, f64::INFINITY);
        }
        (predicted / factor, predicted * factor)
    }
}

/// An `f64` that may be infinite, as JSON: `null` for infinity (JSON has
/// no infinity).
mod infinite_as_null {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(value: &f64, serializer: S) -> Result<S::Ok, S::Error> {
        if value.is_finite() {
            serializer.serialize_f64(*value)
        } else {
            serializer.serialize_none()
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
        Ok(Option::<f64>::deserialize(deserializer)?.unwrap_or(f64::INFINITY))
    }
}

/// Intervals for a size nothing was calibrated on: unbounded.
const UNCALIBRATED: Calibration =
    Calibration { group_size: 0, level: INTERVAL_LEVEL, quantile: f64::INFINITY, spread_floor: 0.01, samples: 0 };

/// |ln(measured / predicted)|, infinite for a prediction that is not
/// positive.
fn log_error(measured: f64, predicted: f64) -> f64 {
    if predicted > 0.0 && measured > 0.0 {
        (measured / predicted).ln().abs()
    } else {
        f64::INFINITY
    }
}

/// A configuration and its mean inner score.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ConfigScore {
    /// The configuration.
    pub config: SlowdownConfig,
    /// Its mean choice score over the inner folds' targets.
    pub score: f64,
}

/// What the inner folds decided.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Selection {
    /// The kind of inner folds.
    pub inner: Protocol,
    /// Inner folds that had rows to train on.
    pub inner_folds: usize,
    /// Every configuration's inner score, in grid order (empty for KACE).
    pub scores: Vec<ConfigScore>,
    /// The configurations averaged, best first (empty for KACE).
    pub chosen: Vec<SlowdownConfig>,
    /// Per group size, whether a rule chooses instead of the model
    /// (empty for KACE, which has no fallback).
    pub fallbacks: Vec<Fallback>,
    /// The intervals, per group size, ascending.
    pub calibrations: Vec<Calibration>,
}

impl Selection {
    /// The intervals of groups of `size`: those calibrated on that size,
    /// else on the largest size below it, else on the smallest above;
    /// unbounded when nothing was calibrated.
    pub fn calibration(&self, size: usize) -> &Calibration {
        let below = self.calibrations.iter().rev().find(|c| c.group_size <= size);
        below.or(self.calibrations.first()).unwrap_or(&UNCALIBRATED)
    }
}

/// The group sizes a model trained on `rows` is decided for: every size
/// measured, and [`BUILT_GROUP_SIZES`] when pairs were measured, ascending.
pub fn decided_sizes(rows: &[Colocation]) -> Vec<usize> {
    let mut sizes: Vec<usize> = rows.iter().map(|g| g.members.len()).collect();
    if sizes.contains(&2) {
        sizes.extend(BUILT_GROUP_SIZES);
    }
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

/// The inner folds of `inner` over `rows` that have rows to train on.
fn inner_folds(rows: &[Colocation], inner: Protocol, seed: u64) -> Vec<Fold> {
    let folds = match inner {
        Protocol::P3 => row_folds(rows, INNER_ROW_FOLDS, seed),
        Protocol::Lowo | Protocol::Lofo => holdout_folds(rows, inner),
        // Which family is newest among the training rows says nothing: every
        // family is held out in turn.
        Protocol::NewFamily => holdout_folds(rows, Protocol::Lofo),
    };
    folds.into_iter().filter(|fold| fold.train.len() >= 2).collect()
}

/// The inner folds' candidates of one size, each fold's candidate with a
/// target predicted (for the configurations or the averaged model).
struct Sized {
    group_size: usize,
    /// The folds (with their index among the inner folds).
    folds: Vec<(usize, Fold)>,
    /// `[fold][candidate]`: each configuration's (or the averaged
    /// model's) predicted totals; empty for a candidate with no target.
    predictions: Vec<Vec<Vec<f64>>>,
}

/// The inner folds' groups of `group_size` (measured, or built from the
/// pairs), each candidate holding a target predicted by `models[f]` (the
/// fold's model; for groups built from pairs, through its pool of the
/// fold's workloads).
fn sized(folds: &[Fold], models: &[SlowdownModel], group_size: usize) -> Sized {
    let (_, grouped) = grouped_folds(folds, group_size, Composition::Additive);
    let grouped: Vec<(usize, Fold)> = grouped
        .into_iter()
        .map(|fold| (folds.iter().position(|f| f.name == fold.name).expect("same folds"), fold))
        .collect();
    let predictions = grouped
        .iter()
        .map(|(f, fold)| {
            let pool: Vec<WorkloadMetrics> = pool_of(&fold.candidates);
            let pooled = models[*f].pooled(&pool);
            let held_out = |g: &Colocation| fold.targets.iter().any(|t| g.contains(t));
            fold.candidates.iter().map(|g| if held_out(g) { pooled.totals(g) } else { Vec::new() }).collect()
        })
        .collect();
    Sized { group_size, folds: grouped, predictions }
}

/// The distinct workloads of `rows`, by name.
fn pool_of(rows: &[Colocation]) -> Vec<WorkloadMetrics> {
    let mut pool: Vec<WorkloadMetrics> =
        rows.iter().flat_map(|g| g.members.iter().map(|m| m.metrics.clone())).collect();
    pool.sort_by(|a, b| a.workload.cmp(&b.workload));
    pool.dedup_by(|a, b| a.workload == b.workload);
    pool
}

/// Chooses the slowdown model's configurations, fallback rules and
/// intervals on `rows` with inner folds of `inner` (see the module
/// documentation).
pub fn select_slowdown(rows: &[Colocation], inner: Protocol, seed: u64) -> Selection {
    let grid = grid();
    let (folds, models): (Vec<Fold>, Vec<SlowdownModel>) = inner_folds(rows, inner, seed)
        .into_iter()
        .filter_map(|fold| SlowdownModel::fit(&fold.train, &grid).map(|model| (fold, model)))
        .unzip();
    let sizes = decided_sizes(rows);
    let is_measured = |k: usize| rows.iter().any(|g| g.members.len() == k);
    let measured: Vec<Sized> = sizes.iter().filter(|&&k| is_measured(k)).map(|&k| sized(&folds, &models, k)).collect();
    let scores: Vec<ConfigScore> = grid
        .iter()
        .enumerate()
        .map(|(c, &config)| {
            let per_size: Vec<f64> = measured
                .iter()
                .filter(|s| !s.folds.is_empty())
                .map(|s| inner_score(inner, &s.folds, |f, g| s.predictions[f][g][c]))
                .collect();
            ConfigScore { config, score: per_size.iter().sum::<f64>() / per_size.len().max(1) as f64 }
        })
        .collect();
    let mut order: Vec<usize> = (0..grid.len()).collect();
    order.sort_by(|&a, &b| scores[b].score.total_cmp(&scores[a].score));
    // The best configuration of each feature set, best first.
    let mut seen = Vec::new();
    order.retain(|&c| {
        let fresh = !seen.contains(&grid[c].features);
        seen.push(grid[c].features);
        fresh
    });
    order.truncate(AVERAGED);
    let averaged: Vec<SlowdownModel> = models.iter().map(|m| m.subset(&order)).collect();
    let mut calibrations = Vec::new();
    let mut fallbacks = Vec::new();
    for &k in &sizes {
        let sized = match measured.iter().find(|s| s.group_size == k) {
            // Measured: the averaged model's totals are the chosen
            // configurations' among those already predicted.
            Some(s) => Sized {
                group_size: k,
                folds: s.folds.clone(),
                predictions: s
                    .predictions
                    .iter()
                    .map(|fold| {
                        fold.iter()
                            .map(|p| if p.is_empty() { Vec::new() } else { order.iter().map(|&c| p[c]).collect() })
                            .collect()
                    })
                    .collect(),
            },
            None => sized(&folds, &averaged, k),
        };
        let calibration = Calibration::new(k, INTERVAL_LEVEL, &held_out_predictions(&sized));
        // A size built from pairs with too few groups to calibrate on takes
        // the intervals of the size below.
        if is_measured(k) || calibration.samples >= MIN_CALIBRATION_SAMPLES {
            calibrations.push(calibration);
        }
        fallbacks.push(decide_fallback(&sized));
    }
    Selection {
        inner,
        inner_folds: folds.len(),
        chosen: order.iter().map(|&c| grid[c]).collect(),
        scores,
        fallbacks,
        calibrations,
    }
}

/// The mean and the standard deviation of the logs of an ensemble's
/// totals.
fn mean_and_spread(totals: &[f64]) -> (f64, f64) {
    let logs: Vec<f64> = totals.iter().map(|t| t.max(f64::MIN_POSITIVE).ln()).collect();
    (mean(totals), standard_deviation(&logs))
}

/// For one size: each inner target's novelty to its fold's training rows
/// and the scores of the averaged model's choice and of every rule's, from
/// which [`crate::fallback`] decides.
fn decide_fallback(sized: &Sized) -> Fallback {
    let mut inner = Vec::new();
    for ((_, fold), predictions) in sized.folds.iter().zip(&sized.predictions) {
        let candidates = &fold.candidates;
        let trained = TrainingWorkloads::new(&fold.train);
        for target in &fold.targets {
            let Some(member) = candidates.iter().flat_map(|g| &g.members).find(|m| &m.metrics.workload == target)
            else {
                continue;
            };
            inner.push(InnerTarget {
                novelty: trained.novelty(&member.metrics),
                model: choose(candidates, target, |g| mean(&predictions[g])),
                rules: Rule::ALL.map(|rule| choose(candidates, target, |g| rule.score(&candidates[g]))),
            });
        }
    }
    fallback::decide(sized.group_size, &inner)
}

/// KACE's intervals from inner folds of `inner`, per size measured (it has
/// no configuration to choose and no fallback).
pub fn select_kace(rows: &[Colocation], inner: Protocol, seed: u64) -> Selection {
    let folds: Vec<Fold> = inner_folds(rows, inner, seed);
    let models: Vec<KaceModel> = folds.iter().map(|fold| KaceModel::fit(&fold.train)).collect();
    let mut sizes: Vec<usize> = rows.iter().map(|g| g.members.len()).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let calibrations = sizes
        .iter()
        .map(|&k| {
            let (_, grouped) = grouped_folds(&folds, k, Composition::Additive);
            let mut held_out = Vec::new();
            for fold in &grouped {
                let model = &models[folds.iter().position(|f| f.name == fold.name).expect("same folds")];
                for group in fold.candidates.iter().filter(|g| fold.targets.iter().any(|t| g.contains(t))) {
                    held_out.push((group.total_rps(), model.predict_total(group), 0.0));
                }
            }
            Calibration::new(k, INTERVAL_LEVEL, &held_out)
        })
        .collect();
    Selection {
        inner,
        inner_folds: folds.len(),
        scores: Vec::new(),
        chosen: Vec::new(),
        fallbacks: Vec::new(),
        calibrations,
    }
}

/// The mean choice score over the folds' targets when candidate `g` of
/// fold `f` (the `f`-th of `folds`) scores `score(f, g)`.
fn inner_score(inner: Protocol, folds: &[(usize, Fold)], score: impl Fn(usize, usize) -> f64) -> f64 {
    let per_fold: Vec<(f64, usize)> = folds
        .iter()
        .enumerate()
        .map(|(f, (_, fold))| {
            let total: f64 = fold.targets.iter().map(|t| choose(&fold.candidates, t, |g| score(f, g))).sum();
            (total / fold.targets.len().max(1) as f64, fold.targets.len())
        })
        .collect();
    mean_over_targets(inner, &per_fold)
}

/// `(measured, predicted, spread)` for every candidate an inner fold held
/// out of training (one that contains a target of the fold), from the
/// averaged model's ensemble totals.
fn held_out_predictions(sized: &Sized) -> Vec<(f64, f64, f64)> {
    let mut held_out = Vec::new();
    for ((_, fold), predictions) in sized.folds.iter().zip(&sized.predictions) {
        for (group, totals) in fold.candidates.iter().zip(predictions) {
            if !totals.is_empty() {
                let (predicted, spread) = mean_and_spread(totals);
                held_out.push((group.total_rps(), predicted, spread));
            }
        }
    }
    held_out
}

/// The population standard deviation of `values`.
fn standard_deviation(values: &[f64]) -> f64 {
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / values.len() as f64).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calibration_takes_the_conformal_quantile() {
        // Ten held-out errors of 1 %, 2 %, …, 10 % with no spread.
        let held_out: Vec<(f64, f64, f64)> =
            (1..=10).map(|i| (100.0 * (0.01 * f64::from(i)).exp(), 100.0, 0.0)).collect();
        let calibration = Calibration::new(2, 0.8, &held_out);
        // ⌈11 × 0.8⌉ = 9th smallest of 1..10 (× 0.01) over the 0.01 floor.
        assert!((calibration.quantile - 9.0).abs() < 1e-9, "{calibration:?}");
        let (lower, upper) = calibration.interval(50.0, 0.0);
        assert!((lower - 50.0 / 0.09f64.exp()).abs() < 1e-9 && (upper - 50.0 * 0.09f64.exp()).abs() < 1e-9);
        // Wider where the ensemble disagrees.
        let (wide_lower, wide_upper) = calibration.interval(50.0, 0.05);
        assert!(wide_lower < lower && wide_upper > upper);
        // Too few samples for the level: an unbounded interval.
        let few = Calibration::new(2, 0.95, &held_out[..5]);
        assert_eq!(few.interval(50.0, 0.0), (0.0, f64::INFINITY));
        assert_eq!(Calibration::new(2, 0.9, &[]).samples, 0);
    }

    #[test]
    fn each_size_takes_its_own_calibration_or_the_nearest_below() {
        let held_out = [(110.0, 100.0, 0.0); 30];
        let calibrations = vec![Calibration::new(2, 0.9, &held_out), Calibration::new(4, 0.9, &held_out)];
        let selection = Selection {
            inner: Protocol::Lowo,
            inner_folds: 0,
            scores: Vec::new(),
            chosen: Vec::new(),
            fallbacks: Vec::new(),
            calibrations,
        };
        let sizes: Vec<usize> = [2, 3, 4, 6].iter().map(|&k| selection.calibration(k).group_size).collect();
        assert_eq!(sizes, [2, 2, 4, 4]);
        assert_eq!(selection.calibration(1).group_size, 2, "below every size: the smallest");
        let none = Selection { calibrations: Vec::new(), ..selection };
        assert_eq!(none.calibration(2).interval(10.0, 0.0), (0.0, f64::INFINITY));
    }

    #[test]
    fn decided_sizes_add_groups_built_from_pairs() {
        use crate::features::tests::{pair, workload};
        let a = workload("a", 10.0, 10.0, 10.0, 1.0);
        let pairs = vec![pair(a.clone(), 5.0, a.clone(), 5.0)];
        assert_eq!(decided_sizes(&pairs), [2, 3, 4]);
        let mut quads = pairs[0].clone();
        quads.members.extend(pairs[0].members.clone());
        assert_eq!(decided_sizes(std::slice::from_ref(&quads)), [4]);
        assert_eq!(decided_sizes(&[pairs[0].clone(), quads]), [2, 3, 4]);
    }

    #[test]
    fn the_grid_covers_every_feature_set_and_averages_the_best() {
        let grid = grid();
        assert_eq!(grid.len(), 9);
        for set in FeatureSet::ALL {
            assert_eq!(grid.iter().filter(|c| c.features == set).count(), 3);
        }
        assert!(AVERAGED <= grid.len());
    }
}
