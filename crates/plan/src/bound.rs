//! A lower bound on GPUs that accounts for how instances pack.
//!
//! Give each instance size `g` a price `π_g ≥ 0` such that every maximal
//! MIG layout `L` of the GPU costs at most one GPU: `Σ_g π_g · L_g ≤ 1`.
//! Then any plan's GPU count is at least the total price of its instances,
//! and so at least `Σ_services min over ways to serve it of its price` —
//! linear-programming duality in miniature. Prices `π_g = g / 7` give the
//! compute bound; better prices charge sizes that pack badly (two 3g fill a
//! GPU's memory with a compute slice to spare) and raise the bound.
//!
//! The prices are tuned by a pattern search on an estimate (each service's
//! cheapest known mix), and the bound is then computed exactly at the
//! prices found: for each service, the cheapest covering count vector over
//! sizes (branch and bound), using for each size the highest throughput of
//! any configuration that meets the latency rule at full utilization — a
//! relaxation of what a plan may use, so the bound stays valid.

use std::time::Instant;

use tessera_core::rng::SplitMix64;
use tessera_core::{GpuModel, Lattice, ProfilePoint, ServiceSlo, SizeCounts};

use crate::latency::LatencyRule;
use crate::options::ServiceOptions;

/// Relative tolerance when rounding the bound up.
const ROUNDING_TOLERANCE: f64 = 1e-9;

/// Prices per instance size (index = compute slices).
pub type Prices = [f64; 8];

/// The feasible region of prices: one row per maximal size multiset.
#[derive(Debug, Clone)]
pub struct PriceRegion {
    layouts: Vec<SizeCounts>,
    sizes: Vec<u8>,
}

impl PriceRegion {
    /// The region of `model`'s lattice.
    pub fn new(model: GpuModel) -> Self {
        PriceRegion { layouts: Lattice::new(model).maximal_size_sets(), sizes: model.spec().sizes().collect() }
    }

    /// The compute prices `g / slices`, always feasible.
    fn compute_prices(&self, slices: u8) -> Prices {
        let mut prices = [0.0; 8];
        for &g in &self.sizes {
            prices[usize::from(g)] = f64::from(g) / f64::from(slices);
        }
        prices
    }

    /// Scales `prices` down until every layout costs at most one GPU.
    fn project(&self, mut prices: Prices) -> Prices {
        for price in &mut prices {
            *price = price.max(0.0);
        }
        let worst = self.layouts.iter().map(|layout| price_of(&prices, layout)).fold(0.0, f64::max);
        if worst > 1.0 {
            for price in &mut prices {
                *price /= worst;
            }
        }
        prices
    }
}

/// The price of a multiset.
pub fn price_of(prices: &Prices, counts: &SizeCounts) -> f64 {
    (1..8u8).map(|g| prices[usize::from(g)] * f64::from(counts.count(g))).sum()
}

/// Services the price search looks at, at most (an even sample of them;
/// the bound itself is then computed over every service).
const TUNING_SAMPLE: usize = 2_000;

/// Prices that (approximately) maximize the bound estimated from `options`:
/// a pattern search from the compute prices, stopped at `deadline` (every
/// price vector it holds is feasible, so any is valid).
pub fn tune_prices(region: &PriceRegion, slices: u8, options: &[ServiceOptions], deadline: Option<Instant>) -> Prices {
    // A seeded random sample: a stride could alias with periodic catalogues.
    let sample: Vec<&ServiceOptions> = if options.len() <= TUNING_SAMPLE {
        options.iter().collect()
    } else {
        let mut rng = SplitMix64::new(options.len() as u64);
        (0..TUNING_SAMPLE).map(|_| &options[rng.below(options.len())]).collect()
    };
    let estimate = |prices: &Prices| -> f64 {
        sample.iter().map(|o| o.mixes.iter().map(|m| price_of(prices, &m.counts)).fold(f64::INFINITY, f64::min)).sum()
    };
    let mut best = region.compute_prices(slices);
    let mut best_value = estimate(&best);
    let mut step = 0.05;
    while step > 1e-4 && deadline.is_none_or(|deadline| Instant::now() < deadline) {
        let mut improved = false;
        for &g in &region.sizes {
            for direction in [1.0, -1.0] {
                let mut candidate = best;
                candidate[usize::from(g)] += direction * step;
                let candidate = region.project(candidate);
                let value = estimate(&candidate);
                if value > best_value + 1e-12 {
                    (best, best_value, improved) = (candidate, value, true);
                }
            }
        }
        if !improved {
            step /= 2.0;
        }
    }
    best
}

