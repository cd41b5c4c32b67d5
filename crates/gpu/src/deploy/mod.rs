//! Deploying a plan onto one node, as one operation that travels one way:
//! the caller resolves which command serves each (model, batch)
//! ([`ServiceCommands`], from the registered workloads) and passes it in as
//! data; [`plan_node`] reads the node (installed GPU models, live MIG
//! layouts, what runs for each instance) and returns a [`NodePlan`];
//! [`apply_node`] runs exactly the commands a dry run prints
//! ([`GpuPlan::lines`]), reporting each as an [`Event`]; [`node_status`]
//! reports the same plan as data. "As planned" is decided once, in
//! [`plan_node`]: a GPU whose layout needs no step and a service that would
//! be kept. A second apply of the same plan changes and starts nothing.
//!
//! The parts: each GPU's MIG layout ([`layout`]), then one MPS control
//! daemon per MIG instance and the processes of the workload serving it
//! ([`services`], started by a [`ServiceLauncher`]): a dedicated
//! instance's `procs` processes of its registered workload, a shared
//! instance's one multi-model server process told its members.

mod commands;
mod layout;
mod service_launcher;
mod services;
mod status;
#[cfg(test)]
mod test_plans;

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tessera_core::text::count;
use tessera_core::{GpuAssignment, Plan};

use crate::error::GpuError;
use crate::installed::{check_installed, InstalledGpu};
use crate::mig::{count_processes, read_live, LiveGpu, MigDevice, MigDevices};
use crate::runner::CommandRunner;

pub use commands::{workload_for, ServiceCommands};
pub use layout::{describe, Step};
pub use service_launcher::{DetachedLauncher, ServiceLauncher};
#[cfg(any(test, feature = "fake"))]
pub use service_launcher::{FakeProcess, FakeServiceLauncher};
pub use services::{InstanceDir, InstanceService, InstanceState, Service, Stop};
pub use status::{node_status, GpuStatus, InstanceStatus, LayoutDifferences, NodeStatus};

use layout::{apply, plan_steps};
use services::{kept_detail, plan_services, start, Started};

/// What a node operation works on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeOptions {
    /// The node whose GPUs are deployed (the plan's `node` field).
    pub node: u32,
    /// Where each instance's MPS pipe and log directories, process logs and
    /// pids file go (`<mps_root>/gpu<G>-<PROFILE>-<START>/`); absolute.
    pub mps_root: PathBuf,
    /// Without `nvidia-smi`, plan for GPUs in MIG mode without instances
    /// (a dry run anywhere) instead of failing.
    pub assume_empty_without_driver: bool,
}

/// One GPU of a node: what runs there and what would change.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuDeployment {
    /// The plan's GPU.
    pub planned: GpuAssignment,
    /// The GPU the driver reports at its index (`None` when assumed).
    pub installed: Option<InstalledGpu>,
    /// Its live layout (empty when assumed).
    pub live: LiveGpu,
    /// The steps from live to planned; none when the layout is as planned.
    pub steps: Vec<Step>,
}

/// The plan's GPUs on `node`, by index, each with its live layout and
/// steps. With a `runner`, each GPU's installed model is checked against
/// the plan's and its layout read; without one, GPUs are assumed empty.
fn plan_layouts(
    mut runner: Option<&mut dyn CommandRunner>,
    plan: &Plan,
    node: u32,
) -> Result<Vec<GpuDeployment>, GpuError> {
    let mut gpus: Vec<&GpuAssignment> = plan.gpus.iter().filter(|gpu| gpu.node == node).collect();
    if gpus.is_empty() {
        return Err(GpuError::NoGpuOnNode { node });
    }
    gpus.sort_by_key(|gpu| gpu.index);
    if let Some(pair) = gpus.windows(2).find(|pair| pair[0].index == pair[1].index) {
        return Err(GpuError::PlanGpu { gpu: pair[0].index, message: format!("appears twice on node {node}") });
    }
    gpus.into_iter()
        .map(|planned| {
            let (installed, live) = match runner.as_deref_mut() {
                Some(runner) => {
                    let installed = check_installed(runner, planned)?;
                    (Some(installed), read_live(runner, planned.index, planned.gpu_model)?)
                }
                None => (None, LiveGpu::empty(planned.index)),
            };
            let steps = plan_steps(&live, planned)?;
            Ok(GpuDeployment { planned: planned.clone(), installed, live, steps })
        })
        .collect()
}

/// A GPU's whole deployment, in the order it runs: what runs there to stop,
/// the layout steps, then each planned instance's service.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuPlan {
    /// The layout part.
    pub deployment: GpuDeployment,
    /// Daemons and processes of earlier deployments to stop first.
    pub stops: Vec<Stop>,
    /// Each planned instance's service, in the plan's order.
    pub services: Vec<Service>,
}

