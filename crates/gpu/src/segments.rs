//! Segment profiling: a workload measured with `procs` MPS processes of
//! batch `batch` in MIG instances of each size, giving the profile points
//! the planner needs (ParvaGPU's profiling step).
//!
//! It uses the MIG instances that already exist on a GPU and never creates,
//! destroys or reconfigures any: one instance of each size (primary
//! profiles only) is measured. Each point runs under its own private MPS
//! control daemon, which is always quit. A segment's throughput is the sum
//! of its processes' throughputs; its latency is the time one batch takes
//! in the slowest process, `1000 × batch / throughput` ms, as the
//! workloads run batches back to back. A workload that prints its batch
//! times' median and 99th percentile (and its dispatch gap) gives the point
//! its [`tessera_core::BatchTiming`]: each part the most any of its
//! processes reported. A configuration whose workload
//! fails (out of memory, typically) is infeasible: it is left out of the
//! profile and reported, as ParvaGPU's profiles leave such points out.

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tessera_core::{BatchTiming, GpuModel, ModelProfile, ProfilePoint, SegmentConfig};

use crate::error::GpuError;
use crate::installed::{installed_gpu, InstalledGpu};
use crate::measure::{measure_colocation, MpsDirs};
use crate::mig::{read_live, LiveGpu, MigDevice, MigDevices};
use crate::runner::CommandRunner;
use crate::workload::{DeviceTarget, WorkloadRunner};

/// One MIG instance (or a whole GPU) to measure segments in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentTarget {
    /// Its size in compute slices (GPCs).
    pub size_gpcs: u8,
    /// What it is, for messages: `3g.40gb@4`, or `whole GPU 0`.
    pub label: String,
    /// The device its processes see.
    pub device: DeviceTarget,
}

/// One instance of each primary profile among `live`'s instances that has
/// a MIG device (a compute instance) in `devices`, smallest first; the
/// instances passed over, with why, come second.
pub fn targets_on_instances(
    gpu_model: GpuModel,
    live: &LiveGpu,
    devices: &[MigDevice],
) -> (Vec<SegmentTarget>, Vec<String>) {
    let spec = gpu_model.spec();
    let mut targets: Vec<SegmentTarget> = Vec::new();
    let mut passed_over = Vec::new();
    for instance in &live.instances {
        let label = format!("{}@{}", instance.profile, instance.start);
        let Ok(profile) = spec.profile_by_name(&instance.profile) else {
            passed_over.push(format!("{label}: not a profile of {}", spec.id));
            continue;
        };
        if !profile.primary {
            passed_over.push(format!("{label}: not a primary profile (profiles are per compute size)"));
        } else if targets.iter().any(|t| t.size_gpcs == profile.compute_slices) {
            passed_over.push(format!("{label}: another {}g instance is measured", profile.compute_slices));
        } else if let Some(device) = devices.iter().find(|d| d.gi_id == instance.gi_id) {
            targets.push(SegmentTarget {
                size_gpcs: profile.compute_slices,
                label,
                device: DeviceTarget::Mig(device.uuid.clone()),
            });
        } else {
            passed_over.push(format!("{label}: no compute instance (create one with `nvidia-smi mig -gi ID -cci`)"));
        }
    }
    targets.sort_by_key(|t| t.size_gpcs);
    (targets, passed_over)
}

/// A whole GPU without MIG, measured as the model's largest profile. On
/// the H100 and H200 the largest profile has every SM of the GPU; on the
/// A100 it has 98 of 108, so such points overstate that profile by up to
/// about 10%.
pub fn target_whole_gpu(gpu_model: GpuModel, gpu_index: u32) -> SegmentTarget {
    let spec = gpu_model.spec();
    let size_gpcs = spec.sizes().max().unwrap_or(spec.compute_slices);
    SegmentTarget { size_gpcs, label: format!("whole GPU {gpu_index}"), device: DeviceTarget::Gpu(gpu_index) }
}

/// Which configurations of a sweep's grid are measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// Every (batch, procs) pair in every target.
    Every,
    /// A budget: the first `budget` configurations of `ranked` (most
    /// wanted first, e.g. from `tessera_plan::suggest_measurements`) that
    /// are on the grid and in an instance size measured here, in that
    /// order.
    Budget {
        /// Configurations, most wanted first.
        ranked: Vec<SegmentConfig>,
        /// How many to measure at most.
        budget: usize,
    },
}

