//! Gradient-boosted regression trees with squared loss, written for tiny
//! tabular data (a few hundred rows, a few dozen features).
//!
//! Each tree is grown by exact greedy search over every feature's sorted
//! distinct values; trees are stored as flat node arrays so prediction is a
//! loop with no allocation. A feature may be constrained to move the
//! prediction one way only ([`Monotone`]): a split on it is kept only when
//! its children's values are ordered that way, and the children's subtrees
//! are bounded by the midpoint of those values, so every tree, and hence
//! their sum, is monotone in that feature. Fitting is bit-for-bit deterministic for a given
//! input and [`GbmParams`] (row subsampling uses [`SplitMix64`] seeded from
//! `seed` and the tree's index).

use std::cmp::Ordering;

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use tessera_core::rng::SplitMix64;

/// Hyper-parameters of `Gbm::fit`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GbmParams {
    /// Number of boosting rounds (trees); 0 gives a model that predicts the
    /// mean of the targets.
    pub trees: usize,
    /// Maximum depth of each tree (0 = a single leaf per tree).
    pub max_depth: usize,
    /// Shrinkage applied to every tree's output.
    pub learning_rate: f64,
    /// Minimum number of (sampled) rows in every leaf; 0 is treated as 1.
    pub min_samples_leaf: usize,
    /// Fraction of rows drawn, without replacement, for each tree; values
    /// `>= 1.0` (or NaN) use all rows, smaller ones at least one row.
    pub subsample: f64,
    /// Leaf-value shrinkage: a leaf's value is `sum(residual) / (count + l2)`;
    /// negative values are treated as 0.
    pub l2: f64,
    /// Seed of the row subsampling.
    pub seed: u64,
}

impl Default for GbmParams {
    /// 200 trees of depth 3, learning rate 0.05, at least 3 rows per leaf,
    /// no subsampling, `l2` 1, seed 0.
    fn default() -> Self {
        GbmParams {
            trees: 200,
            max_depth: 3,
            learning_rate: 0.05,
            min_samples_leaf: 3,
            subsample: 1.0,
            l2: 1.0,
            seed: 0,
        }
    }
}

/// How the prediction may move as one feature grows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Monotone {
    /// No constraint.
    Free,
    /// Never decreases as the feature grows.
    Increasing,
    /// Never increases as the feature grows.
    Decreasing,
}

/// One node of a flat tree; children always come after their parent.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
enum Node {
    /// Rows with `row[feature] <= threshold` go to `left`, others (NaN
    /// included) to `right`.
    Split {
        feature: usize,
        threshold: f64,
        left: usize,
        right: usize,
        /// Reduction of the residuals' sum of squares made by this split.
        gain: f64,
    },
    /// Output of the tree (before the learning rate) and the number of
    /// training rows that reached it.
    Leaf { value: f64, rows: usize },
}

/// A regression tree as a flat node array; the root is node 0.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Tree {
    nodes: Vec<Node>,
}

impl Tree {
    /// Splits on the longest path from `node` down.
    fn depth(&self, node: usize) -> usize {
        match self.nodes[node] {
            Node::Split { left, right, .. } => 1 + self.depth(left).max(self.depth(right)),
            Node::Leaf { .. } => 0,
        }
    }

    /// The tree's raw output (before the learning rate) for `row`.
    fn predict(&self, row: &[f64]) -> f64 {
        let mut i = 0;
        loop {
            match self.nodes[i] {
                Node::Split { feature, threshold, left, right, .. } => {
                    i = if row[feature] <= threshold { left } else { right }
                }
                Node::Leaf { value, .. } => return value,
            }
        }
    }
}

/// A fitted gradient-boosted regression-tree model (squared loss).
///
/// `predict(row) = base + learning_rate * sum(tree(row))`, with `base` the
/// mean of the training targets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gbm {
    base: f64,
    learning_rate: f64,
    features: usize,
    trees: Vec<Tree>,
    /// The trees laid out for branch-free prediction, built on first use.
    #[serde(skip)]
    complete: OnceLock<CompleteForest>,
}

/// Every tree re-laid out as a complete binary tree of one depth: internal
/// node `i` has children `2i + 1` (value ≤ threshold) and `2i + 2`; a leaf
/// above the bottom becomes a split that always goes left, with the leaf's
/// value copied to every bottom leaf below it. Prediction then walks
/// `depth` levels per tree without branches.
#[derive(Debug, Clone, PartialEq)]
struct CompleteForest {
    depth: usize,
    features: Vec<usize>,
    thresholds: Vec<f64>,
    leaves: Vec<f64>,
}

