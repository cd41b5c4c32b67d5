//! Tessera on real hardware. Everything that touches a GPU goes through
//! the [`runner::CommandRunner`] trait, so it can be checked against the
//! faithful fake in [`fake`] on machines without a GPU.
//!
//! - [`ncu`]: Nsight Compute `--csv` reports aggregated into KACE's six
//!   kernel metrics.
//! - [`mig`]: the live MIG state of a GPU as `nvidia-smi` reports it.
//! - [`deploy`]: a plan onto a node: the commands that turn each GPU's live
//!   MIG layout into the plan's (applied with rollback), then one MPS
//!   daemon per instance and the workload's processes, started detached.
//! - [`sampler`]: GPU utilisation from NVML (or scripted).
//! - [`nvml`]: NVML itself, and the MIG devices (UUIDs) of a GPU.
//! - [`launch`]: starting, stopping and reading the throughput of workloads.
//! - [`measure`]: a workload's metrics alone, and colocated throughputs
//!   under MPS.
//! - [`segments`]: segment profiles (batch × MPS processes × instance
//!   size) measured in the MIG instances a GPU already has.
//! - [`mps`]: starting, asking and quitting MPS control daemons.

pub mod deploy;
pub mod error;
pub mod fake;
pub mod launch;
pub mod measure;
pub mod mig;
pub mod mps;
pub mod ncu;
pub mod nvml;
pub mod runner;
pub mod sampler;
pub mod segments;

pub use error::GpuError;
