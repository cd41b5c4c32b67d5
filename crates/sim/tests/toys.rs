//! The toy examples of the design notes, reproduced exactly: 10 GB/s, so
//! 1 GB takes 100 ms; clean data; no copy latency.

use crate::common::{trace, GB, MS};
use tessera_sim::{
    johnson, lower_bound_ns, simulate, Eviction, Policies, Prefetch, Retention, Schedule, SimResult, Trace,
};

/// Memory no toy comes close to.
const UNLIMITED: u64 = 1_000 * GB;

/// Toy A: one pass, jobs A..D = 0..3.
fn toy_a(memory_bytes: u64) -> Trace {
    trace(memory_bytes, &[("A", 2, 500.0, 1), ("B", 4, 100.0, 1), ("C", 3, 400.0, 1), ("D", 1, 200.0, 1)])
}

/// Toy B: X, Y, Z = 0, 1, 2, two operations each on one persistent buffer.
fn toy_b() -> Trace {
    trace(6 * GB, &[("X", 4, 300.0, 2), ("Y", 2, 300.0, 2), ("Z", 2, 300.0, 2)])
}

fn run(trace: &Trace, order: &[usize], eviction: Eviction, prefetch: Prefetch, retention: Retention) -> SimResult {
    let schedule = Schedule::new(trace, order).unwrap();
    simulate(trace, &schedule, Policies { eviction, prefetch, retention }).unwrap()
}

fn ms(trace: &Trace, order: &[usize], eviction: Eviction, prefetch: Prefetch, retention: Retention) -> u64 {
    run(trace, order, eviction, prefetch, retention).makespan_ns / MS
}

fn toy_a_ms(memory_bytes: u64, order: &[usize], prefetch: Prefetch) -> u64 {
    ms(&toy_a(memory_bytes), order, Eviction::Lru, prefetch, Retention::ReleaseAfterLastUse)
}

fn permutations(items: &[usize]) -> Vec<Vec<usize>> {
    if items.len() <= 1 {
        return vec![items.to_vec()];
    }
    let mut all = Vec::new();
    for i in 0..items.len() {
        let mut rest = items.to_vec();
        let first = rest.remove(i);
        for mut tail in permutations(&rest) {
            tail.insert(0, first);
            all.push(tail);
        }
    }
    all
}

const FIFO: [usize; 4] = [0, 1, 2, 3];
const JOHNSON: [usize; 4] = [3, 0, 2, 1];
const DCAB: [usize; 4] = [3, 2, 0, 1];

#[test]
fn toy_a_without_prefetch_is_serial_in_any_order() {
    for order in permutations(&FIFO) {
        for memory_bytes in [6 * GB, UNLIMITED] {
            assert_eq!(toy_a_ms(memory_bytes, &order, Prefetch::None), 2200, "{order:?}");
        }
    }
}

#[test]
fn toy_a_unlimited_memory_fifo_johnson_and_bound() {
    assert_eq!(toy_a_ms(UNLIMITED, &FIFO, Prefetch::Active), 1500);
    assert_eq!(toy_a_ms(UNLIMITED, &JOHNSON, Prefetch::Active), 1300);
    let plan = johnson(&toy_a(UNLIMITED)).unwrap();
    assert_eq!(plan.order, JOHNSON);
    assert_eq!(plan.makespan_ns, 1300 * MS);
    assert_eq!(lower_bound_ns(&toy_a(UNLIMITED)).unwrap(), 1300 * MS);
}

#[test]
fn toy_a_six_gb_passive_and_active() {
    assert_eq!(toy_a_ms(6 * GB, &FIFO, Prefetch::Passive), 1700);
    assert_eq!(toy_a_ms(6 * GB, &JOHNSON, Prefetch::Passive), 1700);
    assert_eq!(toy_a_ms(6 * GB, &DCAB, Prefetch::Passive), 1400);
    let best = |prefetch| permutations(&FIFO).iter().map(|o| toy_a_ms(6 * GB, o, prefetch)).min().unwrap();
    assert_eq!(best(Prefetch::Passive), 1400);
    assert_eq!(best(Prefetch::Active), 1400);
}

const XYZXYZ: [usize; 6] = [0, 1, 2, 0, 1, 2];

#[test]
fn toy_b_demand_fetching_lru_thrashes_belady_does_not() {
    let lru = run(&toy_b(), &XYZXYZ, Eviction::Lru, Prefetch::None, Retention::KeepUntilEvicted);
    assert_eq!((lru.makespan_ns / MS, lru.h2d_busy_ns / MS), (3400, 1600));
    for retention in [Retention::KeepUntilEvicted, Retention::ReleaseAfterLastUse] {
        let belady = run(&toy_b(), &XYZXYZ, Eviction::Belady, Prefetch::None, retention);
        assert_eq!((belady.makespan_ns / MS, belady.h2d_busy_ns / MS), (2800, 1000));
    }
}

#[test]
fn toy_b_lookahead_with_do_no_harm() {
    for eviction in [Eviction::Lru, Eviction::Belady] {
        assert_eq!(ms(&toy_b(), &XYZXYZ, eviction, Prefetch::Lookahead(1), Retention::KeepUntilEvicted), 2300);
    }
}

#[test]
fn toy_b_best_interleaving_and_bound() {
    let orders: Vec<Vec<usize>> = (0..3usize.pow(6))
        .map(|mut code| {
            (0..6)
                .map(|_| {
                    let c = code % 3;
                    code /= 3;
                    c
                })
                .collect::<Vec<usize>>()
        })
        .filter(|o| (0..3).all(|c| o.iter().filter(|&&x| x == c).count() == 2))
        .collect();
    assert_eq!(orders.len(), 90);
    let best = orders
        .iter()
        .map(|o| ms(&toy_b(), o, Eviction::Belady, Prefetch::Lookahead(1), Retention::KeepUntilEvicted))
        .min()
        .unwrap();
    assert_eq!(best, 2100);
    assert_eq!(
        ms(&toy_b(), &[1, 2, 0, 0, 1, 2], Eviction::Belady, Prefetch::Lookahead(1), Retention::KeepUntilEvicted),
        2100
    );
    assert_eq!(lower_bound_ns(&toy_b()).unwrap(), 2000 * MS);
    assert!(johnson(&toy_b()).unwrap_err().to_string().contains("one-pass"));
}
