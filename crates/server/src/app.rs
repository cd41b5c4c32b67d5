//! The router, the layers every request passes (request id, log line and
//! metrics; the token; the time limit; the body limit), and running the
//! server until it is told to stop.

use std::future::{Future, IntoFuture};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use tessera_store::Store;
use tracing::Instrument;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::api::{analysis, health, plans, profiles, services};
use crate::boundary;
use crate::config::ServeConfig;
use crate::docs::{self, ApiDoc};
use crate::error::{ApiError, ServerError};
use crate::head_timeout::HeadTimeoutListener;
use crate::pages;
use crate::state::AppState;

/// The router and the OpenAPI document, made from one list of routes.
pub(crate) fn router(state: AppState) -> (Router, utoipa::openapi::OpenApi) {
    let (routes, api) = OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(health::healthz))
        .routes(routes!(health::readyz))
        .routes(routes!(health::metrics))
        .routes(routes!(profiles::list_profiles, profiles::import_profiles))
        .routes(routes!(profiles::get_profile, profiles::delete_profile))
        .routes(routes!(services::list_services, services::create_service))
        .routes(routes!(services::get_service, services::update_service, services::delete_service))
        .routes(routes!(plans::create_plan, plans::list_plans))
        .routes(routes!(plans::get_plan))
        .routes(routes!(plans::verify_stored))
        .routes(routes!(plans::verify_posted))
        .routes(routes!(analysis::recommend_partners))
        .routes(routes!(analysis::simulate_trace))
        .routes(routes!(pages::index))
        .routes(routes!(pages::plans_page))
        .routes(routes!(pages::plan_page))
        .routes(routes!(pages::plan_tiles))
        .routes(routes!(pages::colocation_page))
        .routes(routes!(pages::simulation_page))
        .routes(routes!(docs::openapi_json))
        .routes(routes!(docs::docs_page))
        .split_for_parts();
    let mut api = api;
    docs::document_errors(&mut api);
    state.set_openapi_json(api.to_pretty_json().unwrap_or_default());
    let config = &state.inner.config;
    let router = routes
        .fallback(|| async { ApiError::not_found("no such route (the routes are listed at /openapi.json)") })
        .layer(DefaultBodyLimit::max(config.max_body_bytes))
        .layer(middleware::from_fn_with_state(state.clone(), time_limit))
        .layer(middleware::from_fn_with_state(state.clone(), authorize))
        .layer(middleware::from_fn_with_state(state.clone(), boundary::finish_errors))
        .layer(middleware::from_fn_with_state(state.clone(), observe))
        .with_state(state);
    (router, api)
}

/// Routes that answer without a token whatever the configuration: the
/// probes of an orchestrator.
const ALWAYS_OPEN: [&str; 2] = ["/healthz", "/readyz"];

/// Lets a request through when it carries the token, or when it only reads
/// and reading is open (or it is a probe); 401 otherwise. The token is
/// never logged.
async fn authorize(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let path = request.uri().path();
    let reads = matches!(*request.method(), Method::GET | Method::HEAD);
    let open = ALWAYS_OPEN.contains(&path) || (reads && state.inner.config.public_reads);
    if open {
        return next.run(request).await;
    }
    let authorization = request.headers().get(header::AUTHORIZATION).map(HeaderValue::as_bytes);
    // The scheme is case-insensitive (RFC 7235): `bearer` is `Bearer`.
    let presented = authorization
        .and_then(|value| value.split_at_checked(7))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case(b"Bearer "))
        .map(|(_, token)| token.trim_ascii());
    match presented {
        Some(token) if state.inner.config.token.matches(token) => next.run(request).await,
        _ => {
            let other_scheme = authorization.filter(|_| presented.is_none()).map(|value| {
                let scheme = value.split(|byte| *byte == b' ').next().unwrap_or_default();
                String::from_utf8_lossy(scheme).chars().take(32).collect::<String>()
            });
            let message = match (other_scheme, reads) {
                (Some(scheme), _) => {
                    format!("this server takes only `Authorization: Bearer TOKEN`, not the '{scheme}' scheme")
                }
                (None, true) => {
                    "this route needs `Authorization: Bearer TOKEN` (the server's reading routes are not public)"
                        .to_string()
                }
                (None, false) => "this route changes state and needs `Authorization: Bearer TOKEN`".to_string(),
            };
            let mut response = ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message).into_response();
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            response
        }
    }
}

