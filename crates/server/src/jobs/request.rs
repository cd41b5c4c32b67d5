//! What `POST /v1/plans` asks, checked at the door, and what a job plans
//! from: a snapshot of its inputs stored with it. Every planning decision
//! (defaults, strategies, replanning, notes) is `tessera_plan::plan`'s:
//! this module only translates the request.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};
use tessera_core::text::count;
use tessera_core::{GpuModel, ModelProfile, Plan, ProfileCatalog, ServiceImage, ServiceSlo};
use tessera_plan::{
    Arrivals, Cancel, PlanError, PlanInputs, PlanOptions, PlanRequest, ProfileOrigin, ReplanFrom, ReplanOptions,
};
use tessera_store::Store;

use crate::error::ApiError;

/// What `POST /v1/plans` asks: `tessera plan`'s options (one type,
/// [`PlanOptions`], with the same names and defaults), the inputs (the
/// demo's or the store's) and the running plan to replan from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, utoipa::ToSchema)]
#[schema(example = json!({"demo": true, "strategy": "optimal", "gpus": ["a100-80gb"], "time_limit_s": 5.0}))]
pub(crate) struct PlanJobRequest {
    /// Plan the built-in demo (synthetic profiles, six services) instead of
    /// the stored services and profiles.
    pub demo: bool,
    /// How to plan.
    #[serde(flatten)]
    pub options: PlanOptions,
    /// Replan from the plan of this done job (the plan that runs now), as
    /// `tessera plan --from`: every SLO met, at most the fresh optimum's GPUs
    /// plus `max_extra_gpus`, then the fewest GPUs reconfigured, instances
    /// created or destroyed, and processes started. `optimal` only.
    pub from_plan: Option<u64>,
    /// With `from_plan`: how to replan.
    #[serde(flatten)]
    pub replan: ReplanOptions,
}

/// The longest time limit a job may ask for, seconds.
pub(crate) const MAX_TIME_LIMIT_S: f64 = 3600.0;

impl PlanJobRequest {
    /// Reads a request from the fields of its JSON body; an error names
    /// the field (`field 'strategy': unknown strategy 'best' …`), an
    /// unknown field included.
    pub(crate) fn from_body(mut body: Map<String, Value>) -> Result<PlanJobRequest, String> {
        let demo = take_field(&mut body, "demo")?.unwrap_or(false);
        let from_plan = take_field::<Option<u64>>(&mut body, "from_plan")?.flatten();
        let options = take_part::<PlanOptions>(&mut body)?;
        let replan = take_part::<ReplanOptions>(&mut body)?;
        if let Some(unknown) = body.keys().next() {
            let known: Vec<String> = field_names(&PlanJobRequest::default()).into_iter().collect();
            return Err(format!("field '{unknown}': not a field of a plan job (known: {})", known.join(", ")));
        }
        Ok(PlanJobRequest { demo, options, from_plan, replan })
    }

    /// Refuses, naming the field, what no job may ask: options out of
    /// their ranges (as the command line's parsers refuse them), a time
    /// limit above [`MAX_TIME_LIMIT_S`], a trace (a file the service does
    /// not read), replan options without a plan to replan from.
    pub(crate) fn check(&self) -> Result<(), ApiError> {
        self.options.check().map_err(|error| match error {
            PlanError::InvalidOption { field, message } => ApiError::invalid(format!("field '{field}': {message}")),
            other => ApiError::invalid(other.to_string()),
        })?;
        if self.options.time_limit_s > MAX_TIME_LIMIT_S {
            return Err(ApiError::invalid(format!(
                "field 'time_limit_s': {} is not a time limit in (0, {MAX_TIME_LIMIT_S}] seconds",
                tessera_core::text::number(self.options.time_limit_s, 3)
            )));
        }
        if let Some(Arrivals::TraceFile(path)) = &self.options.arrivals {
            return Err(ApiError::invalid(format!(
                "field 'arrivals': trace={} is a file on the command line (tessera plan --arrivals); a job takes \
                 poisson, cv=X or onoff=…",
                path.display()
            )));
        }
        if self.from_plan.is_none() && self.replan.is_set() {
            return Err(ApiError::invalid(
                "field 'from_plan': max_extra_gpus, drain and lost replan a running plan: name its job in from_plan",
            ));
        }
        Ok(())
    }

