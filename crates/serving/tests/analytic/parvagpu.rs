//! The analytic model against a request-level simulation, on ParvaGPU's
//! measured configurations at the rates that are their capacities.

use tessera_serving::analytic::{attainment, capacity_rps, percentile_latency_ms};
use tessera_serving::SegmentShape;

use super::data::{parvagpu_configs, Config};
use super::reference::{simulate, Sample};

/// One comparison at one rate.
#[derive(Debug, Clone)]
pub struct Comparison {
    /// What was compared.
    pub name: String,
    /// The load `rate / throughput`.
    pub load: f64,
    /// Analytic p99 (ms).
    pub analytic_p99_ms: f64,
    /// Simulated p99 (ms), `None` when beyond 25% of the analytic one.
    pub simulated_p99_ms: Option<f64>,
    /// The simulated p99's relative standard error: the standard error of
    /// the simulated miss fraction at the analytic p99 over the analytic
    /// slope of that fraction (per relative change of the latency).
    pub p99_uncertainty: f64,
    /// Analytic fraction of requests within the SLO.
    pub analytic_attainment: f64,
    /// Simulated fraction within the SLO.
    pub simulated_attainment: f64,
    /// Standard error of the simulated fraction (batch means).
    pub standard_error: f64,
    /// Requests simulated (after warm-up).
    pub requests: usize,
    /// Whether the batch means' blocks were at least 32 relaxation times
    /// long and look independent at the analytic p99 and, where a few
    /// misses per block are expected there, at the SLO (see
    /// [`Sample::mixed`]): the standard errors can be trusted.
    pub mixed: bool,
}

impl Comparison {
    /// `|simulated - analytic| / analytic` for the p99 (1 when out of the window).
    pub fn p99_error(&self) -> f64 {
        self.simulated_p99_ms.map_or(1.0, |s| (s - self.analytic_p99_ms).abs() / self.analytic_p99_ms)
    }

    /// `|simulated - analytic|` attainment, percentage points.
    pub fn attainment_error_points(&self) -> f64 {
        100.0 * (self.simulated_attainment - self.analytic_attainment).abs()
    }

    /// Whether the simulation pins the p99 down (see [`PINNED`]).
    pub fn resolved(&self) -> bool {
        self.mixed && self.p99_uncertainty <= PINNED
    }
}

/// Requests of one process to let it relax: near full load the queue
/// forgets its state over about `rho / (1 - rho)^2` requests.
pub fn relaxation_requests(load: f64) -> f64 {
    load / (1.0 - load).powi(2)
}

/// The relative standard error of the simulated p99 that counts as
/// pinning it down (a 5% error is then four of them).
const PINNED: f64 = 0.0125;

/// Simulates one process of `shape` at `rate_rps` (the segment's rate) in
/// 64 blocks of at least `min_block` requests and 32 relaxation times each
/// (after a warm-up of a sixteenth of the run and ten relaxation times),
/// and again with more requests, up to `max_requests`, until the p99's
/// standard error is within [`PINNED`].
pub fn compare(
    name: String,
    shape: &SegmentShape,
    rate_rps: f64,
    slo_ms: f64,
    min_block: usize,
    max_requests: usize,
) -> Comparison {
    let analytic_p99_ms = percentile_latency_ms(shape, rate_rps, 99.0).expect("valid inputs");
    let analytic_attainment = attainment(shape, rate_rps, slo_ms).expect("valid inputs");
    let miss = |t: f64| 1.0 - attainment(shape, rate_rps, t).expect("valid inputs");
    let slope = (miss(analytic_p99_ms * 0.99) - miss(analytic_p99_ms * 1.01)) / 0.02;
    let load = rate_rps / shape.throughput_rps();
    let relaxation = relaxation_requests(load);
    let lambda_per_ms = rate_rps / f64::from(shape.procs()) / 1000.0;
    let mut block = ((32.0 * relaxation).max(min_block as f64) as usize).min(max_requests / 64).max(1);
    loop {
        let requests = 64 * block;
        let warmup = (requests / 16).max((10.0 * relaxation) as usize);
        let mut sample = Sample::new(analytic_p99_ms, [analytic_p99_ms, slo_ms], block as u64);
        let seed = name.bytes().fold(requests as u64, |h, b| h.wrapping_mul(0x100_0000_01b3) ^ u64::from(b));
        simulate(shape, lambda_per_ms, warmup, requests, seed, |latency| sample.observe(latency));
        let (_, error_at_p99) = sample.attainment(0);
        let p99_uncertainty = error_at_p99 / slope.max(1e-300);
        // Mixing is judged where the analytic model expects a few misses per block.
        let expects_misses = (1.0 - analytic_attainment) * block as f64 >= 4.0;
        let mixed = sample.mixed(0) && (sample.mixed(1) || !expects_misses) && block as f64 >= 32.0 * relaxation;
        let room = max_requests / 64 / block;
        if (mixed && p99_uncertainty <= PINNED) || room < 2 {
            let (simulated_attainment, standard_error) = sample.attainment(1);
            return Comparison {
                name,
                load,
                analytic_p99_ms,
                simulated_p99_ms: sample.percentile_ms(99.0),
                p99_uncertainty,
                analytic_attainment,
                simulated_attainment,
                standard_error,
                requests,
                mixed,
            };
        }
        // The error falls as the square root of the requests; blocks that
        // did not mix are lengthened sixteenfold.
        let factor = if mixed { ((p99_uncertainty / PINNED).powi(2) * 1.3).ceil() as usize } else { 16 };
        block *= factor.clamp(2, 16).min(room);
    }
}

