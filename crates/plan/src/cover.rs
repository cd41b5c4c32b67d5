//! The cheapest cover of each service at given instance prices: the
//! "pricing" step of the linear-programming bound (see [`crate::bound`]).
//!
//! A service's *cover items* are, per instance size of a GPU model, the
//! highest throughput of any configuration that meets the latency rule at
//! full load; a *cover* is a count of segments per size whose throughput
//! reaches the rate. This relaxes what a plan may run (under `queueing`, a
//! plan's mixes also respect provisioning ratios), so the cheapest cover is
//! never dearer than the cheapest real mix, and bounds built on it stay
//! valid.
//!
//! Catalogues repeat profiles: services with the same cover items form a
//! *group*, and a group enumerates once every vector that is a minimal cover
//! of some rate up to its largest (`throughput − weakest segment < rate`),
//! sorted by throughput. At given prices, one pass from the top yields, for
//! every position, the cheapest vector at or above it; each service then
//! reads its answer at the first vector that covers its rate. Groups whose
//! vectors would be too many fall back, per service, to a branch and bound
//! over the items.

use std::collections::HashMap;

use tessera_core::{ProfilePoint, ServiceSlo, SizeCounts};

use crate::bound::{PriceSpace, Pricing};
use crate::latency::LatencyRule;

/// A vector covers a rate when its throughput is at least the rate less
/// this relative tolerance (more covers can only lower the bound).
const COVER_TOLERANCE: f64 = 1e-12;

/// Most vectors one group enumerates.
const GROUP_VECTORS: usize = 200_000;

/// Most vectors all groups together enumerate.
const TOTAL_VECTORS: usize = 2_000_000;

/// Most nodes of one service's cover search; beyond them its term falls
/// back to the fractional cover (still a valid bound).
const COVER_NODES: u64 = 1_000_000;

/// Per instance size (ascending), the highest throughput of a point that
/// meets the rule at full load; empty when none does.
pub(crate) fn cover_items(points: &[ProfilePoint], slo: &ServiceSlo, rule: LatencyRule) -> Vec<(u8, f64)> {
    let mut best = [0.0f64; 8];
    for point in points {
        if rule.max_provision_ratio(point, slo.latency_slo_ms).is_some() {
            let slot = &mut best[usize::from(point.config.size_gpcs)];
            *slot = slot.max(point.throughput_rps);
        }
    }
    (1..8u8).filter(|&g| best[usize::from(g)] > 0.0).map(|g| (g, best[usize::from(g)])).collect()
}

/// `true` when `throughput_rps` covers `rate_rps` for the bound.
fn covers(throughput_rps: f64, rate_rps: f64) -> bool {
    throughput_rps >= rate_rps * (1.0 - COVER_TOLERANCE)
}

/// The vectors of one group, by throughput.
#[derive(Debug, Clone)]
struct Frontier {
    throughputs: Vec<f64>,
    counts: Vec<SizeCounts>,
}

impl Frontier {
    /// Every non-empty vector over `items` with throughput less its
    /// weakest segment below `max_rate`, or `None` beyond `cap` vectors.
    fn enumerate(items: &[(u8, f64)], max_rate: f64, cap: usize) -> Option<Frontier> {
        let mut found: Vec<(f64, SizeCounts)> = Vec::new();
        if !Self::descend(items, max_rate, cap, 0, 0.0, f64::INFINITY, SizeCounts::EMPTY, &mut found) {
            return None;
        }
        found.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        Some(Frontier {
            throughputs: found.iter().map(|(t, _)| *t).collect(),
            counts: found.into_iter().map(|(_, c)| c).collect(),
        })
    }

    /// Adds the vectors extending `counts` over items `index..`; `false`
    /// once more than `cap` are found.
    #[allow(clippy::too_many_arguments)]
    fn descend(
        items: &[(u8, f64)],
        max_rate: f64,
        cap: usize,
        index: usize,
        throughput: f64,
        weakest: f64,
        counts: SizeCounts,
        found: &mut Vec<(f64, SizeCounts)>,
    ) -> bool {
        let Some(&(size, item_rps)) = items.get(index) else {
            if !counts.is_empty() {
                found.push((throughput, counts));
            }
            return found.len() <= cap;
        };
        if !Self::descend(items, max_rate, cap, index + 1, throughput, weakest, counts, found) {
            return false;
        }
        let weakest = weakest.min(item_rps);
        let mut n = 1;
        // Throughput less the weakest segment only grows with more segments.
        while throughput + f64::from(n) * item_rps - weakest < max_rate {
            let more = counts.with_n(size, n);
            if !Self::descend(
                items,
                max_rate,
                cap,
                index + 1,
                throughput + f64::from(n) * item_rps,
                weakest,
                more,
                found,
            ) {
                return false;
            }
            n += 1;
        }
        true
    }
}

