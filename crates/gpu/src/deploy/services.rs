//! The MPS side of a deployment: one MPS control daemon per planned MIG
//! instance, and the processes of the workload serving it, started
//! detached so they outlive Tessera.
//!
//! Each instance has a directory `<root>/gpu<G>-<PROFILE>-<START>` holding
//! `pipe/` and `log/` (its daemon's `CUDA_MPS_PIPE_DIRECTORY` and
//! `CUDA_MPS_LOG_DIRECTORY`), `proc<k>.log` (process k's output), `pids`
//! (the processes' pids, one a line, written atomically) and `command` (the
//! command line they run).
//!
//! A daemon runs for an instance when `echo get_server_list |
//! nvidia-cuda-mps-control` with its pipe directory answers: that asks the
//! daemon itself, through the control socket in the pipe directory, rather
//! than trusting files a crash may have left. An instance runs as planned
//! when its daemon answers and every recorded process runs, as many as
//! planned, with the planned command; such an instance is left alone.

use std::path::{Path, PathBuf};

use tessera_core::text::{count, few_named};
use tessera_core::{InstanceAssignment, SharedInstance};
use tessera_store::write_atomic;

use crate::error::GpuError;
use crate::measure::MpsDirs;
use crate::mps::{daemon_answers, quit_daemon, start_daemon, MPS_CONTROL};
use crate::runner::{shell_word, CommandRunner};
use crate::workload::DeviceTarget;

use super::service_launcher::ServiceLauncher;

/// Where one MIG instance's MPS daemon and processes keep their state.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct InstanceDir {
    /// GPU index on the node.
    pub gpu: u32,
    /// Profile of the instance.
    pub profile: String,
    /// Start memory slice of the instance.
    pub start: u8,
    /// `<root>/gpu<G>-<PROFILE>-<START>`.
    pub path: PathBuf,
}

/// What runs on an instance, from its directory and the daemon.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct InstanceState {
    /// `true` when its MPS control daemon answers.
    pub daemon: bool,
    /// The pids recorded by the last deployment.
    pub pids: Vec<u32>,
    /// Those of them that run.
    pub alive: Vec<u32>,
    /// The command line they were started with.
    pub command: Option<String>,
}

impl InstanceState {
    /// `true` when the daemon answers and `procs` recorded processes run,
    /// and no other recorded one has ended.
    pub fn runs(&self, procs: u32) -> bool {
        self.daemon && self.alive.len() == self.pids.len() && self.pids.len() == procs as usize
    }
}

impl InstanceDir {
    /// The directory of instance `profile@start` of GPU `gpu` under `root`.
    pub fn new(root: &Path, gpu: u32, profile: &str, start: u8) -> Self {
        let path = root.join(format!("gpu{gpu}-{profile}-{start}"));
        Self { gpu, profile: profile.to_string(), start, path }
    }

