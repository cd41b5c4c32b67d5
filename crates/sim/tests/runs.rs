//! Schedules run on a GPU against their simulations
//! (`tessera_sim::compare_runs`), from `tests/fixtures/runs/` (compiled in:
//! the crate does no I/O, its tests neither).

use tessera_sim::{compare_runs, MeasuredRun, ScheduleComparison};

/// A made-up campaign in the shape of a real one (see the folder's
/// README): it tests the reader and the comparison, not the simulator.
const SYNTHETIC: [&str; 5] = [
    include_str!("fixtures/runs/synthetic/fifo-active.json"),
    include_str!("fixtures/runs/synthetic/fifo-none.json"),
    include_str!("fixtures/runs/synthetic/ga-active.json"),
    include_str!("fixtures/runs/synthetic/ga-none.json"),
    include_str!("fixtures/runs/synthetic/greedy-active.json"),
];

/// The one order that ran on a lent H200 on 2026-11-30
/// (`fixtures/runs/measured/h200-2026-11-30/`): the campaign's trace under
/// the genetic algorithm without prefetching. The other five orders ran out
/// of memory under the executor's cap, an executor bug since fixed. It ran
/// twice: first as the executor was, then with PyTorch's expandable
/// segments, 512 MiB of headroom on the cap and allocations that wait and
/// retry when refused (which of these slowed it was not measured).
const H200_2026_11_30: [&str; 2] = [
    include_str!("fixtures/runs/measured/h200-2026-11-30/ga-none.json"),
    include_str!("fixtures/runs/measured/h200-2026-11-30/ga-none-expandable-segments.json"),
];

fn read(files: &[&str]) -> Vec<MeasuredRun> {
    files.iter().map(|text| serde_json::from_str(text).unwrap()).collect()
}

#[test]
fn a_campaigns_runs_are_read_and_compared() {
    let runs = read(&SYNTHETIC);
    let ScheduleComparison { runs: compared, gains } = compare_runs(&runs).unwrap();
    for (run, compared) in runs.iter().zip(&compared) {
        let error = run.measured.makespan_ms / run.simulated.makespan_ms - 1.0;
        assert!((compared.error - error).abs() < 1e-12, "{compared:?}");
    }
    let what: Vec<&str> = gains.iter().map(|gain| gain.what.as_str()).collect();
    assert_eq!(
        what,
        [
            "prefetch active over none (fifo)",
            "prefetch active over none (ga)",
            "ga over fifo (prefetch active)",
            "ga over greedy (prefetch active)",
            "ga over fifo (prefetch none)"
        ]
    );
    let text = |run: &MeasuredRun| serde_json::to_string(run).unwrap();
    let again: Vec<MeasuredRun> = runs.iter().map(|run| serde_json::from_str(&text(run)).unwrap()).collect();
    assert_eq!(again, runs, "a run round-trips");
}

/// The goal is a makespan within 10% of the simulator's. On the
/// H200 the simulator was optimistic both times: the GPU took 7.5% longer
/// the first time (within the goal) and 12.2% longer the second (outside
/// it: its computes took 16% longer than planned).
#[test]
fn the_h200_took_longer_than_simulated_by_under_a_seventh() {
    let runs = read(&H200_2026_11_30);
    let errors: Vec<f64> = runs.iter().map(|run| run.measured.makespan_ms / run.simulated.makespan_ms - 1.0).collect();
    for (run, error) in runs.iter().zip(&errors) {
        assert_eq!((run.scheduler.as_str(), run.prefetch.as_str()), ("ga", "none"));
        assert!((0.0..0.15).contains(error), "{error}");
        let compare = compare_runs(std::slice::from_ref(run)).unwrap();
        assert!((compare.worst_error() - error).abs() < 1e-12 && compare.gains.is_empty());
    }
    assert!(errors[0] <= 0.10 && errors[1] > 0.10, "{errors:?}");
}