/// `f` of every item, on every core, in the items' order.
fn parallel_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut results: Vec<(usize, R)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let index = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(item) = items.get(index) else { break };
                        done.push((index, f(item)));
                    }
                    done
                })
            })
            .collect();
        workers.into_iter().flat_map(|w| w.join().expect("a worker finished")).collect()
    });
    results.sort_by_key(|(index, _)| *index);
    results.into_iter().map(|(_, r)| r).collect()
}

/// Every (configuration, SLO) of ParvaGPU's data with a positive capacity,
/// with that capacity.
fn capacity_cases(configs: &[Config]) -> Vec<(&Config, f64, f64)> {
    let mut cases = Vec::new();
    for config in configs {
        for &slo in &config.slos_ms {
            let capacity = capacity_rps(&config.shape, 99.0, slo).expect("valid inputs");
            if capacity > 0.0 {
                cases.push((config, slo, capacity));
            }
        }
    }
    cases
}

/// Checks one comparison: within 5% (p99) and 0.5 percentage points
/// (attainment) of the simulation, beyond the simulation's own noise (three
/// standard errors) when it does not pin the p99 down to 1%.
fn assert_close(comparison: &Comparison) {
    assert!(comparison.mixed, "the simulation did not mix: {}", describe(comparison));
    let noise = if comparison.resolved() { 0.0 } else { 3.0 * comparison.p99_uncertainty };
    assert!(
        comparison.p99_error() < 0.05 + noise,
        "{}: analytic p99 {:.3} ms, simulated {:?} ms (± {:.2}%, {} requests, load {:.5})",
        comparison.name,
        comparison.analytic_p99_ms,
        comparison.simulated_p99_ms,
        100.0 * comparison.p99_uncertainty,
        comparison.requests,
        comparison.load
    );
    assert!(
        comparison.attainment_error_points() < 0.5 + 300.0 * comparison.standard_error,
        "{}: analytic attainment {:.5}, simulated {:.5} ± {:.5}",
        comparison.name,
        comparison.analytic_attainment,
        comparison.simulated_attainment,
        comparison.standard_error
    );
}

/// One line of a report.
fn describe(c: &Comparison) -> String {
    format!(
        "p99 error {:.2}% (± {:.2}%): {} load {:.5}: analytic {:.3} simulated {:?} ms; attainment {:.4} vs {:.4} ± {:.4}; {} requests",
        100.0 * c.p99_error(),
        100.0 * c.p99_uncertainty,
        c.name,
        c.load,
        c.analytic_p99_ms,
        c.simulated_p99_ms,
        c.analytic_attainment,
        c.simulated_attainment,
        c.standard_error,
        c.requests
    )
}

