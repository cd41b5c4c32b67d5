//! Request rates over time: a piecewise-constant curve per service.

use serde::Serialize;

use crate::error::CoreError;

/// One step of a service's rate: from `time_s` on, until the service's
/// next point, `service` receives `rate_rps` requests per second.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrafficPoint {
    /// When the rate starts, seconds from the start of the curve.
    pub time_s: f64,
    /// The service.
    pub service: String,
    /// Its mean request rate from then on, requests per second.
    pub rate_rps: f64,
}

/// Piecewise-constant request rates of a set of services, checked: every
/// service has a point at 0 s, its points are in time order, rates are
/// finite and not negative. A service's last rate holds for ever after.
#[derive(Debug, Clone, PartialEq)]
pub struct TrafficCurve {
    services: Vec<String>,
    /// Per service (in the order of `services`): its steps, `(time_s,
    /// rate_rps)`, times increasing, the first at 0.
    steps: Vec<Vec<(f64, f64)>>,
}

impl TrafficCurve {
    /// The curve of `services` (in that order) from `points`. A point at
    /// fault is named by its index among `points`; a service without
    /// points by name.
    pub fn new(services: &[String], points: &[TrafficPoint]) -> Result<TrafficCurve, CoreError> {
        let mut steps: Vec<Vec<(f64, f64)>> = vec![Vec::new(); services.len()];
        for (index, point) in points.iter().enumerate() {
            let fault = |field, message: String| CoreError::Traffic { index: Some(index), field, message };
            if !(point.time_s.is_finite() && point.time_s >= 0.0) {
                return Err(fault("time_s", format!("{} is not a time of 0 s or later", point.time_s)));
            }
            if !(point.rate_rps.is_finite() && point.rate_rps >= 0.0) {
                return Err(fault("rate_rps", format!("{} is not a rate (finite, >= 0 requests/s)", point.rate_rps)));
            }
            let Some(service) = services.iter().position(|name| *name == point.service) else {
                return Err(fault(
                    "service",
                    format!("'{}' is not among the services ({})", point.service, services.join(", ")),
                ));
            };
            let service_steps = &mut steps[service];
            match service_steps.last() {
                Some(&(previous_s, _)) if point.time_s <= previous_s => {
                    return Err(fault(
                        "time_s",
                        format!(
                            "{} s is not after the previous point of '{}' ({previous_s} s): each service's points \
                             must be in time order, one per time",
                            point.time_s, point.service
                        ),
                    ));
                }
                None if point.time_s > 0.0 => {
                    return Err(fault(
                        "time_s",
                        format!(
                            "the first point of '{}' is at {} s: a service's rate must be given from 0 s",
                            point.service, point.time_s
                        ),
                    ));
                }
                _ => service_steps.push((point.time_s, point.rate_rps)),
            }
        }
        if let Some(missing) = steps.iter().position(Vec::is_empty) {
            return Err(CoreError::Traffic {
                index: None,
                field: "service",
                message: format!("service '{}' has no traffic points", services[missing]),
            });
        }
        Ok(TrafficCurve { services: services.to_vec(), steps })
    }

    /// The services, in the order their rates are given.
    pub fn services(&self) -> &[String] {
        &self.services
    }

    /// The rate of `service` (an index into [`TrafficCurve::services`]) at
    /// `time_s`, requests per second.
    pub fn rate_rps(&self, service: usize, time_s: f64) -> f64 {
        let steps = &self.steps[service];
        let after = steps.partition_point(|&(start_s, _)| start_s <= time_s);
        steps[after.saturating_sub(1)].1
    }

    /// Every service's rate at `time_s`.
    pub fn rates_rps(&self, time_s: f64) -> Vec<f64> {
        (0..self.services.len()).map(|service| self.rate_rps(service, time_s)).collect()
    }

    /// Every service's mean rate over `[from_s, to_s)` (what a rate query
    /// over that window sees); the rate at `from_s` when the window is
    /// empty.
    pub fn mean_rates_rps(&self, from_s: f64, to_s: f64) -> Vec<f64> {
        if to_s <= from_s {
            return self.rates_rps(from_s);
        }
        let cuts = self.change_times(from_s, to_s);
        let bounds: Vec<f64> = std::iter::once(from_s).chain(cuts).chain(std::iter::once(to_s)).collect();
        let mut means = vec![0.0; self.services.len()];
        for window in bounds.windows(2) {
            for (service, mean) in means.iter_mut().enumerate() {
                *mean += self.rate_rps(service, window[0]) * (window[1] - window[0]);
            }
        }
        means.iter().map(|total| total / (to_s - from_s)).collect()
    }