/// What to measure: (batch, procs) pairs in each target.
#[derive(Debug, Clone, PartialEq)]
pub struct Sweep {
    /// The workload's command template; `{batch}` is replaced.
    pub command_template: String,
    /// A regular expression reading its throughput (default: the
    /// `tessera:throughput=` line).
    pub throughput_regex: Option<String>,
    /// Batch sizes.
    pub batches: Vec<u32>,
    /// MPS processes per segment.
    pub procs: Vec<u32>,
    /// Every configuration of the grid, or a budget's choice.
    pub selection: Selection,
    /// How long each point runs.
    pub duration: Duration,
    /// Where each point's private MPS pipe and log directories go.
    pub mps_root: PathBuf,
}

impl Sweep {
    /// The points to measure, in order, each with the index of its target.
    pub fn configs(&self, targets: &[SegmentTarget]) -> Vec<(usize, SegmentConfig)> {
        let mut grid = Vec::new();
        for (index, target) in targets.iter().enumerate() {
            for &batch in &self.batches {
                for &procs in &self.procs {
                    grid.push((index, SegmentConfig { size_gpcs: target.size_gpcs, batch, procs }));
                }
            }
        }
        match &self.selection {
            Selection::Every => grid,
            Selection::Budget { ranked, budget } => {
                let mut chosen: Vec<(usize, SegmentConfig)> = Vec::new();
                for config in ranked {
                    if chosen.len() == *budget {
                        break;
                    }
                    if let Some(&point) = grid.iter().find(|(_, c)| c == config) {
                        if !chosen.contains(&point) {
                            chosen.push(point);
                        }
                    }
                }
                chosen
            }
        }
    }
}

/// The outcome of one configuration.
#[derive(Debug, Clone, PartialEq)]
pub enum PointOutcome {
    /// Measured.
    Measured(ProfilePoint),
    /// Infeasible: the workload failed, for this reason.
    Infeasible(String),
}

/// Measures every configuration of `sweep` in `targets`, calling
/// `on_point` after each. Workload failures make a point infeasible; any
/// other failure (MPS, the workload runner) stops the sweep.
fn run_sweep(
    runner: &mut dyn CommandRunner,
    launcher: &mut dyn WorkloadRunner,
    targets: &[SegmentTarget],
    sweep: &Sweep,
    on_point: &mut dyn FnMut(&SegmentTarget, SegmentConfig, &PointOutcome),
) -> Result<Vec<(SegmentConfig, PointOutcome)>, GpuError> {
    let mut outcomes = Vec::new();
    for (index, config) in sweep.configs(targets) {
        let target = &targets[index];
        let outcome = measure_point(runner, launcher, target, config, sweep)?;
        on_point(target, config, &outcome);
        outcomes.push((config, outcome));
    }
    Ok(outcomes)
}

fn measure_point(
    runner: &mut dyn CommandRunner,
    launcher: &mut dyn WorkloadRunner,
    target: &SegmentTarget,
    config: SegmentConfig,
    sweep: &Sweep,
) -> Result<PointOutcome, GpuError> {
    let command = sweep.command_template.replace("{batch}", &config.batch.to_string());
    let commands: Vec<(&str, Option<&str>)> =
        (0..config.procs).map(|_| (command.as_str(), sweep.throughput_regex.as_deref())).collect();
    let mps = point_dirs(&sweep.mps_root, config, target.device.clone());
    let readings = match measure_colocation(runner, launcher, &commands, &mps, sweep.duration, None) {
        Ok(readings) => readings,
        Err(GpuError::Workload { message, .. }) => return Ok(PointOutcome::Infeasible(message)),
        Err(other) => return Err(other),
    };
    let slowest = readings.iter().map(|reading| reading.throughput_rps).fold(f64::INFINITY, f64::min);
    if !(slowest.is_finite() && slowest > 0.0) {
        return Ok(PointOutcome::Infeasible("a process reported no throughput".to_string()));
    }
    let total: f64 = readings.iter().map(|reading| reading.throughput_rps).sum();
    let latency_ms = 1000.0 * f64::from(config.batch) / slowest;
    // Each part of the timing from the process that reported the most of it.
    let most = |part: fn(&BatchTiming) -> Option<f64>| {
        readings.iter().filter_map(|reading| part(&reading.timing)).reduce(f64::max)
    };
    let timing = BatchTiming {
        latency_p50_ms: most(|timing| timing.latency_p50_ms),
        latency_p99_ms: most(|timing| timing.latency_p99_ms),
        dispatch_gap_ms: most(|timing| timing.dispatch_gap_ms),
        serving_slowdown: None,
    };
    ProfilePoint::new(config, total, latency_ms, None)
        .and_then(|point| point.with_timing(timing))
        .map(PointOutcome::Measured)
        .map_err(|error| GpuError::Workload { command, message: format!("{config}: {error}") })
}

