//! Profiles: list, get, import (Tessera's profile CSV or ParvaGPU's
//! per-model files, sent in the body — never a path), delete.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use tessera_core::{GpuModel, ModelProfile};
use tessera_store::{parse_parvagpu_profile, parse_profiles_csv};

use crate::api::{tags, ApiJson, ApiPath};
use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;

/// One stored profile, summarised.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct ProfileSummaryBody {
    /// The GPU model it was measured on, e.g. `a100-80gb`.
    pub gpu_model: String,
    /// The model.
    pub model: String,
    /// Feasible points stored.
    pub points: usize,
    /// Instance sizes (compute slices) present.
    pub sizes_gpcs: Vec<u8>,
    /// The import that wrote it.
    pub source: String,
    /// When (UTC).
    pub imported_at: String,
}

/// One profiled configuration.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct PointBody {
    /// MIG instance size in compute slices.
    pub size_gpcs: u8,
    /// Requests per batch.
    pub batch: u32,
    /// MPS processes.
    pub procs: u32,
    /// Throughput of the whole segment, requests/s.
    pub throughput_rps: f64,
    /// Latency of one batch, ms.
    pub latency_ms: f64,
    /// Device memory of the whole segment, GB, when known.
    pub memory_gb: Option<f64>,
    /// The median run time of one batch, ms, where measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_p50_ms: Option<f64>,
    /// The 99th percentile run time of one batch, ms, where measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_p99_ms: Option<f64>,
    /// A busy process's mean time between batches, ms, where measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dispatch_gap_ms: Option<f64>,
    /// How much slower batches ran while serving than profiled (0.004:
    /// 0.4%), where measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub serving_slowdown: Option<f64>,
}

/// One profile with its points.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct ProfileBody {
    /// The GPU model.
    pub gpu_model: String,
    /// The model.
    pub model: String,
    /// Its points, by configuration.
    pub points: Vec<PointBody>,
}

/// Profiles to import: the files' contents in the body.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({
    "format": "tessera",
    "files": {"profiles.csv": "gpu_model,model,size_gpcs,batch,procs,throughput_rps,latency_ms,memory_gb\na100-80gb,bert-base,1,8,2,120,40,6\na100-80gb,bert-base,2,8,2,250,38,8\n"}
}))]
pub(crate) struct ImportBody {
    /// `tessera` (Tessera's profile CSV, any number of models per file) or
    /// `parvagpu` (one file per model named `<model>.csv`, measured on
    /// `gpu_model`).
    pub format: String,
    /// The GPU model ParvaGPU files were measured on.
    #[serde(default)]
    pub gpu_model: Option<String>,
    /// File name → contents. Names appear in error messages; nothing is
    /// read from or written to a path.
    pub files: BTreeMap<String, String>,
}

/// What an import stored.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct ImportResult {
    /// (GPU model, model) profiles written.
    pub models: usize,
    /// Points written.
    pub points: usize,
    /// Profiles that replaced stored ones.
    pub replaced_models: usize,
    /// ParvaGPU rows skipped as infeasible.
    pub infeasible_rows: usize,
}

/// What a removal removed.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct RemovedPoints {
    /// Points removed.
    pub removed_points: usize,
}

/// Every stored profile, by GPU model and model.
#[utoipa::path(get, path = "/v1/profiles", tag = tags::PROFILES, security(("bearer" = [])),
    responses((status = 200, body = Vec<ProfileSummaryBody>)))]
pub(crate) async fn list_profiles(State(state): State<AppState>) -> Result<Json<Vec<ProfileSummaryBody>>, ApiError> {
    let summaries = state.with_store(false, |store| Ok(store.list_profiles()?)).await?;
    Ok(Json(
        summaries
            .into_iter()
            .map(|summary| ProfileSummaryBody {
                gpu_model: summary.gpu_model.id().to_string(),
                model: summary.model,
                points: summary.points,
                sizes_gpcs: summary.sizes_gpcs,
                source: summary.source,
                imported_at: summary.imported_at,
            })
            .collect(),
    ))
}

/// The GPU model of a path, or a 404 naming the known ones.
fn gpu_of(text: &str) -> Result<GpuModel, ApiError> {
    text.parse::<GpuModel>().map_err(|error| ApiError::not_found(error.to_string()))
}

/// One profile with every point.
#[utoipa::path(get, path = "/v1/profiles/{gpu_model}/{model}", tag = tags::PROFILES, security(("bearer" = [])),
    params(("gpu_model" = String, Path, example = "a100-80gb"), ("model" = String, Path, example = "bert-base")),
    responses((status = 200, body = ProfileBody), (status = 404, body = ErrorBody)))]
