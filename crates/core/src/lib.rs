//! Tessera's domain model: GPU models and their MIG placement lattice,
//! segment profiles, service-level objectives and plans.
//!
//! Invariant: this crate does no I/O and holds no global mutable state.
//! Everything here is data in, data out; parsers and the store live in
//! `tessera-store`, planning decisions in `tessera-plan`. What follows from
//! two plans alone is here: their difference (`diff`) and the
//! make-before-break order of the change (`transition`).

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
pub mod slo;
pub mod synthetic;
pub mod text;
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
pub use slo::{ServiceImage, ServiceSlo};
pub use traffic::{TrafficCurve, TrafficPoint};
pub use transition::{transition_steps, Dip, GpuOperations, Operation, Step};
