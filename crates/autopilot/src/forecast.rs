//! Forecasting each service's rate over the next interval, and how far
//! the forecasts were off.
//!
//! A service's forecast is the larger of two: the highest rate of its last
//! few observations (a short window: a rate that just fell is not trusted
//! at once) and a smoothed trend projected ahead (Holt's linear method on
//! the observations: a level and a slope per interval, each smoothed
//! exponentially), so a rising rate is met before it arrives. Never below
//! zero. Observations are taken as equally spaced.

use std::collections::VecDeque;

use serde::Serialize;

use crate::error::AutopilotError;

/// Default number of observations in the window whose highest rate bounds
/// the forecast from below.
pub const DEFAULT_WINDOW: usize = 3;
/// Default smoothing of the level (Holt's alpha).
pub const DEFAULT_LEVEL_SMOOTHING: f64 = 0.5;
/// Default smoothing of the slope (Holt's beta).
pub const DEFAULT_TREND_SMOOTHING: f64 = 0.3;
/// Default horizon, in observation intervals: the trend is projected this
/// far ahead (the next interval, and the time a reconfiguration takes).
pub const DEFAULT_HORIZON_INTERVALS: f64 = 1.5;

/// How to forecast.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ForecastConfig {
    /// Observations in the window (>= 1).
    pub window: usize,
    /// Smoothing of the level, in (0, 1].
    pub level_smoothing: f64,
    /// Smoothing of the slope, in [0, 1].
    pub trend_smoothing: f64,
    /// How far ahead the trend is projected, intervals (>= 0).
    pub horizon_intervals: f64,
}

impl Default for ForecastConfig {
    /// The documented defaults (the `DEFAULT_*` constants).
    fn default() -> Self {
        ForecastConfig {
            window: DEFAULT_WINDOW,
            level_smoothing: DEFAULT_LEVEL_SMOOTHING,
            trend_smoothing: DEFAULT_TREND_SMOOTHING,
            horizon_intervals: DEFAULT_HORIZON_INTERVALS,
        }
    }
}

impl ForecastConfig {
    /// Checks the configuration, naming the first field out of range.
    pub fn validate(&self) -> Result<(), AutopilotError> {
        if self.window == 0 {
            return Err(AutopilotError::invalid("forecast window", "at least one observation is needed"));
        }
        if !(self.level_smoothing > 0.0 && self.level_smoothing <= 1.0) {
            return Err(AutopilotError::invalid(
                "level_smoothing",
                format!("{} is not in (0, 1]", self.level_smoothing),
            ));
        }
        if !(0.0..=1.0).contains(&self.trend_smoothing) {
            return Err(AutopilotError::invalid(
                "trend_smoothing",
                format!("{} is not in [0, 1]", self.trend_smoothing),
            ));
        }
        if !(self.horizon_intervals.is_finite() && self.horizon_intervals >= 0.0) {
            return Err(AutopilotError::invalid(
                "horizon_intervals",
                format!("{} is not a finite number of 0 or more", self.horizon_intervals),
            ));
        }
        Ok(())
    }
}

/// How far the forecasts were off: each forecast against the rate then
/// observed over the interval it was made for, all services together.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct ForecastAccuracy {
    /// Forecasts checked against an observation (per service).
    pub checked: u64,
    /// Mean of |observed − forecast| / forecast (forecasts above zero).
    pub mean_abs_relative_error: f64,
    /// The share of checked forecasts below the rate observed.
    pub under_share: f64,
    /// The largest observed / forecast − 1 (0 when none fell short).
    pub worst_under: f64,
}

/// One service's state.
#[derive(Debug, Clone, Default)]
struct Series {
    recent: VecDeque<f64>,
    /// Holt's level and slope, once a first observation came.
    holt: Option<(f64, f64)>,
}

/// The forecaster of a set of services: fed one observation per interval.
#[derive(Debug, Clone)]
pub struct Forecaster {
    config: ForecastConfig,
    series: Vec<Series>,
    /// The forecast made after the last observation, to check against the
    /// next.
    pending: Option<Vec<f64>>,
    /// Sums behind [`ForecastAccuracy`]: checked, Σ relative error (and the
    /// count of forecasts above zero it covers), under, worst.
    checked: u64,
    error_sum: f64,
    error_count: u64,
    under: u64,
    worst_under: f64,
}

