//! The schedulers on the design notes' toys and on small random traces.

use crate::common::{trace, GB, MS};
use tessera_core::rng::SplitMix64;
use tessera_sim::{
    johnson, plan_schedule, simulate, Buffer, Client, Eviction, GeneticParams, Gpu, Operation, Policies, Prefetch,
    Retention, SchedulerKind, SimError, Trace, EXHAUSTIVE_MAX_OPERATIONS,
};

fn toy_a() -> (Trace, Policies) {
    let t = trace(6 * GB, &[("A", 2, 500.0, 1), ("B", 4, 100.0, 1), ("C", 3, 400.0, 1), ("D", 1, 200.0, 1)]);
    (t, Policies { eviction: Eviction::Lru, prefetch: Prefetch::Passive, retention: Retention::ReleaseAfterLastUse })
}

fn toy_b() -> (Trace, Policies) {
    let t = trace(6 * GB, &[("X", 4, 300.0, 2), ("Y", 2, 300.0, 2), ("Z", 2, 300.0, 2)]);
    (
        t,
        Policies {
            eviction: Eviction::Belady,
            prefetch: Prefetch::Lookahead(1),
            retention: Retention::KeepUntilEvicted,
        },
    )
}

fn plan(t: &Trace, p: Policies, kind: &SchedulerKind) -> Vec<usize> {
    let schedule = plan_schedule(t, p, kind, &mut |_, _| {}).unwrap();
    schedule.steps().iter().map(|&(c, _)| c).collect()
}

fn makespan(t: &Trace, p: Policies, kind: &SchedulerKind) -> u64 {
    let schedule = plan_schedule(t, p, kind, &mut |_, _| {}).unwrap();
    simulate(t, &schedule, p).unwrap().makespan_ns
}

fn genetic() -> SchedulerKind {
    SchedulerKind::Genetic(GeneticParams::default())
}

#[test]
fn heuristic_orders_on_the_toys() {
    let (a, pa) = toy_a();
    assert_eq!(plan(&a, pa, &SchedulerKind::Fifo), [0, 1, 2, 3]);
    assert_eq!(plan(&a, pa, &SchedulerKind::Johnson), johnson(&a).unwrap().order);
    // Weights D > A > C > B, run highest, lowest, highest, lowest.
    assert_eq!(plan(&a, pa, &SchedulerKind::Greedy), [3, 1, 0, 2]);
    let (b, pb) = toy_b();
    assert_eq!(plan(&b, pb, &SchedulerKind::Fifo), [0, 1, 2, 0, 1, 2]);
    // Per round: all copies (400, 200, 200) are within compute (300) except X's.
    assert_eq!(plan(&b, pb, &SchedulerKind::Johnson), [1, 2, 0, 1, 2, 0]);
    let greedy = plan(&b, pb, &SchedulerKind::Greedy);
    assert_eq!(greedy.len(), 6);
}

#[test]
fn toy_a_exhaustive_and_genetic_find_1400() {
    let (t, p) = toy_a();
    assert_eq!(makespan(&t, p, &SchedulerKind::Fifo) / MS, 1700);
    assert_eq!(makespan(&t, p, &SchedulerKind::Exhaustive) / MS, 1400);
    assert_eq!(makespan(&t, p, &genetic()) / MS, 1400);
}

#[test]
fn toy_b_exhaustive_finds_2100_and_genetic_at_most_2300() {
    let (t, p) = toy_b();
    let mut calls = 0;
    let exhaustive = plan_schedule(&t, p, &SchedulerKind::Exhaustive, &mut |_, _| calls += 1).unwrap();
    assert_eq!(simulate(&t, &exhaustive, p).unwrap().makespan_ns / MS, 2100);
    assert!(calls >= 1);
    let ga = makespan(&t, p, &genetic()) / MS;
    // With the default parameters it finds the optimum, 2100.
    assert!(ga <= 2300);
}

#[test]
fn genetic_reports_each_generation_and_stops_on_patience() {
    let (t, p) = toy_b();
    let params = GeneticParams { population: 20, generations: 50, patience: 5, ..GeneticParams::default() };
    let mut seen = Vec::new();
    plan_schedule(&t, p, &SchedulerKind::Genetic(params), &mut |g, best| seen.push((g, best))).unwrap();
    assert!(seen.len() <= 51);
    assert!(seen.iter().enumerate().all(|(i, &(g, _))| g == i));
    assert!(seen.windows(2).all(|w| w[1].1 <= w[0].1), "best never gets worse: {seen:?}");
    // Toy B's seeds are beaten quickly, then nothing improves: patience stops it early.
    assert!(seen.len() < 51, "{}", seen.len());
}