/// The cheapest price at which one service can be served from `points`
/// (the usable points of its model; a relaxation: per size, its fastest
/// configuration meeting the rule at full load).
pub fn service_price(points: &[ProfilePoint], slo: &ServiceSlo, rule: LatencyRule, prices: &Prices) -> f64 {
    let mut items: Vec<(f64, f64)> = Vec::new(); // (throughput, price)
    for point in points {
        if rule.max_provision_ratio(point, slo.latency_slo_ms).is_none() {
            continue;
        }
        let price = prices[usize::from(point.config.size_gpcs)];
        match items.iter_mut().find(|(_, p)| *p == price && price > 0.0) {
            Some(item) => item.0 = item.0.max(point.throughput_rps),
            None => items.push((point.throughput_rps, price)),
        }
    }
    if items.iter().any(|&(_, price)| price <= 0.0) {
        return 0.0;
    }
    items.sort_by(|a, b| (a.1 / a.0).total_cmp(&(b.1 / b.0)));
    let Some(&(throughput, price)) = items.first() else {
        return f64::INFINITY;
    };
    let mut search = CoverSearch { items: &items, best: f64::INFINITY, nodes_left: COVER_NODES };
    search.descend(slo.rate_rps, 0, 0.0);
    if search.nodes_left == 0 {
        // Cut short: the fractional cover at the best price per request is
        // still a valid bound.
        return slo.rate_rps * price / throughput;
    }
    search.best
}

/// Most nodes of one service's cover search; beyond them the bound falls
/// back to the fractional cover.
const COVER_NODES: u64 = 1_000_000;

/// The cheapest whole-segment cover of a rate by (throughput, price) items
/// sorted cheapest per request first: a branch and bound.
struct CoverSearch<'a> {
    items: &'a [(f64, f64)],
    best: f64,
    nodes_left: u64,
}

impl CoverSearch<'_> {
    fn descend(&mut self, remaining_rps: f64, index: usize, spent: f64) {
        if remaining_rps <= 0.0 {
            self.best = self.best.min(spent);
            return;
        }
        let Some(&(throughput, price)) = self.items.get(index) else {
            return;
        };
        if self.nodes_left == 0 {
            return;
        }
        self.nodes_left -= 1;
        // Items come cheapest per request first: nothing covers the rest for less.
        if spent + remaining_rps * price / throughput >= self.best {
            return;
        }
        let next_ratio = self.items.get(index + 1).map_or(f64::INFINITY, |&(t, p)| p / t);
        let most = (remaining_rps / throughput).ceil() as u64;
        for count in (0..=most).rev() {
            let rest = remaining_rps - count as f64 * throughput;
            let spent_here = spent + count as f64 * price;
            // Below the covering count, fewer of this item leave more to
            // dearer ones: once that floor reaches the best, so do all
            // smaller counts.
            if count < most && spent_here + rest * next_ratio >= self.best {
                break;
            }
            self.descend(rest, index + 1, spent_here);
        }
    }
}

/// Rounds a fractional GPU bound up, forgiving floating-point noise.
pub fn round_up(gpus: f64) -> u64 {
    (gpus * (1.0 - ROUNDING_TOLERANCE)).ceil().max(0.0) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::{ModelProfile, SegmentConfig};

    #[test]
    fn every_maximal_layout_costs_at_most_one_gpu_after_projection() {
        let region = PriceRegion::new(GpuModel::A100_80GB);
        let mut prices = [0.0; 8];
        prices[3] = 0.9;
        prices[1] = 0.3;
        let projected = region.project(prices);
        for layout in &region.layouts {
            assert!(price_of(&projected, layout) <= 1.0 + 1e-12, "{layout}");
        }
        let compute = region.compute_prices(7);
        assert!(region.layouts.iter().all(|l| price_of(&compute, l) <= 1.0 + 1e-12));
    }

    #[test]
    fn cheapest_cover_is_exact_on_a_small_case() {
        // 1g: 100 rps for 0.15; 3g: 330 rps for 0.5. Covering 400 rps:
        // 4 × 1g = 0.6, 3g + 1g = 0.65, 2 × 3g = 1.0 → 0.6.
        let point = |size_gpcs, throughput_rps| {
            ProfilePoint::new(SegmentConfig { size_gpcs, batch: 1, procs: 1 }, throughput_rps, 1.0, None).unwrap()
        };
        let profile = ModelProfile::new(GpuModel::A100_80GB, "m", vec![point(1, 100.0), point(3, 330.0)]).unwrap();
        let slo = ServiceSlo::new("s", "m", 400.0, 100.0).unwrap();
        let mut prices = [0.0; 8];
        prices[1] = 0.15;
        prices[3] = 0.5;
        let price = service_price(profile.points(), &slo, LatencyRule::Parva, &prices);
        assert!((price - 0.6).abs() < 1e-12, "{price}");
    }

    #[test]
    fn rounding_forgives_noise_only() {
        assert_eq!(round_up(12.000000000001), 12);
        assert_eq!(round_up(12.01), 13);
    }
}
