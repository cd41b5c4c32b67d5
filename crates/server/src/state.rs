//! What every handler shares: the store (one connection behind a mutex,
//! used from blocking tasks), the metrics, the planning queue, the current
//! plan and the last simulation.

use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock};

use tessera_core::Plan;
use tessera_store::Store;

use crate::config::ServeConfig;
use crate::error::ApiError;
use crate::jobs::JobQueue;
use crate::metrics::Metrics;

/// The shared state of a running server.
#[derive(Debug, Clone)]
pub(crate) struct AppState {
    /// The server's own state.
    pub inner: Arc<Shared>,
}

/// The state behind [`AppState`].
#[derive(Debug)]
pub(crate) struct Shared {
    /// The configuration it started with.
    pub config: ServeConfig,
    /// The store.
    store: Mutex<Store>,
    /// Why the store last failed to take a write, until one succeeds
    /// (`/readyz` answers 503 with it).
    store_fault: Mutex<Option<String>>,
    /// The metrics.
    pub metrics: Metrics,
    /// The planning jobs queued or running.
    pub jobs: JobQueue,
    /// The newest finished plan and its job id.
    current_plan: RwLock<Option<(u64, Arc<Plan>)>>,
    /// The last simulation's title and Gantt chart (SVG).
    last_simulation: Mutex<Option<(String, String)>>,
    /// The OpenAPI document, set once the router is built.
    openapi_json: OnceLock<String>,
    /// The store's file and folder, as given and resolved: never shown to a
    /// client.
    private_paths: Vec<String>,
}

impl AppState {
    /// State over an opened store.
    pub(crate) fn new(config: ServeConfig, store: Store) -> AppState {
        let jobs = JobQueue::new(config.planning_workers);
        let private_paths = private_paths(&config.store_path);
        AppState {
            inner: Arc::new(Shared {
                config,
                store: Mutex::new(store),
                store_fault: Mutex::new(None),
                metrics: Metrics::new(),
                jobs,
                current_plan: RwLock::new(None),
                last_simulation: Mutex::new(None),
                openapi_json: OnceLock::new(),
                private_paths,
            }),
        }
    }

    /// Runs `work` with the store on a blocking thread. A store that cannot
    /// take a write (full or read-only disk) is remembered for `/readyz`
    /// until a later write succeeds.
    pub(crate) async fn with_store<T, F>(&self, writes: bool, work: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Store) -> Result<T, ApiError> + Send + 'static,
    {
        let state = self.clone();
        let outcome = tokio::task::spawn_blocking(move || {
            let mut store = state.inner.store.lock().unwrap_or_else(PoisonError::into_inner);
            work(&mut store)
        })
        .await
        .map_err(|error| ApiError::internal(format!("a store task failed: {error}")))?;
        if writes {
            let mut fault = self.inner.store_fault.lock().unwrap_or_else(PoisonError::into_inner);
            match &outcome {
                Err(error) if error.code == "store_unavailable" => *fault = Some(error.message.clone()),
                Ok(_) => *fault = None,
                Err(_) => {}
            }
        }
        outcome
    }

    /// Why the store last refused a write, if it has not taken one since.
    pub(crate) fn store_fault(&self) -> Option<String> {
        self.inner.store_fault.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Records why the store cannot take writes (a read-only store).
    pub(crate) fn set_store_fault(&self, reason: String) {
        *self.inner.store_fault.lock().unwrap_or_else(PoisonError::into_inner) = Some(reason);
    }

    /// The newest finished plan, if any.
    pub(crate) fn current_plan(&self) -> Option<(u64, Arc<Plan>)> {
        self.inner.current_plan.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Makes `plan` (job `id`) the current plan when it is newer than the
    /// current one, and its metrics the exported ones.
    pub(crate) fn offer_plan(&self, id: u64, plan: Arc<Plan>) {
        let mut current = self.inner.current_plan.write().unwrap_or_else(PoisonError::into_inner);
        if current.as_ref().is_none_or(|(current_id, _)| *current_id < id) {
            self.inner.metrics.set_plan(id, &plan);
            *current = Some((id, plan));
        }
    }

    /// Keeps a simulation's Gantt chart for the simulation page.
    pub(crate) fn set_last_simulation(&self, title: String, svg: String) {
        *self.inner.last_simulation.lock().unwrap_or_else(PoisonError::into_inner) = Some((title, svg));
    }

    /// The last simulation's title and Gantt chart.
    pub(crate) fn last_simulation(&self) -> Option<(String, String)> {
        self.inner.last_simulation.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Keeps the OpenAPI document (once).
    pub(crate) fn set_openapi_json(&self, json: String) {
        let _ = self.inner.openapi_json.set(json);
    }

    /// The OpenAPI document.
    pub(crate) fn openapi_json(&self) -> String {
        self.inner.openapi_json.get().cloned().unwrap_or_default()
    }

    /// The paths no answer may show: the store's file and its folder.
    pub(crate) fn private_paths(&self) -> &[String] {
        &self.inner.private_paths
    }
}

/// The store's file and folder, as given and as resolved (a folder only
/// when it is more than `/` or `.`), longest first.
fn private_paths(store: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let resolved = store.canonicalize().ok();
    for file in std::iter::once(store.to_path_buf()).chain(resolved) {
        if let Some(folder) = file.parent().filter(|folder| folder.components().count() > 1) {
            found.push(folder.display().to_string());
        }
        found.push(file.display().to_string());
    }
    found.retain(|path| !path.is_empty());
    found.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    found.dedup();
    found
}