    /// Every instance directory of GPU `gpu` under `root`, sorted; none when
    /// `root` does not exist.
    pub fn scan(root: &Path, gpu: u32) -> Result<Vec<InstanceDir>, GpuError> {
        let error =
            |e: std::io::Error| GpuError::PlanGpu { gpu, message: format!("cannot list {}: {e}", root.display()) };
        let entries = match std::fs::read_dir(root) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(error(e)),
        };
        let prefix = format!("gpu{gpu}-");
        let mut dirs = Vec::new();
        for entry in entries {
            let entry = entry.map_err(error)?;
            let name = entry.file_name();
            let Some((profile, start)) = name.to_str().and_then(|n| n.strip_prefix(&prefix)?.rsplit_once('-')) else {
                continue;
            };
            if let (Ok(start), true) = (start.parse::<u8>(), entry.path().is_dir()) {
                dirs.push(InstanceDir::new(root, gpu, profile, start));
            }
        }
        dirs.sort();
        Ok(dirs)
    }

    /// `PROFILE@START`.
    pub fn instance(&self) -> String {
        format!("{}@{}", self.profile, self.start)
    }

    /// Its MPS directories, for the MIG device `device` (a UUID or a
    /// placeholder) or, without one, for talking to its daemon only.
    pub fn mps(&self, device: Option<&str>) -> MpsDirs {
        MpsDirs {
            pipe_dir: self.path.join("pipe"),
            log_dir: self.path.join("log"),
            device: device.map(|uuid| DeviceTarget::Mig(uuid.to_string())),
        }
    }

    /// The output of process `k`.
    pub fn process_log(&self, k: u32) -> PathBuf {
        self.path.join(format!("proc{k}.log"))
    }

    fn error(&self, message: String) -> GpuError {
        GpuError::Service { gpu: self.gpu, instance: self.instance(), message }
    }

    /// What runs there: the daemon asked through `runner`, the recorded
    /// processes through `launcher`.
    pub fn state(
        &self,
        runner: &mut dyn CommandRunner,
        launcher: &mut dyn ServiceLauncher,
    ) -> Result<InstanceState, GpuError> {
        let daemon = daemon_answers(runner, &self.mps(None).env())?;
        let pids_file = self.path.join("pids");
        let pids = match std::fs::read_to_string(&pids_file) {
            Ok(text) => text
                .lines()
                .enumerate()
                .filter(|(_, line)| !line.trim().is_empty())
                .map(|(n, line)| {
                    line.trim().parse::<u32>().map_err(|_| {
                        self.error(format!("{} line {}: '{}' is not a pid", pids_file.display(), n + 1, line.trim()))
                    })
                })
                .collect::<Result<Vec<_>, _>>()?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(self.error(format!("cannot read {}: {e}", pids_file.display()))),
        };
        let alive = pids.iter().copied().filter(|&pid| launcher.is_alive(pid)).collect();
        let command = std::fs::read_to_string(self.path.join("command")).ok();
        Ok(InstanceState { daemon, pids, alive, command })
    }

    /// Records the pids of its processes and the command they run.
    fn record(&self, pids: &[u32], command: &str) -> Result<(), String> {
        let text: String = pids.iter().map(|pid| format!("{pid}\n")).collect();
        write_atomic(&self.path.join("command"), command.as_bytes())
            .and_then(|()| write_atomic(&self.path.join("pids"), text.as_bytes()))
            .map_err(|e| format!("cannot record its pids: {e}"))
    }
}

/// A planned instance's service: its MPS daemon and `procs` processes of
/// `command`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceService {
    /// Its directory.
    pub dir: InstanceDir,
    /// The shell command line every process runs.
    pub command: String,
    /// How many processes.
    pub procs: u32,
    /// What it serves, in words: `resnet50 batch 8`, or `a serialized
    /// executor of a, b, c`.
    pub serves: String,
}

impl InstanceService {
    /// The service of the plan's `instance` on GPU `gpu`, under `root`.
    pub fn new(root: &Path, gpu: u32, instance: &InstanceAssignment, command: String) -> Self {
        Self {
            dir: InstanceDir::new(root, gpu, &instance.profile, instance.start),
            command,
            procs: instance.procs,
            serves: format!("{} batch {}", instance.model, instance.batch),
        }
    }

    /// The one executor process of the plan's shared instance `shared` on
    /// GPU `gpu`, under `root`, running `command` (the multi-model server
    /// told its members).
    pub fn shared(root: &Path, gpu: u32, shared: &SharedInstance, command: String) -> Self {
        let services: Vec<&str> = shared.members.iter().map(|m| m.service.as_str()).collect();
        Self {
            dir: InstanceDir::new(root, gpu, &shared.profile, shared.start),
            command,
            procs: 1,
            serves: format!("a {} executor of {}", shared.sharing, few_named(&services)),
        }
    }

    /// `true` when `state` is this service running as planned.
    fn runs_in(&self, state: &InstanceState) -> bool {
        state.runs(self.procs) && state.command.as_deref() == Some(self.command.as_str())
    }

    /// The MIG device of a placeholder: `<MIG-UUID of GPU g PROFILE@START>`.
    fn placeholder(&self) -> String {
        format!("<MIG-UUID of GPU {} {}>", self.dir.gpu, self.dir.instance())
    }

    /// `mkdir -p DIR/pipe DIR/log`.
    pub fn mkdir_line(&self) -> String {
        let mps = self.dir.mps(None);
        format!(
            "mkdir -p {} {}",
            shell_word(&mps.pipe_dir.display().to_string()),
            shell_word(&mps.log_dir.display().to_string())
        )
    }

