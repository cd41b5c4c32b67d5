//! From the linear-programming relaxation to a plan: keep the services the
//! relaxation serves with a single cover, and choose, exactly, for the few
//! it splits.
//!
//! The relaxation's solution (see [`crate::bound`]) weighs a few price
//! points, each with one cover per service; a service whose covers differ
//! between them is *split*. [`purify`] moves the weights, keeping the total
//! of every (model, size) unchanged, until at most one split service per
//! price variable is left (the Shapley–Folkman lemma, made constructive:
//! among more split columns than prices some combination changes no total,
//! and moving along it zeroes a weight). [`complete_exactly`] then picks
//! one mix for each split service given what the others hold, minimizing
//! the packed cost of the whole, by a small branch and bound.

use std::time::Instant;

use tessera_core::SizeCounts;

use crate::bound::PriceSpace;
use crate::fleet_model::{packed_cost, FleetModel};

/// Weights below this count as zero.
const WEIGHT_EPSILON: f64 = 1e-9;

/// Pivots below this count as zero in the null-space solve.
const PIVOT_EPSILON: f64 = 1e-9;

/// How one service is served in a relaxed solution: choices and weights
/// (summing to one); a single entry when it is not split.
pub(crate) type Share<C> = Vec<(C, f64)>;

/// Adds `weight` of `choice` to a share, merging equal choices.
pub(crate) fn add_to_share<C: PartialEq>(share: &mut Share<C>, choice: C, weight: f64) {
    match share.iter_mut().find(|(c, _)| *c == choice) {
        Some((_, w)) => *w += weight,
        None => share.push((choice, weight)),
    }
}

/// Moves the weights of `shares` so that at most `space.dims()` services
/// stay split, without changing the weighted total of any (model, size);
/// `cover` gives a choice's model and instances.
pub(crate) fn purify<C: Copy>(
    space: &PriceSpace,
    shares: &mut [Share<C>],
    cover: impl Fn(usize, C) -> (usize, SizeCounts),
) {
    let dims = space.dims();
    let vector = |service: usize, choice: C| {
        let (model, counts) = cover(service, choice);
        let mut v = vec![0.0; dims];
        space.add_counts(&mut v, model, &counts, 1.0);
        v
    };
    let mut split: Vec<usize> = (0..shares.len()).filter(|&s| shares[s].len() > 1).collect();
    loop {
        // Columns: (service, entry ≥ 1); its direction moves weight from
        // the service's entry 0 to that entry.
        let mut columns: Vec<(usize, usize)> = Vec::with_capacity(dims + 1);
        for &s in &split {
            for entry in 1..shares[s].len() {
                if columns.len() <= dims {
                    columns.push((s, entry));
                }
            }
            if columns.len() > dims {
                break;
            }
        }
        if columns.len() <= dims {
            return;
        }
        let directions: Vec<Vec<f64>> = columns
            .iter()
            .map(|&(s, entry)| {
                let (to, from) = (vector(s, shares[s][entry].0), vector(s, shares[s][0].0));
                to.iter().zip(&from).map(|(a, b)| a - b).collect()
            })
            .collect();
        let z = null_vector(&directions, dims);
        // Per weight, its rate of change along z.
        let mut rates: Vec<(usize, usize, f64)> = Vec::new();
        for (&(s, entry), &zc) in columns.iter().zip(&z) {
            rates.push((s, entry, zc));
            match rates.iter_mut().find(|(rs, re, _)| *rs == s && *re == 0) {
                Some(rate) => rate.2 -= zc,
                None => rates.push((s, 0, -zc)),
            }
        }
        // Whichever sign of z, some weight falls; go until the first is zero.
        let step = |sign: f64| {
            rates
                .iter()
                .filter(|(_, _, r)| sign * r < -PIVOT_EPSILON)
                .map(|&(s, e, r)| shares[s][e].1 / (-sign * r))
                .fold(f64::INFINITY, f64::min)
        };
        let (sign, t) = if step(1.0).is_finite() { (1.0, step(1.0)) } else { (-1.0, step(-1.0)) };
        if !t.is_finite() {
            // No weight moves (cannot happen for a non-zero z): give up
            // rather than loop.
            return;
        }
        let mut smallest: Option<(usize, usize, f64)> = None;
        for &(s, e, r) in &rates {
            let weight = &mut shares[s][e].1;
            *weight = (*weight + sign * t * r).max(0.0);
            if smallest.is_none_or(|(_, _, w)| *weight < w) {
                smallest = Some((s, e, *weight));
            }
        }
        // The weight the step was sized by is zero up to rounding: make it so.
        if let Some((s, e, _)) = smallest {
            shares[s][e].1 = 0.0;
        }
        let touched: Vec<usize> = {
            let mut services: Vec<usize> = columns.iter().map(|&(s, _)| s).collect();
            services.dedup();
            services
        };
        for s in touched {
            shares[s].retain(|(_, w)| *w > WEIGHT_EPSILON);
            let total: f64 = shares[s].iter().map(|(_, w)| w).sum();
            for (_, w) in &mut shares[s] {
                *w /= total;
            }
        }
        split.retain(|&s| shares[s].len() > 1);
    }
}

