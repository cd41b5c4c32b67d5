//! Properties the analytic model must have, on small shapes and on
//! ParvaGPU's profiles: M/D/1's exact waiting times, monotone in rate,
//! capacity bounds, conservative capacities, refusals, the cache.

use tessera_serving::analytic::{
    attainment, capacity_rps, meets_percentile, percentile_latency_ms, tolerance, CapacityCache,
};
use tessera_serving::{SegmentShape, ServingError};

use super::data::parvagpu_configs;

/// `P(W <= x)` for M/D/1 FIFO, service `d_ms`, load `rho` (Erlang 1909).
fn md1_wait_cdf(x_ms: f64, d_ms: f64, rho: f64) -> f64 {
    let lambda = rho / d_ms;
    let mut sum = 0.0;
    let mut factorial = 1.0;
    for k in 0..=((x_ms / d_ms).floor() as u32) {
        if k > 0 {
            factorial *= f64::from(k);
        }
        let y = lambda * (f64::from(k) * d_ms - x_ms);
        sum += y.powi(k as i32) / factorial * (-y).exp();
    }
    (1.0 - rho) * sum
}

#[test]
fn batch_one_is_md1_by_erlangs_formula() {
    let d_ms = 10.0;
    let shape = SegmentShape::new(1, vec![(1, d_ms)]).unwrap();
    for rho in [0.3, 0.7, 0.9] {
        let rate_rps = rho / d_ms * 1000.0;
        for x_over_d in [0.5, 1.5, 3.2, 6.7] {
            let x_ms = x_over_d * d_ms;
            let exact = md1_wait_cdf(x_ms, d_ms, rho);
            let analytic = attainment(&shape, rate_rps, d_ms + x_ms).unwrap();
            assert!((analytic - exact).abs() < 1e-8, "rho {rho} x {x_ms}: {analytic} vs {exact}");
        }
        // The 90th percentile: where Erlang's formula crosses 0.9.
        let p90 = percentile_latency_ms(&shape, rate_rps, 90.0).unwrap();
        let below = md1_wait_cdf(p90 - d_ms - 1e-6, d_ms, rho);
        let above = md1_wait_cdf(p90 - d_ms + 1e-6, d_ms, rho);
        assert!(below <= 0.9 + 1e-9 && above >= 0.9 - 1e-9, "rho {rho}: p90 {p90}: {below} .. {above}");
    }
    // Near full load Erlang's alternating sum needs hundreds of digits; these
    // are its values with 400 (Python: `getcontext().prec = 400`, the sum
    // above in `Decimal`), D = 25 ms, P(T > t) = 1 - P(W <= t - D).
    let d_ms = 25.0;
    let shape = SegmentShape::new(1, vec![(1, d_ms)]).unwrap();
    for (rho, t_ms, exact) in [
        (0.99, 3000.0, 0.091_202_257_279_644_79),
        (0.99, 6434.0, 0.005_793_060_954_626_621),
        (0.995, 6434.0, 0.076_441_780_560_519_4),
        (0.997, 9000.0, 0.115_537_477_518_403_4),
    ] {
        let analytic = 1.0 - attainment(&shape, rho / d_ms * 1000.0, t_ms).unwrap();
        assert!((analytic - exact).abs() < 1e-9 * exact, "rho {rho} t {t_ms}: {analytic} vs {exact}");
    }
    // Several processes share the rate: each is M/D/1 at its share.
    let d_ms = 10.0;
    let three = SegmentShape::new(3, vec![(1, d_ms)]).unwrap();
    let exact = md1_wait_cdf(25.0, d_ms, 0.7);
    let analytic = attainment(&three, 3.0 * 70.0, d_ms + 25.0).unwrap();
    assert!((analytic - exact).abs() < 1e-8, "{analytic} vs {exact}");
}

/// Small shapes with partial batches, and a spread of ParvaGPU's.
fn sample_shapes() -> Vec<SegmentShape> {
    let mut shapes = vec![
        SegmentShape::new(1, vec![(1, 10.0)]).unwrap(),
        SegmentShape::new(2, vec![(1, 10.0), (2, 14.0), (4, 20.0)]).unwrap(),
        SegmentShape::new(1, vec![(1, 5.0), (2, 6.0), (4, 9.0), (8, 15.0), (16, 27.0)]).unwrap(),
        SegmentShape::full_batch_only(1, 32, 40.0).unwrap(),
    ];
    if let Some(configs) = parvagpu_configs() {
        shapes.extend(configs.iter().step_by(97).map(|c| c.shape.clone()));
    }
    shapes
}