impl GpuPlan {
    /// The GPU index.
    pub fn gpu(&self) -> u32 {
        self.deployment.planned.index
    }

    /// `true` when its MIG layout needs no change.
    pub fn layout_as_planned(&self) -> bool {
        self.deployment.steps.is_empty()
    }

    /// Every command it runs, in order, as a dry run prints them (instances
    /// not created yet show placeholders for their ids), with a comment for
    /// each service left alone.
    pub fn lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self.stops.iter().map(Stop::line).collect();
        lines.extend(self.deployment.steps.iter().map(ToString::to_string));
        lines.extend(self.services.iter().flat_map(Service::lines));
        lines
    }
}

/// A plan for one node: per GPU, what to stop, change and start.
#[derive(Debug, Clone, PartialEq)]
pub struct NodePlan {
    /// The node.
    pub node: u32,
    /// Its GPUs, by index.
    pub gpus: Vec<GpuPlan>,
    /// `true` when no driver was found and the GPUs were assumed to be in
    /// MIG mode without instances.
    pub assumed_empty: bool,
    /// The (model, batch) pairs without a command (no registered workload);
    /// their services show a placeholder, and [`apply_node`] refuses.
    pub missing_commands: Vec<(String, u32)>,
    /// The first shared instance (GPU, `profile@start`) when the plan has
    /// shared instances on the node and no multi-model server command was
    /// given; they show a placeholder, and [`apply_node`] refuses.
    pub missing_shared_server: Option<(u32, String)>,
}

/// The GPU-instance id of instance `profile@start` in `live`, when it has a
/// compute instance (and so a MIG device).
fn live_gi(live: &LiveGpu, dir: &InstanceDir) -> Option<u32> {
    live.instances
        .iter()
        .find(|i| i.profile == dir.profile && i.start == dir.start && !i.compute_instances.is_empty())
        .map(|i| i.gi_id)
}

/// The UUID of the MIG device of `dir`'s instance in `live`.
fn mig_uuid(live: &LiveGpu, devices: &[MigDevice], dir: &InstanceDir) -> Option<String> {
    let gi_id = live_gi(live, dir)?;
    devices.iter().find(|device| device.gi_id == gi_id).map(|device| device.uuid.clone())
}

/// Completes `deployment` with its services under `root`. What runs on the
/// GPU is asked of `driver` (MPS daemons) and `launcher` (recorded
/// processes); the MIG UUIDs of planned instances that exist already, of
/// `driver` too.
fn plan_gpu<N: CommandRunner + MigDevices>(
    driver: &mut N,
    launcher: &mut dyn ServiceLauncher,
    deployment: GpuDeployment,
    root: &Path,
    commands: &ServiceCommands,
) -> Result<GpuPlan, GpuError> {
    let gpu = deployment.planned.index;
    let planned = &deployment.planned;
    let dedicated = planned.instances.iter().map(|instance| {
        InstanceService::new(root, gpu, instance, commands.command_for(&instance.model, instance.batch))
    });
    let shared = planned
        .shared
        .iter()
        .map(|shared| InstanceService::shared(root, gpu, shared, commands.shared_command_for(shared)));
    let services: Vec<InstanceService> = dedicated.chain(shared).collect();
    let live = &deployment.live;
    let exists = services.iter().any(|service| live_gi(live, &service.dir).is_some());
    let devices = if exists { driver.mig_devices(gpu)? } else { Vec::new() };
    let uuid_of = |dir: &InstanceDir| mig_uuid(live, &devices, dir);
    let (stops, services) =
        plan_services(driver, launcher, root, gpu, services, !deployment.steps.is_empty(), &uuid_of)?;
    Ok(GpuPlan { deployment, stops, services })
}

/// Reads `plan`'s GPUs on the node of `options` and plans their deployment:
/// each GPU's installed model is checked against the plan's (refused
/// before anything changes), its live layout read and diffed, and what runs
/// for each instance compared with the plan; `commands` says what each
/// instance's processes run.
pub fn plan_node<N: CommandRunner + MigDevices>(
    driver: &mut N,
    launcher: &mut dyn ServiceLauncher,
    plan: &Plan,
    commands: &ServiceCommands,
    options: &NodeOptions,
) -> Result<NodePlan, GpuError> {
    let (deployments, assumed_empty) = match plan_layouts(Some(driver), plan, options.node) {
        Err(GpuError::ProgramMissing { .. }) if options.assume_empty_without_driver => {
            (plan_layouts(None, plan, options.node)?, true)
        }
        other => (other?, false),
    };
    let gpus = deployments
        .into_iter()
        .map(|deployment| plan_gpu(driver, launcher, deployment, &options.mps_root, commands))
        .collect::<Result<Vec<_>, _>>()?;
    let mut missing_commands: Vec<(String, u32)> = gpus
        .iter()
        .flat_map(|gpu| &gpu.deployment.planned.instances)
        .filter(|instance| commands.get(&instance.model, instance.batch).is_none())
        .map(|instance| (instance.model.clone(), instance.batch))
        .collect();
    missing_commands.sort();
    missing_commands.dedup();
    let missing_shared_server = match commands.shared_server() {
        Some(_) => None,
        None => gpus.iter().find_map(|gpu| {
            let shared = gpu.deployment.planned.shared.first()?;
            Some((gpu.gpu(), format!("{}@{}", shared.profile, shared.start)))
        }),
    };
    Ok(NodePlan { node: options.node, gpus, assumed_empty, missing_commands, missing_shared_server })
}