impl Forecaster {
    /// A forecaster of `services` services under `config`.
    pub fn new(services: usize, config: ForecastConfig) -> Result<Forecaster, AutopilotError> {
        config.validate()?;
        Ok(Forecaster {
            config,
            series: vec![Series::default(); services],
            pending: None,
            checked: 0,
            error_sum: 0.0,
            error_count: 0,
            under: 0,
            worst_under: 0.0,
        })
    }

    /// Takes the next observation: each service's rate over the interval
    /// that just ended (req/s, in the forecaster's service order).
    pub fn observe(&mut self, rates_rps: &[f64]) {
        if let Some(forecast) = self.pending.take() {
            for (&observed, &predicted) in rates_rps.iter().zip(&forecast) {
                self.checked += 1;
                if predicted > 0.0 {
                    self.error_sum += (observed - predicted).abs() / predicted;
                    self.error_count += 1;
                }
                if observed > predicted {
                    self.under += 1;
                    if predicted > 0.0 {
                        self.worst_under = self.worst_under.max(observed / predicted - 1.0);
                    }
                }
            }
        }
        let (alpha, beta) = (self.config.level_smoothing, self.config.trend_smoothing);
        for (series, &rate) in self.series.iter_mut().zip(rates_rps) {
            series.recent.push_back(rate);
            while series.recent.len() > self.config.window {
                series.recent.pop_front();
            }
            series.holt = Some(match series.holt {
                None => (rate, 0.0),
                Some((level, slope)) => {
                    let new_level = alpha * rate + (1.0 - alpha) * (level + slope);
                    (new_level, beta * (new_level - level) + (1.0 - beta) * slope)
                }
            });
        }
        self.pending = Some(self.forecast());
    }

    /// Each service's forecast (req/s): the larger of the window's highest
    /// observation and the trend projected over the horizon; zero before
    /// any observation.
    pub fn forecast(&self) -> Vec<f64> {
        self.series
            .iter()
            .map(|series| {
                let window_max = series.recent.iter().copied().fold(0.0, f64::max);
                let trend = series.holt.map_or(0.0, |(level, slope)| level + slope * self.config.horizon_intervals);
                window_max.max(trend).max(0.0)
            })
            .collect()
    }

    /// How far the forecasts checked so far were off.
    pub fn accuracy(&self) -> ForecastAccuracy {
        let share = |count: u64, of: u64| if of == 0 { 0.0 } else { count as f64 / of as f64 };
        ForecastAccuracy {
            checked: self.checked,
            mean_abs_relative_error: if self.error_count == 0 { 0.0 } else { self.error_sum / self.error_count as f64 },
            under_share: share(self.under, self.checked),
            worst_under: self.worst_under,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rising_rate_is_met_ahead_and_a_falling_one_held_for_the_window() {
        let mut forecaster = Forecaster::new(1, ForecastConfig::default()).unwrap();
        for rate in [100.0, 110.0, 120.0, 130.0] {
            forecaster.observe(&[rate]);
        }
        let rising = forecaster.forecast()[0];
        assert!(rising > 130.0, "{rising}");
        for rate in [60.0, 60.0] {
            forecaster.observe(&[rate]);
        }
        // 130 is still among the last three observations.
        assert_eq!(forecaster.forecast()[0], 130.0);
        forecaster.observe(&[60.0]);
        assert!(forecaster.forecast()[0] < 130.0);
    }

    #[test]
    fn accuracy_compares_each_forecast_with_the_next_observation() {
        let config = ForecastConfig { window: 1, trend_smoothing: 0.0, ..ForecastConfig::default() };
        let mut forecaster = Forecaster::new(1, config).unwrap();
        forecaster.observe(&[100.0]);
        assert_eq!(forecaster.accuracy().checked, 0);
        // Forecast 100, observed 150: 50% under.
        forecaster.observe(&[150.0]);
        let accuracy = forecaster.accuracy();
        assert_eq!(accuracy.checked, 1);
        assert!((accuracy.worst_under - 0.5).abs() < 1e-12);
        assert!((accuracy.mean_abs_relative_error - 0.5).abs() < 1e-12);
        assert_eq!(accuracy.under_share, 1.0);
    }

    #[test]
    fn a_bad_configuration_is_named() {
        let bad = |config| Forecaster::new(1, config).unwrap_err().to_string();
        assert!(bad(ForecastConfig { window: 0, ..Default::default() }).starts_with("forecast window"));
        assert!(bad(ForecastConfig { level_smoothing: 0.0, ..Default::default() }).starts_with("level_smoothing"));
    }
}
