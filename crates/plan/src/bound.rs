//! The linear-programming bound on GPUs (or cost), solved to optimality.
//!
//! Give each instance size `g` of each GPU model `m` a price `π_mg ≥ 0`
//! such that every maximal MIG layout `L` of `m` costs at most one GPU of
//! it: `Σ_g π_mg · L_g ≤ 1`. Any plan then costs at least the total price
//! of its instances (each GPU at its model's cost per GPU), so at least
//!
//! ```text
//! f(π) = Σ_services min over models m and covers x on m of cost_m · π_m · x
//! ```
//!
//! where a cover is a count of segments per size reaching the service's
//! rate (see [`crate::cover`]). A model with a count limit `n_m` may charge
//! more, `1 + ν_m` per layout, if the bound pays `n_m · cost_m · ν_m` for
//! it (a plan has at most `n_m` such GPUs): the bound is `f(π)` less that
//! penalty, with the least `ν_m` the prices allow. It is concave and
//! piecewise linear, and its maximum is the optimum of the
//! linear-programming relaxation of planning (LP duality: the relaxation
//! chooses a convex combination of covers per service and fractional GPUs
//! per layout, within the limits).
//!
//! [`solve`] maximizes `f` with Kelley's cutting planes: every evaluation of
//! `f` at prices `π̂` also yields the aggregate `A` of the covers chosen
//! there, and `f(π) ≤ Σ_d cost_d A_d π_d` for all `π`; the *master* problem
//! maximizes the least of these planes over the price region (a small
//! linear program over one variable per price, [`crate::lp`]). Queries are
//! smoothed toward the best prices so far (in–out stabilization), and the
//! method stops when the master's value — an upper bound on the LP optimum
//! — meets the best evaluation. The master's dual is the relaxation's
//! primal: weights on the evaluated cover choices, which the rounding of
//! [`crate::round`] turns into a plan.
//!
//! Only evaluations prove anything: every query is first scaled into the
//! price region, and [`LpBound::value`] is `f` at the best query, exact up
//! to floating-point rounding, whatever the master's precision.

use std::time::Instant;

use tessera_core::{GpuModel, Lattice, SizeCounts};

use crate::lp::maximize;

/// Relative tolerance when rounding the bound up.
const ROUNDING_TOLERANCE: f64 = 1e-9;

/// The method stops when the master's value is within this (relative) of
/// the best evaluation.
const CONVERGENCE: f64 = 1e-9;

/// Most evaluations of one solve.
const MAX_ROUNDS: usize = 400;

/// Cuts kept in the master; beyond this, cuts without weight are dropped.
const MAX_CUTS: usize = 150;

/// How far a query moves from the best prices toward the master's.
const STEP: f64 = 0.5;

/// Weights below this in the master's dual count as zero.
const WEIGHT_EPSILON: f64 = 1e-12;

/// Highest price (in GPUs) of one instance on a model with a count limit,
/// whose prices the layouts alone do not bound. Capping prices only lowers
/// the bound, so any cap is safe; this one is far above any that matters.
const LIMITED_PRICE_CAP: f64 = 1_000.0;

/// The prices of one GPU model.
#[derive(Debug, Clone)]
struct ModelPrices {
    /// Index of its first price.
    offset: usize,
    /// Its sizes, ascending; price `offset + i` is for `sizes[i]`.
    sizes: Vec<u8>,
    /// Maximal layouts as size multisets.
    layouts: Vec<SizeCounts>,
    /// Cost per GPU.
    cost: f64,
    /// Most GPUs of it a plan may use.
    limit: Option<u64>,
    /// Compute slices per GPU.
    slices: u8,
}

impl ModelPrices {
    /// The dearest maximal layout at `prices`, in GPUs.
    fn dearest_layout(&self, prices: &[f64]) -> f64 {
        self.layouts
            .iter()
            .map(|layout| {
                self.sizes.iter().enumerate().map(|(i, &g)| prices[self.offset + i] * f64::from(layout.count(g))).sum()
            })
            .fold(0.0, f64::max)
    }
}

/// The price variables of a fleet: one per (GPU model, instance size), each
/// model's prices in GPUs of that model.
#[derive(Debug, Clone)]
pub(crate) struct PriceSpace {
    models: Vec<ModelPrices>,
    dims: usize,
}

