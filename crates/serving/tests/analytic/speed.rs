//! How long capacities take over ParvaGPU's whole catalogue (release only;
//! printed, not asserted: speed is reported, never a test's verdict).

use std::collections::BTreeMap;
use std::time::Instant;

use tessera_serving::analytic::{attainment, capacity_rps, percentile_latency_ms, predict, CapacityCache};

use super::data::parvagpu_configs;

#[test]
#[ignore = "timing: run with --release -- --ignored --nocapture"]
#[allow(clippy::disallowed_macros)] // a report, printed to the terminal
fn capacity_sweep_timing() {
    let Some(configs) = parvagpu_configs() else { return };
    // Every distinct (configuration, SLO) of scenarios 1..=6, each computed
    // from scratch, one after another.
    let mut times: Vec<(f64, String)> = Vec::new();
    let mut by_batch: BTreeMap<u32, (usize, f64)> = BTreeMap::new();
    let start = Instant::now();
    for config in &configs {
        for &slo in &config.slos_ms {
            let t0 = Instant::now();
            capacity_rps(&config.shape, 99.0, slo).expect("valid inputs");
            let seconds = t0.elapsed().as_secs_f64();
            times.push((seconds, format!("{} slo {slo} ms", config.name())));
            let entry = by_batch.entry(config.batch).or_default();
            entry.0 += 1;
            entry.1 += seconds;
        }
    }
    let total = start.elapsed().as_secs_f64();
    times.sort_by(|a, b| b.0.total_cmp(&a.0));
    println!(
        "{} configurations x their model's distinct SLOs = {} capacities at p99, cold: {total:.3} s, mean {:.3} ms, worst {:.3} ms ({})",
        configs.len(),
        times.len(),
        1e3 * total / times.len() as f64,
        1e3 * times[0].0,
        times[0].1
    );
    for (batch, (count, seconds)) in &by_batch {
        println!("  B {batch:>3}: {count:>4} capacities, {seconds:.3} s, mean {:.3} ms", 1e3 * seconds / *count as f64);
    }
    // The planner's view: 11 models x their configurations x 6 scenarios
    // through one cold cache, one thread and then every core (fresh caches).
    let lookups: Vec<(usize, f64)> = configs
        .iter()
        .enumerate()
        .flat_map(|(index, config)| config.scenario_slos_ms.iter().flatten().map(move |&slo| (index, slo)))
        .collect();
    let cache = CapacityCache::new();
    let start = Instant::now();
    for &(index, slo) in &lookups {
        cache.capacity_rps(&configs[index].shape, 99.0, slo).expect("valid inputs");
    }
    println!(
        "planner sweep, one thread: {} lookups, {} computed, {:.3} s",
        lookups.len(),
        cache.len(),
        start.elapsed().as_secs_f64()
    );
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let cache = CapacityCache::new();
    let start = Instant::now();
    std::thread::scope(|scope| {
        for worker in 0..threads {
            let (cache, lookups, configs) = (cache.clone(), &lookups, &configs);
            scope.spawn(move || {
                for &(index, slo) in lookups.iter().skip(worker).step_by(threads) {
                    cache.capacity_rps(&configs[index].shape, 99.0, slo).expect("valid inputs");
                }
            });
        }
    });
    println!(
        "planner sweep, {threads} threads sharing one cache: {} computed, {:.3} s",
        cache.len(),
        start.elapsed().as_secs_f64()
    );
}

#[test]
#[ignore = "timing: run with --release -- --ignored --nocapture"]
#[allow(clippy::disallowed_macros)] // a report, printed to the terminal
fn prediction_timing() {
    let Some(configs) = parvagpu_configs() else { return };
    // What a plan's report asks of every segment: its p99 and attainment
    // at the rate routed to it, at or below its capacity.
    let mut cases = Vec::new();
    for config in &configs {
        for &slo in &config.slos_ms {
            let capacity = capacity_rps(&config.shape, 99.0, slo).expect("valid inputs");
            if capacity > 0.0 {
                cases.extend([0.5, 0.8, 0.95, 1.0].map(|load| (&config.shape, load * capacity, slo)));
            }
        }
    }
    let start = Instant::now();
    let apart: Vec<(f64, f64)> = cases
        .iter()
        .map(|&(shape, rate, slo)| {
            let p99 = percentile_latency_ms(shape, rate, 99.0).expect("valid inputs");
            (p99, attainment(shape, rate, slo).expect("valid inputs"))
        })
        .collect();
    let apart_s = start.elapsed().as_secs_f64();
    let start = Instant::now();
    let together: Vec<(f64, f64)> = cases
        .iter()
        .map(|&(shape, rate, slo)| {
            let predicted = predict(shape, rate, 99.0, slo).expect("valid inputs");
            (predicted.latency_ms, predicted.attainment)
        })
        .collect();
    let together_s = start.elapsed().as_secs_f64();
    let worst =
        apart.iter().zip(&together).map(|(a, b)| ((a.0 - b.0).abs() / a.0).max((a.1 - b.1).abs())).fold(0.0, f64::max);
    println!(
        "{} predictions (p99 and attainment at 50-100% of capacity): apart {:.3} ms each, predict {:.3} ms each \
         ({:.2}x), largest difference {worst:.1e}",
        cases.len(),
        1e3 * apart_s / cases.len() as f64,
        1e3 * together_s / cases.len() as f64,
        apart_s / together_s
    );
}
