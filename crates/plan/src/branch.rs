//! The exact part of the `optimal` strategy: a depth-first branch and bound
//! over one mix per service on a single GPU model, with GPUs as the cost.
//!
//! It explores services in order of fewest mixes, each service's mixes
//! cheapest in compute first, and prunes a partial choice when its bound —
//! the packed GPUs of what is chosen, the compute bound and the price bound
//! of [`crate::bound`] over what is left — cannot beat the incumbent. States
//! (depth, instance multiset) reached again with no better slack are cut.

use std::collections::HashMap;
use std::time::Instant;

use tessera_core::{Packer, SizeCounts};

use crate::bound::{price_of, round_up, Prices};
use crate::objective::{Objective, SLACK_EPSILON};
use crate::options::{Mix, ServiceOptions};

/// Most memoized search states (beyond this the search runs unmemoized).
const MEMO_LIMIT: usize = 2_000_000;

/// What a branch and bound improves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Goal {
    /// GPUs only: any plan with fewer GPUs than the incumbent.
    FewestGpus,
    /// The whole objective: GPUs, then slack, then segments.
    Lexicographic,
}

/// Depth-first branch and bound over one mix per service, on one GPU model
/// (costs in GPUs).
pub(crate) struct BranchAndBound<'a> {
    goal: Goal,
    options: &'a [ServiceOptions],
    /// Services in search order (fewest mixes first).
    order: Vec<usize>,
    packer: Packer,
    slices: u64,
    /// Instance prices of the packing bound (see [`crate::bound`]).
    prices: Prices,
    /// Per depth, the least compute, price, slack and segments still to come.
    rest_gpcs: Vec<u64>,
    rest_price: Vec<f64>,
    rest_slack: Vec<f64>,
    rest_segments: Vec<u64>,
    pub(crate) best: Objective,
    pub(crate) best_choice: Option<Vec<usize>>,
    current: Vec<usize>,
    memo: HashMap<(usize, SizeCounts), (f64, u64)>,
    deadline: Option<Instant>,
    /// Most nodes to visit; `None` for no limit.
    pub(crate) node_budget: Option<u64>,
    nodes: u64,
    /// Set when the deadline or the node budget cut the search short.
    pub(crate) stopped: bool,
}

impl<'a> BranchAndBound<'a> {
    /// A search that must beat `incumbent`.
    pub(crate) fn new(
        options: &'a [ServiceOptions],
        packer: Packer,
        slices: u64,
        prices: Prices,
        incumbent: Objective,
        goal: Goal,
        deadline: Option<Instant>,
    ) -> Self {
        let mut order: Vec<usize> = (0..options.len()).collect();
        order.sort_by_key(|&s| options[s].mixes.len());
        let suffix = |value: &dyn Fn(&ServiceOptions) -> f64| {
            let mut sums = vec![0.0; order.len() + 1];
            for depth in (0..order.len()).rev() {
                sums[depth] = sums[depth + 1] + value(&options[order[depth]]);
            }
            sums
        };
        let min_of = |f: fn(&Mix) -> f64| move |o: &ServiceOptions| o.mixes.iter().map(f).fold(f64::INFINITY, f64::min);
        let rest_gpcs = suffix(&|o| f64::from(o.min_gpcs)).into_iter().map(|v| v as u64).collect();
        let rest_price =
            suffix(&|o| o.mixes.iter().map(|m| price_of(&prices, &m.counts)).fold(f64::INFINITY, f64::min));
        let rest_slack = suffix(&min_of(|m| m.slack));
        let rest_segments = suffix(&min_of(|m| f64::from(m.segments))).into_iter().map(|v| v as u64).collect();
        BranchAndBound {
            goal,
            options,
            current: vec![0; options.len()],
            order,
            packer,
            slices,
            prices,
            rest_gpcs,
            rest_price,
            rest_slack,
            rest_segments,
            best: incumbent,
            best_choice: None,
            memo: HashMap::new(),
            deadline,
            node_budget: None,
            nodes: 0,
            stopped: false,
        }
    }

    /// `true` when a plan bounded below by `bound` could beat the incumbent.
    fn improves(&self, bound: &Objective) -> bool {
        match self.goal {
            Goal::FewestGpus => bound.cost < self.best.cost,
            Goal::Lexicographic => bound.better_than(&self.best),
        }
    }

    /// Searches until done, out of time or out of nodes.
    pub(crate) fn run(&mut self) {
        self.descend(0, SizeCounts::EMPTY, 0.0, 0);
    }

    fn descend(&mut self, depth: usize, counts: SizeCounts, slack: f64, segments: u64) {
        if self.stopped {
            return;
        }
        self.nodes += 1;
        let over_budget = self.node_budget.is_some_and(|budget| self.nodes > budget);
        if over_budget || (self.nodes.is_multiple_of(4096) && self.deadline.is_some_and(|d| Instant::now() >= d)) {
            self.stopped = true;
            return;
        }
        let compute = u64::from(counts.compute_slices()) + self.rest_gpcs[depth];
        let gpus = self
            .packer
            .min_gpus(&counts)
            .max(compute.div_ceil(self.slices))
            .max(round_up(price_of(&self.prices, &counts) + self.rest_price[depth]));
        let bound = Objective {
            cost: gpus as f64,
            slack: slack + self.rest_slack[depth],
            segments: segments + self.rest_segments[depth],
        };
        if !self.improves(&bound) {
            return;
        }
        if depth == self.order.len() {
            self.best = bound;
            self.best_choice = Some(self.current.clone());
            return;
        }
        match self.memo.get(&(depth, counts)) {
            Some(&(seen_slack, seen_segments))
                if seen_slack < slack + SLACK_EPSILON
                    && (seen_slack < slack - SLACK_EPSILON || seen_segments <= segments) =>
            {
                return;
            }
            _ if self.memo.len() < MEMO_LIMIT => {
                self.memo.insert((depth, counts), (slack, segments));
            }
            _ => {}
        }
        let service = self.order[depth];
        let compute_before = u64::from(counts.compute_slices()) + self.rest_gpcs[depth + 1];
        for (index, mix) in self.options[service].mixes.iter().enumerate() {
            // Mixes come cheapest first: once the compute bound alone
            // exceeds the incumbent, every later mix does too.
            let gpus_bound = (compute_before + u64::from(mix.gpcs)).div_ceil(self.slices) as f64;
            if gpus_bound > self.best.cost || (self.goal == Goal::FewestGpus && gpus_bound == self.best.cost) {
                break;
            }
            self.current[service] = index;
            self.descend(depth + 1, counts.plus(&mix.counts), slack + mix.slack, segments + u64::from(mix.segments));
        }
    }
}
