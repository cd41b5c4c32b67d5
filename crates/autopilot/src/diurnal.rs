//! Synthetic diurnal traffic: a daily cycle per service with its own
//! phase, noise, and bursts on top — deterministic by seed.
//!
//! Service `s` with peak rate `P` peaking at hour `h_s` has the base rate
//! `P (m + a cos(2π (t − h_s) / 24 h))`, `m = (1 + 1/R) / 2`,
//! `a = (1 − 1/R) / 2`, so it runs from `P` at its peak down to `P / R` at
//! its trough twelve hours later (`R` the peak-to-trough ratio). The curve
//! steps every `step_s`, each step at the base rate of its middle times a
//! factor drawn uniformly within `±noise`. Bursts multiply the rate by a
//! factor drawn in `[1 + (F − 1) / 2, F]` for a duration drawn in
//! `[0.5, 1.5] ×` the mean burst length, starting at a uniform instant
//! (rounded to the second); their edges are points of the curve too.

use tessera_core::rng::SplitMix64;

use crate::error::AutopilotError;
use tessera_core::{TrafficCurve, TrafficPoint};

/// Default hours of a generated curve.
pub const DEFAULT_HOURS: f64 = 24.0;
/// Default step of a generated curve, seconds (one minute).
pub const DEFAULT_STEP_S: f64 = 60.0;
/// Default ratio of a service's peak rate to its trough rate.
pub const DEFAULT_PEAK_TO_TROUGH: f64 = 3.0;
/// Default hour of the day at which services peak, on average.
pub const DEFAULT_PEAK_HOUR: f64 = 14.0;
/// Default spread of the services' peak hours, hours (each service's peak
/// hour is drawn uniformly within half of it either side of the mean).
pub const DEFAULT_PHASE_SPREAD_H: f64 = 6.0;
/// Default relative noise of each step (±5%).
pub const DEFAULT_NOISE: f64 = 0.05;
/// Default bursts per service per day.
pub const DEFAULT_BURSTS_PER_DAY: f64 = 3.0;
/// Default largest burst factor (a burst raises the rate by up to 50%).
pub const DEFAULT_BURST_FACTOR: f64 = 1.5;
/// Default mean burst length, minutes.
pub const DEFAULT_BURST_MINUTES: f64 = 20.0;

/// How to draw a diurnal curve.
#[derive(Debug, Clone, PartialEq)]
pub struct DiurnalOptions {
    /// Hours the curve covers.
    pub hours: f64,
    /// Seconds between steps of the curve.
    pub step_s: f64,
    /// A service's peak rate over its trough rate (>= 1).
    pub peak_to_trough: f64,
    /// The mean hour of the day at which services peak.
    pub peak_hour: f64,
    /// The spread of the services' peak hours, hours.
    pub phase_spread_h: f64,
    /// Relative noise of each step, e.g. 0.05 for ±5%.
    pub noise: f64,
    /// Bursts per service per day (rounded per service over `hours`).
    pub bursts_per_day: f64,
    /// The largest burst factor (>= 1).
    pub burst_factor: f64,
    /// Mean burst length, minutes.
    pub burst_minutes: f64,
    /// The seed: the same seed and options give the same curve.
    pub seed: u64,
}

impl Default for DiurnalOptions {
    /// The documented defaults (the `DEFAULT_*` constants), seed 0.
    fn default() -> Self {
        DiurnalOptions {
            hours: DEFAULT_HOURS,
            step_s: DEFAULT_STEP_S,
            peak_to_trough: DEFAULT_PEAK_TO_TROUGH,
            peak_hour: DEFAULT_PEAK_HOUR,
            phase_spread_h: DEFAULT_PHASE_SPREAD_H,
            noise: DEFAULT_NOISE,
            bursts_per_day: DEFAULT_BURSTS_PER_DAY,
            burst_factor: DEFAULT_BURST_FACTOR,
            burst_minutes: DEFAULT_BURST_MINUTES,
            seed: 0,
        }
    }
}

impl DiurnalOptions {
    /// Checks the options, naming the first out of range.
    pub fn validate(&self) -> Result<(), AutopilotError> {
        let positive = |field, value: f64| {
            if value.is_finite() && value > 0.0 {
                Ok(())
            } else {
                Err(AutopilotError::invalid(field, format!("{value} is not positive")))
            }
        };
        positive("hours", self.hours)?;
        positive("step_s", self.step_s)?;
        positive("burst_minutes", self.burst_minutes)?;
        let at_least_one = |field, value: f64| {
            if value.is_finite() && value >= 1.0 {
                Ok(())
            } else {
                Err(AutopilotError::invalid(field, format!("{value} is not a ratio of 1 or more")))
            }
        };
        at_least_one("peak_to_trough", self.peak_to_trough)?;
        at_least_one("burst_factor", self.burst_factor)?;
        if !(self.noise.is_finite() && (0.0..1.0).contains(&self.noise)) {
            return Err(AutopilotError::invalid("noise", format!("{} is not in [0, 1)", self.noise)));
        }
        for (field, value) in
            [("peak_hour", self.peak_hour), ("phase_spread_h", self.phase_spread_h), ("bursts", self.bursts_per_day)]
        {
            if !(value.is_finite() && value >= 0.0) {
                return Err(AutopilotError::invalid(field, format!("{value} is not a finite number of 0 or more")));
            }
        }
        if self.hours * 3600.0 / self.step_s > 1e6 {
            return Err(AutopilotError::invalid(
                "step_s",
                format!("{} s makes more than a million steps of {} h", self.step_s, self.hours),
            ));
        }
        Ok(())
    }
}

