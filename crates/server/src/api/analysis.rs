//! Colocation (partners for a target, from the stored measurements) and
//! simulation (a posted trace on one GPU whose memory it oversubscribes).

use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use tessera_colocate::{check_query, recommend_trained, Query, Risk, Search, TrainedModel};
use tessera_core::{Colocation, WorkloadMetrics};
use tessera_sim::{
    gantt_svg, lower_bound_ns, plan_schedule, simulate, Eviction, GeneticParams, Policies, Prefetch, Retention,
    SchedulerKind, Trace,
};

use crate::api::{off_the_workers, tags, ApiJson};
use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;

/// What to recommend partners for.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"target": "bert-base-cased_batch8-inf", "group_size": 2, "top": 3}))]
pub(crate) struct RecommendBody {
    /// The workload to find partners for (a stored workload).
    pub target: String,
    /// Workloads per group, the target included.
    #[serde(default = "default_group_size")]
    pub group_size: usize,
    /// Groups to return, best first.
    #[serde(default = "default_top")]
    pub top: usize,
    /// `slowdown` (per-member retained fractions) or `kace` (KACE's linear
    /// model of a group's total).
    #[serde(default = "default_model")]
    pub model: String,
    /// GPU memory for the footprint check, GB.
    #[serde(default = "default_gpu_memory_gb")]
    pub gpu_memory_gb: f64,
}

fn default_group_size() -> usize {
    2
}
fn default_top() -> usize {
    5
}
fn default_model() -> String {
    "slowdown".to_string()
}
fn default_gpu_memory_gb() -> f64 {
    32.0
}

/// One member of a recommended group.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub(crate) struct MemberBody {
    /// The workload.
    pub workload: String,
    /// Its throughput alone, samples/s.
    pub alone_rps: f64,
    /// Its predicted throughput in the group (`null` under `kace`).
    pub predicted_rps: Option<f64>,
    /// Predicted / alone.
    pub retained: Option<f64>,
}

/// A recommended group.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub(crate) struct GroupBody {
    /// The target first, then its partners.
    pub members: Vec<MemberBody>,
    /// Predicted summed throughput, samples/s.
    pub predicted_total_rps: f64,
    /// Predicted total over taking turns on one GPU.
    pub vs_time_sharing: f64,
    /// Summed memory footprint, GB.
    pub memory_gb: f64,
    /// `true` when the footprints exceed the GPU's memory.
    pub exceeds_memory: bool,
    /// The largest novelty among the members: how far from the training
    /// workloads the prediction reaches (0: every member trained on).
    pub novelty: Option<f64>,
}

/// The ranking.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub(crate) struct RecommendResult {
    /// The model that predicted.
    pub model: String,
    /// `exhaustive`, or `beam` (not exhaustive).
    pub search: String,
    /// Colocations the model learned from.
    pub trained_on: usize,
    /// `model`, or why a rule ranked the groups instead (it chose better
    /// than the model for groups of this size on the inner folds of the
    /// training data; the predictions are the model's).
    pub ranked_by: String,
    /// The best groups, best first.
    pub groups: Vec<GroupBody>,
}

/// Ranks partner groups for a target: a model trained on the stored
/// colocations predicts each group's throughput.
#[utoipa::path(post, path = "/v1/colocation/recommend", tag = tags::ANALYSIS, security(("bearer" = [])),
    request_body = RecommendBody,
    responses((status = 200, body = RecommendResult), (status = 422, body = ErrorBody)))]
pub(crate) async fn recommend_partners(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<RecommendBody>,
) -> Result<Json<RecommendResult>, ApiError> {
    let (rows, pool) =
        state.with_store(false, |store| Ok((store.load_colocations()?, store.load_workloads()?))).await?;
    let result = off_the_workers(move || rank(&body, &rows, pool)).await??;
    Ok(Json(result))
}

