//! `tessera bench simulate`: quality and speed of the oversubscription
//! simulator and its schedulers, on traces from `simulate generate`: the
//! makespan of each scheduler × prefetch policy over a sweep, both lower
//! bounds and how much of the gap the memory-aware one closes, the genetic
//! algorithm against exhaustive search, and the genetic search's speed on
//! 200 and 1,000 clients (one thread and every core, and with the earlier
//! search's settings: no local search, any improvement restarts patience).

use std::time::Instant;

use anyhow::Result;
use tessera_core::text::count;
use tessera_sim::{generate, GenerateParams, Link};
use tessera_sim::{genetic_search, lower_bound_ns, memory_lower_bound_ns, simulate, Policies, Prefetch, Trace};
use tessera_sim::{plan_schedule, GeneticParams, SchedulerKind, EXHAUSTIVE_MAX_OPERATIONS};

use crate::output::outln;
use crate::table::TextTable;

/// Requested oversubscriptions of the sweep (persistent data over the memory
/// left beside the largest scratch; see `Trace::oversubscription`).
const OVERSUBSCRIPTION: [f64; 5] = [1.0, 2.0, 4.0, 8.0, 20.0];
/// Clients and operations per client of each sweep trace: enough clients
/// that 20× can be reached (few clients cap it; see `generate`).
const SWEEP_CLIENTS: usize = 64;
const SWEEP_OPERATIONS: usize = 2;
const TRANSFER_RATIO: [f64; 3] = [0.25, 1.0, 4.0];
const PREFETCH: [(&str, Prefetch); 4] = [
    ("none", Prefetch::None),
    ("passive", Prefetch::Passive),
    ("active", Prefetch::Active),
    ("lookahead:1", Prefetch::Lookahead(1)),
];

/// A small genetic search for the sweep (the CLI's default is 100 × 200).
const SWEEP_GA: GeneticParams = GeneticParams {
    population: 30,
    generations: 30,
    elite: 5,
    mutation_rate: 0.2,
    patience: 10,
    min_improvement: 1e-3,
    bytes_weight: 0.0,
    local_moves: 16,
    seed: 0,
};

fn policies(prefetch: Prefetch) -> Policies {
    Policies { prefetch, ..Policies::default() }
}

fn trace(clients: usize, operations: usize, oversubscription: f64, transfer_ratio: f64, seed: u64) -> Result<Trace> {
    let params = GenerateParams {
        clients,
        operations_per_client: operations,
        oversubscription,
        transfer_ratio,
        link: Link::PcieGen4,
        seed,
    };
    Ok(generate(&params)?)
}

fn makespan_ns(trace: &Trace, prefetch: Prefetch, kind: &SchedulerKind) -> Result<u64> {
    let schedule = plan_schedule(trace, policies(prefetch), kind, &mut |_, _| {})?;
    Ok(simulate(trace, &schedule, policies(prefetch))?.makespan_ns)
}

pub fn run(seeds: u64) -> Result<()> {
    sweep(seeds)?;
    genetic_gap()?;
    speed()
}

