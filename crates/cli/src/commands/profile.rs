//! `tessera profile …`: measure workloads on a GPU.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use tessera_core::colocation::{Colocation, GroupMember, WorkloadMetrics, KERNEL_METRIC_NAMES};
use tessera_gpu::launch::{DeviceTarget, ShellLauncher};
use tessera_gpu::measure::{measure_alone, measure_colocation, MpsDirs};
use tessera_gpu::ncu::{aggregate_report, kernel_table_csv, profile_live, NcuRun};
use tessera_gpu::nvml::check_device;
use tessera_gpu::runner::SystemRunner;
use tessera_gpu::sampler::NvmlSampler;
use tessera_store::Store;

use super::segments::SegmentsRequest;
use crate::args::ProfileCommand;
use crate::inputs::store_path;
use crate::output::{out, outln};
use crate::progress::Progress;
use crate::table::TextTable;

/// Runs `tessera profile …`.
pub fn run(command: ProfileCommand, store: Option<&Path>) -> Result<()> {
    match command {
        ProfileCommand::Kernels { workload, import, gpu, ncu, launch_skip, launch_count, timeout, output } => {
            let source = match import {
                Some(report) => KernelSource::Report(report),
                None => KernelSource::Live {
                    gpu,
                    run: NcuRun { program: ncu, launch_skip, launch_count, timeout: seconds("--timeout", timeout)? },
                },
            };
            kernels(&workload, source, output.as_deref(), store)
        }
        ProfileCommand::Segments { workload, batches, procs, gpu, whole_gpu, duration, model } => {
            let duration = seconds("--duration", duration)?;
            let request = SegmentsRequest { workload, batches, procs, gpu, whole_gpu, duration, model };
            super::segments::run(request, store)
        }
        ProfileCommand::Run { workload, gpu, duration, interval_ms } => run_alone(
            &workload,
            gpu,
            seconds("--duration", duration)?,
            Duration::from_millis(interval_ms.max(1)),
            store,
        ),
        ProfileCommand::Colocate { workloads, gpu, mig, duration, active_thread_percentage } => {
            let device = mig.map_or(DeviceTarget::Gpu(gpu), DeviceTarget::Mig);
            colocate(&workloads, &device, seconds("--duration", duration)?, active_thread_percentage, store)
        }
    }
}

/// `FLAG S` as a duration: positive and finite, at most a day.
fn seconds(flag: &str, value: f64) -> Result<Duration> {
    if !(value.is_finite() && value > 0.0 && value <= 86_400.0) {
        bail!("{flag} {value}: must be a number of seconds above 0 and at most 86400");
    }
    Ok(Duration::from_secs_f64(value))
}

/// `tessera profile run`: a registered workload alone on GPU `gpu`; its
/// system metrics are stored with the kernel metrics already stored for
/// it (zeros when none).
fn run_alone(name: &str, gpu: u32, duration: Duration, interval: Duration, store: Option<&Path>) -> Result<()> {
    let path = store_path(store)?;
    let mut store = open_existing(&path)?;
    let registered = store.registered_workload(name)?;
    let command = registered.command_line();
    // Opening NVML first: without a driver, fail before starting anything.
    let mut sampler = NvmlSampler::open(gpu)?;
    let mut launcher = ShellLauncher::on(&DeviceTarget::Gpu(gpu));

    let count = duration.as_nanos().div_ceil(interval.as_nanos()).max(1) as u64;
    let bar = Progress::bar(count, "samples", format!("{name} on GPU {gpu}"));
    let measured = measure_alone(
        &mut sampler,
        &mut launcher,
        &command,
        registered.throughput_regex.as_deref(),
        duration,
        interval,
        &mut |n, sample| {
            bar.set_position(n as u64 + 1);
            bar.set_message(format!(
                "SM {:.0}%  mem {:.0}%  {:.1} GB",
                sample.sm_util_pct,
                sample.mem_util_pct,
                sample.memory_used_bytes as f64 / 1e9
            ));
        },
    );
    drop(bar);
    let measured = measured?;

    let stored = store.load_workloads()?.into_iter().find(|w| w.workload == name);
    let kernel_note = match &stored {
        Some(_) => "kernel metrics: kept from the stored workload".to_string(),
        None => format!(
            "kernel metrics: none stored for {name}, stored as zeros (measure them with `tessera profile kernels {name}`)"
        ),
    };
    let metrics = WorkloadMetrics {
        workload: name.to_string(),
        kernel: stored.map_or([0.0; 6], |w| w.kernel),
        exclusive_rps: measured.exclusive_rps,
        sm_util_pct: measured.sm_util_pct,
        mem_util_pct: measured.mem_util_pct,
        memory_gb: measured.peak_memory_gb,
    };
    store.import_workloads(std::slice::from_ref(&metrics), &format!("tessera profile run {name} --gpu {gpu}"))?;

    let mut table = TextTable::new(&["metric", "value"]);
    table.row(vec!["throughput (samples/s)".into(), format_value(metrics.exclusive_rps)]);
    table.row(vec!["SM utilisation, mean (%)".into(), format_value(metrics.sm_util_pct)]);
    table.row(vec!["memory utilisation, mean (%)".into(), format_value(metrics.mem_util_pct)]);
    table.row(vec!["peak memory (GB)".into(), format_value(metrics.memory_gb)]);
    table.row(vec!["samples".into(), measured.samples.to_string()]);
    out!("{}", table.render())?;
    outln!("{kernel_note}")?;
    outln!("stored workload {name} in {}", path.display())?;
    Ok(())
}

