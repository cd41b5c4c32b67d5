//! `tessera profiles import | list | remove | complete | suggest | export`.

use std::path::Path;

use anyhow::{bail, Context, Result};
use tessera_core::text::count;
use tessera_core::{GpuModel, SourcedProfile};
use tessera_plan::{
    complete_profiles, suggest_measurements, CompletionMethod, CompletionRequest, Feasibility, ProfileGrid,
    INTERVAL_COVERAGE,
};
use tessera_store::{read_profile_dir, read_profiles_csv, write_profiles_csv, write_sourced_profiles_csv, Store};

use crate::args::{GridArgs, ListFormat, ProfileFormat, ProfilesCommand};
use crate::inputs::{open_existing, read_sourced_profiles, store_path};
use crate::output::{emit, note, out, outln};
use crate::table::TextTable;

pub fn run(command: ProfilesCommand, store: Option<&Path>) -> Result<()> {
    let path = store_path(store)?;
    match command {
        ProfilesCommand::Import { path: input, format, gpu } => {
            let format =
                format.unwrap_or(if input.is_dir() { ProfileFormat::Parvagpu } else { ProfileFormat::Tessera });
            let (profiles, infeasible_rows) = match (format, gpu) {
                (ProfileFormat::Parvagpu, Some(gpu)) => {
                    let import = read_profile_dir(&input, gpu)?;
                    (import.catalog().iter().cloned().collect(), import.infeasible_rows())
                }
                (ProfileFormat::Parvagpu, None) => {
                    bail!("--gpu is required for ParvaGPU folders: they do not say which GPU they were measured on")
                }
                (ProfileFormat::Tessera, None) => (read_profiles_csv(&input)?, 0),
                (ProfileFormat::Tessera, Some(_)) => {
                    bail!("--gpu applies to ParvaGPU folders only; Tessera CSVs carry a gpu_model column")
                }
            };
            let mut store = Store::open(&path)?;
            let format_name = match format {
                ProfileFormat::Parvagpu => "parvagpu",
                ProfileFormat::Tessera => "tessera",
            };
            let summary = store.import_profiles(&profiles, &input.display().to_string(), format_name)?;
            outln!(
                "imported {} profiles ({} points; {} infeasible rows skipped; {} replaced) from {} into {}",
                summary.models,
                summary.points,
                infeasible_rows,
                summary.replaced_models,
                input.display(),
                path.display()
            )?;
        }
        ProfilesCommand::List { format } => {
            let summaries = if path.exists() { Store::open_read_only(&path)?.list_profiles()? } else { Vec::new() };
            match format {
                ListFormat::Json => {
                    let rows: Vec<serde_json::Value> = summaries
                        .iter()
                        .map(|s| {
                            serde_json::json!({
                                "gpu_model": s.gpu_model, "model": s.model, "points": s.points,
                                "sizes_gpcs": s.sizes_gpcs, "source": s.source, "imported_at": s.imported_at,
                            })
                        })
                        .collect();
                    outln!("{}", serde_json::to_string_pretty(&rows)?)?;
                }
                ListFormat::Table if summaries.is_empty() => {
                    outln!("no profiles in {}; import some with `tessera profiles import`", path.display())?;
                }
                ListFormat::Table => {
                    let mut table = TextTable::new(&["gpu model", "model", "points", "sizes", "imported at", "source"]);
                    for s in &summaries {
                        let [imported_at, source] = crate::table::provenance_cells(&s.imported_at, &s.source);
                        let sizes: Vec<String> = s.sizes_gpcs.iter().map(|g| format!("{g}g")).collect();
                        table.row(vec![
                            s.gpu_model.to_string(),
                            s.model.clone(),
                            s.points.to_string(),
                            sizes.join(","),
                            imported_at,
                            source,
                        ]);
                    }
                    out!("{}", table.render())?;
                }
            }
        }
        ProfilesCommand::Remove { model, gpu } => {
            let points = open_existing(&path, None)?.remove_profile(gpu, &model)?;
            outln!("removed the profile of {model} on {gpu} ({}) from {}", count(points, "point"), path.display())?;
        }
        ProfilesCommand::Complete { profiles, gpu, grid, output } => {
            complete(&profiles, gpu, &grid, output.as_deref())?;
        }
        ProfilesCommand::Suggest { profiles, gpu, budget, grid, format } => {
            suggest(&profiles, gpu, usize::try_from(budget).unwrap_or(usize::MAX), &grid, format)?;
        }
        ProfilesCommand::Export { gpu, output } => {
            if !path.exists() {
                bail!("no profile store at {}", path.display());
            }
            let catalog = Store::open_read_only(&path)?.load_catalog(gpu)?;
            let mut csv = Vec::new();
            write_profiles_csv(&mut csv, catalog.iter()).context("cannot render profiles as CSV")?;
            emit(&csv, output.as_deref())?;
        }
    }
    Ok(())
}

