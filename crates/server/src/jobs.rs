//! Planning jobs: a request is checked and its inputs (services and
//! profiles) snapshotted and stored at once, then planned by one of a fixed
//! number of workers on a blocking thread, and its plan stored with those
//! inputs so it can be verified again later.
//!
//! A job that runs past its time limit plus a grace period is failed with
//! that reason (the planner's thread finishes on its own and its plan is
//! dropped); the planner's own time limit stops it earlier in every phase,
//! and a plan it cut short says so in its notes. At shutdown, queued jobs
//! fail with "the server stopped" and running ones are waited for.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tessera_core::synthetic::{builtin_catalog, demo_services};
use tessera_core::text::count;
use tessera_core::{GpuModel, GpuOffer, ModelProfile, Plan, ProfileCatalog, ServiceImage, ServiceSlo};
use tessera_plan::{
    complete_for_fleet, plan_optimal, plan_parva, replan, LatencyRule, PlanRequest, ProfileOrigin, ReplanRequest,
};
use tessera_store::Store;
use tokio::sync::{Notify, Semaphore};

use crate::error::ApiError;
use crate::state::AppState;

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
    /// `queueing` or `parva`; by default `queueing` for `optimal`, `parva`
    /// for `parva`.
    #[serde(default)]
    pub latency_rule: Option<String>,
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
    "optimal".to_string()
}
fn default_fleet() -> Vec<String> {
    vec![GpuModel::A100_80GB.id().to_string()]
}
fn default_time_limit_s() -> f64 {
    10.0
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

/// A request's options, checked.
#[derive(Debug, Clone)]
pub(crate) struct CheckedRequest {
    /// Whether it plans the demo.
    pub demo: bool,
    /// `true` for `parva`, `false` for `optimal`.
    pub parva: bool,
    /// The fleet.
    pub fleet: Vec<GpuOffer>,
    /// The latency rule.
    pub rule: LatencyRule,
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
    /// The options checked, or a 422 naming the field.
    pub(crate) fn check(&self) -> Result<CheckedRequest, ApiError> {
        let parva = match self.strategy.as_str() {
            "optimal" => false,
            "parva" => true,
            other => {
                return Err(ApiError::invalid(format!("field 'strategy': unknown strategy '{other}' (optimal, parva)")))
            }
        };
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
                name.parse::<LatencyRule>().map_err(|e| ApiError::invalid(format!("field 'latency_rule': {e}")))?
            }
            None if parva => LatencyRule::Parva,
            None => LatencyRule::Queueing,
        };
        if !(self.time_limit_s > 0.0 && self.time_limit_s <= MAX_TIME_LIMIT_S) {
            return Err(ApiError::invalid(format!(
                "field 'time_limit_s': {} is not a time limit in (0, {MAX_TIME_LIMIT_S}] seconds",
                self.time_limit_s
            )));
        }
        if self.from_plan.is_some() && parva {
            return Err(ApiError::invalid(
                "field 'from_plan': replanning uses the optimal strategy; leave 'strategy' out or set it to \"optimal\"",
            ));
        }
        if self.gpus_per_node == 0 {
            return Err(ApiError::invalid("field 'gpus_per_node': must be at least 1"));
        }
        Ok(CheckedRequest {
            demo: self.demo,
            parva,
            fleet,
            rule,
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
    /// The services and profiles `request` plans: the demo's, or the
    /// store's (a store without services or profiles is a 422 saying what
    /// to add).
    pub(crate) fn gather(request: &CheckedRequest, store: &Store) -> Result<JobInputs, ApiError> {
        let mut images = BTreeMap::new();
        let (services, catalog, origin) = if request.demo {
            (demo_services(), builtin_catalog(), ProfileOrigin::Synthetic)
        } else {
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
            (services, catalog, ProfileOrigin::Measured)
        };
        let current = match request.from_plan {
            Some(id) => Some((id, current_plan(store, id)?)),
            None => None,
        };
        let fleet: Vec<GpuModel> = request.fleet.iter().map(|offer| offer.model).collect();
        let (catalog, estimates) = complete_for_fleet(catalog, origin, &fleet);
        Ok(JobInputs {
            services,
            profiles: catalog.iter().cloned().collect(),
            notes: estimates.iter().map(ToString::to_string).collect(),
            images,
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
    let catalog = inputs.catalog()?;
    let plan_request = PlanRequest {
        fleet: request.fleet.clone(),
        catalog: &catalog,
        services: &inputs.services,
        rule: request.rule,
        max_procs: request.max_procs,
        gpus_per_node: request.gpus_per_node,
        time_limit: Some(request.time_limit),
        max_gpus: request.max_gpus,
    };
    let started = Instant::now();
    let mut plan = match &inputs.current {
        Some((id, current)) => {
            let replanned = replan(&ReplanRequest {
                plan: plan_request,
                current,
                max_extra_gpus: request.max_extra_gpus,
                removed_gpus: &[],
            })
            .map_err(|e| e.to_string())?;
            let mut plan = replanned.plan;
            plan.notes.push(format!(
                "replanned from plan {id}: {} of {} layouts kept, {} reconfigured; the fresh optimum: {}, {} layouts kept",
                replanned.diff.totals.layouts_kept(),
                current.gpu_count,
                count(replanned.diff.totals.gpus_reconfigured(), "GPU"),
                count(replanned.fresh.gpu_count, "GPU"),
                replanned.fresh_diff.totals.layouts_kept(),
            ));
            plan
        }
        None if request.parva => plan_parva(&plan_request).map_err(|e| e.to_string())?,
        None => plan_optimal(&plan_request).map_err(|e| e.to_string())?,
    };
    plan.notes.extend(inputs.notes.iter().cloned());
    plan.images = inputs.images.clone();
    let unproven = plan.optimality.as_ref().is_some_and(|o| !o.proven_optimal);
    if unproven && started.elapsed() >= request.time_limit {
        plan.notes.push(format!(
            "planning stopped at its time limit of {} s: this is the best plan found, not proven optimal",
            request.time_limit.as_secs_f64()
        ));
    }
    Ok(plan)
}

/// The planning workers and the jobs they hold.
#[derive(Debug)]
pub(crate) struct JobQueue {
    /// One permit per worker; closed at shutdown.
    workers: Arc<Semaphore>,
    /// When each running job started and its limit.
    running: Mutex<HashMap<u64, (Instant, Duration)>>,
    /// Jobs queued or running.
    pending: Mutex<usize>,
    /// Told when a job finishes.
    finished: Notify,
    /// Cleared at shutdown: no job is accepted after.
    accepting: AtomicBool,
}

/// How far a running job is.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Progress {
    /// Seconds it has run.
    pub elapsed_s: f64,
    /// Its time limit, seconds.
    pub time_limit_s: f64,
}

impl JobQueue {
    /// A queue with `workers` workers.
    pub(crate) fn new(workers: usize) -> JobQueue {
        JobQueue {
            workers: Arc::new(Semaphore::new(workers)),
            running: Mutex::new(HashMap::new()),
            pending: Mutex::new(0),
            finished: Notify::new(),
            accepting: AtomicBool::new(true),
        }
    }

    /// How far job `id` is, if it is running.
    pub(crate) fn progress(&self, id: u64) -> Option<Progress> {
        let running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        running.get(&id).map(|(started, limit)| Progress {
            elapsed_s: started.elapsed().as_secs_f64(),
            time_limit_s: limit.as_secs_f64(),
        })
    }

    /// Takes a place for a new job, or refuses one: the server is stopping
    /// or `max_jobs` are queued or running.
    pub(crate) fn reserve(&self, max_jobs: usize) -> Result<(), ApiError> {
        if !self.accepting.load(Ordering::SeqCst) {
            return Err(shutting_down());
        }
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        if *pending >= max_jobs {
            return Err(ApiError::new(
                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                "queue_full",
                format!("{max_jobs} planning jobs are queued or running; retry when some have finished"),
            ));
        }
        *pending += 1;
        Ok(())
    }

    /// Gives back a place taken by [`JobQueue::reserve`].
    pub(crate) fn release(&self) {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        *pending = pending.saturating_sub(1);
        drop(pending);
        self.finished.notify_waiters();
    }

    /// Stops accepting jobs and fails queued ones; returns once no job is
    /// pending or `wait` has passed.
    pub(crate) async fn shut_down(&self, wait: Duration) {
        self.accepting.store(false, Ordering::SeqCst);
        self.workers.close();
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let notified = self.finished.notified();
            if *self.pending.lock().unwrap_or_else(PoisonError::into_inner) == 0 {
                return;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return;
            }
        }
    }
}

/// The error of a request that arrives while the server stops.
fn shutting_down() -> ApiError {
    ApiError::new(axum::http::StatusCode::SERVICE_UNAVAILABLE, "shutting_down", "the server is shutting down")
}

/// Runs job `id` (already stored as queued, its place reserved): waits for
/// a worker, plans on a blocking thread within the time limit and grace,
/// stores the plan or the reason it failed.
pub(crate) async fn run_job(state: AppState, id: u64, request: CheckedRequest, inputs: JobInputs) {
    let shared = &state.inner;
    let permit = match Arc::clone(&shared.jobs.workers).acquire_owned().await {
        Ok(permit) => permit,
        Err(_) => {
            finish(&state, id, Err("the server stopped before the job started".to_string()), None).await;
            return;
        }
    };
    if let Err(error) = state.with_store(true, move |store| Ok(store.start_job(id)?)).await {
        finish(&state, id, Err(error.message), None).await;
        return;
    }
    shared.metrics.job_started();
    let started = Instant::now();
    shared.jobs.running.lock().unwrap_or_else(PoisonError::into_inner).insert(id, (started, request.time_limit));
    let allowed = request.time_limit + shared.config.job_grace;
    let planning = tokio::task::spawn_blocking(move || {
        let planned = plan(&request, &inputs);
        drop(permit);
        planned
    });
    let outcome = match tokio::time::timeout(allowed, planning).await {
        Ok(Ok(planned)) => planned,
        Ok(Err(error)) => Err(format!("the planner failed: {error}")),
        Err(_) => Err(format!(
            "the job exceeded its time limit: no plan after {:.1} s (time limit {:.1} s plus {:.1} s of grace)",
            allowed.as_secs_f64(),
            (allowed - shared.config.job_grace).as_secs_f64(),
            shared.config.job_grace.as_secs_f64()
        )),
    };
    shared.jobs.running.lock().unwrap_or_else(PoisonError::into_inner).remove(&id);
    finish(&state, id, outcome, Some(started.elapsed().as_secs_f64())).await;
}

/// Stores job `id`'s outcome, counts it, and makes its plan current (under
/// the store's lock, so no reader sees the job done before its plan is the
/// current one).
async fn finish(state: &AppState, id: u64, outcome: Result<Plan, String>, ran_s: Option<f64>) {
    let status = match outcome {
        Ok(plan) => {
            let current = state.clone();
            let stored = state
                .with_store(true, move |store| {
                    store.complete_job(id, &plan)?;
                    current.offer_plan(id, Arc::new(plan));
                    Ok(())
                })
                .await;
            match stored {
                Ok(()) => "done",
                Err(error) => {
                    let reason = format!("the plan could not be stored: {}", error.message);
                    record_failure(state, id, reason).await;
                    "failed"
                }
            }
        }
        Err(reason) => {
            record_failure(state, id, reason).await;
            "failed"
        }
    };
    state.inner.metrics.job_finished(status, ran_s);
    state.inner.jobs.release();
}

/// Stores job `id` as failed because of `reason`, and logs it.
async fn record_failure(state: &AppState, id: u64, reason: String) {
    tracing::info!(job = id, reason = %reason, "planning job failed");
    if let Err(error) = state.with_store(true, move |store| Ok(store.fail_job(id, &reason)?)).await {
        tracing::error!(job = id, error = %error.message, "a failed job could not be recorded");
    }
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
        assert_eq!((checked.parva, checked.rule, checked.fleet.len()), (false, LatencyRule::Queueing, 1));
        let parva = request(serde_json::json!({"strategy": "parva", "gpus": ["h100-80gb:cost=2,count=3"]})).unwrap();
        assert_eq!((parva.rule, parva.fleet[0].limit), (LatencyRule::Parva, Some(3)));
        for (body, field) in [
            (serde_json::json!({"strategy": "best"}), "field 'strategy'"),
            (serde_json::json!({"gpus": ["b200"]}), "field 'gpus'"),
            (serde_json::json!({"gpus": []}), "field 'gpus'"),
            (serde_json::json!({"latency_rule": "fast"}), "field 'latency_rule'"),
            (serde_json::json!({"time_limit_s": 0.0}), "field 'time_limit_s'"),
            (serde_json::json!({"time_limit_s": 1e9}), "field 'time_limit_s'"),
        ] {
            let error = request(body).unwrap_err();
            assert!(error.message.starts_with(field), "{}", error.message);
        }
        assert!(serde_json::from_value::<PlanJobRequest>(serde_json::json!({"demo": true, "colour": 1})).is_err());
    }

    #[test]
    fn the_demo_plans_from_its_snapshot_and_says_when_time_ran_out() {
        let store = Store::open_in_memory().unwrap();
        let checked = request(serde_json::json!({"demo": true, "time_limit_s": 30.0})).unwrap();
        let inputs = JobInputs::gather(&checked, &store).unwrap();
        assert_eq!(inputs.services.len(), 6);
        let plan = plan(&checked, &inputs).unwrap();
        assert!(plan.services.iter().all(|report| report.met));
        // The stored store has no services: the error says what to do.
        let error = JobInputs::gather(&request(serde_json::json!({})).unwrap(), &store).unwrap_err();
        assert!(error.message.starts_with("no services to plan"), "{}", error.message);
    }
}