/// `tessera profile colocate`: registered workloads together under a
/// private MPS daemon on `device`; the colocation is stored with each
/// member's stored metrics alone.
fn colocate(
    names: &[String],
    device: &DeviceTarget,
    duration: Duration,
    active_thread_percentage: Option<u32>,
    store: Option<&Path>,
) -> Result<()> {
    if names.len() < 2 {
        bail!("a colocation needs at least two workloads");
    }
    let path = store_path(store)?;
    let mut store = open_existing(&path)?;
    let registered = names.iter().map(|name| store.registered_workload(name)).collect::<Result<Vec<_>, _>>()?;
    let stored = store.load_workloads()?;
    let alone = names
        .iter()
        .map(|name| {
            stored.iter().find(|w| &w.workload == name && w.exclusive_rps > 0.0).cloned().with_context(|| {
                format!("workload {name} has no throughput alone in the store: run `tessera profile run {name}` first")
            })
        })
        .collect::<Result<Vec<_>>>()?;
    // Without a driver or the device, fail before starting anything.
    check_device(device)?;

    let commands: Vec<String> = registered.iter().map(|w| w.command_line()).collect();
    let with_regex: Vec<(&str, Option<&str>)> =
        commands.iter().zip(&registered).map(|(c, w)| (c.as_str(), w.throughput_regex.as_deref())).collect();
    let scratch =
        tempfile::Builder::new().prefix("tessera-mps-").tempdir().context("cannot create the MPS directories")?;
    let mps = MpsDirs {
        pipe_dir: scratch.path().join("pipe"),
        log_dir: scratch.path().join("log"),
        device: Some(device.clone()),
    };
    let spinner = Progress::spinner(format!("{} under MPS on {device}", names.join(" + ")));
    let measured = measure_colocation(
        &mut SystemRunner,
        &mut ShellLauncher::on(device),
        &with_regex,
        &mps,
        duration,
        active_thread_percentage,
    );
    drop(spinner);
    let throughputs = measured?;

    let colocation = Colocation {
        members: alone
            .into_iter()
            .zip(&throughputs)
            .map(|(metrics, &colocated_rps)| GroupMember { metrics, colocated_rps })
            .collect(),
    };
    let target = match device {
        DeviceTarget::Gpu(index) => format!("--gpu {index}"),
        DeviceTarget::Mig(uuid) => format!("--mig {uuid}"),
    };
    let mut source = format!("tessera profile colocate {} {target}", names.join(" "));
    if let Some(p) = active_thread_percentage {
        source.push_str(&format!(" --active-thread-percentage {p}"));
    }
    store.import_colocations(std::slice::from_ref(&colocation), &source)?;

    let mut table = TextTable::new(&["workload", "alone (samples/s)", "colocated (samples/s)", "retained"]);
    for member in &colocation.members {
        table.row(vec![
            member.metrics.workload.clone(),
            format_value(member.metrics.exclusive_rps),
            format_value(member.colocated_rps),
            format!("{:.1}%", 100.0 * member.retained_fraction()),
        ]);
    }
    out!("{}", table.render())?;
    outln!("total colocated throughput {} samples/s", format_value(colocation.total_rps()))?;
    outln!("stored the colocation in {}", path.display())?;
    Ok(())
}

