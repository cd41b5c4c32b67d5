//! `tessera profile segments`: segment profiles of a registered workload,
//! measured in the MIG instances a GPU already has (or a whole GPU) by
//! tessera-gpu's sweep, merged with the points stored before and stored.
//! With a budget, only the configurations `tessera profiles suggest` ranks
//! first (from the points stored before) are measured.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use tessera_core::text::count;
use tessera_core::{GpuModel, SourcedProfile};
use tessera_gpu::{
    installed_gpu, merge_profile, sweep_segments, NodeDriver, PointOutcome, Selection, ShellWorkloadRunner, Sweep,
    SweepEvent, SweepOptions,
};
use tessera_plan::{suggest_measurements, CompletionMethod, CompletionRequest, ProfileGrid};
use tessera_store::Store;

use super::{format_value, open_existing};
use crate::inputs::store_path;
use crate::output::{out, outln};
use crate::progress::Progress;
use crate::table::TextTable;

/// The format recorded with profiles measured here.
const FORMAT: &str = "tessera-segments";

/// What `tessera profile segments` measures.
pub struct SegmentsRequest {
    /// The registered workload.
    pub workload: String,
    /// Batch sizes.
    pub batches: Vec<u32>,
    /// MPS processes per segment.
    pub procs: Vec<u32>,
    /// The GPU's index.
    pub gpu: u32,
    /// Measure the GPU without MIG, as its largest profile.
    pub whole_gpu: bool,
    /// Time per configuration.
    pub duration: Duration,
    /// The profile's model name, when not the workload's family.
    pub model: Option<String>,
    /// Measure only this many configurations, the most wanted first.
    pub budget: Option<usize>,
}

/// Runs the sweep and stores the measured points.
pub fn run(request: SegmentsRequest, store: Option<&Path>) -> Result<()> {
    let path = store_path(store)?;
    let mut store = open_existing(&path)?;
    let registered = store.registered_workload(&request.workload)?;
    let model_name = request.model.clone().unwrap_or_else(|| registered.family.clone());

    let mut driver = NodeDriver::default();
    let selection = match request.budget {
        None => Selection::Every,
        Some(budget) => {
            let gpu_model = installed_gpu(&mut driver, request.gpu)?.gpu_model;
            let ranked = ranked_configs(&store, gpu_model, &model_name, &request)?;
            Selection::Budget { ranked, budget }
        }
    };
    let scratch =
        tempfile::Builder::new().prefix("tessera-segments-").tempdir().context("cannot create the MPS directories")?;
    let options = SweepOptions {
        workload: registered.name.clone(),
        gpu: request.gpu,
        whole_gpu: request.whole_gpu,
        sweep: Sweep {
            command_template: registered.command.clone(),
            throughput_regex: registered.throughput_regex.clone(),
            batches: request.batches.clone(),
            procs: request.procs.clone(),
            selection,
            duration: request.duration,
            mps_root: scratch.path().to_path_buf(),
        },
    };
    let mut bar = None;
    let mut printed: Result<()> = Ok(());
    let report = sweep_segments(&mut driver, &mut ShellWorkloadRunner::default(), &options, &mut |event| match event {
        SweepEvent::Targets { installed, targets, passed_over, points } => {
            for reason in passed_over {
                if printed.is_ok() {
                    printed = outln!("# passed over {reason}");
                }
            }
            let names: Vec<&str> = targets.iter().map(|t| t.label.as_str()).collect();
            let message = format!("{} on {} of {}", registered.name, names.join(", "), installed.name);
            bar = Some(Progress::bar(points as u64, "segments", message));
        }
        SweepEvent::Point { target, config, .. } => {
            if let Some(bar) = &bar {
                bar.step();
                bar.set_message(format!("last: {config} in {}", target.label));
            }
        }
    });
    drop(bar);
    printed?;
    let report = report?;

    let mut table = TextTable::new(&["size", "batch", "procs", "throughput (req/s)", "latency (ms)", "note"]);
    for (config, outcome) in &report.outcomes {
        let (throughput, latency, note) = match outcome {
            PointOutcome::Measured(point) => {
                (format_value(point.throughput_rps), format_value(point.latency_ms), String::new())
            }
            PointOutcome::Infeasible(reason) => ("-".into(), "-".into(), format!("infeasible: {reason}")),
        };
        let size = format!("{}g", config.size_gpcs);
        table.row(vec![size, config.batch.to_string(), config.procs.to_string(), throughput, latency, note]);
    }
    out!("{}", table.render())?;

    let gpu_model = report.installed.gpu_model;
    let earlier = store.load_catalog(Some(gpu_model))?;
    let merged =
        merge_profile(gpu_model, &model_name, &registered.name, &report.outcomes, earlier.get(gpu_model, &model_name))?;
    let target =
        if request.whole_gpu { format!("--gpu {} --whole-gpu", request.gpu) } else { format!("--gpu {}", request.gpu) };
    let source = format!("tessera profile segments {} {target}", registered.name);
    store.import_profiles(std::slice::from_ref(&merged.profile), &source, FORMAT)?;
    outln!(
        "stored {} of {model_name} on {gpu_model} in {} ({} kept)",
        count(merged.profile.points().len(), "point"),
        path.display(),
        count(merged.kept, "earlier point"),
    )?;
    Ok(())
}

/// Every configuration of the sweep's grid on `gpu_model`, most wanted
/// first: `tessera profiles suggest`'s order from the points of the model
/// stored before (a spread over the grid for a model without enough).
fn ranked_configs(
    store: &Store,
    gpu_model: GpuModel,
    model_name: &str,
    request: &SegmentsRequest,
) -> Result<Vec<tessera_core::SegmentConfig>> {
    let earlier = store.load_catalog(Some(gpu_model))?;
    let profile = match earlier.get(gpu_model, model_name) {
        Some(profile) => SourcedProfile::measured(profile, Vec::new())?,
        None => SourcedProfile::new(gpu_model, model_name, Vec::new(), Vec::new())?,
    };
    let grid = ProfileGrid { batches: request.batches.clone(), procs: request.procs.clone() };
    let every = grid.configs(gpu_model)?.len();
    let profiles = [profile];
    let completion = CompletionRequest { gpu_model, profiles: &profiles, grid: &grid, method: CompletionMethod::Model };
    Ok(suggest_measurements(&completion, every)?.into_iter().map(|suggestion| suggestion.config).collect())
}