#[test]
fn the_one_evaluation_check_agrees_with_the_searched_percentile() {
    for shape in sample_shapes() {
        let full_rps = shape.throughput_rps();
        for (load, percentile) in [(0.0, 99.0), (0.3, 99.0), (0.8, 95.0), (0.95, 99.9)] {
            let rate_rps = load * full_rps;
            let latency_ms = percentile_latency_ms(&shape, rate_rps, percentile).unwrap();
            let meets = |t_ms: f64| meets_percentile(&shape, rate_rps, percentile, t_ms).unwrap();
            assert!(meets(latency_ms * (1.0 + 1e-6)), "{shape:?} load {load}: {latency_ms} ms should meet");
            if latency_ms > shape.latency_ms(1) {
                assert!(!meets(latency_ms * (1.0 - 1e-6)), "{shape:?} load {load}: below {latency_ms} ms should miss");
            }
        }
        // Beyond what the processes serve nothing meets.
        assert!(!meets_percentile(&shape, 1.01 * full_rps, 99.0, 1e9).unwrap(), "{shape:?}");
    }
    assert!(meets_percentile(&sample_shapes()[0], -1.0, 99.0, 10.0).is_err());
}

#[test]
fn the_tolerance_is_the_edge_of_the_slowed_shapes_verdict() {
    const RANGE: (f64, f64) = (-0.5, 2.0);
    for shape in sample_shapes() {
        let full_rps = shape.throughput_rps();
        for (load, percentile, slo_factor) in [(0.3, 99.0, 3.0), (0.8, 95.0, 2.0), (0.9, 99.0, 4.0), (0.0, 99.0, 1.5)] {
            let rate_rps = load * full_rps;
            let latency_ms = slo_factor * shape.latency_ms(shape.max_batch());
            let found = tolerance(&shape, rate_rps, percentile, latency_ms, RANGE).unwrap();
            let meets =
                |slowdown: f64| meets_percentile(&shape.slowed_by(slowdown), rate_rps, percentile, latency_ms).unwrap();
            let case = format!("{shape:?} load {load} p{percentile} SLO {latency_ms} ms: tolerance {found}");
            assert!((RANGE.0..=RANGE.1).contains(&found), "{case}");
            if found > RANGE.0 {
                assert!(meets(found), "{case} should meet there");
            }
            if found < RANGE.1 {
                assert!(!meets(found + 1.01e-3), "{case}: 0.1% slower should miss");
            }
        }
        // At a load the full batches cannot carry even as profiled, it
        // misses at every slowdown down to the range's floor.
        let over = tolerance(&shape, 1.01 * full_rps, 99.0, 1e6, (0.0, 1.0)).unwrap();
        assert_eq!(over, 0.0, "{shape:?}");
    }
    let shape = &sample_shapes()[0];
    assert!(tolerance(shape, 1.0, 99.0, 10.0, (0.5, 0.5)).is_err());
    assert!(tolerance(shape, 1.0, 99.0, 10.0, (-1.0, 0.5)).is_err());
}

#[test]
fn latency_rises_with_the_rate() {
    for shape in sample_shapes() {
        let full = shape.throughput_rps();
        let first = shape.latency_ms(1);
        let slo = first + 2.0 * shape.latency_ms(shape.max_batch());
        let mut previous_miss = 0.0;
        let mut previous_p99 = 0.0;
        for step in 1..40 {
            let rate = full * f64::from(step) / 40.0;
            let miss = 1.0 - attainment(&shape, rate, slo).unwrap();
            assert!(miss >= previous_miss - 1e-9, "{shape:?} rate {rate}: P(T > slo) {miss} < {previous_miss}");
            let p99 = percentile_latency_ms(&shape, rate, 99.0).unwrap();
            assert!(p99 >= previous_p99 * (1.0 - 1e-9), "{shape:?} rate {rate}: p99 {p99} < {previous_p99}");
            (previous_miss, previous_p99) = (miss, p99);
        }
    }
}

