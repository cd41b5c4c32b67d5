//! Which workloads to put together under MPS, and how much throughput each
//! keeps: KACE's group features and least squares, the slowdown model
//! (monotone trees on each member of a measured group of any size beside
//! its partners, an ensemble chosen on inner folds; a size not measured is
//! predicted from pairs, delays added, and said so), rule baselines,
//! KACE's protocols, leave-one-model-family-out and the newest family held
//! out, nested, at every group
//! size; prediction intervals per size, risk-aware ranking, and which
//! colocations to measure next.
//!
//! Invariant: no I/O, no global state; deterministic for a given seed (the
//! evaluation trains folds on threads, whose results do not depend on
//! their order).
//!
//! # Design notes
//!
//! A tour of the modules; ARCHITECTURE.md holds the crate's invariants and
//! the tests that enforce them.
//!
//! **API boundary:** private modules, root re-exports. `features` turns a group
//! (K ≥ 2 workloads) into KACE's group features, and a member beside its
//! partners into one of three `FeatureSet`s (raw metrics, physical
//! percentages with the group's sums, the member's shares and ratios, or
//! both; each with the partners' sums and maxima and K, none depending on the
//! members' order) with each feature's monotone direction; `linear` z-scoring
//! and least squares (Householder QR); `gbm` a deterministic gradient-boosted
//! regression-tree learner with monotone constraints; `groups` builds groups
//! of 3 and more from measured pairs (added delays, or multiplied slowdowns to
//! test that assumption); `models` puts `KaceModel` (group total only) and
//! `SlowdownModel` (an ensemble predicting each member's log slowdown beside
//! its partners, learned from every measured group of any size; a size not
//! measured predicted from pairs, delays added, its `Basis` said; retained
//! fractions clipped to 1; a pooled variant predicts each pair of a fixed pool
//! once) behind `ThroughputModel`; `rules` the one-line baselines; `range` the
//! training workloads' range; `novelty` how far a workload lies from the
//! training workloads; `folds` the protocols (P3, LOWO, LOFO, the newest
//! family), their
//! folds, the candidates of one group size (measured, or built from pairs:
//! `GroupSource`) and how a choice is scored, beneath both `selection` and
//! `evaluate`; `selection` chooses the slowdown model's configurations (the
//! best of each feature view, 3 of a grid of 9, scored at every size
//! measured), the inner targets `fallback` decides from (per group size, a
//! rule for targets beyond a novelty only when better beyond two standard
//! errors, and the best rule beyond the novelty tested) and the
//! split-conformal interval calibration per group size on inner folds of
//! the training rows; `model_file` the `TrainedModel` (model, selection,
//! range, training workloads, sizes trained on) and its versioned JSON
//! document; `evaluate` the nested evaluation (each fold trains the product's
//! procedure on its own rows, folds on threads) at each group size with
//! interval coverage and fallbacks counted, and the figures tuned on the test
//! rows for comparison; `recommend` ranks partner groups for a target by the
//! prediction or the interval's lower end, or by the fallback rule (every
//! group up to 100,000 candidates, a beam search beyond, said so), with how
//! the size is predicted, each group's novelty, a target out of range and
//! clipped members flagged;
//! `suggest` the measurements that could most change a recommendation, and
//! the learning curve that checks them against random ones; `plot` that curve
//! as SVG. Error type: `ColocateError`.

mod error;
mod evaluate;
mod fallback;
mod features;
mod folds;
mod gbm;
mod groups;
mod linear;
mod model_file;
mod models;
mod novelty;
mod plot;
mod range;
mod recommend;
mod rules;
mod selection;
mod suggest;

pub use error::ColocateError;
pub use evaluate::{evaluate, tuned_on_test, Coverage, GroupScores, Policy, PolicyScores};
pub use fallback::{Fallback, FallbackReason};
pub use features::FeatureSet;
pub use folds::{grouped_folds, holdout_folds, measured_sizes, p3_folds, row_folds, workloads};
pub use folds::{Fold, GroupSource, Protocol, Split};
pub use gbm::{GbmParams, Monotone};
pub use groups::{build_groups, compose_slowdowns, Composition};
pub use model_file::{FittedModel, ModelFile, ModelKind, TrainedModel, MODEL_FILE_VERSION};
pub use models::{Basis, Driver, KaceModel, SlowdownConfig, SlowdownModel, ThroughputModel};
pub use novelty::TrainingWorkloads;
pub use plot::learning_curve_svg;
pub use range::{OutOfRange, TrainingRange, RANGE_TOLERANCE};
pub use recommend::{
    check_query, recommend, recommend_trained, Query, Ranking, Recommendation, Risk, RuleFallback, Search,
};
pub use recommend::{BEAM_WIDTH, EXHAUSTIVE_MAX_GROUPS};
pub use rules::Rule;
pub use selection::{decided_sizes, AVERAGED, BUILT_GROUP_SIZES, INNER_ROW_FOLDS, INTERVAL_LEVEL};
pub use selection::{grid, select_kace, select_slowdown, Calibration, ConfigScore, Selection};
pub use suggest::{learning_curve, suggest, CurvePoint, SuggestQuery, Suggestion};
