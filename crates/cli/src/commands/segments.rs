//! `tessera profile segments`: segment profiles of a registered workload,
//! measured in the MIG instances a GPU already has (or a whole GPU).

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use tessera_core::{ModelProfile, ProfilePoint, SegmentConfig};
use tessera_gpu::deploy::model::installed_gpu;
use tessera_gpu::launch::ShellLauncher;
use tessera_gpu::mig::{read_live, MigDevices};
use tessera_gpu::nvml::NodeDriver;
use tessera_gpu::segments::{run_sweep, target_whole_gpu, targets_on_instances, PointOutcome, SegmentTarget, Sweep};

use super::profile::{format_value, open_existing};
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
}

/// Runs the sweep and stores the measured points.
pub fn run(request: SegmentsRequest, store: Option<&Path>) -> Result<()> {
    let path = store_path(store)?;
    let mut store = open_existing(&path)?;
    let registered = store.registered_workload(&request.workload)?;
    if !registered.command.contains("{batch}") && request.batches.len() > 1 {
        bail!(
            "workload {}: its command has no {{batch}} to take the batch sizes {:?}",
            registered.name,
            request.batches
        );
    }
    let model_name = request.model.clone().unwrap_or_else(|| registered.family.clone());

    let mut node = NodeDriver::default();
    let installed = installed_gpu(&mut node, request.gpu)?;
    let targets = if request.whole_gpu {
        if installed.mig_enabled {
            bail!(
                "GPU {} ({}) is in MIG mode: drop --whole-gpu to measure its MIG instances",
                request.gpu,
                installed.name
            );
        }
        vec![target_whole_gpu(installed.model, request.gpu)]
    } else {
        if !installed.mig_enabled {
            bail!(
                "GPU {} ({}) is not in MIG mode: measure it whole with --whole-gpu, or enable MIG and create instances \
                 first (Tessera never changes MIG mode)",
                request.gpu,
                installed.name
            );
        }
        let live = read_live(&mut node, request.gpu, installed.model)?;
        let devices = node.mig_devices(request.gpu)?;
        let (targets, passed_over) = targets_on_instances(installed.model, &live, &devices);
        for reason in &passed_over {
            outln!("# passed over {reason}")?;
        }
        if targets.is_empty() {
            bail!(
                "GPU {} has no MIG instance with a compute instance to measure in: create them with `nvidia-smi mig`",
                request.gpu
            );
        }
        targets
    };

    let scratch =
        tempfile::Builder::new().prefix("tessera-segments-").tempdir().context("cannot create the MPS directories")?;
    let sweep = Sweep {
        command_template: registered.command.clone(),
        throughput_regex: registered.throughput_regex.clone(),
        batches: request.batches.clone(),
        procs: request.procs.clone(),
        duration: request.duration,
        mps_root: scratch.path().to_path_buf(),
    };
    let bar = Progress::bar(
        sweep.configs(&targets).len() as u64,
        "segments",
        format!("{} on {} of {}", registered.name, target_names(&targets), installed.name),
    );
    let outcomes = run_sweep(&mut node, &mut ShellLauncher::default(), &targets, &sweep, &mut |target, config, _| {
        bar.step();
        bar.set_message(format!("last: {config} in {}", target.label));
    });
    drop(bar);
    let outcomes = outcomes?;

    let mut table = TextTable::new(&["size", "batch", "procs", "throughput (req/s)", "latency (ms)", "note"]);
    let mut measured: BTreeMap<SegmentConfig, ProfilePoint> = BTreeMap::new();
    let mut first_failure = None;
    for (config, outcome) in &outcomes {
        let cells = |throughput: String, latency: String, note: String| {
            vec![
                format!("{}g", config.size_gpcs),
                config.batch.to_string(),
                config.procs.to_string(),
                throughput,
                latency,
                note,
            ]
        };
        match outcome {
            PointOutcome::Measured(point) => {
                table.row(cells(format_value(point.throughput_rps), format_value(point.latency_ms), String::new()));
                measured.insert(*config, *point);
            }
            PointOutcome::Infeasible(reason) => {
                table.row(cells("-".into(), "-".into(), format!("infeasible: {reason}")));
                first_failure.get_or_insert(reason.clone());
            }
        }
    }
    out!("{}", table.render())?;
    if measured.is_empty() {
        bail!("no configuration of {} could be measured: {}", registered.name, first_failure.unwrap_or_default());
    }

    // Earlier points of configurations not measured now are kept.
    let earlier = store.load_catalog(Some(installed.model))?;
    let mut kept = 0;
    if let Some(profile) = earlier.get(installed.model, &model_name) {
        for point in profile.points() {
            if let Entry::Vacant(slot) = measured.entry(point.config) {
                slot.insert(*point);
                kept += 1;
            }
        }
    }
    let profile = ModelProfile::new(installed.model, model_name.clone(), measured.into_values().collect())?;
    let target =
        if request.whole_gpu { format!("--gpu {} --whole-gpu", request.gpu) } else { format!("--gpu {}", request.gpu) };
    let source = format!("tessera profile segments {} {target}", registered.name);
    store.import_profiles(std::slice::from_ref(&profile), &source, FORMAT)?;
    outln!(
        "stored {} point(s) of {model_name} on {} in {} ({kept} earlier point(s) kept)",
        profile.points().len(),
        installed.model,
        path.display()
    )?;
    Ok(())
}

fn target_names(targets: &[SegmentTarget]) -> String {
    targets.iter().map(|t| t.label.as_str()).collect::<Vec<_>>().join(", ")
}
