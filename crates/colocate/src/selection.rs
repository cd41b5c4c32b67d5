//! Choosing the slowdown model's configuration, the fallback rule and the
//! width of the prediction intervals on the training data alone.
//!
//! The training rows are split into inner folds of the protocol the model
//! will face (row folds for P3, one family held out at a time for LOWO and
//! LOFO). Every configuration of [`grid`] is fitted on each inner fold's
//! training rows and chooses partners among its candidates; the
//! [`AVERAGED`] configurations with the best mean score (ties: grid order)
//! make the model, which averages them. The inner targets that lie outside
//! their inner fold's training range then decide, per group size (pairs,
//! and groups of 3 and 4 built from the inner candidates), whether a rule
//! chooses better than the averaged model for such targets: if the best
//! rule does, it becomes the fallback for targets outside the training
//! range at that size. The averaged model's predictions for the rows each inner fold held out
//! calibrate the intervals (split-conformal, normalized by the ensemble's
//! spread). Nothing here ever sees the rows a model is later scored on.

use tessera_core::Colocation;

use crate::features::FeatureSet;
use crate::folds::{choose, grouped_folds, holdout_folds, mean_over_targets, row_folds, Fold, Protocol};
use crate::gbm::GbmParams;
use crate::groups::Composition;
use crate::models::{KaceModel, SlowdownConfig, SlowdownModel, ThroughputModel};
use crate::range::TrainingRange;
use crate::rules::Rule;

/// Configurations averaged into the slowdown model.
pub const AVERAGED: usize = 3;

/// Inner folds of the P3 kind (rows split at random).
pub const INNER_ROW_FOLDS: usize = 4;

/// Group sizes the fallback is decided for (larger groups follow the
/// largest).
pub const FALLBACK_GROUP_SIZES: [usize; 3] = [2, 3, 4];

/// The stated coverage of the prediction intervals.
pub const INTERVAL_LEVEL: f64 = 0.9;

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

/// Split-conformal intervals on a group's summed throughput: the
/// prediction times `exp(±quantile × (spread + spread_floor))`, where
/// `spread` is the model's own disagreement on the group.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Calibration {
    /// The stated coverage, e.g. 0.9.
    pub level: f64,
    /// The calibrated multiplier (infinite when there was nothing to
    /// calibrate on).
    pub quantile: f64,
    /// Added to every spread (the median spread of the calibration rows,
    /// at least 0.01), so a group the ensemble agrees on still gets an
    /// interval.
    pub spread_floor: f64,
    /// Held-out predictions it was calibrated on.
    pub samples: usize,
}

