//! The range of the workloads a model was trained on.

use serde::{Deserialize, Serialize};
use tessera_core::{Colocation, WorkloadMetrics};

use crate::features::{metrics, METRICS, METRIC_NAMES};

/// Beyond the training range by more than this share of its width, a
/// workload is out of range.
pub const RANGE_TOLERANCE: f64 = 0.1;

/// Each of the ten metrics' least and greatest value over the training
/// workloads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainingRange {
    /// Least values, in the order of the metric names.
    pub min: Vec<f64>,
    /// Greatest values.
    pub max: Vec<f64>,
}

/// A workload metric outside the training range.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OutOfRange {
    /// The metric's name.
    pub metric: &'static str,
    /// The workload's value.
    pub value: f64,
    /// The training range's least value.
    pub min: f64,
    /// The training range's greatest value.
    pub max: f64,
}

impl TrainingRange {
    /// The range of the workloads of `rows`.
    pub fn new(rows: &[Colocation]) -> Self {
        let mut range = TrainingRange { min: vec![f64::INFINITY; METRICS], max: vec![f64::NEG_INFINITY; METRICS] };
        for member in rows.iter().flat_map(|g| &g.members) {
            for (i, value) in metrics(&member.metrics).into_iter().enumerate() {
                range.min[i] = range.min[i].min(value);
                range.max[i] = range.max[i].max(value);
            }
        }
        range
    }

    /// The first metric of `workload` beyond the range by more than
    /// [`RANGE_TOLERANCE`] of its width, if any.
    pub fn check(&self, workload: &WorkloadMetrics) -> Option<OutOfRange> {
        metrics(workload).into_iter().enumerate().find_map(|(i, value)| {
            let (min, max) = (self.min[i], self.max[i]);
            let slack = RANGE_TOLERANCE * (max - min);
            (value < min - slack || value > max + slack).then_some(OutOfRange {
                metric: METRIC_NAMES[i],
                value,
                min,
                max,
            })
        })
    }
}
