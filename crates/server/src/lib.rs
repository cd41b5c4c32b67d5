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

mod api;
mod app;
mod boundary;
mod client;
mod config;
mod docs;
mod error;
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
