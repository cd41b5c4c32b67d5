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

use std::cell::Cell;
use std::collections::HashMap;
use std::rc::Rc;

use tessera_core::{ModelProfile, ProfilePoint, ServiceSlo, SizeCounts};

use crate::error::unmeetable;
use crate::error::PlanError;
use crate::judge::Judge;

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

/// The configuration tables of one service (see [`size_tables`]) and the
/// usable configurations that meet the latency rule; an error when none
/// does.
fn service_tables(
    profile: &ModelProfile,
    slo: &ServiceSlo,
    judge: Judge<'_>,
    max_procs: u32,
) -> Result<(Vec<SizeTable>, Vec<ProfilePoint>), PlanError> {
    let rule = judge.rule;
    let usable = judge.judged_points(profile, slo, max_procs)?;
    let candidates: Vec<(ProfilePoint, f64)> = usable
        .iter()
        .filter_map(|p| rule.max_provision_ratio(p, slo.latency_slo_ms).map(|ratio| (*p, ratio)))
        .collect();
    if candidates.is_empty() {
        return Err(unmeetable(usable.into_iter(), slo, rule));
    }
    Ok((size_tables(&candidates), candidates.into_iter().map(|(p, _)| p).collect()))
}

/// Builds the options of one service.
pub fn service_options(
    profile: &ModelProfile,
    slo: &ServiceSlo,
    judge: Judge<'_>,
    max_procs: u32,
    limits: OptionLimits,
) -> Result<ServiceOptions, PlanError> {
    let rule = judge.rule;
    let (tables, candidates) = service_tables(profile, slo, judge, max_procs)?;
    let rate_rps = slo.rate_rps;
    // Tables whose best efficiency cannot reach a budget are skipped;
    // cheap tables first, so the minimum is found early.
    let mut by_floor: Vec<(u32, &SizeTable)> = tables.iter().map(|t| (t.gpcs_floor(rate_rps), t)).collect();
    by_floor.sort_by_key(|(floor, _)| *floor);
    let mut min_gpcs: Option<u32> = None;
    for &(floor, table) in &by_floor {
        if min_gpcs.is_some_and(|best| floor >= best) {
            break;
        }
        if let Some(gpcs) = cheapest_gpcs(table, rate_rps, min_gpcs.map_or(u32::MAX, |best| best - 1)) {
            min_gpcs = Some(gpcs);
        }
    }
    let Some(min_gpcs) = min_gpcs else {
        // Every configuration that meets the SLO fills its batches too
        // slowly at this rate, even with a single segment.
        return Err(unmeetable(candidates.into_iter(), slo, rule));
    };
    let budget = min_gpcs + limits.extra_gpcs;
    let mut best = BestMixes::new(min_gpcs, budget, limits.max_mixes.max(1));
    for &(_, table) in by_floor.iter().take_while(|(floor, _)| *floor <= budget) {
        let cap = best.cap.clone();
        enumerate_mixes(table, rate_rps, &cap, &mut |mix| best.offer(mix));
    }
    Ok(ServiceOptions { mixes: best.into_sorted(), min_gpcs })
}

/// The mixes of one service that cost at most some price.
#[derive(Debug, Clone, PartialEq)]
pub struct PricedMixes {
    /// The mixes, cheapest first (then least slack, fewest segments).
    pub mixes: Vec<Mix>,
    /// Every mix that costs at most this is listed: the price asked for, or
    /// less where more mixes than allowed would have been listed (minus
    /// infinity when the search ran out of nodes).
    pub complete_up_to: f64,
}

/// Most search nodes of one [`priced_mixes`].
const PRICED_NODES: u64 = 300_000;