#[test]
fn capacity_lies_between_zero_and_the_throughput_and_is_conservative() {
    for shape in sample_shapes() {
        let first = shape.latency_ms(1);
        let full = shape.latency_ms(shape.max_batch());
        assert_eq!(capacity_rps(&shape, 99.0, first * 0.999).unwrap(), 0.0, "{shape:?}");
        for slo in [first, first + 0.5 * full, first + 3.0 * full, first + 20.0 * full] {
            let capacity = capacity_rps(&shape, 99.0, slo).unwrap();
            assert!(capacity >= 0.0 && capacity < shape.throughput_rps(), "{shape:?} slo {slo}: {capacity}");
            if capacity > 0.0 {
                // The capacity meets the SLO; 0.1% more does not.
                assert!(attainment(&shape, capacity, slo).unwrap() >= 0.99, "{shape:?} slo {slo}");
                assert!(attainment(&shape, capacity * 1.001, slo).unwrap() < 0.99, "{shape:?} slo {slo}");
                let p99 = percentile_latency_ms(&shape, capacity, 99.0).unwrap();
                assert!(p99 <= slo * (1.0 + 1e-9), "{shape:?} slo {slo}: p99 {p99}");
            }
        }
        // A looser SLO or percentile never lowers the capacity.
        let tight = capacity_rps(&shape, 99.0, first + full).unwrap();
        let loose = capacity_rps(&shape, 99.0, first + 4.0 * full).unwrap();
        let lenient = capacity_rps(&shape, 90.0, first + full).unwrap();
        assert!(loose >= tight && lenient >= tight, "{shape:?}: {tight} {loose} {lenient}");
    }
}

#[test]
fn edge_rates_and_refusals() {
    let shape = SegmentShape::new(2, vec![(1, 10.0), (4, 20.0)]).unwrap();
    assert_eq!(percentile_latency_ms(&shape, 0.0, 99.0).unwrap(), 10.0);
    assert_eq!(attainment(&shape, 0.0, 10.0).unwrap(), 1.0);
    assert_eq!(attainment(&shape, 0.0, 9.0).unwrap(), 0.0);
    let full = shape.throughput_rps();
    assert_eq!(percentile_latency_ms(&shape, full, 99.0).unwrap(), f64::INFINITY);
    assert_eq!(percentile_latency_ms(&shape, 2.0 * full, 50.0).unwrap(), f64::INFINITY);
    assert_eq!(attainment(&shape, full, 1e6).unwrap(), 0.0);
    // Absurd SLOs and loads within a hair of full stay cheap and safe.
    assert!(attainment(&shape, 0.5 * full, 1e12).unwrap() > 1.0 - 1e-12);
    let p99 = percentile_latency_ms(&shape, full * (1.0 - 1e-12), 99.0).unwrap();
    assert!(p99 > 1e6, "{p99}");
    let p_high = percentile_latency_ms(&shape, 0.5 * full, 99.999_999).unwrap();
    assert!(p_high.is_finite() && p_high > percentile_latency_ms(&shape, 0.5 * full, 99.0).unwrap());
    let field = |error: ServingError| match error {
        ServingError::Invalid { field, .. } => field,
        other => panic!("not an invalid field: {other}"),
    };
    for percentile in [0.0, 100.0, -1.0, f64::NAN, f64::INFINITY] {
        assert_eq!(field(percentile_latency_ms(&shape, 1.0, percentile).unwrap_err()), "percentile");
        assert_eq!(field(capacity_rps(&shape, percentile, 50.0).unwrap_err()), "percentile");
    }
    for rate in [-1.0, f64::NAN, f64::INFINITY] {
        assert_eq!(field(percentile_latency_ms(&shape, rate, 99.0).unwrap_err()), "rate_rps");
        assert_eq!(field(attainment(&shape, rate, 50.0).unwrap_err()), "rate_rps");
    }
    for slo in [-1.0, f64::NAN, f64::INFINITY] {
        assert_eq!(field(attainment(&shape, 1.0, slo).unwrap_err()), "latency_slo_ms");
        assert_eq!(field(capacity_rps(&shape, 99.0, slo).unwrap_err()), "latency_slo_ms");
    }
    let message = capacity_rps(&shape, 100.0, 50.0).unwrap_err().to_string();
    assert!(message.starts_with("percentile:") && message.contains("100"), "{message}");
}