impl PriceSpace {
    /// The space of `fleet`: (GPU model, cost per GPU, most GPUs) per
    /// fleet model.
    pub(crate) fn new(fleet: &[(GpuModel, f64, Option<u64>)]) -> Self {
        let mut offset = 0;
        let models = fleet
            .iter()
            .map(|&(model, cost, limit)| {
                let spec = model.spec();
                let sizes: Vec<u8> = spec.sizes().collect();
                let prices = ModelPrices {
                    offset,
                    layouts: Lattice::new(model).maximal_size_sets(),
                    cost,
                    limit,
                    slices: spec.compute_slices,
                    sizes,
                };
                offset += prices.sizes.len();
                prices
            })
            .collect();
        PriceSpace { models, dims: offset }
    }

    /// Number of prices.
    pub(crate) fn dims(&self) -> usize {
        self.dims
    }

    /// Number of GPU models.
    pub(crate) fn models(&self) -> usize {
        self.models.len()
    }

    /// The (fleet model, instance size) of each price, in order.
    pub(crate) fn labels(&self) -> Vec<(usize, u8)> {
        self.models.iter().enumerate().flat_map(|(m, prices)| prices.sizes.iter().map(move |&g| (m, g))).collect()
    }

    /// The cost of `counts` on `model` at `prices`.
    pub(crate) fn price_of(&self, prices: &[f64], model: usize, counts: &SizeCounts) -> f64 {
        let m = &self.models[model];
        let gpus: f64 =
            m.sizes.iter().enumerate().map(|(i, &g)| prices[m.offset + i] * f64::from(counts.count(g))).sum();
        m.cost * gpus
    }

    /// Adds `weight × counts` on `model` to a per-price vector.
    pub(crate) fn add_counts(&self, target: &mut [f64], model: usize, counts: &SizeCounts, weight: f64) {
        let m = &self.models[model];
        for (i, &g) in m.sizes.iter().enumerate() {
            target[m.offset + i] += weight * f64::from(counts.count(g));
        }
    }

    /// The cost per GPU of the model that price `dim` belongs to.
    fn cost_of_dim(&self, dim: usize) -> f64 {
        self.models.iter().rev().find(|m| m.offset <= dim).map_or(1.0, |m| m.cost)
    }

    /// The compute prices `g / slices`: the plain compute bound.
    pub(crate) fn compute_prices(&self) -> Vec<f64> {
        let mut prices = vec![0.0; self.dims];
        for m in &self.models {
            for (i, &g) in m.sizes.iter().enumerate() {
                prices[m.offset + i] = f64::from(g) / f64::from(m.slices);
            }
        }
        prices
    }

    /// `prices` made feasible: negatives to zero; then each unlimited
    /// model's prices scaled down until no maximal layout costs more than
    /// one GPU, and each limited model's capped (its layouts may cost more,
    /// at a penalty).
    pub(crate) fn project(&self, prices: &[f64]) -> Vec<f64> {
        let mut projected: Vec<f64> = prices.iter().map(|p| p.max(0.0)).collect();
        for m in &self.models {
            let worst = m.dearest_layout(&projected);
            let block = &mut projected[m.offset..m.offset + m.sizes.len()];
            if m.limit.is_some() {
                for price in block {
                    *price = price.min(LIMITED_PRICE_CAP);
                }
            } else if worst > 1.0 {
                for price in block {
                    *price /= worst;
                }
            }
        }
        projected
    }

    /// `prices` with every model's (limited ones too) scaled down until no
    /// maximal layout costs more than one GPU: prices in GPUs.
    pub(crate) fn within_layouts(&self, prices: &[f64]) -> Vec<f64> {
        let mut scaled = self.project(prices);
        for m in &self.models {
            let worst = m.dearest_layout(&scaled);
            if worst > 1.0 {
                for price in &mut scaled[m.offset..m.offset + m.sizes.len()] {
                    *price /= worst;
                }
            }
        }
        scaled
    }

    /// What the limited models' layouts cost above one GPU at `prices`,
    /// times their limits and costs: the bound's penalty.
    pub(crate) fn penalty(&self, prices: &[f64]) -> f64 {
        self.models
            .iter()
            .filter_map(|m| m.limit.map(|limit| limit as f64 * m.cost * (m.dearest_layout(prices) - 1.0).max(0.0)))
            .sum()
    }