impl CompleteForest {
    fn new(trees: &[Tree]) -> Self {
        let depth = trees.iter().map(|t| t.depth(0)).max().unwrap_or(0);
        let (internal, bottom) = ((1usize << depth) - 1, 1usize << depth);
        let mut forest = CompleteForest {
            depth,
            features: vec![0; trees.len() * internal],
            thresholds: vec![f64::INFINITY; trees.len() * internal],
            leaves: vec![0.0; trees.len() * bottom],
        };
        for (t, tree) in trees.iter().enumerate() {
            forest.place(tree, t, 0, 0, 0);
        }
        forest
    }

    /// Copies `tree`'s node `node` to complete position `slot` at `level`.
    fn place(&mut self, tree: &Tree, t: usize, node: usize, slot: usize, level: usize) {
        let (internal, bottom) = ((1usize << self.depth) - 1, 1usize << self.depth);
        if level == self.depth {
            let Node::Leaf { value, .. } = tree.nodes[node] else { unreachable!("depth counts every split") };
            self.leaves[t * bottom + slot - internal] = value;
            return;
        }
        match tree.nodes[node] {
            Node::Split { feature, threshold, left, right, .. } => {
                self.features[t * internal + slot] = feature;
                self.thresholds[t * internal + slot] = threshold;
                self.place(tree, t, left, 2 * slot + 1, level + 1);
                self.place(tree, t, right, 2 * slot + 2, level + 1);
            }
            Node::Leaf { .. } => {
                // Feature 0 against +∞ always goes left, except for NaN,
                // so both subtrees carry the leaf.
                self.place(tree, t, node, 2 * slot + 1, level + 1);
                self.place(tree, t, node, 2 * slot + 2, level + 1);
            }
        }
    }

    /// Σ of every tree's output for each of `rows`, walking each tree for
    /// all rows at once (independent walks overlap in the pipeline).
    fn sums<const N: usize>(&self, rows: [&[f64]; N]) -> [f64; N] {
        let (internal, bottom) = ((1usize << self.depth) - 1, 1usize << self.depth);
        let nodes = self.features.chunks_exact(internal.max(1)).zip(self.thresholds.chunks_exact(internal.max(1)));
        let mut totals = [0.0; N];
        for ((features, thresholds), leaves) in nodes.zip(self.leaves.chunks_exact(bottom)) {
            let mut slots = [0usize; N];
            for _ in 0..self.depth {
                for (slot, row) in slots.iter_mut().zip(&rows) {
                    // NaN compares false, so it goes right.
                    let left = row[features[*slot]] <= thresholds[*slot];
                    *slot = 2 * *slot + 2 - usize::from(left);
                }
            }
            for (total, slot) in totals.iter_mut().zip(slots) {
                *total += leaves[slot - internal];
            }
        }
        totals
    }
}

impl Gbm {
    /// Fits to rows `x` (all of equal length) and targets `y`.
    ///
    /// Features should be finite; a NaN is never split on during training
    /// and always goes right at prediction.
    ///
    /// # Panics
    ///
    /// Only on programmer error: if `x` is empty, if its rows differ in
    /// length, or if `y.len() != x.len()`.
    #[cfg(test)]
    pub fn fit(x: &[Vec<f64>], y: &[f64], params: &GbmParams) -> Gbm {
        Gbm::fit_monotone(x, y, params, &[])
    }

