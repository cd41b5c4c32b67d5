//! `tessera profile …`: measure workloads on a GPU.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use tessera_core::colocation::KERNEL_METRIC_NAMES;
use tessera_gpu::ncu::{aggregate_report, kernel_table_csv, NCU_METRICS};

use crate::args::ProfileCommand;
use crate::table::TextTable;

/// Runs `tessera profile …`.
pub fn run(command: ProfileCommand) -> Result<()> {
    match command {
        ProfileCommand::Kernels { import, workload, output } => {
            kernels(import.as_deref(), &workload, output.as_deref())
        }
    }
}

/// `tessera profile kernels`: KACE's six kernel metrics of one workload from
/// an Nsight Compute report; optionally written as
/// `DIR/output_<workload>_ncu_total.csv`.
fn kernels(import: Option<&Path>, workload: &str, output: Option<&Path>) -> Result<()> {
    check_workload_name(workload)?;
    let Some(report) = import else {
        bail!(
            "live profiling with ncu is not available yet: run `ncu --csv --metrics {}` on the workload and pass the report with --import",
            NCU_METRICS.join(",")
        );
    };
    let text = std::fs::read_to_string(report).with_context(|| format!("cannot read {}", report.display()))?;
    let metrics = aggregate_report(&text, &report.display().to_string())?;

    let mut table = TextTable::new(&["metric", "value"]);
    for (name, value) in KERNEL_METRIC_NAMES.iter().zip(metrics) {
        table.row(vec![name.to_string(), format_value(value)]);
    }
    print!("{}", table.render());
    if let Some(dir) = output {
        let path: PathBuf = dir.join(format!("output_{workload}_ncu_total.csv"));
        tessera_store::write_atomic(&path, kernel_table_csv(workload, &metrics).as_bytes())?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

/// A workload name usable as `Type` and inside a file name.
fn check_workload_name(workload: &str) -> Result<()> {
    let bad = workload.is_empty()
        || workload.trim() != workload
        || workload.chars().any(|c| c.is_control() || matches!(c, '/' | '\\' | ',' | '"'));
    if bad {
        bail!("--workload '{workload}': a workload name must be non-empty, without spaces around it, '/', '\\', ',' or '\"'");
    }
    Ok(())
}

/// Two decimals for percentages and fractional values; integers as they are.
fn format_value(value: f64) -> String {
    if value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.2}")
    }
}
