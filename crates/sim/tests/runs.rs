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

/// Campaigns measured on a GPU (`fixtures/runs/measured/<GPU>-<date>/`),
/// each its name and its runs' files. None yet: no GPU has been lent to
/// this work since the comparison was written.
const MEASURED: [(&str, &[&str]); 0] = [];

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

/// Every measured campaign: each run's makespan within 10% of the
/// simulator's (the goal).
#[test]
fn measured_runs_keep_the_model_within_ten_percent() {
    for (name, files) in MEASURED {
        let compared = compare_runs(&read(files)).unwrap();
        assert!(compared.worst_error() <= 0.10, "{name}: {:#?}", compared.runs);
    }
}
