//! Throughput models of a colocation group, behind one trait.

use std::cell::OnceCell;
use std::collections::HashMap;

use tessera_core::{Colocation, WorkloadMetrics};

use crate::features::{group_features, FeatureSet, Partners, MAX_FEATURES, METRIC_NAMES};
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

    /// The retained fraction (predicted over alone) of each member before
    /// the model clipped it to at most 1, in member order; `None` (the
    /// default) for a model that predicts only the group's total.
    fn retained_before_clipping(&self, _group: &Colocation) -> Option<Vec<f64>> {
        None
    }

    /// How the model predicts groups of `size` workloads.
    fn basis(&self, size: usize) -> Basis;

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
    /// The group sizes trained on, ascending.
    sizes: Vec<usize>,
}

impl KaceModel {
    /// Fits on measured groups (at least two), of any sizes: the group
    /// features are sums and means whatever the size.
    pub fn fit(rows: &[Colocation]) -> Self {
        let x: Vec<Vec<f64>> = rows.iter().map(|g| group_features(g).to_vec()).collect();
        let y: Vec<f64> = rows.iter().map(Colocation::total_rps).collect();
        let features = Standardizer::fit(&x);
        let (label_mean, label_std) = mean_and_std(&y);
        let z: Vec<Vec<f64>> = x.iter().map(|row| features.apply(row)).collect();
        let zy: Vec<f64> = y.iter().map(|v| (v - label_mean) / label_std).collect();
        let mut sizes: Vec<usize> = rows.iter().map(|g| g.members.len()).collect();
        sizes.sort_unstable();
        sizes.dedup();
        KaceModel { features, label_mean, label_std, fit: least_squares(&z, &zy), sizes }
    }
}

impl ThroughputModel for KaceModel {
    fn name(&self) -> &'static str {
        "kace"
    }

    /// Measured for the sizes trained on; extrapolated (the same sums and
    /// means) for any other.
    fn basis(&self, size: usize) -> Basis {
        Basis::of(size, &self.sizes, false)
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

/// How a model predicts groups of one size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Basis {
    /// Groups of this size were measured and trained on.
    Measured,
    /// Groups of this size were not measured but pairs were: each member's
    /// slowdown beside each partner alone is predicted, and the delays are
    /// added ([`compose_slowdowns`]), an assumption.
    ComposedFromPairs,
    /// Neither groups of this size nor pairs were measured: the model
    /// trained on other sizes predicts beyond them.
    Extrapolated,
}

impl Basis {
    /// The basis of groups of `size` for a model trained on groups of
    /// `trained` sizes, which predicts from pairs when `composes` and the
    /// size was not measured.
    pub fn of(size: usize, trained: &[usize], composes: bool) -> Basis {
        if trained.contains(&size) {
            Basis::Measured
        } else if composes && trained.contains(&2) {
            Basis::ComposedFromPairs
        } else {
            Basis::Extrapolated
        }
    }

    /// The basis in words, for groups of `size` and a model trained on
    /// groups of `trained` sizes.
    pub fn describe(self, size: usize, trained: &[usize]) -> String {
        let sizes: Vec<String> = trained.iter().map(usize::to_string).collect();
        match self {
            Basis::Measured => format!("groups of {size} were measured and trained on"),
            Basis::ComposedFromPairs => format!(
                "groups of {size} were not measured: predicted from pairs, each member's delays beside each \
                 partner alone added (an assumption, not a measurement)"
            ),
            Basis::Extrapolated => format!(
                "groups of {size} were not measured, nor pairs: predicted beyond the sizes trained on ({})",
                sizes.join(", ")
            ),
        }
    }
}

/// The slowdown model: how much longer each member of a group takes per
/// sample than alone, learned by monotone gradient-boosted trees (the log
/// of the slowdown, so that halving and doubling weigh the same) from every
/// member of every measured group, whatever its size, through features of
/// the member and of its partners together that do not depend on their
/// order ([`FeatureSet`]); averaged over an ensemble of configurations. A
/// member keeps `1 / slowdown` of its throughput, never more than alone (a
/// slowdown below 1 is clipped to 1: measured fractions above 1 are noise),
/// and the group keeps Σ exclusive × that. A group of a size that was not
/// measured is predicted from pairs when pairs were ([`Basis`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SlowdownModel {
    ensemble: Vec<Fitted>,
    /// The group sizes trained on, ascending.
    sizes: Vec<usize>,
}

