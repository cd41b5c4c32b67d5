//! Services (tenants' SLOs, with image and arguments where known): list,
//! get, create, update, delete. Every answer carries the service's version
//! as its `ETag`; an update or removal must send it back in `If-Match`, and
//! one made from an older version is refused with 409 (never last writer
//! wins). A service's model must have a stored profile (on any GPU model)
//! when it is written: one that has none is refused at the door (422
//! `unknown_model`, naming the profiled models) rather than failing every
//! later planning job.

use std::collections::BTreeSet;

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use tessera_core::ServiceSlo;
use tessera_store::{Store, StoredService};

use crate::api::{tags, ApiJson, ApiPath};
use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;

/// A service as stored.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct ServiceBody {
    /// The service's name.
    pub name: String,
    /// The model it runs (names a profile).
    pub model: String,
    /// Requests per second it must sustain.
    pub rate_rps: f64,
    /// Its latency objective, ms.
    pub latency_slo_ms: f64,
    /// The share of its requests (%) that must finish within the objective.
    pub percentile: f64,
    /// The container image that runs it, if known.
    pub image: Option<String>,
    /// Its arguments.
    pub args: Vec<String>,
    /// Its version (also its `ETag`), one more with every update.
    pub version: u64,
    /// When it was last written (UTC).
    pub updated_at: String,
}

/// A service to create (`name` required) or the new state of one (`name`,
/// if given, must be the path's).
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"name": "search", "model": "bert-base", "rate_rps": 120.0, "latency_slo_ms": 150.0,
    "image": "registry.example/search:1.4", "args": ["--batch-timeout-ms", "5"]}))]
pub(crate) struct ServiceInput {
    /// The service's name.
    #[serde(default)]
    pub name: Option<String>,
    /// The model it runs.
    pub model: String,
    /// Requests per second it must sustain.
    pub rate_rps: f64,
    /// Its latency objective, ms.
    pub latency_slo_ms: f64,
    /// The share of its requests (%) that must finish within the
    /// objective; default 99.
    #[serde(default)]
    pub percentile: Option<f64>,
    /// The container image that runs it.
    #[serde(default)]
    pub image: Option<String>,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
}

impl ServiceInput {
    /// The objective, validated as the SLO files are.
    fn slo(&self, name: &str) -> Result<ServiceSlo, ApiError> {
        let slo = ServiceSlo::new(name, self.model.clone(), self.rate_rps, self.latency_slo_ms);
        let slo = match self.percentile {
            Some(percentile) => slo.and_then(|slo| slo.with_percentile(percentile)),
            None => slo,
        };
        slo.map_err(|e| ApiError::invalid(format!("service '{name}': {e}")))
    }
}

/// How many profiled models an `unknown_model` message names.
const NAMED_MODELS: usize = 20;

/// Refuses (422 `unknown_model`) a service whose model has no profile in
/// the store on any GPU model: it could never be planned, and every
/// planning job over the stored services would fail on it.
fn check_model(store: &Store, name: &str, model: &str) -> Result<(), ApiError> {
    let known: BTreeSet<String> = store.list_profiles()?.into_iter().map(|summary| summary.model).collect();
    if known.contains(model) {
        return Ok(());
    }
    let listed = if known.is_empty() {
        "the store holds no profiles yet: import them first (POST /v1/profiles)".to_string()
    } else {
        let names: Vec<&str> = known.iter().take(NAMED_MODELS).map(String::as_str).collect();
        let more = known.len().saturating_sub(NAMED_MODELS);
        let more = if more > 0 { format!(" and {more} more") } else { String::new() };
        format!("profiled models: {}{more}", names.join(", "))
    };
    Err(ApiError::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "unknown_model",
        format!("service '{name}': no profile of model '{model}' in the store ({listed})"),
    ))
}

fn body_of(stored: StoredService) -> ServiceBody {
    ServiceBody {
        name: stored.slo.service,
        model: stored.slo.model,
        rate_rps: stored.slo.rate_rps,
        latency_slo_ms: stored.slo.latency_slo_ms,
        percentile: stored.slo.percentile,
        image: stored.image,
        args: stored.args,
        version: stored.version,
        updated_at: stored.updated_at,
    }
}

/// `stored` as JSON with its version as the `ETag`, under `status`.
fn with_etag(status: StatusCode, stored: StoredService) -> Response {
    let etag = HeaderValue::from_str(&format!("\"{}\"", stored.version)).unwrap_or(HeaderValue::from_static("\"0\""));
    (status, [(header::ETAG, etag)], Json(body_of(stored))).into_response()
}

