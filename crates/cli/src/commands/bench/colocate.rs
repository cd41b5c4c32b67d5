//! `tessera bench colocate`: how long the colocation models take to train
//! on KACE's measured pairs and how many candidate pairs they score per
//! second on one core; the nested evaluation of every model and baseline on
//! every protocol (P3, LOWO, LOFO) and group size (pairs, groups of 3 and 4
//! built from them), with the intervals' coverage and the old figures tuned
//! on the test data beside them, and again with groups built by a harsher
//! rule; the same with LOWO and LOFO on every file of groups measured
//! together (the four-way file and any other), at the sizes measured; a
//! summary of every data set, protocol and size; and the learning curve of
//! suggested against random measurements.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use tessera_colocate::TrainedModel;
use tessera_colocate::{evaluate, holdout_folds, learning_curve, learning_curve_svg, measured_sizes, p3_folds};
use tessera_colocate::{tuned_on_test, GroupSource};
use tessera_colocate::{ColocateError, Composition, CurvePoint, Fold, Policy, PolicyScores, Protocol, Rule, Split};
use tessera_core::text::count;
use tessera_core::{Colocation, GroupMember};
use tessera_store::{read_colocations, read_splits, write_atomic};

use crate::output::{note, out, outln};
use crate::progress::Progress;
use crate::table::TextTable;

/// Trains one kind of model.
type Trainer = fn(&[Colocation]) -> Result<TrainedModel, ColocateError>;

/// Training repetitions (the fastest is reported).
const FITS: usize = 3;

/// How long scoring is timed for.
const SCORING_TIME: Duration = Duration::from_secs(1);

/// Group sizes of the evaluation.
const GROUP_SIZES: [usize; 3] = [2, 3, 4];

/// Measured colocations at the learning curve's points (the last is all).
const CURVE_SIZES: [usize; 10] = [10, 20, 30, 40, 60, 80, 100, 120, 150, usize::MAX];

/// The hold-out protocols run on every file.
const HOLD_OUTS: [Protocol; 3] = [Protocol::Lowo, Protocol::Lofo, Protocol::NewFamily];

/// The four-way file `--groups` names by default (skipped when absent).
const DEFAULT_GROUPS: &str = "../shared/data/kace/four_way_1107.csv";

/// One data set, protocol and size of the summary.
struct Summary {
    /// The data set: its file name and what it holds.
    data: String,
    protocol: Protocol,
    /// Every policy's scores (the default model first).
    results: Vec<PolicyScores>,
    /// Which of the results' sizes.
    size: usize,
}

pub fn run(data: &Path, groups: &[PathBuf], splits: &Path, curve_seeds: u64, plot: Option<&Path>) -> Result<()> {
    if !data.is_file() {
        bail!("{} is absent; pass --data FILE with KACE's colocation measurements", data.display());
    }
    let rows = read_colocations(data)?.rows;
    // Every file is read before any work; the default one may be absent.
    let mut files = Vec::new();
    let mut absent = None;
    for path in groups {
        if !path.is_file() && path == Path::new(DEFAULT_GROUPS) {
            absent = Some(path);
            continue;
        }
        files.push((path, read_colocations(path)?.rows));
    }
    speed(data, &rows)?;
    if let Some(path) = absent {
        note(format_args!("{} is absent: groups measured together skipped", path.display()));
    }
    let mut summary = Vec::new();
    let mut protocols: Vec<(Protocol, Vec<Fold>)> = Vec::new();
    if splits.is_dir() {
        let splits: Vec<Split> = read_splits(splits)?
            .into_iter()
            .map(|s| Split { name: s.name, train: s.training.rows, test: s.testing.rows })
            .collect();
        protocols.push((Protocol::P3, p3_folds(&splits)));
    } else {
        note(format_args!("{} is absent: P3 skipped", splits.display()));
    }
    for protocol in HOLD_OUTS {
        protocols.push((protocol, holdout_folds(&rows, protocol)));
    }
    let name = file_name(data);
    for (protocol, folds) in &protocols {
        let what = format!("{name}{}, pairs and groups built from them", held_out(*protocol, folds));
        let results = nested(*protocol, folds, &GROUP_SIZES, &what)?;
        for &size in &GROUP_SIZES {
            summary.push(Summary { data: name.clone(), protocol: *protocol, results: results.clone(), size });
        }
    }
    for (path, rows) in &files {
        let name = file_name(path);
        for protocol in HOLD_OUTS {
            let folds = holdout_folds(rows, protocol);
            let sizes = measured_sizes(&folds);
            let what = format!("{name}{}, groups measured together", held_out(protocol, &folds));
            let results = nested(protocol, &folds, &sizes, &what)?;
            for &size in &sizes {
                summary.push(Summary { data: name.clone(), protocol, results: results.clone(), size });
            }
        }
    }
    summarize(&summary)?;
    outln!(
        "\ngroups built with multiplied slowdowns instead (a harsher assumption than the models' added delays): \
         fraction of the best choice"
    )?;
    let mut table = TextTable::new(&["protocol", "group size", "slowdown", "kace", "best rule"]);
    for (protocol, folds) in &protocols {
        let results = {
            let _progress = Progress::spinner(format!("{}: multiplied slowdowns", protocol.name().to_uppercase()));
            evaluate(*protocol, folds, &GROUP_SIZES[1..], Composition::Multiplicative, &Policy::all(0))
        };
        for (k, scores) in results[0].scores.iter().enumerate() {
            let rules = results.iter().filter(|r| Rule::ALL.iter().any(|rule| rule.name() == r.name));
            let best = rules.max_by(|a, b| a.scores[k].mean.total_cmp(&b.scores[k].mean)).expect("rules are scored");
            table.row(vec![
                protocol.name().to_uppercase(),
                scores.group_size.to_string(),
                format!("{:.4}", scores.mean),
                format!("{:.4}", results[1].scores[k].mean),
                format!("{:.4} ({})", best.scores[k].mean, best.name),
            ]);
        }
    }
    out!("{}", table.render())?;
    if curve_seeds > 0 {
        curve(&rows, curve_seeds, plot)?;
    }
    Ok(())
}

