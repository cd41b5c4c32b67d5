//! Trained models, with what their training decided, as a versioned JSON
//! document.

use serde::{Deserialize, Serialize};
use tessera_core::{Colocation, WorkloadMetrics};

use crate::error::ColocateError;
use crate::fallback::{Fallback, FallbackReason};
use crate::folds::Protocol;
use crate::models::{KaceModel, SlowdownModel, ThroughputModel};
use crate::novelty::TrainingWorkloads;
use crate::range::{OutOfRange, TrainingRange};
use crate::rules::Rule;
use crate::selection::{select_kace, select_slowdown, Selection};

/// The format version this build writes and reads (4: the model keeps its
/// training workloads, and each size's fallback depends on how novel the
/// target is; 3: the slowdown model
/// learns from groups of any size and records the sizes, intervals are
/// calibrated per group size; 2: it composed pair slowdowns, every model
/// carries its selection, intervals, training range and fallback rule).
pub const MODEL_FILE_VERSION: u32 = 4;

/// The format's name, written in every file.
const FORMAT: &str = "tessera-colocation-model";

/// Fewest colocations a model is trained on.
pub const MIN_TRAINING_ROWS: usize = 3;

/// The kinds of model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum ModelKind {
    /// Per-workload retained fractions by gradient-boosted trees.
    ///
    /// See [`SlowdownModel`].
    Slowdown,
    /// KACE's least squares on group features.
    ///
    /// See [`KaceModel`].
    Kace,
}

/// A fitted model of either kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum FittedModel {
    /// KACE's least squares.
    Kace(KaceModel),
    /// The slowdown model.
    Slowdown(SlowdownModel),
}

/// A model, what its training decided, and what it was trained on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainedModel {
    /// The model.
    pub model: FittedModel,
    /// Configurations, fallback rule and intervals, chosen on inner folds
    /// of the training rows.
    pub selection: Selection,
    /// The training workloads' range.
    pub range: TrainingRange,
    /// The training workloads, to measure a target's novelty against.
    pub workloads: TrainingWorkloads,
    /// The group sizes it was trained on, ascending.
    pub sizes: Vec<usize>,
}

impl TrainedModel {
    /// Trains a model of `kind` on `rows`, choosing what it chooses with
    /// inner folds of `inner` (LOFO for a model meant for new workloads).
    pub fn train(kind: ModelKind, rows: &[Colocation], inner: Protocol, seed: u64) -> Result<Self, ColocateError> {
        if rows.len() < MIN_TRAINING_ROWS {
            return Err(ColocateError::NotEnoughData { needed: MIN_TRAINING_ROWS, found: rows.len() });
        }
        let (model, selection) = match kind {
            ModelKind::Kace => (FittedModel::Kace(KaceModel::fit(rows)), select_kace(rows, inner, seed)),
            ModelKind::Slowdown => {
                let selection = select_slowdown(rows, inner, seed);
                let model = SlowdownModel::fit(rows, &selection.chosen).ok_or(ColocateError::NoPairs)?;
                (FittedModel::Slowdown(model), selection)
            }
        };
        let mut sizes: Vec<usize> = rows.iter().map(|g| g.members.len()).collect();
        sizes.sort_unstable();
        sizes.dedup();
        Ok(TrainedModel {
            model,
            selection,
            range: TrainingRange::new(rows),
            workloads: TrainingWorkloads::new(rows),
            sizes,
        })
    }

    /// Trains KACE's model on `rows` (inner LOFO folds for its intervals).
    pub fn kace(rows: &[Colocation]) -> Result<Self, ColocateError> {
        TrainedModel::train(ModelKind::Kace, rows, Protocol::Lofo, 0)
    }

    /// Trains the slowdown model on `rows` (inner LOFO folds).
    pub fn slowdown(rows: &[Colocation], seed: u64) -> Result<Self, ColocateError> {
        TrainedModel::train(ModelKind::Slowdown, rows, Protocol::Lofo, seed)
    }

