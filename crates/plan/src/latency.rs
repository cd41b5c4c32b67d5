//! Latency rules: when does a segment configuration meet a latency SLO?

use std::fmt;
use std::str::FromStr;

use tessera_core::ProfilePoint;

/// A rule that decides whether a profiled configuration meets a latency SLO.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LatencyRule {
    /// ParvaGPU's rule: the batch latency must be strictly below
    /// 0.45 × the SLO truncated to whole milliseconds (half the SLO is left
    /// for forming the batch, minus a 10% margin). It ignores the time to
    /// fill a batch at the actual request rate.
    Parva,
}

impl LatencyRule {
    /// Every rule, for `--help` texts and parsing.
    pub const ALL: [LatencyRule; 1] = [LatencyRule::Parva];

    /// The rule's name on the command line and in plans.
    pub fn name(self) -> &'static str {
        match self {
            LatencyRule::Parva => "parva",
        }
    }

    /// The largest batch latency (ms) the rule allows; feasible points must
    /// stay strictly below it.
    pub fn batch_budget_ms(self, slo_ms: f64) -> f64 {
        match self {
            LatencyRule::Parva => slo_ms.trunc() / 2.0 * 0.9,
        }
    }

    /// `true` when a segment whose batches take `batch_latency_ms` meets an
    /// SLO of `slo_ms` under this rule.
    pub fn meets(self, batch_latency_ms: f64, slo_ms: f64) -> bool {
        batch_latency_ms < self.batch_budget_ms(slo_ms)
    }

    /// `true` when `point` meets an SLO of `slo_ms` under this rule.
    pub fn is_feasible(self, point: &ProfilePoint, slo_ms: f64) -> bool {
        self.meets(point.latency_ms, slo_ms)
    }

    /// The latency (ms) this rule reports for a segment whose batches take
    /// `batch_latency_ms`: for `parva`, the batch latency it bounds.
    pub fn predicted_latency_ms(self, batch_latency_ms: f64) -> f64 {
        match self {
            LatencyRule::Parva => batch_latency_ms,
        }
    }
}

impl fmt::Display for LatencyRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for LatencyRule {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        LatencyRule::ALL
            .into_iter()
            .find(|rule| rule.name() == s)
            .ok_or_else(|| format!("unknown latency rule '{s}' (known: parva)"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::SegmentConfig;

    fn point(latency_ms: f64) -> ProfilePoint {
        let config = SegmentConfig { size_gpcs: 1, batch: 1, procs: 1 };
        ProfilePoint::new(config, 1.0, latency_ms, None).unwrap()
    }

    #[test]
    fn parva_truncates_the_slo_and_keeps_045_of_it_strictly() {
        let rule = LatencyRule::Parva;
        // 216.5 ms truncates to 216; 0.45 × 216 = 97.2.
        assert!((rule.batch_budget_ms(216.5) - 97.2).abs() < 1e-9);
        assert!(rule.is_feasible(&point(97.0), 216.5));
        assert!(!rule.is_feasible(&point(97.3), 216.5));
        assert!(!rule.is_feasible(&point(9.0), 20.0), "the bound is strict");
        assert_eq!("parva".parse::<LatencyRule>().unwrap(), LatencyRule::Parva);
        assert!("fast".parse::<LatencyRule>().is_err());
    }
}