/// The version an `If-Match` header names: `"3"` (or `W/"3"`, or `3`).
/// Absent: 428; unreadable: 400.
fn if_match(headers: &HeaderMap, name: &str) -> Result<u64, ApiError> {
    let value = headers.get(header::IF_MATCH).ok_or_else(|| {
        ApiError::new(
            StatusCode::PRECONDITION_REQUIRED,
            "precondition_required",
            format!("changing service '{name}' needs its version: send `If-Match` with the ETag it was read with"),
        )
    })?;
    let text = value.to_str().unwrap_or("").trim();
    let text = text.strip_prefix("W/").unwrap_or(text);
    text.trim_matches('"').parse::<u64>().map_err(|_| {
        ApiError::bad_request(format!("header 'If-Match': '{text}' is not a service version such as \"3\""))
    })
}

/// Every service, by name.
#[utoipa::path(get, path = "/v1/services", tag = tags::SERVICES, security(("bearer" = [])),
    responses((status = 200, body = Vec<ServiceBody>)))]
pub(crate) async fn list_services(State(state): State<AppState>) -> Result<Json<Vec<ServiceBody>>, ApiError> {
    let services = state.with_store(false, |store| Ok(store.list_services()?)).await?;
    Ok(Json(services.into_iter().map(body_of).collect()))
}

/// Creates a service at version 1 (409 if the name is taken; 422
/// `unknown_model` when no stored profile is of its model).
#[utoipa::path(post, path = "/v1/services", tag = tags::SERVICES, security(("bearer" = [])),
    request_body = ServiceInput,
    responses((status = 201, body = ServiceBody, headers(("ETag" = String, description = "the version, quoted"))),
        (status = 409, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub(crate) async fn create_service(
    State(state): State<AppState>,
    ApiJson(input): ApiJson<ServiceInput>,
) -> Result<Response, ApiError> {
    let name = input.name.clone().ok_or_else(|| ApiError::invalid("field 'name': a new service needs a name"))?;
    let slo = input.slo(&name)?;
    let stored = state
        .with_store(true, move |store| {
            check_model(store, &slo.service, &slo.model)?;
            Ok(store.create_service(&slo, input.image.as_deref(), &input.args)?)
        })
        .await?;
    Ok(with_etag(StatusCode::CREATED, stored))
}

/// One service, with its version as the `ETag`.
#[utoipa::path(get, path = "/v1/services/{name}", tag = tags::SERVICES, security(("bearer" = [])),
    params(("name" = String, Path, example = "search")),
    responses((status = 200, body = ServiceBody, headers(("ETag" = String, description = "the version, quoted"))),
        (status = 404, body = ErrorBody)))]
pub(crate) async fn get_service(
    State(state): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> Result<Response, ApiError> {
    let wanted = name.clone();
    let stored = state.with_store(false, move |store| Ok(store.service(&wanted)?)).await?;
    let stored = stored.ok_or_else(|| ApiError::not_found(format!("no service '{name}'")))?;
    Ok(with_etag(StatusCode::OK, stored))
}

/// Replaces a service; `If-Match` must name its current version (409
/// when another writer changed it first, 428 when absent); its model must
/// have a stored profile (422 `unknown_model`).
#[utoipa::path(put, path = "/v1/services/{name}", tag = tags::SERVICES, security(("bearer" = [])),
    params(("name" = String, Path, example = "search"),
        ("If-Match" = String, Header, description = "the ETag the service was read with", example = "\"1\"")),
    request_body = ServiceInput,
    responses((status = 200, body = ServiceBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody),
        (status = 422, body = ErrorBody), (status = 428, body = ErrorBody)))]
pub(crate) async fn update_service(
    State(state): State<AppState>,
    ApiPath(name): ApiPath<String>,
    headers: HeaderMap,
    ApiJson(input): ApiJson<ServiceInput>,
) -> Result<Response, ApiError> {
    if let Some(other) = input.name.as_deref().filter(|given| *given != name) {
        return Err(ApiError::invalid(format!("field 'name': '{other}' is not the service of the path, '{name}'")));
    }
    let expected = if_match(&headers, &name)?;
    let slo = input.slo(&name)?;
    let stored = state
        .with_store(true, move |store| {
            check_model(store, &slo.service, &slo.model)?;
            Ok(store.update_service(&slo, input.image.as_deref(), &input.args, expected)?)
        })
        .await?;
    Ok(with_etag(StatusCode::OK, stored))
}

/// Removes a service; `If-Match` must name its current version.
#[utoipa::path(delete, path = "/v1/services/{name}", tag = tags::SERVICES, security(("bearer" = [])),
    params(("name" = String, Path, example = "search"),
        ("If-Match" = String, Header, description = "the ETag the service was read with", example = "\"1\"")),
    responses((status = 204, description = "removed"), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody),
        (status = 428, body = ErrorBody)))]
pub(crate) async fn delete_service(
    State(state): State<AppState>,
    ApiPath(name): ApiPath<String>,
    headers: HeaderMap,
) -> Result<StatusCode, ApiError> {
    let expected = if_match(&headers, &name)?;
    state.with_store(true, move |store| Ok(store.delete_service(&name, expected)?)).await?;
    Ok(StatusCode::NO_CONTENT)
}