/// A diurnal curve for `services` (name and peak rate, req/s) under
/// `options` (see the module documentation).
pub fn diurnal(services: &[(String, f64)], options: &DiurnalOptions) -> Result<TrafficCurve, AutopilotError> {
    options.validate()?;
    let mut rng = SplitMix64::new(options.seed);
    let duration_s = options.hours * 3600.0;
    let steps = (duration_s / options.step_s).ceil() as usize;
    let (mean, amplitude) = ((1.0 + 1.0 / options.peak_to_trough) / 2.0, (1.0 - 1.0 / options.peak_to_trough) / 2.0);
    let mut points = Vec::new();
    for (name, peak_rps) in services {
        let half_spread_h = options.phase_spread_h / 2.0;
        let peak_h = options.peak_hour + rng.uniform(-half_spread_h, half_spread_h);
        let base_rps = |time_s: f64| {
            let phase = std::f64::consts::TAU * (time_s / 3600.0 - peak_h) / 24.0;
            peak_rps * (mean + amplitude * phase.cos())
        };
        let noise: Vec<f64> = (0..steps).map(|_| 1.0 + rng.uniform(-options.noise, options.noise)).collect();
        let count = (options.bursts_per_day * options.hours / 24.0).round() as usize;
        let bursts: Vec<(f64, f64, f64)> = (0..count)
            .map(|_| {
                let start_s = rng.uniform(0.0, duration_s).round();
                let length_s = (rng.uniform(0.5, 1.5) * options.burst_minutes * 60.0).round();
                let factor = rng.uniform(1.0 + (options.burst_factor - 1.0) / 2.0, options.burst_factor);
                (start_s, (start_s + length_s).min(duration_s), factor)
            })
            .collect();
        let mut times: Vec<f64> = (0..steps).map(|k| k as f64 * options.step_s).collect();
        times.extend(bursts.iter().flat_map(|&(start_s, end_s, _)| [start_s, end_s]).filter(|&t| t < duration_s));
        times.sort_by(f64::total_cmp);
        times.dedup();
        for time_s in times {
            let step = ((time_s / options.step_s) as usize).min(steps - 1);
            let middle_s = (step as f64 + 0.5) * options.step_s;
            let burst: f64 = bursts
                .iter()
                .filter(|&&(start_s, end_s, _)| start_s <= time_s && time_s < end_s)
                .map(|&(.., factor)| factor)
                .product();
            let rate_rps = base_rps(middle_s) * noise[step] * burst;
            points.push(TrafficPoint { time_s, service: name.clone(), rate_rps });
        }
    }
    let names: Vec<String> = services.iter().map(|(name, _)| name.clone()).collect();
    Ok(TrafficCurve::new(&names, &points)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn services() -> Vec<(String, f64)> {
        vec![("a".into(), 300.0), ("b".into(), 30.0)]
    }

    #[test]
    fn the_cycle_runs_from_peak_to_trough_without_noise_or_bursts() {
        let options = DiurnalOptions { noise: 0.0, bursts_per_day: 0.0, phase_spread_h: 0.0, ..Default::default() };
        let curve = diurnal(&services(), &options).unwrap();
        let rates: Vec<f64> = (0..1440).map(|minute| curve.rate_rps(0, minute as f64 * 60.0)).collect();
        let high = rates.iter().copied().fold(0.0, f64::max);
        let low = rates.iter().copied().fold(f64::INFINITY, f64::min);
        assert!((high - 300.0).abs() < 0.01 && (low - 100.0).abs() < 0.01, "{high} {low}");
        // The peak is at 14:00 (the step from 13:59 holds its middle, 13:59:30).
        let peak_minute = rates.iter().position(|&rate| rate == high).unwrap();
        assert!((13 * 60 + 59..=14 * 60).contains(&peak_minute), "{peak_minute}");
    }

    #[test]
    fn bursts_and_noise_are_drawn_by_seed() {
        let options = DiurnalOptions::default();
        let one = diurnal(&services(), &options).unwrap();
        assert_eq!(one, diurnal(&services(), &options).unwrap());
        let other = diurnal(&services(), &DiurnalOptions { seed: 1, ..options.clone() }).unwrap();
        assert_ne!(one, other);
        // Bursts lift the peak above the cycle's (with at most 5% noise).
        let calm = DiurnalOptions { bursts_per_day: 0.0, ..options.clone() };
        let calm_peak = diurnal(&services(), &calm).unwrap().peak_rates_rps(86_400.0)[0];
        assert!(calm_peak <= 300.0 * 1.05 + 1e-9, "{calm_peak}");
        let peaks: Vec<f64> = (0..10)
            .map(|seed| diurnal(&services(), &DiurnalOptions { seed, ..options.clone() }).unwrap())
            .map(|curve| curve.peak_rates_rps(86_400.0)[0])
            .collect();
        assert!(peaks.iter().any(|&peak| peak > 300.0 * 1.05), "{peaks:?}");
        assert!(peaks.iter().all(|&peak| peak <= 300.0 * 1.05 * 1.5 * 1.5 * 1.5), "{peaks:?}");
    }

    #[test]
    fn options_out_of_range_are_named() {
        let bad = |options: DiurnalOptions| diurnal(&services(), &options).unwrap_err().to_string();
        assert!(bad(DiurnalOptions { peak_to_trough: 0.5, ..Default::default() }).starts_with("peak_to_trough:"));
        assert!(bad(DiurnalOptions { hours: 0.0, ..Default::default() }).starts_with("hours:"));
        assert!(bad(DiurnalOptions { noise: 1.0, ..Default::default() }).starts_with("noise:"));
        assert!(bad(DiurnalOptions { step_s: 1e-3, ..Default::default() }).starts_with("step_s:"));
    }
}