/// What [`sweep_segments`] measures.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepOptions {
    /// The workload's name, for messages.
    pub workload: String,
    /// The GPU's index on the node.
    pub gpu: u32,
    /// Measure the GPU without MIG, as its largest profile (see
    /// `target_whole_gpu`), instead of its MIG instances.
    pub whole_gpu: bool,
    /// The configurations and how to run them.
    pub sweep: Sweep,
}

/// What a sweep reports as it goes.
#[derive(Debug, Clone, Copy)]
pub enum SweepEvent<'a> {
    /// The GPU was read: what will be measured, and the instances passed
    /// over (with why).
    Targets {
        /// The GPU.
        installed: &'a InstalledGpu,
        /// The instances (or whole GPU) measured, smallest first.
        targets: &'a [SegmentTarget],
        /// The instances passed over, with why.
        passed_over: &'a [String],
        /// How many points will be measured.
        points: usize,
    },
    /// One point was measured.
    Point {
        /// Where.
        target: &'a SegmentTarget,
        /// What.
        config: SegmentConfig,
        /// How it went.
        outcome: &'a PointOutcome,
    },
}

/// What a sweep measured.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepReport {
    /// The GPU measured.
    pub installed: InstalledGpu,
    /// Every configuration, in order, with its outcome.
    pub outcomes: Vec<(SegmentConfig, PointOutcome)>,
}

