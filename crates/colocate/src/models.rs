//! Throughput models of a colocation group, behind one trait.

use std::cell::OnceCell;
use std::collections::HashMap;

use tessera_core::{Colocation, WorkloadMetrics};

use crate::features::{group_features, FeatureSet, MAX_FEATURES, METRIC_NAMES};
use crate::gbm::{Gbm, GbmParams};
use crate::groups::compose_slowdowns;
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

    /// How much the model's own parts disagree on `group` (the standard
    /// deviation of their log totals); 0 (the default) for a model of one
    /// part.
    fn spread(&self, _group: &Colocation) -> f64 {
        0.0
    }

    /// The same model, faster on groups of `pool`'s workloads (which it
    /// may assume do not change); `None` (the default) when it would not
    /// be faster.
    fn for_pool<'a>(&'a self, _pool: &'a [WorkloadMetrics]) -> Option<Box<dyn ThroughputModel + 'a>> {
        None
    }
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

/// One configuration of the slowdown model: the features its trees see
/// and their hyper-parameters.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SlowdownConfig {
    /// The features.
    pub features: FeatureSet,
    /// The trees' hyper-parameters.
    pub params: GbmParams,
}

/// One fitted configuration of the ensemble.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct Fitted {
    features: FeatureSet,
    gbm: Gbm,
}

/// The slowdown model: how much longer each workload takes per sample
/// beside one partner than alone, learned from measured pairs by monotone
/// gradient-boosted trees (the log of the slowdown, so that halving and
/// doubling weigh the same), averaged over an ensemble of configurations.
/// A member of a larger group composes its slowdowns beside each partner by
/// adding the delays ([`compose_slowdowns`]); it keeps `1 / slowdown` of
/// its throughput, and the group keeps Σ exclusive × that.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SlowdownModel {
    ensemble: Vec<Fitted>,
}

impl SlowdownModel {
    /// Fits one model per configuration on the measured pairs of `rows`
    /// (larger groups are not used: their members' pair slowdowns are not
    /// known apart); `None` when `rows` hold no pair or `configs` is empty.
    pub fn fit(rows: &[Colocation], configs: &[SlowdownConfig]) -> Option<Self> {
        let pairs: Vec<(&WorkloadMetrics, &WorkloadMetrics, f64)> = rows
            .iter()
            .filter(|g| g.members.len() == 2)
            .flat_map(|g| {
                let [a, b] = [&g.members[0], &g.members[1]];
                [(&a.metrics, &b.metrics, a.retained_fraction()), (&b.metrics, &a.metrics, b.retained_fraction())]
            })
            .filter(|(_, _, fraction)| fraction.is_finite() && *fraction > 0.0)
            .collect();
        if pairs.is_empty() || configs.is_empty() {
            return None;
        }
        let y: Vec<f64> = pairs.iter().map(|(_, _, fraction)| -fraction.ln()).collect();
        let mut buffer = [0.0; MAX_FEATURES];
        let ensemble = configs
            .iter()
            .map(|config| {
                let x: Vec<Vec<f64>> = pairs
                    .iter()
                    .map(|(own, partner, _)| config.features.write(own, partner, &mut buffer).to_vec())
                    .collect();
                let gbm = Gbm::fit_monotone(&x, &y, &config.params, &config.features.monotone());
                Fitted { features: config.features, gbm }
            })
            .collect();
        Some(SlowdownModel { ensemble })
    }