    /// The job's time limit (at most [`MAX_TIME_LIMIT_S`] once checked).
    pub(crate) fn time_limit(&self) -> Duration {
        self.options.time_limit().unwrap_or(Duration::from_secs_f64(MAX_TIME_LIMIT_S))
    }
}

/// A stored request reads as a posted one.
impl<'de> Deserialize<'de> for PlanJobRequest {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        PlanJobRequest::from_body(Map::deserialize(deserializer)?).map_err(serde::de::Error::custom)
    }
}

/// The JSON field names of `value` (a struct serialized with every field).
fn field_names<T: Serialize>(value: &T) -> Vec<String> {
    match serde_json::to_value(value) {
        Ok(Value::Object(fields)) => fields.keys().cloned().collect(),
        _ => Vec::new(),
    }
}

/// Field `name` of `body`, taken out; an error names it.
fn take_field<T: DeserializeOwned>(body: &mut Map<String, Value>, name: &str) -> Result<Option<T>, String> {
    body.remove(name)
        .map(|value| serde_json::from_value(value).map_err(|error| format!("field '{name}': {error}")))
        .transpose()
}

/// The fields of a `T` in `body`, taken out and read as one (the others
/// at their defaults); an error names the field.
fn take_part<T: DeserializeOwned + Serialize + Default>(body: &mut Map<String, Value>) -> Result<T, String> {
    let mut part = Map::new();
    for name in field_names(&T::default()) {
        if let Some(value) = body.remove(&name) {
            // Read alone first, so that the error names the field.
            let alone = Map::from_iter([(name.clone(), value.clone())]);
            serde_json::from_value::<T>(Value::Object(alone)).map_err(|error| format!("field '{name}': {error}"))?;
            part.insert(name, value);
        }
    }
    serde_json::from_value(Value::Object(part)).map_err(|error| error.to_string())
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
    pub(crate) fn gather(request: &PlanJobRequest, store: &Store) -> Result<JobInputs, ApiError> {
        let fleet = request.options.gpu_models();
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
        planning_request(request, &inputs, current_plan)?.check()?;
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
    request: &PlanJobRequest,
    inputs: &'a PlanInputs,
    current: Option<&'a Plan>,
) -> Result<PlanRequest<'a>, PlanError> {
    PlanRequest::from_options(
        &request.options,
        inputs,
        current.map(|current| ReplanFrom::new(current, &request.replan)),
    )
}

/// The plan of done job `id`: a 404 when there is no such job, a 422 when
/// it has no plan.
fn current_plan(store: &Store, id: u64) -> Result<Plan, ApiError> {
    let job = store.job(id)?.ok_or_else(|| ApiError::not_found(format!("field 'from_plan': no planning job {id}")))?;
    job.plan.ok_or_else(|| {
        ApiError::invalid(format!("field 'from_plan': job {id} has no plan (it is {})", job.status.name()))
    })
}

