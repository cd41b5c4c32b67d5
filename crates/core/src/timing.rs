//! What a profile may add about how batches run beyond their mean latency:
//! the spread of one batch's run time, the host's dispatch gap between
//! batches, and how much slower batches ran while serving than while
//! profiled. Every part is optional (ParvaGPU's profiles carry none); the
//! serving model uses each part a profile carries.

use crate::error::CoreError;

/// How one configuration's batches run, beyond their mean latency, where
/// measured. The default carries nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchTiming {
    /// The median run time of one batch, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_p50_ms: Option<f64>,
    /// The 99th percentile run time of one batch, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_p99_ms: Option<f64>,
    /// The mean time, ms, a busy process spends between one batch's end
    /// and the next one's start (launching it from the host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatch_gap_ms: Option<f64>,
    /// How much slower batches ran while serving than while profiled
    /// (0.004: 0.4% slower; negative: faster), where a serving run
    /// measured it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serving_slowdown: Option<f64>,
}

impl BatchTiming {
    /// `true` when it carries nothing.
    pub fn is_empty(&self) -> bool {
        *self == BatchTiming::default()
    }

    /// Checks each part that is present: percentiles positive and finite,
    /// the median no larger than the 99th percentile, the gap finite and
    /// not negative, the slowdown finite and above -50%.
    pub fn check(&self) -> Result<(), CoreError> {
        for (field, value) in [("latency_p50_ms", self.latency_p50_ms), ("latency_p99_ms", self.latency_p99_ms)] {
            if let Some(ms) = value.filter(|ms| !(ms.is_finite() && *ms > 0.0)) {
                return Err(CoreError::invalid(field, "a positive number of ms", ms));
            }
        }
        if let (Some(p50), Some(p99)) = (self.latency_p50_ms, self.latency_p99_ms) {
            if p99 < p50 {
                return Err(CoreError::invalid("latency_p99_ms", "no smaller than latency_p50_ms", p99));
            }
        }
        if let Some(gap) = self.dispatch_gap_ms.filter(|gap| !(gap.is_finite() && *gap >= 0.0)) {
            return Err(CoreError::invalid("dispatch_gap_ms", "a non-negative number of ms", gap));
        }
        if let Some(slowdown) = self.serving_slowdown.filter(|s| !(s.is_finite() && *s > -0.5)) {
            return Err(CoreError::invalid("serving_slowdown", "a ratio above -0.5 (0.004: 0.4% slower)", slowdown));
        }
        Ok(())
    }

    /// The time (ms) one batch of mean latency `latency_ms` keeps its
    /// process busy while serving: its latency, slowed by the serving
    /// slowdown, plus the dispatch gap before the next batch (each where
    /// measured). A serving run faster than the profile is not counted:
    /// the profile stays the promise.
    pub fn serving_ms(&self, latency_ms: f64) -> f64 {
        let slowdown = self.serving_slowdown.unwrap_or(0.0).max(0.0);
        latency_ms * (1.0 + slowdown) + self.dispatch_gap_ms.unwrap_or(0.0)
    }

    /// How much longer than its mean `latency_ms` one batch in a hundred
    /// runs: its 99th percentile over its mean, at least 1 (1 when the
    /// percentile was not measured).
    pub fn p99_ratio(&self, latency_ms: f64) -> f64 {
        self.latency_p99_ms.map_or(1.0, |p99| (p99 / latency_ms).max(1.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_timing_changes_nothing() {
        let none = BatchTiming::default();
        assert!(none.is_empty() && none.check().is_ok());
        assert_eq!((none.serving_ms(10.0), none.p99_ratio(10.0)), (10.0, 1.0));
    }

    #[test]
    fn measured_timing_slows_the_batch_and_spreads_it() {
        let timing = BatchTiming {
            latency_p50_ms: Some(9.9),
            latency_p99_ms: Some(10.5),
            dispatch_gap_ms: Some(0.01),
            serving_slowdown: Some(0.004),
        };
        assert!(timing.check().is_ok());
        assert!((timing.serving_ms(10.0) - (10.04 + 0.01)).abs() < 1e-12);
        assert!((timing.p99_ratio(10.0) - 1.05).abs() < 1e-12);
        assert_eq!(timing.p99_ratio(11.0), 1.0);
        let faster = BatchTiming { serving_slowdown: Some(-0.01), ..BatchTiming::default() };
        assert_eq!(faster.serving_ms(10.0), 10.0);
    }

    #[test]
    fn bad_timing_names_its_field() {
        let fails = |timing: BatchTiming| timing.check().unwrap_err().to_string();
        assert!(fails(BatchTiming { latency_p50_ms: Some(0.0), ..Default::default() }).contains("latency_p50_ms"));
        let crossed = BatchTiming { latency_p50_ms: Some(2.0), latency_p99_ms: Some(1.0), ..Default::default() };
        assert!(fails(crossed).contains("no smaller than latency_p50_ms"));
        assert!(fails(BatchTiming { dispatch_gap_ms: Some(-1.0), ..Default::default() }).contains("dispatch_gap_ms"));
        let slowdown = fails(BatchTiming { serving_slowdown: Some(f64::NAN), ..Default::default() });
        assert!(slowdown.contains("serving_slowdown"), "{slowdown}");
    }
}