impl SlowdownModel {
    /// Fits one model per configuration on every member of every group of
    /// `rows`; `None` when no member has a positive finite retained
    /// fraction or `configs` is empty.
    pub fn fit(rows: &[Colocation], configs: &[SlowdownConfig]) -> Option<Self> {
        let samples: Vec<(&WorkloadMetrics, Partners, f64)> = rows
            .iter()
            .flat_map(|g| {
                g.members
                    .iter()
                    .enumerate()
                    .map(move |(i, m)| (&m.metrics, Partners::of_member(g, i), m.retained_fraction()))
            })
            .filter(|(_, _, fraction)| fraction.is_finite() && *fraction > 0.0)
            .collect();
        if samples.is_empty() || configs.is_empty() {
            return None;
        }
        let mut sizes: Vec<usize> = rows.iter().map(|g| g.members.len()).collect();
        sizes.sort_unstable();
        sizes.dedup();
        let y: Vec<f64> = samples.iter().map(|(_, _, fraction)| -fraction.ln()).collect();
        let mut buffer = [0.0; MAX_FEATURES];
        let ensemble = configs
            .iter()
            .map(|config| {
                let x: Vec<Vec<f64>> = samples
                    .iter()
                    .map(|(own, partners, _)| config.features.write(own, partners, &mut buffer).to_vec())
                    .collect();
                let gbm = Gbm::fit_monotone(&x, &y, &config.params, &config.features.monotone());
                Fitted { features: config.features, gbm }
            })
            .collect();
        Some(SlowdownModel { ensemble, sizes })
    }

    /// The group sizes the model was trained on, ascending.
    pub fn sizes(&self) -> &[usize] {
        &self.sizes
    }

    /// How the model predicts groups of `size`.
    pub fn basis(&self, size: usize) -> Basis {
        Basis::of(size, &self.sizes, true)
    }