    /// `ENV nvidia-cuda-mps-control -d`, for the MIG device `uuid` (a
    /// placeholder when `None`).
    pub fn daemon_line(&self, uuid: Option<&str>) -> String {
        format!("{} {MPS_CONTROL} -d", self.env_words(uuid))
    }

    /// `ENV sh -c 'COMMAND' >>DIR/proc<k>.log 2>&1 &`.
    pub fn process_line(&self, uuid: Option<&str>, k: u32) -> String {
        let log = shell_word(&self.dir.process_log(k).display().to_string());
        format!("{} sh -c {} >>{log} 2>&1 &", self.env_words(uuid), shell_word(&self.command))
    }

    fn env(&self, uuid: Option<&str>) -> Vec<(String, String)> {
        let placeholder = self.placeholder();
        self.dir.mps(Some(uuid.unwrap_or(&placeholder))).env()
    }

    fn env_words(&self, uuid: Option<&str>) -> String {
        env_words(&self.env(uuid))
    }
}

/// `K=V K=V`, each value quoted for the shell where needed.
fn env_words(env: &[(String, String)]) -> String {
    env.iter().map(|(key, value)| format!("{key}={}", shell_word(value))).collect::<Vec<_>>().join(" ")
}

/// Something of an earlier deployment to stop before a GPU changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// A recorded process (and its process group).
    Process {
        /// Its instance's directory.
        dir: InstanceDir,
        /// Its pid.
        pid: u32,
    },
    /// An instance's MPS control daemon.
    Daemon {
        /// Its instance's directory.
        dir: InstanceDir,
    },
}

impl Stop {
    /// The instance directory it belongs to.
    pub fn dir(&self) -> &InstanceDir {
        match self {
            Stop::Process { dir, .. } | Stop::Daemon { dir } => dir,
        }
    }

    /// The command that stops it: `kill -TERM -- -PID` (SIGKILL follows
    /// after a grace period) or `echo quit | ENV nvidia-cuda-mps-control`.
    pub fn line(&self) -> String {
        match self {
            Stop::Process { pid, .. } => format!("kill -TERM -- -{pid}"),
            Stop::Daemon { dir } => format!("echo quit | {} {MPS_CONTROL}", env_words(&dir.mps(None).env())),
        }
    }

    /// Runs it.
    pub fn run(&self, runner: &mut dyn CommandRunner, launcher: &mut dyn ServiceLauncher) -> Result<(), GpuError> {
        let dir = self.dir();
        let result = match self {
            Stop::Process { pid, .. } => launcher.stop(*pid),
            Stop::Daemon { dir } => quit_daemon(runner, &dir.mps(None).env()),
        };
        result.map_err(|e| dir.error(format!("`{}` failed: {e}", self.line())))
    }
}

/// What becomes of a planned instance's service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Service {
    /// It runs as planned: left alone.
    Keep {
        /// The service.
        service: InstanceService,
        /// Its running processes.
        pids: Vec<u32>,
    },
    /// Its daemon and processes are started.
    Start {
        /// The service.
        service: InstanceService,
        /// The instance's MIG UUID when it exists already (else it shows as
        /// a placeholder until the layout is applied).
        uuid: Option<String>,
        /// What runs there now (stopped first).
        state: InstanceState,
    },
}

impl Service {
    /// The service.
    pub fn service(&self) -> &InstanceService {
        match self {
            Service::Keep { service, .. } | Service::Start { service, .. } => service,
        }
    }

    /// What a dry run prints: the commands that start it, or why it is
    /// left alone.
    pub fn lines(&self) -> Vec<String> {
        match self {
            Service::Keep { service, pids } => {
                vec![format!("# GPU {}: {}", service.dir.gpu, kept_detail(service, pids))]
            }
            Service::Start { service, uuid, .. } => {
                let uuid = uuid.as_deref();
                let mut lines = vec![service.mkdir_line(), service.daemon_line(uuid)];
                lines.extend((0..service.procs).map(|k| service.process_line(uuid, k)));
                lines
            }
        }
    }
}

/// `MPS daemon and N processes of PROFILE@START already running (pids …), left alone`.
pub(crate) fn kept_detail(service: &InstanceService, pids: &[u32]) -> String {
    let list: Vec<String> = pids.iter().map(u32::to_string).collect();
    format!(
        "MPS daemon and {} of {} already running (pids {}), left alone",
        count(pids.len(), "process"),
        service.dir.instance(),
        list.join(", ")
    )
}

