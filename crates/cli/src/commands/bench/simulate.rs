//! `tessera bench simulate`: quality and speed of the oversubscription
//! simulator and its schedulers, on traces from `simulate generate`.

use std::time::Instant;

use anyhow::Result;
use tessera_core::text::count;
use tessera_sim::{generate, GenerateParams, Link};
use tessera_sim::{lower_bound_ns, simulate, Eviction, Policies, Prefetch, Retention, Trace};
use tessera_sim::{plan_schedule, GeneticParams, SchedulerKind, EXHAUSTIVE_MAX_OPERATIONS};

use crate::output::outln;
use crate::table::TextTable;

/// Requested oversubscriptions of the sweep (persistent data over the memory
/// left beside the largest scratch; see `Trace::oversubscription`).
const OVERSUBSCRIPTION: [f64; 4] = [1.0, 2.0, 4.0, 8.0];
/// Clients and operations per client of each sweep trace: enough clients
/// that 8× can be reached (few clients cap it; see `generate`).
const SWEEP_CLIENTS: usize = 16;
const SWEEP_OPERATIONS: usize = 3;
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
    Policies { eviction: Eviction::Belady, prefetch, retention: Retention::ReleaseAfterLastUse }
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
    let mut header = vec!["scheduler".to_string(), "prefetch".to_string()];
    header.extend(cells.iter().map(|(o, r)| format!("{o}×/{r}")));
    let mut table = TextTable::new(&header.iter().map(String::as_str).collect::<Vec<_>>());
    for (name, kind) in &schedulers {
        for (prefetch_name, prefetch) in PREFETCH {
            let mut row = vec![name.to_string(), prefetch_name.to_string()];
            for cell in &traces {
                let mut ratio = 0.0;
                for (trace, bound) in cell {
                    ratio += makespan_ns(trace, prefetch, kind)? as f64 / *bound as f64;
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

/// Events per second of the simulator, and a full 100 × 200 genetic search
/// on 50 clients.
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
    let full = GeneticParams { patience: usize::MAX, ..GeneticParams::default() };
    let start = Instant::now();
    let ga = makespan_ns(&trace, prefetch, &SchedulerKind::Genetic(full))?;
    let fifo = makespan_ns(&trace, prefetch, &SchedulerKind::Fifo)?;
    outln!(
        "genetic algorithm 100 × 200 on 50 clients × 4 operations: {:.2} s; makespan {:.1} ms vs round-robin {:.1} ms",
        start.elapsed().as_secs_f64(),
        ga as f64 / 1e6,
        fifo as f64 / 1e6
    )?;
    Ok(())
}