    /// The master problem: its columns are the prices, one excess `ν` per
    /// limited model, then the bound per service `θ`. Returns the objective
    /// (`θ` less the limits' penalty, scaled by `scale`) and the rows
    /// (with their bounds) that do not depend on the cuts: per model and
    /// maximal layout, its price (less the model's excess) at most one;
    /// per price of a limited model, at most the cap.
    fn master_frame(&self, scale: f64) -> (Vec<f64>, Vec<(Vec<f64>, f64)>) {
        let limited: Vec<usize> = (0..self.models.len()).filter(|&m| self.models[m].limit.is_some()).collect();
        let width = self.dims + limited.len() + 1;
        let mut objective = vec![0.0; width];
        objective[width - 1] = 1.0;
        let mut rows = Vec::new();
        for (m, prices) in self.models.iter().enumerate() {
            let excess = limited.iter().position(|&l| l == m).map(|i| self.dims + i);
            if let (Some(column), Some(limit)) = (excess, prices.limit) {
                objective[column] = -scale * limit as f64 * prices.cost;
            }
            for layout in &prices.layouts {
                let mut row = vec![0.0; width];
                for (i, &g) in prices.sizes.iter().enumerate() {
                    row[prices.offset + i] = f64::from(layout.count(g));
                }
                if let Some(column) = excess {
                    row[column] = -1.0;
                }
                rows.push((row, 1.0));
            }
            if excess.is_some() {
                for i in 0..prices.sizes.len() {
                    let mut row = vec![0.0; width];
                    row[prices.offset + i] = 1.0;
                    rows.push((row, LIMITED_PRICE_CAP));
                }
            }
        }
        (objective, rows)
    }
}

/// The pricing step: the cheapest way to serve every service at given
/// prices.
pub(crate) trait Pricing {
    /// Number of services priced.
    fn services(&self) -> usize;

    /// `f(prices)`: the sum over services of their cheapest cost. Sets
    /// `aggregate` (one entry per price) to the segments per (model, size)
    /// of the covers chosen, whose cost at any prices is at least what `f`
    /// is there.
    fn evaluate(&self, space: &PriceSpace, prices: &[f64], aggregate: &mut [f64]) -> f64;
}

/// What [`solve`] found.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LpBound {
    /// Prices in the price region with the best bound found.
    pub prices: Vec<f64>,
    /// `f(prices)`: a lower bound on every plan's GPUs (or cost).
    pub value: f64,
    /// No price vector gives more than this (the last master's value).
    pub upper: f64,
    /// The relaxation's solution: evaluated prices whose cover choices,
    /// with these weights (summing to one), make it up.
    pub support: Vec<(Vec<f64>, f64)>,
}

impl LpBound {
    /// `true` when the bound is the LP optimum (up to the tolerance).
    pub(crate) fn converged(&self) -> bool {
        self.upper - self.value <= CONVERGENCE * self.value.abs().max(1.0)
    }
}

/// One cutting plane: where it was evaluated and its row in the master.
struct Cut {
    prices: Vec<f64>,
    row: Vec<f64>,
}