/// The stops and services of one GPU: `services` are the planned ones (in
/// the plan's order); every instance directory of the GPU under `root` is
/// looked at. When `layout_changes`, everything that runs on the GPU is
/// stopped (the driver would refuse to destroy instances in use) and every
/// service started again; otherwise a service that runs as planned is kept
/// and the rest (including what runs for instances no longer planned) is
/// stopped and started. `uuid_of` gives the MIG UUID of a planned instance
/// that exists already and stays.
pub fn plan_services(
    runner: &mut dyn CommandRunner,
    launcher: &mut dyn ServiceLauncher,
    root: &Path,
    gpu: u32,
    services: Vec<InstanceService>,
    layout_changes: bool,
    uuid_of: &dyn Fn(&InstanceDir) -> Option<String>,
) -> Result<(Vec<Stop>, Vec<Service>), GpuError> {
    let mut dirs = InstanceDir::scan(root, gpu)?;
    for service in &services {
        if !dirs.contains(&service.dir) {
            dirs.push(service.dir.clone());
        }
    }
    let mut stops = Vec::new();
    let mut states = Vec::new();
    for dir in dirs {
        let state = dir.state(runner, launcher)?;
        let planned = services.iter().find(|service| service.dir == dir);
        let keep = !layout_changes && planned.is_some_and(|service| service.runs_in(&state));
        if !keep {
            stops.extend(state.alive.iter().map(|&pid| Stop::Process { dir: dir.clone(), pid }));
            if state.daemon {
                stops.push(Stop::Daemon { dir: dir.clone() });
            }
        }
        states.push((dir, state, keep));
    }
    let services = services
        .into_iter()
        .map(|service| {
            let position =
                states.iter().position(|(dir, _, _)| *dir == service.dir).expect("every planned dir is looked at");
            let (_, state, keep) = states.swap_remove(position);
            if keep {
                Service::Keep { pids: state.alive, service }
            } else {
                Service::Start { uuid: uuid_of(&service.dir), service, state }
            }
        })
        .collect();
    Ok((stops, services))
}

/// Something [`start`] did, for the output and the journal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Started {
    /// The directories were created (the line is `mkdir -p …`).
    Directories(String),
    /// The daemon started (the line is its command).
    Daemon(String),
    /// A process started (its command line and pid).
    Process(String, u32),
}

/// Starts `service` on the MIG device `uuid`: creates its directories,
/// starts its daemon and processes and records their pids, reporting each
/// to `on_started`. When something fails it stops what it started there
/// (processes, then the daemon) and returns one line saying what failed and
/// what was stopped.
pub fn start(
    runner: &mut dyn CommandRunner,
    launcher: &mut dyn ServiceLauncher,
    service: &InstanceService,
    uuid: &str,
    on_started: &mut dyn FnMut(Started),
) -> Result<(), GpuError> {
    let dir = &service.dir;
    let mps = dir.mps(Some(uuid));
    for folder in [&mps.pipe_dir, &mps.log_dir] {
        std::fs::create_dir_all(folder).map_err(|e| dir.error(format!("cannot create {}: {e}", folder.display())))?;
    }
    on_started(Started::Directories(service.mkdir_line()));
    let env = mps.env();
    start_daemon(runner, &env).map_err(|e| dir.error(format!("cannot start its MPS daemon: {e}")))?;
    on_started(Started::Daemon(service.daemon_line(Some(uuid))));
    let mut pids = Vec::new();
    let Err(failure) = start_processes(launcher, service, uuid, &env, &mut pids, on_started) else {
        return Ok(());
    };
    let mut cleanup: Vec<String> = Vec::new();
    for &pid in &pids {
        if let Err(error) = launcher.stop(pid) {
            cleanup.push(format!("cannot stop pid {pid}: {error}"));
        }
    }
    if let Err(error) = quit_daemon(runner, &env) {
        cleanup.push(format!("cannot quit its MPS daemon: {error}"));
    }
    let _ = dir.record(&[], &service.command);
    let outcome = if cleanup.is_empty() {
        format!("stopped its MPS daemon and the {} started", count(pids.len(), "process"))
    } else {
        cleanup.join("; ")
    };
    Err(dir.error(format!("{failure}; {outcome}")))
}

