//! `tessera profile kernels`: KACE's six kernel metrics of one workload,
//! from a live Nsight Compute run or an imported report.
//!
//! They are stored for the workload, registered or not: with its metrics
//! alone when those are stored, else kept until `tessera profile run`
//! stores them (so a report can be imported on a machine without a GPU).
//! With `--output DIR`, KACE's `DIR/output_<workload>_ncu_total.csv` is
//! written first (the folder is checked before anything is measured), then
//! the metrics are stored: a failure leaves the store as it was.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use tessera_core::colocation::KERNEL_METRIC_NAMES;
use tessera_gpu::{aggregate_report, profile_kernels, DeviceTarget, NcuRun, ShellWorkloadRunner};
use tessera_store::{check_kernel_table_name, kernel_table_csv, kernel_table_path, KernelMetricsStored, Store};

use super::{format_value, open_existing};
use crate::inputs::store_path;
use crate::output::{out, outln};
use crate::progress::Progress;
use crate::table::TextTable;

/// Where `tessera profile kernels` gets its report.
pub(super) enum KernelSource {
    /// An existing `ncu --csv` report.
    Report(PathBuf),
    /// The registered workload run under ncu on GPU `gpu`.
    Live { gpu: u32, run: NcuRun },
}

/// Measures or reads the kernel metrics, writes the KACE table when asked
/// and stores them.
pub(super) fn run(workload: &str, source: KernelSource, output: Option<&Path>, store: Option<&Path>) -> Result<()> {
    check_kernel_table_name(workload)?;
    if let Some(dir) = output.filter(|dir| !dir.is_dir()) {
        bail!("--output {}: no such folder (create it first); nothing was measured or stored", dir.display());
    }
    let path = store_path(store)?;
    let (metrics, origin, mut store) = match source {
        KernelSource::Report(report) => {
            let text = std::fs::read_to_string(&report).with_context(|| format!("cannot read {}", report.display()))?;
            let metrics = aggregate_report(&text, &report.display().to_string())?;
            let origin = format!("tessera profile kernels {workload} --import {}", report.display());
            (metrics, origin, Store::open(&path)?)
        }
        KernelSource::Live { gpu, run } => {
            let store = open_existing(&path)?;
            let command = store.registered_workload(workload)?.command_line();
            let spinner = Progress::spinner(format!(
                "{workload} under Nsight Compute on GPU {gpu} ({} launches after {})",
                run.launch_count, run.launch_skip
            ));
            let profiled =
                profile_kernels(&mut ShellWorkloadRunner::default(), &DeviceTarget::Gpu(gpu), &command, &run);
            drop(spinner);
            (profiled?, format!("tessera profile kernels {workload} --gpu {gpu}"), store)
        }
    };
    let written = match output {
        Some(dir) => {
            let file = kernel_table_path(dir, workload);
            tessera_store::write_atomic(&file, kernel_table_csv(workload, &metrics)?.as_bytes())?;
            Some(file)
        }
        None => None,
    };
    let stored = store.store_kernel_metrics(workload, &metrics, &origin)?;

    let mut table = TextTable::new(&["metric", "value"]);
    for (name, value) in KERNEL_METRIC_NAMES.iter().zip(metrics) {
        table.row(vec![name.to_string(), format_value(value)]);
    }
    out!("{}", table.render())?;
    if let Some(file) = written {
        outln!("wrote {}", file.display())?;
    }
    match stored {
        KernelMetricsStored::WithMetricsAlone => {
            outln!("stored the kernel metrics of {workload} in {}", path.display())?;
        }
        KernelMetricsStored::AwaitingMetricsAlone => outln!(
            "stored the kernel metrics of {workload} in {}; {workload} has no metrics alone yet: \
             `tessera profile run {workload}` on a GPU node adds them",
            path.display()
        )?,
    }
    Ok(())
}