impl Calibration {
    /// Calibrates on held-out `(measured, predicted, spread)` totals: the
    /// ⌈(n + 1) × level⌉-th smallest normalized error.
    pub fn new(level: f64, held_out: &[(f64, f64, f64)]) -> Self {
        let mut spreads: Vec<f64> = held_out.iter().map(|(_, _, s)| *s).collect();
        spreads.sort_by(f64::total_cmp);
        let spread_floor = spreads.get(spreads.len() / 2).copied().unwrap_or(0.0).max(0.01);
        let mut scores: Vec<f64> = held_out
            .iter()
            .map(|&(measured, predicted, spread)| log_error(measured, predicted) / (spread + spread_floor))
            .collect();
        scores.sort_by(f64::total_cmp);
        let rank = ((scores.len() + 1) as f64 * level).ceil() as usize;
        let quantile = if rank == 0 { 0.0 } else { scores.get(rank - 1).copied().unwrap_or(f64::INFINITY) };
        Calibration { level, quantile, spread_floor, samples: held_out.len() }
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

/// Whether a rule chooses for out-of-range targets at one group size.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Fallback {
    /// Workloads per group.
    pub group_size: usize,
    /// The rule that chooses instead of the model, if one did better.
    pub rule: Option<Rule>,
    /// Inner targets outside their inner fold's training range.
    pub targets: usize,
    /// The averaged model's mean score on them.
    pub model_score: f64,
    /// The best rule's mean score on them.
    pub rule_score: f64,
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
    /// Per group size, whether a rule chooses for out-of-range targets
    /// (empty for KACE, which has no fallback).
    pub fallbacks: Vec<Fallback>,
    /// The intervals.
    pub calibration: Calibration,
}

/// Each inner fold's predictions: `[fold][candidate][configuration]`.
type FoldPredictions = Vec<Vec<Vec<f64>>>;

/// The inner folds of `inner` over `rows` that have rows to train on.
fn inner_folds(rows: &[Colocation], inner: Protocol, seed: u64) -> Vec<Fold> {
    let folds = match inner {
        Protocol::P3 => row_folds(rows, INNER_ROW_FOLDS, seed),
        Protocol::Lowo | Protocol::Lofo => holdout_folds(rows, inner),
    };
    folds.into_iter().filter(|fold| fold.train.iter().any(|g| g.members.len() == 2)).collect()
}

/// Chooses the slowdown model's configurations, fallback rule and
/// intervals on `rows` with inner folds of `inner` (see the module
/// documentation).
pub fn select_slowdown(rows: &[Colocation], inner: Protocol, seed: u64) -> Selection {
    let grid = grid();
    let folds = inner_folds(rows, inner, seed);
    let models: Vec<SlowdownModel> =
        folds.iter().map(|fold| SlowdownModel::fit(&fold.train, &grid).expect("inner folds train on pairs")).collect();
    let predictions: FoldPredictions = folds
        .iter()
        .zip(&models)
        .map(|(fold, model)| fold.candidates.iter().map(|g| model.ensemble_totals(g)).collect())
        .collect();
    let scores: Vec<ConfigScore> = grid
        .iter()
        .enumerate()
        .map(|(c, &config)| ConfigScore { config, score: inner_score(inner, &folds, |f, g| predictions[f][g][c]) })
        .collect();
    let mut order: Vec<usize> = (0..grid.len()).collect();
    order.sort_by(|&a, &b| scores[b].score.total_cmp(&scores[a].score));
    order.truncate(AVERAGED);
    let held_out = held_out_predictions(&folds, |f, g| {
        let logs: Vec<f64> = order.iter().map(|&c| predictions[f][g][c].max(f64::MIN_POSITIVE).ln()).collect();
        let mean = order.iter().map(|&c| predictions[f][g][c]).sum::<f64>() / order.len() as f64;
        (mean, standard_deviation(&logs))
    });
    Selection {
        inner,
        inner_folds: folds.len(),
        chosen: order.iter().map(|&c| grid[c]).collect(),
        scores,
        fallbacks: decide_fallbacks(&folds, &models.iter().map(|m| m.subset(&order)).collect::<Vec<_>>()),
        calibration: Calibration::new(INTERVAL_LEVEL, &held_out),
    }
}

/// For each of [`FALLBACK_GROUP_SIZES`]: the model's and every rule's mean
/// score on the inner targets outside their fold's training range, and the
/// best rule if it beat the model.
fn decide_fallbacks(folds: &[Fold], models: &[SlowdownModel]) -> Vec<Fallback> {
    // Each fold with only its out-of-range targets.
    let flagged: Vec<Fold> = folds
        .iter()
        .map(|fold| {
            let range = TrainingRange::new(&fold.train);
            let targets = fold
                .targets
                .iter()
                .filter(|t| {
                    let member = fold.candidates.iter().flat_map(|g| &g.members).find(|m| &m.metrics.workload == *t);
                    member.is_some_and(|m| range.check(&m.metrics).is_some())
                })
                .cloned()
                .collect();
            Fold { targets, ..fold.clone() }
        })
        .collect();
    FALLBACK_GROUP_SIZES
        .iter()
        .map(|&group_size| {
            let mut targets = 0;
            let (mut model_total, mut rule_totals) = (0.0, [0.0; Rule::ALL.len()]);
            for fold in grouped_folds(&flagged, group_size, Composition::Additive) {
                let model = &models[folds.iter().position(|f| f.name == fold.name).expect("same folds")];
                let candidates = &fold.candidates;
                for target in &fold.targets {
                    targets += 1;
                    model_total += choose(candidates, target, |g| model.predict_total(&candidates[g]));
                    for (total, rule) in rule_totals.iter_mut().zip(Rule::ALL) {
                        *total += choose(candidates, target, |g| rule.score(&candidates[g]));
                    }
                }
            }
            let per_target = |total: f64| total / targets.max(1) as f64;
            let (best, rule_total) = Rule::ALL.into_iter().zip(rule_totals).fold(
                (Rule::ALL[0], f64::NEG_INFINITY),
                |best, (rule, total)| if total > best.1 { (rule, total) } else { best },
            );
            let (model_score, rule_score) = (per_target(model_total), per_target(rule_total));
            Fallback { group_size, rule: (rule_score > model_score).then_some(best), targets, model_score, rule_score }
        })
        .collect()
}

/// KACE's intervals and fallback rule from inner folds of `inner` (it has
/// no configuration to choose).
pub fn select_kace(rows: &[Colocation], inner: Protocol, seed: u64) -> Selection {
    let folds: Vec<Fold> = inner_folds(rows, inner, seed).into_iter().filter(|fold| fold.train.len() >= 2).collect();
    let models: Vec<KaceModel> = folds.iter().map(|fold| KaceModel::fit(&fold.train)).collect();
    let held_out = held_out_predictions(&folds, |f, g| (models[f].predict_total(&folds[f].candidates[g]), 0.0));
    Selection {
        inner,
        inner_folds: folds.len(),
        scores: Vec::new(),
        chosen: Vec::new(),
        fallbacks: Vec::new(),
        calibration: Calibration::new(INTERVAL_LEVEL, &held_out),
    }
}

/// The mean choice score over the folds' targets when candidate `g` of
/// fold `f` scores `score(f, g)`.
fn inner_score(inner: Protocol, folds: &[Fold], score: impl Fn(usize, usize) -> f64) -> f64 {
    let per_fold: Vec<(f64, usize)> = folds
        .iter()
        .enumerate()
        .map(|(f, fold)| {
            let total: f64 = fold.targets.iter().map(|t| choose(&fold.candidates, t, |g| score(f, g))).sum();
            (total / fold.targets.len().max(1) as f64, fold.targets.len())
        })
        .collect();
    mean_over_targets(inner, &per_fold)
}

/// `(measured, predicted, spread)` for every candidate an inner fold held
/// out of training (one that contains a target of the fold).
fn held_out_predictions(folds: &[Fold], predict: impl Fn(usize, usize) -> (f64, f64)) -> Vec<(f64, f64, f64)> {
    let mut held_out = Vec::new();
    for (f, fold) in folds.iter().enumerate() {
        for (g, group) in fold.candidates.iter().enumerate() {
            if fold.targets.iter().any(|t| group.contains(t)) {
                let (predicted, spread) = predict(f, g);
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
        let calibration = Calibration::new(0.8, &held_out);
        // ⌈11 × 0.8⌉ = 9th smallest of 1..10 (× 0.01) over the 0.01 floor.
        assert!((calibration.quantile - 9.0).abs() < 1e-9, "{calibration:?}");
        let (lower, upper) = calibration.interval(50.0, 0.0);
        assert!((lower - 50.0 / 0.09f64.exp()).abs() < 1e-9 && (upper - 50.0 * 0.09f64.exp()).abs() < 1e-9);
        // Wider where the ensemble disagrees.
        let (wide_lower, wide_upper) = calibration.interval(50.0, 0.05);
        assert!(wide_lower < lower && wide_upper > upper);
        // Too few samples for the level: an unbounded interval.
        let few = Calibration::new(0.95, &held_out[..5]);
        assert_eq!(few.interval(50.0, 0.0), (0.0, f64::INFINITY));
        assert_eq!(Calibration::new(0.9, &[]).samples, 0);
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