/// Training time (selection included) and scoring speed of both models.
fn speed(data: &Path, rows: &[Colocation]) -> Result<()> {
    let mut pool: Vec<_> = rows.iter().flat_map(|g| g.members.iter().map(|m| m.metrics.clone())).collect();
    pool.sort_by(|a, b| a.workload.cmp(&b.workload));
    pool.dedup_by(|a, b| a.workload == b.workload);
    let pairs: Vec<Colocation> = pool
        .iter()
        .flat_map(|a| pool.iter().map(move |b| (a, b)))
        .map(|(a, b)| Colocation {
            members: vec![
                GroupMember { metrics: a.clone(), colocated_rps: 0.0 },
                GroupMember { metrics: b.clone(), colocated_rps: 0.0 },
            ],
        })
        .collect();
    let trainers: [(&str, Trainer); 2] =
        [("slowdown", |rows| TrainedModel::slowdown(rows, 0)), ("kace", TrainedModel::kace)];
    let header = format!("train ms (best of {FITS}; selection and calibration included)");
    let mut table = TextTable::new(&["model", "training rows", header.as_str(), "pairs scored / s"]);
    for (name, fit) in trainers {
        let start = Instant::now();
        let model = fit(rows).with_context(|| data.display().to_string())?;
        let mut best = start.elapsed();
        for _ in 1..FITS {
            let start = Instant::now();
            black_box(fit(rows)?);
            best = best.min(start.elapsed());
        }
        let scorer = model.as_model();
        let (mut scored, start) = (0u64, Instant::now());
        while start.elapsed() < SCORING_TIME {
            for pair in &pairs {
                black_box(scorer.predict_total(black_box(pair)));
            }
            scored += pairs.len() as u64;
        }
        let rate = scored as f64 / start.elapsed().as_secs_f64();
        table.row(vec![
            name.to_string(),
            rows.len().to_string(),
            format!("{:.1}", best.as_secs_f64() * 1e3),
            format!("{rate:.0}"),
        ]);
    }
    outln!("{}, {} per pass, one thread", count(pool.len(), "workload"), count(pairs.len(), "candidate pair"))?;
    out!("{}", table.render())?;
    Ok(())
}

/// Which family the new-family protocol held out, in words (nothing for
/// the other protocols, which hold out each in turn).
fn held_out(protocol: Protocol, folds: &[Fold]) -> String {
    match (protocol, folds.first()) {
        (Protocol::NewFamily, Some(fold)) => format!(" (newest family: {}, the last to appear)", fold.name),
        _ => String::new(),
    }
}

/// The file name of `path`, for tables.
fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(|| path.display().to_string(), |name| name.to_string_lossy().into_owned())
}