/// Per GPU model (fleet index) that may serve a service, its cover items.
pub(crate) type ModelItems = Vec<(usize, Vec<(u8, f64)>)>;

/// One group: services with the same GPU model and cover items.
#[derive(Debug, Clone)]
struct Group {
    model: usize,
    items: Vec<(u8, f64)>,
    frontier: Option<Frontier>,
}

/// How one service is priced on one GPU model.
#[derive(Debug, Clone, Copy)]
struct Member {
    group: u32,
    /// The first frontier vector that covers the rate; `None`: the rate is
    /// beyond the group's frontier (a cover search prices it).
    first: Option<u32>,
}

/// The pricing of every service over all its cover vectors.
#[derive(Debug, Clone)]
pub(crate) struct CoverPricing {
    groups: Vec<Group>,
    /// Per service, its rate and one member per GPU model that serves it.
    services: Vec<(f64, Vec<Member>)>,
}

/// The cheapest cover of one service on one model at some prices.
#[derive(Debug, Clone, Copy)]
struct Cheapest {
    /// Its price; below the cover's own price only when a search was cut
    /// short (then the fractional cover's, a valid bound).
    value: f64,
    counts: SizeCounts,
}

impl CoverPricing {
    /// The pricing of `services`: per service, `(model, cover items)` for
    /// each model of the price space that serves it (no items: it cannot).
    pub(crate) fn new(services: Vec<(f64, ModelItems)>) -> Self {
        let mut key_of: HashMap<(usize, Vec<(u8, u64)>), u32> = HashMap::new();
        let mut groups: Vec<Group> = Vec::new();
        let mut max_rates: Vec<f64> = Vec::new();
        let mut members: Vec<(f64, Vec<u32>)> = Vec::with_capacity(services.len());
        for (rate_rps, per_model) in services {
            let mut mine = Vec::new();
            for (model, items) in per_model {
                if items.is_empty() {
                    continue;
                }
                let key = (model, items.iter().map(|&(g, t)| (g, t.to_bits())).collect());
                let group = *key_of.entry(key).or_insert_with(|| {
                    groups.push(Group { model, items, frontier: None });
                    max_rates.push(0.0);
                    groups.len() as u32 - 1
                });
                max_rates[group as usize] = max_rates[group as usize].max(rate_rps);
                mine.push(group);
            }
            members.push((rate_rps, mine));
        }
        // Frontiers for the groups that fit, smallest first.
        let mut order: Vec<usize> = (0..groups.len()).collect();
        order.sort_by(|&a, &b| (max_rates[a] / groups[a].items[0].1).total_cmp(&(max_rates[b] / groups[b].items[0].1)));
        let mut total = 0;
        for g in order {
            let cap = GROUP_VECTORS.min(TOTAL_VECTORS - total);
            if let Some(frontier) = Frontier::enumerate(&groups[g].items, max_rates[g], cap) {
                total += frontier.counts.len();
                groups[g].frontier = Some(frontier);
            }
        }
        let services = members
            .into_iter()
            .map(|(rate_rps, mine)| {
                let mine = mine
                    .into_iter()
                    .map(|group| {
                        let first = groups[group as usize].frontier.as_ref().and_then(|f| {
                            let index = f.throughputs.partition_point(|&t| !covers(t, rate_rps));
                            (index < f.throughputs.len()).then_some(index as u32)
                        });
                        Member { group, first }
                    })
                    .collect();
                (rate_rps, mine)
            })
            .collect();
        CoverPricing { groups, services }
    }

    /// Per group with a frontier, the index of the cheapest vector at or
    /// above each position, and its price.
    fn suffix_minima(&self, space: &PriceSpace, prices: &[f64]) -> Vec<Option<(Vec<u32>, Vec<f64>)>> {
        self.groups
            .iter()
            .map(|group| {
                let frontier = group.frontier.as_ref()?;
                let n = frontier.counts.len();
                let (mut index, mut value) = (vec![0u32; n], vec![0.0; n]);
                let mut best = (u32::MAX, f64::INFINITY);
                for i in (0..n).rev() {
                    let price = space.price_of(prices, group.model, &frontier.counts[i]);
                    // Ties go to the lower throughput: less slack.
                    if price <= best.1 {
                        best = (i as u32, price);
                    }
                    (index[i], value[i]) = best;
                }
                Some((index, value))
            })
            .collect()
    }