/// Answers 503 `timeout` when a request takes longer than the server's
/// request time limit.
async fn time_limit(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let limit = state.inner.config.request_timeout;
    match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => response,
        Err(_) => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "timeout",
            format!("the request took longer than the server's limit of {} s", limit.as_secs_f64()),
        )
        .into_response(),
    }
}

/// Numbers requests (`x-request-id`, or the client's when it is a short
/// plain token), logs one line per request in a span that carries the id,
/// and counts it in the metrics — also a request whose client went away
/// before the answer (status 499).
async fn observe(State(state): State<AppState>, request: Request, next: Next) -> Response {
    static NEXT_ID: AtomicU64 = AtomicU64::new(1);
    let request_id = request
        .headers()
        .get("x-request-id")
        .and_then(|value| value.to_str().ok())
        .filter(|id| {
            (1..=64).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        })
        .map_or_else(|| format!("r{:08}", NEXT_ID.fetch_add(1, Ordering::Relaxed)), str::to_string);
    let method = request.method().to_string();
    let route = request.extensions().get::<MatchedPath>().map_or("unmatched", MatchedPath::as_str).to_string();
    let span = tracing::info_span!("request", id = %request_id, method = %method, route = %route);
    let mut guard = InFlight { state: state.clone(), method, route, started: Instant::now(), status: None };
    state.inner.metrics.request_started();
    let mut response = next.run(request).instrument(span.clone()).await;
    let status = response.status().as_u16();
    guard.status = Some(status);
    span.in_scope(|| tracing::info!(status, ms = guard.started.elapsed().as_secs_f64() * 1000.0, "answered"));
    if let Ok(value) = HeaderValue::from_str(&request_id) {
        response.headers_mut().insert("x-request-id", value);
    }
    response
}

/// Counts a request when it ends, answered or abandoned.
struct InFlight {
    state: AppState,
    method: String,
    route: String,
    started: Instant,
    status: Option<u16>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        // 499: the client closed the connection before the answer.
        let status = self.status.unwrap_or(499);
        self.state.inner.metrics.request_finished(
            &self.method,
            &self.route,
            status,
            self.started.elapsed().as_secs_f64(),
        );
    }
}

/// A server started in this process (tests, `tessera bench serve`).
#[derive(Debug)]
pub struct RunningServer {
    /// The address it listens on.
    pub address: SocketAddr,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), ServerError>>,
}

impl RunningServer {
    /// Stops it (gracefully: answers in progress finish, queued jobs fail,
    /// running jobs are waited for) and waits until it has.
    pub async fn stop(self) -> Result<(), ServerError> {
        let _ = self.stop.send(());
        self.task.await.map_err(|e| ServerError::Runtime(format!("the server task failed: {e}")))?
    }
}

/// Opens the store (migrating it), fails the jobs a stopped server left
/// unfinished, and makes the newest stored plan current. A store that
/// cannot be opened for writing (a read-only disk) is served read-only:
/// reads answer, writes get 503 with the reason.
fn prepare(config: ServeConfig) -> Result<AppState, ServerError> {
    config.check()?;
    let store_error = |e: tessera_store::StoreError| ServerError::Store(e.to_string());
    let (mut store, fault) = match Store::open(&config.store_path) {
        Ok(store) => (store, None),
        Err(error) if error.is_unavailable() => match Store::open_read_only(&config.store_path) {
            Ok(store) => (store, Some(format!("the store cannot be written, so it is served read-only: {error}"))),
            Err(_) => return Err(store_error(error)),
        },
        Err(error) => return Err(store_error(error)),
    };
    if fault.is_none() {
        let left = store.fail_unfinished_jobs("the server stopped before the job finished").map_err(store_error)?;
        if left > 0 {
            tracing::warn!(jobs = left, "failed planning jobs a stopped server left unfinished");
        }
    }
    let latest = store.latest_done_job().map_err(store_error)?;
    let state = AppState::new(config, store);
    if let Some(reason) = fault {
        tracing::warn!(%reason, "store is read-only");
        state.set_store_fault(reason);
    }
    if let Some(job) = latest {
        if let Some(plan) = job.plan {
            state.offer_plan(job.id, Arc::new(plan));
        }
    }
    Ok(state)
}

/// How long the process waits, once the server has stopped, for threads
/// still busy (a planning job past its shutdown wait): it exits without
/// them.
const THREADS_WAIT: Duration = Duration::from_secs(1);

