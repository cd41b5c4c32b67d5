//! How far a workload lies from the workloads a model was trained on: the
//! measure that says when a prediction extrapolates.
//!
//! Each of the ten metrics is put on a log scale (`sign(x)·ln(1 + |x|)`,
//! so that thread counts and percentages weigh alike) and divided by its
//! standard deviation over the training workloads. A workload's *novelty*
//! is the root-mean-square distance, in those units, to the nearest
//! training workload: 0 for a workload trained on, about 1 for one as far
//! from every training workload as the training workloads typically lie
//! from their mean.

use serde::{Deserialize, Serialize};
use tessera_core::{Colocation, WorkloadMetrics};

use crate::features::{metrics, METRICS};

/// The least spread a metric is measured in (log units): a metric every
/// training workload shares still tells a different value apart without
/// making any difference infinite.
const LEAST_SPREAD: f64 = 0.05;

/// The training workloads, on the scale novelty is measured in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainingWorkloads {
    /// Each metric's spread (standard deviation of its log-scaled value
    /// over the training workloads, at least 0.05).
    pub spread: Vec<f64>,
    /// Each distinct training workload's log-scaled metrics.
    pub points: Vec<Vec<f64>>,
}

/// A metric value on the log scale.
fn log_scaled(value: f64) -> f64 {
    value.signum() * value.abs().ln_1p()
}

/// A workload's metrics on the log scale.
fn point(workload: &WorkloadMetrics) -> [f64; METRICS] {
    metrics(workload).map(log_scaled)
}

impl TrainingWorkloads {
    /// The distinct workloads (by name) of `rows`.
    pub fn new(rows: &[Colocation]) -> Self {
        let mut named: Vec<(&str, [f64; METRICS])> =
            rows.iter().flat_map(|g| &g.members).map(|m| (m.metrics.workload.as_str(), point(&m.metrics))).collect();
        named.sort_by(|a, b| a.0.cmp(b.0));
        named.dedup_by(|a, b| a.0 == b.0);
        let count = named.len().max(1) as f64;
        let spread = (0..METRICS)
            .map(|i| {
                let mean = named.iter().map(|(_, p)| p[i]).sum::<f64>() / count;
                let variance = named.iter().map(|(_, p)| (p[i] - mean).powi(2)).sum::<f64>() / count;
                variance.sqrt().max(LEAST_SPREAD)
            })
            .collect();
        TrainingWorkloads { spread, points: named.into_iter().map(|(_, p)| p.to_vec()).collect() }
    }

    /// The workload's novelty (see the module documentation); infinite when
    /// there are no training workloads.
    pub fn novelty(&self, workload: &WorkloadMetrics) -> f64 {
        let own = point(workload);
        self.points
            .iter()
            .map(|trained| {
                let squares: f64 = (0..METRICS).map(|i| ((own[i] - trained[i]) / self.spread[i]).powi(2)).sum();
                (squares / METRICS as f64).sqrt()
            })
            .fold(f64::INFINITY, f64::min)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::tests::{pair, workload};

    #[test]
    fn a_workload_trained_on_is_not_novel_and_a_far_one_is_further_than_a_near_one() {
        let a = workload("a_batch1-inf", 100.0, 50.0, 10.0, 1.0);
        let b = workload("b_batch1-inf", 300.0, 70.0, 30.0, 4.0);
        let trained = TrainingWorkloads::new(&[pair(a.clone(), 50.0, b.clone(), 30.0)]);
        assert_eq!(trained.novelty(&a), 0.0);
        assert_eq!(trained.novelty(&b), 0.0);
        let near = workload("c_batch1-inf", 110.0, 52.0, 11.0, 1.1);
        let far = workload("d_batch1-inf", 5000.0, 99.0, 90.0, 60.0);
        let (near, far) = (trained.novelty(&near), trained.novelty(&far));
        assert!(near > 0.0 && near < far, "near {near}, far {far}");
        assert_eq!(TrainingWorkloads::new(&[]).novelty(&a), f64::INFINITY);
    }
}
