//! The exact part of the `optimal` strategy: a best-bound-first branch and
//! bound over one mix per service, with the linear-programming bound of
//! [`crate::bound`] at every node.
//!
//! A node fixes some services to one of their candidate mixes and forbids
//! some others. Its bound is the relaxation restricted to what the node
//! allows (and at least the packed cost of the services it fixes), solved
//! from its parent's prices. At the node's prices every mix whose price
//! exceeds its service's cheapest allowed one by more than the incumbent
//! leaves above the bound is dropped (reduced-cost fixing: a plan using it
//! would cost at least the incumbent). The node's relaxed solution is
//! rounded as at the root ([`crate::round`]) for a new incumbent; then the
//! node splits on the most fractional service of that solution (its
//! heaviest mix: fixed in one child, forbidden in the other), or, when none
//! is fractional but the packing is not yet tight, on the service with the
//! dearest choice.
//!
//! A node whose remaining choices are few is settled by trying them all
//! ([`crate::round::complete_exactly`]) instead of split further.
//!
//! Nodes are explored cheapest bound first, so when the time runs out the
//! least bound among the open nodes bounds every plan (within the
//! candidates); when none is left, the incumbent is optimal.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::rc::Rc;
use std::time::Instant;

use tessera_core::SizeCounts;

use crate::bound::{solve, CostGrid, PriceSpace, Pricing};
use crate::fleet_model::{packed_cost, FleetModel};
use crate::round::{add_to_share, complete_exactly, purify, Candidate, Share};

/// Reduced costs within this of the room left are kept (rounding noise).
const ROOM_TOLERANCE: f64 = 1e-9;

/// A node whose open choices combine in at most this many ways is settled
/// by trying them all.
const SETTLE_COMBINATIONS: usize = 20_000;

/// Most search nodes of the exact completion that rounds a node's relaxed
/// solution (a heuristic: a cheaper plan found is a bonus).
const ROUNDING_NODES: u64 = 5_000;

/// Most search nodes of the exact completion that settles a node (enough
/// for [`SETTLE_COMBINATIONS`] leaves and the paths to them).
const SETTLE_NODES: u64 = 4 * SETTLE_COMBINATIONS as u64;

/// Most open nodes; beyond this the search stops as if out of time.
const MAX_OPEN_NODES: usize = 200_000;

/// What the branch and bound found.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Outcome {
    /// A plan cheaper than the incumbent given, if one was found: per
    /// service, its candidate.
    pub choice: Option<Vec<Candidate>>,
    /// Every plan within the candidates costs at least this: the best
    /// plan's cost when the search finished, else the least bound of the
    /// nodes left open.
    pub bound: f64,
}

/// One decision of a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Decision {
    /// The service uses this candidate.
    Fix(u32, u32),
    /// The service does not use this candidate.
    Forbid(u32, u32),
}

/// An open node.
#[derive(Debug, Clone)]
struct Node {
    bound: f64,
    depth: usize,
    decisions: Vec<Decision>,
    /// The parent's best prices, then those of its relaxed solution: where
    /// this node's relaxation starts.
    starts: Rc<Vec<Vec<f64>>>,
}

impl PartialEq for Node {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Node {}

impl PartialOrd for Node {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Node {
    /// The heap's greatest is the least bound, then the deepest.
    fn cmp(&self, other: &Self) -> Ordering {
        other.bound.total_cmp(&self.bound).then(self.depth.cmp(&other.depth))
    }
}

/// The relaxation over the mixes a node allows.
struct ListPricing<'a> {
    candidates: &'a [Vec<Candidate>],
    /// Per service, the indices of its allowed candidates.
    allowed: &'a [Vec<u32>],
}

impl ListPricing<'_> {
    /// Per service, its cheapest allowed candidate at `prices` and the price.
    fn cheapest(&self, space: &PriceSpace, prices: &[f64]) -> Vec<(u32, f64)> {
        self.allowed
            .iter()
            .enumerate()
            .map(|(s, allowed)| {
                let mut best = (u32::MAX, f64::INFINITY);
                for &index in allowed {
                    let c = &self.candidates[s][index as usize];
                    let price = space.price_of(prices, c.model, &c.counts);
                    if price < best.1 {
                        best = (index, price);
                    }
                }
                best
            })
            .collect()
    }
}

