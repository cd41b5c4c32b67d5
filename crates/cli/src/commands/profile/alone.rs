//! `tessera profile run` (a workload alone) and `tessera profile colocate`
//! (workloads together under MPS).

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use tessera_core::colocation::{Colocation, GroupMember, WorkloadMetrics};
use tessera_gpu::{
    check_device, measure_alone, measure_group, AloneOptions, DeviceTarget, GroupOptions, MeasuredCommand, MpsDirs,
    NvmlSampler, ShellWorkloadRunner, SystemRunner,
};
use tessera_store::RegisteredWorkload;

use super::{format_value, open_existing};
use crate::inputs::store_path;
use crate::output::{out, outln};
use crate::progress::Progress;
use crate::table::TextTable;

/// How a registered workload is measured.
fn measured(workload: &RegisteredWorkload) -> MeasuredCommand {
    MeasuredCommand { command: workload.command_line(), throughput_regex: workload.throughput_regex.clone() }
}

/// `tessera profile run`: a registered workload alone on GPU `gpu`; its
/// system metrics are stored with the kernel metrics already stored for
/// it (zeros when none).
pub(super) fn run(name: &str, gpu: u32, duration: Duration, interval: Duration, store: Option<&Path>) -> Result<()> {
    let path = store_path(store)?;
    let mut store = open_existing(&path)?;
    let registered = store.registered_workload(name)?;
    // Opening NVML first: without a driver, fail before starting anything.
    let mut sampler = NvmlSampler::open(gpu)?;
    let mut workloads = ShellWorkloadRunner::on(&DeviceTarget::Gpu(gpu));
    let options = AloneOptions { workload: measured(&registered), duration, interval };

    let bar = Progress::bar(options.samples(), "samples", format!("{name} on GPU {gpu}"));
    let measured = measure_alone(&mut sampler, &mut workloads, &options, &mut |n, sample| {
        bar.set_position(n as u64 + 1);
        bar.set_message(format!(
            "SM {:.0}%  mem {:.0}%  {:.1} GB",
            sample.sm_util_pct,
            sample.mem_util_pct,
            sample.memory_used_bytes as f64 / 1e9
        ));
    });
    drop(bar);
    let measured = measured?;

    let stored = store.load_workloads()?.into_iter().find(|w| w.workload == name).map(|w| w.kernel);
    let (kernel, kernel_note) = match (stored, store.kernel_metrics_awaiting(name)?) {
        (_, Some(kernel)) => (kernel, "kernel metrics: the ones stored for it by `tessera profile kernels`".to_string()),
        (Some(kernel), None) => (kernel, "kernel metrics: kept from the stored workload".to_string()),
        (None, None) => (
            [0.0; 6],
            format!(
                "kernel metrics: none stored for {name}, stored as zeros (measure them with `tessera profile kernels {name}`)"
            ),
        ),
    };
    let metrics = WorkloadMetrics {
        workload: name.to_string(),
        kernel,
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
pub(super) fn colocate(
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

    let scratch =
        tempfile::Builder::new().prefix("tessera-mps-").tempdir().context("cannot create the MPS directories")?;
    let options = GroupOptions {
        members: registered.iter().map(measured).collect(),
        mps: MpsDirs {
            pipe_dir: scratch.path().join("pipe"),
            log_dir: scratch.path().join("log"),
            device: Some(device.clone()),
        },
        duration,
        active_thread_percentage,
    };
    let spinner = Progress::spinner(format!("{} under MPS on {device}", names.join(" + ")));
    let throughputs = measure_group(&mut SystemRunner, &mut ShellWorkloadRunner::on(device), &options);
    drop(spinner);
    let throughputs = throughputs?;

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
