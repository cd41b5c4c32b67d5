//! Planning jobs and plans: start a job (202 at once), follow it, list
//! them, verify a stored plan again from the inputs it was made from, or
//! verify a posted plan against the current services and profiles.

use std::collections::BTreeSet;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use tessera_core::synthetic::{builtin_catalog, demo_services};
use tessera_core::{GpuModel, Plan};
use tessera_plan::{verify_plan, CheckOptions, PlanInputs, ProfileOrigin, Verification};
use tessera_store::{parse_plan, PlanDocument, StoredJob};

use crate::api::{off_the_workers, tags, ApiJson, ApiPath};
use crate::error::{without_paths, ApiError, ErrorBody};
use crate::jobs::{run_job, JobInputs, PlanJobRequest};
use crate::state::AppState;

/// A job was accepted.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct JobCreated {
    /// The job's (and its plan's) id.
    pub id: u64,
    /// `queued`.
    pub status: String,
    /// Where to follow it.
    pub url: String,
}

/// How far a running job is: time spent against its limit.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct ProgressBody {
    /// Seconds it has run.
    pub elapsed_s: f64,
    /// Its time limit, seconds.
    pub time_limit_s: f64,
}

/// A planning job and, once done, its plan.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct JobBody {
    /// The job's id.
    pub id: u64,
    /// `queued`, `running`, `done` or `failed`.
    #[schema(example = "done")]
    pub status: String,
    /// While running: time spent against the time limit.
    pub progress: Option<ProgressBody>,
    /// Why it failed (one line).
    pub error: Option<String>,
    /// The plan JSON document (as `tessera plan --format json` writes it),
    /// once done.
    #[schema(value_type = Option<Object>)]
    #[serde(serialize_with = "plan_document")]
    pub plan: Option<Plan>,
    /// What was asked.
    pub request: PlanJobRequest,
    /// When it was submitted (UTC).
    pub created_at: String,
    /// When a worker started it.
    pub started_at: Option<String>,
    /// When it finished.
    pub finished_at: Option<String>,
    /// The HTML report of its plan.
    pub report_url: String,
}

/// A job's plan as the plan JSON document, versioned.
fn plan_document<S: serde::Serializer>(plan: &Option<Plan>, serializer: S) -> Result<S::Ok, S::Error> {
    plan.as_ref().map(PlanDocument::new).serialize(serializer)
}

fn job_body(state: &AppState, job: StoredJob) -> Result<JobBody, ApiError> {
    let progress = state
        .inner
        .jobs
        .progress(job.id)
        .map(|p| ProgressBody { elapsed_s: p.elapsed_s, time_limit_s: p.time_limit_s });
    let request = serde_json::from_str(&job.request)
        .map_err(|e| ApiError::internal(format!("planning job {}: its stored request is unreadable: {e}", job.id)))?;
    Ok(JobBody {
        id: job.id,
        status: job.status.name().to_string(),
        progress,
        // A failure's reason may quote the store's errors: without its path.
        error: job.error.map(|reason| without_paths(&reason, state.private_paths())),
        plan: job.plan,
        request,
        created_at: job.created_at,
        started_at: job.started_at,
        finished_at: job.finished_at,
        report_url: format!("/plans/{}", job.id),
    })
}

/// Starts planning the stored services on the stored profiles (or the
/// demo) as a job, and answers at once with its id (202). The job, its
/// inputs and, when done, its plan are kept in the store.
#[utoipa::path(post, path = "/v1/plans", tag = tags::PLANS, security(("bearer" = [])),
    request_body = PlanJobRequest,
    responses((status = 202, body = JobCreated, headers(("Location" = String, description = "the job's URL"))),
        (status = 422, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub(crate) async fn create_plan(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<serde_json::Map<String, serde_json::Value>>,
) -> Result<Response, ApiError> {
    let request = PlanJobRequest::from_body(body).map_err(ApiError::invalid)?;
    request.check()?;
    let checked = request.clone();
    state.inner.jobs.reserve(state.inner.config.max_jobs)?;
    let request_json = serde_json::to_string(&request).map_err(|e| ApiError::internal(e.to_string()))?;
    let for_store = checked.clone();
    let stored = state
        .with_store(true, move |store| {
            let inputs = JobInputs::gather(&for_store, store)?;
            let inputs_json = serde_json::to_string(&inputs).map_err(|e| ApiError::internal(e.to_string()))?;
            let id = store.insert_job(&request_json, &inputs_json)?;
            Ok((id, inputs))
        })
        .await;
    let (id, inputs) = match stored {
        Ok(stored) => stored,
        Err(error) => {
            state.inner.jobs.release();
            return Err(error);
        }
    };
    state.inner.metrics.job_queued();
    tokio::spawn(run_job(state.clone(), id, checked, inputs));
    let url = format!("/v1/plans/{id}");
    let location = [(header::LOCATION, url.clone())];
    Ok((StatusCode::ACCEPTED, location, Json(JobCreated { id, status: "queued".to_string(), url })).into_response())
}

/// The newest planning jobs (at most 100), newest first, with their plans.
#[utoipa::path(get, path = "/v1/plans", tag = tags::PLANS, security(("bearer" = [])),
    responses((status = 200, body = Vec<JobBody>)))]
pub(crate) async fn list_plans(State(state): State<AppState>) -> Result<Json<Vec<JobBody>>, ApiError> {
    let jobs = state.with_store(false, |store| Ok(store.list_jobs(100)?)).await?;
    Ok(Json(jobs.into_iter().map(|job| job_body(&state, job)).collect::<Result<_, _>>()?))
}

/// A planning job: its status, progress and, once done, its plan.
#[utoipa::path(get, path = "/v1/plans/{id}", tag = tags::PLANS, security(("bearer" = [])),
    params(("id" = u64, Path, example = 1)),
    responses((status = 200, body = JobBody), (status = 404, body = ErrorBody)))]
