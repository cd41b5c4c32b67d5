//! The ways to serve one service: every *minimal* set of segments that
//! covers its rate and meets its latency rule, within a compute budget.
//!
//! Segments of one size always use that size's best configuration (highest
//! throughput) among those allowed, because a bigger throughput on the same
//! compute slices is never worse — except under the `queueing` rule, where
//! over-provisioning slows batch filling: each configuration has a maximum
//! provisioned/rate ratio ([`LatencyRule::max_provision_ratio`]). So the
//! options are built per *ratio threshold*: for each threshold, the best
//! configuration per size among those allowed at least that much
//! over-provisioning, and every minimal count vector over sizes whose
//! provisioning stays within the smallest ratio of the configurations it
//! uses. A mix is minimal when dropping any one segment uncovers the rate;
//! non-minimal mixes are dominated in every objective.

use std::collections::HashMap;

use tessera_core::{ModelProfile, ProfilePoint, ServiceSlo, SizeCounts};

use crate::configure::unmeetable;
use crate::error::PlanError;
use crate::latency::LatencyRule;

/// One way to serve a service.
#[derive(Debug, Clone, PartialEq)]
pub struct Mix {
    /// Segments per configuration (each configuration listed once).
    pub parts: Vec<(ProfilePoint, u32)>,
    /// Instances per size.
    pub counts: SizeCounts,
    /// Total throughput, req/s.
    pub provisioned_rps: f64,
    /// Compute slices used.
    pub gpcs: u32,
    /// Number of segments.
    pub segments: u32,
    /// Relative over-provisioning: provisioned / rate − 1.
    pub slack: f64,
}

/// Every option of one service, best first: fewest compute slices, then
/// least slack, then fewest segments.
#[derive(Debug, Clone, PartialEq)]
pub struct ServiceOptions {
    /// The mixes; never empty.
    pub mixes: Vec<Mix>,
    /// Fewest compute slices any mix needs.
    pub min_gpcs: u32,
}

/// How far to look beyond the cheapest mixes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionLimits {
    /// Compute slices allowed above the minimum.
    pub extra_gpcs: u32,
    /// Most mixes kept per service (the best ones).
    pub max_mixes: usize,
}

/// The best configuration per size allowed at one ratio threshold.
#[derive(Debug, Clone, PartialEq)]
struct SizeTable {
    /// (configuration, its maximum provisioning ratio), by throughput per
    /// compute slice, best first.
    best: Vec<(ProfilePoint, f64)>,
}

/// Builds the options of one service.
pub fn service_options(
    profile: &ModelProfile,
    slo: &ServiceSlo,
    rule: LatencyRule,
    max_procs: u32,
    limits: OptionLimits,
) -> Result<ServiceOptions, PlanError> {
    let candidates: Vec<(ProfilePoint, f64)> = profile
        .points()
        .iter()
        .filter(|p| p.config.procs <= max_procs)
        .filter_map(|p| rule.max_provision_ratio(p, slo.latency_slo_ms).map(|ratio| (*p, ratio)))
        .collect();
    if candidates.is_empty() {
        let allowed = profile.points().iter().filter(|p| p.config.procs <= max_procs).copied();
        return Err(unmeetable(allowed, slo, rule));
    }
    let tables = size_tables(&candidates);
    let Some(min_gpcs) = tables.iter().filter_map(|table| cheapest_gpcs(table, slo.rate_rps)).min() else {
        // Every configuration that meets the SLO fills its batches too
        // slowly at this rate, even with a single segment.
        return Err(unmeetable(candidates.iter().map(|(p, _)| *p), slo, rule));
    };
    let budget = min_gpcs + limits.extra_gpcs;
    let mut by_counts: HashMap<SizeCounts, Mix> = HashMap::new();
    for table in &tables {
        enumerate_mixes(table, slo.rate_rps, budget, &mut |mix| {
            let keep = by_counts.get(&mix.counts).is_none_or(|old| secondary(&mix) < secondary(old));
            if keep {
                by_counts.insert(mix.counts, mix);
            }
        });
    }
    let mut mixes: Vec<Mix> = by_counts.into_values().collect();
    mixes.sort_by(|a, b| (a.gpcs, secondary(a)).partial_cmp(&(b.gpcs, secondary(b))).expect("finite slack"));
    mixes.truncate(limits.max_mixes.max(1));
    Ok(ServiceOptions { mixes, min_gpcs })
}

/// The tie-breaks after compute: slack, then segments.
fn secondary(mix: &Mix) -> (f64, u32) {
    (mix.slack, mix.segments)
}