    /// Each ensemble member's log slowdown of `own` beside `partner`.
    fn log_slowdowns<'a>(
        &'a self,
        own: &'a WorkloadMetrics,
        partner: &'a WorkloadMetrics,
    ) -> impl Iterator<Item = f64> + 'a {
        let mut buffer = [0.0; MAX_FEATURES];
        self.ensemble.iter().map(move |fitted| fitted.gbm.predict(fitted.features.write(own, partner, &mut buffer)))
    }

    /// Each ensemble member's predicted throughput of each member of
    /// `group`, samples/s: `[configuration][member]`.
    pub fn member_predictions(&self, group: &Colocation) -> Vec<Vec<f64>> {
        self.compose(group, |i, j, out| {
            let (own, partner) = (&group.members[i].metrics, &group.members[j].metrics);
            for (slot, log) in out.iter_mut().zip(self.log_slowdowns(own, partner)) {
                *slot = log;
            }
        })
    }

    /// Each ensemble member's throughput of each member of `group` from
    /// `log_slowdowns(i, j, out)`, which writes each ensemble member's log
    /// slowdown of member `i` beside member `j` into `out`.
    fn compose(&self, group: &Colocation, log_slowdowns: impl Fn(usize, usize, &mut [f64])) -> Vec<Vec<f64>> {
        let (members, size) = (&group.members, self.ensemble.len());
        let mut logs = vec![0.0; size];
        // slowdowns[e][partner] for the member at hand.
        let mut slowdowns = vec![Vec::with_capacity(members.len()); size];
        let mut predictions = vec![Vec::with_capacity(members.len()); size];
        for (i, own) in members.iter().enumerate() {
            slowdowns.iter_mut().for_each(Vec::clear);
            for j in (0..members.len()).filter(|&j| j != i) {
                log_slowdowns(i, j, &mut logs);
                for (list, log) in slowdowns.iter_mut().zip(&logs) {
                    list.push(log.exp());
                }
            }
            for (prediction, list) in predictions.iter_mut().zip(&slowdowns) {
                prediction.push(own.metrics.exclusive_rps / compose_slowdowns(list.iter().copied()));
            }
        }
        predictions
    }

    /// Each ensemble member's predicted summed throughput of `group`,
    /// samples/s.
    pub fn ensemble_totals(&self, group: &Colocation) -> Vec<f64> {
        if let [a, b] = group.members.as_slice() {
            // Pairs, the hot loop of partner ranking: no allocation per
            // member.
            let ab = self.log_slowdowns(&a.metrics, &b.metrics);
            let ba = self.log_slowdowns(&b.metrics, &a.metrics);
            return ab
                .zip(ba)
                .map(|(ab, ba)| a.metrics.exclusive_rps / ab.exp() + b.metrics.exclusive_rps / ba.exp())
                .collect();
        }
        self.member_predictions(group).iter().map(|p| p.iter().sum()).collect()
    }

    /// The model restricted to the ensemble members at `indices`.
    pub fn subset(&self, indices: &[usize]) -> SlowdownModel {
        SlowdownModel { ensemble: indices.iter().map(|&i| self.ensemble[i].clone()).collect() }
    }

    /// The configurations of the ensemble, in order.
    pub fn feature_sets(&self) -> Vec<FeatureSet> {
        self.ensemble.iter().map(|fitted| fitted.features).collect()
    }
}

/// The mean of `values`.
fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

/// The standard deviation of the logs of an ensemble's totals.
fn log_spread(totals: &[f64]) -> f64 {
    let logs: Vec<f64> = totals.iter().map(|t| t.max(f64::MIN_POSITIVE).ln()).collect();
    let center = mean(&logs);
    (logs.iter().map(|l| (l - center).powi(2)).sum::<f64>() / logs.len() as f64).sqrt()
}

/// The ensemble's mean throughput of each member.
fn mean_members(predictions: &[Vec<f64>], members: usize) -> Vec<f64> {
    (0..members).map(|i| predictions.iter().map(|p| p[i]).sum::<f64>() / predictions.len() as f64).collect()
}