/// Mean makespan / lower bound per scheduler × prefetch policy and cell.
fn sweep(seeds: u64) -> Result<()> {
    let schedulers: [(&str, SchedulerKind); 4] = [
        ("fifo", SchedulerKind::Fifo),
        ("johnson", SchedulerKind::Johnson),
        ("greedy", SchedulerKind::Greedy),
        ("ga 30×30", SchedulerKind::Genetic(SWEEP_GA)),
    ];
    let cells: Vec<(f64, f64)> =
        OVERSUBSCRIPTION.iter().flat_map(|&o| TRANSFER_RATIO.iter().map(move |&r| (o, r))).collect();
    let traces: Vec<Vec<(Trace, u64)>> = cells
        .iter()
        .map(|&(o, r)| {
            (0..seeds)
                .map(|seed| {
                    let trace = trace(SWEEP_CLIENTS, SWEEP_OPERATIONS, o, r, seed)?;
                    let bound = lower_bound_ns(&trace)?;
                    Ok((trace, bound))
                })
                .collect::<Result<Vec<_>>>()
        })
        .collect::<Result<_>>()?;
    // The best makespan any scheduler × prefetch found, per trace.
    let mut best: Vec<Vec<u64>> = traces.iter().map(|cell| vec![u64::MAX; cell.len()]).collect();
    let mut header = vec!["scheduler".to_string(), "prefetch".to_string()];
    header.extend(cells.iter().map(|(o, r)| format!("{o}×/{r}")));
    let mut table = TextTable::new(&header.iter().map(String::as_str).collect::<Vec<_>>());
    for (name, kind) in &schedulers {
        for (prefetch_name, prefetch) in PREFETCH {
            let mut row = vec![name.to_string(), prefetch_name.to_string()];
            for (cell, best) in traces.iter().zip(&mut best) {
                let mut ratio = 0.0;
                for ((trace, bound), best) in cell.iter().zip(best) {
                    let makespan = makespan_ns(trace, prefetch, kind)?;
                    *best = (*best).min(makespan);
                    ratio += makespan as f64 / *bound as f64;
                }
                row.push(format!("{:.3}", ratio / cell.len() as f64));
            }
            table.row(row);
        }
    }
    outln!(
        "makespan / lower bound, mean over {} per cell ({SWEEP_CLIENTS} clients × {SWEEP_OPERATIONS} operations, PCIe Gen4,",
        count(seeds, "trace")
    )?;
    outln!("Belady eviction, data released after last use); columns: oversubscription × / transfer÷compute;")?;
    outln!("oversubscription = persistent data / memory left beside the largest scratch (above 1×, data must move)")?;
    outln!("{}", table.render())?;
    let achieved: Vec<String> = OVERSUBSCRIPTION
        .iter()
        .zip(traces.chunks(TRANSFER_RATIO.len()))
        .map(|(requested, cells)| {
            let all: Vec<f64> = cells.iter().flatten().map(|(trace, _)| trace.oversubscription()).collect();
            format!("{requested}× → {:.2}×", all.iter().sum::<f64>() / all.len() as f64)
        })
        .collect();
    outln!("achieved oversubscription, mean per column group: {}", achieved.join(", "))?;
    bounds_table(&cells, &traces, &best)
}

/// Per sweep cell: the best makespan found over both bounds, and the share
/// of the plain bound's gap the memory-aware bound closes.
fn bounds_table(cells: &[(f64, f64)], traces: &[Vec<(Trace, u64)>], best: &[Vec<u64>]) -> Result<()> {
    let mut table =
        TextTable::new(&["cell", "best / bound", "best / memory bound", "gap closed", "memory bound raised"]);
    for ((&(o, r), cell), best) in cells.iter().zip(traces).zip(best) {
        let (mut plain_ratio, mut memory_ratio, mut closed, mut gaps, mut raised) = (0.0, 0.0, 0.0, 0, 0);
        for ((trace, plain), &best) in cell.iter().zip(best) {
            let memory = memory_lower_bound_ns(trace, policies(Prefetch::Lookahead(1)))?;
            plain_ratio += best as f64 / *plain as f64;
            memory_ratio += best as f64 / memory as f64;
            if best > *plain {
                closed += (memory - plain) as f64 / (best - plain) as f64;
                gaps += 1;
            }
            raised += usize::from(memory > *plain);
        }
        let n = cell.len() as f64;
        let closed = if gaps == 0 { "no gap".to_string() } else { format!("{:.1}%", 100.0 * closed / gaps as f64) };
        table.row(vec![
            format!("{o}×/{r}"),
            format!("{:.3}", plain_ratio / n),
            format!("{:.3}", memory_ratio / n),
            closed,
            format!("{raised} of {}", cell.len()),
        ]);
    }
    outln!("best makespan found (any scheduler × prefetch above) over the plain and the memory-aware lower bound, mean per cell;")?;
    outln!("gap closed = (memory bound − bound) / (best − bound), mean over traces with a gap")?;
    outln!("{}", table.render())?;
    Ok(())
}

