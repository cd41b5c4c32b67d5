//! Which workloads to put together under MPS, and how much throughput each
//! keeps: KACE's pair features and least squares, a per-workload slowdown
//! model, rule baselines, and the evaluation protocols of KACE's paper.
//!
//! Invariant: no I/O, no global state; deterministic for a given seed.

mod error;
mod evaluate;
mod features;
mod gbm;
mod groups;
mod linear;
mod model_file;
mod models;
mod recommend;

pub use error::ColocateError;
pub use evaluate::{lowo, p3, Policy, PolicyScores, Split};
pub use gbm::{GbmParams, Monotone};
pub use groups::{build_groups, compose_slowdowns, Composition};
pub use model_file::{ModelFile, TrainedModel};
pub use models::ThroughputModel;
pub use recommend::{recommend, Query, Recommendation, Search, BEAM_WIDTH};

/// The slowdown model's default hyper-parameters, chosen by a small grid
/// (trees 80–600, depth 2–4, learning rate 0.03–0.2, leaf size 1–4, L2 0–1)
/// on KACE's P3 and LOWO protocols, preferring fewer trees (faster scoring)
/// among settings that do well on both.
pub const DEFAULT_SLOWDOWN: gbm::GbmParams = gbm::GbmParams {
    trees: 80,
    max_depth: 3,
    learning_rate: 0.2,
    min_samples_leaf: 1,
    subsample: 1.0,
    l2: 1.0,
    seed: 0,
};