impl Pricing for ListPricing<'_> {
    fn services(&self) -> usize {
        self.allowed.len()
    }

    fn evaluate(&self, space: &PriceSpace, prices: &[f64], aggregate: &mut [f64]) -> f64 {
        aggregate.fill(0.0);
        let mut total = 0.0;
        for (s, (index, price)) in self.cheapest(space, prices).into_iter().enumerate() {
            let c = &self.candidates[s][index as usize];
            space.add_counts(aggregate, c.model, &c.counts, 1.0);
            total += price;
        }
        total
    }
}

/// The search: what every node shares.
struct Search<'a> {
    space: &'a PriceSpace,
    models: &'a [FleetModel],
    candidates: &'a [Vec<Candidate>],
    /// The costs a plan can have.
    grid: &'a CostGrid,
    /// Costs are whole GPUs (one GPU model of cost 1).
    whole: bool,
    incumbent: f64,
    best: Option<Vec<Candidate>>,
    deadline: Option<Instant>,
}

impl Search<'_> {
    /// The most a plan may cost and still beat the incumbent.
    fn target(&self) -> f64 {
        if self.whole {
            self.incumbent - 1.0
        } else {
            self.incumbent - ROOM_TOLERANCE * self.incumbent.abs().max(1.0)
        }
    }

    /// `true` when plans costing at least `bound` cannot beat the incumbent.
    fn prunes(&self, bound: f64) -> bool {
        self.grid.round_up(bound) >= self.incumbent - ROOM_TOLERANCE * self.incumbent.abs().max(1.0)
    }

    /// The allowed candidates of a node: the decisions applied, then the
    /// mixes dropped whose reduced cost at `prices` exceeds the room left.
    fn allowed(&self, decisions: &[Decision], prices: &[f64]) -> Vec<Vec<u32>> {
        let mut allowed: Vec<Vec<u32>> = self.candidates.iter().map(|list| (0..list.len() as u32).collect()).collect();
        for decision in decisions {
            match *decision {
                Decision::Fix(s, c) => allowed[s as usize] = vec![c],
                Decision::Forbid(s, c) => allowed[s as usize].retain(|&i| i != c),
            }
        }
        self.fix_by_reduced_cost(&mut allowed, prices);
        allowed
    }

    /// Drops the candidates whose price at `prices` exceeds their service's
    /// cheapest allowed by more than the target leaves above the bound at
    /// those prices.
    fn fix_by_reduced_cost(&self, allowed: &mut [Vec<u32>], prices: &[f64]) {
        let pricing = ListPricing { candidates: self.candidates, allowed };
        let cheapest = pricing.cheapest(self.space, prices);
        let value = cheapest.iter().map(|(_, p)| p).sum::<f64>() - self.space.penalty(prices);
        let room = self.target() - value + ROOM_TOLERANCE * value.abs().max(1.0);
        for (s, list) in allowed.iter_mut().enumerate() {
            let floor = cheapest[s].1;
            list.retain(|&i| {
                let c = &self.candidates[s][i as usize];
                self.space.price_of(prices, c.model, &c.counts) - floor <= room
            });
        }
    }

    /// The packed cost of the services a node has fixed to one candidate.
    fn fixed_cost(&self, allowed: &[Vec<u32>]) -> Option<f64> {
        let mut counts = vec![SizeCounts::EMPTY; self.models.len()];
        for (s, list) in allowed.iter().enumerate() {
            if let [only] = list[..] {
                let c = &self.candidates[s][only as usize];
                counts[c.model] = counts[c.model].plus(&c.counts);
            }
        }
        packed_cost(self.models, &counts)
    }

    /// Explores `node`; returns its children.
    fn expand(&mut self, node: Node) -> Vec<Node> {
        let mut allowed = self.allowed(&node.decisions, &node.starts[0]);
        if allowed.iter().any(Vec::is_empty) {
            return Vec::new();
        }
        let Some(fixed) = self.fixed_cost(&allowed) else { return Vec::new() };
        if self.prunes(fixed) {
            return Vec::new();
        }
        let relaxation = {
            let pricing = ListPricing { candidates: self.candidates, allowed: &allowed };
            // Enough once the node is pruned, or its bound on the grid is final.
            let settled =
                |value: f64, upper: f64| self.prunes(value) || self.grid.round_up(upper) <= self.grid.round_up(value);
            solve(self.space, &pricing, &node.starts, &settled, self.deadline)
        };
        let bound = self.grid.round_up(relaxation.value).max(fixed);
        if self.prunes(bound) {
            return Vec::new();
        }
        // The relaxed solution, purified.
        let mut shares: Vec<Share<u32>> = vec![Vec::new(); allowed.len()];
        {
            let pricing = ListPricing { candidates: self.candidates, allowed: &allowed };
            for (prices, weight) in &relaxation.support {
                for (share, (index, _)) in shares.iter_mut().zip(pricing.cheapest(self.space, prices)) {
                    add_to_share(share, index, *weight);
                }
            }
        }
        purify(self.space, &mut shares, |s, index| {
            let c = &self.candidates[s][index as usize];
            (c.model, c.counts)
        });
        self.fix_by_reduced_cost(&mut allowed, &relaxation.prices);
        if allowed.iter().any(Vec::is_empty) {
            return Vec::new();
        }
        self.round(&shares, &allowed);
        if self.prunes(bound) || self.settle(&allowed) {
            return Vec::new();
        }
        let Some((service, index)) = self.branching(&shares, &allowed, &relaxation.prices) else {
            return Vec::new();
        };
        let starts: Vec<Vec<f64>> =
            std::iter::once(relaxation.prices).chain(relaxation.support.into_iter().map(|(p, _)| p)).collect();
        let starts = Rc::new(starts);
        [Decision::Fix(service, index), Decision::Forbid(service, index)]
            .into_iter()
            .map(|decision| {
                let mut decisions = node.decisions.clone();
                decisions.push(decision);
                Node { bound, depth: node.depth + 1, decisions, starts: Rc::clone(&starts) }
            })
            .collect()
    }

    /// Rounds a node's purified relaxed solution: services with one
    /// candidate keep it, the split ones are chosen exactly among what the
    /// node allows; a cheaper plan becomes the incumbent.
    fn round(&mut self, shares: &[Share<u32>], allowed: &[Vec<u32>]) {
        let mut counts = vec![SizeCounts::EMPTY; self.models.len()];
        let mut choice: Vec<Candidate> = Vec::with_capacity(shares.len());
        let mut split: Vec<usize> = Vec::new();
        for (s, share) in shares.iter().enumerate() {
            let heaviest = share.iter().max_by(|a, b| a.1.total_cmp(&b.1)).map_or(allowed[s][0], |(c, _)| *c);
            let c = self.candidates[s][heaviest as usize];
            if share.len() > 1 {
                split.push(s);
            } else {
                counts[c.model] = counts[c.model].plus(&c.counts);
            }
            choice.push(c);
        }
        let lists: Vec<Vec<Candidate>> =
            split.iter().map(|&s| allowed[s].iter().map(|&i| self.candidates[s][i as usize]).collect()).collect();
        let open: Vec<&[Candidate]> = lists.iter().map(Vec::as_slice).collect();
        let Some((picked, cost)) =
            complete_exactly(self.models, &counts, &open, self.incumbent, ROUNDING_NODES, self.deadline).best
        else {
            return;
        };
        if !self.prunes(cost) {
            for ((&s, list), index) in split.iter().zip(&lists).zip(picked) {
                choice[s] = list[index];
            }
            self.incumbent = cost;
            self.best = Some(choice);
        }
    }

    /// Settles a node whose open choices are few by trying them all;
    /// `false` when they are too many (or the search was cut short).
    fn settle(&mut self, allowed: &[Vec<u32>]) -> bool {
        let free: Vec<usize> = (0..allowed.len()).filter(|&s| allowed[s].len() > 1).collect();
        let combinations = free.iter().try_fold(1usize, |product, &s| product.checked_mul(allowed[s].len()));
        if combinations.is_none_or(|c| c > SETTLE_COMBINATIONS) {
            return false;
        }
        let mut counts = vec![SizeCounts::EMPTY; self.models.len()];
        let mut choice: Vec<Candidate> = Vec::with_capacity(allowed.len());
        for (s, list) in allowed.iter().enumerate() {
            let c = self.candidates[s][list[0] as usize];
            if list.len() == 1 {
                counts[c.model] = counts[c.model].plus(&c.counts);
            }
            choice.push(c);
        }
        let lists: Vec<Vec<Candidate>> =
            free.iter().map(|&s| allowed[s].iter().map(|&i| self.candidates[s][i as usize]).collect()).collect();
        let open: Vec<&[Candidate]> = lists.iter().map(Vec::as_slice).collect();
        let found = complete_exactly(self.models, &counts, &open, self.incumbent, SETTLE_NODES, self.deadline);
        if let Some((picked, cost)) = found.best {
            if !self.prunes(cost) {
                for ((&s, list), index) in free.iter().zip(&lists).zip(picked) {
                    choice[s] = list[index];
                }
                self.incumbent = cost;
                self.best = Some(choice);
            }
        }
        found.exhausted
    }

    /// What a node splits on: the most fractional split service and its
    /// heaviest candidate; else, among services with a choice left, the one
    /// whose candidate is dearest at `prices`. `None` at a leaf.
    fn branching(&self, shares: &[Share<u32>], allowed: &[Vec<u32>], prices: &[f64]) -> Option<(u32, u32)> {
        let heaviest = |share: &Share<u32>| share.iter().copied().max_by(|a, b| a.1.total_cmp(&b.1));
        let fractional = shares
            .iter()
            .enumerate()
            .filter(|(s, share)| share.len() > 1 && allowed[*s].len() > 1)
            .filter_map(|(s, share)| heaviest(share).map(|(c, w)| (s, c, w)))
            .filter(|&(s, c, _)| allowed[s].contains(&c))
            .min_by(|a, b| a.2.total_cmp(&b.2));
        if let Some((s, c, _)) = fractional {
            return Some((s as u32, c));
        }
        (0..shares.len())
            .filter(|&s| allowed[s].len() > 1)
            .map(|s| {
                let c =
                    heaviest(&shares[s]).map(|(c, _)| c).filter(|c| allowed[s].contains(c)).unwrap_or(allowed[s][0]);
                let candidate = &self.candidates[s][c as usize];
                (s, c, self.space.price_of(prices, candidate.model, &candidate.counts))
            })
            .max_by(|a, b| a.2.total_cmp(&b.2))
            .map(|(s, c, _)| (s as u32, c))
    }
}

