//! What `POST /v1/plans` asks, checked at the door, and what a job plans
//! from: a snapshot of its inputs stored with it. Every planning decision
//! (defaults, strategies, replanning, notes) is `tessera_plan::plan`'s:
//! this module only translates the request.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tessera_core::text::count;
use tessera_core::{GpuModel, GpuOffer, ModelProfile, Plan, ProfileCatalog, ServiceImage, ServiceSlo};
use tessera_plan::{LatencyRule, PlanInputs, PlanRequest, ProfileOrigin, ReplanFrom, Strategy};
use tessera_serving::ArrivalModel;
use tessera_store::Store;

use crate::error::ApiError;

/// What `POST /v1/plans` asks: the planner's options, as `tessera plan`'s.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"demo": true, "strategy": "optimal", "gpus": ["a100-80gb"], "time_limit_s": 5.0}))]
pub(crate) struct PlanJobRequest {
    /// Plan the built-in demo (synthetic profiles, six services) instead of
    /// the stored services and profiles.
    #[serde(default)]
    pub demo: bool,
    /// `optimal` (fewest GPUs or lowest cost, with a proven bound) or `parva`
    /// (ParvaGPU's heuristic).
    #[serde(default = "default_strategy")]
    #[schema(example = "optimal")]
    pub strategy: String,
    /// The fleet, as `tessera plan --gpu`: `MODEL[:cost=C][,count=N]`.
    #[serde(default = "default_fleet")]
    pub gpus: Vec<String>,
    /// `percentile`, `queueing` or `parva`; by default the strategy's
    /// (`percentile` for `optimal`, `parva` for `parva`), or for a replan the
    /// running plan's.
    #[serde(default)]
    pub latency_rule: Option<String>,
    /// How requests arrive, for the percentile rule's capacities, as
    /// `tessera plan --arrivals`: `poisson`, `cv=X` or
    /// `onoff=burst:B,on:S,off:S` (a trace only on the command line); by
    /// default Poisson, or for a replan the running plan's.
    #[serde(default)]
    #[schema(example = "cv=2")]
    pub arrivals: Option<String>,
    /// How long the search may run, seconds.
    #[serde(default = "default_time_limit_s")]
    pub time_limit_s: f64,
    /// Most MPS processes per segment.
    #[serde(default = "default_max_procs")]
    pub max_procs: u32,
    /// GPUs per node, for numbering nodes.
    #[serde(default = "default_gpus_per_node")]
    pub gpus_per_node: u32,
    /// Most GPUs the plan may use.
    #[serde(default = "default_max_gpus")]
    pub max_gpus: u64,
    /// Replan from the plan of this done job (the plan that runs now), as
    /// `tessera plan --from`: every SLO met, at most the fresh optimum's GPUs
    /// plus `max_extra_gpus`, then the fewest GPUs reconfigured, instances
    /// created or destroyed, and processes started. `optimal` only.
    #[serde(default)]
    pub from_plan: Option<u64>,
    /// With `from_plan`: GPUs the replan may use beyond the fresh optimum.
    #[serde(default)]
    pub max_extra_gpus: u64,
}

fn default_strategy() -> String {
    Strategy::default().name().to_string()
}
fn default_fleet() -> Vec<String> {
    vec![GpuModel::A100_80GB.id().to_string()]
}
fn default_time_limit_s() -> f64 {
    tessera_plan::DEFAULT_TIME_LIMIT.as_secs_f64()
}
fn default_max_procs() -> u32 {
    tessera_plan::DEFAULT_MAX_PROCS
}
fn default_gpus_per_node() -> u32 {
    tessera_plan::DEFAULT_GPUS_PER_NODE
}
fn default_max_gpus() -> u64 {
    tessera_plan::DEFAULT_MAX_GPUS
}

/// The longest time limit a job may ask for, seconds.
pub(crate) const MAX_TIME_LIMIT_S: f64 = 3600.0;