/// Every minimal mix of one service whose price at `size_prices` (per
/// instance size) is at most `most`, at most `max_mixes` of them (the
/// cheapest), within [`PRICED_NODES`] search nodes.
pub fn priced_mixes(
    profile: &ModelProfile,
    slo: &ServiceSlo,
    judge: Judge<'_>,
    max_procs: u32,
    size_prices: [f64; 8],
    most: f64,
    max_mixes: usize,
) -> Result<PricedMixes, PlanError> {
    let (tables, _) = service_tables(profile, slo, judge, max_procs)?;
    let max_mixes = max_mixes.max(1);
    let price_of =
        |mix: &Mix| (1..8u8).map(|g| size_prices[usize::from(g)] * f64::from(mix.counts.count(g))).sum::<f64>();
    let order = |a: &Mix, b: &Mix| {
        price_of(a).total_cmp(&price_of(b)).then(a.slack.total_cmp(&b.slack)).then(a.segments.cmp(&b.segments))
    };
    let mut cap =
        PriceCap { size_prices, most: Cell::new(most), floor_per_rps: Vec::new(), nodes_left: Cell::new(PRICED_NODES) };
    // Keeps the cheapest `max_mixes`, lowering the cap to the first left
    // out: more than `max_mixes` distinct mixes cost no more than it.
    let trim = |mixes: &mut Vec<Mix>, most: &Cell<f64>| {
        mixes.sort_by(order);
        if let Some(first_out) = mixes.get(max_mixes) {
            let price = price_of(first_out);
            most.set(most.get().min(price - 1e-12 * price.abs().max(1.0)));
            mixes.truncate(max_mixes);
        }
    };
    let mut found: HashMap<SizeCounts, Mix> = HashMap::new();
    for table in &tables {
        let mut floor = f64::INFINITY;
        cap.floor_per_rps = table
            .best
            .iter()
            .rev()
            .map(|(p, _)| {
                floor = floor.min(size_prices[usize::from(p.config.size_gpcs)] / p.throughput_rps);
                floor
            })
            .collect();
        cap.floor_per_rps.reverse();
        let mut batch: Vec<Mix> = Vec::new();
        let unlimited = Cell::new(u32::MAX / 2);
        let search = Enumeration { table, rate_rps: slo.rate_rps, cap: &unlimited, price: Some(&cap) };
        let mut counts = vec![0u32; table.best.len()];
        search.descend(0, 0, 0.0, 0.0, &mut counts, &mut |mix| {
            batch.push(mix);
            if batch.len() >= 2 * max_mixes {
                trim(&mut batch, &cap.most);
            }
        });
        for mix in batch {
            match found.get_mut(&mix.counts) {
                Some(old) if secondary(&mix) < secondary(old) => *old = mix,
                Some(_) => {}
                None => {
                    found.insert(mix.counts, mix);
                }
            }
        }
    }
    let mut mixes: Vec<Mix> = found.into_values().filter(|mix| price_of(mix) <= cap.most.get()).collect();
    trim(&mut mixes, &cap.most);
    // Cut short, the enumeration promises nothing.
    let complete_up_to = if cap.nodes_left.get() == 0 { f64::NEG_INFINITY } else { cap.most.get() };
    Ok(PricedMixes { mixes, complete_up_to })
}

/// The mix of one service with exactly `counts` instances (each size at its
/// best configuration of some table), if it covers the rate minimally
/// within its provisioning ratio: the one with the least slack.
pub fn mix_with_counts(
    profile: &ModelProfile,
    slo: &ServiceSlo,
    judge: Judge<'_>,
    max_procs: u32,
    counts: &SizeCounts,
) -> Option<Mix> {
    let (tables, _) = service_tables(profile, slo, judge, max_procs).ok()?;
    tables
        .iter()
        .filter_map(|table| {
            let per_entry: Vec<u32> = table.best.iter().map(|(p, _)| counts.count(p.config.size_gpcs)).collect();
            if per_entry.iter().sum::<u32>() as usize != counts.len() {
                return None;
            }
            let provided: f64 =
                table.best.iter().zip(&per_entry).fold(0.0, |sum, ((p, _), &n)| sum + f64::from(n) * p.throughput_rps);
            if provided < slo.rate_rps {
                return None;
            }
            finish(table, slo.rate_rps, provided, &per_entry)
        })
        .min_by(|a, b| secondary(a).partial_cmp(&secondary(b)).unwrap_or(std::cmp::Ordering::Equal))
}