    /// The model as a trait object.
    pub fn as_model(&self) -> &dyn ThroughputModel {
        match &self.model {
            FittedModel::Kace(model) => model,
            FittedModel::Slowdown(model) => model,
        }
    }

    /// How the model predicts groups of `size`, in words (measured, from
    /// pairs, or beyond the sizes trained on).
    pub fn basis_in_words(&self, size: usize) -> String {
        self.as_model().basis(size).describe(size, &self.sizes)
    }

    /// The interval around the predicted total of `group` (samples/s) at
    /// the calibrated level.
    pub fn interval(&self, group: &Colocation) -> (f64, f64) {
        let model = self.as_model();
        let calibration = self.selection.calibration(group.members.len());
        calibration.interval(model.predict_total(group), model.spread(group))
    }

    /// The rule that chooses groups of `group_size` for `target` instead of
    /// the model, and why: the one the inner folds found choosing better
    /// for targets as novel, or the best rule when the target is more novel
    /// than any the model was tested on (see [`Fallback::rule_for`]; the
    /// largest size decided below it for a size not decided). `None` for
    /// KACE, which has no fallback.
    pub fn fallback_for(&self, group_size: usize, target: &WorkloadMetrics) -> Option<(Rule, FallbackReason)> {
        self.fallback_decision(group_size)?.rule_for(self.novelty(target))
    }

    /// How far `target` lies from the training workloads (see
    /// [`TrainingWorkloads::novelty`]): 0 for a workload trained on.
    pub fn novelty(&self, target: &WorkloadMetrics) -> f64 {
        self.workloads.novelty(target)
    }

    /// What the inner folds decided about a fallback rule for groups of
    /// `group_size` (the largest size decided below it for a size not
    /// decided); `None` when nothing was decided there (KACE).
    pub fn fallback_decision(&self, group_size: usize) -> Option<&Fallback> {
        self.selection.fallbacks.iter().take_while(|f| f.group_size <= group_size).last()
    }

    /// The first metric of `target` beyond the training workloads' range
    /// (see [`TrainingRange::check`]): a prediction for it extrapolates.
    pub fn out_of_range(&self, target: &WorkloadMetrics) -> Option<OutOfRange> {
        self.range.check(target)
    }
}

/// The document: format, version, how much data trained it, the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelFile {
    /// Always `tessera-colocation-model`.
    pub format: String,
    /// `MODEL_FILE_VERSION`.
    pub version: u32,
    /// Colocations it was trained on.
    pub trained_on: usize,
    /// The model.
    pub model: TrainedModel,
}

impl ModelFile {
    /// Wraps a model trained on `trained_on` colocations.
    pub fn new(model: TrainedModel, trained_on: usize) -> Self {
        ModelFile { format: FORMAT.to_string(), version: MODEL_FILE_VERSION, trained_on, model }
    }

