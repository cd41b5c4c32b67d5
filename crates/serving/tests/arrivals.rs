//! The arrival generators against what their models promise.

use tessera_serving::ArrivalModel;

/// `count` arrivals of `model` at `rate_rps`.
fn arrivals(model: &ArrivalModel, rate_rps: f64, count: usize, seed: u64) -> Vec<f64> {
    model.stream(rate_rps, seed, 0).unwrap().take(count).collect()
}

/// The coefficient of variation of the gaps between `times`.
fn gap_cv(times: &[f64]) -> f64 {
    let gaps: Vec<f64> = times.windows(2).map(|pair| pair[1] - pair[0]).collect();
    let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
    let variance = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / (gaps.len() - 1) as f64;
    variance.sqrt() / mean
}

/// The index of dispersion (variance over mean) of the counts of `times`
/// in windows of `window_s` over `[0, end_s)`.
pub fn dispersion(times: &[f64], window_s: f64, end_s: f64) -> f64 {
    let windows = (end_s / window_s) as usize;
    let mut counts = vec![0f64; windows];
    for &t in times {
        let w = (t / window_s) as usize;
        if w < windows {
            counts[w] += 1.0;
        }
    }
    let mean = counts.iter().sum::<f64>() / windows as f64;
    let variance = counts.iter().map(|c| (c - mean).powi(2)).sum::<f64>() / (windows - 1) as f64;
    variance / mean
}

#[test]
fn poisson_counts_have_dispersion_one_and_the_mean_rate() {
    let times: Vec<f64> = ArrivalModel::Poisson.stream(100.0, 3, 0).unwrap().take_while(|&t| t < 20_000.0).collect();
    let rate = times.len() as f64 / 20_000.0;
    assert!((rate / 100.0 - 1.0).abs() < 0.005, "rate {rate}");
    // 20,000 windows: the estimate's standard deviation is about 0.01.
    let index = dispersion(&times, 1.0, 20_000.0);
    assert!((index - 1.0).abs() < 0.05, "index of dispersion {index}");
    assert!((gap_cv(&times) - 1.0).abs() < 0.01);
}

#[test]
fn renewal_gaps_have_the_asked_cv_and_mean() {
    for (cv, count) in [(0.25, 1_000_000), (0.7, 1_000_000), (1.0, 1_000_000), (2.0, 2_000_000), (10.0, 10_000_000)] {
        let times = arrivals(&ArrivalModel::Renewal { cv }, 50.0, count, 7);
        let rate = (count - 1) as f64 / (times[count - 1] - times[0]);
        let got = gap_cv(&times);
        assert!((got / cv - 1.0).abs() < 0.03, "cv {cv}: got {got}");
        assert!((rate / 50.0 - 1.0).abs() < 0.01, "cv {cv}: rate {rate}");
    }
}

#[test]
fn onoff_keeps_the_long_run_mean_and_is_bursty() {
    let model = ArrivalModel::parse("onoff=burst:3,on:5,off:20").unwrap();
    let end_s = 1_000_000.0;
    let times: Vec<f64> = model.stream(2.0, 5, 0).unwrap().take_while(|&t| t < end_s).collect();
    let rate = times.len() as f64 / end_s;
    assert!((rate / 2.0 - 1.0).abs() < 0.02, "long-run rate {rate}");
    // On at 6 req/s, off at 0.5 req/s: counts over 10 s vary far more than Poisson's.
    let index = dispersion(&times, 10.0, end_s);
    assert!(index > 5.0, "index of dispersion {index}");
    // A burst of 1 is Poisson.
    let flat = ArrivalModel::OnOff { burst: 1.0, mean_on_s: 5.0, mean_off_s: 20.0 };
    let times: Vec<f64> = flat.stream(2.0, 5, 0).unwrap().take_while(|&t| t < 100_000.0).collect();
    assert!((dispersion(&times, 10.0, 100_000.0) - 1.0).abs() < 0.1);
}

#[test]
fn a_replayed_trace_has_the_service_rate_exactly_and_keeps_its_gaps_cv() {
    // A bursty synthetic trace: 10,000 instants with gaps of cv 2, 3 s apart on average.
    let source = arrivals(&ArrivalModel::Renewal { cv: 2.0 }, 1.0 / 3.0, 10_000, 99);
    let model = ArrivalModel::trace("synthetic", source.clone()).unwrap();
    let rate_rps = 50.0;
    // One pass over the trace at 50 req/s lasts 9,999 gaps / 50 = 199.98 s.
    let period_s = 9_999.0 / rate_rps;
    let end_s = 3.0 * period_s;
    let times: Vec<f64> = model.stream(rate_rps, 1, 0).unwrap().take_while(|&t| t < end_s).collect();
    let rate = times.len() as f64 / end_s;
    assert!((rate / rate_rps - 1.0).abs() < 0.01, "replayed rate {rate}");
    let (want, got) = (gap_cv(&source), gap_cv(&times));
    assert!((got / want - 1.0).abs() < 0.01, "trace cv {want}, replayed {got}");
    // Another service replays other instants.
    let other: Vec<f64> = model.stream(rate_rps, 1, 1).unwrap().take(100).collect();
    assert_ne!(&times[..100], &other[..]);
}