/// One table per distinct set of best-per-size configurations, from the
/// most permissive ratio threshold down.
fn size_tables(candidates: &[(ProfilePoint, f64)]) -> Vec<SizeTable> {
    let mut thresholds: Vec<f64> = candidates.iter().map(|(_, ratio)| *ratio).collect();
    thresholds.sort_by(|a, b| b.total_cmp(a));
    thresholds.dedup();
    let mut tables: Vec<SizeTable> = Vec::new();
    for threshold in thresholds {
        let mut best: HashMap<u8, (ProfilePoint, f64)> = HashMap::new();
        for &(point, ratio) in candidates.iter().filter(|(_, ratio)| *ratio >= threshold) {
            let entry = best.entry(point.config.size_gpcs).or_insert((point, ratio));
            if point.throughput_rps > entry.0.throughput_rps {
                *entry = (point, ratio);
            }
        }
        let mut best: Vec<(ProfilePoint, f64)> = best.into_values().collect();
        best.sort_by(|a, b| {
            b.0.throughput_per_gpc().total_cmp(&a.0.throughput_per_gpc()).then(a.0.config.cmp(&b.0.config))
        });
        let table = SizeTable { best };
        if tables.last() != Some(&table) {
            tables.push(table);
        }
    }
    tables
}

/// Fewest compute slices of a mix from `table` covering `rate_rps`, if any
/// (under `queueing`, every mix may over-provision too much).
fn cheapest_gpcs(table: &SizeTable, rate_rps: f64) -> Option<u32> {
    // No mix beats the most efficient size's throughput per slice; no
    // minimal mix needs more than the largest single-size mix.
    let lower = (rate_rps / table.best[0].0.throughput_per_gpc()).ceil().max(1.0) as u32;
    let upper = table
        .best
        .iter()
        .map(|(p, _)| (rate_rps / p.throughput_rps).ceil().max(1.0) as u32 * u32::from(p.config.size_gpcs))
        .max()
        .expect("a table has a configuration");
    (lower..=upper).find(|&budget| {
        let mut found = false;
        enumerate_mixes(table, rate_rps, budget, &mut |_| found = true);
        found
    })
}

/// Calls `emit` with every minimal mix from `table` that covers `rate_rps`
/// with at most `budget` compute slices and stays within the provisioning
/// ratios of the configurations it uses.
fn enumerate_mixes(table: &SizeTable, rate_rps: f64, budget: u32, emit: &mut impl FnMut(Mix)) {
    let mut counts = vec![0u32; table.best.len()];
    descend(table, rate_rps, budget, 0, 0.0, &mut counts, emit);
}

fn descend(
    table: &SizeTable,
    rate_rps: f64,
    budget: u32,
    index: usize,
    provided_rps: f64,
    counts: &mut Vec<u32>,
    emit: &mut impl FnMut(Mix),
) {
    if provided_rps >= rate_rps {
        if let Some(mix) = finish(table, rate_rps, provided_rps, counts) {
            emit(mix);
        }
        return;
    }
    let Some(&(point, _)) = table.best.get(index) else {
        return;
    };
    // Sizes are in decreasing efficiency, so the budget spent on this size
    // yields at most this much.
    if provided_rps + f64::from(budget) * point.throughput_per_gpc() < rate_rps {
        return;
    }
    let size = u32::from(point.config.size_gpcs);
    let needed = ((rate_rps - provided_rps) / point.throughput_rps).ceil() as u32;
    for count in (0..=needed.min(budget / size)).rev() {
        counts[index] = count;
        let provided = provided_rps + f64::from(count) * point.throughput_rps;
        descend(table, rate_rps, budget - count * size, index + 1, provided, counts, emit);
    }
    counts[index] = 0;
}