#[test]
fn genetic_is_deterministic_for_a_seed() {
    let mut rng = SplitMix64::new(11);
    for _ in 0..5 {
        let (t, p) = random_instance(&mut rng, 8);
        let params = GeneticParams { population: 30, generations: 30, seed: 7, ..GeneticParams::default() };
        let run = || {
            let mut log = Vec::new();
            let s = plan_schedule(&t, p, &SchedulerKind::Genetic(params), &mut |g, b| log.push((g, b))).unwrap();
            (s, log)
        };
        assert_eq!(run(), run());
    }
}

#[test]
fn exhaustive_refuses_large_traces_and_genetic_bad_parameters() {
    let t = trace(100 * GB, &[("a", 1, 1.0, 6), ("b", 1, 1.0, 5)]);
    let p = toy_a().1;
    let err = plan_schedule(&t, p, &SchedulerKind::Exhaustive, &mut |_, _| {}).unwrap_err();
    assert_eq!(err, SimError::TooManyOperations { operations: 11, max: EXHAUSTIVE_MAX_OPERATIONS });
    assert!(!err.to_string().contains('\n'));
    for params in [
        GeneticParams { population: 0, ..GeneticParams::default() },
        GeneticParams { elite: 101, ..GeneticParams::default() },
        GeneticParams { mutation_rate: 1.5, ..GeneticParams::default() },
        GeneticParams { bytes_weight: f64::NAN, ..GeneticParams::default() },
    ] {
        let err = plan_schedule(&t, p, &SchedulerKind::Genetic(params), &mut |_, _| {}).unwrap_err();
        assert!(matches!(err, SimError::GeneticParams { .. }), "{err}");
    }
    // Tiny populations and no elite still work (the best ever seen is returned).
    let params = GeneticParams { population: 1, elite: 0, generations: 3, ..GeneticParams::default() };
    plan_schedule(&t, p, &SchedulerKind::Genetic(params), &mut |_, _| {}).unwrap();
}

/// A random trace with at most `max_ops` operations (2 to 4 clients) and
/// random policies.
fn random_instance(rng: &mut SplitMix64, max_ops: usize) -> (Trace, Policies) {
    let clients = 2 + rng.below(3);
    let mut ops_left = max_ops;
    let mut all = Vec::new();
    for c in 0..clients {
        let left_for_others = clients - c - 1;
        let most = (ops_left - left_for_others).min(3);
        let n = 1 + rng.below(most);
        ops_left -= n;
        let names = 1 + rng.below(3);
        let sizes: Vec<u64> = (0..names).map(|_| (1 + rng.below(4) as u64) * GB / 2).collect();
        let operations = (0..n)
            .map(|_| {
                let first = rng.below(names);
                let mut buffers = vec![first];
                if rng.below(3) == 0 {
                    buffers.push((first + 1) % names);
                }
                buffers.dedup();
                Operation {
                    compute_ms: rng.uniform(50.0, 500.0).round(),
                    buffers: buffers
                        .into_iter()
                        .map(|b| Buffer { name: format!("b{b}"), bytes: sizes[b], dirty: rng.below(4) == 0 })
                        .collect(),
                    ephemeral_bytes: if rng.below(4) == 0 { GB / 4 } else { 0 },
                }
            })
            .collect();
        all.push(Client { name: format!("c{c}"), operations });
    }
    let need = all.iter().flat_map(|c| &c.operations).map(Operation::working_set_bytes).max().unwrap();
    let memory_bytes = need + (rng.uniform(0.0, 1.5) * need as f64) as u64;
    let gpu = Gpu { memory_bytes, h2d_bytes_per_s: 1e10, d2h_bytes_per_s: 1e10, copy_latency_ns: 1000 };
    let prefetch = [Prefetch::None, Prefetch::Passive, Prefetch::Active, Prefetch::Lookahead(2)][rng.below(4)];
    let eviction = [Eviction::Lru, Eviction::Belady][rng.below(2)];
    let retention = [Retention::ReleaseAfterLastUse, Retention::KeepUntilEvicted][rng.below(2)];
    (Trace { gpu, clients: all }, Policies { eviction, prefetch, retention })
}

#[test]
fn genetic_is_never_worse_than_its_seeds_nor_better_than_exhaustive() {
    let mut rng = SplitMix64::new(2024);
    for _ in 0..12 {
        let (t, p) = random_instance(&mut rng, 6);
        let params = GeneticParams { population: 20, generations: 20, patience: 10, ..GeneticParams::default() };
        let ga = makespan(&t, p, &SchedulerKind::Genetic(params));
        let seeds = [SchedulerKind::Fifo, SchedulerKind::Johnson, SchedulerKind::Greedy].map(|k| makespan(&t, p, &k));
        let exhaustive = makespan(&t, p, &SchedulerKind::Exhaustive);
        assert!(ga <= *seeds.iter().min().unwrap(), "{ga} vs seeds {seeds:?}");
        assert!(exhaustive <= ga, "{exhaustive} vs {ga}");
    }
}