/// The best mixes found so far, one per multiset of sizes, at most `limit`
/// of them by (compute, slack, segments). Its `cap` is the most compute a
/// mix may use and still make the cut, which prunes the enumeration.
struct BestMixes {
    limit: usize,
    min_gpcs: u32,
    by_counts: HashMap<SizeCounts, Mix>,
    /// Distinct mixes per compute level above `min_gpcs`.
    per_level: Vec<usize>,
    cap: Rc<Cell<u32>>,
}

impl BestMixes {
    fn new(min_gpcs: u32, budget: u32, limit: usize) -> Self {
        BestMixes {
            limit,
            min_gpcs,
            by_counts: HashMap::new(),
            per_level: vec![0; (budget - min_gpcs + 1) as usize],
            cap: Rc::new(Cell::new(budget)),
        }
    }

    fn offer(&mut self, mix: Mix) {
        match self.by_counts.get_mut(&mix.counts) {
            Some(old) => {
                if secondary(&mix) < secondary(old) {
                    *old = mix;
                }
            }
            None => {
                self.per_level[(mix.gpcs - self.min_gpcs) as usize] += 1;
                self.by_counts.insert(mix.counts, mix);
                let mut kept = 0;
                for (level, count) in self.per_level.iter().enumerate() {
                    kept += count;
                    if kept >= self.limit {
                        self.cap.set(self.cap.get().min(self.min_gpcs + level as u32));
                        break;
                    }
                }
            }
        }
    }

    /// The kept mixes, best first, at most `limit`.
    fn into_sorted(self) -> Vec<Mix> {
        let mut mixes: Vec<Mix> = self.by_counts.into_values().collect();
        mixes.sort_by(|a, b| a.gpcs.cmp(&b.gpcs).then(a.slack.total_cmp(&b.slack)).then(a.segments.cmp(&b.segments)));
        mixes.truncate(self.limit);
        mixes
    }
}

/// The tie-breaks after compute: slack, then segments.
fn secondary(mix: &Mix) -> (f64, u32) {
    (mix.slack, mix.segments)
}

/// One table per distinct set of best-per-size configurations, from the
/// most permissive ratio threshold down: a sweep over the configurations in
/// decreasing ratio, snapshotting the best per size at each threshold.
fn size_tables(candidates: &[(ProfilePoint, f64)]) -> Vec<SizeTable> {
    let mut by_ratio: Vec<(ProfilePoint, f64)> = candidates.to_vec();
    by_ratio.sort_by(|a, b| b.1.total_cmp(&a.1));
    let mut best: [Option<(ProfilePoint, f64)>; 8] = [None; 8];
    let mut tables: Vec<SizeTable> = Vec::new();
    let mut index = 0;
    while index < by_ratio.len() {
        let threshold = by_ratio[index].1;
        let mut changed = false;
        while index < by_ratio.len() && by_ratio[index].1 == threshold {
            let (point, ratio) = by_ratio[index];
            let slot = &mut best[usize::from(point.config.size_gpcs)];
            if slot.is_none_or(|(b, _)| point.throughput_rps > b.throughput_rps) {
                *slot = Some((point, ratio));
                changed = true;
            }
            index += 1;
        }
        if changed {
            let mut entries: Vec<(ProfilePoint, f64)> = best.iter().flatten().copied().collect();
            entries.sort_by(|a, b| {
                b.0.throughput_per_gpc().total_cmp(&a.0.throughput_per_gpc()).then(a.0.config.cmp(&b.0.config))
            });
            tables.push(SizeTable { best: entries });
        }
    }
    tables
}

