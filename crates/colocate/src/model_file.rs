//! Trained models as a versioned JSON document.

use serde::{Deserialize, Serialize};
use tessera_core::Colocation;

use crate::error::ColocateError;
use crate::gbm::GbmParams;
use crate::models::{KaceModel, SlowdownModel, ThroughputModel};

/// The format version this build writes and reads.
pub const MODEL_FILE_VERSION: u32 = 1;

/// The format's name, written in every file.
const FORMAT: &str = "tessera-colocation-model";

/// Fewest colocations a model is trained on.
pub const MIN_TRAINING_ROWS: usize = 3;

/// A trained model of either kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum TrainedModel {
    /// KACE's least squares.
    Kace(KaceModel),
    /// The slowdown model.
    Slowdown(SlowdownModel),
}

impl TrainedModel {
    /// Trains KACE's model on `rows`.
    pub fn kace(rows: &[Colocation]) -> Result<Self, ColocateError> {
        enough(rows)?;
        Ok(TrainedModel::Kace(KaceModel::fit(rows)))
    }

    /// Trains the slowdown model on `rows`.
    pub fn slowdown(rows: &[Colocation], params: &GbmParams) -> Result<Self, ColocateError> {
        enough(rows)?;
        Ok(TrainedModel::Slowdown(SlowdownModel::fit(rows, params)))
    }

    /// The model as a trait object.
    pub fn as_model(&self) -> &dyn ThroughputModel {
        match self {
            TrainedModel::Kace(model) => model,
            TrainedModel::Slowdown(model) => model,
        }
    }
}

fn enough(rows: &[Colocation]) -> Result<(), ColocateError> {
    if rows.len() < MIN_TRAINING_ROWS {
        return Err(ColocateError::NotEnoughData { needed: MIN_TRAINING_ROWS, found: rows.len() });
    }
    Ok(())
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
        for model in [TrainedModel::kace(&rows).unwrap(), TrainedModel::slowdown(&rows, &GbmParams::default()).unwrap()]
        {
            let file = ModelFile::new(model, rows.len());
            let back = ModelFile::from_json(&file.to_json()).unwrap();
            for group in &rows {
                assert_eq!(back.model.as_model().predict_total(group), file.model.as_model().predict_total(group));
            }
        }
    }

    #[test]
    fn refuses_other_versions_and_formats() {
        let file = ModelFile::new(TrainedModel::kace(&rows()).unwrap(), 6);
        let newer = file.to_json().replace("\"version\": 1", "\"version\": 2");
        assert_eq!(ModelFile::from_json(&newer).unwrap_err(), ColocateError::ModelVersion { found: 2, supported: 1 });
        assert!(matches!(ModelFile::from_json("{}"), Err(ColocateError::ModelFormat(_))));
        assert!(matches!(ModelFile::from_json("not json"), Err(ColocateError::ModelFormat(_))));
        assert!(matches!(TrainedModel::kace(&rows()[..2]), Err(ColocateError::NotEnoughData { .. })));
    }
}
