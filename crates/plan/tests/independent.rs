//! Plans checked by a request-level simulation written apart from
//! tessera-serving: no queue, batch or routing code of Tessera's runs
//! here, only the plan (its instances and their routing capacities) and
//! the measured profiles. Random SLO mixes over ParvaGPU's eleven models,
//! drawn with a seed no other test uses, are planned with every default
//! (the percentile rule, the default margin), then served here with every
//! batch 5% slower than profiled: each service must keep at least 99% of
//! its requests within its SLO over the run (or the top of a 95% interval
//! over its windows must reach it), and at least 98% in 95% of its
//! one-minute windows.
//!
//! The simulation: a service's requests arrive as a Poisson process and go
//! to its segments at random in proportion to their capacities, and within
//! a segment to one of its MPS processes at random, so each process sees a
//! Poisson stream of its own and is simulated alone. A process is a FIFO
//! queue: when it is free and requests wait, it starts a batch of up to its
//! batch size of the oldest, which runs for the profiled latency of the
//! smallest profiled batch (same slice count and processes) that holds
//! them, never longer than the full batch and never shorter than a smaller
//! batch.

use std::collections::VecDeque;

use tessera_core::rng::SplitMix64;
use tessera_core::{GpuModel, InstanceAssignment, Plan, ProfileCatalog, ServiceSlo};
use tessera_plan::{plan, PlanRequest};

/// Every batch this much slower than profiled.
const SLOWDOWN: f64 = 0.05;
/// Seconds simulated, of which the first [`WARMUP_S`] are not counted.
const SECONDS: f64 = 360.0;
const WARMUP_S: f64 = 60.0;
/// A window's length, seconds.
const WINDOW_S: f64 = 60.0;
const WINDOWS: usize = ((SECONDS - WARMUP_S) / WINDOW_S) as usize;

/// Per window: `[requests, within SLO]`.
type WindowCounts = [[u64; 2]; WINDOWS];

/// A process's batches: the latency (ms) of a batch of `k` requests is
/// `latency_ms[k - 1]`, already slowed.
struct Batches {
    latency_ms: Vec<f64>,
}

impl Batches {
    /// The batches of `instance` read from its model's profile points at
    /// the same slice count and processes.
    fn of(instance: &InstanceAssignment, catalog: &ProfileCatalog) -> Batches {
        let profile = catalog.get(GpuModel::A100_80GB, &instance.model).expect("the plan's model is profiled");
        let mut profiled: Vec<(u32, f64)> = profile
            .points()
            .iter()
            .filter(|point| {
                point.config.size_gpcs == instance.size
                    && point.config.procs == instance.procs
                    && point.config.batch < instance.batch
            })
            .map(|point| (point.config.batch, point.latency_ms))
            .collect();
        profiled.push((instance.batch, instance.latency_ms));
        profiled.sort_by_key(|&(batch, _)| batch);
        let mut floor_ms: f64 = 0.0;
        let latency_ms = (1..=instance.batch)
            .map(|k| {
                let (_, ms) = profiled.iter().find(|&&(batch, _)| batch >= k).expect("the full batch holds every k");
                floor_ms = floor_ms.max(ms.min(instance.latency_ms));
                floor_ms * (1.0 + SLOWDOWN)
            })
            .collect();
        Batches { latency_ms }
    }
}

