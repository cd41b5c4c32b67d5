//! `tessera simulate measured`: serving runs measured on a GPU beside the
//! serving model's predictions for the same profile and arrival rate (the
//! comparison is tessera-serving's [`MeasuredServing::compare_with_model`];
//! this module reads the runs and renders it).

use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;
use tessera_core::text::percent;
use tessera_plan::DEFAULT_MARGIN;
use tessera_serving::{LevelComparison, MeasuredServing, MeasuredShared, SharedComparison};

use crate::args::{ListFormat, SimulateMeasuredArgs};
use crate::output::{emit, out};
use crate::table::TextTable;
use crate::terminal::wrap_words;

/// One run's comparison, as `--format json` writes it.
#[derive(Serialize)]
struct ComparedRun {
    /// The file it was read from.
    file: String,
    model: String,
    max_batch: u32,
    procs: u32,
    seconds: f64,
    /// The plan's capacity for the segment, where the run served it.
    #[serde(skip_serializing_if = "Option::is_none")]
    planned_capacity_rps: Option<f64>,
    levels: Vec<LevelComparison>,
}

/// A shared instance's comparison, as `--format json` writes it.
#[derive(Serialize)]
struct ComparedShared {
    /// The file it was read from.
    file: String,
    seconds: f64,
    #[serde(flatten)]
    comparison: SharedComparison,
}

/// One run's comparison, in the order the runs were given.
#[derive(Serialize)]
#[serde(untagged)]
enum Compared {
    Segment(ComparedRun),
    Shared(ComparedShared),
}

pub fn run(args: &SimulateMeasuredArgs) -> Result<()> {
    let mut compared = Vec::with_capacity(args.runs.len());
    for path in &args.runs {
        let cannot = || format!("{}: the model cannot read this run", path.display());
        compared.push(match read_measured(path)? {
            Measured::Segment(measured) => {
                let levels = measured.compare_with_model(args.simulated_runs, DEFAULT_MARGIN).with_context(cannot)?;
                Compared::Segment(ComparedRun {
                    file: path.display().to_string(),
                    model: measured.model,
                    max_batch: measured.max_batch,
                    procs: measured.procs,
                    seconds: measured.seconds,
                    planned_capacity_rps: measured.planned_capacity_rps,
                    levels,
                })
            }
            Measured::Shared(run) => Compared::Shared(ComparedShared {
                file: path.display().to_string(),
                seconds: run.seconds,
                comparison: run.compare_with_model().with_context(cannot)?,
            }),
        });
    }
    match args.format {
        ListFormat::Json => {
            let mut json = serde_json::to_vec_pretty(&compared)?;
            json.push(b'\n');
            emit(&json, None)
        }
        ListFormat::Table => {
            let (mut segments, mut shared) = (Vec::new(), Vec::new());
            for run in &compared {
                match run {
                    Compared::Segment(run) => segments.push(run),
                    Compared::Shared(run) => shared.push(run),
                }
            }
            let segments = if segments.is_empty() { String::new() } else { render(&segments, args.simulated_runs) };
            out!("{segments}{}", render_shared(&shared))
        }
    }
}

/// A run as measured: one segment, or a shared instance's members.
enum Measured {
    Segment(MeasuredServing),
    Shared(MeasuredShared),
}

/// The measured run at `path` (a shared instance's when it lists
/// `members`).
fn read_measured(path: &Path) -> Result<Measured> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let not_a_run =
        || format!("{}: not a measured serving run (examples/workloads/torch_serve.py's JSON)", path.display());
    let shared = serde_json::from_str::<serde_json::Value>(&text).is_ok_and(|json| json.get("members").is_some());
    Ok(match shared {
        true => Measured::Shared(MeasuredShared::from_json(&text).with_context(not_a_run)?),
        false => Measured::Segment(MeasuredServing::from_json(&text).with_context(not_a_run)?),
    })
}

