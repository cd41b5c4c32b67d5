//! Measuring workloads on a GPU: alone (throughput, utilisation, memory)
//! and colocated under MPS (each one's throughput).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use tessera_core::BatchTiming;

use crate::error::GpuError;
use crate::mps::{quit_daemon, start_daemon, MPS_CONTROL};
use crate::runner::CommandRunner;
use crate::sampler::{GpuSample, GpuSampler};
use crate::workload::{parse_throughput, parse_timing, DeviceTarget, RunningWorkload, WorkloadOutput, WorkloadRunner};

/// Bytes per GB (decimal, as the store's `memory_gb`).
const BYTES_PER_GB: f64 = 1e9;

/// A workload's system metrics measured alone on a GPU.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SystemMetrics {
    /// Its throughput, samples/s.
    pub exclusive_rps: f64,
    /// Mean SM utilisation over the samples, %.
    pub sm_util_pct: f64,
    /// Mean memory-controller utilisation over the samples, %.
    pub mem_util_pct: f64,
    /// Peak device memory used over the samples, GB (10⁹ bytes).
    pub peak_memory_gb: f64,
    /// How many samples were taken.
    pub samples: usize,
}

/// One workload of a measurement: its command line and how its throughput
/// is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeasuredCommand {
    /// The shell command line.
    pub command: String,
    /// A regular expression whose first group is the throughput (default:
    /// the `tessera:throughput=` line, see `workload::parse_throughput`).
    pub throughput_regex: Option<String>,
}

/// What [`measure_alone`] runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AloneOptions {
    /// The workload.
    pub workload: MeasuredCommand,
    /// How long it runs.
    pub duration: Duration,
    /// How often the GPU is sampled (at least every millisecond).
    pub interval: Duration,
}

impl AloneOptions {
    /// How many samples a full run takes.
    pub fn samples(&self) -> u64 {
        let interval = self.interval.max(Duration::from_millis(1));
        u64::try_from(self.duration.as_nanos().div_ceil(interval.as_nanos()).max(1)).unwrap_or(u64::MAX)
    }
}

/// Runs the workload alone for `options.duration`, sampling the GPU every
/// `options.interval` (at least once; `on_sample(n, sample)` is called with
/// each, `n` 0-based), then stops it and reads its throughput (see
/// `workload::parse_throughput`). Sampling ends early when the workload exits. A
/// workload that exits with a non-zero status or prints no throughput is
/// an error; it is always stopped.
pub fn measure_alone(
    sampler: &mut dyn GpuSampler,
    workloads: &mut dyn WorkloadRunner,
    options: &AloneOptions,
    on_sample: &mut dyn FnMut(usize, &GpuSample),
) -> Result<SystemMetrics, GpuError> {
    let command = options.workload.command.as_str();
    let regex = options.workload.throughput_regex.as_deref();
    let duration = options.duration;
    let interval = options.interval.max(Duration::from_millis(1));
    let count = duration.as_nanos().div_ceil(interval.as_nanos()).max(1);
    let mut running = workloads.start(command, &[])?;
    let start = Instant::now();
    let mut samples = Vec::new();
    for n in 0..count {
        let due = start + interval * u32::try_from(n + 1).unwrap_or(u32::MAX);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        if !samples.is_empty() && !running.is_running() {
            break;
        }
        let sample = match sampler.sample() {
            Ok(sample) => sample,
            Err(error) => {
                let _ = running.stop();
                return Err(error);
            }
        };
        on_sample(samples.len(), &sample);
        samples.push(sample);
    }
    let output = running.stop()?;
    let exclusive_rps = throughput_of(command, regex, &output)?;
    if exclusive_rps <= 0.0 {
        return Err(GpuError::Workload {
            command: command.to_string(),
            message: "reported a throughput of 0 samples/s alone".to_string(),
        });
    }
    let n = samples.len() as f64;
    Ok(SystemMetrics {
        exclusive_rps,
        sm_util_pct: samples.iter().map(|s| s.sm_util_pct).sum::<f64>() / n,
        mem_util_pct: samples.iter().map(|s| s.mem_util_pct).sum::<f64>() / n,
        peak_memory_gb: samples.iter().map(|s| s.memory_used_bytes).max().unwrap_or(0) as f64 / BYTES_PER_GB,
        samples: samples.len(),
    })
}