#[test]
fn a_spread_of_configurations_at_capacity_matches_simulation() {
    let Some(configs) = parvagpu_configs() else { return };
    // Those a debug build can simulate to a pinned p99 in a few million
    // requests: fast relaxation, and batches of at most 32 (larger ones can
    // switch between a small-batch and a full-batch regime only every
    // million requests or so; the whole sweep covers them).
    let cases: Vec<_> = capacity_cases(&configs)
        .into_iter()
        .filter(|(c, _, capacity)| c.batch <= 32 && relaxation_requests(capacity / c.shape.throughput_rps()) <= 50.0)
        .collect();
    let mut pinned = 0;
    let sample: Vec<_> = cases.iter().step_by(cases.len() / 12).collect();
    for (config, slo, capacity) in &sample {
        let comparison =
            compare(format!("{} slo {slo}", config.name()), &config.shape, *capacity, *slo, 1 << 12, 1 << 23);
        assert_close(&comparison);
        pinned += usize::from(comparison.resolved());
    }
    // Not vacuous: most p99s are known to the simulation's precision.
    assert!(2 * pinned >= sample.len(), "only {pinned} of {} p99s pinned down", sample.len());
}

#[test]
fn a_spread_of_configurations_at_fixed_utilisations_matches_simulation() {
    let Some(configs) = parvagpu_configs() else { return };
    let mut pinned = 0;
    let mut compared = 0;
    for config in configs.iter().step_by(configs.len() / 6) {
        for utilisation in [0.3, 0.6, 0.9] {
            let rate = utilisation * config.shape.throughput_rps();
            let slo = config.slos_ms[0];
            let name = format!("{} at {utilisation} of throughput, slo {slo}", config.name());
            let comparison = compare(name, &config.shape, rate, slo, 1 << 12, 1 << 23);
            assert_close(&comparison);
            pinned += usize::from(comparison.resolved());
            compared += 1;
        }
    }
    assert!(2 * pinned >= compared, "only {pinned} of {compared} p99s pinned down");
}

#[test]
#[ignore = "the whole catalogue, minutes on many cores: run with --release -- --ignored --nocapture"]
#[allow(clippy::disallowed_macros)] // a report, printed to the terminal
fn every_configuration_at_capacity_matches_simulation() {
    let Some(configs) = parvagpu_configs() else { return };
    let cases: Vec<_> =
        capacity_cases(&configs).into_iter().filter(|(c, _, _)| c.batch <= 256 && c.procs <= 5).collect();
    let mut comparisons: Vec<Comparison> = parallel_map(&cases, |(config, slo, capacity)| {
        compare(format!("{} slo {slo}", config.name()), &config.shape, *capacity, *slo, 1 << 14, 1 << 28)
    });
    comparisons.sort_by(|a, b| b.p99_error().total_cmp(&a.p99_error()));
    let padded = cases.iter().filter(|(c, _, _)| c.padded).count();
    println!(
        "{} (configuration, SLO) pairs at capacity ({padded} with padded latencies), {:.3e} requests simulated",
        comparisons.len(),
        comparisons.iter().map(|c| c.requests as f64).sum::<f64>()
    );
    let pinned: Vec<&Comparison> = comparisons.iter().filter(|c| c.resolved()).collect();
    println!("{} where the simulation pins the p99 to {:.2}%; the worst:", pinned.len(), 100.0 * PINNED);
    for c in pinned.iter().take(8) {
        println!("  {}", describe(c));
    }
    let mut loose: Vec<&Comparison> = comparisons.iter().filter(|c| c.mixed && !c.resolved()).collect();
    loose.sort_by(|a, b| (b.p99_error() / b.p99_uncertainty).total_cmp(&(a.p99_error() / a.p99_uncertainty)));
    println!("{} where it mixes but leaves the p99 looser; the worst in standard errors:", loose.len());
    for c in loose.iter().take(8) {
        println!("  {:.2} standard errors: {}", c.p99_error() / c.p99_uncertainty, describe(c));
    }
    let unmixed: Vec<&Comparison> = comparisons.iter().filter(|c| !c.mixed).collect();
    println!("{} where 2^28 requests do not mix (not compared):", unmixed.len());
    for c in &unmixed {
        println!("  {}", describe(c));
    }
    let worst_attainment =
        comparisons.iter().filter(|c| c.mixed).map(Comparison::attainment_error_points).fold(0.0, f64::max);
    println!("worst attainment error where mixed: {worst_attainment:.3} percentage points");
    for comparison in comparisons.iter().filter(|c| c.mixed) {
        assert_close(comparison);
    }
}