/// The MIG-layout part of [`plan_node`] alone: each GPU's installed model
/// checked, its live layout read and the steps to the plan's, with no
/// services (no MPS daemons, no processes, nothing to stop). [`apply_node`]
/// applies it like any [`NodePlan`]: refusal of busy GPUs, rollback and
/// idempotence included. For a node where something else runs the
/// services, e.g. a Kubernetes node (the DRA driver runs the MPS daemons).
pub fn plan_node_layouts<R: CommandRunner>(driver: &mut R, plan: &Plan, node: u32) -> Result<NodePlan, GpuError> {
    let runner: &mut dyn CommandRunner = driver;
    let gpus = plan_layouts(Some(runner), plan, node)?
        .into_iter()
        .map(|deployment| GpuPlan { deployment, stops: Vec::new(), services: Vec::new() })
        .collect();
    Ok(NodePlan { node, gpus, assumed_empty: false, missing_commands: Vec::new(), missing_shared_server: None })
}

/// What an [`Event`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// A MIG layout step ran.
    Step,
    /// A GPU's layout was applied, found as planned, or failed (and rolled
    /// back).
    Layout,
    /// An instance's MPS directories were created.
    Directories,
    /// An MPS control daemon started.
    DaemonStart,
    /// An MPS control daemon was quit.
    DaemonStop,
    /// A process started.
    ProcessStart,
    /// A process (group) was stopped.
    ProcessStop,
    /// A service runs as planned and was left alone.
    Kept,
    /// Starting or stopping a service failed.
    Failed,
}

impl EventKind {
    /// The journal action it is recorded under, if it is recorded.
    pub fn journal_action(self) -> Option<&'static str> {
        match self {
            EventKind::Step | EventKind::Directories | EventKind::Kept => None,
            EventKind::Layout => Some("deploy-apply"),
            EventKind::DaemonStart => Some("deploy-mps-start"),
            EventKind::DaemonStop => Some("deploy-mps-stop"),
            EventKind::ProcessStart => Some("deploy-process-start"),
            EventKind::ProcessStop => Some("deploy-process-stop"),
            EventKind::Failed => Some("deploy-failed"),
        }
    }
}

/// One thing [`apply_node`] did, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The GPU.
    pub gpu: u32,
    /// What happened.
    pub kind: EventKind,
    /// The command that ran (as a dry run prints it), or the outcome.
    pub detail: String,
    /// The pid of a started process.
    pub pid: Option<u32>,
}

impl Event {
    fn new(gpu: u32, kind: EventKind, detail: String) -> Self {
        Self { gpu, kind, detail, pid: None }
    }
}

impl fmt::Display for Event {
    /// The command (with `  # pid N` for a process), or `# GPU g: outcome`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.kind, self.pid) {
            (EventKind::Layout | EventKind::Kept, _) => write!(f, "# GPU {}: {}", self.gpu, self.detail),
            (EventKind::Failed, _) => write!(f, "# failed: {}", self.detail),
            (_, Some(pid)) => write!(f, "{}  # pid {pid}", self.detail),
            (_, None) => f.write_str(&self.detail),
        }
    }
}

/// Applies `plan` GPU by GPU, in order: stops what [`GpuPlan::stops`]
/// names, applies the layout (refusing a GPU with other compute processes
/// unless `force`, rolling back on failure), then starts the services that
/// do not run as planned on their MIG devices. Every action is reported to
/// `on_event` as it happens; the first failure ends it. A plan with
/// services without a command is refused, and the MIG devices are read once
/// before any change, so a node whose UUIDs cannot be read is not touched.
pub fn apply_node<N: CommandRunner + MigDevices>(
    driver: &mut N,
    launcher: &mut dyn ServiceLauncher,
    plan: &NodePlan,
    force: bool,
    on_event: &mut dyn FnMut(Event),
) -> Result<(), GpuError> {
    if let Some((model, batch)) = plan.missing_commands.first() {
        let others: Vec<String> = plan.missing_commands[1..].iter().map(|(m, b)| format!("{m} batch {b}")).collect();
        return Err(GpuError::NoWorkload { model: model.clone(), batch: *batch, others });
    }
    if let Some((gpu, instance)) = &plan.missing_shared_server {
        return Err(GpuError::NoSharedServer { gpu: *gpu, instance: instance.clone() });
    }
    let gpus = &plan.gpus;
    for gpu in gpus.iter().filter(|gpu| gpu.services.iter().any(|s| matches!(s, Service::Start { .. }))) {
        driver.mig_devices(gpu.gpu())?;
    }
    for gpu in gpus {
        apply_gpu(driver, launcher, gpu, force, on_event)?;
    }
    Ok(())
}

