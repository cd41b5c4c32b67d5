//! `tessera bench colocate`: how long the colocation models take to train
//! on KACE's measured pairs, and how many candidate pairs they score per
//! second on one core.

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use tessera_colocate::TrainedModel;
use tessera_colocate::{ColocateError, DEFAULT_SLOWDOWN};
use tessera_core::text::count;
use tessera_core::{Colocation, GroupMember};
use tessera_store::read_colocations;

use crate::output::{out, outln};
use crate::table::TextTable;

/// Trains one kind of model.
type Trainer = fn(&[Colocation]) -> Result<TrainedModel, ColocateError>;

/// Training repetitions (the fastest is reported).
const FITS: usize = 10;

/// How long scoring is timed for.
const SCORING_TIME: Duration = Duration::from_secs(1);

pub fn run(data: &Path) -> Result<()> {
    if !data.is_file() {
        bail!("{} is absent; pass --data FILE with KACE's colocation measurements", data.display());
    }
    let rows = read_colocations(data)?.rows;
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
        [("slowdown", |rows| TrainedModel::slowdown(rows, &DEFAULT_SLOWDOWN)), ("kace", TrainedModel::kace)];
    let mut table = TextTable::new(&["model", "training rows", "fit ms (best of 10)", "pairs scored / s"]);
    for (name, fit) in trainers {
        let start = Instant::now();
        let model = fit(&rows).with_context(|| data.display().to_string())?;
        let mut best = start.elapsed();
        for _ in 1..FITS {
            let start = Instant::now();
            black_box(fit(&rows)?);
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
            format!("{:.2}", best.as_secs_f64() * 1e3),
            format!("{rate:.0}"),
        ]);
    }
    outln!("{}, {} per pass, one thread", count(pool.len(), "workload"), count(pairs.len(), "candidate pair"))?;
    out!("{}", table.render())?;
    Ok(())
}
