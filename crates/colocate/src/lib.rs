//! Which workloads to put together under MPS, and how much throughput each
//! keeps: KACE's group features and least squares, the slowdown model
//! (monotone trees on each member of a measured group of any size beside
//! its partners, an ensemble chosen on inner folds; a size not measured is
//! predicted from pairs, delays added, and said so), rule baselines,
//! KACE's protocols and leave-one-model-family-out, nested, at every group
//! size; prediction intervals per size, risk-aware ranking, and which
//! colocations to measure next.
//!
//! Invariant: no I/O, no global state; deterministic for a given seed (the
//! evaluation trains folds on threads, whose results do not depend on
//! their order).

mod error;
mod evaluate;
mod features;
mod folds;
mod gbm;
mod groups;
mod linear;
mod model_file;
mod models;
mod plot;
mod range;
mod recommend;
mod rules;
mod selection;
mod suggest;

pub use error::ColocateError;
pub use evaluate::{evaluate, tuned_on_test, Coverage, GroupScores, Policy, PolicyScores};
pub use features::FeatureSet;
pub use folds::{grouped_folds, holdout_folds, measured_sizes, p3_folds, row_folds, workloads};
pub use folds::{Fold, GroupSource, Protocol, Split};
pub use gbm::{GbmParams, Monotone};
pub use groups::{build_groups, compose_slowdowns, Composition};
pub use model_file::{FittedModel, ModelFile, ModelKind, TrainedModel, MODEL_FILE_VERSION};
pub use models::{Basis, Driver, KaceModel, SlowdownConfig, SlowdownModel, ThroughputModel};
pub use plot::learning_curve_svg;
pub use range::{OutOfRange, TrainingRange, RANGE_TOLERANCE};
pub use recommend::{recommend, recommend_trained, Query, Ranking, Recommendation, Risk, RuleFallback, Search};
pub use recommend::{BEAM_WIDTH, EXHAUSTIVE_MAX_GROUPS};
pub use rules::Rule;
pub use selection::{decided_sizes, AVERAGED, BUILT_GROUP_SIZES, INNER_ROW_FOLDS, INTERVAL_LEVEL};
pub use selection::{grid, select_kace, select_slowdown, Calibration, ConfigScore, Fallback, Selection};
pub use suggest::{learning_curve, suggest, CurvePoint, SuggestQuery, Suggestion};
