//! The Azure LLM conversation trace replayed as a service's arrivals keeps
//! its burstiness.

use tessera_serving::ArrivalModel;

use crate::arrivals::dispersion;

/// Seconds since the trace's first day of a `YYYY-MM-DD HH:MM:SS.fffffff`
/// timestamp (days counted by the civil-from-days algorithm; no calendar
/// library), relative to `first_day` (days since 1970-01-01).
fn seconds(timestamp: &str) -> (i64, f64) {
    let (date, time) = timestamp.split_once(' ').expect("a date and a time");
    let date: Vec<i64> = date.split('-').map(|p| p.parse().expect("a date field")).collect();
    let (year, month, day) = (date[0], date[1], date[2]);
    // Howard Hinnant's days_from_civil.
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let time: Vec<f64> = time.split(':').map(|p| p.parse().expect("a time field")).collect();
    (days, time[0] * 3600.0 + time[1] * 60.0 + time[2])
}

#[test]
fn days_are_counted_like_the_calendar() {
    assert_eq!(seconds("1970-01-01 00:00:00.0").0, 0);
    assert_eq!(seconds("2023-11-16 18:15:46.5").0, 19_677);
    assert_eq!(seconds("2024-03-01 00:00:01.25"), (19_783, 1.25));
}

#[test]
fn the_replayed_azure_trace_stays_bursty() {
    let Some(path) = tessera_testkit::shared_data("traces/azure_llm_conv_2023.csv") else { return };
    let mut reader = csv::Reader::from_path(&path).unwrap();
    let column = reader.headers().unwrap().iter().position(|h| h == "TIMESTAMP").expect("a TIMESTAMP column");
    let stamps: Vec<(i64, f64)> = reader.records().map(|record| seconds(&record.unwrap()[column])).collect();
    let first_day = stamps[0].0;
    let times: Vec<f64> = stamps.iter().map(|&(day, s)| (day - first_day) as f64 * 86_400.0 + s).collect();
    let span_s = times.iter().cloned().fold(f64::MIN, f64::max) - times.iter().cloned().fold(f64::MAX, f64::min);
    let trace_rate = (times.len() - 1) as f64 / span_s;
    assert!((trace_rate - 5.53).abs() < 0.01, "the README's 5.53 req/s: {trace_rate}");
    let start = times[0];
    let original: Vec<f64> = times.iter().map(|t| t - start).collect();
    let original_index = dispersion(&original, 10.0, span_s);

    let model = ArrivalModel::trace("azure", times).unwrap();
    // At the trace's own rate, three passes from a seeded offset.
    let end_s = 3.0 * span_s;
    let replayed: Vec<f64> = model.stream(trace_rate, 4, 0).unwrap().take_while(|&t| t < end_s).collect();
    let index = dispersion(&replayed, 10.0, end_s);
    let poisson: Vec<f64> =
        ArrivalModel::Poisson.stream(trace_rate, 4, 0).unwrap().take_while(|&t| t < end_s).collect();
    let poisson_index = dispersion(&poisson, 10.0, end_s);
    assert!(index > 2.0 && poisson_index < 1.3, "replayed {index}, Poisson {poisson_index}");
    assert!((index / original_index - 1.0).abs() < 0.3, "replayed {index}, original {original_index}");
    // Scaled to a service of 200 req/s, the replay is still far burstier than Poisson.
    let fast: Vec<f64> = model.stream(200.0, 4, 0).unwrap().take_while(|&t| t < 600.0).collect();
    let fast_index = dispersion(&fast, 10.0, 600.0);
    assert!(fast_index > 5.0, "at 200 req/s: {fast_index}");
}
