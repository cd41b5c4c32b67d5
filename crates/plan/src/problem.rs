//! What one strategy solves: the fleet, the completed profiles, the
//! services and the resolved rule. Built only by the front door
//! ([`crate::plan`]), which resolves every default first.

use std::time::Duration;

use rayon::prelude::*;
use tessera_core::slo::find_duplicate_service;
use tessera_core::{GpuModel, GpuOffer, ModelProfile, ProfileCatalog, ProfilePoint, ServiceSlo};

use tessera_serving::{ArrivalModel, Capacities};

use crate::cancel::Cancel;
use crate::error::PlanError;
use crate::judge::{Judge, PointsMemo};
use crate::latency::LatencyRule;

/// ParvaGPU's default for the most MPS processes per segment.
pub const DEFAULT_MAX_PROCS: u32 = 5;

/// ParvaGPU's default number of GPUs per node.
pub const DEFAULT_GPUS_PER_NODE: u32 = 8;

/// The default ceiling on the GPUs of a plan: well above the largest
/// reference catalogue (about 24,000 A100s for 11,000 services), low enough
/// that a plan (one object per MIG instance) stays a few hundred MB.
pub const DEFAULT_MAX_GPUS: u64 = 100_000;

/// The highest ceiling a request may set: every count the planners keep
/// then fits comfortably in 32 bits, and a plan in a few GB.
pub const MAX_GPUS_LIMIT: u64 = 1_000_000;

/// Everything a strategy needs, every default resolved.
#[derive(Debug, Clone)]
pub(crate) struct Problem<'a> {
    /// The GPU models the plan may use, with costs and limits.
    pub fleet: Vec<GpuOffer>,
    /// Profiles, per GPU model and model.
    pub catalog: &'a ProfileCatalog,
    /// The services to serve.
    pub services: &'a [ServiceSlo],
    /// The latency rule.
    pub rule: LatencyRule,
    /// Most MPS processes per segment.
    pub max_procs: u32,
    /// GPUs per node, for numbering nodes.
    pub gpus_per_node: u32,
    /// How long a search may run before returning its best plan (the
    /// `optimal` strategy); `None` for no limit.
    pub time_limit: Option<Duration>,
    /// Most GPUs a plan may have, all models together: a request whose
    /// lower bound exceeds it is refused before any search (1 to
    /// [`MAX_GPUS_LIMIT`]; default [`DEFAULT_MAX_GPUS`]).
    pub max_gpus: u64,
    /// How requests arrive (the percentile rule's capacities depend on it).
    pub arrivals: &'a ArrivalModel,
    /// The robustness margin of the percentile rule's capacities: every
    /// batch this share slower than profiled (0 under other rules).
    pub margin: f64,
    /// The serving model's memo of segment capacities (the percentile rule).
    pub capacities: &'a Capacities,
    /// Whoever runs the request may cancel it.
    pub cancel: Option<&'a Cancel>,
    /// Predict each service's figures with the serving model (see
    /// `PlanRequest::figures`).
    pub figures: bool,
    /// The points already judged for `catalog` (the inputs' memo); `None`
    /// for a catalogue of stand-ins, whose profiles are not the inputs'.
    pub points: Option<&'a PointsMemo>,
}

impl<'a> Problem<'a> {
    /// Whether the request was cancelled.
    pub(crate) fn cancelled(&self) -> bool {
        self.cancel.is_some_and(Cancel::is_cancelled)
    }

    /// [`PlanError::Cancelled`] once the request was cancelled.
    pub(crate) fn check_cancelled(&self) -> Result<(), PlanError> {
        if self.cancelled() {
            return Err(PlanError::Cancelled);
        }
        Ok(())
    }

