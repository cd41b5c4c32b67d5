//! `tessera colocate evaluate | import | list | remove | train | recommend | suggest`.

use std::path::Path;

use anyhow::{bail, Context, Result};
use tessera_colocate::{check_query, recommend_trained, suggest, Query, Ranking, Risk, Search, SuggestQuery};
use tessera_colocate::{evaluate as evaluate_policies, holdout_folds, measured_sizes, p3_folds, tuned_on_test};
use tessera_colocate::{Basis, Composition, Suggestion, TrainedModel};
use tessera_colocate::{ModelFile, ModelKind, Policy, PolicyScores, Protocol, Split};
use tessera_core::text::count;
use tessera_core::{Colocation, WorkloadMetrics};
use tessera_store::{read_colocations, read_workload_tables, ColocationImport, Store, StoreError};
use tessera_store::{TESTING_FILE, TRAINING_FILE};

use crate::args::{ColocateCommand, ColocationSource, ListFormat};
use crate::inputs::{open_existing, store_path};
use crate::output::{note, out, outln};
use crate::progress::Progress;
use crate::table::TextTable;
use crate::terminal::wrap_words;

pub fn run(command: ColocateCommand, store: Option<&Path>) -> Result<()> {
    match command {
        ColocateCommand::Evaluate { protocol, splits, data, group_sizes, tuned_on_test, seed, format } => {
            let sizes: Option<Vec<usize>> = group_sizes.map(|sizes| sizes.iter().map(|&k| k as usize).collect());
            evaluate(protocol, splits.as_deref(), data.as_deref(), sizes.as_deref(), tuned_on_test, seed, format)
        }
        ColocateCommand::Import { data, system_metrics, kernel_metrics } => {
            import(&data, system_metrics.as_deref().zip(kernel_metrics.as_deref()), store)
        }
        ColocateCommand::List { format } => list(store, format),
        ColocateCommand::Remove { ids, source } => remove(store, &ids, source.as_deref()),
        ColocateCommand::Train { model, data, seed, output } => {
            let (rows, _) = load_data(data.as_deref(), store)?;
            let trained = train(model, &rows, seed)?;
            let summary = training_summary(&trained);
            let file = ModelFile::new(trained, rows.len());
            tessera_store::write_atomic(&output, file.to_json().as_bytes())?;
            outln!(
                "trained {} on {} colocations into {} ({summary})",
                file.model.as_model().name(),
                rows.len(),
                output.display()
            )?;
            Ok(())
        }
        ColocateCommand::Recommend { target, candidates, group_size, source, gpu_memory_gb, top, risk, format } => {
            let query = Query {
                target: &target,
                candidates: candidates.as_deref(),
                group_size: group_size as usize,
                gpu_memory_gb,
                top: usize::try_from(top).unwrap_or(usize::MAX),
                search: None,
            };
            let (_, pool, trained) = model_and_data(&source, store, &|pool| Ok(check_query(pool, &query)?))?;
            let ranking = recommend_trained(&trained, &pool, &query, risk)?;
            if let Search::Beam { width } = ranking.search {
                note(format_args!(
                    "{} candidate groups are too many to score each: a beam search (partners added one at a time, \
                     the {width} best partial groups kept) scored {}, so the best group shown may not be the best",
                    ranking.candidate_groups, ranking.scored_groups
                ));
            }
            if ranking.basis != Basis::Measured {
                note(format_args!("{}", trained.basis_in_words(query.group_size)));
            }
            match (&ranking.fallback, ranking.novelty) {
                (Some(fallback), _) => {
                    note(format_args!("{}; the predictions shown are the model's", fallback.describe(query.group_size)))
                }
                (None, Some((novelty, tested))) if novelty > 0.0 => note(format_args!(
                    "{target}'s novelty to the training workloads is {novelty:.2}; the model was tested on the inner \
                     folds of its training data up to {tested:.2}"
                )),
                _ => {}
            }
            if let Some(range) = &ranking.out_of_range {
                note(format_args!(
                    "{target}'s {} ({}) lies outside the training range ({} to {}): its predictions extrapolate",
                    range.metric,
                    readable(range.value),
                    readable(range.min),
                    readable(range.max)
                ));
            }
            match format {
                ListFormat::Json => outln!("{}", serde_json::to_string_pretty(&ranking.groups)?)?,
                ListFormat::Table => out!("{}", recommendations_table(&trained, risk, &ranking))?,
            }
            Ok(())
        }
        ColocateCommand::Suggest { budget, group_size, source, gpu_memory_gb, format } => {
            let (rows, pool, trained) = model_and_data(&source, store, &|_| Ok(()))?;
            let query = SuggestQuery {
                group_size: group_size as usize,
                budget: usize::try_from(budget).unwrap_or(usize::MAX),
                gpu_memory_gb,
            };
            let suggestions = suggest(&trained, &pool, &rows, &query)?;
            match format {
                ListFormat::Json => outln!("{}", serde_json::to_string_pretty(&suggestions)?)?,
                ListFormat::Table => out!("{}", suggestions_table(&suggestions, pool.len(), group_size))?,
            }
            Ok(())
        }
    }
}