/// The store at `path`, which must exist (workloads are registered first).
pub(super) fn open_existing(path: &Path) -> Result<Store> {
    if !path.exists() {
        bail!("no store at {}; register workloads with `tessera workload add` first", path.display());
    }
    Ok(Store::open(path)?)
}

/// Where `tessera profile kernels` gets its report.
enum KernelSource {
    /// An existing `ncu --csv` report.
    Report(PathBuf),
    /// The registered workload run under ncu on GPU `gpu`.
    Live { gpu: u32, run: NcuRun },
}

/// `tessera profile kernels`: KACE's six kernel metrics of one workload,
/// stored with its metrics alone (which must be stored already) and
/// optionally written as `DIR/output_<workload>_ncu_total.csv`.
fn kernels(workload: &str, source: KernelSource, output: Option<&Path>, store: Option<&Path>) -> Result<()> {
    check_workload_name(workload)?;
    let path = store_path(store)?;
    let mut store = open_existing(&path)?;
    // Kernel metrics are stored with the metrics alone; checked before the
    // (possibly long) profiled run.
    let stored = store.load_workloads()?.into_iter().find(|w| w.workload == workload).with_context(|| {
        format!(
            "workload {workload} has no metrics alone in {}: run `tessera profile run {workload}` first \
             (kernel metrics are stored with them)",
            path.display()
        )
    })?;
    let (metrics, origin) = match source {
        KernelSource::Report(report) => {
            let text = std::fs::read_to_string(&report).with_context(|| format!("cannot read {}", report.display()))?;
            let metrics = aggregate_report(&text, &report.display().to_string())?;
            (metrics, format!("tessera profile kernels {workload} --import {}", report.display()))
        }
        KernelSource::Live { gpu, run } => {
            let command = store.registered_workload(workload)?.command_line();
            let spinner = Progress::spinner(format!(
                "{workload} under Nsight Compute on GPU {gpu} ({} launches after {})",
                run.launch_count, run.launch_skip
            ));
            let profiled = profile_live(&mut ShellLauncher::default(), &DeviceTarget::Gpu(gpu), &command, &run);
            drop(spinner);
            (profiled?, format!("tessera profile kernels {workload} --gpu {gpu}"))
        }
    };
    store.import_workloads(&[WorkloadMetrics { kernel: metrics, ..stored }], &origin)?;

    let mut table = TextTable::new(&["metric", "value"]);
    for (name, value) in KERNEL_METRIC_NAMES.iter().zip(metrics) {
        table.row(vec![name.to_string(), format_value(value)]);
    }
    out!("{}", table.render())?;
    if let Some(dir) = output {
        let file: PathBuf = dir.join(format!("output_{workload}_ncu_total.csv"));
        tessera_store::write_atomic(&file, kernel_table_csv(workload, &metrics).as_bytes())?;
        outln!("wrote {}", file.display())?;
    }
    outln!("stored the kernel metrics of {workload} in {}", path.display())?;
    Ok(())
}

/// A workload name usable as `Type` and inside a file name.
fn check_workload_name(workload: &str) -> Result<()> {
    let bad = workload.is_empty()
        || workload.trim() != workload
        || workload.chars().any(|c| c.is_control() || matches!(c, '/' | '\\' | ',' | '"'));
    if bad {
        bail!("workload '{workload}': a workload name must be non-empty, without spaces around it, '/', '\\', ',' or '\"'");
    }
    Ok(())
}

/// Two decimals for percentages and fractional values; integers as they are.
pub(super) fn format_value(value: f64) -> String {
    if value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.2}")
    }
}