/// Plans `inputs` as `request` asks, until `cancel` asks it to stop (a
/// replan when they hold the plan that
/// runs); the error is the planner's one-line message.
pub(crate) fn plan(request: &PlanJobRequest, inputs: &JobInputs, cancel: &Cancel) -> Result<Plan, String> {
    let plan_inputs = inputs.plan_inputs(&request.options.gpu_models())?;
    let current = inputs.current.as_ref();
    let mut planning =
        planning_request(request, &plan_inputs, current.map(|(_, plan)| plan)).map_err(|e| e.to_string())?;
    planning.cancel = Some(cancel);
    let planned = tessera_plan::plan(&planning).map_err(|e| e.to_string())?;
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

    fn request(json: serde_json::Value) -> Result<PlanJobRequest, ApiError> {
        let serde_json::Value::Object(body) = json else { panic!("a body is an object") };
        let request = PlanJobRequest::from_body(body).map_err(ApiError::invalid)?;
        request.check()?;
        Ok(request)
    }

    #[test]
    fn requests_are_checked_field_by_field() {
        let checked = request(serde_json::json!({"demo": true})).unwrap();
        assert_eq!(checked.options, PlanOptions::default());
        let parva = request(serde_json::json!({"strategy": "parva", "gpus": ["h100-80gb:cost=2,count=3"]})).unwrap();
        assert_eq!((parva.options.strategy, parva.options.gpus[0].limit), (tessera_plan::Strategy::Parva, Some(3)));
        for (body, field) in [
            (serde_json::json!({"strategy": "best"}), "field 'strategy'"),
            (serde_json::json!({"gpus": ["b200"]}), "field 'gpus'"),
            (serde_json::json!({"gpus": []}), "field 'gpus'"),
            (serde_json::json!({"latency_rule": "fast"}), "field 'latency_rule'"),
            (serde_json::json!({"arrivals": "cv=0"}), "field 'arrivals'"),
            (serde_json::json!({"arrivals": "trace=day.csv"}), "field 'arrivals'"),
            (serde_json::json!({"time_limit_s": 0.0}), "field 'time_limit_s'"),
            (serde_json::json!({"time_limit_s": 1e9}), "field 'time_limit_s'"),
            (serde_json::json!({"max_procs": 0}), "field 'max_procs'"),
            (serde_json::json!({"max_gpus": 0}), "field 'max_gpus'"),
            (serde_json::json!({"gpus_per_node": 0}), "field 'gpus_per_node'"),
            (serde_json::json!({"share": "mps"}), "field 'share'"),
            (serde_json::json!({"drain": ["3"]}), "field 'drain'"),
            (serde_json::json!({"lost": ["0:1"]}), "field 'from_plan'"),
            (serde_json::json!({"demo": 1}), "field 'demo'"),
            (serde_json::json!({"demo": true, "colour": 1}), "field 'colour'"),
        ] {
            let error = request(body.clone()).unwrap_err();
            assert!(error.message.starts_with(field), "{body}: {}", error.message);
        }
        let bursty = request(serde_json::json!({"demo": true, "arrivals": "cv=2", "spread": true})).unwrap();
        assert_eq!(bursty.options.arrivals, Some(Arrivals::Model(tessera_serving::ArrivalModel::Renewal { cv: 2.0 })));
        assert!(bursty.options.spread);
    }

    #[test]
    fn a_stored_request_reads_back_as_it_was_posted() {
        let posted = request(serde_json::json!({"demo": true, "gpus": ["a30-24gb:count=4"], "from_plan": 3,
            "drain": ["0:1"], "max_extra_gpus": 2}))
        .unwrap();
        let stored = serde_json::to_string(&posted).unwrap();
        assert_eq!(serde_json::from_str::<PlanJobRequest>(&stored).unwrap(), posted);
        // A request stored before spread, drain and lost existed still reads.
        let old = r#"{"demo":true,"strategy":"optimal","gpus":["a100-80gb"],"latency_rule":null,"arrivals":null,
            "time_limit_s":10.0,"max_procs":5,"gpus_per_node":8,"max_gpus":100000,"from_plan":null,"max_extra_gpus":0}"#;
        assert!(serde_json::from_str::<PlanJobRequest>(old).unwrap().demo);
    }

    #[test]
    fn the_demo_plans_from_its_snapshot() {
        let store = Store::open_in_memory().unwrap();
        let checked = request(serde_json::json!({"demo": true, "time_limit_s": 30.0})).unwrap();
        let inputs = JobInputs::gather(&checked, &store).unwrap();
        assert_eq!(inputs.services.len(), 6);
        let plan = plan(&checked, &inputs, &Cancel::new()).unwrap();
        assert!(plan.services.iter().all(|report| report.met));
        assert_eq!(plan.traffic.map(|traffic| traffic.arrivals).as_deref(), Some("poisson"));
        let spread = request(serde_json::json!({"demo": true, "time_limit_s": 30.0, "spread": true})).unwrap();
        let plan = super::plan(&spread, &JobInputs::gather(&spread, &store).unwrap(), &Cancel::new()).unwrap();
        assert!(plan.notes.iter().any(|note| note.starts_with("spread:")), "{:?}", plan.notes);
        // The stored store has no services: the error says what to do.
        let error = JobInputs::gather(&request(serde_json::json!({})).unwrap(), &store).unwrap_err();
        assert!(error.message.starts_with("no services to plan"), "{}", error.message);
    }
}
