//! The JSON API's handlers, one module per area, each route documented
//! with `#[utoipa::path]` and registered through `utoipa_axum::routes!`, so
//! the router and the OpenAPI document are made from the same list.

pub(crate) mod analysis;
mod extract;
pub(crate) mod health;
pub(crate) mod plans;
pub(crate) mod profiles;
pub(crate) mod services;

pub(crate) use extract::{ApiJson, ApiPath, ApiQuery};

use crate::error::ApiError;

/// Runs `work` (a pure computation: planning, verifying, ranking,
/// simulating) on a blocking thread, never on the async workers.
pub(crate) async fn off_the_workers<T, F>(work: F) -> Result<T, ApiError>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|error| ApiError::internal(format!("a computation failed: {error}")))
}

/// The tag of each area in the API document.
pub(crate) mod tags {
    /// Health, readiness and metrics.
    pub const OPERATIONS: &str = "operations";
    /// Profiles.
    pub const PROFILES: &str = "profiles";
    /// Services.
    pub const SERVICES: &str = "services";
    /// Planning jobs, plans and verification.
    pub const PLANS: &str = "plans";
    /// Colocation and simulation.
    pub const ANALYSIS: &str = "analysis";
    /// HTML pages and the API document.
    pub const PAGES: &str = "pages";
}