/// Serves until `stop` completes, then shuts down gracefully: no new
/// connection is accepted, queued jobs fail, and open requests and running
/// jobs get the configuration's shutdown wait (the same seconds, at once),
/// after which open connections are closed and running jobs fail.
async fn serve(
    state: AppState,
    listener: tokio::net::TcpListener,
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    let (router, _) = router(state.clone());
    let (drain, draining) = tokio::sync::oneshot::channel::<()>();
    let mut server = tokio::spawn(
        axum::serve(HeadTimeoutListener::new(listener, state.inner.config.header_timeout), router)
            .with_graceful_shutdown(async {
                let _ = draining.await;
            })
            .into_future(),
    );
    let served = tokio::select! {
        // The server failed before it was told to stop.
        early = &mut server => Some(early),
        () = stop => None,
    };
    let wait = state.inner.config.shutdown_wait;
    let (outcome, still_pending) = match served {
        Some(early) => (early, state.inner.jobs.shut_down(wait).await),
        None => {
            let _ = drain.send(());
            let drained = async {
                match tokio::time::timeout(wait, &mut server).await {
                    Ok(drained) => drained,
                    Err(_) => {
                        tracing::warn!(
                            "requests still open after {:.1} s: closing their connections",
                            wait.as_secs_f64()
                        );
                        server.abort();
                        Ok(Ok(()))
                    }
                }
            };
            tokio::join!(drained, state.inner.jobs.shut_down(wait))
        }
    };
    outcome
        .map_err(|e| ServerError::Runtime(format!("the server task failed: {e}")))?
        .map_err(|e| ServerError::Runtime(format!("serving failed: {e}")))?;
    if still_pending > 0 {
        let reason = format!(
            "the server stopped while the job ran (it waits {:.1} s for running jobs at shutdown)",
            state.inner.config.shutdown_wait.as_secs_f64()
        );
        let failed = state.with_store(true, move |store| Ok(store.fail_running_jobs(&reason)?)).await;
        match failed {
            Ok(jobs) => tracing::warn!(jobs, "stopped with planning jobs still running: failed them"),
            Err(error) => tracing::error!(error = %error.message, "running jobs could not be failed at shutdown"),
        }
    }
    tracing::info!("stopped");
    Ok(())
}

/// Binds `config.listen` (a loopback address unless allowed otherwise).
async fn bind(config: &ServeConfig) -> Result<tokio::net::TcpListener, ServerError> {
    tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|e| ServerError::Listen { address: config.listen.to_string(), reason: e.to_string() })
}

/// Starts a server on the current runtime; [`RunningServer::stop`] stops
/// it.
pub async fn start(config: ServeConfig) -> Result<RunningServer, ServerError> {
    config.check()?;
    let listener = bind(&config).await?;
    let address = listener.local_addr().map_err(|e| ServerError::Runtime(e.to_string()))?;
    let state = tokio::task::spawn_blocking(move || prepare(config))
        .await
        .map_err(|e| ServerError::Runtime(e.to_string()))??;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(serve(state, listener, async {
        let _ = stopped.await;
    }));
    Ok(RunningServer { address, stop, task })
}

/// Runs `tessera serve`: logs to standard error, serves `config` until
/// SIGINT or SIGTERM, then shuts down gracefully. `ready` is called with
/// the bound address once the server listens.
pub fn run(config: ServeConfig, ready: impl FnOnce(SocketAddr)) -> Result<(), ServerError> {
    let _ = tracing_subscriber::fmt().with_writer(std::io::stderr).with_target(false).try_init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| ServerError::Runtime(format!("cannot start the runtime: {e}")))?;
    config.check()?;
    let served = runtime.block_on(async move {
        let listener = bind(&config).await?;
        let address = listener.local_addr().map_err(|e| ServerError::Runtime(e.to_string()))?;
        let state = tokio::task::spawn_blocking(move || prepare(config))
            .await
            .map_err(|e| ServerError::Runtime(e.to_string()))??;
        tracing::info!(%address, public_reads = state.inner.config.public_reads, "listening");
        ready(address);
        serve(state, listener, termination()).await
    });
    // A planning thread still busy must not hold the process.
    runtime.shutdown_timeout(THREADS_WAIT);
    served
}

/// Completes on SIGINT (Ctrl-C) or SIGTERM.
async fn termination() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(signal) => signal,
            Err(_) => {
                let _ = interrupt.await;
                return;
            }
        };
        tokio::select! {
            _ = interrupt => {},
            _ = terminate.recv() => {},
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
    }
    tracing::info!("stopping: finishing answers and running jobs");
}