impl SizeTable {
    /// Fewer compute slices than this cannot cover `rate_rps`: no mix beats
    /// the table's best throughput per slice. The quotient is rounded down
    /// by a relative 1e-12 before its ceiling: `n` segments whose summed
    /// throughput covers the rate exactly may divide to a hair above `n`
    /// slices per segment size, and a floor above a mix the enumeration
    /// then finds is no floor.
    fn gpcs_floor(&self, rate_rps: f64) -> u32 {
        (rate_rps / self.best[0].0.throughput_per_gpc() * (1.0 - 1e-12)).ceil().max(1.0) as u32
    }
}

/// Fewest compute slices, at most `cap`, of a mix from `table` covering
/// `rate_rps`, if any (under `queueing`, every mix may over-provision too
/// much).
fn cheapest_gpcs(table: &SizeTable, rate_rps: f64, cap: u32) -> Option<u32> {
    // No minimal mix needs more than the largest single-size mix.
    let upper = table
        .best
        .iter()
        .map(|(p, _)| (rate_rps / p.throughput_rps).ceil().max(1.0) * f64::from(p.config.size_gpcs))
        .fold(0.0, f64::max)
        .min(f64::from(cap)) as u32;
    (table.gpcs_floor(rate_rps)..=upper).find(|&budget| {
        let mut found = false;
        enumerate_mixes(table, rate_rps, &Cell::new(budget), &mut |_| found = true);
        found
    })
}

/// Calls `emit` with every minimal mix from `table` that covers `rate_rps`
/// with at most `cap` compute slices (read as it shrinks) and stays within
/// the provisioning ratios of the configurations it uses.
fn enumerate_mixes(table: &SizeTable, rate_rps: f64, cap: &Cell<u32>, emit: &mut impl FnMut(Mix)) {
    let mut counts = vec![0u32; table.best.len()];
    Enumeration { table, rate_rps, cap, price: None }.descend(0, 0, 0.0, 0.0, &mut counts, emit);
}

/// A cap on the price of the mixes enumerated.
struct PriceCap {
    /// Price of one instance per size.
    size_prices: [f64; 8],
    /// Most a mix may cost (lowered while enumerating when too many do).
    most: Cell<f64>,
    /// Per table index, the least price per req/s of that entry or later.
    floor_per_rps: Vec<f64>,
    /// Search nodes left; at zero the enumeration stops, incomplete.
    nodes_left: Cell<u64>,
}

impl PriceCap {
    /// The counts in `low..=high` of an entry (`unit_price`,
    /// `throughput_rps`) at `index` that can still lead to a mix within the
    /// cap, having spent `spent` with `rest_rps` left to cover: the
    /// covering count if it fits, and a range of counts below it. Below
    /// it, the rest costs at least its rate at the later entries' least
    /// price per req/s, so a mix costs at least an amount linear in the
    /// count.
    #[allow(clippy::too_many_arguments)]
    fn counts_within(
        &self,
        index: usize,
        unit_price: f64,
        throughput_rps: f64,
        rest_rps: f64,
        spent: f64,
        low: u32,
        high: u32,
    ) -> (Option<u32>, Option<std::ops::RangeInclusive<u32>>) {
        let most = self.most.get() * (1.0 + 1e-12) + 1e-12;
        let covering = (rest_rps / throughput_rps).ceil() as u32;
        let fits = (low..=high).contains(&covering) && spent + f64::from(covering) * unit_price <= most;
        let covering_fit = fits.then_some(covering);
        let below = high.min(covering.saturating_sub(1));
        let floor_next = self.floor_per_rps.get(index + 1).copied().unwrap_or(f64::INFINITY);
        if covering == 0 || !floor_next.is_finite() {
            // Nothing after this entry (or nothing left to cover): only the
            // covering count can do.
            return (covering_fit, None);
        }
        let slope = unit_price - throughput_rps * floor_next;
        let start = spent + rest_rps * floor_next;
        let (low, high) = if slope > 0.0 {
            let most_count = (most - start) / slope;
            if most_count < 0.0 {
                return (covering_fit, None);
            }
            (low, below.min(most_count.floor().min(f64::from(u32::MAX)) as u32))
        } else if slope < 0.0 {
            let least_count = ((start - most) / -slope).ceil().max(0.0);
            (low.max(least_count.min(f64::from(u32::MAX)) as u32), below)
        } else if start <= most {
            (low, below)
        } else {
            return (covering_fit, None);
        };
        (covering_fit, Some(low..=high))
    }
}