/// Maximizes the bound over the price region (see the module docs), from
/// cuts at `starts` (or at the compute prices), until the LP optimum is
/// reached, `settled(best value, upper bound)` says more precision is of no
/// use, or `deadline` passes.
pub(crate) fn solve(
    space: &PriceSpace,
    pricing: &impl Pricing,
    starts: &[Vec<f64>],
    settled: &dyn Fn(f64, f64) -> bool,
    deadline: Option<Instant>,
) -> LpBound {
    let scale = 1.0 / pricing.services().max(1) as f64;
    let (objective, frame) = space.master_frame(scale);
    let width = objective.len();
    let mut cuts: Vec<Cut> = Vec::new();
    let mut aggregate = vec![0.0; space.dims];
    // The bound at `prices` (made feasible), and its cut, kept.
    let mut evaluate = |prices: Vec<f64>, cuts: &mut Vec<Cut>| -> (Vec<f64>, f64, Vec<f64>) {
        let value = pricing.evaluate(space, &prices, &mut aggregate) - space.penalty(&prices);
        let mut row = vec![0.0; width];
        for d in 0..space.dims {
            row[d] = -scale * space.cost_of_dim(d) * aggregate[d];
        }
        row[width - 1] = 1.0;
        cuts.push(Cut { prices: prices.clone(), row: row.clone() });
        (prices, value, row)
    };
    let compute = [space.compute_prices()];
    let starts = if starts.is_empty() { &compute[..] } else { starts };
    let (mut best, mut best_value) = (Vec::new(), f64::NEG_INFINITY);
    for start in starts {
        let (prices, value, _) = evaluate(space.project(start), &mut cuts);
        if value > best_value {
            (best, best_value) = (prices, value);
        }
    }
    let mut upper = f64::INFINITY;
    let mut support = vec![(best.clone(), 1.0)];
    for _ in 0..MAX_ROUNDS {
        let (rows, bounds): (Vec<Vec<f64>>, Vec<f64>) =
            cuts.iter().map(|c| (c.row.clone(), 0.0)).chain(frame.iter().cloned()).unzip();
        let Some(master) = maximize(&objective, &rows, &bounds) else { break };
        upper = upper.min(master.objective / scale);
        let weights = &master.duals[..cuts.len()];
        let total: f64 = weights.iter().sum();
        if total > 0.0 {
            support = cuts
                .iter()
                .zip(weights)
                .filter(|(_, &w)| w > WEIGHT_EPSILON)
                .map(|(c, &w)| (c.prices.clone(), w / total))
                .collect();
        }
        let done = upper - best_value <= CONVERGENCE * best_value.abs().max(1.0);
        if done || settled(best_value, upper) || deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        if cuts.len() > MAX_CUTS {
            let mut index = 0;
            cuts.retain(|_| {
                index += 1;
                weights[index - 1] > WEIGHT_EPSILON
            });
        }
        let target = &master.values[..space.dims];
        let query: Vec<f64> = best.iter().zip(target).map(|(b, t)| b + STEP * (t - b)).collect();
        let (query, value, row) = evaluate(space.project(&query), &mut cuts);
        if value > best_value {
            (best, best_value) = (query, value);
        }
        // A query whose cut leaves the master's point in place: evaluate the
        // point itself (a plain Kelley step), which cuts it off.
        let at_target: f64 = row.iter().zip(&master.values).map(|(a, x)| a * x).sum();
        if at_target > -CONVERGENCE * master.objective.abs().max(scale) {
            let (query, value, _) = evaluate(space.project(target), &mut cuts);
            if value > best_value {
                (best, best_value) = (query, value);
            }
        }
    }
    LpBound { prices: best, value: best_value, upper: upper.max(best_value), support }
}

/// Most combinations [`CostGrid::round_up`] tries.
const GRID_COMBINATIONS: u64 = 1_000_000;

/// The costs a plan can have: per GPU model, its cost per GPU times a whole
/// number of GPUs within its limit, summed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CostGrid {
    /// (cost per GPU, most GPUs), dearest first.
    models: Vec<(f64, Option<u64>)>,
}

impl CostGrid {
    /// The grid of a fleet: (cost per GPU, most GPUs) per model.
    pub(crate) fn new(models: &[(f64, Option<u64>)]) -> Self {
        let mut models = models.to_vec();
        models.sort_by(|a, b| b.0.total_cmp(&a.0));
        CostGrid { models }
    }

    /// The least cost on the grid at or above `bound` (forgiving
    /// floating-point noise): every plan that costs at least `bound` costs
    /// at least this. `bound` itself where the grid is too fine to search.
    pub(crate) fn round_up(&self, bound: f64) -> f64 {
        let floor = bound * (1.0 - ROUNDING_TOLERANCE);
        let Some((&(cheapest, _), dearer)) = self.models.split_last() else { return bound };
        let counts: Vec<u64> = dearer
            .iter()
            .map(|&(cost, limit)| limit.unwrap_or(u64::MAX).min((floor / cost).ceil().max(0.0) as u64))
            .collect();
        if counts.iter().try_fold(1u64, |product, &n| product.checked_mul(n + 1)).is_none_or(|p| p > GRID_COMBINATIONS)
        {
            return bound;
        }
        let mut best = f64::INFINITY;
        let mut current = vec![0u64; dearer.len()];
        loop {
            let partial: f64 = current.iter().zip(dearer).map(|(&n, &(cost, _))| n as f64 * cost).sum();
            // The cheapest model covers the rest; its limit is not checked
            // (a bound may exceed what limits allow).
            let rest = ((floor - partial) / cheapest).ceil().max(0.0);
            best = best.min(partial + rest * cheapest);
            // The next combination, odometer style.
            let Some(digit) = (0..current.len()).find(|&i| current[i] < counts[i]) else { break };
            current[digit] += 1;
            current[..digit].fill(0);
        }
        best
    }
}

