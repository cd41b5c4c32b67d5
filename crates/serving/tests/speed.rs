//! Simulated requests per second on a ParvaGPU-scale system (release
//! build, one thread): `cargo test -p tessera-serving --release -- --ignored --nocapture`.

use std::time::Instant;

use tessera_serving::{simulate, ArrivalModel, Discipline, SimulationOptions};

use crate::support::parva_scale;

#[test]
#[ignore = "a measurement: run in release mode with --ignored --nocapture"]
#[allow(clippy::disallowed_macros)] // The figure is this test's output.
fn requests_per_second_on_one_core() {
    let system = parva_scale(0.7);
    let total_rps: f64 = system.services().iter().map(|s| s.rate_rps).sum();
    println!(
        "{} services, {} segments, {:.0} req/s in all (one thread)",
        system.services().len(),
        system.segments().len(),
        total_rps
    );
    let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    for (arrivals, discipline, delay_ms) in [
        (ArrivalModel::Poisson, Discipline::RandomPerProcess, 0.0),
        (ArrivalModel::Poisson, Discipline::RandomPerProcess, 2.0),
        (ArrivalModel::Renewal { cv: 3.0 }, Discipline::RandomPerProcess, 0.0),
        (ArrivalModel::Poisson, Discipline::RoundRobin, 0.0),
        (ArrivalModel::Poisson, Discipline::JoinShortestQueue, 0.0),
        (ArrivalModel::Poisson, Discipline::SharedQueue, 0.0),
    ] {
        let options = SimulationOptions {
            arrivals: arrivals.clone(),
            discipline,
            max_queue_delay_ms: delay_ms,
            seconds: 120.0,
            warmup_s: 5.0,
            seed: 1,
            ..SimulationOptions::default()
        };
        let started = Instant::now();
        let report = pool.install(|| simulate(&system, &options)).unwrap();
        let elapsed_s = started.elapsed().as_secs_f64();
        println!(
            "{:>8} {:>11} delay {delay_ms} ms: {} requests in {elapsed_s:.2} s = {:.1} M requests/s (attainment {:.4})",
            arrivals.to_string(),
            discipline.to_string(),
            report.requests_simulated,
            report.requests_simulated as f64 / elapsed_s / 1e6,
            report.attainment.unwrap()
        );
    }
}