/// A non-zero `z` with `Σ_c z_c · columns[c] = 0`, for more columns than
/// rows (`rows` entries each): Gaussian elimination with partial pivoting.
fn null_vector(columns: &[Vec<f64>], rows: usize) -> Vec<f64> {
    let n = columns.len();
    // Row-major copy of the rows × n matrix.
    let mut a: Vec<Vec<f64>> = (0..rows).map(|r| columns.iter().map(|c| c[r]).collect()).collect();
    let mut pivot_of_row: Vec<usize> = Vec::new();
    let mut row = 0;
    let mut free = None;
    for col in 0..n {
        if row == rows {
            free = free.or(Some(col));
            break;
        }
        let best = (row..rows).max_by(|&x, &y| a[x][col].abs().total_cmp(&a[y][col].abs())).expect("rows remain");
        if a[best][col].abs() <= PIVOT_EPSILON {
            free = free.or(Some(col));
            continue;
        }
        a.swap(row, best);
        let scale = a[row][col];
        for v in &mut a[row] {
            *v /= scale;
        }
        let pivot_row = a[row].clone();
        for (other, values) in a.iter_mut().enumerate() {
            let factor = values[col];
            if other != row && factor != 0.0 {
                for (v, p) in values.iter_mut().zip(&pivot_row) {
                    *v -= factor * p;
                }
            }
        }
        pivot_of_row.push(col);
        row += 1;
    }
    let free = free.expect("more columns than rows leave a free column");
    let mut z = vec![0.0; n];
    z[free] = 1.0;
    for (r, &col) in pivot_of_row.iter().enumerate() {
        z[col] = -a[r][free];
    }
    z
}

/// A choice for one service in an exact completion: the model and the
/// instances of a mix, and an identifier the caller maps back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Candidate {
    /// Fleet index of the GPU model.
    pub model: usize,
    /// Index of the mix in the service's options on that model.
    pub mix: usize,
    /// Its instances.
    pub counts: SizeCounts,
}

/// Search nodes between two looks at the clock in an exact completion.
const CLOCK_NODES: u64 = 1_024;

/// What [`complete_exactly`] found.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Completion {
    /// The candidate index per open service and the cost, if a choice
    /// within the limits beats the cost asked to beat.
    pub best: Option<(Vec<usize>, f64)>,
    /// `true` when every choice was considered (neither the node budget nor
    /// the deadline cut the search short).
    pub exhausted: bool,
}

/// For each `open` service (its candidates), one candidate such that the
/// instances of all, with `fixed` (per model), cost least within the
/// fleet's limits, if that is below `below`; searching at most `nodes`
/// nodes and not past `deadline`.
pub(crate) fn complete_exactly(
    models: &[FleetModel],
    fixed: &[SizeCounts],
    open: &[&[Candidate]],
    below: f64,
    nodes: u64,
    deadline: Option<Instant>,
) -> Completion {
    let mut order: Vec<usize> = (0..open.len()).collect();
    order.sort_by_key(|&i| open[i].len());
    let mut search = CompletionSearch {
        models,
        open,
        order: &order,
        best: below,
        best_choice: None,
        current: vec![0; open.len()],
        nodes_left: nodes,
        deadline,
    };
    search.descend(0, fixed.to_vec());
    Completion { best: search.best_choice.map(|choice| (choice, search.best)), exhausted: search.nodes_left > 0 }
}