pub(crate) async fn get_plan(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<u64>,
) -> Result<Json<JobBody>, ApiError> {
    let job = state.with_store(false, move |store| Ok(store.job(id)?)).await?;
    let job = job.ok_or_else(|| ApiError::not_found(format!("no planning job {id}")))?;
    Ok(Json(job_body(&state, job)?))
}

/// Verifies stored plan `id` again, against the services and profiles it
/// was planned from (kept with it), under its own latency rule.
#[utoipa::path(post, path = "/v1/plans/{id}/verify", tag = tags::PLANS, security(("bearer" = [])),
    params(("id" = u64, Path, example = 1)),
    responses((status = 200, body = Verification), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub(crate) async fn verify_stored(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<u64>,
) -> Result<Json<Verification>, ApiError> {
    let job = state.with_store(false, move |store| Ok(store.job(id)?)).await?;
    let job = job.ok_or_else(|| ApiError::not_found(format!("no planning job {id}")))?;
    let plan = job.plan.ok_or_else(|| {
        ApiError::new(
            StatusCode::CONFLICT,
            "no_plan",
            format!("planning job {id} is {}: it has no plan", job.status.name()),
        )
    })?;
    let inputs: JobInputs = serde_json::from_str(&job.inputs)
        .map_err(|e| ApiError::internal(format!("planning job {id}: its stored inputs are unreadable: {e}")))?;
    let request: PlanJobRequest = serde_json::from_str(&job.request)
        .map_err(|e| ApiError::internal(format!("planning job {id}: its stored request is unreadable: {e}")))?;
    let fleet: Vec<GpuModel> = plan.gpus.iter().map(|gpu| gpu.gpu_model).collect::<BTreeSet<_>>().into_iter().collect();
    let inputs = inputs.plan_inputs(&fleet).map_err(ApiError::internal)?;
    let checked = off_the_workers(move || {
        verify_plan(&plan, &inputs, CheckOptions { max_procs: request.options.max_procs, ..CheckOptions::default() })
    })
    .await??;
    Ok(Json(checked))
}

/// A plan to verify.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"demo": true, "plan": {"version": 1, "gpu_count": 1, "strategy": "optimal",
    "latency_rule": "queueing", "gpus_per_node": 8, "gpus": [{"node": 0, "index": 0, "gpu_model": "a100-80gb",
    "instances": [{"profile": "7g.80gb", "size": 7, "start": 0, "service": "photo-tagging", "model": "resnet50",
    "batch": 8, "procs": 1, "throughput_rps": 100.0, "latency_ms": 10.0}]}], "services": []}}))]
pub(crate) struct VerifyBody {
    /// The plan JSON document (as `tessera plan --format json` writes it).
    #[schema(value_type = Object)]
    pub plan: Box<RawValue>,
    /// Check against the built-in demo's services and profiles instead of
    /// the stored ones.
    #[serde(default)]
    pub demo: bool,
    /// The rule to check under; by default the one the plan records.
    #[serde(default)]
    pub latency_rule: Option<String>,
    /// Most MPS processes allowed per segment.
    #[serde(default = "default_max_procs")]
    pub max_procs: u32,
}

fn default_max_procs() -> u32 {
    tessera_plan::DEFAULT_MAX_PROCS
}

/// Verifies a posted plan against the stored services and profiles (or
/// the demo's). A plan for services that are not there is refused (422,
/// `unknown_service`); violations are answered as a result (200, `ok`
/// false).
#[utoipa::path(post, path = "/v1/verify", tag = tags::PLANS, security(("bearer" = [])),
    request_body = VerifyBody,
    responses((status = 200, body = Verification), (status = 422, body = ErrorBody)))]
pub(crate) async fn verify_posted(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<VerifyBody>,
) -> Result<Json<Verification>, ApiError> {
    let plan = parse_plan("field 'plan'", body.plan.get().as_bytes())?;
    let rule = match &body.latency_rule {
        Some(name) => Some(name.parse().map_err(|e: String| ApiError::invalid(format!("field 'latency_rule': {e}")))?),
        None => None,
    };
    let fleet: Vec<GpuModel> = plan.gpus.iter().map(|gpu| gpu.gpu_model).collect::<BTreeSet<_>>().into_iter().collect();
    let (services, catalog, origin) = if body.demo {
        (demo_services(), builtin_catalog(), ProfileOrigin::Synthetic)
    } else {
        state
            .with_store(false, |store| {
                let services = store.list_services()?.into_iter().map(|stored| stored.slo).collect::<Vec<_>>();
                Ok((services, store.load_catalog(None)?, ProfileOrigin::Measured))
            })
            .await?
    };
    let known: BTreeSet<&str> = services.iter().map(|slo| slo.service.as_str()).collect();
    let unknown: BTreeSet<&str> = plan
        .provided_rps()
        .into_keys()
        .chain(plan.services.iter().map(|report| report.service.as_str()))
        .filter(|service| !known.contains(service))
        .collect();
    if !unknown.is_empty() {
        let names: Vec<String> = unknown.iter().map(|name| format!("'{name}'")).collect();
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "unknown_service",
            format!(
                "the plan serves {} that {} not hold: {}",
                tessera_core::text::count(unknown.len(), "service"),
                if body.demo { "the demo does" } else { "the store does" },
                names.join(", ")
            ),
        ));
    }
    let max_procs = body.max_procs;
    let checked = off_the_workers(move || {
        let inputs = PlanInputs::new(services, catalog, origin, &fleet)?;
        verify_plan(&plan, &inputs, CheckOptions { rule, max_procs, ..CheckOptions::default() })
    })
    .await??;
    Ok(Json(checked))
}
