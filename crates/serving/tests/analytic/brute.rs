//! A brute-force oracle, independent of the crate's numerics: the queue
//! at service starts by a dense Grassmann–Taksar–Heyman solve of the chain
//! cut at a few batches past the SLO, and `P(T > t)` by direct sums over
//! the requests ahead and the arrivals that fill the batch, with a fine
//! midpoint rule over the elapsed time of the batch in service. Slow
//! (cubic in the states), so only for moderate queues; it checks the
//! model where a simulation cannot: in profiles whose queue switches
//! between batch-size regimes only every million requests or so.

use tessera_serving::analytic::{attainment, capacity_rps};
use tessera_serving::SegmentShape;

use super::data::parvagpu_configs;

/// `P(N = k)` for `k = 0..len` and `N ~ Poisson(mean)`, from logarithms.
fn poisson(mean: f64, len: usize) -> Vec<f64> {
    let mut ln_factorial = 0.0;
    (0..len)
        .map(|k| {
            if k > 0 {
                ln_factorial += (k as f64).ln();
            }
            if mean == 0.0 {
                return if k == 0 { 1.0 } else { 0.0 };
            }
            (-mean + k as f64 * mean.ln() - ln_factorial).exp()
        })
        .collect()
}

/// The stationary vector of a stochastic matrix (GTH elimination).
pub fn stationary(mut p: Vec<Vec<f64>>) -> Vec<f64> {
    let n = p.len();
    for k in (1..n).rev() {
        let (rows, rest) = p.split_at_mut(k);
        let last = &rest[0];
        let out: f64 = last[..k].iter().sum();
        for row in rows {
            row[k] /= out;
            let share = row[k];
            for (to, from) in row[..k].iter_mut().zip(&last[..k]) {
                *to += share * from;
            }
        }
    }
    let mut x = vec![1.0; n];
    for j in 1..n {
        x[j] = (0..j).map(|i| x[i] * p[i][j]).sum();
    }
    let total: f64 = x.iter().sum();
    x.iter().map(|v| v / total).collect()
}

/// `P(T > t_ms)` for one process of `shape` fed `lambda` requests per ms,
/// the chain cut `extra` states past three batches beyond the SLO, the
/// elapsed time of a batch in at least `steps` midpoints per piece between
/// jumps (and two per expected arrival).
pub fn miss_probability(shape: &SegmentShape, lambda: f64, t_ms: f64, steps: usize, extra: usize) -> f64 {
    let batch = shape.max_batch() as usize;
    let latency = |k: usize| shape.latency_ms(k.clamp(1, batch) as u32);
    let full = latency(batch);
    // Waiting at a batch start: 1..=top; jumps above top stay at top (a
    // queue that long misses anyway and is rare).
    let top = batch * ((t_ms / full).ceil() as usize + 3) + extra;
    let width = |mean: f64| (mean + 12.0 * mean.sqrt() + 30.0) as usize;
    let mut p = vec![vec![0.0; top]; top];
    for x in 1..=top {
        let (size, left) = (x.min(batch), x - x.min(batch));
        for (a, q) in poisson(lambda * latency(size), width(lambda * latency(size))).into_iter().enumerate() {
            let y = (left + a).clamp(1, top);
            p[x - 1][y - 1] += q;
        }
    }
    let pi = stationary(p);
    // Time-stationary view: a batch started in state x runs S, then (if
    // nothing arrived) the server idles 1/lambda on average.
    let mut cycle = 0.0;
    let mut late = 0.0;
    for x in 1..=top {
        if pi[x - 1] < 1e-15 {
            continue;
        }
        let (size, left) = (x.min(batch), x - x.min(batch));
        let s = latency(size);
        let idle = if left == 0 { (-lambda * s).exp() / lambda } else { 0.0 };
        cycle += pi[x - 1] * (s + idle);
        if idle > 0.0 && latency(1) > t_ms {
            late += pi[x - 1] * idle;
        }
        // An arrival e after the batch started: a midpoint rule over e on
        // each piece between the jumps of the integrand, where a band's
        // batch start plus some batch latency crosses t.
        let mut jumps = vec![0.0, s];
        for k in 1..=batch {
            let mut e = (s + latency(k) - t_ms).rem_euclid(full);
            while e < s {
                jumps.push(e);
                e += full;
            }
        }
        jumps.sort_by(f64::total_cmp);
        jumps.dedup();
        let mut integral = 0.0;
        for piece in jumps.windows(2).filter(|w| w[1] > w[0]) {
            // At least `steps` points, and two per expected arrival.
            let points = steps.max((2.0 * lambda * (piece[1] - piece[0])).ceil() as usize);
            let h = (piece[1] - piece[0]) / points as f64;
            for step in 0..points {
                let e = piece[0] + (step as f64 + 0.5) * h;
                // Per band m: the largest batch that still meets t when the
                // band's batch starts (S_k rises with k), and how the batch
                // fills: P(F >= f).
                let mut bands: Vec<(usize, Vec<f64>)> = Vec::new();
                for (n, q) in poisson(lambda * e, width(lambda * e)).into_iter().enumerate() {
                    let ahead = left + n;
                    let m = ahead / batch;
                    while bands.len() <= m {
                        let start = s + bands.len() as f64 * full;
                        let fits = (1..=batch).take_while(|&k| start - e + latency(k) <= t_ms).last().unwrap_or(0);
                        let fill = poisson(lambda * (start - e), width(lambda * (start - e)));
                        let mut tail: Vec<f64> = fill
                            .iter()
                            .rev()
                            .scan(0.0, |sum, p| {
                                *sum += p;
                                Some(*sum)
                            })
                            .collect();
                        tail.reverse();
                        bands.push((fits, tail));
                    }
                    let (fits, tail) = &bands[m];
                    // The batch holds min(B, position + F) requests, position
                    // = ahead - m B + 1: late when that exceeds `fits`.
                    let position = ahead - m * batch + 1;
                    let late_fill = if *fits >= batch {
                        0.0
                    } else if position > *fits {
                        1.0
                    } else {
                        tail.get(fits - position + 1).copied().unwrap_or(0.0)
                    };
                    integral += h * q * late_fill;
                }
            }
        }
        late += pi[x - 1] * integral;
    }
    late / cycle
}