    /// The cheapest cover of each service: (model, cover), its value.
    fn cheapest(&self, space: &PriceSpace, prices: &[f64]) -> Vec<Option<(usize, Cheapest)>> {
        let minima = self.suffix_minima(space, prices);
        self.services
            .iter()
            .map(|(rate_rps, members)| {
                let mut best: Option<(usize, Cheapest)> = None;
                for member in members {
                    let group = &self.groups[member.group as usize];
                    let found = match (member.first, &minima[member.group as usize], &group.frontier) {
                        (Some(first), Some((index, value)), Some(frontier)) => {
                            let at = index[first as usize] as usize;
                            Cheapest { value: value[first as usize], counts: frontier.counts[at] }
                        }
                        _ => cover_search(space, prices, group.model, &group.items, *rate_rps),
                    };
                    if best.is_none_or(|(_, b)| found.value < b.value) {
                        best = Some((group.model, found));
                    }
                }
                best
            })
            .collect()
    }

    /// Per service, the GPU model and cover of its cheapest cover at
    /// `prices` (`None` for a service no model serves).
    pub(crate) fn choices(&self, space: &PriceSpace, prices: &[f64]) -> Vec<Option<(usize, SizeCounts)>> {
        self.cheapest(space, prices).into_iter().map(|c| c.map(|(m, c)| (m, c.counts))).collect()
    }

    /// Per service, its cheapest cover's value at `prices` on each model
    /// (`None` where the model cannot serve it), in that model's cost.
    pub(crate) fn per_model_values(&self, space: &PriceSpace, prices: &[f64]) -> Vec<Vec<Option<f64>>> {
        let minima = self.suffix_minima(space, prices);
        self.services
            .iter()
            .map(|(rate_rps, members)| {
                let mut values = vec![None; space.models()];
                for member in members {
                    let group = &self.groups[member.group as usize];
                    values[group.model] = Some(match (member.first, &minima[member.group as usize]) {
                        (Some(first), Some((_, value))) => value[first as usize],
                        _ => cover_search(space, prices, group.model, &group.items, *rate_rps).value,
                    });
                }
                values
            })
            .collect()
    }
}

impl Pricing for CoverPricing {
    fn services(&self) -> usize {
        self.services.len()
    }

    fn evaluate(&self, space: &PriceSpace, prices: &[f64], aggregate: &mut [f64]) -> f64 {
        aggregate.fill(0.0);
        let mut total = 0.0;
        for (model, cheapest) in self.cheapest(space, prices).into_iter().flatten() {
            total += cheapest.value;
            space.add_counts(aggregate, model, &cheapest.counts, 1.0);
        }
        total
    }
}

/// The cheapest cover of `rate_rps` by `items` on `model` at `prices`: a
/// branch and bound over the items, cheapest per request first.
fn cover_search(space: &PriceSpace, prices: &[f64], model: usize, items: &[(u8, f64)], rate_rps: f64) -> Cheapest {
    // (size, throughput, price), cheapest per request first.
    let mut priced: Vec<(u8, f64, f64)> =
        items.iter().map(|&(g, t)| (g, t, space.price_of(prices, model, &SizeCounts::EMPTY.with(g)))).collect();
    priced.sort_by(|a, b| (a.2 / a.1).total_cmp(&(b.2 / b.1)).then(a.0.cmp(&b.0)));
    let (size, throughput, price) = priced[0];
    let single = SizeCounts::EMPTY.with_n(size, (rate_rps / throughput).ceil().max(1.0) as u32);
    if price <= 0.0 {
        return Cheapest { value: 0.0, counts: single };
    }
    let mut search = CoverSearch {
        items: &priced,
        slack_rps: rate_rps * COVER_TOLERANCE,
        best: space.price_of(prices, model, &single),
        best_counts: single,
        nodes_left: COVER_NODES,
    };
    search.descend(rate_rps, 0, 0.0, SizeCounts::EMPTY);
    if search.nodes_left == 0 {
        return Cheapest { value: rate_rps * price / throughput, counts: search.best_counts };
    }
    Cheapest { value: search.best, counts: search.best_counts }
}

/// The cheapest whole-segment cover of a rate by (size, throughput, price)
/// items sorted cheapest per request first.
struct CoverSearch<'a> {
    items: &'a [(u8, f64, f64)],
    /// Uncovered rate that still counts as covered (the cover tolerance).
    slack_rps: f64,
    best: f64,
    best_counts: SizeCounts,
    nodes_left: u64,
}