/// One process fed Poisson arrivals at `rate_rps`: each measured request
/// counted in its arrival's window, within SLO or not.
fn serve_process(batches: &Batches, rate_rps: f64, slo_ms: f64, rng: &mut SplitMix64, windows: &mut WindowCounts) {
    let mean_gap_ms = 1000.0 / rate_rps;
    let end_ms = SECONDS * 1000.0;
    let exponential = |rng: &mut SplitMix64| -mean_gap_ms * (1.0 - rng.uniform(0.0, 1.0)).ln();
    let mut next_arrival_ms = exponential(rng);
    let mut waiting: VecDeque<f64> = VecDeque::new();
    let mut running: Vec<f64> = Vec::new();
    let mut free_at_ms = f64::INFINITY;
    loop {
        // A batch that ends when a request arrives ends first: the request
        // joins the next batch.
        let now_ms = if free_at_ms <= next_arrival_ms {
            if free_at_ms.is_infinite() {
                return;
            }
            for arrival_ms in running.drain(..) {
                let measured_s = arrival_ms / 1000.0 - WARMUP_S;
                if measured_s >= 0.0 {
                    let window = &mut windows[(measured_s / WINDOW_S) as usize];
                    window[0] += 1;
                    window[1] += u64::from(free_at_ms - arrival_ms <= slo_ms);
                }
            }
            std::mem::replace(&mut free_at_ms, f64::INFINITY)
        } else {
            let now_ms = next_arrival_ms;
            waiting.push_back(now_ms);
            next_arrival_ms += exponential(rng);
            if next_arrival_ms >= end_ms {
                next_arrival_ms = f64::INFINITY;
            }
            now_ms
        };
        if running.is_empty() && !waiting.is_empty() {
            let take = waiting.len().min(batches.latency_ms.len());
            running.extend(waiting.drain(..take));
            free_at_ms = now_ms + batches.latency_ms[take - 1];
        }
    }
}

/// Every service of `plan` served: per service, its windows.
fn serve(plan: &Plan, services: &[ServiceSlo], catalog: &ProfileCatalog, seed: u64) -> Vec<WindowCounts> {
    let mut rng = SplitMix64::new(seed);
    services
        .iter()
        .map(|slo| {
            let mine: Vec<&InstanceAssignment> = plan
                .gpus
                .iter()
                .flat_map(|gpu| &gpu.instances)
                .filter(|instance| instance.service == slo.service)
                .collect();
            let capacity: f64 = mine.iter().map(|instance| instance.capacity()).sum();
            let mut windows = [[0; 2]; WINDOWS];
            for instance in mine {
                let batches = Batches::of(instance, catalog);
                let per_process_rps = slo.rate_rps * instance.capacity() / capacity / f64::from(instance.procs);
                for _ in 0..instance.procs {
                    serve_process(&batches, per_process_rps, slo.latency_slo_ms, &mut rng, &mut windows);
                }
            }
            windows
        })
        .collect()
}

#[test]
fn default_plans_of_unseen_slo_mixes_keep_their_promise_on_a_gpu_5_percent_slower() {
    let Some(catalog) = crate::common::parvagpu_catalog() else { return };
    let models: Vec<String> = catalog.models(GpuModel::A100_80GB).map(str::to_string).collect();
    let mut rng = SplitMix64::new(20_261_129);
    let mut planned_mixes = 0;
    for mix in 0..10 {
        let count = 2 + rng.below(10);
        let services = crate::common::random_mix(&mut rng, &models, count, (20.0, 3000.0));
        let inputs = crate::common::measured(&services, &catalog, GpuModel::A100_80GB);
        let Ok(planned) = plan(&PlanRequest::new(&inputs)) else { continue };
        planned_mixes += 1;
        for (slo, windows) in services.iter().zip(serve(&planned.plan, &services, &catalog, mix)) {
            let what = format!(
                "mix {mix}, {} ({} at {:.0} req/s, SLO {:.0} ms)",
                slo.service, slo.model, slo.rate_rps, slo.latency_slo_ms
            );
            let shares: Vec<f64> = windows.iter().map(|[requests, within]| *within as f64 / *requests as f64).collect();
            let (requests, within) =
                windows.iter().fold((0, 0), |(r, w), [requests, within]| (r + requests, w + within));
            let attainment = within as f64 / requests as f64;
            // The windows' spread bounds the run's: Student's t at 95% over
            // the windows (nearly independent, a minute each).
            let mean = shares.iter().sum::<f64>() / WINDOWS as f64;
            let spread = (shares.iter().map(|share| (share - mean).powi(2)).sum::<f64>() / (WINDOWS - 1) as f64).sqrt();
            let high = mean + 2.776 * spread / (WINDOWS as f64).sqrt();
            assert!(attainment >= 0.99 || high >= 0.99, "{what}: {attainment:.4} within SLO, windows {shares:?}");
            // With five windows, 95% of them is all of them.
            let least = shares.iter().copied().fold(1.0, f64::min);
            assert!(least >= 0.98, "{what}: a window at {least:.4}, windows {shares:?}");
        }
    }
    assert!(planned_mixes >= 8, "only {planned_mixes} of 10 mixes could be planned");
}