/// Trains the model `body` names on `rows` and ranks `pool` for the target.
pub(crate) fn rank(
    body: &RecommendBody,
    rows: &[Colocation],
    mut pool: Vec<WorkloadMetrics>,
) -> Result<RecommendResult, ApiError> {
    if rows.is_empty() {
        return Err(ApiError::invalid("no measured colocations in the store to learn from (tessera colocate import)"));
    }
    pool.sort_by(|a, b| a.workload.cmp(&b.workload));
    pool.dedup_by(|a, b| a.workload == b.workload);
    let query = Query {
        target: &body.target,
        candidates: None,
        group_size: body.group_size,
        gpu_memory_gb: body.gpu_memory_gb,
        top: body.top,
        search: None,
    };
    // Before training (a second or more): a query that cannot be answered.
    check_query(&pool, &query).map_err(|e| ApiError::invalid(e.to_string()))?;
    let trained = match body.model.as_str() {
        "slowdown" => TrainedModel::slowdown(rows, 0),
        "kace" => TrainedModel::kace(rows),
        other => return Err(ApiError::invalid(format!("field 'model': unknown model '{other}' (slowdown, kace)"))),
    }
    .map_err(|e| ApiError::invalid(e.to_string()))?;
    let ranking =
        recommend_trained(&trained, &pool, &query, Risk::Mean).map_err(|e| ApiError::invalid(e.to_string()))?;
    Ok(RecommendResult {
        model: trained.as_model().name().to_string(),
        search: match ranking.search {
            Search::Exhaustive => "exhaustive".to_string(),
            Search::Beam { width } => format!("beam (width {width}; not exhaustive)"),
        },
        trained_on: rows.len(),
        ranked_by: match &ranking.fallback {
            None => "model".to_string(),
            Some(fallback) => fallback.describe(body.group_size),
        },
        groups: ranking
            .groups
            .into_iter()
            .map(|group| GroupBody {
                members: group
                    .members
                    .into_iter()
                    .map(|m| MemberBody {
                        workload: m.workload,
                        alone_rps: m.alone_rps,
                        predicted_rps: m.predicted_rps,
                        retained: m.retained,
                    })
                    .collect(),
                predicted_total_rps: group.predicted_total_rps,
                vs_time_sharing: group.vs_time_sharing,
                memory_gb: group.memory_gb,
                exceeds_memory: group.exceeds_memory,
                novelty: group.novelty,
            })
            .collect(),
    })
}

/// A trace to simulate and how.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"scheduler": "johnson", "prefetch": "lookahead:1", "eviction": "lru", "trace": {
    "gpu": {"memory_bytes": 1000, "h2d_bytes_per_s": 1.0e9, "d2h_bytes_per_s": 1.0e9, "copy_latency_ns": 0},
    "clients": [
        {"name": "a", "operations": [{"compute_ms": 1.0, "buffers": [{"name": "a.w", "bytes": 600}]}]},
        {"name": "b", "operations": [{"compute_ms": 2.0, "buffers": [{"name": "b.w", "bytes": 600}]}]}]}}))]
pub(crate) struct SimulateBody {
    /// The trace (the JSON `tessera simulate --trace` reads).
    #[schema(value_type = Object)]
    pub trace: serde_json::Value,
    /// `fifo`, `johnson`, `greedy`, `ga` or `exhaustive`.
    #[serde(default = "default_scheduler")]
    pub scheduler: String,
    /// `none`, `passive`, `active` or `lookahead:K`; default `lookahead:1`.
    #[serde(default)]
    pub prefetch: Option<String>,
    /// `lru` or `belady`; default `belady`, as the CLI's.
    #[serde(default)]
    pub eviction: Option<String>,
    /// `release` (a finished client's data is freed) or `keep`; default
    /// `release`.
    #[serde(default)]
    pub retention: Option<String>,
}

fn default_scheduler() -> String {
    "johnson".to_string()
}

/// A client's completion.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct ClientCompletion {
    /// The client.
    pub client: String,
    /// When its last operation finished, ms.
    pub completion_ms: f64,
}

/// What the simulation found.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct SimulateResult {
    /// The scheduler, in words.
    pub scheduler: String,
    /// Persistent data over the memory beside the largest scratch.
    pub oversubscription: f64,
    /// When the last operation finished, ms.
    pub makespan_ms: f64,
    /// No schedule finishes sooner, ms.
    pub lower_bound_ms: f64,
    /// Compute engine busy, ms.
    pub compute_busy_ms: f64,
    /// Compute engine waiting for data, ms.
    pub stall_ms: f64,
    /// Bytes copied to the GPU.
    pub h2d_bytes: u64,
    /// Bytes copied back.
    pub d2h_bytes: u64,
    /// Each client's completion.
    pub clients: Vec<ClientCompletion>,
    /// The Gantt chart's page.
    pub gantt_url: String,
}

