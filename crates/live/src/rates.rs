//! Where the live loop reads each service's request rate: a [`RateSource`]
//! (Prometheus in `prometheus`, or a traffic file replayed here). A rate
//! that cannot be read is a missing sample with its cause, never an
//! error: the controller holds on it and the journal says why.

use tessera_autopilot::RateSample;
use tessera_core::TrafficCurve;

/// What a source answered at one decision.
#[derive(Debug, Clone, PartialEq)]
pub struct Rates {
    /// Each service's sample (in the controller's order); `None` when
    /// there is none.
    pub samples: Vec<Option<RateSample>>,
    /// Why samples are missing: a cause and the services it struck, one
    /// line each.
    pub faults: Vec<String>,
}

impl Rates {
    /// Each service's result (in `services`' order) as a sample, the
    /// missing ones (an `Err` says why) as faults grouped by cause.
    pub fn from_results(services: &[String], results: Vec<Result<RateSample, String>>) -> Rates {
        let mut grouped: Vec<(String, Vec<&str>)> = Vec::new();
        let mut samples = Vec::with_capacity(results.len());
        for (service, result) in services.iter().zip(results) {
            match result {
                Ok(sample) => samples.push(Some(sample)),
                Err(cause) => {
                    samples.push(None);
                    match grouped.iter_mut().find(|(known, _)| *known == cause) {
                        Some((_, struck)) => struck.push(service.as_str()),
                        None => grouped.push((cause, vec![service.as_str()])),
                    }
                }
            }
        }
        let faults = grouped.into_iter().map(|(cause, struck)| format!("{}: {cause}", struck.join(", "))).collect();
        Rates { samples, faults }
    }
}

/// A source of request rates.
pub trait RateSource {
    /// The source in words, e.g. `Prometheus at http://…`.
    fn describe(&self) -> String;

    /// Each service's rate at `now_s` (seconds since the Unix epoch).
    fn rates(&mut self, now_s: f64) -> Rates;
}

/// A traffic file replayed from the first decision on: at `now_s`, each
/// service's mean rate over the last `window_s` seconds of the file
/// (what a PromQL `rate(…[window])` of counters following it reads).
#[derive(Debug, Clone)]
pub struct FileRates {
    curve: TrafficCurve,
    window_s: f64,
    name: String,
    /// The time of the first decision: the file's 0 s.
    start_s: Option<f64>,
}

impl FileRates {
    /// The replay of `curve` (read from `name`) averaging over `window_s`.
    pub fn new(curve: TrafficCurve, window_s: f64, name: String) -> FileRates {
        FileRates { curve, window_s, name, start_s: None }
    }
}

impl RateSource for FileRates {
    fn describe(&self) -> String {
        format!("the traffic file {} (rates averaged over {} s)", self.name, self.window_s)
    }

    fn rates(&mut self, now_s: f64) -> Rates {
        let start_s = *self.start_s.get_or_insert(now_s);
        let file_s = now_s - start_s;
        let results = self
            .curve
            .mean_rates_rps(file_s - self.window_s, file_s)
            .into_iter()
            .map(|rate_rps| Ok(RateSample { rate_rps, observed_at_s: now_s }))
            .collect();
        Rates::from_results(self.curve.services(), results)
    }
}

#[cfg(test)]
mod tests {
    use tessera_core::TrafficPoint;

    use super::*;

    fn point(time_s: f64, service: &str, rate_rps: f64) -> TrafficPoint {
        TrafficPoint { time_s, service: service.to_string(), rate_rps }
    }

    #[test]
    fn a_file_replays_from_the_first_decision_averaging_over_the_window() {
        let names = vec!["a".to_string(), "b".to_string()];
        let points = [point(0.0, "a", 10.0), point(0.0, "b", 1.0), point(100.0, "a", 30.0)];
        let mut source = FileRates::new(TrafficCurve::new(&names, &points).unwrap(), 20.0, "t.csv".into());
        let rates = |source: &mut FileRates, now_s| -> Vec<f64> {
            source.rates(now_s).samples.into_iter().map(|s| s.unwrap().rate_rps).collect()
        };
        assert_eq!(rates(&mut source, 5000.0), vec![10.0, 1.0]);
        assert_eq!(rates(&mut source, 5110.0), vec![20.0, 1.0], "half of the window at each rate");
        assert_eq!(rates(&mut source, 5200.0), vec![30.0, 1.0]);
        assert_eq!(source.rates(5200.0).samples[0].unwrap().observed_at_s, 5200.0);
    }

    #[test]
    fn missing_samples_are_grouped_by_cause() {
        let names: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        let sample = RateSample { rate_rps: 1.0, observed_at_s: 0.0 };
        let rates = Rates::from_results(&names, vec![Err("down".to_string()), Ok(sample), Err("down".to_string())]);
        assert_eq!(rates.samples, vec![None, Some(sample), None]);
        assert_eq!(rates.faults, vec!["a, c: down".to_string()]);
    }
}
