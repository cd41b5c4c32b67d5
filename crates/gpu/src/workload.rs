//! Running the workloads Tessera measures (for as long as a measurement
//! lasts), stopping them, and reading the throughput they print. Services
//! that outlive Tessera are [`crate::deploy`]'s service launcher's.

#[cfg(any(test, feature = "fake"))]
use std::cell::Cell;
#[cfg(any(test, feature = "fake"))]
use std::collections::VecDeque;
use std::io::Read;
use std::os::unix::process::CommandExt as _;
use std::process::{Child, Command, Stdio};
#[cfg(any(test, feature = "fake"))]
use std::rc::Rc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use regex::Regex;
use tessera_core::BatchTiming;

use crate::error::{one_line, GpuError};
use crate::signal::{signal_group, GroupSignal};

/// What a stopped workload printed and how it ended.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WorkloadOutput {
    /// Its exit status; `None` when it was terminated (by [`RunningWorkload::stop`]
    /// or another signal) rather than exiting on its own.
    pub status: Option<i32>,
    /// Everything it printed on standard output.
    pub stdout: String,
    /// Everything it printed on standard error (for error messages).
    pub stderr: String,
}

impl WorkloadOutput {
    /// `true` unless it exited on its own with a non-zero status.
    pub fn ok(&self) -> bool {
        self.status.is_none_or(|status| status == 0)
    }

    /// The last non-empty line of stderr, else "no error output".
    pub fn last_error_line(&self) -> String {
        self.stderr.lines().map(str::trim).rfind(|line| !line.is_empty()).unwrap_or("no error output").to_string()
    }
}

/// Starts the workloads of a measurement.
pub trait WorkloadRunner {
    /// Starts `command` (a shell command line) with `env` added to the
    /// environment.
    fn start(&mut self, command: &str, env: &[(String, String)]) -> Result<Box<dyn RunningWorkload>, GpuError>;
}

/// A started workload.
pub trait RunningWorkload {
    /// `true` while it has not exited.
    fn is_running(&mut self) -> bool;
    /// Terminates it if it still runs, waits for it and returns its output.
    fn stop(&mut self) -> Result<WorkloadOutput, GpuError>;
}

/// Runs workloads with `sh -c COMMAND` in their own process group, so that
/// stopping one terminates everything it started.
#[derive(Debug, Clone)]
pub struct ShellWorkloadRunner {
    /// How long a workload may take to exit after SIGTERM before it gets
    /// SIGKILL.
    pub grace: Duration,
    /// Added to every workload's environment (before the `env` of
    /// [`WorkloadRunner::start`], which wins).
    pub env: Vec<(String, String)>,
}

impl Default for ShellWorkloadRunner {
    fn default() -> Self {
        Self { grace: Duration::from_secs(10), env: Vec::new() }
    }
}

impl ShellWorkloadRunner {
    /// A runner whose workloads see only `device`.
    pub fn on(device: &DeviceTarget) -> Self {
        Self { env: device.cuda_env(), ..Self::default() }
    }
}

/// The one device a workload sees: a whole GPU, by the index NVML and
/// nvidia-smi give it, or a MIG instance, by its UUID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceTarget {
    /// A whole GPU.
    Gpu(u32),
    /// A MIG compute instance, `MIG-…` as `nvidia-smi -L` and NVML name it.
    Mig(String),
}

impl DeviceTarget {
    /// `CUDA_VISIBLE_DEVICES` naming only this device; for a GPU index also
    /// `CUDA_DEVICE_ORDER=PCI_BUS_ID`, so CUDA numbers GPUs as NVML does.
    pub fn cuda_env(&self) -> Vec<(String, String)> {
        match self {
            DeviceTarget::Gpu(index) => vec![
                ("CUDA_DEVICE_ORDER".to_string(), "PCI_BUS_ID".to_string()),
                ("CUDA_VISIBLE_DEVICES".to_string(), index.to_string()),
            ],
            DeviceTarget::Mig(uuid) => vec![("CUDA_VISIBLE_DEVICES".to_string(), uuid.clone())],
        }
    }
}

impl std::fmt::Display for DeviceTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeviceTarget::Gpu(index) => write!(f, "GPU {index}"),
            DeviceTarget::Mig(uuid) => write!(f, "MIG instance {uuid}"),
        }
    }
}