    /// For the crate's tests: one GPU model (unlimited, cost 1) under
    /// ParvaGPU's rule, at most [`DEFAULT_MAX_PROCS`] processes,
    /// [`DEFAULT_GPUS_PER_NODE`] GPUs per node, no time limit, at most
    /// [`DEFAULT_MAX_GPUS`] GPUs.
    #[cfg(test)]
    pub(crate) fn parva(gpu: GpuModel, catalog: &'a ProfileCatalog, services: &'a [ServiceSlo]) -> Self {
        Problem {
            fleet: vec![GpuOffer::plain(gpu)],
            catalog,
            services,
            rule: LatencyRule::Parva,
            max_procs: DEFAULT_MAX_PROCS,
            gpus_per_node: DEFAULT_GPUS_PER_NODE,
            time_limit: None,
            max_gpus: DEFAULT_MAX_GPUS,
            arrivals: &ArrivalModel::Poisson,
            margin: 0.0,
            capacities: crate::judge::tests::capacities(),
            cancel: None,
            figures: true,
            points: None,
        }
    }

    /// The rule with the serving model's memo.
    pub(crate) fn judge(&self) -> Judge<'a> {
        Judge {
            rule: self.rule,
            arrivals: self.arrivals,
            margin: self.margin,
            capacities: self.capacities,
            points: self.points,
        }
    }

    /// Checks what every strategy needs: services with unique names, a
    /// fleet without repeated models, at least one process, a ceiling in
    /// range and no service beyond it.
    pub(crate) fn check(&self) -> Result<(), PlanError> {
        if self.services.is_empty() {
            return Err(PlanError::NoServices);
        }
        if self.max_procs == 0 {
            return Err(PlanError::NoProcesses);
        }
        if !(1..=MAX_GPUS_LIMIT).contains(&self.max_gpus) {
            return Err(PlanError::CeilingOutOfRange { max_gpus: self.max_gpus, limit: MAX_GPUS_LIMIT });
        }
        if let Some(name) = find_duplicate_service(self.services) {
            return Err(PlanError::DuplicateService(name.to_string()));
        }
        if self.fleet.is_empty() {
            return Err(PlanError::EmptyFleet);
        }
        let repeated = self.fleet.iter().enumerate().find(|(i, o)| self.fleet[..*i].iter().any(|p| p.model == o.model));
        if let Some((_, offer)) = repeated {
            return Err(PlanError::DuplicateGpu(offer.model.to_string()));
        }
        self.check_ceiling()
    }

    /// Refuses, from a bound that costs one pass over the profiles, a
    /// request that needs more than `max_gpus` GPUs: per service, its rate
    /// over the best throughput per compute slice of a usable point that
    /// meets the latency rule (and at least its smallest such instance), on
    /// its best GPU model; then all services together. Services no model
    /// can serve are left to the planners' own errors.
    fn check_ceiling(&self) -> Result<(), PlanError> {
        // Every service's judged points, on every core: under the
        // percentile rule this computes (and memoises for the planners)
        // the serving model's capacities, the costliest step of a request
        // whose services have many distinct SLOs.
        let fewest_per_service: Vec<f64> = self
            .services
            .par_iter()
            .map(|slo| {
                if self.cancelled() {
                    return f64::INFINITY;
                }
                self.fleet
                    .iter()
                    .filter_map(|offer| {
                        let profile = self.catalog.get(offer.model, &slo.model)?;
                        let points = self.judge().judged_points(profile, slo, self.max_procs).ok()?;
                        let allowed =
                            || points.iter().filter(|p| self.rule.max_provision_ratio(p, slo.latency_slo_ms).is_some());
                        let best = allowed().map(ProfilePoint::throughput_per_gpc).fold(0.0, f64::max);
                        let smallest = allowed().map(|p| f64::from(p.config.size_gpcs)).fold(f64::INFINITY, f64::min);
                        let slices = f64::from(offer.model.spec().compute_slices);
                        (best > 0.0).then(|| (slo.rate_rps / best).max(smallest) / slices)
                    })
                    .fold(f64::INFINITY, f64::min)
            })
            .collect();
        self.check_cancelled()?;
        let mut total_gpus = 0.0;
        for (slo, fewest) in self.services.iter().zip(fewest_per_service) {
            if !fewest.is_finite() {
                continue;
            }
            if fewest > self.max_gpus as f64 {
                return Err(PlanError::ServiceOverCeiling {
                    service: slo.service.clone(),
                    model: slo.model.clone(),
                    rate_rps: slo.rate_rps,
                    needed: whole_gpus(fewest),
                    max_gpus: self.max_gpus,
                });
            }
            total_gpus += fewest;
        }
        if total_gpus > self.max_gpus as f64 {
            return Err(PlanError::TotalOverCeiling { needed: whole_gpus(total_gpus), max_gpus: self.max_gpus });
        }
        Ok(())
    }

    /// Refuses a plan with more GPUs than the ceiling (possible when the
    /// bound was just below it).
    pub(crate) fn check_plan_size(&self, gpus: usize) -> Result<(), PlanError> {
        if gpus as u64 > self.max_gpus {
            return Err(PlanError::PlanOverCeiling { gpus: gpus as u64, max_gpus: self.max_gpus });
        }
        Ok(())
    }

    /// The profile of a service's model on `gpu`.
    pub(crate) fn profile(&self, slo: &ServiceSlo, gpu: GpuModel) -> Result<&'a ModelProfile, PlanError> {
        self.catalog.get(gpu, &slo.model).ok_or_else(|| PlanError::NoProfile {
            service: slo.service.clone(),
            model: slo.model.clone(),
            gpu: gpu.to_string(),
            known: known_models(self.catalog, gpu),
        })
    }
}