impl ThroughputModel for SlowdownModel {
    fn name(&self) -> &'static str {
        "slowdown"
    }

    /// The ensemble's mean.
    fn predict_total(&self, group: &Colocation) -> f64 {
        mean(&self.ensemble_totals(group))
    }

    /// The ensemble's mean for each member.
    fn predict_members(&self, group: &Colocation) -> Option<Vec<f64>> {
        Some(mean_members(&self.member_predictions(group), group.members.len()))
    }

    /// The spread of the ensemble: the standard deviation of the log of
    /// its members' totals (0 for one member).
    fn spread(&self, group: &Colocation) -> f64 {
        log_spread(&self.ensemble_totals(group))
    }

    /// The same model with every pair of `pool` workloads predicted once,
    /// when first needed.
    fn for_pool<'a>(&'a self, pool: &'a [WorkloadMetrics]) -> Option<Box<dyn ThroughputModel + 'a>> {
        let index = pool.iter().enumerate().map(|(i, w)| (w.workload.as_str(), i)).collect();
        let cells = (0..pool.len() * pool.len()).map(|_| OnceCell::new()).collect();
        Some(Box::new(PooledSlowdown { model: self, pool, index, cells }))
    }

    /// The features the trees split on most (share of total gain over the
    /// ensemble), with their values for the first member beside the second.
    fn drivers(&self, group: &Colocation, top: usize) -> Vec<Driver> {
        let mut drivers: Vec<Driver> = Vec::new();
        let total: f64 = self.ensemble.iter().flat_map(|f| f.gbm.feature_gains()).sum::<f64>().max(f64::MIN_POSITIVE);
        let mut buffer = [0.0; MAX_FEATURES];
        for fitted in &self.ensemble {
            let values = match group.members.as_slice() {
                [own, partner, ..] => fitted.features.write(&own.metrics, &partner.metrics, &mut buffer).to_vec(),
                _ => vec![0.0; fitted.features.width()],
            };
            for ((feature, value), gain) in
                fitted.features.names().into_iter().zip(values).zip(fitted.gbm.feature_gains())
            {
                match drivers.iter_mut().find(|d| d.feature == feature) {
                    Some(driver) => driver.weight += gain / total,
                    None => drivers.push(Driver { feature, value, weight: gain / total }),
                }
            }
        }
        strongest(drivers, top)
    }
}

/// A slowdown model over a fixed pool of workloads: each ordered pair's log
/// slowdowns are predicted once, when first needed, so ranking many groups
/// of the same workloads walks the trees once per pair, not once per group.
struct PooledSlowdown<'a> {
    model: &'a SlowdownModel,
    pool: &'a [WorkloadMetrics],
    index: HashMap<&'a str, usize>,
    /// `cells[own × pool + partner]`: each ensemble member's log slowdown.
    cells: Vec<OnceCell<Box<[f64]>>>,
}

impl PooledSlowdown<'_> {
    /// Each ensemble member's throughput of each member of `group`, from
    /// the pool's pairs; `None` when a member is not the pool's workload.
    fn member_predictions(&self, group: &Colocation) -> Option<Vec<Vec<f64>>> {
        let positions: Vec<usize> = group
            .members
            .iter()
            .map(|m| self.index.get(m.metrics.workload.as_str()).copied().filter(|&i| self.pool[i] == m.metrics))
            .collect::<Option<_>>()?;
        let n = self.pool.len();
        Some(self.model.compose(group, |i, j, out| {
            let (own, partner) = (positions[i], positions[j]);
            let logs = self.cells[own * n + partner]
                .get_or_init(|| self.model.log_slowdowns(&self.pool[own], &self.pool[partner]).collect());
            out.copy_from_slice(logs);
        }))
    }

    fn totals(&self, group: &Colocation) -> Vec<f64> {
        match self.member_predictions(group) {
            Some(predictions) => predictions.iter().map(|p| p.iter().sum()).collect(),
            None => self.model.ensemble_totals(group),
        }
    }
}

impl ThroughputModel for PooledSlowdown<'_> {
    fn name(&self) -> &'static str {
        self.model.name()
    }

    fn predict_total(&self, group: &Colocation) -> f64 {
        mean(&self.totals(group))
    }

    fn predict_members(&self, group: &Colocation) -> Option<Vec<f64>> {
        match self.member_predictions(group) {
            Some(predictions) => Some(mean_members(&predictions, group.members.len())),
            None => self.model.predict_members(group),
        }
    }

    fn spread(&self, group: &Colocation) -> f64 {
        log_spread(&self.totals(group))
    }

    fn drivers(&self, group: &Colocation, top: usize) -> Vec<Driver> {
        self.model.drivers(group, top)
    }
}