/// A row per member of each shared instance run, then what the columns
/// mean; empty without one.
fn render_shared(runs: &[&ComparedShared]) -> String {
    if runs.is_empty() {
        return String::new();
    }
    let mut table =
        TextTable::new(&["instance", "busy", "model", "member", "req/s", "SLO", "within", "model", "p99", "model"]);
    for (number, run) in runs.iter().enumerate() {
        let busy = format!("{:.1}%", run.comparison.busy_share * 100.0);
        let model_busy = format!("{:.1}%", run.comparison.model_busy_share * 100.0);
        for member in &run.comparison.members {
            let measured = &member.measured;
            table.row(vec![
                (number + 1).to_string(),
                busy.clone(),
                model_busy.clone(),
                measured.model.clone(),
                format!("{}", measured.rate_rps),
                format!("{}", measured.slo_ms),
                format!("{:.3}%", measured.within_slo * 100.0),
                format!("{:.3}%", member.model_within_slo * 100.0),
                format!("{:.3}", measured.p99_ms),
                format!("{:.3}", member.model_p99_ms),
            ]);
        }
    }
    let legend = "shared instances run under the serialized discipline (one executor, one batch at a time, the member \
                  whose oldest request is oldest): the executor's busy share measured, then the model's (each \
                  member's rate times its batch time as profiled alone); per member its rate (req/s) and SLO (ms), \
                  the share of its requests within the SLO and its p99 (ms), measured then the serialized model's at \
                  the rates served and the batch times profiled";
    format!("\n{}{}\n", table.render(), wrap_words(legend, "", ""))
}

/// A row per measured load, then what the columns mean.
fn render(compared: &[&ComparedRun], simulated_runs: u64) -> String {
    let mut table = TextTable::new(&[
        "model",
        "batch",
        "procs",
        "load",
        "s",
        "req/s",
        "requests",
        "p50",
        "model",
        "p99",
        "model",
        "model's runs",
        "served",
        "p99.9",
        "model",
        "capacity",
    ]);
    for run in compared {
        for level in &run.levels {
            let measured = &level.measured;
            let (low, high) = level.simulated_p99_range_ms;
            table.row(vec![
                run.model.clone(),
                run.max_batch.to_string(),
                run.procs.to_string(),
                format!("{:.2}", measured.utilisation),
                format!("{}", run.seconds),
                format!("{:.0}", measured.arrived_rps),
                measured.requests.to_string(),
                format!("{:.3}", measured.p50_ms),
                format!("{:.3}", level.model_p50_ms),
                format!("{:.3}", measured.p99_ms),
                format!("{:.3}", level.model_p99_ms),
                format!("{low:.3}–{high:.3}"),
                level.model_p99_served_ms.map_or("-".to_string(), |ms| format!("{ms:.3}")),
                format!("{:.3}", measured.p999_ms),
                format!("{:.3}", level.model_p999_ms),
                format!("{:.0}", level.capacity_rps_at_measured_p99),
            ]);
        }
    }
    let legend = format!(
        "latencies in ms, measured then the model's: its exact percentiles for the measured profile (every batch's \
         mean latency, read conservatively, spread as its p99 says) at the measured rate under Poisson arrivals, and \
         the lowest–highest p99 of {simulated_runs} simulated runs as long as the measured one (one run's p99 is one \
         draw); served: the model's p99 with the dispatch gap and serving slowdown this load measured (- where it \
         measured neither); load: offered \
         rate over the full batch's throughput; capacity: the rate (req/s) the planner would route to this segment, \
         with its default margin of {}, for a p99 SLO equal to the measured p99 (at most the measured rate, or the \
         planner promises what the GPU did not deliver)",
        percent(DEFAULT_MARGIN)
    );
    format!("{}{}\n{}", table.render(), wrap_words(&legend, "", ""), render_within_slo(compared))
}

/// The loads each request was counted against an SLO at (a plan's
/// capacity served, `torch_serve.py --rate-rps --slo-ms`): the share
/// within it measured beside the model's; empty when no run counted one.
fn render_within_slo(compared: &[&ComparedRun]) -> String {
    let mut table =
        TextTable::new(&["model", "batch", "procs", "planned", "req/s", "SLO", "within", "model", "verdict"]);
    let mut rows = 0;
    for run in compared {
        for level in &run.levels {
            let measured = &level.measured;
            let (Some(slo_ms), Some(within)) = (measured.slo_ms, measured.within_slo) else { continue };
            rows += 1;
            table.row(vec![
                run.model.clone(),
                run.max_batch.to_string(),
                run.procs.to_string(),
                run.planned_capacity_rps.map_or("-".to_string(), |rps| format!("{rps:.0}")),
                format!("{:.0}", measured.arrived_rps),
                format!("{slo_ms}"),
                format!("{:.3}%", within * 100.0),
                level.model_within_slo.map_or("-".to_string(), |share| format!("{:.3}%", share * 100.0)),
                if within >= 0.99 { "kept" } else { "missed" }.to_string(),
            ]);
        }
    }
    if rows == 0 {
        return String::new();
    }
    let legend = "requests counted against an SLO (ms): planned, the rate a plan routes to the segment (req/s), where \
                  the run served it; within: the share measured within the SLO, then the model's at the measured rate; \
                  verdict: kept when at least 99% were within it (a p99 SLO, as the campaign plans)";
    format!("\n{}{}\n", table.render(), wrap_words(legend, "", ""))
}
