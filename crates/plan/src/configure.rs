//! ParvaGPU's Segment Configurator: for one service, which segments to run.
//!
//! Among the configurations that meet the latency rule, the *optimal* one
//! has the highest throughput per compute slice. The service gets `n` full
//! segments of it — `n = ⌊rate / throughput⌋`, one fewer when the rate is an
//! exact multiple — and one *last* segment, the smallest instance size whose
//! best configuration covers the remaining demand ("demand matching"). Ties
//! go to the first configuration in (size, batch, processes) order.

use std::collections::BTreeMap;

use tessera_core::{ModelProfile, ProfilePoint, ServiceSlo};

use crate::error::{unmeetable, PlanError};
use crate::judge::Judge;

/// The configurator's decision for one service.
#[derive(Debug, Clone, PartialEq)]
pub struct SegmentChoice {
    /// The most efficient feasible configuration (throughput per GPC).
    pub optimal: ProfilePoint,
    /// How many full segments of `optimal` to run.
    pub full_segments: u32,
    /// The demand-matched last segment.
    pub last: ProfilePoint,
    /// The most efficient feasible configuration of each instance size.
    pub best_by_size: BTreeMap<u8, ProfilePoint>,
}

impl SegmentChoice {
    /// The configurations of every segment, full ones first.
    pub fn segments(&self) -> impl Iterator<Item = ProfilePoint> + '_ {
        std::iter::repeat_n(self.optimal, self.full_segments as usize).chain(std::iter::once(self.last))
    }
}

/// Runs the configurator for one service.
///
/// `max_procs` excludes configurations with more MPS processes; points that
/// do not fit their instance's memory are never chosen.
pub fn configure(
    profile: &ModelProfile,
    slo: &ServiceSlo,
    judge: Judge<'_>,
    max_procs: u32,
) -> Result<SegmentChoice, PlanError> {
    let rule = judge.rule;
    let mut optimal: Option<ProfilePoint> = None;
    let mut best_by_size: BTreeMap<u8, ProfilePoint> = BTreeMap::new();
    let candidates = judge.judged_points(profile, slo, max_procs)?;
    for point in candidates.iter().filter(|p| rule.max_provision_ratio(p, slo.latency_slo_ms).is_some()) {
        if optimal.is_none_or(|best| point.throughput_per_gpc() > best.throughput_per_gpc()) {
            optimal = Some(*point);
        }
        let best_of_size = best_by_size.entry(point.config.size_gpcs).or_insert(*point);
        if point.throughput_per_gpc() > best_of_size.throughput_per_gpc() {
            *best_of_size = *point;
        }
    }
    let Some(optimal) = optimal else {
        return Err(unmeetable(candidates.into_iter(), slo, rule));
    };

    let mut full_segments = (slo.rate_rps / optimal.throughput_rps).floor();
    if slo.rate_rps % optimal.throughput_rps == 0.0 {
        full_segments -= 1.0;
    }
    let remaining_rps = slo.rate_rps - full_segments * optimal.throughput_rps;
    // The optimal point is the best of its own size and covers at least
    // `remaining_rps`, so a last segment always exists.
    let last = *best_by_size.values().find(|point| remaining_rps <= point.throughput_rps).unwrap_or(&optimal);
    Ok(SegmentChoice { optimal, full_segments: full_segments as u32, last, best_by_size })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::latency::LatencyRule;
    use tessera_core::{GpuModel, SegmentConfig};

    fn point(size_gpcs: u8, batch: u32, throughput_rps: f64, latency_ms: f64) -> ProfilePoint {
        let config = SegmentConfig { size_gpcs, batch, procs: 1 };
        ProfilePoint::new(config, throughput_rps, latency_ms, None).unwrap()
    }

    fn profile() -> ModelProfile {
        ModelProfile::new(
            GpuModel::A100_80GB,
            "m",
            vec![
                point(1, 1, 100.0, 5.0),  // 100 per GPC
                point(1, 8, 160.0, 50.0), // 160 per GPC, slow
                point(2, 4, 260.0, 15.0), // 130 per GPC
                point(7, 8, 700.0, 11.0), // 100 per GPC
            ],
        )
        .unwrap()
    }

    fn slo(rate_rps: f64, latency_slo_ms: f64) -> ServiceSlo {
        ServiceSlo::new("svc", "m", rate_rps, latency_slo_ms).unwrap()
    }

    #[test]
    fn picks_the_most_efficient_feasible_point_and_matches_demand() {
        // Budget 0.45 × 40 = 18 ms: the 50 ms point is out, 2g b4 is optimal.
        let choice = configure(&profile(), &slo(600.0, 40.0), Judge::plain(LatencyRule::Parva), 5).unwrap();
        assert_eq!(choice.optimal.config.size_gpcs, 2);
        assert_eq!(choice.full_segments, 2); // 520 rps, 80 remain
        assert_eq!(choice.last.config.size_gpcs, 1); // 1g covers 80
        let total: f64 = choice.segments().map(|p| p.throughput_rps).sum();
        assert!(total >= 600.0);
    }

    #[test]
    fn exact_multiple_uses_one_fewer_full_segment() {
        let choice = configure(&profile(), &slo(520.0, 40.0), Judge::plain(LatencyRule::Parva), 5).unwrap();
        assert_eq!(choice.full_segments, 1);
        assert_eq!(choice.last.config.size_gpcs, 2);
    }

    #[test]
    fn unmeetable_slo_names_the_fastest_configuration() {
        let error = configure(&profile(), &slo(10.0, 10.0), Judge::plain(LatencyRule::Parva), 5).unwrap_err();
        let message = error.to_string();
        assert!(
            message.contains("svc") && message.contains("1g batch 1 x 1 proc") && message.contains("5.00 ms"),
            "{message}"
        );
    }

    #[test]
    fn max_procs_filters_configurations() {
        let many = SegmentConfig { size_gpcs: 1, batch: 1, procs: 4 };
        let profile = ModelProfile::new(
            GpuModel::A100_80GB,
            "m",
            vec![point(1, 1, 100.0, 5.0), ProfilePoint::new(many, 300.0, 6.0, None).unwrap()],
        )
        .unwrap();
        let free = configure(&profile, &slo(50.0, 100.0), Judge::plain(LatencyRule::Parva), 5).unwrap();
        assert_eq!(free.optimal.config.procs, 4);
        let capped = configure(&profile, &slo(50.0, 100.0), Judge::plain(LatencyRule::Parva), 3).unwrap();
        assert_eq!(capped.optimal.config.procs, 1);
    }
}