/// The most generations the `ga` scheduler runs for a request.
const GA_GENERATIONS: usize = 200;

/// Simulates a posted trace; its Gantt chart is then at `/simulation`.
#[utoipa::path(post, path = "/v1/simulate", tag = tags::ANALYSIS, security(("bearer" = [])),
    request_body = SimulateBody,
    responses((status = 200, body = SimulateResult), (status = 422, body = ErrorBody)))]
pub(crate) async fn simulate_trace(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<SimulateBody>,
) -> Result<Json<SimulateResult>, ApiError> {
    let (result, svg) = off_the_workers(move || run_simulation(&body)).await??;
    state.set_last_simulation(format!("{} — makespan {:.1} ms", result.scheduler, result.makespan_ms), svg);
    Ok(Json(result))
}

/// Runs the simulation `body` asks for; returns the result and its Gantt
/// chart.
fn run_simulation(body: &SimulateBody) -> Result<(SimulateResult, String), ApiError> {
    let invalid = |field: &str, message: String| ApiError::invalid(format!("field '{field}': {message}"));
    let trace = Trace::from_json(&body.trace.to_string()).map_err(|e| invalid("trace", e.to_string()))?;
    let defaults = Policies::default();
    let prefetch: Prefetch = match &body.prefetch {
        None => defaults.prefetch,
        Some(text) => text.parse().map_err(|e| invalid("prefetch", e))?,
    };
    let eviction = match body.eviction.as_deref() {
        None => defaults.eviction,
        Some("lru") => Eviction::Lru,
        Some("belady") => Eviction::Belady,
        Some(other) => return Err(invalid("eviction", format!("unknown eviction policy '{other}' (lru, belady)"))),
    };
    let retention = match body.retention.as_deref() {
        None => defaults.retention,
        Some("release") => Retention::ReleaseAfterLastUse,
        Some("keep") => Retention::KeepUntilEvicted,
        Some(other) => return Err(invalid("retention", format!("unknown retention '{other}' (release, keep)"))),
    };
    let kind = match body.scheduler.as_str() {
        "fifo" => SchedulerKind::Fifo,
        "johnson" => SchedulerKind::Johnson,
        "greedy" => SchedulerKind::Greedy,
        "ga" => SchedulerKind::Genetic(GeneticParams { generations: GA_GENERATIONS, ..GeneticParams::default() }),
        "exhaustive" => SchedulerKind::Exhaustive,
        other => {
            return Err(invalid(
                "scheduler",
                format!("unknown scheduler '{other}' (fifo, johnson, greedy, ga, exhaustive)"),
            ))
        }
    };
    let policies = Policies { eviction, prefetch, retention };
    let failed = |e: tessera_sim::SimError| ApiError::invalid(e.to_string());
    let schedule = plan_schedule(&trace, policies, &kind, &mut |_, _| {}).map_err(failed)?;
    let result = simulate(&trace, &schedule, policies).map_err(failed)?;
    let bound_ns = lower_bound_ns(&trace).map_err(failed)?;
    let ms = |ns: u64| ns as f64 / 1e6;
    let svg = gantt_svg(&result, kind.name());
    Ok((
        SimulateResult {
            scheduler: kind.name().to_string(),
            oversubscription: trace.oversubscription(),
            makespan_ms: ms(result.makespan_ns),
            lower_bound_ms: ms(bound_ns),
            compute_busy_ms: ms(result.compute_busy_ns),
            stall_ms: ms(result.stall_ns),
            h2d_bytes: result.h2d_bytes,
            d2h_bytes: result.d2h_bytes,
            clients: trace
                .clients
                .iter()
                .zip(&result.client_completion_ns)
                .map(|(client, &done)| ClientCompletion { client: client.name.clone(), completion_ms: ms(done) })
                .collect(),
            gantt_url: "/simulation".to_string(),
        },
        svg,
    ))
}