fn throughput_of(command: &str, regex: Option<&str>, output: &WorkloadOutput) -> Result<f64, GpuError> {
    if let Some(status) = output.status.filter(|&status| status != 0) {
        return Err(GpuError::Workload {
            command: command.to_string(),
            message: format!("exited with status {status}: {}", output.last_error_line()),
        });
    }
    parse_throughput(command, &output.stdout, regex)
}

/// Where the MPS control daemon keeps its pipes and logs
/// (`CUDA_MPS_PIPE_DIRECTORY`, `CUDA_MPS_LOG_DIRECTORY`); private ones keep
/// a measurement away from any daemon already running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MpsDirs {
    /// `CUDA_MPS_PIPE_DIRECTORY`.
    pub pipe_dir: PathBuf,
    /// `CUDA_MPS_LOG_DIRECTORY`.
    pub log_dir: PathBuf,
    /// The device the daemon and the workloads see (see
    /// [`DeviceTarget::cuda_env`]); `None`: leave `CUDA_VISIBLE_DEVICES` as is.
    pub device: Option<DeviceTarget>,
}

impl MpsDirs {
    /// The environment that points clients and the daemon at these
    /// directories.
    pub fn env(&self) -> Vec<(String, String)> {
        let mut env = vec![
            ("CUDA_MPS_PIPE_DIRECTORY".to_string(), self.pipe_dir.display().to_string()),
            ("CUDA_MPS_LOG_DIRECTORY".to_string(), self.log_dir.display().to_string()),
        ];
        env.extend(self.device.iter().flat_map(DeviceTarget::cuda_env));
        env
    }
}

/// A started MPS control daemon; quits it when stopped or dropped.
struct MpsDaemon<'a> {
    runner: &'a mut dyn CommandRunner,
    env: Vec<(String, String)>,
    running: bool,
}

impl<'a> MpsDaemon<'a> {
    fn start(runner: &'a mut dyn CommandRunner, env: Vec<(String, String)>) -> Result<Self, GpuError> {
        start_daemon(runner, &env)?;
        Ok(Self { runner, env, running: true })
    }

    /// `echo quit | nvidia-cuda-mps-control`.
    fn quit(&mut self) -> Result<(), GpuError> {
        if !self.running {
            return Ok(());
        }
        self.running = false;
        quit_daemon(self.runner, &self.env)
    }
}

impl Drop for MpsDaemon<'_> {
    fn drop(&mut self) {
        let _ = self.quit();
    }
}

/// What [`measure_group`] runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupOptions {
    /// The workloads, run together (at least two for a colocation).
    pub members: Vec<MeasuredCommand>,
    /// The private MPS daemon's directories and device.
    pub mps: MpsDirs,
    /// How long they run together.
    pub duration: Duration,
    /// `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE` for every workload (1–100).
    pub active_thread_percentage: Option<u32>,
}

/// Runs `options.members` together under a private MPS control daemon and
/// returns each one's throughput, in order (see `measure_colocation`).
pub fn measure_group(
    runner: &mut dyn CommandRunner,
    workloads: &mut dyn WorkloadRunner,
    options: &GroupOptions,
) -> Result<Vec<f64>, GpuError> {
    let commands: Vec<(&str, Option<&str>)> =
        options.members.iter().map(|m| (m.command.as_str(), m.throughput_regex.as_deref())).collect();
    let readings = measure_colocation(
        runner,
        workloads,
        &commands,
        &options.mps,
        options.duration,
        options.active_thread_percentage,
    )?;
    Ok(readings.into_iter().map(|reading| reading.throughput_rps).collect())
}

