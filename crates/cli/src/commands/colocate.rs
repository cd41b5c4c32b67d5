//! `tessera colocate evaluate | import | train | recommend`.

use std::path::Path;

use anyhow::{bail, Context, Result};
use tessera_colocate::GbmParams;
use tessera_colocate::DEFAULT_SLOWDOWN;
use tessera_colocate::{lowo, p3, Policy, PolicyScores, Split};
use tessera_colocate::{recommend, Query, Recommendation, Search};
use tessera_colocate::{ModelFile, TrainedModel};
use tessera_core::text::count;
use tessera_core::{Colocation, WorkloadMetrics};
use tessera_store::{read_colocations, read_workload_tables, ColocationImport, Store, StoreError};
use tessera_store::{TESTING_FILE, TRAINING_FILE};

use crate::args::{ColocateCommand, ListFormat, ModelKind, Protocol};
use crate::inputs::{open_existing, store_path};
use crate::output::{note, out, outln};
use crate::table::TextTable;
use crate::terminal::wrap_words;

pub fn run(command: ColocateCommand, store: Option<&Path>) -> Result<()> {
    match command {
        ColocateCommand::Evaluate { protocol, splits, data, seed, format } => {
            evaluate(protocol, splits.as_deref(), data.as_deref(), seed, format)
        }
        ColocateCommand::Import { data, system_metrics, kernel_metrics } => {
            import(&data, system_metrics.as_deref().zip(kernel_metrics.as_deref()), store)
        }
        ColocateCommand::List { format } => list(store, format),
        ColocateCommand::Remove { ids, source } => remove(store, &ids, source.as_deref()),
        ColocateCommand::Train { model, data, seed, output } => {
            let (rows, _) = load_data(data.as_deref(), store)?;
            let trained = train(model, &rows, seed)?;
            let file = ModelFile::new(trained, rows.len());
            tessera_store::write_atomic(&output, file.to_json().as_bytes())?;
            outln!("trained {} on {} colocations into {}", file.model.as_model().name(), rows.len(), output.display())?;
            Ok(())
        }
        ColocateCommand::Recommend { target, candidates, group_size, model, data, gpu_memory_gb, top, format } => {
            let (rows, pool) = load_data(data.as_deref(), store)?;
            let trained = match model {
                Some(path) => {
                    let text =
                        std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
                    ModelFile::from_json(&text).with_context(|| path.display().to_string())?.model
                }
                None => train(ModelKind::Slowdown, &rows, 0)?,
            };
            let query = Query {
                target: &target,
                candidates: candidates.as_deref(),
                group_size: group_size as usize,
                gpu_memory_gb,
                top: usize::try_from(top).unwrap_or(usize::MAX),
                search: None,
            };
            let ranking = recommend(trained.as_model(), &pool, &query)?;
            if let Search::Beam { width } = ranking.search {
                note(format_args!(
                    "{} candidate groups are too many to score each: a beam search (partners added one at a time, \
                     the {width} best partial groups kept) scored {}, so the best group shown may not be the best",
                    ranking.candidate_groups, ranking.scored_groups
                ));
            }
            match format {
                ListFormat::Json => outln!("{}", serde_json::to_string_pretty(&ranking.groups)?)?,
                ListFormat::Table => out!("{}", recommendations_table(trained.as_model().name(), &ranking.groups))?,
            }
            Ok(())
        }
    }
}

fn train(kind: ModelKind, rows: &[Colocation], seed: u64) -> Result<TrainedModel> {
    Ok(match kind {
        ModelKind::Slowdown => TrainedModel::slowdown(rows, &GbmParams { seed, ..DEFAULT_SLOWDOWN })?,
        ModelKind::Kace => TrainedModel::kace(rows)?,
    })
}

/// Colocations and workloads from a KACE file, or from the store.
fn load_data(data: Option<&Path>, store: Option<&Path>) -> Result<(Vec<Colocation>, Vec<WorkloadMetrics>)> {
    let (rows, mut pool) = match data {
        Some(path) => {
            let rows = read_rows(path)?;
            let pool = rows.iter().flat_map(|g| g.members.iter().map(|m| m.metrics.clone())).collect();
            (rows, pool)
        }
        None => {
            let path = store_path(store)?;
            if !path.exists() {
                bail!(
                    "no store at {}; import colocations with `tessera colocate import` or pass --data FILE",
                    path.display()
                );
            }
            let store = Store::open_read_only(&path)?;
            (store.load_colocations()?, store.load_workloads()?)
        }
    };
    pool.sort_by(|a: &WorkloadMetrics, b| a.workload.cmp(&b.workload));
    pool.dedup_by(|a, b| a.workload == b.workload);
    if rows.is_empty() {
        bail!("no measured colocations to learn from");
    }
    Ok((rows, pool))
}

