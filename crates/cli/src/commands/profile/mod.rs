//! `tessera profile …`: measure workloads on a GPU. Each subcommand builds
//! the options of a tessera-gpu operation, calls it, stores what it
//! measured and renders it; the helpers they share live here.

mod alone;
mod kernels;
mod segments;

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Result};
use tessera_gpu::{DeviceTarget, NcuRun};
use tessera_store::Store;

use crate::args::ProfileCommand;

/// Runs `tessera profile …`.
pub fn run(command: ProfileCommand, store: Option<&Path>) -> Result<()> {
    match command {
        ProfileCommand::Kernels { workload, import, gpu, ncu, launch_skip, launch_count, timeout, output } => {
            let source = match import {
                Some(report) => kernels::KernelSource::Report(report),
                None => kernels::KernelSource::Live {
                    gpu,
                    run: NcuRun { program: ncu, launch_skip, launch_count, timeout: seconds("--timeout", timeout)? },
                },
            };
            kernels::run(&workload, source, output.as_deref(), store)
        }
        ProfileCommand::Segments { workload, batches, procs, gpu, whole_gpu, duration, model, budget } => {
            let duration = seconds("--duration", duration)?;
            let budget = budget.map(|n| usize::try_from(n).unwrap_or(usize::MAX));
            let request =
                segments::SegmentsRequest { workload, batches, procs, gpu, whole_gpu, duration, model, budget };
            segments::run(request, store)
        }
        ProfileCommand::Run { workload, gpu, duration, interval_ms } => alone::run(
            &workload,
            gpu,
            seconds("--duration", duration)?,
            Duration::from_millis(interval_ms.max(1)),
            store,
        ),
        ProfileCommand::Colocate { workloads, gpu, mig, duration, active_thread_percentage } => {
            let device = mig.map_or(DeviceTarget::Gpu(gpu), DeviceTarget::Mig);
            alone::colocate(&workloads, &device, seconds("--duration", duration)?, active_thread_percentage, store)
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

/// The store at `path`, which must exist (workloads are registered first).
fn open_existing(path: &Path) -> Result<Store> {
    crate::inputs::open_existing(path, Some(crate::inputs::REGISTER_FIRST))
}

/// Two decimals for percentages and fractional values; integers as they are.
fn format_value(value: f64) -> String {
    if value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.2}")
    }
}