    /// Each ensemble member's log slowdown of `own` beside `partners`.
    fn log_slowdowns<'a>(&'a self, own: &'a WorkloadMetrics, partners: &'a Partners) -> impl Iterator<Item = f64> + 'a {
        let mut buffer = [0.0; MAX_FEATURES];
        self.ensemble.iter().map(move |fitted| fitted.gbm.predict(fitted.features.write(own, partners, &mut buffer)))
    }

    /// Each ensemble member's slowdown of each member of `group`, before
    /// clipping: `[configuration][member]`.
    fn slowdowns(&self, group: &Colocation) -> Vec<Vec<f64>> {
        let members = &group.members;
        match self.basis(members.len()) {
            Basis::Measured | Basis::Extrapolated => self.native(group),
            Basis::ComposedFromPairs => self.compose(group, |i, j, out| {
                let partner = Partners::of(std::iter::once(&members[j].metrics));
                for (slot, log) in out.iter_mut().zip(self.log_slowdowns(&members[i].metrics, &partner)) {
                    *slot = log;
                }
            }),
        }
    }

    /// Each ensemble member's slowdown of each member of `group` beside all
    /// its partners at once.
    fn native(&self, group: &Colocation) -> Vec<Vec<f64>> {
        let mut slowdowns = vec![Vec::with_capacity(group.members.len()); self.ensemble.len()];
        for (i, member) in group.members.iter().enumerate() {
            let partners = Partners::of_member(group, i);
            for (list, log) in slowdowns.iter_mut().zip(self.log_slowdowns(&member.metrics, &partners)) {
                list.push(log.exp());
            }
        }
        slowdowns
    }

    /// Each ensemble member's slowdown of each member of `group` from
    /// `log_slowdowns(i, j, out)`, which writes each ensemble member's log
    /// slowdown of member `i` beside member `j` alone into `out`, the
    /// delays added over the partners ([`compose_slowdowns`]; each pair
    /// slowdown clipped to at least 1 first).
    fn compose(&self, group: &Colocation, log_slowdowns: impl Fn(usize, usize, &mut [f64])) -> Vec<Vec<f64>> {
        let (members, size) = (&group.members, self.ensemble.len());
        let mut logs = vec![0.0; size];
        // pair[e][partner] for the member at hand.
        let mut pair = vec![Vec::with_capacity(members.len()); size];
        let mut slowdowns = vec![Vec::with_capacity(members.len()); size];
        for i in 0..members.len() {
            pair.iter_mut().for_each(Vec::clear);
            for j in (0..members.len()).filter(|&j| j != i) {
                log_slowdowns(i, j, &mut logs);
                for (list, log) in pair.iter_mut().zip(&logs) {
                    list.push(log.exp().max(1.0));
                }
            }
            for (slowdown, list) in slowdowns.iter_mut().zip(&pair) {
                slowdown.push(compose_slowdowns(list.iter().copied()));
            }
        }
        slowdowns
    }

    /// Each ensemble member's predicted throughput of each member of
    /// `group`, samples/s: `[configuration][member]` (slowdowns clipped to
    /// at least 1).
    pub fn member_predictions(&self, group: &Colocation) -> Vec<Vec<f64>> {
        to_throughputs(group, self.slowdowns(group))
    }

    /// Each ensemble member's predicted summed throughput of `group`,
    /// samples/s.
    pub fn ensemble_totals(&self, group: &Colocation) -> Vec<f64> {
        if let [a, b] = group.members.as_slice() {
            // Pairs, the hot loop of partner ranking: no allocation per
            // member.
            let (pa, pb) = (Partners::of(std::iter::once(&b.metrics)), Partners::of(std::iter::once(&a.metrics)));
            let ab = self.log_slowdowns(&a.metrics, &pa);
            let ba = self.log_slowdowns(&b.metrics, &pb);
            return ab
                .zip(ba)
                .map(|(ab, ba)| {
                    a.metrics.exclusive_rps / ab.exp().max(1.0) + b.metrics.exclusive_rps / ba.exp().max(1.0)
                })
                .collect();
        }
        self.member_predictions(group).iter().map(|p| p.iter().sum()).collect()
    }

    /// The model over the workloads of `pool`, each pair of them predicted
    /// once, when first needed.
    pub(crate) fn pooled<'a>(&'a self, pool: &'a [WorkloadMetrics]) -> PooledSlowdown<'a> {
        let index = pool.iter().enumerate().map(|(i, w)| (w.workload.as_str(), i)).collect();
        let cells = (0..pool.len() * pool.len()).map(|_| OnceCell::new()).collect();
        PooledSlowdown { model: self, pool, index, cells }
    }

    /// The model restricted to the ensemble members at `indices`.
    pub fn subset(&self, indices: &[usize]) -> SlowdownModel {
        SlowdownModel {
            ensemble: indices.iter().map(|&i| self.ensemble[i].clone()).collect(),
            sizes: self.sizes.clone(),
        }
    }

    /// The configurations of the ensemble, in order.
    pub fn feature_sets(&self) -> Vec<FeatureSet> {
        self.ensemble.iter().map(|fitted| fitted.features).collect()
    }
}

/// Throughputs from slowdowns `[configuration][member]`: each member's
/// exclusive throughput over its slowdown, clipped to at least 1.
fn to_throughputs(group: &Colocation, slowdowns: Vec<Vec<f64>>) -> Vec<Vec<f64>> {
    slowdowns
        .into_iter()
        .map(|list| list.iter().zip(&group.members).map(|(s, m)| m.metrics.exclusive_rps / s.max(1.0)).collect())
        .collect()
}

/// The ensemble's mean retained fraction of each member before clipping,
/// from slowdowns `[configuration][member]`.
fn mean_unclipped(slowdowns: &[Vec<f64>], members: usize) -> Vec<f64> {
    (0..members).map(|i| slowdowns.iter().map(|s| 1.0 / s[i]).sum::<f64>() / slowdowns.len() as f64).collect()
}