fn train(kind: ModelKind, rows: &[Colocation], seed: u64) -> Result<TrainedModel> {
    let _progress = Progress::spinner(format!("training on {}", count(rows.len(), "colocation")));
    Ok(TrainedModel::train(kind, rows, Protocol::Lofo, seed)?)
}

/// The colocations and workloads of `source` (its file or the store), and
/// its model file's model or the slowdown model trained on them; `check`
/// sees the workloads first (a query that cannot be answered fails before
/// any training).
fn model_and_data(
    source: &ColocationSource,
    store: Option<&Path>,
    check: &dyn Fn(&[WorkloadMetrics]) -> Result<()>,
) -> Result<(Vec<Colocation>, Vec<WorkloadMetrics>, TrainedModel)> {
    let (rows, pool) = load_data(source.data.as_deref(), store)?;
    check(&pool)?;
    let model = match &source.model {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
            ModelFile::from_json(&text).with_context(|| path.display().to_string())?.model
        }
        None => train(ModelKind::Slowdown, &rows, 0)?,
    };
    Ok((rows, pool, model))
}

/// What training chose, in a few words.
fn training_summary(model: &TrainedModel) -> String {
    let selection = &model.selection;
    let calibrated: Vec<String> = selection
        .calibrations
        .iter()
        .filter(|c| c.quantile.is_finite())
        .map(|c| format!("groups of {} on {} held-out predictions", c.group_size, c.samples))
        .collect();
    let level = 100.0 * selection.calibrations.first().map_or(tessera_colocate::INTERVAL_LEVEL, |c| c.level);
    let intervals = if calibrated.is_empty() {
        let samples: usize = selection.calibrations.iter().map(|c| c.samples).sum();
        format!("no intervals: {samples} held-out predictions are too few")
    } else {
        format!("{level:.0}% intervals calibrated for {}", calibrated.join(", "))
    };
    let sizes: Vec<String> = model.sizes.iter().map(usize::to_string).collect();
    let trained = format!("groups of {} measured", sizes.join(", "));
    let folds = count(selection.inner_folds, "inner LOFO fold");
    let fallbacks: Vec<String> = selection
        .fallbacks
        .iter()
        .filter_map(|f| f.rule.map(|rule| format!("the rule '{}' chooses groups of {}", rule.name(), f.group_size)))
        .collect();
    let fallbacks = if fallbacks.is_empty() { String::new() } else { format!("; {}", fallbacks.join(", ")) };
    if selection.chosen.is_empty() {
        return format!("{trained}; {intervals} on {folds}");
    }
    format!(
        "{trained}; averaging {} chosen on {folds}; {intervals}{fallbacks}",
        count(selection.chosen.len(), "configuration")
    )
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
        outln!("imported the system metrics of {count} measured workloads from {}", system.display())?;
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
                let [imported_at, source] = crate::table::provenance_cells(&s.imported_at, &s.source);
                table.row(vec![s.id.to_string(), names.join(" + "), rates.join(" / "), imported_at, source]);
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
/// prediction and its interval against taking turns, what each member
/// keeps, memory, and what drove the prediction), wrapped to the terminal.
fn recommendations_table(model: &TrainedModel, risk: Risk, ranking: &Ranking) -> String {
    let name = model.as_model().name();
    let size = ranking.groups.first().map_or(2, |r| r.members.len());
    let level = 100.0 * model.selection.calibration(size).level;
    let ranked_by = match (&ranking.fallback, risk) {
        (Some(fallback), _) => format!("ranked by the rule '{}'", fallback.rule.name()),
        (None, Risk::Mean) => "ranked by the predicted total".to_string(),
        (None, Risk::Lower) => format!("ranked by the lower end of the {level:.0}% interval"),
    };
    let heading = format!(
        "model {name}, {ranked_by}; throughput in samples/s, [{level:.0}% interval]; retained: the target first"
    );
    let mut out = wrap_words(&heading, "", "");
    out.push('\n');
    let ranked = &ranking.groups;
    for (rank, r) in ranked.iter().enumerate() {
        let partners: Vec<&str> = r.members[1..].iter().map(|m| m.workload.as_str()).collect();
        let retained: Vec<String> = r
            .members
            .iter()
            .map(|m| match (m.retained, m.clipped_from) {
                (None, _) => "—".to_string(),
                (Some(f), None) => format!("{f:.2}"),
                (Some(f), Some(raw)) => format!("{f:.2} (clipped from {raw:.2})"),
            })
            .collect();
        let fits = if r.exceeds_memory { "does NOT fit" } else { "fits" };
        let interval = r.interval_rps.map_or_else(String::new, |[lower, upper]| format!(" [{lower:.1}, {upper:.1}]"));
        let risky = if r.may_lose_to_time_sharing { "; MAY LOSE to taking turns" } else { "" };
        let novelty = r.novelty.map_or_else(String::new, |n| format!("; novelty {n:.2}"));
        let lines = [
            format!("{}. {}", rank + 1, partners.join(" + ")),
            format!(
                "predicted {:.1}{interval} (alone {:.1}, {:.2}× taking turns{risky}); retained {}; memory {:.1} GB, \
                 {fits}{novelty}",
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
    if ranked.iter().any(|r| r.may_lose_to_time_sharing) {
        out.push_str(&wrap_words(
            "\nMAY LOSE: the interval reaches below what the members give taking turns on the GPU",
            "",
            "",
        ));
        out.push('\n');
    }
    if ranked.iter().flat_map(|r| &r.members).any(|m| m.clipped_from.is_some()) {
        out.push_str(&wrap_words(
            "\nclipped: the model predicted the member keeps more than alone; a workload does not run faster beside \
             partners (measured fractions above 1 are measurement noise, which the model learned), so it counts as 1",
            "",
            "",
        ));
        out.push('\n');
    }
    if ranked.iter().flat_map(|r| &r.members).any(|m| m.retained.is_none()) {
        out.push_str(&format!(
            "\n— : the {name} model predicts only a group's total throughput, not what each member keeps\n"
        ));
    }
    out
}

/// The suggested measurements for people.
fn suggestions_table(suggestions: &[Suggestion], workloads: usize, group_size: u64) -> String {
    if suggestions.is_empty() {
        return format!(
            "every group of {group_size} of the {} that fits is measured: nothing to suggest\n",
            count(workloads, "workload")
        );
    }
    let mut out = String::from("measure next, most useful first; throughput in samples/s, [90% interval]\n");
    for (rank, s) in suggestions.iter().enumerate() {
        let improves = if s.could_improve.is_empty() {
            "no workload's best choice depends on it".to_string()
        } else {
            format!("could improve the choice for {}", s.could_improve.join(", "))
        };
        out.push('\n');
        out.push_str(&wrap_words(&format!("{}. {}", rank + 1, s.workloads.join(" + ")), "", "   "));
        out.push('\n');
        let prediction = format!(
            "predicted {:.1} [{:.1}, {:.1}]; {improves}",
            s.predicted_total_rps, s.interval_rps[0], s.interval_rps[1]
        );
        out.push_str(&wrap_words(&prediction, "   ", "   "));
        out.push('\n');
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
    group_sizes: Option<&[usize]>,
    tuned: bool,
    seed: u64,
    format: ListFormat,
) -> Result<()> {
    let folds = match protocol {
        Protocol::P3 => {
            let dir = splits.context("--splits DIR is required with --protocol p3")?;
            p3_folds(&read_splits(dir)?)
        }
        Protocol::Lowo | Protocol::Lofo | Protocol::NewFamily => {
            let path = data.context("--data FILE is required with --protocol lowo, lofo and new-family")?;
            holdout_folds(&read_rows(path)?, protocol)
        }
    };
    let measured = measured_sizes(&folds);
    let group_sizes = group_sizes.map_or_else(|| measured.clone(), <[usize]>::to_vec);
    let mut results = {
        let _progress = Progress::spinner(format!(
            "nested evaluation on {}: every fold trains and selects on its own rows",
            count(folds.len(), "fold")
        ));
        evaluate_policies(protocol, &folds, &group_sizes, Composition::Additive, &Policy::all(seed))
    };
    if tuned {
        results.push(tuned_on_test(protocol, &folds, &group_sizes, Composition::Additive));
    }
    let fold_names: Vec<&str> = folds.iter().map(|f| f.name.as_str()).collect();
    match format {
        ListFormat::Json => {
            let policies: Vec<serde_json::Value> = results
                .iter()
                .map(|r| {
                    let mut value = serde_json::to_value(r).expect("scores serialize");
                    value["tuned_on_test"] = serde_json::Value::Bool(r.name.contains("tuned on the test data"));
                    value
                })
                .collect();
            let json = serde_json::json!({
                "protocol": protocol.name(),
                "nested": true,
                "folds": fold_names,
                "measured_group_sizes": measured,
                "group_sizes": group_sizes,
                "policies": policies,
            });
            outln!("{}", serde_json::to_string_pretty(&json)?)?;
        }
        ListFormat::Table => out!("{}", scores_table(protocol, &results, &fold_names, &measured))?,
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

/// One block per group size: which groups were chosen among (measured,
/// or built from the pairs), how the default model predicted them, each
/// policy's score per split (P3) and its mean, the measured coverage of the
/// models' intervals, and how often the fallback rule chose instead of the
/// model.
fn scores_table(protocol: Protocol, results: &[PolicyScores], folds: &[&str], measured: &[usize]) -> String {
    let per_fold = protocol == Protocol::P3;
    let mut out = String::new();
    for (k, scores) in results[0].scores.iter().enumerate() {
        let size = scores.group_size;
        if scores.targets == 0 {
            let sizes: Vec<String> = measured.iter().map(usize::to_string).collect();
            note(format_args!(
                "{}: not scored (the data measured groups of {}; larger groups are built only from pairs, where every \
                 two members were measured together)",
                scores.source.describe(size),
                sizes.join(", ")
            ));
            continue;
        }
        let level = results.iter().find_map(|r| r.coverage.get(k)).map_or(90.0, |c| 100.0 * c.level);
        let coverage = format!("in {level:.0}%");
        let mut header: Vec<&str> = vec!["policy"];
        if per_fold {
            header.extend(folds);
        }
        header.extend(["mean", coverage.as_str()]);
        let mut table = TextTable::new(&header);
        for result in results {
            let scores = &result.scores[k];
            let mut row = vec![result.name.clone()];
            if per_fold {
                row.extend(scores.per_fold.iter().map(|v| format!("{v:.4}")));
            }
            row.push(format!("{:.4}", scores.mean));
            row.push(
                result
                    .coverage
                    .get(k)
                    .map_or_else(String::new, |c| format!("{:.1}% of {}", 100.0 * c.measured, c.groups)),
            );
            table.row(row);
        }
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&wrap_words(
            &format!(
                "{} nested, {} ({} scored): fraction of the best choice; in {level:.0}%: held-out groups within the \
                 model's {level:.0}% interval",
                protocol.name().to_uppercase(),
                scores.source.describe(size),
                count(scores.targets, "target")
            ),
            "",
            "",
        ));
        out.push('\n');
        out.push_str(&table.render());
        let default = &results[0];
        if let Some(basis) = scores.basis.filter(|b| *b != Basis::Measured) {
            let line = format!("{}: {}", default.name, basis.describe(size, measured));
            out.push_str(&wrap_words(&line, "", "  "));
            out.push('\n');
        }
        out.push_str(&wrap_words(&fallback_line(default, k, scores.targets), "", "  "));
        out.push('\n');
        if let Some(novelty) = default.median_novelty.get(k) {
            let line = format!(
                "{}: the targets' median novelty to their fold's training workloads {novelty:.2} (0: trained on)",
                default.name
            );
            out.push_str(&wrap_words(&line, "", "  "));
            out.push('\n');
        }
    }
    out
}

/// How often a rule chose for the default model at the `k`th size, and
/// why, in one line.
fn fallback_line(default: &PolicyScores, k: usize, targets: usize) -> String {
    let fallbacks = default.fallbacks.get(k).copied().unwrap_or(0);
    let untested = default.untested.get(k).copied().unwrap_or(0);
    match (fallbacks, untested) {
        (0, _) => format!("{}: the model chose for every target (no fallback rule)", default.name),
        (n, 0) => format!(
            "{}: a fallback rule, found better than the model on the training folds' inner folds, chose for {} of \
             the {targets}",
            default.name,
            count(n, "target")
        ),
        (n, untested) => format!(
            "{}: a fallback rule chose for {} of the {targets}: {untested} more novel than any target the model was \
             tested on in the inner folds",
            default.name,
            count(n, "target")
        ),
    }
}