/// Searches the candidates for a plan cheaper than `incumbent` (in the
/// objective's units: GPUs on one model), from the relaxation's `prices`,
/// until done or `deadline`.
pub(crate) fn branch_and_bound(
    space: &PriceSpace,
    models: &[FleetModel],
    candidates: &[Vec<Candidate>],
    prices: &[f64],
    incumbent: f64,
    deadline: Option<Instant>,
) -> Outcome {
    let grid = CostGrid::new(&models.iter().map(|m| (m.cost, m.offer.limit)).collect::<Vec<_>>());
    let whole = models.len() == 1 && models[0].cost == 1.0;
    let mut search = Search { space, models, candidates, grid: &grid, whole, incumbent, best: None, deadline };
    let mut open = BinaryHeap::new();
    let starts = Rc::new(vec![prices.to_vec()]);
    open.push(Node { bound: f64::NEG_INFINITY, depth: 0, decisions: Vec::new(), starts });
    let mut stopped_at: Option<f64> = None;
    while let Some(node) = open.pop() {
        if search.prunes(node.bound) {
            // Best first: every open node is at least as bound.
            break;
        }
        if deadline.is_some_and(|d| Instant::now() >= d) || open.len() >= MAX_OPEN_NODES {
            stopped_at = Some(node.bound);
            break;
        }
        open.extend(search.expand(node));
    }
    let bound = match stopped_at {
        Some(least) => least.min(search.incumbent),
        None => search.incumbent,
    };
    Outcome { choice: search.best, bound }
}