    /// The document as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("models serialize")
    }

    /// Reads a document, checking its format and version first.
    pub fn from_json(text: &str) -> Result<Self, ColocateError> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| ColocateError::ModelFormat(e.to_string()))?;
        if value.get("format").and_then(|f| f.as_str()) != Some(FORMAT) {
            return Err(ColocateError::ModelFormat(format!("field 'format' is not \"{FORMAT}\"")));
        }
        match value.get("version").and_then(|v| v.as_u64()) {
            Some(version) if version == u64::from(MODEL_FILE_VERSION) => {}
            Some(found) => return Err(ColocateError::ModelVersion { found, supported: MODEL_FILE_VERSION }),
            None => return Err(ColocateError::ModelFormat("field 'version' is missing".to_string())),
        }
        serde_json::from_value(value).map_err(|e| ColocateError::ModelFormat(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::tests::{pair, workload};

    fn rows() -> Vec<Colocation> {
        (0..6)
            .map(|i| {
                let f = f64::from(i);
                pair(
                    workload(&format!("a{i}_batch1-inf"), 100.0 + f, 40.0 + 5.0 * f, 10.0, 1.0 + f),
                    60.0 - f,
                    workload(&format!("b{i}_batch1-inf"), 80.0, 30.0 + f, 20.0 + f, 2.0),
                    50.0 - 2.0 * f,
                )
            })
            .collect()
    }

    #[test]
    fn round_trips_both_kinds_with_identical_predictions() {
        let rows = rows();
        for model in [TrainedModel::kace(&rows).unwrap(), TrainedModel::slowdown(&rows, 0).unwrap()] {
            let file = ModelFile::new(model, rows.len());
            let back = ModelFile::from_json(&file.to_json()).unwrap();
            assert_eq!(back, file);
            for group in &rows {
                assert_eq!(back.model.as_model().predict_total(group), file.model.as_model().predict_total(group));
                assert_eq!(back.model.interval(group), file.model.interval(group));
            }
        }
    }

    #[test]
    fn a_model_trained_on_too_few_rows_for_intervals_reads_back() {
        let model = TrainedModel::slowdown(&rows()[..4], 0).unwrap();
        assert!(model.selection.calibrations.iter().all(|c| c.quantile.is_infinite()), "{:?}", model.selection);
        let file = ModelFile::new(model, 4);
        assert!(file.to_json().contains("\"quantile\": null"));
        assert_eq!(ModelFile::from_json(&file.to_json()).unwrap(), file);
    }

    #[test]
    fn refuses_other_versions_and_formats() {
        let file = ModelFile::new(TrainedModel::kace(&rows()).unwrap(), 6);
        let older = file.to_json().replace("\"version\": 4", "\"version\": 3");
        assert_eq!(ModelFile::from_json(&older).unwrap_err(), ColocateError::ModelVersion { found: 3, supported: 4 });
        assert!(matches!(ModelFile::from_json("{}"), Err(ColocateError::ModelFormat(_))));
        assert!(matches!(ModelFile::from_json("not json"), Err(ColocateError::ModelFormat(_))));
        assert!(matches!(TrainedModel::kace(&rows()[..2]), Err(ColocateError::NotEnoughData { .. })));
    }

    #[test]
    fn a_rule_chooses_at_the_sizes_where_training_found_it_better() {
        let rows = rows();
        let model = TrainedModel::slowdown(&rows, 0).unwrap();
        let mut decided = model.clone();
        let fallback = |group_size, rule| Fallback {
            group_size,
            rule,
            beyond_novelty: None,
            targets: 3,
            model_score: 0.8,
            rule_score: 0.9,
            standard_error: 0.01,
            tested_novelty: f64::MAX,
            untested_rule: Rule::LowestMemory,
        };
        decided.selection.fallbacks = vec![fallback(2, Some(Rule::HighestSmThroughput)), fallback(4, None)];
        let target = &rows[0].members[0].metrics;
        let sizes: Vec<Option<Rule>> = (2..=5).map(|k| decided.fallback_for(k, target).map(|(rule, _)| rule)).collect();
        assert_eq!(sizes, [Some(Rule::HighestSmThroughput), Some(Rule::HighestSmThroughput), None, None]);
        // A target further out than the inner folds tested: the best rule.
        decided.selection.fallbacks[1].tested_novelty = model.novelty(target) - 1e-9;
        assert_eq!(decided.fallback_for(4, target), Some((Rule::LowestMemory, FallbackReason::Untested)));
        assert_eq!(model.novelty(target), 0.0, "a workload trained on");
        assert!(TrainedModel::kace(&rows).unwrap().selection.fallbacks.is_empty(), "KACE has no fallback");
    }

    #[test]
    fn a_workload_far_outside_the_training_range_is_named() {
        let model = TrainedModel::slowdown(&rows(), 0).unwrap();
        let inside = &rows()[2].members[0].metrics;
        assert_eq!(model.out_of_range(inside), None);
        let mut huge = inside.clone();
        huge.memory_gb = 60.0;
        assert_eq!(model.out_of_range(&huge).map(|o| o.metric), Some("memory footprint GB"));
        // Just beyond the range, within the tolerance, is still inside.
        let mut near = inside.clone();
        near.memory_gb = 6.0 + 0.05 * 5.0;
        assert_eq!(model.out_of_range(&near), None);
    }
}
