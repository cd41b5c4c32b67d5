//! Throughput models of a colocation group, behind one trait.

use tessera_core::Colocation;

use crate::features::{group_features, member_feature_names, member_features, METRIC_NAMES};
use crate::gbm::{Gbm, GbmParams};
use crate::linear::{least_squares, mean_and_std, LinearFit, Standardizer};

/// A feature that drove a prediction, for people.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Driver {
    /// The feature's name.
    pub feature: String,
    /// Its value in the group.
    pub value: f64,
    /// Its share of the explanation (sign: direction for linear models).
    pub weight: f64,
}

/// Predicts how much throughput a group of colocated workloads keeps.
pub trait ThroughputModel {
    /// The model's name in tables.
    fn name(&self) -> &'static str;

    /// Predicted summed throughput of the group, samples/s.
    fn predict_total(&self, group: &Colocation) -> f64;

    /// Predicted throughput of each member, samples/s, in member order;
    /// `None` (the default) for a model that predicts only the group's
    /// total.
    fn predict_members(&self, _group: &Colocation) -> Option<Vec<f64>> {
        None
    }

    /// The `top` features that drove the prediction for `group`.
    fn drivers(&self, group: &Colocation, top: usize) -> Vec<Driver>;
}

/// The `top` entries by absolute weight.
fn strongest(mut drivers: Vec<Driver>, top: usize) -> Vec<Driver> {
    drivers.sort_by(|a, b| b.weight.abs().total_cmp(&a.weight.abs()));
    drivers.truncate(top);
    drivers
}

/// KACE (SoCC'24): least squares of the summed colocated throughput on the
/// group features, both z-scored with the training rows' mean and sample
/// standard deviation. It predicts the group's total only, not what each
/// member keeps.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct KaceModel {
    features: Standardizer,
    label_mean: f64,
    label_std: f64,
    fit: LinearFit,
}

impl KaceModel {
    /// Fits on measured groups (at least two).
    pub fn fit(rows: &[Colocation]) -> Self {
        let x: Vec<Vec<f64>> = rows.iter().map(|g| group_features(g).to_vec()).collect();
        let y: Vec<f64> = rows.iter().map(Colocation::total_rps).collect();
        let features = Standardizer::fit(&x);
        let (label_mean, label_std) = mean_and_std(&y);
        let z: Vec<Vec<f64>> = x.iter().map(|row| features.apply(row)).collect();
        let zy: Vec<f64> = y.iter().map(|v| (v - label_mean) / label_std).collect();
        KaceModel { features, label_mean, label_std, fit: least_squares(&z, &zy) }
    }
}

impl ThroughputModel for KaceModel {
    fn name(&self) -> &'static str {
        "kace"
    }

    fn predict_total(&self, group: &Colocation) -> f64 {
        let z = self.features.apply(&group_features(group));
        self.fit.predict(&z) * self.label_std + self.label_mean
    }

    /// Each feature's contribution, in samples/s away from the training
    /// mean: coefficient × standardized value.
    fn drivers(&self, group: &Colocation, top: usize) -> Vec<Driver> {
        let raw = group_features(group);
        let z = self.features.apply(&raw);
        let drivers = METRIC_NAMES
            .iter()
            .zip(raw)
            .zip(z.iter().zip(&self.fit.coef))
            .map(|((name, value), (z, coef))| Driver {
                feature: format!("group {name}"),
                value,
                weight: coef * z * self.label_std,
            })
            .collect();
        strongest(drivers, top)
    }
}

/// The slowdown model: each member's retained fraction (colocated /
/// exclusive throughput) from its own metrics and its partners', by
/// gradient-boosted trees; the group keeps Σ exclusive × fraction. Works for
/// any group size.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SlowdownModel {
    gbm: Gbm,
}

impl SlowdownModel {
    /// Fits on measured groups: one sample per member.
    pub fn fit(rows: &[Colocation], params: &GbmParams) -> Self {
        let mut x = Vec::new();
        let mut y = Vec::new();
        for group in rows {
            for (index, member) in group.members.iter().enumerate() {
                x.push(member_features(group, index).to_vec());
                y.push(member.retained_fraction());
            }
        }
        SlowdownModel { gbm: Gbm::fit(&x, &y, params) }
    }

    /// Predicted retained fraction of each member (never negative).
    pub fn predict_fractions(&self, group: &Colocation) -> Vec<f64> {
        (0..group.members.len()).map(|i| self.gbm.predict(&member_features(group, i)).max(0.0)).collect()
    }

    /// The underlying trees, for explanations.
    pub fn gbm(&self) -> &Gbm {
        &self.gbm
    }
}

impl ThroughputModel for SlowdownModel {
    fn name(&self) -> &'static str {
        "slowdown"
    }

    fn predict_total(&self, group: &Colocation) -> f64 {
        // Allocation-free: this is the hot loop of partner ranking, and
        // pairs, the common case, walk the trees once for both members.
        if let [a, b] = group.members.as_slice() {
            let [fa, fb] = self.gbm.predict_rows([&member_features(group, 0), &member_features(group, 1)]);
            return a.metrics.exclusive_rps * fa.max(0.0) + b.metrics.exclusive_rps * fb.max(0.0);
        }
        (0..group.members.len())
            .map(|i| group.members[i].metrics.exclusive_rps * self.gbm.predict(&member_features(group, i)).max(0.0))
            .sum()
    }

    fn predict_members(&self, group: &Colocation) -> Option<Vec<f64>> {
        Some(
            group.members.iter().zip(self.predict_fractions(group)).map(|(m, f)| m.metrics.exclusive_rps * f).collect(),
        )
    }

    /// The features the trees split on most (share of total gain), with
    /// their values for the group's first member.
    fn drivers(&self, group: &Colocation, top: usize) -> Vec<Driver> {
        let gains = self.gbm.feature_gains();
        let total: f64 = gains.iter().sum::<f64>().max(f64::MIN_POSITIVE);
        let values = member_features(group, 0);
        let drivers = member_feature_names()
            .into_iter()
            .zip(values)
            .zip(gains)
            .map(|((feature, value), gain)| Driver { feature, value, weight: gain / total })
            .collect();
        strongest(drivers, top)
    }
}