/// Starts `service`'s processes, recording the pids (into `pids` too) as
/// they start; on failure says which process failed.
fn start_processes(
    launcher: &mut dyn ServiceLauncher,
    service: &InstanceService,
    uuid: &str,
    env: &[(String, String)],
    pids: &mut Vec<u32>,
    on_started: &mut dyn FnMut(Started),
) -> Result<(), String> {
    let dir = &service.dir;
    dir.record(pids, &service.command)?;
    for k in 0..service.procs {
        let failed = |error: String| format!("process {} of {} failed: {error}", k + 1, service.procs);
        let pid = launcher
            .start_detached(&service.command, env, &dir.process_log(k))
            .map_err(|error| failed(error.to_string()))?;
        pids.push(pid);
        dir.record(pids, &service.command).map_err(failed)?;
        on_started(Started::Process(service.process_line(Some(uuid), k), pid));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deploy::service_launcher::FakeServiceLauncher;
    use crate::fake::FakeNvidiaSmi;

    fn service(root: &Path, gpu: u32, profile: &str, start: u8, procs: u32) -> InstanceService {
        InstanceService {
            dir: InstanceDir::new(root, gpu, profile, start),
            command: "python serve.py --batch 8".to_string(),
            procs,
            serves: "resnet50 batch 8".to_string(),
        }
    }

    #[test]
    fn renders_the_commands_of_a_service() {
        let service = service(Path::new("/tmp/tessera-mps"), 2, "3g.40gb", 4, 2);
        let lines = Service::Start { service: service.clone(), uuid: None, state: InstanceState::default() }.lines();
        let dir = "/tmp/tessera-mps/gpu2-3g.40gb-4";
        let env = format!(
            "CUDA_MPS_PIPE_DIRECTORY={dir}/pipe CUDA_MPS_LOG_DIRECTORY={dir}/log CUDA_VISIBLE_DEVICES='<MIG-UUID of GPU 2 3g.40gb@4>'"
        );
        assert_eq!(
            lines,
            vec![
                format!("mkdir -p {dir}/pipe {dir}/log"),
                format!("{env} nvidia-cuda-mps-control -d"),
                format!("{env} sh -c 'python serve.py --batch 8' >>{dir}/proc0.log 2>&1 &"),
                format!("{env} sh -c 'python serve.py --batch 8' >>{dir}/proc1.log 2>&1 &"),
            ]
        );
        let known =
            Service::Start { service: service.clone(), uuid: Some("MIG-abc".into()), state: InstanceState::default() }
                .lines();
        assert!(known[1].contains("CUDA_VISIBLE_DEVICES=MIG-abc nvidia"), "{}", known[1]);
        let kept = Service::Keep { service, pids: vec![7, 8] }.lines();
        assert_eq!(
            kept,
            vec!["# GPU 2: MPS daemon and 2 processes of 3g.40gb@4 already running (pids 7, 8), left alone"]
        );
        let stop = Stop::Daemon { dir: InstanceDir::new(Path::new("/m"), 0, "1g.10gb", 3) };
        assert_eq!(
            stop.line(),
            "echo quit | CUDA_MPS_PIPE_DIRECTORY=/m/gpu0-1g.10gb-3/pipe CUDA_MPS_LOG_DIRECTORY=/m/gpu0-1g.10gb-3/log nvidia-cuda-mps-control"
        );
    }

    #[test]
    fn scans_only_the_gpus_own_instance_directories() {
        let root = tempfile::tempdir().unwrap();
        for name in ["gpu1-3g.40gb-4", "gpu1-1g.10gb-0", "gpu10-1g.10gb-0", "gpu1-junk", "notes"] {
            std::fs::create_dir(root.path().join(name)).unwrap();
        }
        std::fs::write(root.path().join("gpu1-2g.20gb-2"), "a file").unwrap();
        let dirs = InstanceDir::scan(root.path(), 1).unwrap();
        let names: Vec<String> = dirs.iter().map(InstanceDir::instance).collect();
        assert_eq!(names, vec!["1g.10gb@0", "3g.40gb@4"]);
        assert!(InstanceDir::scan(&root.path().join("missing"), 1).unwrap().is_empty());
    }

    #[test]
    fn a_bad_pids_file_is_an_error_naming_it() {
        let root = tempfile::tempdir().unwrap();
        let dir = InstanceDir::new(root.path(), 0, "1g.10gb", 0);
        std::fs::create_dir_all(&dir.path).unwrap();
        std::fs::write(dir.path.join("pids"), "12\nnope\n").unwrap();
        let error = dir.state(&mut FakeNvidiaSmi::new(), &mut FakeServiceLauncher::new()).unwrap_err().to_string();
        assert!(error.starts_with("GPU 0 1g.10gb@0: ") && error.contains("pids line 2: 'nope'"), "{error}");
    }

    #[test]
    fn starts_records_and_keeps_a_service() {
        let root = tempfile::tempdir().unwrap();
        let (mut smi, mut launcher) = (FakeNvidiaSmi::new(), FakeServiceLauncher::new());
        let service = service(root.path(), 0, "3g.40gb", 4, 2);
        let mut seen = Vec::new();
        start(&mut smi, &mut launcher, &service, "MIG-x", &mut |s| seen.push(s)).unwrap();
        assert_eq!(seen.len(), 4);
        assert_eq!(seen[3], Started::Process(service.process_line(Some("MIG-x"), 1), 1001));
        let state = service.dir.state(&mut smi, &mut launcher).unwrap();
        assert!(state.daemon && state.pids == vec![1000, 1001] && state.alive == state.pids, "{state:?}");
        assert!(service.dir.mps(None).pipe_dir.is_dir() && service.dir.mps(None).log_dir.is_dir());
        assert_eq!(launcher.started[0].log, root.path().join("gpu0-3g.40gb-4/proc0.log"));
        assert!(launcher.started[0].env.contains(&("CUDA_VISIBLE_DEVICES".into(), "MIG-x".into())));

        let uuid_of = |_: &InstanceDir| Some("MIG-x".to_string());
        let (stops, services) =
            plan_services(&mut smi, &mut launcher, root.path(), 0, vec![service.clone()], false, &uuid_of).unwrap();
        assert!(stops.is_empty());
        assert_eq!(services, vec![Service::Keep { service: service.clone(), pids: vec![1000, 1001] }]);

        // Another command, a crashed process, or a layout change: stop and start.
        let other = InstanceService { command: "python other.py".into(), ..service.clone() };
        let (stops, services) =
            plan_services(&mut smi, &mut launcher, root.path(), 0, vec![other], false, &uuid_of).unwrap();
        assert_eq!(stops.len(), 3, "{stops:?}");
        assert!(matches!(services[0], Service::Start { .. }));
        launcher.crash(1001);
        let (stops, _) =
            plan_services(&mut smi, &mut launcher, root.path(), 0, vec![service.clone()], false, &uuid_of).unwrap();
        assert_eq!(
            stops,
            vec![Stop::Process { dir: service.dir.clone(), pid: 1000 }, Stop::Daemon { dir: service.dir.clone() }]
        );
    }

    #[test]
    fn a_failing_process_stops_what_the_instance_started() {
        let root = tempfile::tempdir().unwrap();
        let (mut smi, mut launcher) = (FakeNvidiaSmi::new(), FakeServiceLauncher::new());
        let service = service(root.path(), 1, "2g.20gb", 2, 3);
        launcher.fail_nth_start(3);
        let error = start(&mut smi, &mut launcher, &service, "MIG-y", &mut |_| {}).unwrap_err().to_string();
        assert_eq!(
            error,
            "GPU 1 2g.20gb@2: process 3 of 3 failed: workload `python serve.py --batch 8`: cannot start: injected failure; \
             stopped its MPS daemon and the 2 processes started"
        );
        assert!(!smi.daemon_running() && launcher.running().is_empty());
        assert!(service.dir.state(&mut smi, &mut launcher).unwrap().pids.is_empty());

        // A daemon that cannot start starts no process.
        smi.run_with(MPS_CONTROL, &["-d".into()], &service.dir.mps(None).env(), None).unwrap();
        let error = start(&mut smi, &mut launcher, &service, "MIG-y", &mut |_| {}).unwrap_err().to_string();
        assert!(error.starts_with("GPU 1 2g.20gb@2: cannot start its MPS daemon") && error.contains("already running"));
        assert_eq!(launcher.started.len(), 2);
    }
}