/// One enumeration of a table's minimal mixes.
struct Enumeration<'a> {
    table: &'a SizeTable,
    rate_rps: f64,
    cap: &'a Cell<u32>,
    price: Option<&'a PriceCap>,
}

impl Enumeration<'_> {
    fn descend(
        &self,
        index: usize,
        used_gpcs: u32,
        provided_rps: f64,
        spent: f64,
        counts: &mut Vec<u32>,
        emit: &mut impl FnMut(Mix),
    ) {
        let (table, rate_rps, cap) = (self.table, self.rate_rps, self.cap);
        if provided_rps >= rate_rps {
            if self.price.is_none_or(|price| spent <= price.most.get()) {
                if let Some(mix) = finish(table, rate_rps, provided_rps, counts) {
                    emit(mix);
                }
            }
            return;
        }
        let Some(&(point, _)) = table.best.get(index) else {
            return;
        };
        if let Some(price) = self.price {
            if spent + (rate_rps - provided_rps) * price.floor_per_rps[index] > price.most.get() {
                return;
            }
            if price.nodes_left.get() == 0 {
                return;
            }
            price.nodes_left.set(price.nodes_left.get() - 1);
        }
        let budget = cap.get().saturating_sub(used_gpcs);
        // Sizes are in decreasing efficiency, so the budget spent on this size
        // yields at most this much (with the floor's tolerance: segments that
        // cover the rate exactly must not be cut by a rounded quotient).
        if provided_rps + f64::from(budget) * point.throughput_per_gpc() < rate_rps * (1.0 - 1e-12) {
            return;
        }
        let size = u32::from(point.config.size_gpcs);
        let needed = ((rate_rps - provided_rps) / point.throughput_rps).ceil() as u32;
        // Fewer segments of this size leave the rest to less efficient sizes:
        // below `fewest`, even the whole remaining budget spent at the next
        // size's efficiency cannot cover the rate (the check the next level
        // would make), so those counts are not visited one by one.
        let next_efficiency = table.best.get(index + 1).map_or(0.0, |(next, _)| next.throughput_per_gpc());
        let gain_per_segment = point.throughput_rps - f64::from(size) * next_efficiency;
        let shortfall = rate_rps - provided_rps - f64::from(budget) * next_efficiency;
        let fewest = if gain_per_segment > 0.0 && shortfall > 0.0 {
            // One below the exact quotient, against rounding.
            ((shortfall / gain_per_segment).floor() as u32).saturating_sub(1)
        } else {
            0
        };
        let (low, high) = (fewest, needed.min(budget / size));
        let unit_price = self.price.map_or(0.0, |price| price.size_prices[size as usize]);
        let (covering, below) = match self.price {
            Some(price) => {
                let rest_rps = rate_rps - provided_rps;
                price.counts_within(index, unit_price, point.throughput_rps, rest_rps, spent, low, high)
            }
            None => (None, Some(low..=high)),
        };
        for count in covering.into_iter().chain(below.into_iter().flat_map(Iterator::rev)) {
            if used_gpcs + count * size > cap.get() {
                continue;
            }
            counts[index] = count;
            let provided = provided_rps + f64::from(count) * point.throughput_rps;
            let spent_here = spent + f64::from(count) * unit_price;
            self.descend(index + 1, used_gpcs + count * size, provided, spent_here, counts, emit);
        }
        counts[index] = 0;
    }
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
    use crate::latency::LatencyRule;
    use tessera_core::{GpuModel, SegmentConfig};

    fn point(size_gpcs: u8, batch: u32, throughput_rps: f64, latency_ms: f64) -> ProfilePoint {
        ProfilePoint::new(SegmentConfig { size_gpcs, batch, procs: 1 }, throughput_rps, latency_ms, None).unwrap()
    }

    fn profile(points: Vec<ProfilePoint>) -> ModelProfile {
        ModelProfile::new(GpuModel::A100_80GB, "m", points).unwrap()
    }

    const WIDE: OptionLimits = OptionLimits { extra_gpcs: 7, max_mixes: usize::MAX };

    #[test]
    fn a_rate_covered_exactly_is_not_over_counted_by_a_rounded_quotient() {
        // 3 × 0.38 covers 3 × 0.38, but 3 × 0.38 / 0.38 is 3.0000000000000004
        // in floating point: the three-slice mix must be the minimum, not
        // below a floor of four (which panicked).
        let profile = profile(vec![point(1, 1, 0.38, 1.0)]);
        let slo = ServiceSlo::new("s", "m", 3.0 * 0.38, 100.0).unwrap();
        let options = service_options(&profile, &slo, Judge::plain(LatencyRule::Parva), 5, WIDE).unwrap();
        assert_eq!(options.min_gpcs, 3);
        assert_eq!(options.mixes[0].counts.to_string(), "1g+1g+1g");
    }

    #[test]
    fn enumerates_minimal_mixes_cheapest_first() {
        let profile = profile(vec![point(1, 1, 100.0, 5.0), point(2, 1, 210.0, 5.0), point(7, 1, 800.0, 2.0)]);
        let slo = ServiceSlo::new("s", "m", 400.0, 100.0).unwrap();
        let options = service_options(&profile, &slo, Judge::plain(LatencyRule::Parva), 5, WIDE).unwrap();
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
        let queueing = service_options(&profile, &slo, Judge::plain(LatencyRule::Queueing), 5, WIDE).unwrap();
        assert!(queueing.mixes.iter().all(|m| m.counts.count(7) == 0), "{:?}", queueing.mixes);
        assert_eq!(queueing.mixes[0].counts.to_string(), "1g");
        let parva = service_options(&profile, &slo, Judge::plain(LatencyRule::Parva), 5, WIDE).unwrap();
        assert!(parva.mixes.iter().any(|m| m.counts.count(7) == 1));
    }

    #[test]
    fn reports_unmeetable_services() {
        let profile = profile(vec![point(1, 1, 40.0, 25.0)]);
        let slo = ServiceSlo::new("s", "m", 10.0, 20.0).unwrap();
        let error = service_options(&profile, &slo, Judge::plain(LatencyRule::Queueing), 5, WIDE).unwrap_err();
        assert!(matches!(error, PlanError::Unmeetable(_)), "{error}");
    }

    #[test]
    fn sorting_mixes_survives_a_nan_slack() {
        let one = point(1, 1, 100.0, 5.0);
        let mix = |n: u32, slack: f64| Mix {
            parts: vec![(one, n)],
            counts: SizeCounts::EMPTY.with_n(1, n),
            provisioned_rps: 100.0 * f64::from(n),
            gpcs: 2,
            segments: n,
            slack,
        };
        let mut best = BestMixes::new(2, 2, 10);
        best.offer(mix(1, f64::NAN));
        best.offer(mix(2, 0.5));
        let sorted = best.into_sorted();
        assert_eq!(sorted.len(), 2);
        assert_eq!(sorted[0].slack, 0.5, "a NaN slack sorts last");
    }

    #[test]
    fn cap_keeps_the_best_mixes() {
        let profile = profile(vec![point(1, 1, 100.0, 5.0), point(2, 1, 190.0, 5.0), point(3, 1, 280.0, 5.0)]);
        let slo = ServiceSlo::new("s", "m", 1000.0, 100.0).unwrap();
        let options = service_options(
            &profile,
            &slo,
            Judge::plain(LatencyRule::Parva),
            5,
            OptionLimits { extra_gpcs: 3, max_mixes: 2 },
        )
        .unwrap();
        assert_eq!(options.mixes.len(), 2);
        assert_eq!(options.mixes[0].gpcs, options.min_gpcs);
    }
}
