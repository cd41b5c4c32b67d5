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
//!
//! # Design notes
//!
//! A tour of the modules; ARCHITECTURE.md holds the crate's invariants and
//! the tests that enforce them.
//!
//! **API boundary:** a facade of operations that take an options struct and
//! return data, with progress and journal events through a callback — the
//! CLI's `profile` and `deploy` commands only build options, call them and
//! render; a Kubernetes node agent can call the same. `measure_alone`
//! (`AloneOptions` → `SystemMetrics`), `measure_group` (`GroupOptions` → each
//! member's throughput under a private MPS daemon), `sweep_segments`
//! (`SweepOptions` → `SweepReport`; `Selection::Budget` measures the first N
//! of a ranked list of configurations, e.g. `suggest_measurements`'s) with
//! `merge_profile`, `profile_kernels` /
//! `aggregate_report` (KACE's six kernel metrics from `ncu`),
//! `execute_schedule` (`ExecuteOptions` with a simulated run's
//! `ExecutionPlan` → measured beside simulated totals, on a `ScheduleDevice`:
//! `ProgramDevice` runs `examples/executor/run_schedule.py` with the plan on
//! its standard input), and a deploy:
//! `ServiceCommands::resolve` (the registered workload of each planned model
//! and batch, inference before training, resolved before planning) →
//! `plan_node` → `NodePlan` → `apply_node` / `node_status`.
//!
//! What the operations drive is passed in: programs through `CommandRunner`
//! (`SystemRunner`), MIG devices through `MigDevices` (NVML; `NodeDriver` is
//! both, the one driver of deploy, status and sweeps), measured workloads
//! through `WorkloadRunner` (`ShellWorkloadRunner`: `sh -c` in its own process
//! group) and detached services through `ServiceLauncher`
//! (`DetachedLauncher`). Inside: `installed` (the installed model and MIG mode
//! from `nvidia-smi --query-gpu`), `mig` (the live layout from `nvidia-smi mig
//! -lgi/-lci`), `deploy::layout` (the exact `-cgi PROFILE:START`/`-cci` steps
//! with refusal and rollback), `deploy::services` (one directory per instance:
//! MPS pipe and log, process logs, recorded pids), `deploy::status` (a
//! `NodePlan` read as a `NodeStatus`), `mps` (start, ask, quit daemons),
//! `ncu`, `sampler` (NVML utilisation and memory), `measure`, `segments`,
//! `signal` (process groups signalled through `kill(2)` with rustix: a group
//! already gone is fine, one that may not be signalled is an error). Error
//! type: `GpuError` (each message carries its cause once; no `source()`).
//!
//! ### `crates/k8s` — `tessera-k8s`
//!
//! **API boundary:** private modules, root re-exports. `cluster` is the
//! connection (`Cluster`: kube 4.2 with rustls, a single-threaded tokio runtime
//! of its own so callers stay synchronous; objects as JSON through
//! `DynamicObject`; every failure one `K8sError::Cluster` line naming the
//! context, API server, request and cause, with a hint for 401, 403 and 409).
//! `inventory` is the cluster as a deploy target: it reads GPU Feature
//! Discovery's node labels into a `tessera_plan::Inventory` (products mapped
//! by `tessera_gpu::gpu_model_from_name`, unknown ones named and left out)
//! and the DRA driver's ResourceSlices into MIG devices per node
//! (`ClusterInventory`); placing a plan on the nodes and checking one against
//! them are tessera-plan's (`Inventory::place`, `Inventory::check`). `manifests` turns a plan into typed k8s-openapi objects
//! (per node a ConfigMap of its part of the plan, per segment a ResourceClaim
//! with a CEL selector and an opaque `MigDeviceConfig` from `mig_config` and
//! a Deployment, per service and configuration a Service, per service an
//! HTTPRoute) after refusing a plan
//! that `tessera_plan::check_structure` (the verifier's lattice and fleet
//! checks, no profiles) refuses; `manifests_with` takes `ExportOptions`
//! (namespace, routes' Gateway or none, `PodOptions`); `PlanObjects` makes
//! them node by node (names, ids, parts and each service's configurations
//! decided once for the plan; the Services and routes, each over nodes,
//! apart), so `k8s export` streams a fleet node by node on every core.
//! `routing` (public) makes the per-configuration Services (a service's pods
//! of one GPU model, MIG profile, batch and process count, `names::config_name`:
//! servers of equal capacity) and the per-service `HTTPRoute`s (typed with the
//! `gateway-api` crate, whose versions — kube 4.2, k8s-openapi 0.28 — the
//! workspace uses, so one k8s-openapi is compiled), one backend per
//! configuration weighted by its summed capacity (`route_weights`), refuses a
//! service of more configurations than a rule may list (16), and states the
//! serving discipline the objects set up (tessera-serving's
//! `RandomPerProcess`) and why one Service per configuration; `pods` (public)
//! holds the pods' requests, probes and the `maxSurge: 0` rolling update, with
//! why.
//! `node_plan` splits a plan per node (`node_parts`; a part over 1 MiB is
//! refused), reads parts back from ConfigMaps and merges the recorded parts
//! into the plan the cluster runs. `names` makes valid names
//! deterministically (one note for all renamed services) and a plan's id;
//! `labels` holds every label, annotation and key Tessera writes, and the
//! default namespace. `transition` turns
//! `tessera_core::transition_steps` into intermediate states (each GPU at its
//! old or new assignment; per step the drained state and the state after;
//! states are built without the structural check, a drained GPU may be
//! empty; a GPU the target drops stays in the states empty, so its agent
//! empties it, and leaves the parts only with the target). `apply` is
//! server-side apply (field manager `tessera`): from the recorded plan (GPUs
//! an interrupted run handed to their agents to empty awaited first), per
//! step the drained state's routing, the stopped Deployments deleted, the
//! step's nodes' parts, the layouts awaited (not those of nodes gone from the
//! cluster that only empty GPUs), claims and Deployments, readiness awaited,
//! the state's routing; then the whole plan and prune last
//! (Deployments, Services, HTTPRoutes, ConfigMaps, claims); bulk writes
//! through `Cluster::apply_all`/`delete_all` (bounded concurrency on the
//! client's runtime); and `cluster_status` (of a plan file or of what the
//! cluster records, GPUs being emptied included).
//! `agent` is one pass of the node agent (`reconcile_node`: its node's part
//! read from its ConfigMap through the API (or a plan file), layouts through
//! `tessera_gpu::{plan_node_layouts, apply_node}`, a GPU listed without
//! instances emptied (passed over when it is gone or not in MIG mode), the
//! state label, the DRA plugin restart after every layout change and the
//! ResourceSlice check) and its loop. `events` makes an autopilot decision
//! a typed `events.k8s.io/v1` Event (named after its time, regarding the
//! namespace, the note cut to 1 kB) and records it by server-side apply.
//! `fake` (only under `cfg(any(test, feature = "fake"))`, which enables
//! tessera-gpu's fakes) is an in-process API server on 127.0.0.1 that also
//! plays the DRA driver publishing a fake driver's MIG devices
//! (`publish_mig_slices`). Error type: `K8sError`. k8s-openapi's feature is `v1_34`, the
//! first Kubernetes release with `resource.k8s.io/v1`, so the objects are
//! those every cluster from 1.34 on serves.

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
    TIMING_PREFIXES,
};