/// `tessera profiles complete`: the completed profiles of `gpu` as a CSV,
/// with the profiles of other GPU models in the file as they were.
fn complete(path: &Path, gpu: GpuModel, grid: &GridArgs, output: Option<&Path>) -> Result<()> {
    let measured = read_sourced_profiles(path, gpu)?;
    let grid = ProfileGrid { batches: grid.batches.clone(), procs: grid.procs.clone() };
    let request =
        CompletionRequest { gpu_model: gpu, profiles: &measured, grid: &grid, method: CompletionMethod::Model };
    let completions = complete_profiles(&request)?;
    let mut profiles: Vec<SourcedProfile> = completions.iter().map(|c| c.profile.clone()).collect();
    profiles.extend(measured.iter().filter(|p| p.gpu_model != gpu).cloned());
    let mut csv = Vec::new();
    write_sourced_profiles_csv(&mut csv, &profiles).context("cannot render the completed profiles as CSV")?;
    emit(&csv, output)?;

    let sum = |pick: &dyn Fn(&tessera_plan::ModelCompletion) -> usize| completions.iter().map(pick).sum::<usize>();
    let measured_points = sum(&|c| c.profile.points().iter().filter(|p| p.is_measured()).count());
    let predicted = sum(&|c| c.profile.points().iter().filter(|p| !p.is_measured()).count());
    let unsure = sum(&|c| c.predictions.iter().filter(|p| p.feasibility == Feasibility::Unsure).count());
    let out_of_memory = sum(&|c| c.profile.out_of_memory().len());
    note(format_args!(
        "completed {} on {gpu}: {} measured, {} predicted (planned at the conservative end of {:.0}% intervals), \
         {} measured out of memory",
        count(completions.len(), "model"),
        count(measured_points, "point"),
        count(predicted, "point"),
        100.0 * INTERVAL_COVERAGE,
        count(out_of_memory, "configuration"),
    ));
    if unsure > 0 {
        note(format_args!(
            "{} not assumed to fit in memory are left out: no measured configuration that needs as much memory \
             fits (`tessera profiles suggest` says what to measure)",
            count(unsure, "configuration"),
        ));
    }
    let others = profiles.len() - completions.len();
    if others > 0 {
        note(format_args!("{} of other GPU models are written as they were", count(others, "profile")));
    }
    Ok(())
}

/// `tessera profiles suggest`: the next `budget` configurations to measure
/// per model.
fn suggest(path: &Path, gpu: GpuModel, budget: usize, grid: &GridArgs, format: ListFormat) -> Result<()> {
    let measured = read_sourced_profiles(path, gpu)?;
    let grid = ProfileGrid { batches: grid.batches.clone(), procs: grid.procs.clone() };
    let request =
        CompletionRequest { gpu_model: gpu, profiles: &measured, grid: &grid, method: CompletionMethod::Model };
    let suggestions = suggest_measurements(&request, budget)?;
    match format {
        ListFormat::Json => {
            let rows: Vec<serde_json::Value> = suggestions
                .iter()
                .map(|s| {
                    serde_json::json!({
                        "gpu_model": gpu, "model": s.model, "size_gpcs": s.config.size_gpcs,
                        "batch": s.config.batch, "procs": s.config.procs, "reason": s.reason,
                    })
                })
                .collect();
            outln!("{}", serde_json::to_string_pretty(&rows)?)?;
        }
        ListFormat::Table if suggestions.is_empty() => {
            outln!("nothing to measure: every configuration of the grid is measured or known not to fit")?;
        }
        ListFormat::Table => {
            let mut table = TextTable::new(&["model", "size", "batch", "procs", "why"]);
            for s in &suggestions {
                table.row(vec![
                    s.model.clone(),
                    format!("{}g", s.config.size_gpcs),
                    s.config.batch.to_string(),
                    s.config.procs.to_string(),
                    s.reason.to_string(),
                ]);
            }
            out!("{}", table.render())?;
            outln!(
                "{} to measure on {gpu}; then `tessera profiles complete` predicts the rest",
                count(suggestions.len(), "configuration")
            )?;
        }
    }
    Ok(())
}
