//! `/healthz` (the process answers), `/readyz` (the store can be read and
//! took its last write) and `/metrics` (Prometheus).

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use serde::Serialize;

use crate::api::tags;
use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;

/// The answer of `/healthz` and `/readyz`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct Health {
    /// `ok` or `ready`.
    #[schema(example = "ok")]
    pub status: String,
}

/// The process is up and answering.
#[utoipa::path(get, path = "/healthz", tag = tags::OPERATIONS, responses((status = 200, body = Health)))]
pub(crate) async fn healthz() -> Json<Health> {
    Json(Health { status: "ok".to_string() })
}

/// The server can serve: its store answers and took its last write. 503
/// with the reason otherwise (e.g. the store's disk is full or read-only).
#[utoipa::path(
    get,
    path = "/readyz",
    tag = tags::OPERATIONS,
    responses((status = 200, body = Health), (status = 503, body = ErrorBody))
)]
pub(crate) async fn readyz(State(state): State<AppState>) -> Result<Json<Health>, ApiError> {
    state.with_store(false, |store| Ok(store.schema_version()?)).await?;
    if let Some(reason) = state.store_fault() {
        return Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "store_unavailable", reason));
    }
    Ok(Json(Health { status: "ready".to_string() }))
}

/// Every metric: OpenMetrics text when the scraper asks for it (as
/// Prometheus does), else Prometheus's text format (HTTP requests and
/// durations, planning jobs, the current plan per service, GPU and MIG
/// instance).
#[utoipa::path(
    get,
    path = "/metrics",
    tag = tags::OPERATIONS,
    security(("bearer" = [])),
    responses((status = 200, description = "OpenMetrics or Prometheus text", content_type = "text/plain"))
)]
pub(crate) async fn metrics(State(state): State<AppState>, headers: HeaderMap) -> impl IntoResponse {
    let openmetrics = headers
        .get(header::ACCEPT)
        .and_then(|accept| accept.to_str().ok())
        .is_some_and(|accept| accept.contains("application/openmetrics-text"));
    if openmetrics {
        (
            [(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")],
            state.inner.metrics.render(),
        )
    } else {
        (
            [(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
            state.inner.metrics.render_prometheus_text(),
        )
    }
}
