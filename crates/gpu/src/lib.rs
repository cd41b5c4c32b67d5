//! Tessera on real hardware, as operations that take an options struct and
//! return data (the way a command-line front end or a Kubernetes node
//! agent calls them), with progress and journal events through a callback:
//!
//! - [`measure_alone`]: a workload's throughput, utilisation and peak
//!   memory alone on a GPU ([`AloneOptions`]);
//! - [`measure_group`]: workloads together under a private MPS daemon, each
//!   one's throughput ([`GroupOptions`]);
//! - [`sweep_segments`]: segment profiles (batch × MPS processes × instance
//!   size) in the MIG instances a GPU already has ([`SweepOptions`]), and
//!   [`merge_profile`] with the points stored before;
//! - [`profile_kernels`]: KACE's six kernel metrics under Nsight Compute
//!   ([`NcuRun`]), or [`aggregate_report`] of an existing report;
//! - [`plan_node`], [`apply_node`], [`node_status`]: a plan onto one node
//!   ([`NodeOptions`], [`ServiceCommands`]): each GPU's MIG layout, then one
//!   MPS daemon per instance and its workload's processes, started
//!   detached; "as planned" is decided once, for both apply and status.
//!   [`plan_node_layouts`] plans the MIG layouts alone (a Kubernetes node
//!   agent: there the DRA driver runs the MPS daemons and Deployments the
//!   processes), for the same [`apply_node`].
//!
//! - [`execute_schedule`]: a simulated schedule run for real ([`ExecuteOptions`])
//!   on a [`ScheduleDevice`] (the executor program, [`ProgramDevice`]), measured
//!   beside the simulator's prediction.
//!
//! What they drive is passed in: the node ([`NodeDriver`] here: programs
//! through [`CommandRunner`], MIG devices through [`MigDevices`]), the
//! workloads of a measurement ([`WorkloadRunner`]), the services of a
//! deployment ([`ServiceLauncher`]) and the GPU's sampler ([`GpuSampler`]).
//! With the `fake` feature (tests only; never in the shipped binary) the
//! crate also exports faithful fakes of each: `FakeNvidiaSmi`,
//! `FakeWorkloadRunner`, `FakeServiceLauncher`, `FakeSampler`, `FakeScheduleDevice`.

mod deploy;
mod error;
mod executor;
#[cfg(any(test, feature = "fake"))]
mod fake;
mod installed;
mod measure;
mod mig;
mod mps;
mod ncu;
mod nvml;
mod runner;
mod sampler;
mod segments;
mod signal;
mod workload;

pub use deploy::{
    apply_node, describe, node_status, plan_node, plan_node_layouts, workload_for, DetachedLauncher, Event, EventKind,
    GpuDeployment, GpuPlan, GpuStatus, InstanceDir, InstanceService, InstanceState, InstanceStatus, LayoutDifferences,
    NodeOptions, NodePlan, NodeStatus, Service, ServiceCommands, ServiceLauncher, Step, Stop,
};
#[cfg(any(test, feature = "fake"))]
pub use deploy::{FakeProcess, FakeServiceLauncher};
pub use error::GpuError;
#[cfg(any(test, feature = "fake"))]
pub use executor::FakeScheduleDevice;
pub use executor::{
    execute_schedule, ExecuteOptions, ExecutionReport, ProgramDevice, ScheduleDevice, DEFAULT_EXECUTOR,
    EXECUTION_PREFIX,
};
#[cfg(any(test, feature = "fake"))]
pub use fake::{fake_mig_uuid, FakeNvidiaSmi, DRIVER_FAILED_LINE};
pub use installed::{gpu_model_from_name, installed_gpu, InstalledGpu};
pub use measure::{measure_alone, measure_group, AloneOptions, GroupOptions, MeasuredCommand, MpsDirs, SystemMetrics};
pub use mig::{LiveGpu, LiveInstance, MigDevice, MigDevices};
pub use mps::daemon_answers;
pub use ncu::{aggregate_report, profile_live as profile_kernels, NcuRun, NCU_METRICS};
pub use nvml::{check_device, NodeDriver, NvmlMigDevices};
pub use runner::{CommandOutput, CommandRunner, SystemRunner};
#[cfg(any(test, feature = "fake"))]
pub use sampler::FakeSampler;
pub use sampler::{GpuSample, GpuSampler, NvmlSampler};
pub use segments::{
    merge_profile, sweep_segments, MergedProfile, PointOutcome, SegmentTarget, Selection, Sweep, SweepEvent,
    SweepOptions, SweepReport,
};
#[cfg(any(test, feature = "fake"))]
pub use workload::FakeWorkloadRunner;
pub use workload::{
    DeviceTarget, RunningWorkload, ShellWorkloadRunner, WorkloadOutput, WorkloadRunner, THROUGHPUT_PREFIX,
};