/// The genetic algorithm (default parameters) against exhaustive search on
/// small traces, and against its own seeds.
fn genetic_gap() -> Result<()> {
    let mut gaps = Vec::new();
    let mut worse_than_seed = 0;
    for seed in 0..30u64 {
        let trace = trace(4, 2, 2.0, 1.0, 1000 + seed)?;
        let operations: usize = trace.clients.iter().map(|c| c.operations.len()).sum();
        assert!(operations <= EXHAUSTIVE_MAX_OPERATIONS);
        let prefetch = Prefetch::Lookahead(1);
        let best = makespan_ns(&trace, prefetch, &SchedulerKind::Exhaustive)?;
        let ga =
            makespan_ns(&trace, prefetch, &SchedulerKind::Genetic(GeneticParams { seed, ..GeneticParams::default() }))?;
        let seeds = [SchedulerKind::Fifo, SchedulerKind::Johnson, SchedulerKind::Greedy]
            .iter()
            .map(|kind| makespan_ns(&trace, prefetch, kind))
            .collect::<Result<Vec<_>>>()?;
        if seeds.iter().any(|&s| ga > s) {
            worse_than_seed += 1;
        }
        gaps.push(ga as f64 / best as f64 - 1.0);
    }
    gaps.sort_by(f64::total_cmp);
    outln!(
        "genetic algorithm vs exhaustive, 30 traces of 4 clients × 2 operations (lookahead:1): median gap {:.3}%, worst {:.3}%, worse than a seed in {worse_than_seed}",
        100.0 * gaps[gaps.len() / 2],
        100.0 * gaps[gaps.len() - 1]
    )?;
    Ok(())
}

/// Events per second of the simulator.
fn speed() -> Result<()> {
    let trace = trace(50, 4, 2.0, 1.0, 7)?;
    let prefetch = Prefetch::Lookahead(1);
    let schedule = plan_schedule(&trace, policies(prefetch), &SchedulerKind::Fifo, &mut |_, _| {})?;
    let (mut events, mut runs, start) = (0u64, 0u32, Instant::now());
    while start.elapsed().as_secs_f64() < 1.0 {
        events += simulate(&trace, &schedule, policies(prefetch))?.events;
        runs += 1;
    }
    let seconds = start.elapsed().as_secs_f64();
    outln!(
        "simulator: {:.0} events/s ({} of 50 clients × 4 operations, {} events each)",
        events as f64 / seconds,
        count(runs, "run"),
        events / u64::from(runs)
    )?;
    genetic_speed()?;
    Ok(())
}

/// The genetic search (100 × up to 200) on 200 and 1,000 clients × 4
/// operations at 8×: with the earlier search's settings on one thread, and
/// as it is now on one thread and on every core.
fn genetic_speed() -> Result<()> {
    let earlier = GeneticParams { local_moves: 0, min_improvement: 0.0, ..GeneticParams::default() };
    let now = GeneticParams::default();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let runs: [(&str, GeneticParams, usize); 3] =
        [("earlier settings, 1 thread", earlier, 1), ("now, 1 thread", now, 1), ("now, every core", now, cores)];
    let mut table = TextTable::new(&[
        "clients × ops",
        "search",
        "threads",
        "wall s",
        "generations",
        "simulations",
        "resumed",
        "makespan ms",
        "gap",
        "memory gap",
    ]);
    let prefetch = Prefetch::Lookahead(1);
    for clients in [200, 1000] {
        let trace = trace(clients, 4, 8.0, 1.0, 1)?;
        let (plain, memory) = (lower_bound_ns(&trace)?, memory_lower_bound_ns(&trace, policies(prefetch))?);
        for (name, params, threads) in runs {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build()?;
            let start = Instant::now();
            let (schedule, stats) =
                pool.install(|| genetic_search(&trace, policies(prefetch), &params, &mut |_, _| {}))?;
            let seconds = start.elapsed().as_secs_f64();
            let makespan = simulate(&trace, &schedule, policies(prefetch))?.makespan_ns;
            let steps = (stats.simulated_steps + stats.resumed_steps).max(1);
            table.row(vec![
                format!("{clients} × 4"),
                name.to_string(),
                threads.to_string(),
                format!("{seconds:.2}"),
                stats.generations.to_string(),
                stats.simulations.to_string(),
                format!("{:.1}%", 100.0 * stats.resumed_steps as f64 / steps as f64),
                format!("{:.1}", makespan as f64 / 1e6),
                format!("{:.2}%", 100.0 * (makespan as f64 / plain as f64 - 1.0)),
                format!("{:.2}%", 100.0 * (makespan as f64 / memory as f64 - 1.0)),
            ]);
        }
    }
    outln!("genetic search, lookahead:1, 8× oversubscription, transfer/compute 1 (resumed: share of simulated operations skipped by resuming from a checkpoint)")?;
    outln!("{}", table.render())?;
    Ok(())
}