    /// Fits like [`Gbm::fit`], keeping the prediction monotone in feature
    /// `f` as `monotone[f]` says (features beyond `monotone` are free).
    pub fn fit_monotone(x: &[Vec<f64>], y: &[f64], params: &GbmParams, monotone: &[Monotone]) -> Gbm {
        assert!(!x.is_empty(), "Gbm::fit: no training rows");
        assert_eq!(x.len(), y.len(), "Gbm::fit: x and y differ in length");
        let features = x[0].len();
        assert!(x.iter().all(|row| row.len() == features), "Gbm::fit: rows differ in length");
        let n = x.len();
        let base = y.iter().sum::<f64>() / n as f64;
        let mut residual: Vec<f64> = y.iter().map(|&v| v - base).collect();

        // Every feature's row order, sorted once (stable, NaN last).
        let sorted: Vec<Vec<usize>> = (0..features)
            .map(|f| {
                let mut idx: Vec<usize> = (0..n).collect();
                idx.sort_by(|&a, &b| cmp_nan_last(x[a][f], x[b][f]));
                idx
            })
            .collect();

        let sample_size = if params.subsample.is_nan() || params.subsample >= 1.0 {
            n
        } else {
            ((params.subsample * n as f64).round() as usize).clamp(1, n)
        };
        // Feature-major copies: a split scans one feature over many rows.
        let columns: Vec<Vec<f64>> = (0..features).map(|f| x.iter().map(|row| row[f]).collect()).collect();
        let grower = Grower {
            columns: &columns,
            max_depth: params.max_depth,
            min_leaf: params.min_samples_leaf.max(1),
            l2: params.l2.max(0.0),
            monotone,
        };
        let mut in_sample = vec![true; n];
        let mut trees = Vec::with_capacity(params.trees);
        for t in 0..params.trees {
            if sample_size < n {
                draw_sample(&mut in_sample, sample_size, params.seed, t);
            }
            let node_rows: Vec<Vec<usize>> = if sample_size < n {
                sorted.iter().map(|idx| idx.iter().copied().filter(|&i| in_sample[i]).collect()).collect()
            } else {
                sorted.clone()
            };
            let rows: Vec<usize> = (0..n).filter(|&i| in_sample[i]).collect();
            let mut nodes = Vec::new();
            grower.grow(&mut nodes, &residual, rows, node_rows, 0, (f64::NEG_INFINITY, f64::INFINITY));
            let tree = Tree { nodes };
            for (r, row) in residual.iter_mut().zip(x) {
                *r -= params.learning_rate * tree.predict(row);
            }
            trees.push(tree);
        }
        Gbm { base, learning_rate: params.learning_rate, features, trees, complete: OnceLock::new() }
    }

    /// The prediction for `row`, which must hold at least as many values as
    /// the training rows did (extra values are ignored).
    ///
    /// # Panics
    ///
    /// If `row` is shorter than the training rows and a tree splits on a
    /// missing feature.
    pub fn predict(&self, row: &[f64]) -> f64 {
        let [prediction] = self.predict_rows([row]);
        prediction
    }

    /// Predictions for `N` rows at once — faster than one by one.
    pub fn predict_rows<const N: usize>(&self, rows: [&[f64]; N]) -> [f64; N] {
        let sums = self.complete.get_or_init(|| CompleteForest::new(&self.trees)).sums(rows);
        sums.map(|sum| self.base + self.learning_rate * sum)
    }

    /// Total split gain per feature (for explanations), length = the number
    /// of features: the sum, over every split on that feature in every
    /// tree, of the reduction in the residuals' sum of squares it made.
    pub fn feature_gains(&self) -> Vec<f64> {
        let mut gains = vec![0.0; self.features];
        for node in self.trees.iter().flat_map(|tree| &tree.nodes) {
            if let Node::Split { feature, gain, .. } = *node {
                gains[feature] += gain;
            }
        }
        gains
    }
}

/// Orders floats ascending with every NaN after every number.
fn cmp_nan_last(a: f64, b: f64) -> Ordering {
    a.partial_cmp(&b).unwrap_or_else(|| a.is_nan().cmp(&b.is_nan()))
}

/// Marks `size` rows of `in_sample`, drawn without replacement by a partial
/// Fisher–Yates shuffle whose generator depends only on `seed` and `tree`.
fn draw_sample(in_sample: &mut [bool], size: usize, seed: u64, tree: usize) {
    let mixed = seed ^ (tree as u64).wrapping_mul(0xD1B5_4A32_D192_ED03);
    let mut rng = SplitMix64::new(SplitMix64::new(mixed).next_u64());
    let n = in_sample.len();
    let mut order: Vec<usize> = (0..n).collect();
    in_sample.fill(false);
    for i in 0..size {
        let j = i + rng.below(n - i);
        order.swap(i, j);
        in_sample[order[i]] = true;
    }
}

/// The best split found at a node.
struct Split {
    feature: usize,
    threshold: f64,
    gain: f64,
    /// The children's (bounded) leaf values.
    values: (f64, f64),
}