/// The branch and bound of [`complete_exactly`].
struct CompletionSearch<'a> {
    models: &'a [FleetModel],
    open: &'a [&'a [Candidate]],
    order: &'a [usize],
    best: f64,
    best_choice: Option<Vec<usize>>,
    current: Vec<usize>,
    nodes_left: u64,
    deadline: Option<Instant>,
}

impl CompletionSearch<'_> {
    fn descend(&mut self, depth: usize, counts: Vec<SizeCounts>) {
        if self.nodes_left == 0 {
            return;
        }
        self.nodes_left -= 1;
        if self.nodes_left.is_multiple_of(CLOCK_NODES) && self.deadline.is_some_and(|d| Instant::now() >= d) {
            self.nodes_left = 0;
            return;
        }
        // Packing more never needs fewer GPUs: the cost so far bounds all
        // completions.
        let Some(cost) = packed_cost(self.models, &counts) else { return };
        if cost >= self.best - 1e-9 * self.best.abs().max(1.0) {
            return;
        }
        let Some(&service) = self.order.get(depth) else {
            self.best = cost;
            self.best_choice = Some(self.current.clone());
            return;
        };
        for (index, candidate) in self.open[service].iter().enumerate() {
            let mut next = counts.clone();
            next[candidate.model] = next[candidate.model].plus(&candidate.counts);
            self.current[service] = index;
            self.descend(depth + 1, next);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::{GpuModel, GpuOffer, Packer};

    fn a100() -> (PriceSpace, Vec<FleetModel>) {
        let space = PriceSpace::new(&[(GpuModel::A100_80GB, 1.0, None)]);
        let model = FleetModel {
            offer: GpuOffer::plain(GpuModel::A100_80GB),
            cost: 1.0,
            packer: Packer::new(GpuModel::A100_80GB),
            slices: 7,
        };
        (space, vec![model])
    }

    #[test]
    fn purification_leaves_at_most_one_split_service_per_price() {
        let (space, _) = a100();
        let options = [SizeCounts::from_sizes([2]), SizeCounts::from_sizes([1, 1]), SizeCounts::from_sizes([3])];
        let mut rng = tessera_core::rng::SplitMix64::new(3);
        let mut shares: Vec<Share<usize>> = (0..60)
            .map(|_| {
                let a = rng.uniform(0.1, 0.9);
                let b = rng.uniform(0.0, 1.0 - a);
                vec![(0, a), (1, b), (2, 1.0 - a - b)]
            })
            .collect();
        let total = |shares: &[Share<usize>]| {
            let mut sum = vec![0.0; space.dims()];
            for share in shares {
                for &(c, w) in share {
                    space.add_counts(&mut sum, 0, &options[c], w);
                }
            }
            sum
        };
        let before = total(&shares);
        purify(&space, &mut shares, |_, c| (0, options[c]));
        let after = total(&shares);
        let split = shares.iter().filter(|s| s.len() > 1).count();
        assert!(split <= space.dims(), "{split} split");
        for (a, b) in before.iter().zip(&after) {
            assert!((a - b).abs() < 1e-6, "{before:?} → {after:?}");
        }
        for share in &shares {
            assert!((share.iter().map(|(_, w)| w).sum::<f64>() - 1.0).abs() < 1e-9);
            assert!(share.iter().all(|&(_, w)| w > 0.0));
        }
    }

    #[test]
    fn exact_completion_finds_the_packing_that_fits() {
        // Fixed: a 4g. Open: one service with 3g or 1g+1g, another with 2g
        // or 1g. Only 4g+1g+1g+1g fits one GPU (4g+3g fills the compute,
        // 4g+2g+1g+1g needs eight slices).
        let (_, models) = a100();
        let c = |mix, sizes: &[u8]| Candidate { model: 0, mix, counts: SizeCounts::from_sizes(sizes.iter().copied()) };
        let first = [c(0, &[3]), c(1, &[1, 1])];
        let second = [c(0, &[2]), c(1, &[1])];
        let fixed = [SizeCounts::from_sizes([4])];
        let found = complete_exactly(&models, &fixed, &[&first, &second], f64::INFINITY, 1_000, None);
        assert!(found.exhausted);
        let (choice, cost) = found.best.unwrap();
        assert_eq!(cost, 1.0);
        assert_eq!(choice, vec![1, 1]);
        assert_eq!(
            complete_exactly(&models, &fixed, &[&first, &second], 1.0, 1_000, None).best,
            None,
            "nothing beats 1"
        );
    }
}