fn import(data: &Path, tables: Option<(&Path, &Path)>, store: Option<&Path>) -> Result<()> {
    let path = store_path(store)?;
    let rows = read_rows(data)?;
    let workloads = match tables {
        Some((system, kernels)) => Some(read_workload_tables(system, kernels)?),
        None => None,
    };
    let mut store = Store::open(&path)?;
    // The same file typed another way is the same source, whose rows an
    // import replaces.
    let source = std::fs::canonicalize(data).unwrap_or_else(|_| data.to_path_buf());
    let summary = store.import_colocations(&rows, &source.display().to_string())?;
    let skipped = match summary.already_stored {
        0 => String::new(),
        n => format!("; {n} already stored from another source, skipped"),
    };
    outln!(
        "imported {} colocations ({} members; {} replaced{skipped}) from {} into {}",
        summary.rows,
        summary.members,
        summary.replaced_rows,
        data.display(),
        path.display()
    )?;
    if let (Some(workloads), Some((system, _))) = (workloads, tables) {
        let count = store.import_workloads(&workloads, &system.display().to_string())?;
        outln!("imported {count} workloads from {}", system.display())?;
    }
    Ok(())
}

/// `colocate list`: every stored colocation with its id and source.
fn list(store: Option<&Path>, format: ListFormat) -> Result<()> {
    let path = store_path(store)?;
    let stored = if path.exists() { Store::open_read_only(&path)?.stored_colocations()? } else { Vec::new() };
    match format {
        ListFormat::Json => {
            let rows: Vec<serde_json::Value> = stored
                .iter()
                .map(|s| {
                    let members: Vec<serde_json::Value> = s
                        .colocation
                        .members
                        .iter()
                        .map(
                            |m| serde_json::json!({ "workload": m.metrics.workload, "colocated_rps": m.colocated_rps }),
                        )
                        .collect();
                    serde_json::json!({
                        "id": s.id, "source": s.source, "imported_at": s.imported_at, "members": members,
                    })
                })
                .collect();
            outln!("{}", serde_json::to_string_pretty(&rows)?)?;
        }
        ListFormat::Table if stored.is_empty() => {
            outln!("no colocations in {}; import some with `tessera colocate import`", path.display())?;
        }
        ListFormat::Table => {
            let mut table = TextTable::new(&["id", "workloads", "colocated samples/s", "imported at", "source"]);
            for s in &stored {
                let members = &s.colocation.members;
                let names: Vec<&str> = members.iter().map(|m| m.metrics.workload.as_str()).collect();
                let rates: Vec<String> = members.iter().map(|m| format!("{:.1}", m.colocated_rps)).collect();
                table.row(vec![
                    s.id.to_string(),
                    names.join(" + "),
                    rates.join(" / "),
                    s.imported_at.replacen('T', " ", 1),
                    s.source.clone(),
                ]);
            }
            out!("{}", table.render())?;
        }
    }
    Ok(())
}

/// `colocate remove`: by id, or every colocation of a source (as recorded,
/// else the canonical path of the file named, which `colocate import`
/// records).
fn remove(store: Option<&Path>, ids: &[i64], source: Option<&str>) -> Result<()> {
    let path = store_path(store)?;
    let mut store = open_existing(&path, None)?;
    let removed = match source {
        None => store.remove_colocations(ids)?,
        Some(source) => {
            let canonical = std::fs::canonicalize(source).ok().map(|file| file.display().to_string());
            match (store.remove_colocations_from(source), canonical) {
                (Err(StoreError::NotStored { .. }), Some(canonical)) if canonical != source => {
                    store.remove_colocations_from(&canonical)?
                }
                (removed, _) => removed?,
            }
        }
    };
    outln!("removed {} from {}", count(removed, "colocation"), path.display())
}