/// How long the processes of stopped services may take to leave a GPU (an
/// MPS server exits once its daemon has quit).
const DRAIN: Duration = Duration::from_secs(10);

/// Waits up to [`DRAIN`] until GPU `gpu` runs no compute process (else
/// [`apply`] refuses it, naming the count).
fn drain(runner: &mut dyn CommandRunner, gpu: u32) -> Result<(), GpuError> {
    let deadline = Instant::now() + DRAIN;
    while count_processes(runner, gpu)? > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok(())
}

fn apply_gpu<N: CommandRunner + MigDevices>(
    node: &mut N,
    launcher: &mut dyn ServiceLauncher,
    plan: &GpuPlan,
    force: bool,
    on_event: &mut dyn FnMut(Event),
) -> Result<(), GpuError> {
    let gpu = plan.gpu();
    let failed = |on_event: &mut dyn FnMut(Event), error: GpuError| {
        on_event(Event::new(gpu, EventKind::Failed, error.to_string()));
        error
    };
    for stop in &plan.stops {
        stop.run(node, launcher).map_err(|error| failed(on_event, error))?;
        let kind = match stop {
            Stop::Process { .. } => EventKind::ProcessStop,
            Stop::Daemon { .. } => EventKind::DaemonStop,
        };
        on_event(Event::new(gpu, kind, stop.line()));
    }
    let deployment = &plan.deployment;
    let steps = &deployment.steps;
    if !plan.stops.is_empty() && !steps.is_empty() {
        drain(node, gpu)?;
    }
    let applied = apply(node, gpu, deployment.planned.gpu_model, steps, force, &mut |line| {
        on_event(Event::new(gpu, EventKind::Step, line.to_string()));
    });
    let outcome = match &applied {
        Ok(after) if plan.layout_as_planned() => format!("MIG layout already as planned: {}", describe(after)),
        Ok(after) => format!("applied {}: now {}", count(steps.len(), "step"), describe(after)),
        Err(error) => format!("failed: {error}"),
    };
    on_event(Event::new(gpu, EventKind::Layout, outcome));
    let after = applied?;
    let starts = plan.services.iter().any(|service| matches!(service, Service::Start { .. }));
    let devices = if starts { node.mig_devices(gpu)? } else { Vec::new() };
    for service in &plan.services {
        let service = match service {
            Service::Keep { service, pids } => {
                on_event(Event::new(gpu, EventKind::Kept, kept_detail(service, pids)));
                continue;
            }
            Service::Start { service, .. } => service,
        };
        let dir = &service.dir;
        let uuid = mig_uuid(&after, &devices, dir).ok_or_else(|| {
            let message = "no MIG device serves it (no compute instance, or NVML does not list it)".to_string();
            failed(on_event, GpuError::Service { gpu, instance: dir.instance(), message })
        })?;
        start(node, launcher, service, &uuid, &mut |started| {
            on_event(match started {
                Started::Directories(line) => Event::new(gpu, EventKind::Directories, line),
                Started::Daemon(line) => Event::new(gpu, EventKind::DaemonStart, line),
                Started::Process(line, pid) => {
                    Event { pid: Some(pid), ..Event::new(gpu, EventKind::ProcessStart, line) }
                }
            });
        })
        .map_err(|error| failed(on_event, error))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::{fake_mig_uuid, FakeNvidiaSmi};
    use crate::runner::CommandOutput;
    use tessera_core::GpuModel;
    use test_plans::{expected, gpu, plan};

    const LAYOUT_A: &[(&str, u8)] = &[("3g.40gb", 4), ("2g.20gb", 0), ("1g.10gb", 2), ("1g.10gb", 3)];
    const LAYOUT_B: &[(&str, u8)] = &[("4g.40gb", 0), ("2g.20gb", 4), ("1g.10gb", 6)];

    fn commands() -> ServiceCommands {
        ServiceCommands::new([(("resnet50".to_string(), 8), "serve resnet50 --batch 8".to_string())])
    }

    fn options(root: &Path) -> NodeOptions {
        NodeOptions { node: 0, mps_root: root.to_path_buf(), assume_empty_without_driver: false }
    }

    fn plan_all(fake: &mut FakeNvidiaSmi, launcher: &mut FakeServiceLauncher, plan: &Plan, root: &Path) -> NodePlan {
        plan_node(fake, launcher, plan, &commands(), &options(root)).unwrap()
    }

    fn apply_all(
        fake: &mut FakeNvidiaSmi,
        launcher: &mut FakeServiceLauncher,
        plan: &Plan,
        root: &Path,
    ) -> (Vec<Event>, Result<(), GpuError>) {
        let plans = plan_all(fake, launcher, plan, root);
        let mut events = Vec::new();
        let result = apply_node(fake, launcher, &plans, false, &mut |event| events.push(event));
        (events, result)
    }

    fn is_command(event: &Event) -> bool {
        !matches!(event.kind, EventKind::Layout | EventKind::Kept | EventKind::Failed)
    }

    /// Replaces the placeholders of `line` with the ids the fake gave GPU
    /// `gpu`'s instances.
    fn fill_in(fake: &mut FakeNvidiaSmi, gpu: u32, line: &str) -> String {
        let live = read_live(fake, gpu, GpuModel::A100_80GB).unwrap();
        live.instances.iter().fold(line.to_string(), |line, i| {
            line.replace(&format!("<gi:{}@{}>", i.profile, i.start), &i.gi_id.to_string()).replace(
                &format!("'<MIG-UUID of GPU {gpu} {}@{}>'", i.profile, i.start),
                &fake_mig_uuid(gpu, i.gi_id, 0),
            )
        })
    }

    fn changes(fake: &FakeNvidiaSmi) -> usize {
        let flags = [" -cgi", " -cci", " -dci", " -dgi", "mps-control -d", "echo quit"];
        fake.log.iter().filter(|l| flags.iter().any(|flag| l.contains(flag))).count()
    }

    #[test]
    fn every_gpu_model_takes_its_smallest_instances_at_every_start_on_the_fake_driver() {
        for model in GpuModel::ALL {
            let smallest = model.spec().primary_profiles().min_by_key(|p| p.compute_slices).unwrap();
            let instances = smallest
                .starts
                .iter()
                .take(smallest.max_count as usize)
                .map(|&start| crate::deploy::test_plans::instance(smallest.name, start))
                .collect();
            let plan = plan(vec![GpuAssignment { gpu_model: model, instances, ..gpu(0, 0, &[]) }]);
            let mut fake = FakeNvidiaSmi::new().with_gpu(0, model);
            let layouts = plan_node_layouts(&mut fake, &plan, 0).unwrap();
            assert_eq!(layouts.gpus[0].deployment.steps.len(), 2 * smallest.max_count as usize, "{model}");
            apply_node(&mut fake, &mut FakeServiceLauncher::new(), &layouts, false, &mut |_| {}).unwrap();
            assert!(plan_node_layouts(&mut fake, &plan, 0).unwrap().gpus[0].layout_as_planned(), "{model}");
        }
    }

    #[test]
    fn a_dry_run_prints_exactly_what_apply_runs() {
        let root = tempfile::tempdir().unwrap();
        let plan = plan(vec![gpu(0, 0, LAYOUT_A), gpu(0, 1, LAYOUT_B)]);
        let mut fake = FakeNvidiaSmi::new().with_gpu(0, GpuModel::A100_80GB).with_gpu(1, GpuModel::A100_80GB);
        let mut launcher = FakeServiceLauncher::new();
        let dry: Vec<(u32, Vec<String>)> =
            plan_all(&mut fake, &mut launcher, &plan, root.path()).gpus.iter().map(|p| (p.gpu(), p.lines())).collect();
        // 4 + 3 instances: a GI and a CI each, then mkdir, daemon, 2 processes.
        assert_eq!(dry[0].1.len(), 4 * 2 + 4 * 4);
        assert!(dry[0].1.iter().all(|line| !line.contains("MIG-fake")), "nothing exists yet");

        let (events, result) = apply_all(&mut fake, &mut launcher, &plan, root.path());
        result.unwrap();
        for (gpu, lines) in dry {
            let ran: Vec<&str> =
                events.iter().filter(|e| e.gpu == gpu && is_command(e)).map(|e| e.detail.as_str()).collect();
            let filled: Vec<String> = lines.iter().map(|line| fill_in(&mut fake, gpu, line)).collect();
            assert_eq!(ran, filled, "GPU {gpu}");
        }
        assert_eq!(fake.layout(0), expected(LAYOUT_A));
        assert_eq!(fake.layout(1), expected(LAYOUT_B));

        // One daemon per instance, on its MIG device; two processes each, on
        // the same device and daemon, recorded in its pids file.
        let daemons = fake.daemons();
        assert_eq!(daemons.len(), 7);
        assert_eq!(launcher.running().len(), 14);
        for (pipe, device) in &daemons {
            let device = device.as_deref().unwrap();
            assert!(device.starts_with("MIG-fake-g"), "{device}");
            let clients: Vec<_> = launcher
                .started
                .iter()
                .filter(|p| p.env.contains(&("CUDA_MPS_PIPE_DIRECTORY".into(), pipe.clone())))
                .collect();
            assert_eq!(clients.len(), 2, "{pipe}");
            assert!(clients.iter().all(|p| p.env.contains(&("CUDA_VISIBLE_DEVICES".into(), device.to_string()))));
            assert!(clients.iter().all(|p| p.command == "serve resnet50 --batch 8"));
            let dir = Path::new(pipe).parent().unwrap();
            let pids: Vec<String> = clients.iter().map(|p| format!("{}\n", p.pid)).collect();
            assert_eq!(std::fs::read_to_string(dir.join("pids")).unwrap(), pids.concat());
        }
        let started: Vec<Event> = events.into_iter().filter(|e| e.kind == EventKind::ProcessStart).collect();
        assert_eq!(started[0].to_string(), format!("{}  # pid 1000", started[0].detail));
    }

    #[test]
    fn applying_twice_starts_and_changes_nothing_the_second_time() {
        let root = tempfile::tempdir().unwrap();
        let plan = plan(vec![gpu(0, 0, LAYOUT_A)]);
        let mut fake = FakeNvidiaSmi::new().with_gpu(0, GpuModel::A100_80GB);
        let mut launcher = FakeServiceLauncher::new();
        apply_all(&mut fake, &mut launcher, &plan, root.path()).1.unwrap();
        let (changed, started) = (changes(&fake), launcher.started.len());

        let again = plan_all(&mut fake, &mut launcher, &plan, root.path());
        let lines = again.gpus[0].lines();
        assert_eq!(lines.len(), 4, "{lines:#?}");
        assert!(lines.iter().all(|line| line.starts_with("# GPU 0: MPS daemon and 2 processes of ")));
        let (events, result) = apply_all(&mut fake, &mut launcher, &plan, root.path());
        result.unwrap();
        assert_eq!((changes(&fake), launcher.started.len()), (changed, started));
        assert!(launcher.stopped.is_empty());
        let kinds: Vec<EventKind> = events.iter().map(|e| e.kind).collect();
        assert_eq!(kinds, [vec![EventKind::Layout], vec![EventKind::Kept; 4]].concat());
        assert!(events[0].to_string().starts_with("# GPU 0: MIG layout already as planned: "), "{}", events[0]);

        // A crashed process restarts its instance only.
        launcher.crash(1003);
        let (events, result) = apply_all(&mut fake, &mut launcher, &plan, root.path());
        result.unwrap();
        let count = |kind| events.iter().filter(|e| e.kind == kind).count();
        assert_eq!((count(EventKind::ProcessStop), count(EventKind::DaemonStop)), (1, 1));
        assert_eq!((count(EventKind::DaemonStart), count(EventKind::ProcessStart), count(EventKind::Kept)), (1, 2, 3));
        assert_eq!(launcher.running().len(), 8);
    }

    #[test]
    fn redeploying_stops_the_old_services_before_the_layout_changes() {
        let root = tempfile::tempdir().unwrap();
        let mut fake = FakeNvidiaSmi::new().with_gpu(0, GpuModel::A100_80GB);
        let mut launcher = FakeServiceLauncher::new();
        apply_all(&mut fake, &mut launcher, &plan(vec![gpu(0, 0, LAYOUT_A)]), root.path()).1.unwrap();
        let old = launcher.running();
        let kept_uuid = fake_mig_uuid(0, 1, 0);

        // 3g.40gb@4 stays (and shows its UUID), the rest is replaced.
        let target = plan(vec![gpu(0, 0, &[("3g.40gb", 4), ("3g.40gb", 0)])]);
        let plans = plan_all(&mut fake, &mut launcher, &target, root.path());
        assert_eq!(plans.gpus[0].stops.len(), 4 * 3);
        let lines = plans.gpus[0].lines();
        assert!(lines
            .iter()
            .any(|l| l.contains(&format!("CUDA_VISIBLE_DEVICES={kept_uuid} nvidia-cuda-mps-control -d"))));
        assert!(lines.iter().any(|l| l.contains("'<MIG-UUID of GPU 0 3g.40gb@0>' nvidia-cuda-mps-control -d")));

        fake.log.clear();
        let (events, result) = apply_all(&mut fake, &mut launcher, &target, root.path());
        result.unwrap();
        let first_step = events.iter().position(|e| e.kind == EventKind::Step).unwrap();
        let stops = events.iter().filter(|e| matches!(e.kind, EventKind::ProcessStop | EventKind::DaemonStop));
        assert_eq!(stops.count(), 12);
        assert!(events[..first_step].iter().all(|e| matches!(e.kind, EventKind::ProcessStop | EventKind::DaemonStop)));
        let last_quit = fake.log.iter().rposition(|l| l.starts_with("echo quit")).unwrap();
        let first_destroy = fake.log.iter().position(|l| l.contains(" -dci")).unwrap();
        assert!(last_quit < first_destroy, "{:#?}", fake.log);
        launcher.stopped.sort_unstable();
        assert_eq!(launcher.stopped, old);
        assert_eq!(fake.layout(0), expected(&[("3g.40gb", 4), ("3g.40gb", 0)]));
        let devices: Vec<Option<String>> = fake.daemons().into_iter().map(|(_, device)| device).collect();
        assert_eq!(devices.len(), 2);
        assert!(devices.contains(&Some(kept_uuid)));
        assert_eq!(launcher.running().len(), 4);
    }

    #[test]
    fn without_stopping_its_services_the_driver_refuses_the_change() {
        let root = tempfile::tempdir().unwrap();
        let mut fake = FakeNvidiaSmi::new().with_gpu(0, GpuModel::A100_80GB);
        let mut launcher = FakeServiceLauncher::new();
        apply_all(&mut fake, &mut launcher, &plan(vec![gpu(0, 0, LAYOUT_A)]), root.path()).1.unwrap();
        let mut plans = plan_all(&mut fake, &mut launcher, &plan(vec![gpu(0, 0, LAYOUT_B)]), root.path());
        plans.gpus[0].stops.clear();
        let error = apply_node(&mut fake, &mut launcher, &plans, false, &mut |_| {}).unwrap_err().to_string();
        assert!(error.contains("In use by another client") && error.contains("rolled back"), "{error}");
        assert_eq!(fake.layout(0), expected(LAYOUT_A));
    }

    #[test]
    fn a_failing_process_stops_its_instances_daemon_and_ends_the_apply() {
        let root = tempfile::tempdir().unwrap();
        let mut fake = FakeNvidiaSmi::new().with_gpu(0, GpuModel::A100_80GB);
        let mut launcher = FakeServiceLauncher::new();
        launcher.fail_nth_start(4);
        let (events, result) = apply_all(&mut fake, &mut launcher, &plan(vec![gpu(0, 0, LAYOUT_A)]), root.path());
        let error = result.unwrap_err().to_string();
        assert!(error.starts_with("GPU 0 2g.20gb@0: process 2 of 2 failed: "), "{error}");
        assert!(error.ends_with("stopped its MPS daemon and the 1 process started") && !error.contains('\n'));
        assert_eq!(events.last().unwrap().to_string(), format!("# failed: {error}"));
        // The first instance runs; the second's daemon and process are gone;
        // the others were not started.
        assert_eq!(fake.daemons().len(), 1);
        assert_eq!(launcher.running(), vec![1000, 1001]);
        // Applying again completes it, leaving the first alone.
        let (events, result) = apply_all(&mut fake, &mut launcher, &plan(vec![gpu(0, 0, LAYOUT_A)]), root.path());
        result.unwrap();
        assert_eq!(events.iter().filter(|e| e.kind == EventKind::Kept).count(), 1);
        assert_eq!((fake.daemons().len(), launcher.running().len()), (4, 8));
    }

    #[test]
    fn layouts_alone_are_applied_without_services_and_only_once() {
        let plan = plan(vec![gpu(0, 0, LAYOUT_A), gpu(0, 1, LAYOUT_B)]);
        let mut fake = FakeNvidiaSmi::new().with_gpu(0, GpuModel::A100_80GB).with_gpu(1, GpuModel::A100_80GB);
        let mut launcher = FakeServiceLauncher::new();
        let layouts = plan_node_layouts(&mut fake, &plan, 0).unwrap();
        assert!(layouts.gpus.iter().all(|gpu| gpu.services.is_empty() && gpu.stops.is_empty()));
        assert_eq!(layouts.gpus[0].lines().len(), 4 * 2);
        apply_node(&mut fake, &mut launcher, &layouts, false, &mut |_| {}).unwrap();
        assert_eq!((fake.layout(0), fake.layout(1)), (expected(LAYOUT_A), expected(LAYOUT_B)));
        assert!(fake.daemons().is_empty() && launcher.started.is_empty());
        let again = plan_node_layouts(&mut fake, &plan, 0).unwrap();
        assert!(again.gpus.iter().all(GpuPlan::layout_as_planned));
    }

    #[test]
    fn a_plan_for_another_model_is_refused_before_anything_runs() {
        let root = tempfile::tempdir().unwrap();
        let mut fake = FakeNvidiaSmi::new().with_gpu(0, GpuModel::H100_80GB);
        let mut launcher = FakeServiceLauncher::new();
        let plan = plan(vec![gpu(0, 0, LAYOUT_A)]);
        let error =
            plan_node(&mut fake, &mut launcher, &plan, &commands(), &options(root.path())).unwrap_err().to_string();
        assert_eq!(error, "GPU 0 is an NVIDIA H100 80GB HBM3 (h100-80gb) but the plan wants a100-80gb");
        assert_eq!(
            fake.log,
            vec![format!("nvidia-smi {} --format=csv,noheader,nounits -i 0", crate::installed::QUERY)]
        );
    }

    #[test]
    fn services_without_a_command_are_shown_and_refused_before_anything_changes() {
        let root = tempfile::tempdir().unwrap();
        let mut fake = FakeNvidiaSmi::new().with_gpu(0, GpuModel::A100_80GB);
        let mut launcher = FakeServiceLauncher::new();
        let plan = plan(vec![gpu(0, 0, LAYOUT_B)]);
        let none = ServiceCommands::default();
        let node_plan = plan_node(&mut fake, &mut launcher, &plan, &none, &options(root.path())).unwrap();
        assert_eq!(node_plan.missing_commands, [("resnet50".to_string(), 8)]);
        assert!(node_plan.gpus[0]
            .lines()
            .iter()
            .any(|l| l.contains("sh -c '<command of a workload for resnet50 batch 8>'")));
        let error = apply_node(&mut fake, &mut launcher, &node_plan, false, &mut |_| {}).unwrap_err().to_string();
        assert_eq!(error, "no registered workload for model resnet50 batch 8; nothing was changed");
        assert!(fake.layout(0).is_empty() && launcher.started.is_empty());
    }

    #[test]
    fn without_a_driver_a_dry_run_may_assume_empty_gpus() {
        struct NoDriver;
        impl CommandRunner for NoDriver {
            fn run(&mut self, program: &str, _: &[String]) -> Result<CommandOutput, GpuError> {
                Err(GpuError::ProgramMissing { program: program.to_string() })
            }

            fn run_with(
                &mut self,
                program: &str,
                args: &[String],
                _: &[(String, String)],
                _: Option<&str>,
            ) -> Result<CommandOutput, GpuError> {
                self.run(program, args)
            }
        }
        impl MigDevices for NoDriver {
            fn mig_devices(&mut self, _: u32) -> Result<Vec<MigDevice>, GpuError> {
                Ok(Vec::new())
            }
        }
        let root = tempfile::tempdir().unwrap();
        let plan = plan(vec![gpu(0, 0, LAYOUT_B), gpu(1, 0, LAYOUT_A)]);
        let mut launcher = FakeServiceLauncher::new();
        let error = plan_node(&mut NoDriver, &mut launcher, &plan, &commands(), &options(root.path())).unwrap_err();
        assert!(matches!(error, GpuError::ProgramMissing { .. }), "{error}");
        let dry = NodeOptions { assume_empty_without_driver: true, ..options(root.path()) };
        let node_plan = plan_node(&mut NoDriver, &mut launcher, &plan, &commands(), &dry).unwrap();
        assert!(node_plan.assumed_empty);
        assert_eq!(node_plan.gpus.len(), 1);
        assert_eq!(node_plan.gpus[0].deployment.steps.len(), 3 * 2);
        let other_node = NodeOptions { node: 7, ..dry };
        let error = plan_node(&mut NoDriver, &mut launcher, &plan, &commands(), &other_node).unwrap_err();
        assert_eq!(error.to_string(), "no GPU on node 7");
    }

    /// The fake driver whose NVML lists no MIG device.
    struct NoDevices(FakeNvidiaSmi);

    impl CommandRunner for NoDevices {
        fn run(&mut self, program: &str, args: &[String]) -> Result<CommandOutput, GpuError> {
            self.0.run(program, args)
        }

        fn run_with(
            &mut self,
            program: &str,
            args: &[String],
            env: &[(String, String)],
            stdin: Option<&str>,
        ) -> Result<CommandOutput, GpuError> {
            self.0.run_with(program, args, env, stdin)
        }
    }

    impl MigDevices for NoDevices {
        fn mig_devices(&mut self, _gpu_index: u32) -> Result<Vec<MigDevice>, GpuError> {
            Ok(Vec::new())
        }
    }

    #[test]
    fn an_instance_without_a_mig_device_is_an_error_naming_it() {
        let root = tempfile::tempdir().unwrap();
        let mut node = NoDevices(FakeNvidiaSmi::new().with_gpu(2, GpuModel::A100_80GB));
        let mut launcher = FakeServiceLauncher::new();
        let plans = plan_node(
            &mut node,
            &mut launcher,
            &plan(vec![gpu(0, 2, &[("7g.80gb", 0)])]),
            &commands(),
            &options(root.path()),
        )
        .unwrap();
        let error = apply_node(&mut node, &mut launcher, &plans, false, &mut |_| {}).unwrap_err().to_string();
        assert!(error.starts_with("GPU 2 7g.80gb@0: no MIG device serves it"), "{error}");
        assert!(!node.0.daemon_running() && launcher.started.is_empty());
    }
}
