//! Tessera as a service: a JSON API over the store and the planners
//! (`axum` on `tokio`; the pure crates stay synchronous and run on blocking
//! threads), its OpenAPI 3.1 document and docs page, Prometheus metrics,
//! and the plan pages people look at.
//!
//! The crate's interface is this page: [`ServeConfig`] and [`ApiToken`]
//! (what the server is told), [`run`] (serve until SIGINT/SIGTERM, for
//! `tessera serve`), [`start`] / [`RunningServer`] (a server inside this
//! process, for tests and the load benchmark), [`bench_serve`] (the load
//! benchmark on loopback) and [`Client`] (a small HTTP/1.1 client).
//! Inside:
//!
//! * `app` — the router (built with the OpenAPI document from one list of
//!   routes) and the layers: request ids, logs and metrics; the token; the
//!   request time limit; the body limit.
//! * `boundary` — the layer that finishes every error answer in the
//!   documented shape (the framework's own included) and keeps the store's
//!   path out of it.
//! * `api` — the handlers, taking their inputs through `api::extract`
//!   (path, query and JSON extractors that refuse as `ApiError`s; JSON
//!   bodies are objects only): `health`, `profiles`, `services` (versions and
//!   ETags), `plans` (jobs, stored plans, verify), `analysis` (colocation,
//!   simulation).
//! * `jobs` — planning jobs: inputs snapshotted and stored, a fixed number
//!   of workers, time limits, shutdown.
//! * `pages` and `docs` — the HTML pages (drawn by `tessera-report`) and
//!   the API document.
//! * `metrics`, `state`, `config`, `error`, `client`, `load`.
//!
//! Invariant: no route reads or writes a path a client chose (bodies carry
//! contents, never file names to open); the token is compared in constant
//! time and never logged; a failed request leaves the store as it was;
//! every error answer is `{"error": {"code", "message"}}` as JSON and names
//! no file of the server.
//!
//! # Design notes
//!
//! A tour of the modules; ARCHITECTURE.md holds the crate's invariants and
//! the tests that enforce them.
//!
//! **API boundary:** private modules, root re-exports: `ServeConfig`,
//! `ApiToken`, `run` (serve until SIGINT/SIGTERM, for `tessera serve`),
//! `start`/`RunningServer` (a server inside this process), `bench_serve`
//! (the load benchmark) and `Client` (a small HTTP/1.1 client that talks to
//! loopback addresses only). `app` builds the router and the OpenAPI 3.1
//! document from one list of `utoipa_axum::routes!` (so every route is
//! documented by construction) and wraps it in layers: request ids, a log
//! line and metrics per request (abandoned requests counted as 499), the
//! bearer token (compared in constant time, never logged; reading routes
//! open only with `--public-reads`; `/healthz` and `/readyz` always open),
//! the per-request time limit, the body limit, and `boundary`, where every
//! error answer is finished in one place: an `ApiError` (which carries itself
//! in the response's extensions) or the framework's own answer (an empty 405,
//! a text rejection) leaves as `{"error": {"code", "message"}}` with
//! `content-type: application/json`, the store's file and folder taken out of
//! the message. `api::*` are the handlers; they take their inputs through
//! `api::extract` (`ApiPath`, `ApiQuery`, `ApiJson` wrap axum's extractors
//! and refuse as `ApiError`s: 400 `invalid_path` naming the parameter, 413
//! stating the limit in bytes, 422 for a JSON body that is not an object);
//! `docs::document_errors` adds those shared refusals (401, 400, 413, 415,
//! 422) to every operation of the OpenAPI document that can give them.
//! `api::services` keeps a version per service, sent as the `ETag` and
//! required back in `If-Match` (a stale writer gets 409), and refuses a
//! service whose model has no stored profile (422 `unknown_model`). `jobs::request`
//! reads `POST /v1/plans` as `tessera_plan::PlanOptions` and
//! `ReplanOptions` flattened beside `demo` and `from_plan` (every error
//! names its field), translated into a `tessera_plan::PlanRequest` (checked
//! at the door, so a request the planner would refuse is a 422) and snapshots
//! the job's inputs (services and completed profiles) into the store with
//! the job; `jobs::queue` is the fixed number of workers (at shutdown queued
//! jobs fail and running ones are waited for); `jobs::run` plans on a
//! blocking thread and fails a job past its time limit plus grace. Plans
//! travel as values: stored plans come back as `Plan`s, answers carry them as
//! `tessera_store::PlanDocument`, a posted plan is parsed from its raw JSON. `state` holds the one store connection behind a
//! mutex (used from blocking tasks), the current plan, and the reason the
//! store last refused a write (`/readyz` answers 503 with it). `metrics`
//! (`prometheus-client`) exports requests, jobs, and the current plan per
//! service, GPU and MIG instance (DCGM's `gpu` and `GPU_I_PROFILE` labels),
//! as OpenMetrics or Prometheus text. `pages` and `docs` serve the HTML
//! (drawn by `tessera-report`) and the interactive API page. Error type:
//! `ApiError` (status, stable code, the library's one-line message) for
//! requests; `ServerError` for starting and running.

mod api;
mod app;
mod boundary;
mod client;
mod config;
mod docs;
mod error;
mod head_timeout;
mod jobs;
mod load;
mod metrics;
mod pages;
mod state;

pub use app::{run, start, RunningServer};
pub use client::{Client, ClientResponse};
pub use config::{ApiToken, ServeConfig, MIN_TOKEN_BYTES};
pub use error::{ApiError, ServerError};
pub use load::{bench_serve, LoadOptions, LoadReport, RouteFigures};