/// The ranked groups for people, one block each (the partners, then the
/// prediction against taking turns, what each member keeps, memory, and
/// what drove the prediction), wrapped to the terminal.
fn recommendations_table(model: &str, ranked: &[Recommendation]) -> String {
    let mut out = format!("model {model}; predicted throughput in samples/s; retained: the target first\n");
    for (rank, r) in ranked.iter().enumerate() {
        let partners: Vec<&str> = r.members[1..].iter().map(|m| m.workload.as_str()).collect();
        let retained: Vec<String> =
            r.members.iter().map(|m| m.retained.map_or_else(|| "—".to_string(), |f| format!("{f:.2}"))).collect();
        let fits = if r.exceeds_memory { "does NOT fit" } else { "fits" };
        let lines = [
            format!("{}. {}", rank + 1, partners.join(" + ")),
            format!(
                "predicted {:.1} (alone {:.1}, {:.2}× taking turns); retained {}; memory {:.1} GB, {fits}",
                r.predicted_total_rps,
                r.alone_total_rps,
                r.vs_time_sharing,
                retained.join(" / "),
                r.memory_gb
            ),
        ];
        out.push('\n');
        out.push_str(&wrap_words(&lines[0], "", "   "));
        out.push('\n');
        out.push_str(&wrap_words(&lines[1], "   ", "   "));
        out.push('\n');
        if !r.drivers.is_empty() {
            let drivers: Vec<String> =
                r.drivers.iter().map(|d| format!("{} = {}", d.feature, readable(d.value))).collect();
            out.push_str(&wrap_words(&format!("driven by {}", drivers.join("; ")), "   ", "   "));
            out.push('\n');
        }
    }
    if ranked.iter().flat_map(|r| &r.members).any(|m| m.retained.is_none()) {
        out.push_str(&format!(
            "\n— : the {model} model predicts only a group's total throughput, not what each member keeps\n"
        ));
    }
    out
}

/// A metric value with as many digits as a person needs.
fn readable(value: f64) -> String {
    if value.abs() >= 1e6 {
        format!("{:.2}M", value / 1e6)
    } else if value.abs() >= 1e3 {
        format!("{:.1}k", value / 1e3)
    } else {
        format!("{value:.1}")
    }
}

fn evaluate(
    protocol: Protocol,
    splits: Option<&Path>,
    data: Option<&Path>,
    seed: u64,
    format: ListFormat,
) -> Result<()> {
    let policies = Policy::all(GbmParams { seed, ..DEFAULT_SLOWDOWN });
    let (results, columns) = match protocol {
        Protocol::P3 => {
            let dir = splits.context("--splits DIR is required with --protocol p3")?;
            let splits = read_splits(dir)?;
            let names: Vec<String> = splits.iter().map(|s| s.name.clone()).collect();
            (p3(&splits, &policies), names)
        }
        Protocol::Lowo => {
            let path = data.context("--data FILE is required with --protocol lowo")?;
            (lowo(&read_rows(path)?, &policies), vec!["all".to_string()])
        }
    };
    let protocol_name = match protocol {
        Protocol::P3 => "p3",
        Protocol::Lowo => "lowo",
    };
    match format {
        ListFormat::Json => {
            let json = serde_json::json!({ "protocol": protocol_name, "policies": results });
            outln!("{}", serde_json::to_string_pretty(&json)?)?;
        }
        ListFormat::Table => out!("{}", scores_table(&results, &columns))?,
    }
    Ok(())
}

fn read_rows(path: &Path) -> Result<Vec<Colocation>> {
    Ok(noted(path, read_colocations(path)?))
}

/// The rows of `import`, read from `path`, after a note of the rows skipped.
fn noted(path: &Path, import: ColocationImport) -> Vec<Colocation> {
    if import.skipped_unmeasured > 0 {
        note(format_args!("{}: skipped {}", path.display(), count(import.skipped_unmeasured, "unmeasured row")));
    }
    import.rows
}

/// KACE's split folders under `dir`, as the evaluator's splits.
fn read_splits(dir: &Path) -> Result<Vec<Split>> {
    Ok(tessera_store::read_splits(dir)?
        .into_iter()
        .map(|split| Split {
            train: noted(&split.folder.join(TRAINING_FILE), split.training),
            test: noted(&split.folder.join(TESTING_FILE), split.testing),
            name: split.name,
        })
        .collect())
}

fn scores_table(results: &[PolicyScores], columns: &[String]) -> String {
    let mut header: Vec<&str> = vec!["policy"];
    header.extend(columns.iter().map(String::as_str));
    header.push("mean");
    let mut table = TextTable::new(&header);
    for result in results {
        let mut row = vec![result.name.clone()];
        row.extend(result.per_seed.iter().map(|v| format!("{v:.4}")));
        row.push(format!("{:.4}", result.mean));
        table.row(row);
    }
    table.render()
}