/// The mean of `values`: the ensemble's prediction from its members'.
pub(crate) fn mean(values: &[f64]) -> f64 {
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

    /// The ensemble's mean retained fraction of each member before the
    /// clip to 1.
    fn retained_before_clipping(&self, group: &Colocation) -> Option<Vec<f64>> {
        Some(mean_unclipped(&self.slowdowns(group), group.members.len()))
    }

    /// The spread of the ensemble: the standard deviation of the log of
    /// its members' totals (0 for one member).
    fn spread(&self, group: &Colocation) -> f64 {
        log_spread(&self.ensemble_totals(group))
    }

    fn basis(&self, size: usize) -> Basis {
        SlowdownModel::basis(self, size)
    }

    /// The same model with every pair of `pool` workloads predicted once,
    /// when first needed.
    fn for_pool<'a>(&'a self, pool: &'a [WorkloadMetrics]) -> Option<Box<dyn ThroughputModel + 'a>> {
        Some(Box::new(self.pooled(pool)))
    }

    /// The features the trees split on most (share of total gain over the
    /// ensemble), with their values for the first member beside its
    /// partners.
    fn drivers(&self, group: &Colocation, top: usize) -> Vec<Driver> {
        let mut drivers: Vec<Driver> = Vec::new();
        let total: f64 = self.ensemble.iter().flat_map(|f| f.gbm.feature_gains()).sum::<f64>().max(f64::MIN_POSITIVE);
        let mut buffer = [0.0; MAX_FEATURES];
        for fitted in &self.ensemble {
            let values = match group.members.first() {
                Some(own) => fitted.features.write(&own.metrics, &Partners::of_member(group, 0), &mut buffer).to_vec(),
                None => vec![0.0; fitted.features.width()],
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
/// slowdowns are predicted once, when first needed, so ranking many pairs,
/// or groups predicted from pairs, of the same workloads walks the trees
/// once per pair, not once per group.
pub(crate) struct PooledSlowdown<'a> {
    model: &'a SlowdownModel,
    pool: &'a [WorkloadMetrics],
    index: HashMap<&'a str, usize>,
    /// `cells[own × pool + partner]`: each ensemble member's log slowdown.
    cells: Vec<OnceCell<Box<[f64]>>>,
}

impl PooledSlowdown<'_> {
    /// Each ensemble member's throughput of each member of `group`, from
    /// the pool's pairs; `None` when the group is not predicted from pairs
    /// or a member is not the pool's workload.
    fn member_predictions(&self, group: &Colocation) -> Option<Vec<Vec<f64>>> {
        let size = group.members.len();
        if size != 2 && self.model.basis(size) != Basis::ComposedFromPairs {
            return None;
        }
        let positions: Vec<usize> = group
            .members
            .iter()
            .map(|m| self.index.get(m.metrics.workload.as_str()).copied().filter(|&i| self.pool[i] == m.metrics))
            .collect::<Option<_>>()?;
        let n = self.pool.len();
        let logs = |own: usize, partner: usize| -> &[f64] {
            self.cells[own * n + partner].get_or_init(|| {
                let partners = Partners::of(std::iter::once(&self.pool[partner]));
                self.model.log_slowdowns(&self.pool[own], &partners).collect()
            })
        };
        let slowdowns = if size == 2 {
            let (ab, ba) = (logs(positions[0], positions[1]), logs(positions[1], positions[0]));
            ab.iter().zip(ba).map(|(ab, ba)| vec![ab.exp(), ba.exp()]).collect()
        } else {
            self.model.compose(group, |i, j, out| out.copy_from_slice(logs(positions[i], positions[j])))
        };
        Some(to_throughputs(group, slowdowns))
    }

    /// Each ensemble member's predicted summed throughput of `group`,
    /// samples/s.
    pub(crate) fn totals(&self, group: &Colocation) -> Vec<f64> {
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

    fn retained_before_clipping(&self, group: &Colocation) -> Option<Vec<f64>> {
        self.model.retained_before_clipping(group)
    }

    fn spread(&self, group: &Colocation) -> f64 {
        log_spread(&self.totals(group))
    }

    fn basis(&self, size: usize) -> Basis {
        self.model.basis(size)
    }

    fn drivers(&self, group: &Colocation, top: usize) -> Vec<Driver> {
        self.model.drivers(group, top)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::tests::workload;
    use tessera_core::GroupMember;

    /// Six workloads and every group of `size` of three of them (each at
    /// most twice) where a member keeps less the more SM its partners
    /// use, and a light member next to light partners keeps more than
    /// alone (as measurement noise makes some members do).
    fn groups(size: usize) -> Vec<Colocation> {
        let pool: Vec<WorkloadMetrics> = (0..6)
            .map(|i| {
                let f = i as f64;
                workload(&format!("w{i}_batch1-inf"), 50.0 + 10.0 * f, 10.0 + 15.0 * f, 5.0 + 5.0 * f, 1.0)
            })
            .collect();
        crate::groups::MemberSets::new(pool.len(), size)
            .map(|members| {
                let load: f64 = members.iter().map(|&i| pool[i].sm_util_pct).sum::<f64>() / 100.0;
                Colocation {
                    members: members
                        .iter()
                        .map(|&i| GroupMember {
                            metrics: pool[i].clone(),
                            colocated_rps: pool[i].exclusive_rps * 1.3 / load.max(0.5),
                        })
                        .collect(),
                }
            })
            .collect()
    }

    fn model(rows: &[Colocation]) -> SlowdownModel {
        SlowdownModel::fit(rows, &crate::selection::grid()[..2]).unwrap()
    }

    #[test]
    fn a_size_is_predicted_natively_when_measured_else_from_pairs() {
        let (pairs, quads) = (groups(2), groups(4));
        let from_pairs = model(&pairs);
        assert_eq!(from_pairs.sizes(), [2]);
        let bases: Vec<Basis> = (2..=4).map(|k| from_pairs.basis(k)).collect();
        assert_eq!(bases, [Basis::Measured, Basis::ComposedFromPairs, Basis::ComposedFromPairs]);
        let from_quads = model(&quads);
        assert_eq!((from_quads.basis(4), from_quads.basis(3)), (Basis::Measured, Basis::Extrapolated));
        let both = model(&[pairs.clone(), quads.clone()].concat());
        let bases: Vec<Basis> = (2..=5).map(|k| both.basis(k)).collect();
        assert_eq!(bases, [Basis::Measured, Basis::ComposedFromPairs, Basis::Measured, Basis::ComposedFromPairs]);
        // Trained on the quads themselves, the model predicts them far
        // better than composed from the pairs.
        let error = |m: &SlowdownModel| {
            quads.iter().map(|g| (m.predict_total(g) / g.total_rps()).ln().abs()).sum::<f64>() / quads.len() as f64
        };
        assert!(error(&from_quads) < 0.5 * error(&from_pairs), "{} vs {}", error(&from_quads), error(&from_pairs));
        assert!(Basis::ComposedFromPairs.describe(3, &[2]).contains("an assumption"));
        assert!(Basis::Extrapolated.describe(3, &[4]).contains("sizes trained on (4)"));
    }

    #[test]
    fn predictions_do_not_depend_on_the_members_order() {
        let quads = groups(4);
        let native = model(&quads);
        let from_pairs = model(&groups(2));
        for m in [&native, &from_pairs] {
            for group in quads.iter().step_by(7) {
                let mut reversed = group.clone();
                reversed.members.reverse();
                let (total, again) = (m.predict_total(group), m.predict_total(&reversed));
                assert!((total - again).abs() <= 1e-9 * total, "{total} vs {again}");
                let mut members = m.predict_members(group).unwrap();
                members.reverse();
                let back = m.predict_members(&reversed).unwrap();
                assert!(members.iter().zip(&back).all(|(a, b)| (a - b).abs() <= 1e-9 * a), "{members:?} vs {back:?}");
            }
        }
    }

    #[test]
    fn no_member_keeps_more_than_alone_and_a_clip_is_reported() {
        let pairs = groups(2);
        let m = model(&pairs);
        let mut clipped = 0;
        for group in &pairs {
            let members = m.predict_members(group).unwrap();
            let raw = m.retained_before_clipping(group).unwrap();
            for ((rps, member), raw) in members.iter().zip(&group.members).zip(&raw) {
                let retained = rps / member.metrics.exclusive_rps;
                assert!(retained <= 1.0 + 1e-12, "{retained}");
                assert!((retained - raw.min(1.0)).abs() < 1e-9, "{retained} vs {raw}");
                clipped += usize::from(*raw > 1.0);
            }
            let total: f64 = members.iter().sum();
            assert!((total - m.predict_total(group)).abs() <= 1e-9 * total);
        }
        assert!(clipped > 0, "light pairs were measured keeping more than alone: some predictions are clipped");
    }
}
