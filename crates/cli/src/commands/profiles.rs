//! `tessera profiles import | list | export`.

use std::path::Path;

use anyhow::{bail, Context, Result};
use tessera_core::text::count;
use tessera_store::{read_profile_dir, read_profiles_csv, write_profiles_csv, Store};

use crate::args::{ListFormat, ProfileFormat, ProfilesCommand};
use crate::inputs::{open_existing, store_path};
use crate::output::emit;
use crate::output::{out, outln};
use crate::table::TextTable;

pub fn run(command: ProfilesCommand, store: Option<&Path>) -> Result<()> {
    let path = store_path(store)?;
    match command {
        ProfilesCommand::Import { path: input, format, gpu } => {
            let (profiles, infeasible_rows) = match (format, gpu) {
                (ProfileFormat::Parvagpu, Some(gpu)) => {
                    let import = read_profile_dir(&input, gpu)?;
                    (import.catalog().iter().cloned().collect(), import.infeasible_rows())
                }
                (ProfileFormat::Parvagpu, None) => {
                    bail!("--gpu is required for ParvaGPU folders: they do not say which GPU they were measured on")
                }
                (ProfileFormat::Native, None) => (read_profiles_csv(&input)?, 0),
                (ProfileFormat::Native, Some(_)) => {
                    bail!("--gpu applies to ParvaGPU folders only; Tessera CSVs carry a gpu_model column")
                }
            };
            let mut store = Store::open(&path)?;
            let format_name = match format {
                ProfileFormat::Parvagpu => "parvagpu",
                ProfileFormat::Native => "native",
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
                        let sizes: Vec<String> = s.sizes_gpcs.iter().map(|g| format!("{g}g")).collect();
                        table.row(vec![
                            s.gpu_model.to_string(),
                            s.model.clone(),
                            s.points.to_string(),
                            sizes.join(","),
                            s.imported_at.replacen('T', " ", 1),
                            s.source.clone(),
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