/// What one workload of a colocation reported.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Reading {
    /// Its throughput, samples/s.
    pub throughput_rps: f64,
    /// What it printed of its batch times ([`parse_timing`]).
    pub timing: BatchTiming,
}

/// Runs `commands` (each with its optional throughput regex) together
/// under a private MPS control daemon for `duration`, with
/// `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE` when given, then stops them and
/// returns each one's throughput and batch timing, in order. The daemon is always quit, and
/// every started workload stopped, also on error.
pub(crate) fn measure_colocation(
    runner: &mut dyn CommandRunner,
    launcher: &mut dyn WorkloadRunner,
    commands: &[(&str, Option<&str>)],
    mps: &MpsDirs,
    duration: Duration,
    active_thread_percentage: Option<u32>,
) -> Result<Vec<Reading>, GpuError> {
    if let Some(p) = active_thread_percentage.filter(|p| !(1..=100).contains(p)) {
        return Err(GpuError::Spawn {
            program: MPS_CONTROL.to_string(),
            message: format!("active thread percentage {p} is not within 1..=100"),
        });
    }
    for dir in [&mps.pipe_dir, &mps.log_dir] {
        std::fs::create_dir_all(dir).map_err(|error| GpuError::Spawn {
            program: MPS_CONTROL.to_string(),
            message: format!("cannot create {}: {error}", dir.display()),
        })?;
    }
    let mut env = mps.env();
    let mut daemon = MpsDaemon::start(runner, env.clone())?;
    if let Some(p) = active_thread_percentage {
        env.push(("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE".to_string(), p.to_string()));
    }
    let result = run_together(launcher, commands, &env, duration);
    // Workloads are stopped (or dropped, which stops them) by now.
    let quit = daemon.quit();
    let readings = result?;
    quit?;
    Ok(readings)
}