/// Grows one tree on the current residuals.
struct Grower<'a> {
    /// The training rows' features, one vector per feature.
    columns: &'a [Vec<f64>],
    max_depth: usize,
    min_leaf: usize,
    l2: f64,
    monotone: &'a [Monotone],
}

impl Grower<'_> {
    /// A leaf's value over `count` rows whose residuals sum to `sum`, within
    /// `bounds`.
    fn leaf_value(&self, sum: f64, count: usize, bounds: (f64, f64)) -> f64 {
        (sum / (count as f64 + self.l2)).clamp(bounds.0, bounds.1)
    }

    fn monotone(&self, feature: usize) -> Monotone {
        self.monotone.get(feature).copied().unwrap_or(Monotone::Free)
    }

    /// Appends the subtree over `rows` (ascending row indices) to `nodes`
    /// and returns its root's index; `sorted[f]` holds the same rows ordered
    /// by feature `f`; every leaf value lies within `bounds`.
    fn grow(
        &self,
        nodes: &mut Vec<Node>,
        residual: &[f64],
        rows: Vec<usize>,
        sorted: Vec<Vec<usize>>,
        depth: usize,
        bounds: (f64, f64),
    ) -> usize {
        let sum: f64 = rows.iter().map(|&i| residual[i]).sum();
        let here = nodes.len();
        let split = if depth < self.max_depth && rows.len() >= 2 * self.min_leaf {
            self.best_split(residual, &rows, &sorted, sum, bounds)
        } else {
            None
        };
        let Some(split) = split else {
            nodes.push(Node::Leaf { value: self.leaf_value(sum, rows.len(), bounds), rows: rows.len() });
            return here;
        };
        // A monotone split bounds each side by the midpoint of their values.
        let middle = 0.5 * (split.values.0 + split.values.1);
        let (left_bounds, right_bounds) = match self.monotone(split.feature) {
            Monotone::Free => (bounds, bounds),
            Monotone::Increasing => ((bounds.0, middle), (middle, bounds.1)),
            Monotone::Decreasing => ((middle, bounds.1), (bounds.0, middle)),
        };
        let (f, t) = (split.feature, split.threshold);
        let column = &self.columns[f];
        let goes_left = |i: &usize| column[*i] <= t;
        let (left_rows, right_rows): (Vec<usize>, Vec<usize>) = rows.iter().copied().partition(goes_left);
        let (left_sorted, right_sorted): (Vec<Vec<usize>>, Vec<Vec<usize>>) =
            sorted.iter().map(|idx| idx.iter().copied().partition::<Vec<usize>, _>(goes_left)).unzip();
        // Placeholder, patched once the children's indices are known.
        nodes.push(Node::Leaf { value: 0.0, rows: 0 });
        let left = self.grow(nodes, residual, left_rows, left_sorted, depth + 1, left_bounds);
        let right = self.grow(nodes, residual, right_rows, right_sorted, depth + 1, right_bounds);
        nodes[here] = Node::Split { feature: f, threshold: t, left, right, gain: split.gain };
        here
    }

    /// The split with the largest reduction of the residuals' sum of
    /// squares, `sl²/nl + sr²/nr - s²/n`, over every feature and every
    /// midpoint between consecutive distinct values that leaves at least
    /// `min_leaf` rows on each side. Ties go to the first feature, then to
    /// the lowest threshold. `None` when no split gains more than `1e-12`
    /// times the node's sum of squared residuals (which absorbs rounding
    /// noise when the residuals are constant). On a monotone feature a split
    /// whose children's bounded values are ordered the wrong way is skipped.
    fn best_split(
        &self,
        residual: &[f64],
        rows: &[usize],
        sorted: &[Vec<usize>],
        sum: f64,
        bounds: (f64, f64),
    ) -> Option<Split> {
        let n = rows.len();
        let parent = sum * sum / n as f64;
        let sum_sq: f64 = rows.iter().map(|&i| residual[i] * residual[i]).sum();
        let mut best: Option<Split> = None;
        let mut best_gain = 1e-12 * sum_sq;
        for (f, idx) in sorted.iter().enumerate() {
            let monotone = self.monotone(f);
            let column = &self.columns[f];
            let mut left_sum = 0.0;
            for k in 0..n - 1 {
                left_sum += residual[idx[k]];
                let (nl, nr) = (k + 1, n - k - 1);
                if nr < self.min_leaf {
                    break;
                }
                if nl < self.min_leaf {
                    continue;
                }
                let (a, b) = (column[idx[k]], column[idx[k + 1]]);
                if a.partial_cmp(&b) != Some(Ordering::Less) {
                    continue;
                }
                let right_sum = sum - left_sum;
                let gain = left_sum * left_sum / nl as f64 + right_sum * right_sum / nr as f64 - parent;
                if gain <= best_gain {
                    continue;
                }
                let values = (self.leaf_value(left_sum, nl, bounds), self.leaf_value(right_sum, nr, bounds));
                let ordered = match monotone {
                    Monotone::Free => true,
                    Monotone::Increasing => values.0 <= values.1,
                    Monotone::Decreasing => values.0 >= values.1,
                };
                if ordered {
                    best_gain = gain;
                    best = Some(Split { feature: f, threshold: midpoint(a, b), gain, values });
                }
            }
        }
        best
    }
}