impl WorkloadRunner for ShellWorkloadRunner {
    fn start(&mut self, command: &str, env: &[(String, String)]) -> Result<Box<dyn RunningWorkload>, GpuError> {
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(command)
            .envs(self.env.iter().chain(env).map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .map_err(|error| GpuError::Workload {
                command: command.to_string(),
                message: format!("cannot start: {error}"),
            })?;
        let stdout = reader(child.stdout.take());
        let stderr = reader(child.stderr.take());
        Ok(Box::new(ShellWorkload {
            command: command.to_string(),
            child,
            stdout: Some(stdout),
            stderr: Some(stderr),
            grace: self.grace,
            output: None,
        }))
    }
}

fn reader(pipe: Option<impl Read + Send + 'static>) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_end(&mut bytes);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

struct ShellWorkload {
    command: String,
    child: Child,
    stdout: Option<JoinHandle<String>>,
    stderr: Option<JoinHandle<String>>,
    grace: Duration,
    output: Option<WorkloadOutput>,
}

impl ShellWorkload {
    /// Signals the whole process group the workload leads; one already
    /// gone is fine.
    fn signal_group(&self, signal: GroupSignal) -> Result<(), GpuError> {
        signal_group(self.child.id(), signal).map(drop)
    }

    fn wait_for(&mut self, limit: Duration) -> Result<Option<std::process::ExitStatus>, GpuError> {
        let deadline = Instant::now() + limit;
        loop {
            let status = self.child.try_wait().map_err(|error| self.error(format!("cannot wait: {error}")))?;
            if status.is_some() || Instant::now() >= deadline {
                return Ok(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn error(&self, message: String) -> GpuError {
        GpuError::Workload { command: self.command.clone(), message }
    }
}

impl RunningWorkload for ShellWorkload {
    fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    fn stop(&mut self) -> Result<WorkloadOutput, GpuError> {
        if let Some(output) = &self.output {
            return Ok(output.clone());
        }
        let mut terminated = false;
        let status = match self.child.try_wait().map_err(|error| self.error(format!("cannot wait: {error}")))? {
            Some(status) => status,
            None => {
                terminated = true;
                self.signal_group(GroupSignal::Terminate)?;
                match self.wait_for(self.grace)? {
                    Some(status) => status,
                    None => {
                        self.signal_group(GroupSignal::Kill)?;
                        self.child.wait().map_err(|error| self.error(format!("cannot wait: {error}")))?
                    }
                }
            }
        };
        // Children that survived the shell would keep the pipes open.
        if terminated {
            self.signal_group(GroupSignal::Kill)?;
        }
        let join = |handle: Option<JoinHandle<String>>| handle.and_then(|h| h.join().ok()).unwrap_or_default();
        let stdout = join(self.stdout.take());
        let stderr = join(self.stderr.take());
        // A workload that handles SIGTERM by exiting 128+15 was terminated too.
        let code = status.code().filter(|&code| !(terminated && code == 143));
        let output = WorkloadOutput { status: code, stdout, stderr };
        self.output = Some(output.clone());
        Ok(output)
    }
}

impl Drop for ShellWorkload {
    fn drop(&mut self) {
        if self.output.is_none() {
            let _ = self.stop();
        }
    }
}

/// The line a workload prints (last) to report its throughput.
pub const THROUGHPUT_PREFIX: &str = "tessera:throughput=";

/// A workload's throughput (samples/s) from what it printed. Without
/// `regex`, the last line `tessera:throughput=<samples/s>`; with one, its
/// first capture group in the last match. `command` names the workload in
/// errors.
pub fn parse_throughput(command: &str, stdout: &str, regex: Option<&str>) -> Result<f64, GpuError> {
    let error = |message: String| GpuError::Workload { command: command.to_string(), message };
    let (text, how) = match regex {
        None => (
            stdout.lines().rev().find_map(|line| line.trim().strip_prefix(THROUGHPUT_PREFIX)).map(str::trim),
            format!("no line `{THROUGHPUT_PREFIX}<samples/s>` in its output"),
        ),
        Some(pattern) => {
            let re =
                Regex::new(pattern).map_err(|e| error(format!("throughput regex '{pattern}': {}", one_line(&e))))?;
            if re.captures_len() < 2 {
                return Err(error(format!("throughput regex '{pattern}' has no capture group")));
            }
            (
                re.captures_iter(stdout).last().and_then(|c| c.get(1)).map(|m| m.as_str().trim()),
                format!("throughput regex '{pattern}' matches nothing in its output"),
            )
        }
    };
    let text = text.ok_or_else(|| error(how))?;
    match text.parse::<f64>() {
        Ok(value) if value.is_finite() && value >= 0.0 => Ok(value),
        _ => Err(error(format!("throughput '{text}' is not a non-negative number of samples/s"))),
    }
}

/// The lines a workload may print (the last of each counts) to report
/// what it measured of its batch times beside their mean: the median and
/// 99th percentile run time of one batch, and a busy process's time
/// between batches, each in ms.
pub const TIMING_PREFIXES: [&str; 3] =
    ["tessera:latency_p50_ms=", "tessera:latency_p99_ms=", "tessera:dispatch_gap_ms="];

/// What a workload printed of its batch times ([`TIMING_PREFIXES`]);
/// nothing for a workload that prints none of those lines. `command`
/// names the workload in errors.
pub fn parse_timing(command: &str, stdout: &str) -> Result<BatchTiming, GpuError> {
    let error = |message: String| GpuError::Workload { command: command.to_string(), message };
    let last = |prefix: &str| -> Result<Option<f64>, GpuError> {
        match stdout.lines().rev().find_map(|line| line.trim().strip_prefix(prefix)).map(str::trim) {
            None => Ok(None),
            Some(text) => match text.parse::<f64>() {
                Ok(value) if value.is_finite() => Ok(Some(value)),
                _ => Err(error(format!("'{prefix}{text}': not a number of ms"))),
            },
        }
    };
    let [p50, p99, gap] = TIMING_PREFIXES;
    let timing = BatchTiming {
        latency_p50_ms: last(p50)?,
        latency_p99_ms: last(p99)?,
        dispatch_gap_ms: last(gap)?,
        serving_slowdown: None,
    };
    timing.check().map_err(|problem| error(problem.to_string()))?;
    Ok(timing)
}

/// Hands out scripted outputs in order, one per started workload, and
/// records what was started. Starting more workloads than scripted fails.
#[cfg(any(test, feature = "fake"))]
#[derive(Debug, Clone, Default)]
pub struct FakeWorkloadRunner {
    outputs: VecDeque<WorkloadOutput>,
    /// `(command, env)` of every workload started, in order.
    pub started: Vec<(String, Vec<(String, String)>)>,
    running: Rc<Cell<usize>>,
}

#[cfg(any(test, feature = "fake"))]
impl FakeWorkloadRunner {
    /// Scripts the outputs of the next workloads started.
    pub fn new(outputs: impl IntoIterator<Item = WorkloadOutput>) -> Self {
        Self { outputs: outputs.into_iter().collect(), ..Self::default() }
    }

    /// A successful output printing `tessera:throughput=<rps>`.
    pub fn throughput(rps: f64) -> WorkloadOutput {
        WorkloadOutput {
            status: None,
            stdout: format!("warming up\n{THROUGHPUT_PREFIX}{rps}\n"),
            stderr: String::new(),
        }
    }

    /// How many started workloads have not been stopped.
    pub fn running(&self) -> usize {
        self.running.get()
    }
}

#[cfg(any(test, feature = "fake"))]
impl WorkloadRunner for FakeWorkloadRunner {
    fn start(&mut self, command: &str, env: &[(String, String)]) -> Result<Box<dyn RunningWorkload>, GpuError> {
        let output = self.outputs.pop_front().ok_or_else(|| GpuError::Workload {
            command: command.to_string(),
            message: "cannot start: the fake workload runner has no scripted output left".to_string(),
        })?;
        self.started.push((command.to_string(), env.to_vec()));
        self.running.set(self.running.get() + 1);
        Ok(Box::new(FakeWorkload { output, running: Some(Rc::clone(&self.running)) }))
    }
}

#[cfg(any(test, feature = "fake"))]
struct FakeWorkload {
    output: WorkloadOutput,
    running: Option<Rc<Cell<usize>>>,
}

#[cfg(any(test, feature = "fake"))]
impl Drop for FakeWorkload {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

#[cfg(any(test, feature = "fake"))]
impl RunningWorkload for FakeWorkload {
    /// A workload scripted with an exit status has exited on its own.
    fn is_running(&mut self) -> bool {
        self.running.is_some() && self.output.status.is_none()
    }

    fn stop(&mut self) -> Result<WorkloadOutput, GpuError> {
        if let Some(running) = self.running.take() {
            running.set(running.get() - 1);
        }
        Ok(self.output.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throughput_is_the_last_tessera_line() {
        let out = "tessera:throughput=10\nstep 5\n  tessera:throughput=12.5 \nbye\n";
        assert_eq!(parse_throughput("w", out, None).unwrap(), 12.5);
        let error = parse_throughput("python train.py", "nothing here\n", None).unwrap_err().to_string();
        assert!(error.contains("python train.py") && !error.contains('\n'), "{error}");
        assert!(parse_throughput("w", "tessera:throughput=fast\n", None).is_err());
        assert!(parse_throughput("w", "tessera:throughput=-1\n", None).is_err());
    }

    #[test]
    fn timing_lines_are_optional_and_checked() {
        assert!(parse_timing("w", "tessera:throughput=10\n").unwrap().is_empty());
        let out = "tessera:latency_p50_ms=1.0\ntessera:latency_p50_ms=1.5\n tessera:latency_p99_ms=1.75\n\
                   tessera:dispatch_gap_ms=0.01\n";
        let timing = parse_timing("w", out).unwrap();
        assert_eq!(
            (timing.latency_p50_ms, timing.latency_p99_ms, timing.dispatch_gap_ms),
            (Some(1.5), Some(1.75), Some(0.01))
        );
        let error = parse_timing("python serve.py", "tessera:latency_p99_ms=slow\n").unwrap_err().to_string();
        assert!(error.contains("python serve.py") && error.contains("latency_p99_ms=slow"), "{error}");
        let crossed = parse_timing("w", "tessera:latency_p50_ms=2\ntessera:latency_p99_ms=1\n").unwrap_err();
        assert!(crossed.to_string().contains("no smaller than latency_p50_ms"), "{crossed}");
    }

    #[test]
    fn a_regex_takes_the_first_group_of_the_last_match() {
        let out = "it/s: 3.0 (img 24.0)\nit/s: 4.0 (img 32.0)\n";
        assert_eq!(parse_throughput("w", out, Some(r"img ([0-9.]+)")).unwrap(), 32.0);
        let error = parse_throughput("bench.sh", out, Some(r"tok/s ([0-9.]+)")).unwrap_err().to_string();
        assert!(error.contains("bench.sh") && error.contains("matches nothing"), "{error}");
        assert!(parse_throughput("w", out, Some(r"img [0-9.]+")).unwrap_err().to_string().contains("no capture group"));
        assert!(parse_throughput("w", out, Some(r"(")).unwrap_err().to_string().contains("regex"));
    }

    #[test]
    fn the_shell_launcher_captures_output_and_exit_status() {
        let mut launcher = ShellWorkloadRunner::default();
        let env = [("TESSERA_TEST_X".to_string(), "7".to_string())];
        let mut done = launcher.start("echo x=$TESSERA_TEST_X; echo oops >&2; exit 3", &env).unwrap();
        let start = Instant::now();
        while done.is_running() && start.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        let output = done.stop().unwrap();
        assert_eq!((output.status, output.stdout.as_str()), (Some(3), "x=7\n"));
        assert!(!output.ok());
        assert_eq!(output.last_error_line(), "oops");
    }

    #[test]
    fn stopping_terminates_a_running_workload_and_its_children() {
        let mut launcher = ShellWorkloadRunner::default();
        let mut running = launcher.start("echo tessera:throughput=5; sleep 30 & sleep 30; echo never", &[]).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        assert!(running.is_running());
        let start = Instant::now();
        let output = running.stop().unwrap();
        assert!(start.elapsed() < Duration::from_secs(5), "stop took {:?}", start.elapsed());
        assert_eq!(output.status, None);
        assert!(output.ok());
        assert_eq!(parse_throughput("w", &output.stdout, None).unwrap(), 5.0);
    }
}
