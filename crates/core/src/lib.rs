//! Tessera's domain model: GPU models and their MIG placement lattice,
//! segment profiles, service-level objectives and plans.
//!
//! Invariant: this crate does no I/O and holds no global mutable state.
//! Everything here is data in, data out; parsers and the store live in
//! `tessera-store`, planning decisions in `tessera-plan`. What follows from
//! two plans alone is here: their difference (`diff`) and the
//! make-before-break order of the change (`transition`).
//!
//! # Design notes
//!
//! A tour of the modules; ARCHITECTURE.md holds the crate's invariants and
//! the tests that enforce them.
//!
//! `gpu` is the static table of GPU models (`GpuModel`, `GpuSpec`) and their
//! MIG profiles (`MigProfile`: name, compute and memory slices, valid starts,
//! maximum count, memory, NVIDIA's profile ids), with the driver's facts (the
//! product word and a board's memory): a new GPU model is a `GpuModel`
//! variant, its row of the table (matched in `GpuModel::spec`) and its
//! relative speed in `synthetic` (the products `nvidia-smi` and GPU Feature
//! Discovery report map to it in tessera-gpu's `gpu_model_from_name`). `layout`
//! is the placement lattice: `Lattice` enumerates a model's maximal layouts,
//! answers "is this multiset of sizes (`SizeCounts`) realizable?" with a hash
//! lookup, and realizes a multiset into explicit starts; `validate_layout`
//! checks any set of (profile, start), and `free_start` finds where one more
//! instance fits beside a valid layout. `packing` gives, in closed form, the
//! fewest GPUs of a model that hold a multiset of instances, and a packing
//! that achieves it. `profile` holds `SegmentConfig`, `ProfilePoint`,
//! `ModelProfile` (validated, sorted, no duplicates), `ProfileCatalog` and
//! `SourcedProfile` (each point measured or predicted with its conservative
//! bounds, plus the configurations measured out of memory; planners see its
//! `planning_profile`); `timing` the optional `BatchTiming` of a point (the
//! spread of its batch times, its dispatch gap, its serving slowdown);
//! `slo` the `ServiceSlo`; `fleet` the `GpuOffer` (model, cost, limit); `plan`
//! the serialisable `Plan` (unknown fields refused); `shared` the
//! `SharedInstance`s of a plan's GPUs, which host several light services
//! taking turns (`Sharing`, `SharedMember`); `colocation` the
//! `WorkloadMetrics` and `Colocation` groups the colocation crate learns from.
//! `diff` compares two plans of one fleet (`diff_plans` → `PlanDiff`: per GPU
//! unchanged / services changed / layout changed / added / removed, per
//! service segments kept, added, removed, and `DiffTotals`); `transition`
//! orders the change make before break (`transition_steps` → `Step`s of
//! per-GPU `Operation`s, each step starting new segments before it stops
//! what they replace, with the services whose capacity dips).
//! `synthetic` is the documented analytic profile model behind the built-in
//! example data; `rng` a seeded SplitMix64 (unbiased `below`) for synthetic
//! inputs, price sampling, the GBM and the genetic algorithm; `text::count`
//! writes "1 GPU", "2 GPUs" (`counted` "23,782 GPUs"). `traffic` is the
//! `TrafficCurve` (piecewise-constant request rates per service, checked:
//! every service from 0 s, its points in time order; a point at fault named
//! by its index so a file reader can name its line), which the autopilot
//! follows and the store's traffic files hold. Error type: `CoreError`, with
//! `LayoutError` beside it in `error`.

pub mod colocation;
pub mod diff;
pub mod error;
pub mod fleet;
pub mod gpu;
pub mod layout;
pub mod packing;
pub mod plan;
pub mod profile;
pub mod rng;
pub mod shared;
pub mod slo;
pub mod synthetic;
pub mod text;
pub mod timing;
pub mod traffic;
pub mod transition;

#[doc(hidden)]
pub use serde as __serde;

pub use colocation::{Colocation, GroupMember, WorkloadMetrics, KERNEL_METRIC_NAMES};
pub use diff::{diff_plans, DiffTotals, GpuChange, GpuDiff, PlanDiff, ServiceDiff};
pub use error::{CoreError, LayoutError};
pub use fleet::GpuOffer;
pub use gpu::{GpuModel, GpuSpec, MigProfile};
pub use layout::{Lattice, Placement, SizeCounts};
pub use packing::Packer;
pub use plan::{FleetUse, GpuAssignment, InstanceAssignment, Optimality, Plan, ServiceReport, Traffic};
pub use profile::{
    ModelProfile, PointSource, ProfileCatalog, ProfilePoint, SegmentConfig, SourcedPoint, SourcedProfile,
};
pub use shared::{SharedInstance, SharedMember, Sharing};
pub use slo::{ServiceImage, ServiceSlo};
pub use timing::BatchTiming;
pub use traffic::{TrafficCurve, TrafficPoint};
pub use transition::{hardware_change, transition_steps, Dip, GpuOperations, Operation, Step};