    /// The times strictly between `from_s` and `to_s` at which some
    /// service's rate changes, increasing, each once.
    pub fn change_times(&self, from_s: f64, to_s: f64) -> Vec<f64> {
        let mut times: Vec<f64> = self
            .steps
            .iter()
            .flat_map(|steps| steps.iter().map(|&(start_s, _)| start_s))
            .filter(|&start_s| start_s > from_s && start_s < to_s)
            .collect();
        times.sort_by(f64::total_cmp);
        times.dedup();
        times
    }

    /// Each service's highest rate over `[0, until_s)`.
    pub fn peak_rates_rps(&self, until_s: f64) -> Vec<f64> {
        self.steps
            .iter()
            .map(|steps| {
                steps.iter().filter(|&&(start_s, _)| start_s < until_s).map(|&(_, rate)| rate).fold(0.0, f64::max)
            })
            .collect()
    }

    /// The points of the curve, in time order (services in their order at
    /// one time).
    pub fn points(&self) -> Vec<TrafficPoint> {
        let mut points: Vec<(f64, usize, f64)> = self
            .steps
            .iter()
            .enumerate()
            .flat_map(|(service, steps)| steps.iter().map(move |&(time_s, rate)| (time_s, service, rate)))
            .collect();
        points.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        points
            .into_iter()
            .map(|(time_s, service, rate_rps)| TrafficPoint {
                time_s,
                service: self.services[service].clone(),
                rate_rps,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(time_s: f64, service: &str, rate_rps: f64) -> TrafficPoint {
        TrafficPoint { time_s, service: service.into(), rate_rps }
    }

    fn names() -> Vec<String> {
        vec!["a".into(), "b".into()]
    }

    #[test]
    fn rates_are_piecewise_constant_and_averaged_over_windows() {
        let points = [point(0.0, "a", 10.0), point(0.0, "b", 1.0), point(60.0, "a", 20.0), point(90.0, "b", 3.0)];
        let curve = TrafficCurve::new(&names(), &points).unwrap();
        assert_eq!(curve.rates_rps(0.0), [10.0, 1.0]);
        assert_eq!(curve.rates_rps(59.9), [10.0, 1.0]);
        assert_eq!(curve.rates_rps(60.0), [20.0, 1.0]);
        assert_eq!(curve.rates_rps(1e9), [20.0, 3.0]);
        // a: 30 s at 10 then 30 s at 20; b: 60 s at 1.
        assert_eq!(curve.mean_rates_rps(30.0, 90.0), [15.0, 1.0]);
        assert_eq!(curve.change_times(0.0, 100.0), [60.0, 90.0]);
        assert_eq!(curve.change_times(60.0, 90.0), Vec::<f64>::new());
        assert_eq!(curve.peak_rates_rps(60.0), [10.0, 1.0]);
        assert_eq!(curve.peak_rates_rps(100.0), [20.0, 3.0]);
        let round_trip = TrafficCurve::new(&names(), &curve.points()).unwrap();
        assert_eq!(round_trip, curve);
    }

    #[test]
    fn a_bad_point_is_named_by_its_index_and_field() {
        let fault = |points: &[TrafficPoint]| match TrafficCurve::new(&names(), points).unwrap_err() {
            CoreError::Traffic { index, field, message } => (index, field, message),
            other => panic!("{other}"),
        };
        let (index, field, message) = fault(&[point(0.0, "a", 1.0), point(0.0, "c", 1.0)]);
        assert_eq!((index, field), (Some(1), "service"));
        assert!(message.contains("'c' is not among the services (a, b)"), "{message}");
        let (index, field, _) = fault(&[point(0.0, "a", -1.0)]);
        assert_eq!((index, field), (Some(0), "rate_rps"));
        let (index, field, message) = fault(&[point(0.0, "a", 1.0), point(0.0, "b", 1.0), point(0.0, "a", 2.0)]);
        assert_eq!((index, field), (Some(2), "time_s"));
        assert!(message.contains("time order"), "{message}");
        let (index, _, message) = fault(&[point(5.0, "a", 1.0)]);
        assert_eq!(index, Some(0));
        assert!(message.contains("from 0 s"), "{message}");
        let (index, _, message) = fault(&[point(0.0, "a", 1.0)]);
        assert_eq!(index, None);
        assert_eq!(message, "service 'b' has no traffic points");
        let (_, field, _) = fault(&[point(f64::NAN, "a", 1.0)]);
        assert_eq!(field, "time_s");
    }
}