/// A request's options, parsed.
#[derive(Debug, Clone)]
pub(crate) struct CheckedRequest {
    /// Whether it plans the demo.
    pub demo: bool,
    /// The strategy.
    pub strategy: Strategy,
    /// The fleet.
    pub fleet: Vec<GpuOffer>,
    /// The latency rule asked for, if any.
    pub rule: Option<LatencyRule>,
    /// How requests arrive; `None`: the planner's default.
    pub arrivals: Option<ArrivalModel>,
    /// The time limit.
    pub time_limit: Duration,
    /// Most processes per segment.
    pub max_procs: u32,
    /// GPUs per node.
    pub gpus_per_node: u32,
    /// Most GPUs.
    pub max_gpus: u64,
    /// The job whose plan to replan from.
    pub from_plan: Option<u64>,
    /// GPUs a replan may use beyond the fresh optimum.
    pub max_extra_gpus: u64,
}

impl PlanJobRequest {
    /// The options parsed, or a 422 naming the field.
    pub(crate) fn check(&self) -> Result<CheckedRequest, ApiError> {
        let strategy: Strategy =
            self.strategy.parse().map_err(|e: String| ApiError::invalid(format!("field 'strategy': {e}")))?;
        if self.gpus.is_empty() {
            return Err(ApiError::invalid("field 'gpus': name at least one GPU model, e.g. \"a100-80gb\""));
        }
        let fleet = self
            .gpus
            .iter()
            .map(|text| text.parse::<GpuOffer>().map_err(|e| ApiError::invalid(format!("field 'gpus': {e}"))))
            .collect::<Result<Vec<_>, _>>()?;
        let rule = match &self.latency_rule {
            Some(name) => {
                Some(name.parse::<LatencyRule>().map_err(|e| ApiError::invalid(format!("field 'latency_rule': {e}")))?)
            }
            None => None,
        };
        let arrivals = match &self.arrivals {
            Some(text) => {
                Some(ArrivalModel::parse(text).map_err(|e| ApiError::invalid(format!("field 'arrivals': {e}")))?)
            }
            None => None,
        };
        if !(self.time_limit_s > 0.0 && self.time_limit_s <= MAX_TIME_LIMIT_S) {
            return Err(ApiError::invalid(format!(
                "field 'time_limit_s': {} is not a time limit in (0, {MAX_TIME_LIMIT_S}] seconds",
                self.time_limit_s
            )));
        }
        if self.gpus_per_node == 0 {
            return Err(ApiError::invalid("field 'gpus_per_node': must be at least 1"));
        }
        Ok(CheckedRequest {
            demo: self.demo,
            strategy,
            fleet,
            rule,
            arrivals,
            time_limit: Duration::from_secs_f64(self.time_limit_s),
            max_procs: self.max_procs,
            gpus_per_node: self.gpus_per_node,
            max_gpus: self.max_gpus,
            from_plan: self.from_plan,
            max_extra_gpus: self.max_extra_gpus,
        })
    }
}

/// What a job plans from, stored with it so its plan can be verified
/// again whatever the store holds later.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct JobInputs {
    /// The services.
    pub services: Vec<ServiceSlo>,
    /// The profiles, completed for the fleet.
    pub profiles: Vec<ModelProfile>,
    /// Profiles that were estimated, in words (they become the plan's
    /// notes).
    pub notes: Vec<String>,
    /// The container image and arguments of each service that has one (they
    /// go into the plan, for running it in a cluster).
    #[serde(default)]
    pub images: BTreeMap<String, ServiceImage>,
    /// With `from_plan`: the job it names and the plan that runs now.
    #[serde(default)]
    pub current: Option<(u64, Plan)>,
}