pub(crate) async fn get_profile(
    State(state): State<AppState>,
    ApiPath((gpu_model, model)): ApiPath<(String, String)>,
) -> Result<Json<ProfileBody>, ApiError> {
    let gpu = gpu_of(&gpu_model)?;
    let wanted = model.clone();
    let catalog = state.with_store(false, move |store| Ok(store.load_catalog(Some(gpu))?)).await?;
    let profile = catalog
        .get(gpu, &wanted)
        .ok_or_else(|| ApiError::not_found(format!("no profile of model '{wanted}' on {gpu} in the store")))?;
    Ok(Json(profile_body(profile)))
}

fn profile_body(profile: &ModelProfile) -> ProfileBody {
    ProfileBody {
        gpu_model: profile.gpu_model.id().to_string(),
        model: profile.model.clone(),
        points: profile
            .points()
            .iter()
            .map(|point| PointBody {
                size_gpcs: point.config.size_gpcs,
                batch: point.config.batch,
                procs: point.config.procs,
                throughput_rps: point.throughput_rps,
                latency_ms: point.latency_ms,
                memory_gb: point.memory_gb,
                latency_p50_ms: point.timing.latency_p50_ms,
                latency_p99_ms: point.timing.latency_p99_ms,
                dispatch_gap_ms: point.timing.dispatch_gap_ms,
                serving_slowdown: point.timing.serving_slowdown,
            })
            .collect(),
    }
}

/// Imports profiles in one transaction: a file that fails to parse leaves
/// the store as it was; a (GPU model, model) already stored is replaced.
#[utoipa::path(post, path = "/v1/profiles", tag = tags::PROFILES, security(("bearer" = [])),
    request_body = ImportBody,
    responses((status = 201, body = ImportResult), (status = 422, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub(crate) async fn import_profiles(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<ImportBody>,
) -> Result<(StatusCode, Json<ImportResult>), ApiError> {
    if body.files.is_empty() {
        return Err(ApiError::invalid("field 'files': send at least one file"));
    }
    let mut profiles = Vec::new();
    let mut infeasible_rows = 0;
    match body.format.as_str() {
        "tessera" => {
            for (name, content) in &body.files {
                profiles.extend(parse_profiles_csv(name, content.as_bytes())?);
            }
        }
        "parvagpu" => {
            let gpu_text = body.gpu_model.as_deref().ok_or_else(|| {
                ApiError::invalid(
                    "field 'gpu_model': ParvaGPU files do not name their GPU model; give it, e.g. \"a100-80gb\"",
                )
            })?;
            let gpu = gpu_text.parse::<GpuModel>().map_err(|e| ApiError::invalid(format!("field 'gpu_model': {e}")))?;
            for (name, content) in &body.files {
                let model = name.strip_suffix(".csv").filter(|stem| !stem.is_empty()).ok_or_else(|| {
                    ApiError::invalid(format!("file '{name}': a ParvaGPU profile file is named <model>.csv"))
                })?;
                let profile = parse_parvagpu_profile(name, content.as_bytes(), model, gpu)?;
                profiles.push(profile.planning_profile());
                infeasible_rows += profile.out_of_memory().len();
            }
        }
        other => {
            return Err(ApiError::invalid(format!("field 'format': unknown format '{other}' (tessera, parvagpu)")))
        }
    }
    let source = format!("HTTP import of {}", body.files.keys().cloned().collect::<Vec<_>>().join(", "));
    let format = body.format.clone();
    let summary = state.with_store(true, move |store| Ok(store.import_profiles(&profiles, &source, &format)?)).await?;
    Ok((
        StatusCode::CREATED,
        Json(ImportResult {
            models: summary.models,
            points: summary.points,
            replaced_models: summary.replaced_models,
            infeasible_rows,
        }),
    ))
}

/// Removes a profile (every point of the model on the GPU model).
#[utoipa::path(delete, path = "/v1/profiles/{gpu_model}/{model}", tag = tags::PROFILES, security(("bearer" = [])),
    params(("gpu_model" = String, Path, example = "a100-80gb"), ("model" = String, Path, example = "bert-base")),
    responses((status = 200, body = RemovedPoints), (status = 404, body = ErrorBody)))]
pub(crate) async fn delete_profile(
    State(state): State<AppState>,
    ApiPath((gpu_model, model)): ApiPath<(String, String)>,
) -> Result<Json<RemovedPoints>, ApiError> {
    let gpu = gpu_of(&gpu_model)?;
    let removed_points = state.with_store(true, move |store| Ok(store.remove_profile(gpu, &model)?)).await?;
    Ok(Json(RemovedPoints { removed_points }))
}