/// The nested evaluation of one protocol on `sizes`, the old tuned figures
/// beside it, and where the slowdown model is behind; every policy's
/// scores (the tuned figures not included).
fn nested(protocol: Protocol, folds: &[Fold], sizes: &[usize], data: &str) -> Result<Vec<PolicyScores>> {
    let name = protocol.name().to_uppercase();
    let start = Instant::now();
    let mut results = {
        let _progress = Progress::spinner(format!("{name}: nested evaluation on {}", count(folds.len(), "fold")));
        evaluate(protocol, folds, sizes, Composition::Additive, &Policy::all(0))
    };
    let seconds = start.elapsed().as_secs_f64();
    let nested = results.clone();
    results.push(tuned_on_test(protocol, folds, sizes, Composition::Additive));
    let sources: Vec<String> = results[0].scores.iter().map(|s| s.source.describe(s.group_size)).collect();
    outln!(
        "\n{name} nested on {data} ({}, {seconds:.1} s): fraction of the best choice among {}; last column: % of \
         held-out groups within the 90% interval",
        count(folds.len(), "fold"),
        sources.join("; ")
    )?;
    let size_names: Vec<String> =
        sizes.iter().map(|&k| if k == 2 { "pairs".to_string() } else { format!("groups of {k}") }).collect();
    let covered = format!("covered ({})", sizes.iter().map(usize::to_string).collect::<Vec<_>>().join(" / "));
    let mut header: Vec<&str> = vec!["policy"];
    header.extend(size_names.iter().map(String::as_str));
    header.push(&covered);
    let mut table = TextTable::new(&header);
    for result in &results {
        let mut row = vec![result.name.clone()];
        row.extend(result.scores.iter().map(|s| format!("{:.4}", s.mean)));
        let coverage: Vec<String> = result.coverage.iter().map(|c| format!("{:.1}", 100.0 * c.measured)).collect();
        row.push(coverage.join(" / "));
        table.row(row);
    }
    out!("{}", table.render())?;
    let widths: Vec<String> = results[0].coverage.iter().map(|c| format!("{:.2}", c.median_relative_width)).collect();
    let joined = |values: &[usize]| values.iter().map(usize::to_string).collect::<Vec<_>>().join(" / ");
    let novelty: Vec<String> = results[0].median_novelty.iter().map(|n| format!("{n:.2}")).collect();
    outln!(
        "slowdown: median interval width over the prediction {}; fallback rule chose for {} targets ({} beyond the \
         novelty its inner folds tested); the targets' median novelty {}",
        widths.join(" / "),
        joined(&results[0].fallbacks),
        joined(&results[0].untested),
        novelty.join(" / ")
    )?;
    for line in behind(folds, &results) {
        outln!("{line}")?;
    }
    Ok(nested)
}

/// The summary: per data set, protocol and group size, the default model
/// (its targets), KACE, the highest summed SM throughput rule, the best
/// rule, random, the default model's interval coverage and fallbacks, and
/// whether it is at least as good as KACE and every rule.
fn summarize(summary: &[Summary]) -> Result<()> {
    outln!(
        "\nsummary, nested: fraction of the best choice; K: workloads per group, measured together or built from \
         the measured pairs (delays added: an assumption); SM thr.: highest summed SM throughput; novelty: the \
         targets' median novelty to their fold's training workloads (0: trained on); fallback: targets a rule \
         chose for; ahead: the default model at least as good as KACE and every rule"
    )?;
    let mut table = TextTable::new(&[
        "data",
        "K",
        "protocol",
        "targets",
        "slowdown",
        "kace",
        "SM thr.",
        "best rule",
        "random",
        "in 90%",
        "novelty",
        "fallback",
        "ahead",
    ]);
    let mut behind = 0;
    let mut best_rules: Vec<&str> = Vec::new();
    for row in summary {
        let k = row.results[0].scores.iter().position(|s| s.group_size == row.size).expect("a size evaluated");
        let ours = &row.results[0].scores[k];
        if ours.targets == 0 {
            continue;
        }
        let by_name = |name: &str| row.results.iter().find(|r| r.name == name).map_or(f64::NAN, |r| r.scores[k].mean);
        let (best_rule, best) = Rule::ALL
            .iter()
            .map(|r| (r.name(), by_name(r.name())))
            .fold(("", f64::NEG_INFINITY), |a, b| if b.1 > a.1 { b } else { a });
        if !best_rules.contains(&best_rule) {
            best_rules.push(best_rule);
        }
        let kace = by_name("kace");
        let ahead = ours.mean >= kace && ours.mean >= best;
        behind += usize::from(!ahead);
        let coverage =
            row.results[0].coverage.get(k).map_or_else(String::new, |c| format!("{:.1}%", 100.0 * c.measured));
        let how = match ours.source {
            GroupSource::Measured => "measured",
            GroupSource::BuiltFromPairs { .. } => "built",
            GroupSource::Unavailable => "none",
        };
        let marker = (b'a' + best_rules.iter().position(|r| *r == best_rule).expect("pushed above") as u8) as char;
        table.row(vec![
            row.data.clone(),
            format!("{} {how}", row.size),
            row.protocol.name().to_uppercase(),
            ours.targets.to_string(),
            format!("{:.3}", ours.mean),
            format!("{kace:.3}"),
            format!("{:.3}", by_name(Rule::HighestSmThroughput.name())),
            format!("{best:.3} ({marker})"),
            format!("{:.3}", by_name("random (expected)")),
            coverage,
            row.results[0].median_novelty.get(k).map_or_else(String::new, |n| format!("{n:.2}")),
            row.results[0].fallbacks[k].to_string(),
            if ahead { "yes".to_string() } else { "NO".to_string() },
        ]);
    }
    out!("{}", table.render())?;
    let legend: Vec<String> =
        best_rules.iter().enumerate().map(|(i, name)| format!("({}) {name}", (b'a' + i as u8) as char)).collect();
    outln!("best rule: {}", legend.join(", "))?;
    outln!(
        "the default model is {}",
        match behind {
            0 => "ahead on every row".to_string(),
            n => format!("behind on {}", count(n, "row")),
        }
    )?;
    Ok(())
}