/// Sweeps `options.sweep` on GPU `options.gpu` of the node `driver` drives:
/// in one MIG instance of each size that exists (never creating or
/// changing any), or, with `whole_gpu`, in the whole GPU without MIG. A GPU
/// in the other mode, or without an instance to measure in, is refused
/// before anything runs.
pub fn sweep_segments<N: CommandRunner + MigDevices>(
    driver: &mut N,
    workloads: &mut dyn WorkloadRunner,
    options: &SweepOptions,
    on_event: &mut dyn FnMut(SweepEvent<'_>),
) -> Result<SweepReport, GpuError> {
    let sweep = &options.sweep;
    if !sweep.command_template.contains("{batch}") && sweep.batches.len() > 1 {
        return Err(GpuError::Sweep {
            message: format!(
                "workload {}: its command has no {{batch}} to take the batch sizes {:?}",
                options.workload, sweep.batches
            ),
        });
    }
    let gpu = options.gpu;
    let installed = installed_gpu(driver, gpu)?;
    let refuse = |message: String| Err(GpuError::Sweep { message });
    let (targets, passed_over) = match (options.whole_gpu, installed.mig_enabled) {
        (true, true) => {
            return refuse(format!(
                "GPU {gpu} ({}) is in MIG mode: drop --whole-gpu to measure its MIG instances",
                installed.name
            ))
        }
        (true, false) => (vec![target_whole_gpu(installed.gpu_model, gpu)], Vec::new()),
        (false, false) => {
            return refuse(format!(
                "GPU {gpu} ({}) is not in MIG mode: measure it whole with --whole-gpu, or enable MIG and create \
                 instances first (Tessera never changes MIG mode)",
                installed.name
            ))
        }
        (false, true) => {
            let live = read_live(driver, gpu, installed.gpu_model)?;
            let devices = driver.mig_devices(gpu)?;
            targets_on_instances(installed.gpu_model, &live, &devices)
        }
    };
    let points = sweep.configs(&targets).len();
    on_event(SweepEvent::Targets { installed: &installed, targets: &targets, passed_over: &passed_over, points });
    if targets.is_empty() {
        return refuse(format!(
            "GPU {gpu} has no MIG instance with a compute instance to measure in: create them with \
             `nvidia-smi mig -i {gpu} -cgi PROFILE -C` (see `nvidia-smi mig -lgip`)"
        ));
    }
    let outcomes = run_sweep(driver, workloads, &targets, sweep, &mut |target, config, outcome| {
        on_event(SweepEvent::Point { target, config, outcome });
    })?;
    Ok(SweepReport { installed, outcomes })
}

/// A profile of measured points merged with earlier ones.
#[derive(Debug, Clone, PartialEq)]
pub struct MergedProfile {
    /// The profile to store.
    pub profile: ModelProfile,
    /// Points measured now.
    pub measured: usize,
    /// Earlier points kept (configurations not measured now).
    pub kept: usize,
}

/// The profile of `model_name` on `gpu_model` from a sweep's `outcomes`
/// and the `earlier` profile: a configuration measured now replaces its
/// earlier point, an earlier point of a configuration not measured now
/// (another batch, or one infeasible now) is kept. A sweep that measured
/// nothing is an error naming `workload` and the first failure.
pub fn merge_profile(
    gpu_model: GpuModel,
    model_name: &str,
    workload: &str,
    outcomes: &[(SegmentConfig, PointOutcome)],
    earlier: Option<&ModelProfile>,
) -> Result<MergedProfile, GpuError> {
    let mut points: BTreeMap<SegmentConfig, ProfilePoint> = outcomes
        .iter()
        .filter_map(|(config, outcome)| match outcome {
            PointOutcome::Measured(point) => Some((*config, *point)),
            PointOutcome::Infeasible(_) => None,
        })
        .collect();
    let measured = points.len();
    if measured == 0 {
        let first_failure = outcomes.iter().find_map(|(_, outcome)| match outcome {
            PointOutcome::Infeasible(reason) => Some(reason.as_str()),
            PointOutcome::Measured(_) => None,
        });
        return Err(GpuError::Sweep {
            message: format!(
                "no configuration of {workload} could be measured: {}",
                first_failure.unwrap_or("nothing was swept")
            ),
        });
    }
    let mut kept = 0;
    for point in earlier.map_or(&[][..], ModelProfile::points) {
        if let Entry::Vacant(slot) = points.entry(point.config) {
            slot.insert(*point);
            kept += 1;
        }
    }
    let profile = ModelProfile::new(gpu_model, model_name, points.into_values().collect())
        .map_err(|error| GpuError::Sweep { message: format!("profile of {model_name} on {gpu_model}: {error}") })?;
    Ok(MergedProfile { profile, measured, kept })
}

/// Private MPS directories of one point.
fn point_dirs(root: &Path, config: SegmentConfig, device: DeviceTarget) -> MpsDirs {
    let dir = root.join(format!("{}g-b{}-p{}", config.size_gpcs, config.batch, config.procs));
    MpsDirs { pipe_dir: dir.join("pipe"), log_dir: dir.join("log"), device: Some(device) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::{fake_mig_uuid, FakeNvidiaSmi};
    use crate::workload::{FakeWorkloadRunner, WorkloadOutput};

    fn arg(text: &str) -> Vec<String> {
        text.split_whitespace().map(String::from).collect()
    }

    /// An A100-80GB: GPU 0 with 2g@0 and 3g@4 (each with a compute
    /// instance) and a double-memory 1g.20gb@2; GPU 1 with 1g@0 (no compute
    /// instance), 1g@1 and 1g@2 (each with one).
    fn node() -> FakeNvidiaSmi {
        let mut fake = FakeNvidiaSmi::new().with_gpu(0, GpuModel::A100_80GB).with_gpu(1, GpuModel::A100_80GB);
        for command in [
            "mig -i 0 -cgi 3g.40gb:4",
            "mig -i 0 -gi 1 -cci",
            "mig -i 0 -cgi 2g.20gb:0",
            "mig -i 0 -gi 2 -cci",
            "mig -i 0 -cgi 1g.20gb:2",
            "mig -i 0 -gi 3 -cci",
            "mig -i 1 -cgi 1g.10gb:0",
            "mig -i 1 -cgi 1g.10gb:1",
            "mig -i 1 -gi 2 -cci",
            "mig -i 1 -cgi 1g.10gb:2",
            "mig -i 1 -gi 3 -cci",
        ] {
            assert!(fake.run("nvidia-smi", &arg(command)).unwrap().success(), "{command}");
        }
        fake
    }

    fn targets_of(fake: &mut FakeNvidiaSmi, gpu: u32) -> (Vec<SegmentTarget>, Vec<String>) {
        let live = read_live(fake, gpu, GpuModel::A100_80GB).unwrap();
        let devices = fake.mig_devices(gpu).unwrap();
        targets_on_instances(GpuModel::A100_80GB, &live, &devices)
    }

    #[test]
    fn one_instance_per_size_with_a_compute_instance() {
        let mut fake = node();
        let (targets, passed_over) = targets_of(&mut fake, 0);
        let sizes: Vec<(u8, &str)> = targets.iter().map(|t| (t.size_gpcs, t.label.as_str())).collect();
        assert_eq!(sizes, vec![(2, "2g.20gb@0"), (3, "3g.40gb@4")]);
        assert_eq!(targets[1].device, DeviceTarget::Mig(fake_mig_uuid(0, 1, 0)));
        assert_eq!(passed_over, vec!["1g.20gb@2: not a primary profile (profiles are per compute size)"]);

        let (targets, passed_over) = targets_of(&mut fake, 1);
        assert_eq!(targets.len(), 1);
        assert_eq!(
            (targets[0].label.as_str(), &targets[0].device),
            ("1g.10gb@1", &DeviceTarget::Mig(fake_mig_uuid(1, 2, 0)))
        );
        assert_eq!(passed_over.len(), 2, "{passed_over:?}");
        assert!(passed_over[0].starts_with("1g.10gb@0: no compute instance"), "{passed_over:?}");
        assert_eq!(passed_over[1], "1g.10gb@2: another 1g instance is measured");

        let whole = target_whole_gpu(GpuModel::H200_141GB, 1);
        assert_eq!((whole.size_gpcs, whole.device), (7, DeviceTarget::Gpu(1)));
    }

    #[test]
    fn sweeps_every_point_and_leaves_failures_out() {
        let dir = tempfile::tempdir().unwrap();
        let targets = vec![
            SegmentTarget { size_gpcs: 1, label: "1g.10gb@0".into(), device: DeviceTarget::Mig("MIG-a".into()) },
            SegmentTarget { size_gpcs: 3, label: "3g.40gb@4".into(), device: DeviceTarget::Mig("MIG-b".into()) },
        ];
        let sweep = Sweep {
            command_template: "python serve.py --batch {batch}".into(),
            throughput_regex: None,
            batches: vec![4, 8],
            procs: vec![1, 2],
            selection: Selection::Every,
            duration: Duration::from_millis(1),
            mps_root: dir.path().to_path_buf(),
        };
        // Per process, in order: 1g b4 ×1, ×2; 1g b8 ×1, ×2 (one out of memory); 3g b4 ×1, ×2; 3g b8 ×1, ×2.
        let oom = WorkloadOutput { status: Some(1), stdout: String::new(), stderr: "CUDA out of memory".into() };
        let t = FakeWorkloadRunner::throughput;
        // The two processes of 3g b4 ×2 print their batch times too.
        let timed = |rps: f64, p50_ms: f64, p99_ms: f64| {
            let mut output = t(rps);
            output.stdout += &format!("tessera:latency_p50_ms={p50_ms}\ntessera:latency_p99_ms={p99_ms}\n");
            output
        };
        let outputs = [
            t(100.0),
            t(90.0),
            t(80.0),
            t(150.0),
            t(140.0),
            oom,
            t(300.0),
            timed(280.0, 14.0, 15.5),
            timed(250.0, 15.8, 16.2),
            t(500.0),
            t(400.0),
            t(420.0),
        ];
        let mut launcher = FakeWorkloadRunner::new(outputs);
        let mut fake = FakeNvidiaSmi::new();
        let mut seen = 0;
        let outcomes = run_sweep(&mut fake, &mut launcher, &targets, &sweep, &mut |_, _, _| seen += 1).expect("swept");
        assert_eq!(seen, 8);
        let measured: Vec<(u8, u32, u32, f64, f64)> = outcomes
            .iter()
            .filter_map(|(_, outcome)| match outcome {
                PointOutcome::Measured(p) => Some((
                    p.config.size_gpcs,
                    p.config.batch,
                    p.config.procs,
                    p.throughput_rps,
                    (p.latency_ms * 1000.0).round() / 1000.0,
                )),
                PointOutcome::Infeasible(_) => None,
            })
            .collect();
        assert_eq!(
            measured,
            vec![
                (1, 4, 1, 100.0, 40.0),
                (1, 4, 2, 170.0, 50.0),
                (1, 8, 1, 150.0, 53.333),
                (3, 4, 1, 300.0, 13.333),
                (3, 4, 2, 530.0, 16.0),
                (3, 8, 1, 500.0, 16.0),
                (3, 8, 2, 820.0, 20.0),
            ]
        );
        assert!(matches!(&outcomes[3].1, PointOutcome::Infeasible(m) if m.contains("CUDA out of memory")));
        // Each part of the timing is the most its processes reported; the others carry none.
        let PointOutcome::Measured(timed) = &outcomes[5].1 else { panic!("{:?}", outcomes[5]) };
        assert_eq!((timed.timing.latency_p50_ms, timed.timing.latency_p99_ms), (Some(15.8), Some(16.2)));
        assert!(timed.timing.dispatch_gap_ms.is_none());
        assert!(outcomes.iter().enumerate().all(|(index, (_, outcome))| index == 5
            || matches!(outcome, PointOutcome::Measured(p) if p.timing.is_empty())
            || matches!(outcome, PointOutcome::Infeasible(_))));
        // Every process saw its instance and its point's own MPS daemon, which was quit.
        let (command, env) = &launcher.started[6];
        assert_eq!(command, "python serve.py --batch 4");
        assert!(env.contains(&("CUDA_VISIBLE_DEVICES".to_string(), "MIG-b".to_string())), "{env:?}");
        let pipe = dir.path().join("3g-b4-p1/pipe").display().to_string();
        assert!(env.contains(&("CUDA_MPS_PIPE_DIRECTORY".to_string(), pipe)), "{env:?}");
        assert!(!fake.daemon_running());
        assert_eq!(launcher.running(), 0);
    }

    fn point(size: u8, batch: u32, procs: u32, throughput_rps: f64) -> ProfilePoint {
        ProfilePoint::new(SegmentConfig { size_gpcs: size, batch, procs }, throughput_rps, 10.0, None).unwrap()
    }

    #[test]
    fn a_merge_replaces_measured_configurations_and_keeps_the_others() {
        let earlier = ModelProfile::new(
            GpuModel::A100_80GB,
            "m",
            vec![point(1, 1, 1, 10.0), point(1, 2, 1, 20.0), point(1, 4, 1, 40.0)],
        )
        .unwrap();
        let outcomes = vec![
            (point(1, 2, 1, 25.0).config, PointOutcome::Measured(point(1, 2, 1, 25.0))),
            (point(1, 4, 1, 0.5).config, PointOutcome::Infeasible("out of memory".into())),
            (point(1, 8, 1, 80.0).config, PointOutcome::Measured(point(1, 8, 1, 80.0))),
        ];
        let merged = merge_profile(GpuModel::A100_80GB, "m", "w", &outcomes, Some(&earlier)).unwrap();
        assert_eq!((merged.measured, merged.kept), (2, 2));
        let points: Vec<(u32, f64)> =
            merged.profile.points().iter().map(|p| (p.config.batch, p.throughput_rps)).collect();
        // Batch 2 measured again, batch 4 infeasible now keeps its earlier point.
        assert_eq!(points, [(1, 10.0), (2, 25.0), (4, 40.0), (8, 80.0)]);
        let alone = merge_profile(GpuModel::A100_80GB, "m", "w", &outcomes, None).unwrap();
        assert_eq!((alone.measured, alone.kept, alone.profile.points().len()), (2, 0, 2));

        let failed = [(point(1, 4, 1, 1.0).config, PointOutcome::Infeasible("CUDA out of memory".into()))];
        let error = merge_profile(GpuModel::A100_80GB, "m", "w", &failed, Some(&earlier)).unwrap_err().to_string();
        assert_eq!(error, "no configuration of w could be measured: CUDA out of memory");
    }

    fn sweep_options(dir: &Path, whole_gpu: bool, batches: Vec<u32>) -> SweepOptions {
        SweepOptions {
            workload: "w".into(),
            gpu: 0,
            whole_gpu,
            sweep: Sweep {
                command_template: "serve --batch {batch}".into(),
                throughput_regex: None,
                batches,
                procs: vec![1],
                selection: Selection::Every,
                duration: Duration::from_millis(1),
                mps_root: dir.to_path_buf(),
            },
        }
    }

    #[test]
    fn a_sweep_measures_the_instances_that_exist_and_refuses_the_wrong_mode() {
        let dir = tempfile::tempdir().unwrap();
        let mut fake = node();
        let t = FakeWorkloadRunner::throughput;
        let mut workloads = FakeWorkloadRunner::new([t(10.0), t(20.0), t(30.0), t(40.0)]);
        let mut seen = Vec::new();
        let report =
            sweep_segments(&mut fake, &mut workloads, &sweep_options(dir.path(), false, vec![1, 2]), &mut |event| {
                seen.push(match event {
                    SweepEvent::Targets { targets, passed_over, points, .. } => {
                        format!("{} targets, {} passed over, {points} points", targets.len(), passed_over.len())
                    }
                    SweepEvent::Point { target, config, .. } => format!("{config} in {}", target.label),
                });
            })
            .unwrap();
        assert_eq!(report.installed.gpu_model, GpuModel::A100_80GB);
        assert_eq!(report.outcomes.len(), 4);
        assert_eq!(seen[0], "2 targets, 1 passed over, 4 points");
        assert!(seen[1].ends_with("in 2g.20gb@0"), "{seen:?}");

        let error = sweep_segments(&mut fake, &mut workloads, &sweep_options(dir.path(), true, vec![1]), &mut |_| {})
            .unwrap_err()
            .to_string();
        assert!(error.contains("is in MIG mode: drop --whole-gpu"), "{error}");
        let mut no_mig = FakeNvidiaSmi::new().with_gpu(0, GpuModel::H200_141GB).with_mig_disabled(0);
        let error =
            sweep_segments(&mut no_mig, &mut workloads, &sweep_options(dir.path(), false, vec![1]), &mut |_| {})
                .unwrap_err()
                .to_string();
        assert!(error.contains("not in MIG mode") && error.contains("never changes MIG mode"), "{error}");
        let mut options = sweep_options(dir.path(), true, vec![1, 2]);
        options.sweep.command_template = "serve".into();
        let error = sweep_segments(&mut no_mig, &mut workloads, &options, &mut |_| {}).unwrap_err().to_string();
        assert_eq!(error, "workload w: its command has no {batch} to take the batch sizes [1, 2]");
        let mut empty = FakeNvidiaSmi::new().with_gpu(0, GpuModel::A100_80GB);
        let error = sweep_segments(&mut empty, &mut workloads, &sweep_options(dir.path(), false, vec![1]), &mut |_| {})
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("no MIG instance with a compute instance") && error.contains("-cgi PROFILE -C"),
            "{error}"
        );
    }

    #[test]
    fn a_budget_measures_the_most_wanted_configurations_that_exist_here() {
        let targets = vec![
            SegmentTarget { size_gpcs: 1, label: "1g.10gb@0".into(), device: DeviceTarget::Mig("MIG-a".into()) },
            SegmentTarget { size_gpcs: 3, label: "3g.40gb@4".into(), device: DeviceTarget::Mig("MIG-b".into()) },
        ];
        let config = |size_gpcs, batch, procs| SegmentConfig { size_gpcs, batch, procs };
        let ranked = vec![
            config(7, 8, 1), // no 7g instance here
            config(3, 8, 2),
            config(1, 16, 1), // not on the grid's batches
            config(3, 8, 2),  // listed twice
            config(1, 4, 1),
            config(1, 8, 2),
        ];
        let mut sweep = Sweep {
            command_template: "serve {batch}".into(),
            throughput_regex: None,
            batches: vec![4, 8],
            procs: vec![1, 2],
            selection: Selection::Budget { ranked, budget: 2 },
            duration: Duration::from_millis(1),
            mps_root: PathBuf::from("/tmp"),
        };
        assert_eq!(sweep.configs(&targets), vec![(1, config(3, 8, 2)), (0, config(1, 4, 1))]);
        sweep.selection = Selection::Every;
        assert_eq!(sweep.configs(&targets).len(), 8);
    }
}