/// The mix of `counts`, if it is minimal and within its provisioning ratio.
fn finish(table: &SizeTable, rate_rps: f64, provided_rps: f64, counts: &[u32]) -> Option<Mix> {
    let used = || table.best.iter().zip(counts).filter(|(_, &n)| n > 0).map(|(entry, _)| entry);
    let weakest = used().map(|(p, _)| p.throughput_rps).fold(f64::INFINITY, f64::min);
    if provided_rps - weakest >= rate_rps {
        return None;
    }
    let ratio_limit = used().map(|(_, ratio)| *ratio).fold(f64::INFINITY, f64::min);
    if provided_rps > rate_rps * ratio_limit {
        return None;
    }
    let parts: Vec<(ProfilePoint, u32)> =
        table.best.iter().zip(counts).filter(|(_, &n)| n > 0).map(|((p, _), &n)| (*p, n)).collect();
    let counts = parts.iter().fold(SizeCounts::EMPTY, |acc, (p, n)| acc.with_n(p.config.size_gpcs, *n));
    Some(Mix {
        gpcs: counts.compute_slices(),
        segments: parts.iter().map(|(_, n)| n).sum(),
        counts,
        provisioned_rps: provided_rps,
        slack: provided_rps / rate_rps - 1.0,
        parts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::{GpuModel, SegmentConfig};

    fn point(size_gpcs: u8, batch: u32, throughput_rps: f64, latency_ms: f64) -> ProfilePoint {
        ProfilePoint::new(SegmentConfig { size_gpcs, batch, procs: 1 }, throughput_rps, latency_ms, None).unwrap()
    }

    fn profile(points: Vec<ProfilePoint>) -> ModelProfile {
        ModelProfile::new(GpuModel::A100_80GB, "m", points).unwrap()
    }

    const WIDE: OptionLimits = OptionLimits { extra_gpcs: 7, max_mixes: usize::MAX };

    #[test]
    fn enumerates_minimal_mixes_cheapest_first() {
        let profile = profile(vec![point(1, 1, 100.0, 5.0), point(2, 1, 210.0, 5.0), point(7, 1, 800.0, 5.0)]);
        let slo = ServiceSlo::new("s", "m", 400.0, 100.0).unwrap();
        let options = service_options(&profile, &slo, LatencyRule::Parva, 5, WIDE).unwrap();
        assert_eq!(options.min_gpcs, 4);
        let best = &options.mixes[0];
        // 1g×4 (400 rps), 2g+1g+1g (410) and 2g×2 (420) all use 4 slices:
        // the least slack comes first.
        assert_eq!(best.counts.to_string(), "1g+1g+1g+1g");
        assert_eq!(options.mixes[1].counts.to_string(), "2g+1g+1g");
        assert_eq!(options.mixes[2].counts.to_string(), "2g+2g");
        for mix in &options.mixes {
            assert!(mix.provisioned_rps >= 400.0);
            let weakest = mix.parts.iter().map(|(p, _)| p.throughput_rps).fold(f64::INFINITY, f64::min);
            assert!(mix.provisioned_rps - weakest < 400.0, "{} is not minimal", mix.counts);
            assert!(mix.gpcs <= 4 + 7);
        }
        assert!(options.mixes.iter().any(|m| m.counts.to_string() == "7g"));
        assert!(options.mixes.windows(2).all(|w| w[0].gpcs <= w[1].gpcs));
    }

    #[test]
    fn queueing_forbids_over_provisioning_large_batches() {
        // A big-batch 7g is efficient but fills slowly at 10 req/s; only
        // the batch-1 configuration keeps the 100 ms SLO.
        let profile = profile(vec![point(1, 1, 40.0, 25.0), point(7, 64, 2000.0, 32.0)]);
        let slo = ServiceSlo::new("s", "m", 10.0, 100.0).unwrap();
        let queueing = service_options(&profile, &slo, LatencyRule::Queueing, 5, WIDE).unwrap();
        assert!(queueing.mixes.iter().all(|m| m.counts.count(7) == 0), "{:?}", queueing.mixes);
        assert_eq!(queueing.mixes[0].counts.to_string(), "1g");
        let parva = service_options(&profile, &slo, LatencyRule::Parva, 5, WIDE).unwrap();
        assert!(parva.mixes.iter().any(|m| m.counts.count(7) == 1));
    }

    #[test]
    fn reports_unmeetable_services() {
        let profile = profile(vec![point(1, 1, 40.0, 25.0)]);
        let slo = ServiceSlo::new("s", "m", 10.0, 20.0).unwrap();
        let error = service_options(&profile, &slo, LatencyRule::Queueing, 5, WIDE).unwrap_err();
        assert!(matches!(error, PlanError::Unmeetable(_)), "{error}");
    }

    #[test]
    fn cap_keeps_the_best_mixes() {
        let profile = profile(vec![point(1, 1, 100.0, 5.0), point(2, 1, 190.0, 5.0), point(3, 1, 280.0, 5.0)]);
        let slo = ServiceSlo::new("s", "m", 1000.0, 100.0).unwrap();
        let options =
            service_options(&profile, &slo, LatencyRule::Parva, 5, OptionLimits { extra_gpcs: 3, max_mixes: 2 })
                .unwrap();
        assert_eq!(options.mixes.len(), 2);
        assert_eq!(options.mixes[0].gpcs, options.min_gpcs);
    }
}