impl JobInputs {
    /// The services and profiles `request` plans (the demo's, or the
    /// store's: a store without services or profiles is a 422 saying what
    /// to add), checked against the request as the planner will see it (a
    /// request it would refuse is a 422 now, not a failed job later).
    pub(crate) fn gather(request: &CheckedRequest, store: &Store) -> Result<JobInputs, ApiError> {
        let fleet: Vec<GpuModel> = request.fleet.iter().map(|offer| offer.model).collect();
        let inputs = if request.demo {
            PlanInputs::demo(&fleet)?
        } else {
            let mut images = BTreeMap::new();
            let mut services = Vec::new();
            for stored in store.list_services()? {
                if let Some(image) = stored.image {
                    images.insert(stored.slo.service.clone(), ServiceImage { image, args: stored.args });
                }
                services.push(stored.slo);
            }
            if services.is_empty() {
                return Err(ApiError::invalid(
                    "no services to plan: create them with POST /v1/services, or ask for the demo with {\"demo\": true}",
                ));
            }
            let catalog = store.load_catalog(None)?;
            if catalog.is_empty() {
                return Err(ApiError::invalid("no profiles in the store: import them with POST /v1/profiles"));
            }
            PlanInputs::new(services, catalog, ProfileOrigin::Measured, &fleet)?.with_images(images)
        };
        let current = match request.from_plan {
            Some(id) => Some((id, current_plan(store, id)?)),
            None => None,
        };
        let current_plan = current.as_ref().map(|(_, plan)| plan);
        planning_request(request, &inputs, current_plan).check()?;
        Ok(JobInputs {
            services: inputs.services().to_vec(),
            profiles: inputs.catalog().iter().cloned().collect(),
            notes: inputs.notes().to_vec(),
            images: inputs.images().clone(),
            current,
        })
    }

    /// The profiles as a catalogue, each validated again (they were read
    /// back from the store).
    pub(crate) fn catalog(&self) -> Result<ProfileCatalog, String> {
        let mut catalog = ProfileCatalog::new();
        for profile in &self.profiles {
            let checked = ModelProfile::new(profile.gpu_model, profile.model.clone(), profile.points().to_vec())
                .map_err(|e| format!("stored profile of {} on {}: {e}", profile.model, profile.gpu_model))?;
            catalog.insert(checked);
        }
        Ok(catalog)
    }

    /// The snapshot as the planner's inputs (already completed for the
    /// GPU models of `fleet`).
    pub(crate) fn plan_inputs(&self, fleet: &[GpuModel]) -> Result<PlanInputs, String> {
        let inputs = PlanInputs::new(self.services.clone(), self.catalog()?, ProfileOrigin::Measured, fleet)
            .map_err(|e| e.to_string())?;
        Ok(inputs.with_notes(self.notes.iter().cloned()).with_images(self.images.clone()))
    }
}

/// The planner's request for `request` over `inputs`, replanning from
/// `current` when given.
fn planning_request<'a>(
    request: &CheckedRequest,
    inputs: &'a PlanInputs,
    current: Option<&'a Plan>,
) -> PlanRequest<'a> {
    PlanRequest {
        strategy: request.strategy,
        rule: request.rule,
        arrivals: request.arrivals.clone(),
        fleet: request.fleet.clone(),
        max_procs: request.max_procs,
        gpus_per_node: request.gpus_per_node,
        time_limit: Some(request.time_limit),
        max_gpus: request.max_gpus,
        from: current.map(|current| ReplanFrom {
            current,
            max_extra_gpus: request.max_extra_gpus,
            drained: Vec::new(),
            lost: Vec::new(),
        }),
        ..PlanRequest::new(inputs)
    }
}

/// The plan of done job `id`: a 404 when there is no such job, a 422 when
/// it has no plan.
fn current_plan(store: &Store, id: u64) -> Result<Plan, ApiError> {
    let job = store.job(id)?.ok_or_else(|| ApiError::not_found(format!("field 'from_plan': no planning job {id}")))?;
    job.plan.ok_or_else(|| {
        ApiError::invalid(format!("field 'from_plan': job {id} has no plan (it is {})", job.status.name()))
    })
}