/// Rounds a fractional GPU bound up, forgiving floating-point noise.
pub(crate) fn round_up(gpus: f64) -> u64 {
    (gpus * (1.0 - ROUNDING_TOLERANCE)).ceil().max(0.0) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cover::CoverPricing;

    #[test]
    fn projected_prices_keep_every_layout_within_one_gpu() {
        let space = PriceSpace::new(&[(GpuModel::A100_80GB, 1.0, None), (GpuModel::A30_24GB, 2.0, None)]);
        let projected = space.project(&vec![0.9; space.dims()]);
        for m in &space.models {
            assert!(m.dearest_layout(&projected) <= 1.0 + 1e-12);
        }
        assert_eq!(space.penalty(&projected), 0.0);
        let compute = space.compute_prices();
        assert_eq!(space.project(&compute), compute, "the compute prices are feasible");
    }

    #[test]
    fn lone_three_slice_instances_cost_half_a_gpu() {
        // Services that can only run a 3g, one each: two 3g share a GPU, so
        // the LP optimum is half a GPU each, and three need two GPUs.
        let space = PriceSpace::new(&[(GpuModel::A100_80GB, 1.0, None)]);
        let pricing = CoverPricing::new((0..3).map(|_| (10.0, vec![(0, vec![(3, 10.0)])])).collect());
        let bound = solve(&space, &pricing, &[], &|_, _| false, None);
        assert!(bound.converged(), "{bound:?}");
        assert!((bound.value - 1.5).abs() < 1e-9, "{bound:?}");
        assert_eq!(round_up(bound.value), 2);
        let weight: f64 = bound.support.iter().map(|(_, w)| w).sum();
        assert!((weight - 1.0).abs() < 1e-9);
    }

    #[test]
    fn the_bound_charges_what_packing_wastes() {
        // Four 3g-only services and a 1g-only one: 13 compute slices, but
        // two 3g fill a GPU's memory. Best prices: 3g ½ (3g+3g), 1g ⅛
        // (3g+1g+1g+1g+1g), so 4 × ½ + ⅛ = 2.125 — also the relaxation's
        // value (3g+3g × 1.875, 3g+4×1g × 0.25).
        let space = PriceSpace::new(&[(GpuModel::A100_80GB, 1.0, None)]);
        let mut services = vec![(10.0, vec![(0, vec![(3, 10.0)])]); 4];
        services.push((10.0, vec![(0, vec![(1, 10.0)])]));
        let pricing = CoverPricing::new(services);
        let compute = pricing.evaluate(&space, &space.compute_prices(), &mut vec![0.0; space.dims()]);
        assert!((compute - 13.0 / 7.0).abs() < 1e-9, "{compute}");
        let bound = solve(&space, &pricing, &[], &|_, _| false, None);
        assert!(bound.converged() && (bound.value - 2.125).abs() < 1e-9, "{bound:?}");
    }

    #[test]
    fn the_cost_grid_rounds_up_to_a_cost_a_plan_can_have() {
        // 1 per A100, 1.6 per H100 (at most one): 18.6 = 17 + 1.6 is on
        // the grid, 18.62 rounds up to 19.
        let grid = CostGrid::new(&[(1.0, None), (1.6, Some(1))]);
        assert!((grid.round_up(18.6) - 18.6).abs() < 1e-9);
        assert!((grid.round_up(18.62) - 19.0).abs() < 1e-9);
        assert!((CostGrid::new(&[(1.0, None)]).round_up(12.000000000001) - 12.0).abs() < 1e-12);
        assert!((CostGrid::new(&[(1.0, None), (1.6, None)]).round_up(3.1) - 3.2).abs() < 1e-9);
    }

    #[test]
    fn rounding_forgives_noise_only() {
        assert_eq!(round_up(12.000000000001), 12);
        assert_eq!(round_up(12.01), 13);
    }
}
