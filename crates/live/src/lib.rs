//! Tessera's live loop: the controller (tessera-autopilot's) on a real
//! fleet. Each decision time ([`Clock`]) the [`LiveLoop`] reads every
//! service's rate from a [`RateSource`] ([`PrometheusRates`]: one instant
//! query per service; [`FileRates`]: a traffic file replayed), optionally
//! its burstiness ([`PrometheusCounts`]), lets the controller decide, and
//! acts on a new plan through a [`DeployTarget`] ([`DryRun`], [`PlanFile`],
//! [`NodeTarget`]: this node's GPUs, [`KubernetesTarget`]); its [`LoopMetrics`] serve `/metrics` and
//! `/healthz`. The binary only turns `tessera autopilot run`'s flags into
//! these parts, journals each decision in the store and prints it.
//!
//! A module per part: `clock`, `live_loop`, `rates` (the source trait and
//! the file source), `prometheus` (the rates source over Prometheus' HTTP
//! API), `burstiness`, `http` (the one plain-HTTP client they share),
//! `metrics`, `target` (the deploy target trait, and the dry run, plan file
//! and cluster targets), `node` (the node target), `error`.

mod burstiness;
mod clock;
mod error;
mod http;
mod live_loop;
mod metrics;
mod node;
mod prometheus;
mod rates;
mod target;

pub use burstiness::{Burstiness, PrometheusCounts};
pub use clock::Clock;
pub use error::LiveError;
pub use http::BaseUrl;
pub use live_loop::{LiveLoop, Turn};
pub use metrics::{LoopMetrics, TRANSITION_OUTCOMES};
pub use node::NodeTarget;
pub use prometheus::PrometheusRates;
pub use rates::{FileRates, RateSource, Rates};
pub use target::{DecisionNote, DeployTarget, DryRun, KubernetesTarget, Outcome, PlanFile};