/// Plans `inputs` as `request` asks (a replan when they hold the plan that
/// runs); the error is the planner's one-line message.
pub(crate) fn plan(request: &CheckedRequest, inputs: &JobInputs) -> Result<Plan, String> {
    let fleet: Vec<GpuModel> = request.fleet.iter().map(|offer| offer.model).collect();
    let plan_inputs = inputs.plan_inputs(&fleet)?;
    let current = inputs.current.as_ref();
    let planned = tessera_plan::plan(&planning_request(request, &plan_inputs, current.map(|(_, plan)| plan)))
        .map_err(|e| e.to_string())?;
    let mut plan = planned.plan;
    if let (Some((id, current)), Some(replan)) = (current, &planned.replan) {
        plan.notes.push(format!(
            "replanned from plan {id}: {} of {} layouts kept, {} reconfigured; the fresh optimum: {}, {} layouts kept",
            replan.diff.totals.layouts_kept(),
            current.gpu_count,
            count(replan.diff.totals.gpus_reconfigured(), "GPU"),
            count(replan.fresh.gpu_count, "GPU"),
            replan.fresh_diff.totals.layouts_kept(),
        ));
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(json: serde_json::Value) -> Result<CheckedRequest, ApiError> {
        serde_json::from_value::<PlanJobRequest>(json).unwrap().check()
    }

    #[test]
    fn requests_are_checked_field_by_field() {
        let checked = request(serde_json::json!({"demo": true})).unwrap();
        assert_eq!((checked.strategy, checked.rule, checked.fleet.len()), (Strategy::Optimal, None, 1));
        let parva = request(serde_json::json!({"strategy": "parva", "gpus": ["h100-80gb:cost=2,count=3"]})).unwrap();
        assert_eq!((parva.strategy, parva.fleet[0].limit), (Strategy::Parva, Some(3)));
        for (body, field) in [
            (serde_json::json!({"strategy": "best"}), "field 'strategy'"),
            (serde_json::json!({"gpus": ["b200"]}), "field 'gpus'"),
            (serde_json::json!({"gpus": []}), "field 'gpus'"),
            (serde_json::json!({"latency_rule": "fast"}), "field 'latency_rule'"),
            (serde_json::json!({"arrivals": "cv=0"}), "field 'arrivals'"),
            (serde_json::json!({"arrivals": "trace=day.csv"}), "field 'arrivals'"),
            (serde_json::json!({"time_limit_s": 0.0}), "field 'time_limit_s'"),
            (serde_json::json!({"time_limit_s": 1e9}), "field 'time_limit_s'"),
        ] {
            let error = request(body).unwrap_err();
            assert!(error.message.starts_with(field), "{}", error.message);
        }
        assert!(serde_json::from_value::<PlanJobRequest>(serde_json::json!({"demo": true, "colour": 1})).is_err());
        let bursty = request(serde_json::json!({"demo": true, "arrivals": "cv=2"})).unwrap();
        assert_eq!(bursty.arrivals, Some(ArrivalModel::Renewal { cv: 2.0 }));
    }

    #[test]
    fn the_demo_plans_from_its_snapshot() {
        let store = Store::open_in_memory().unwrap();
        let checked = request(serde_json::json!({"demo": true, "time_limit_s": 30.0})).unwrap();
        let inputs = JobInputs::gather(&checked, &store).unwrap();
        assert_eq!(inputs.services.len(), 6);
        let plan = plan(&checked, &inputs).unwrap();
        assert!(plan.services.iter().all(|report| report.met));
        assert_eq!(plan.traffic.map(|traffic| traffic.arrivals).as_deref(), Some("poisson"));
        // The stored store has no services: the error says what to do.
        let error = JobInputs::gather(&request(serde_json::json!({})).unwrap(), &store).unwrap_err();
        assert!(error.message.starts_with("no services to plan"), "{}", error.message);
    }
}
