//! Which workloads to put together under MPS, and how much throughput each
//! keeps: KACE's pair features and least squares, a per-workload slowdown
//! model, rule baselines, and the evaluation protocols of KACE's paper.
//!
//! Invariant: no I/O, no global state; deterministic for a given seed.

pub mod evaluate;
pub mod features;
pub mod gbm;
pub mod linear;
pub mod models;

/// The slowdown model's default hyper-parameters, chosen by a small grid
/// (trees 100–600, depth 2–4, learning rate 0.03–0.1, leaf size 1–4, L2 0–1)
/// on KACE's P3 and LOWO protocols.
pub const DEFAULT_SLOWDOWN: gbm::GbmParams = gbm::GbmParams {
    trees: 600,
    max_depth: 3,
    learning_rate: 0.1,
    min_samples_leaf: 1,
    subsample: 1.0,
    l2: 1.0,
    seed: 0,
};