#[test]
fn the_cache_remembers_per_process_and_is_shared_by_clones() {
    let one = SegmentShape::new(1, vec![(1, 10.0), (2, 14.0), (4, 20.0)]).unwrap();
    let three = SegmentShape::new(3, vec![(1, 10.0), (2, 14.0), (4, 20.0)]).unwrap();
    let cache = CapacityCache::new();
    assert!(cache.is_empty());
    let direct = capacity_rps(&one, 99.0, 60.0).unwrap();
    assert_eq!(cache.capacity_rps(&one, 99.0, 60.0).unwrap(), direct);
    let clone = cache.clone();
    // Three processes: three times one process's capacity, from the same entry.
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * b;
    assert!(close(clone.capacity_rps(&three, 99.0, 60.0).unwrap(), 3.0 * direct));
    assert_eq!(cache.len(), 1);
    assert!(close(capacity_rps(&three, 99.0, 60.0).unwrap(), 3.0 * direct));
    let threads: Vec<f64> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|i| {
                let cache = cache.clone();
                let shape = one.clone();
                scope.spawn(move || cache.capacity_rps(&shape, 99.0, 60.0 + f64::from(i % 2)).unwrap())
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(threads[0], direct);
    assert_eq!(cache.len(), 2);
    assert!(cache.capacity_rps(&one, 0.0, 60.0).is_err());
}

#[test]
fn a_spread_of_batch_times_lengthens_every_latency_by_its_allowance() {
    // Batches whose p99 is 4% above their mean: every latency 4% of S_B longer.
    let shape = SegmentShape::new(2, vec![(1, 5.0), (4, 9.0), (8, 15.0)]).unwrap();
    let spread = shape.clone().with_p99_ratio(1.04).unwrap();
    let allowance_ms = 0.04 * 15.0;
    for rate_rps in [0.0, 300.0, 900.0] {
        let (plain, spread_ms) = (
            percentile_latency_ms(&shape, rate_rps, 99.0).unwrap(),
            percentile_latency_ms(&spread, rate_rps, 99.0).unwrap(),
        );
        assert!((spread_ms - plain - allowance_ms).abs() < 1e-6 * spread_ms, "{rate_rps}: {spread_ms} vs {plain}");
        let (at, shifted) =
            (attainment(&spread, rate_rps, 60.0).unwrap(), attainment(&shape, rate_rps, 60.0 - allowance_ms).unwrap());
        assert!((at - shifted).abs() < 1e-12, "{rate_rps}: {at} vs {shifted}");
    }
    let (spread_capacity, shifted) =
        (capacity_rps(&spread, 99.0, 60.0).unwrap(), capacity_rps(&shape, 99.0, 60.0 - allowance_ms).unwrap());
    assert!((spread_capacity / shifted - 1.0).abs() < 1e-9, "{spread_capacity} vs {shifted}");
    assert!(spread_capacity < capacity_rps(&shape, 99.0, 60.0).unwrap());
    // A lone request meets an SLO only with its allowance; a slower GPU scales both.
    assert_eq!(capacity_rps(&spread, 99.0, 5.0 + allowance_ms / 2.0).unwrap(), 0.0);
    let tolerated = tolerance(&spread, 600.0, 99.0, 60.0, (-0.5, 2.0)).unwrap();
    assert!(meets_percentile(&spread.slowed_by(tolerated), 600.0, 99.0, 60.0).unwrap());
    assert!(!meets_percentile(&spread.slowed_by(tolerated + 0.002), 600.0, 99.0, 60.0).unwrap());
    assert!(tolerated < tolerance(&shape, 600.0, 99.0, 60.0, (-0.5, 2.0)).unwrap());
    assert!(shape.with_p99_ratio(0.99).unwrap_err().to_string().starts_with("p99_ratio:"));
}

#[test]
fn absurd_slos_answer_within_the_tolerance_of_full_throughput() {
    // SLOs of up to 1e300 ms (these searches never ended) and a batch of
    // 1e-300 ms: capacities just under the full-batch throughput, met.
    let shape = SegmentShape::new(2, vec![(1, 5.0), (4, 8.0), (8, 12.0)]).unwrap();
    let full = shape.throughput_rps();
    for slo_ms in [1e6, 1e12, 1e20, 1e300] {
        let capacity = capacity_rps(&shape, 99.0, slo_ms).unwrap();
        assert!(capacity <= full && capacity >= full * (1.0 - 2e-3), "{slo_ms}: {capacity} of {full}");
        assert!(meets_percentile(&shape, capacity, 99.0, slo_ms).unwrap(), "{slo_ms}");
        assert!(percentile_latency_ms(&shape, capacity, 99.0).unwrap() > 12.0);
    }
    let tiny = SegmentShape::new(1, vec![(8, 1e-300)]).unwrap();
    let capacity = capacity_rps(&tiny, 99.0, 40.0).unwrap();
    assert!(capacity.is_finite() && capacity >= tiny.throughput_rps() * (1.0 - 2e-3), "{capacity}");
}