#[test]
fn small_shapes_match_brute_force() {
    let shapes = [
        SegmentShape::new(1, vec![(1, 5.0), (2, 6.0), (4, 9.0), (8, 15.0)]).unwrap(),
        SegmentShape::new(2, vec![(1, 4.0), (4, 8.0), (16, 16.0)]).unwrap(),
    ];
    for shape in shapes {
        let full = shape.latency_ms(shape.max_batch());
        for load in [0.5, 0.9] {
            let rate = load * shape.throughput_rps();
            let lambda = rate / f64::from(shape.procs()) / 1000.0;
            for t in [1.2 * full, 2.5 * full] {
                let brute = miss_probability(&shape, lambda, t, 8, 0);
                let analytic = 1.0 - attainment(&shape, rate, t).unwrap();
                assert!(
                    (analytic - brute).abs() < 2e-3 * brute.max(1e-3),
                    "{shape:?} load {load} t {t}: {analytic} vs {brute}"
                );
            }
        }
    }
}

#[test]
#[ignore = "about half an hour of one core: run with --release -- --ignored --nocapture"]
#[allow(clippy::disallowed_macros)] // a report, printed to the terminal
fn the_oracle_agrees_at_capacity() {
    let Some(configs) = parvagpu_configs() else { return };
    // Every large-batch configuration whose SLO is within two full batches
    // (where the queue switches between batch-size regimes and simulation
    // is hopeless), and every tenth of the other (configuration, SLO)
    // pairs, at their capacities, where the dense solve stays small enough
    // and the load is at most 95%.
    let mut cases = Vec::new();
    let mut others = 0usize;
    for config in &configs {
        for &slo in &config.slos_ms {
            let full = config.shape.latency_ms(config.batch);
            let regimes = config.batch >= 128 && slo <= 2.0 * full;
            if !regimes {
                others += 1;
                if !others.is_multiple_of(10) {
                    continue;
                }
            }
            let capacity = capacity_rps(&config.shape, 99.0, slo).expect("valid inputs");
            if capacity <= 0.0 {
                continue;
            }
            // The queue's tail decays like exp(-theta x), theta ~ 2 (1 - rho)
            // / rho: cut the chain 30 / theta states past the SLO's.
            let load = capacity / config.shape.throughput_rps();
            let extra = (15.0 * load / (1.0 - load)).ceil() as usize;
            let top = config.batch as usize * ((slo / full).ceil() as usize + 3) + extra;
            // Near full load the chain must be cut far out; those loads are
            // checked against Erlang's formula (M/D/1) instead.
            if top <= 1500 && load <= 0.95 {
                cases.push((config, slo, capacity, extra));
            }
        }
    }
    let mut worst: (f64, String) = (0.0, String::new());
    for (config, slo, capacity, extra) in &cases {
        let lambda = capacity / f64::from(config.procs) / 1000.0;
        let brute = miss_probability(&config.shape, lambda, *slo, 32, *extra);
        let analytic = 1.0 - attainment(&config.shape, *capacity, *slo).expect("valid inputs");
        let error = (analytic - brute).abs() / brute.max(1e-3);
        println!("{} slo {slo}: P(T > slo) analytic {analytic:.6} brute force {brute:.6}", config.name());
        if error > worst.0 {
            worst = (error, format!("{} slo {slo}", config.name()));
        }
    }
    println!("{} cases; worst relative difference {:.2e} ({})", cases.len(), worst.0, worst.1);
    assert!(worst.0 < 1e-3, "{worst:?}");
}