fn run_together(
    launcher: &mut dyn WorkloadRunner,
    commands: &[(&str, Option<&str>)],
    env: &[(String, String)],
    duration: Duration,
) -> Result<Vec<Reading>, GpuError> {
    // Dropping a running workload stops it, so an early return cleans up.
    let mut running: Vec<Box<dyn RunningWorkload>> = Vec::with_capacity(commands.len());
    for (command, _) in commands {
        running.push(launcher.start(command, env)?);
    }
    std::thread::sleep(duration);
    let outputs: Vec<Result<WorkloadOutput, GpuError>> = running.iter_mut().map(|w| w.stop()).collect();
    let read = |command: &str, regex: Option<&str>, output: WorkloadOutput| -> Result<Reading, GpuError> {
        let throughput_rps = throughput_of(command, regex, &output)?;
        Ok(Reading { throughput_rps, timing: parse_timing(command, &output.stdout)? })
    };
    commands.iter().zip(outputs).map(|((command, regex), output)| read(command, *regex, output?)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::FakeNvidiaSmi;
    use crate::sampler::FakeSampler;
    use crate::workload::FakeWorkloadRunner;

    fn sample(sm: f64, mem: f64, gb: f64) -> GpuSample {
        GpuSample { sm_util_pct: sm, mem_util_pct: mem, memory_used_bytes: (gb * BYTES_PER_GB) as u64 }
    }

    fn options(regex: Option<&str>) -> AloneOptions {
        AloneOptions {
            workload: MeasuredCommand {
                command: "python bench.py".into(),
                throughput_regex: regex.map(str::to_string),
            },
            duration: Duration::from_millis(30),
            interval: Duration::from_millis(10),
        }
    }

    fn alone(
        sampler: &mut FakeSampler,
        launcher: &mut FakeWorkloadRunner,
        regex: Option<&str>,
    ) -> Result<SystemMetrics, GpuError> {
        measure_alone(sampler, launcher, &options(regex), &mut |_, _| {})
    }

    #[test]
    fn alone_gives_mean_utilisation_peak_memory_and_throughput() {
        let mut sampler = FakeSampler::new([sample(40.0, 10.0, 2.0), sample(60.0, 20.0, 5.0), sample(80.0, 30.0, 3.0)]);
        let mut launcher = FakeWorkloadRunner::new([FakeWorkloadRunner::throughput(123.5)]);
        let mut seen = Vec::new();
        let metrics =
            measure_alone(&mut sampler, &mut launcher, &options(None), &mut |n, s| seen.push((n, s.sm_util_pct)))
                .unwrap();
        assert_eq!(options(None).samples(), 3);
        assert_eq!(seen, vec![(0, 40.0), (1, 60.0), (2, 80.0)]);
        assert_eq!(metrics.samples, 3);
        assert_eq!(metrics.exclusive_rps, 123.5);
        assert!((metrics.sm_util_pct - 60.0).abs() < 1e-9);
        assert!((metrics.mem_util_pct - 20.0).abs() < 1e-9);
        assert!((metrics.peak_memory_gb - 5.0).abs() < 1e-9);
        assert_eq!(launcher.started, vec![("python bench.py".to_string(), vec![])]);
        assert_eq!(launcher.running(), 0);
    }

    #[test]
    fn a_custom_regex_reads_the_throughput() {
        let mut sampler = FakeSampler::new([sample(50.0, 10.0, 1.0)]);
        let output = WorkloadOutput { status: Some(0), stdout: "img/s 10\nimg/s 42.5\n".into(), stderr: String::new() };
        let mut launcher = FakeWorkloadRunner::new([output]);
        let metrics = alone(&mut sampler, &mut launcher, Some(r"img/s ([0-9.]+)")).unwrap();
        assert_eq!(metrics.exclusive_rps, 42.5);
    }

    #[test]
    fn a_failing_or_silent_workload_is_an_error() {
        let failed = WorkloadOutput {
            status: Some(1),
            stdout: "tessera:throughput=10\n".into(),
            stderr: "Traceback\nCUDA out of memory\n".into(),
        };
        let mut launcher = FakeWorkloadRunner::new([failed]);
        let error = alone(&mut FakeSampler::new([sample(1.0, 1.0, 1.0)]), &mut launcher, None).unwrap_err();
        let message = error.to_string();
        assert!(message.contains("python bench.py") && message.contains("status 1"), "{message}");
        assert!(message.contains("CUDA out of memory") && !message.contains('\n'), "{message}");
        assert_eq!(launcher.running(), 0);

        let silent = WorkloadOutput { status: None, stdout: "done\n".into(), stderr: String::new() };
        let mut launcher = FakeWorkloadRunner::new([silent]);
        let error = alone(&mut FakeSampler::new([sample(1.0, 1.0, 1.0)]), &mut launcher, None).unwrap_err();
        assert!(error.to_string().contains("tessera:throughput="), "{error}");

        let zero = FakeWorkloadRunner::throughput(0.0);
        let mut launcher = FakeWorkloadRunner::new([zero]);
        assert!(alone(&mut FakeSampler::new([sample(1.0, 1.0, 1.0)]), &mut launcher, None).is_err());
    }

    #[test]
    fn a_sampler_failure_stops_the_workload() {
        let mut launcher = FakeWorkloadRunner::new([FakeWorkloadRunner::throughput(1.0)]);
        assert!(alone(&mut FakeSampler::default(), &mut launcher, None).is_err());
        assert_eq!(launcher.running(), 0);
    }

    fn dirs(root: &std::path::Path) -> MpsDirs {
        MpsDirs { pipe_dir: root.join("pipe"), log_dir: root.join("log"), device: Some(DeviceTarget::Gpu(1)) }
    }

    #[test]
    fn colocation_returns_throughputs_and_quits_the_daemon() {
        let root = tempfile::tempdir().unwrap();
        let mps = dirs(root.path());
        let mut smi = FakeNvidiaSmi::new();
        let mut launcher =
            FakeWorkloadRunner::new([FakeWorkloadRunner::throughput(70.0), FakeWorkloadRunner::throughput(30.5)]);
        let members = ["run-a", "run-b"].map(|c| MeasuredCommand { command: c.into(), throughput_regex: None });
        let options = GroupOptions {
            members: members.to_vec(),
            mps: mps.clone(),
            duration: Duration::ZERO,
            active_thread_percentage: Some(50),
        };
        let throughputs = measure_group(&mut smi, &mut launcher, &options).unwrap();
        assert_eq!(throughputs, vec![70.0, 30.5]);
        assert!(!smi.daemon_running());
        assert_eq!(launcher.running(), 0);
        // Quit, then asked until it no longer answers.
        let expected_log = [
            "nvidia-cuda-mps-control -d",
            "echo quit | nvidia-cuda-mps-control",
            "echo get_server_list | nvidia-cuda-mps-control",
        ];
        assert_eq!(smi.log, expected_log);
        let (command, env) = &launcher.started[1];
        assert_eq!(command, "run-b");
        let mut expected = mps.env();
        expected.push(("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE".to_string(), "50".to_string()));
        assert_eq!(env, &expected);
        assert!(mps.pipe_dir.is_dir() && mps.log_dir.is_dir());
        assert!(env.contains(&("CUDA_VISIBLE_DEVICES".to_string(), "1".to_string())));
    }

    #[test]
    fn a_failing_workload_still_quits_the_daemon() {
        let root = tempfile::tempdir().unwrap();
        let mps = dirs(root.path());
        let commands = [("run-a", None), ("run-b", None), ("run-c", None)];

        // One exits non-zero.
        let mut smi = FakeNvidiaSmi::new();
        let failed = WorkloadOutput { status: Some(2), stdout: String::new(), stderr: "boom\n".into() };
        let mut launcher =
            FakeWorkloadRunner::new([FakeWorkloadRunner::throughput(1.0), failed, FakeWorkloadRunner::throughput(1.0)]);
        let error = measure_colocation(&mut smi, &mut launcher, &commands, &mps, Duration::ZERO, None).unwrap_err();
        assert!(error.to_string().contains("run-b"), "{error}");
        assert!(!smi.daemon_running());
        assert_eq!(launcher.running(), 0);
        assert!(launcher.started.iter().all(|(_, env)| env == &mps.env()));

        // The third cannot start: the first two are stopped, the daemon quit.
        let mut smi = FakeNvidiaSmi::new();
        let mut launcher =
            FakeWorkloadRunner::new([FakeWorkloadRunner::throughput(1.0), FakeWorkloadRunner::throughput(1.0)]);
        assert!(measure_colocation(&mut smi, &mut launcher, &commands, &mps, Duration::ZERO, None).is_err());
        assert!(!smi.daemon_running());
        assert_eq!(launcher.running(), 0);
        assert!(smi.log.iter().any(|line| line == "echo quit | nvidia-cuda-mps-control"), "{:?}", smi.log);
    }

    #[test]
    fn a_daemon_already_running_is_reported_and_left_alone() {
        let root = tempfile::tempdir().unwrap();
        let mps = dirs(root.path());
        let mut smi = FakeNvidiaSmi::new();
        let env = mps.env();
        assert!(smi.run_with(MPS_CONTROL, &["-d".to_string()], &env, None).unwrap().success());
        let mut launcher =
            FakeWorkloadRunner::new([FakeWorkloadRunner::throughput(1.0), FakeWorkloadRunner::throughput(1.0)]);
        let commands = [("run-a", None), ("run-b", None)];
        let error = measure_colocation(&mut smi, &mut launcher, &commands, &mps, Duration::ZERO, None).unwrap_err();
        assert!(error.to_string().contains("already running"), "{error}");
        assert!(smi.daemon_running(), "a daemon Tessera did not start is not quit");
        assert!(launcher.started.is_empty());
        assert!(measure_colocation(&mut smi, &mut launcher, &commands, &mps, Duration::ZERO, Some(0)).is_err());
    }
}