impl CoverSearch<'_> {
    fn descend(&mut self, remaining_rps: f64, index: usize, spent: f64, counts: SizeCounts) {
        if remaining_rps <= self.slack_rps {
            if spent < self.best {
                (self.best, self.best_counts) = (spent, counts);
            }
            return;
        }
        let Some(&(size, throughput, price)) = self.items.get(index) else {
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
        let next_ratio = self.items.get(index + 1).map_or(f64::INFINITY, |&(_, t, p)| p / t);
        let most = (remaining_rps / throughput).ceil() as u32;
        for count in (0..=most).rev() {
            let rest = remaining_rps - f64::from(count) * throughput;
            let spent_here = spent + f64::from(count) * price;
            // Below the covering count, fewer of this item leave more to
            // dearer ones: once that floor reaches the best, so do all
            // smaller counts.
            if count < most && spent_here + rest * next_ratio >= self.best {
                break;
            }
            self.descend(rest, index + 1, spent_here, counts.with_n(size, count));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::GpuModel;

    fn space() -> PriceSpace {
        PriceSpace::new(&[(GpuModel::A100_80GB, 1.0, None)])
    }

    fn prices(per_size: &[(u8, f64)]) -> Vec<f64> {
        let space = space();
        let mut prices = vec![0.0; space.dims()];
        for &(g, p) in per_size {
            prices[space.labels().iter().position(|&l| l == (0, g)).unwrap()] = p;
        }
        prices
    }

    #[test]
    fn the_cheapest_cover_is_exact_on_a_small_case() {
        // 1g: 100 rps for 0.15; 3g: 330 rps for 0.5. Covering 400 rps:
        // 4 × 1g = 0.6, 3g + 1g = 0.65, 2 × 3g = 1.0 → 0.6.
        let items = vec![(1, 100.0), (3, 330.0)];
        let prices = prices(&[(1, 0.15), (3, 0.5), (2, 1.0), (4, 1.0), (7, 1.0)]);
        let found = cover_search(&space(), &prices, 0, &items, 400.0);
        assert!((found.value - 0.6).abs() < 1e-12, "{found:?}");
        assert_eq!(found.counts, SizeCounts::from_sizes([1, 1, 1, 1]));
        let pricing = CoverPricing::new(vec![(400.0, vec![(0, items)])]);
        let mut aggregate = vec![0.0; space().dims()];
        let value = pricing.evaluate(&space(), &prices, &mut aggregate);
        assert!((value - 0.6).abs() < 1e-12, "{value}");
        assert_eq!(aggregate[0], 4.0, "the 1g price comes first");
    }

    #[test]
    fn frontier_and_search_agree_on_random_rates_and_prices() {
        let space = space();
        let items = vec![(1, 97.0), (2, 201.0), (3, 290.0), (4, 410.0), (7, 700.0)];
        let mut rng = tessera_core::rng::SplitMix64::new(5);
        let rates: Vec<f64> = (0..200).map(|_| rng.uniform(1.0, 3000.0)).collect();
        let pricing = CoverPricing::new(rates.iter().map(|&r| (r, vec![(0, items.clone())])).collect());
        assert!(pricing.groups[0].frontier.is_some());
        for _ in 0..20 {
            let prices = prices(&[
                (1, rng.uniform(0.05, 0.2)),
                (2, rng.uniform(0.1, 0.4)),
                (3, rng.uniform(0.2, 0.5)),
                (4, rng.uniform(0.3, 0.6)),
                (7, rng.uniform(0.5, 1.0)),
            ]);
            let values = pricing.per_model_values(&space, &prices);
            for (rate, value) in rates.iter().zip(values) {
                let searched = cover_search(&space, &prices, 0, &items, *rate);
                assert!((value[0].unwrap() - searched.value).abs() < 1e-9, "rate {rate}: {value:?} vs {searched:?}");
            }
        }
    }

    #[test]
    fn items_keep_the_best_point_per_size_that_meets_the_rule() {
        let point = |size_gpcs, batch, throughput_rps, latency_ms| {
            let config = tessera_core::SegmentConfig { size_gpcs, batch, procs: 1 };
            ProfilePoint::new(config, throughput_rps, latency_ms, None).unwrap()
        };
        let points = [point(1, 1, 50.0, 5.0), point(1, 8, 90.0, 40.0), point(2, 1, 120.0, 5.0)];
        let slo = ServiceSlo::new("s", "m", 100.0, 50.0).unwrap();
        // Under parva, 40 ms ≥ 0.45 × 50: the batch-8 point is out.
        assert_eq!(cover_items(&points, &slo, LatencyRule::Parva), vec![(1, 50.0), (2, 120.0)]);
    }
}