/// A threshold `t` with `a <= t < b` (the midpoint when representable).
fn midpoint(a: f64, b: f64) -> f64 {
    let t = a + (b - a) * 0.5;
    if t >= a && t < b {
        t
    } else {
        a
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_complete_layout_predicts_like_the_node_walk() {
        let mut rng = SplitMix64::new(5);
        let x: Vec<Vec<f64>> = (0..120).map(|_| (0..4).map(|_| rng.uniform(-1.0, 1.0)).collect()).collect();
        let y: Vec<f64> = x.iter().map(|r| if r[0] > 0.3 { r[1] * 2.0 } else { r[2] - r[3] }).collect();
        // Depth 4 with big leaves: many trees stop above the bottom level.
        let params = GbmParams { trees: 40, max_depth: 4, min_samples_leaf: 15, ..GbmParams::default() };
        let gbm = Gbm::fit(&x, &y, &params);
        for row in x.iter().chain([vec![f64::NAN, 0.0, 0.0, 0.0]].iter()) {
            let walked: f64 = gbm.trees.iter().map(|t| t.predict(row)).sum();
            let expected = gbm.base + gbm.learning_rate * walked;
            assert!((gbm.predict(row) - expected).abs() < 1e-12, "{row:?}");
        }
        let [first, second] = gbm.predict_rows([&x[0], &x[1]]);
        assert_eq!((first, second), (gbm.predict(&x[0]), gbm.predict(&x[1])));
    }

    use super::*;

    /// `n` rows of `d` features uniform in `[-1, 1)`.
    fn rows(n: usize, d: usize, seed: u64) -> Vec<Vec<f64>> {
        let mut rng = SplitMix64::new(seed);
        (0..n).map(|_| (0..d).map(|_| rng.uniform(-1.0, 1.0)).collect()).collect()
    }

    fn mse(model: &Gbm, x: &[Vec<f64>], y: &[f64]) -> f64 {
        x.iter().zip(y).map(|(row, &v)| (model.predict(row) - v).powi(2)).sum::<f64>() / y.len() as f64
    }

    fn variance(y: &[f64]) -> f64 {
        let mean = y.iter().sum::<f64>() / y.len() as f64;
        y.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / y.len() as f64
    }

    /// The noisy target `y = 3·[x2 > 0.2] + x0 + noise` over 6 features.
    fn noisy(n: usize, seed: u64) -> (Vec<Vec<f64>>, Vec<f64>) {
        let x = rows(n, 6, seed);
        let mut rng = SplitMix64::new(seed ^ 99);
        let y = x.iter().map(|r| 3.0 * f64::from(u8::from(r[2] > 0.2)) + r[0] + rng.uniform(-0.3, 0.3)).collect();
        (x, y)
    }

    #[test]
    fn fits_a_noiseless_step_function() {
        let x = rows(200, 5, 1);
        let y: Vec<f64> = x.iter().map(|r| if r[1] > 0.1 { 5.0 } else { -2.0 }).collect();
        let params = GbmParams { trees: 300, learning_rate: 0.1, ..GbmParams::default() };
        let model = Gbm::fit(&x, &y, &params);
        let err = mse(&model, &x, &y);
        assert!(err < 1e-3 * variance(&y), "mse {err}");
        // Off the training points, too, on either side of the step.
        assert!((model.predict(&[0.0, 0.9, 0.0, 0.0, 0.0]) - 5.0).abs() < 0.05);
        assert!((model.predict(&[0.0, -0.9, 0.0, 0.0, 0.0]) + 2.0).abs() < 0.05);
    }

    #[test]
    fn fits_an_interaction_better_than_the_mean() {
        let x = rows(300, 4, 2);
        let y: Vec<f64> = x.iter().map(|r| r[0] * r[1]).collect();
        let model = Gbm::fit(&x, &y, &GbmParams::default());
        let test_x = rows(300, 4, 3);
        let test_y: Vec<f64> = test_x.iter().map(|r| r[0] * r[1]).collect();
        assert!(mse(&model, &x, &y) < 0.3 * variance(&y));
        assert!(mse(&model, &test_x, &test_y) < 0.6 * variance(&test_y));
    }

    #[test]
    fn zero_trees_predict_the_mean() {
        let x = rows(10, 2, 4);
        let y: Vec<f64> = (0..10).map(f64::from).collect();
        let params = GbmParams { trees: 0, ..GbmParams::default() };
        let model = Gbm::fit(&x, &y, &params);
        assert_eq!(model.predict(&x[3]), 4.5);
        assert_eq!(model.feature_gains(), vec![0.0, 0.0]);
    }

    #[test]
    fn is_deterministic() {
        let (x, y) = noisy(150, 5);
        let params = GbmParams { subsample: 0.6, seed: 11, ..GbmParams::default() };
        let a = Gbm::fit(&x, &y, &params);
        let b = Gbm::fit(&x, &y, &params);
        assert_eq!(a, b);
        let probe = rows(50, 6, 6);
        for row in &probe {
            assert_eq!(a.predict(row).to_bits(), b.predict(row).to_bits());
        }
        let c = Gbm::fit(&x, &y, &GbmParams { seed: 12, ..params });
        assert!(probe.iter().any(|row| a.predict(row) != c.predict(row)));
        // Without subsampling the seed is irrelevant.
        let full = GbmParams { subsample: 1.0, ..params };
        assert_eq!(Gbm::fit(&x, &y, &full), Gbm::fit(&x, &y, &GbmParams { seed: 12, ..full }));
    }

    #[test]
    fn respects_min_samples_leaf() {
        let (x, y) = noisy(120, 7);
        for (min_leaf, subsample) in [(1, 1.0), (3, 1.0), (7, 0.5), (20, 0.8)] {
            let params =
                GbmParams { trees: 40, max_depth: 4, min_samples_leaf: min_leaf, subsample, ..GbmParams::default() };
            let model = Gbm::fit(&x, &y, &params);
            let sample = if subsample < 1.0 { (subsample * 120.0) as usize } else { 120 };
            for tree in &model.trees {
                let leaves: Vec<usize> = tree
                    .nodes
                    .iter()
                    .filter_map(|node| match *node {
                        Node::Leaf { rows, .. } => Some(rows),
                        Node::Split { .. } => None,
                    })
                    .collect();
                assert!(leaves.iter().all(|&r| r >= min_leaf), "{leaves:?}");
                assert_eq!(leaves.iter().sum::<usize>(), sample);
                // Children come after their parent, so predict terminates.
                for (i, node) in tree.nodes.iter().enumerate() {
                    if let Node::Split { left, right, .. } = *node {
                        assert!(left > i && right > i);
                    }
                }
            }
        }
    }

    #[test]
    fn respects_max_depth() {
        let (x, y) = noisy(100, 8);
        for depth in 0..4 {
            let params = GbmParams { trees: 5, max_depth: depth, min_samples_leaf: 1, ..GbmParams::default() };
            let model = Gbm::fit(&x, &y, &params);
            for tree in &model.trees {
                assert!(tree.nodes.len() < 1 << (depth + 1));
            }
        }
    }

    #[test]
    fn splits_at_midpoints_and_ties_go_to_the_first_feature() {
        // Features 0 and 1 are identical, so both give the same best gain.
        let x: Vec<Vec<f64>> = [1.0, 2.0, 3.0, 4.0].iter().map(|&v| vec![v, v]).collect();
        let y = [0.0, 0.0, 10.0, 10.0];
        let params = GbmParams {
            trees: 1,
            max_depth: 1,
            min_samples_leaf: 1,
            l2: 0.0,
            learning_rate: 1.0,
            ..GbmParams::default()
        };
        let model = Gbm::fit(&x, &y, &params);
        assert!(matches!(
            model.trees[0].nodes[0],
            Node::Split { feature: 0, threshold, .. } if threshold == 2.5
        ));
        assert_eq!(model.predict(&[2.5, 0.0]), 0.0);
        assert_eq!(model.predict(&[2.6, 0.0]), 10.0);
        assert_eq!(model.feature_gains(), vec![100.0, 0.0]);
    }

    #[test]
    fn constant_targets_give_no_splits() {
        let x = rows(30, 3, 9);
        let y = vec![0.7; 30];
        let model = Gbm::fit(&x, &y, &GbmParams::default());
        assert!(model.trees.iter().all(|tree| tree.nodes.len() == 1));
        assert_eq!(model.feature_gains(), vec![0.0; 3]);
    }

    #[test]
    fn serde_round_trip_keeps_predictions() {
        let (x, y) = noisy(100, 10);
        let params = GbmParams { subsample: 0.7, seed: 3, ..GbmParams::default() };
        let model = Gbm::fit(&x, &y, &params);
        let json = serde_json::to_string(&model).unwrap();
        let back: Gbm = serde_json::from_str(&json).unwrap();
        for row in &rows(100, 6, 11) {
            let (a, b) = (model.predict(row), back.predict(row));
            // serde_json without `float_roundtrip` may misparse the last bit.
            assert!((a - b).abs() <= 1e-12 * a.abs().max(1.0), "{a} vs {b}");
        }
        let params_json = serde_json::to_string(&params).unwrap();
        assert_eq!(serde_json::from_str::<GbmParams>(&params_json).unwrap(), params);
    }

    #[test]
    fn feature_gains_point_to_the_informative_feature() {
        let (x, y) = noisy(200, 12);
        let model = Gbm::fit(&x, &y, &GbmParams::default());
        let gains = model.feature_gains();
        assert_eq!(gains.len(), 6);
        assert!(gains.iter().all(|&g| g >= 0.0));
        let top = (0..6).max_by(|&a, &b| gains[a].total_cmp(&gains[b])).unwrap();
        assert_eq!(top, 2, "{gains:?}");
        // x0 matters too, more than any pure-noise feature.
        assert!([1, 3, 4, 5].iter().all(|&f| gains[0] > gains[f]), "{gains:?}");
    }

    #[test]
    fn monotone_constraints_hold_everywhere_and_cost_little_where_true() {
        // y rises with x0 but with a dip, falls with x1, and x2 is free.
        let x = rows(300, 3, 13);
        let y: Vec<f64> = x.iter().map(|r| r[0] + 0.4 * (6.0 * r[0]).sin() - r[1] + r[2] * r[2]).collect();
        let params = GbmParams { trees: 120, max_depth: 3, learning_rate: 0.1, ..GbmParams::default() };
        let monotone = [Monotone::Increasing, Monotone::Decreasing];
        let constrained = Gbm::fit_monotone(&x, &y, &params, &monotone);
        let free = Gbm::fit(&x, &y, &params);
        let grid: Vec<f64> = (0..=40).map(|i| -1.0 + 0.05 * f64::from(i)).collect();
        let mut free_violations = 0;
        for probe in rows(40, 3, 14) {
            for (feature, sign) in [(0, 1.0), (1, -1.0)] {
                let along = |model: &Gbm| -> Vec<f64> {
                    grid.iter()
                        .map(|&v| {
                            let mut row = probe.clone();
                            row[feature] = v;
                            model.predict(&row)
                        })
                        .collect()
                };
                let values = along(&constrained);
                assert!(values.windows(2).all(|w| sign * (w[1] - w[0]) >= -1e-12), "feature {feature}: {values:?}");
                free_violations += along(&free).windows(2).filter(|w| sign * (w[1] - w[0]) < -1e-12).count();
            }
        }
        assert!(free_violations > 0, "the dip makes the free model non-monotone somewhere");
        // Constrained, the fit is still far better than the mean.
        assert!(mse(&constrained, &x, &y) < 0.2 * variance(&y), "{}", mse(&constrained, &x, &y));
    }

    #[test]
    #[should_panic(expected = "rows differ in length")]
    fn ragged_rows_panic() {
        Gbm::fit(&[vec![1.0, 2.0], vec![1.0]], &[0.0, 1.0], &GbmParams::default());
    }

    #[test]
    #[should_panic(expected = "no training rows")]
    fn empty_input_panics() {
        Gbm::fit(&[], &[], &GbmParams::default());
    }
}