/// Every fold and group size where the slowdown model (first) scores below
/// KACE or a rule (the policies before the tuned entry, random excluded).
fn behind(folds: &[Fold], results: &[PolicyScores]) -> Vec<String> {
    let slowdown = &results[0];
    let baselines = results[1..].iter().filter(|r| !r.name.starts_with("random") && !r.name.contains("tuned"));
    let mut lines = Vec::new();
    for (k, scores) in slowdown.scores.iter().enumerate() {
        for (f, fold) in folds.iter().enumerate().take(scores.per_fold.len()) {
            let ours = scores.per_fold[f];
            let better: Vec<String> = baselines
                .clone()
                .filter_map(|r| r.scores[k].per_fold.get(f).filter(|&&theirs| theirs > ours + 1e-9).map(|v| (r, v)))
                .map(|(r, v)| format!("{} {v:.4}", r.name))
                .collect();
            if !better.is_empty() {
                lines.push(format!(
                    "  behind on {} (K={}): slowdown {ours:.4} < {}",
                    fold.name,
                    scores.group_size,
                    better.join(", ")
                ));
            }
        }
    }
    lines
}

/// The learning curve: suggested against random measurements.
fn curve(rows: &[Colocation], seeds: u64, plot: Option<&Path>) -> Result<()> {
    let sizes: Vec<usize> = CURVE_SIZES.iter().map(|&s| s.min(rows.len())).collect();
    let seeds: Vec<u64> = (1..=seeds).collect();
    let start = Instant::now();
    let points = {
        let _progress = Progress::spinner(format!("learning curve over {}", count(seeds.len(), "seed")));
        learning_curve(rows, &sizes, &seeds)?
    };
    outln!(
        "\nlearning curve ({}, {:.1} s): the recommendation for every workload (measured totals where measured, \
         predictions elsewhere) as a fraction of the best choice",
        count(seeds.len(), "seed"),
        start.elapsed().as_secs_f64()
    )?;
    let mut table = TextTable::new(&["measured pairs", "random", "suggested"]);
    for p in &points {
        table.row(vec![p.measured.to_string(), format!("{:.4}", p.random), format!("{:.4}", p.suggested)]);
    }
    out!("{}", table.render())?;
    for goal in [0.95, 0.98, 0.99] {
        let first = |score: fn(&CurvePoint) -> f64| {
            points
                .iter()
                .find(|p| score(p) >= goal)
                .map_or_else(|| "not reached".to_string(), |p| p.measured.to_string())
        };
        outln!("pairs to reach {goal:.2}: random {}, suggested {}", first(|p| p.random), first(|p| p.suggested))?;
    }
    if let Some(path) = plot {
        let title = format!("Measuring KACE's pairs: suggested vs random ({})", count(seeds.len(), "seed"));
        write_atomic(path, learning_curve_svg(&points, &title).as_bytes())?;
        outln!("plot written to {}", path.display())?;
    }
    Ok(())
}