/// A fractional GPU need in whole GPUs, rounded up (saturating).
fn whole_gpus(gpus: f64) -> u64 {
    gpus.ceil().min(u64::MAX as f64) as u64
}

fn known_models(catalog: &ProfileCatalog, gpu: GpuModel) -> String {
    let models: Vec<&str> = catalog.models(gpu).collect();
    if models.is_empty() {
        "none".to_string()
    } else {
        models.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::latency::LatencyRule;
    use crate::optimal::plan_optimal;
    use crate::parva::plan_parva;
    use tessera_core::SegmentConfig;

    fn point(size_gpcs: u8, throughput_rps: f64, memory_gb: Option<f64>) -> ProfilePoint {
        let config = SegmentConfig { size_gpcs, batch: 1, procs: 1 };
        ProfilePoint::new(config, throughput_rps, 1.0, memory_gb).unwrap()
    }

    #[test]
    fn no_planner_runs_a_point_that_exceeds_its_instance_memory() {
        // The 1g point is the most efficient by far but needs 500 GB of a
        // 10 GB instance; the 2g point fits (its memory is the segment's).
        let profile = ModelProfile::new(
            GpuModel::A100_80GB,
            "m",
            vec![point(1, 1000.0, Some(500.0)), point(2, 300.0, Some(20.0)), point(7, 900.0, None)],
        )
        .unwrap();
        let catalog: ProfileCatalog = [profile].into_iter().collect();
        let services = [ServiceSlo::new("s", "m", 2000.0, 100.0).unwrap()];
        let request = Problem::parva(GpuModel::A100_80GB, &catalog, &services);
        for plan in [plan_parva(&request).unwrap(), plan_optimal(&request).unwrap()] {
            let sizes: Vec<u8> = plan.gpus.iter().flat_map(|g| &g.instances).map(|i| i.size).collect();
            assert!(!sizes.is_empty() && !sizes.contains(&1), "{} uses {sizes:?}", plan.strategy);
        }
    }

    #[test]
    fn a_model_whose_every_point_exceeds_memory_is_named() {
        let profile = ModelProfile::new(GpuModel::A100_80GB, "m", vec![point(1, 1000.0, Some(500.0))]).unwrap();
        let catalog: ProfileCatalog = [profile].into_iter().collect();
        let services = [ServiceSlo::new("s", "m", 20.0, 100.0).unwrap()];
        let request = Problem::parva(GpuModel::A100_80GB, &catalog, &services);
        for error in [plan_parva(&request).unwrap_err(), plan_optimal(&request).unwrap_err()] {
            assert!(matches!(error, PlanError::NoPointFits { .. }), "{error}");
            let message = error.to_string();
            assert!(message.contains("'s'") && message.contains("500 GB of 10 GB"), "{message}");
        }
    }

    #[test]
    fn huge_rates_get_a_plan_or_the_ceiling_error_naming_the_service() {
        let catalog = tessera_core::synthetic::builtin_catalog();
        for exponent in 3..=15 {
            let rate_rps = 10f64.powi(exponent);
            let services = [ServiceSlo::new("big", "resnet50", rate_rps, 80.0).unwrap()];
            for rule in LatencyRule::ALL {
                let request = Problem {
                    rule,
                    time_limit: Some(Duration::from_secs(2)),
                    ..Problem::parva(GpuModel::A100_80GB, &catalog, &services)
                };
                let mut results = vec![plan_optimal(&request)];
                if rule == LatencyRule::Parva {
                    results.push(plan_parva(&request));
                }
                for result in results {
                    match result {
                        Ok(plan) => {
                            assert!(plan.gpu_count as u64 <= DEFAULT_MAX_GPUS, "1e{exponent}");
                            assert!(plan.services[0].provisioned_rps >= rate_rps, "1e{exponent}");
                        }
                        Err(PlanError::ServiceOverCeiling { service, needed, .. }) => {
                            assert_eq!(service, "big");
                            assert!(needed > DEFAULT_MAX_GPUS && exponent >= 9, "1e{exponent}: {needed}");
                        }
                        Err(other) => panic!("1e{exponent} under {rule}: {other}"),
                    }
                }
            }
        }
    }

    #[test]
    fn many_small_services_count_one_instance_each_against_the_ceiling() {
        // 300 services at 1 req/s: a few GPUs by throughput, but each needs
        // an instance of its own, at least 1g of 7 slices.
        let catalog = tessera_core::synthetic::builtin_catalog();
        let services: Vec<ServiceSlo> =
            (0..300).map(|i| ServiceSlo::new(format!("s{i}"), "resnet50", 1.0, 200.0).unwrap()).collect();
        let request = Problem { max_gpus: 40, ..Problem::parva(GpuModel::A100_80GB, &catalog, &services) };
        let error = plan_optimal(&request).unwrap_err();
        assert_eq!(error, PlanError::TotalOverCeiling { needed: 43, max_gpus: 40 });
        assert_eq!(plan_optimal(&Problem { max_gpus: 43, ..request }).unwrap().gpu_count, 43);
    }

    #[test]
    fn services_beyond_the_ceiling_together_are_refused_and_the_ceiling_has_a_range() {
        let catalog = tessera_core::synthetic::builtin_catalog();
        let services: Vec<ServiceSlo> =
            (0..4).map(|i| ServiceSlo::new(format!("s{i}"), "resnet50", 30_000.0, 80.0).unwrap()).collect();
        let request = Problem { max_gpus: 20, ..Problem::parva(GpuModel::A100_80GB, &catalog, &services) };
        let alone = plan_optimal(&Problem { services: &services[..1], ..request.clone() }).unwrap();
        assert!(alone.gpu_count <= 20 && alone.gpu_count > 5, "{}", alone.gpu_count);
        let error = plan_optimal(&request).unwrap_err();
        assert!(matches!(error, PlanError::TotalOverCeiling { max_gpus: 20, .. }), "{error}");
        assert!(error.to_string().contains("in total"), "{error}");
        for max_gpus in [0, MAX_GPUS_LIMIT + 1] {
            let error = plan_parva(&Problem { max_gpus, ..request.clone() }).unwrap_err();
            assert!(matches!(error, PlanError::CeilingOutOfRange { .. }), "{error}");
        }
    }
}
