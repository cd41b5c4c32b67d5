//! A small dense simplex for the price bound's master problems: maximize
//! `c·x` subject to `A x ≤ b`, `x ≥ 0`, with `b ≥ 0` (so the origin is a
//! feasible start and no first phase is needed).
//!
//! The problems it solves have a handful of columns (one per price, plus
//! one) and at most a few hundred rows, and are solved from scratch each
//! time, so a dense tableau is the simplest thing that is fast enough.
//! Pivots follow Dantzig's rule (the largest reduced cost) and switch to
//! Bland's rule, which cannot cycle, after a run of degenerate pivots.
//! Floating point with tolerances: callers never rely on the answer for a
//! proof, only on prices that they check and evaluate themselves.

/// Reduced costs and pivots below this count as zero.
const EPSILON: f64 = 1e-11;

/// Degenerate pivots in a row after which Bland's rule takes over.
const DEGENERATE_RUN: usize = 50;

/// An optimal solution.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LpSolution {
    /// The value of each variable.
    pub values: Vec<f64>,
    /// `c·x`.
    pub objective: f64,
    /// One dual value per row (≥ 0): the objective's rate of change with
    /// the row's bound.
    pub duals: Vec<f64>,
}

/// Maximizes `objective · x` subject to `rows[i] · x ≤ bounds[i]` and
/// `x ≥ 0`. Every bound must be non-negative. `None` when the objective is
/// unbounded (or the pivots run away, which well-posed problems never do).
pub(crate) fn maximize(objective: &[f64], rows: &[Vec<f64>], bounds: &[f64]) -> Option<LpSolution> {
    let (n, m) = (objective.len(), rows.len());
    debug_assert!(bounds.iter().all(|&b| b >= 0.0), "a bound is negative");
    let width = n + m + 1;
    // Row i: the constraint with its slack n + i; the last column is the
    // right-hand side. `reduced` holds c_j − c_B B⁻¹ A_j.
    let mut tableau: Vec<f64> = vec![0.0; m * width];
    for (i, row) in rows.iter().enumerate() {
        tableau[i * width..i * width + n].copy_from_slice(row);
        tableau[i * width + n + i] = 1.0;
        tableau[i * width + width - 1] = bounds[i];
    }
    let mut reduced: Vec<f64> = objective.iter().copied().chain(std::iter::repeat_n(0.0, m)).collect();
    let mut value = 0.0;
    let mut basis: Vec<usize> = (n..n + m).collect();
    let mut degenerate = 0;
    for _ in 0..100 * (n + m + 10) {
        let bland = degenerate >= DEGENERATE_RUN;
        let entering = if bland {
            (0..n + m).find(|&j| reduced[j] > EPSILON)
        } else {
            (0..n + m).filter(|&j| reduced[j] > EPSILON).max_by(|&a, &b| reduced[a].total_cmp(&reduced[b]))
        };
        let Some(entering) = entering else {
            let mut values = vec![0.0; n];
            for (i, &var) in basis.iter().enumerate() {
                if var < n {
                    values[var] = tableau[i * width + width - 1];
                }
            }
            let duals = (0..m).map(|i| (-reduced[n + i]).max(0.0)).collect();
            return Some(LpSolution { values, objective: value, duals });
        };
        // The ratio test; ties go to the smallest basic variable (Bland).
        let mut leaving: Option<(usize, f64)> = None;
        for i in 0..m {
            let a = tableau[i * width + entering];
            if a <= EPSILON {
                continue;
            }
            let ratio = tableau[i * width + width - 1].max(0.0) / a;
            let better = match leaving {
                None => true,
                Some((row, best)) => ratio < best - EPSILON || (ratio <= best + EPSILON && basis[i] < basis[row]),
            };
            if better {
                leaving = Some((i, ratio));
            }
        }
        let (pivot_row, ratio) = leaving?;
        degenerate = if ratio <= EPSILON { degenerate + 1 } else { 0 };
        pivot(&mut tableau, width, pivot_row, entering);
        let factor = reduced[entering];
        if factor != 0.0 {
            let row = &tableau[pivot_row * width..(pivot_row + 1) * width];
            for (r, &a) in reduced.iter_mut().zip(row) {
                *r -= factor * a;
            }
            value += factor * row[width - 1];
        }
        basis[pivot_row] = entering;
    }
    None
}

/// Pivots the tableau on (`row`, `column`).
fn pivot(tableau: &mut [f64], width: usize, row: usize, column: usize) {
    let scale = 1.0 / tableau[row * width + column];
    for a in &mut tableau[row * width..(row + 1) * width] {
        *a *= scale;
    }
    tableau[row * width + column] = 1.0;
    let pivot_row: Vec<f64> = tableau[row * width..(row + 1) * width].to_vec();
    for (i, other) in tableau.chunks_exact_mut(width).enumerate() {
        if i == row {
            continue;
        }
        let factor = other[column];
        if factor == 0.0 {
            continue;
        }
        for (a, &p) in other.iter_mut().zip(&pivot_row) {
            *a -= factor * p;
        }
        other[column] = 0.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn solves_a_textbook_problem_with_its_duals() {
        // max 3x + 5y: x ≤ 4, 2y ≤ 12, 3x + 2y ≤ 18 → (2, 6), 36; duals (0, 3/2, 1).
        let rows = vec![vec![1.0, 0.0], vec![0.0, 2.0], vec![3.0, 2.0]];
        let solution = maximize(&[3.0, 5.0], &rows, &[4.0, 12.0, 18.0]).unwrap();
        assert!(close(solution.objective, 36.0), "{solution:?}");
        assert!(close(solution.values[0], 2.0) && close(solution.values[1], 6.0), "{solution:?}");
        assert!(close(solution.duals[0], 0.0) && close(solution.duals[1], 1.5) && close(solution.duals[2], 1.0));
    }

    #[test]
    fn strong_duality_holds_on_a_degenerate_problem() {
        // Many constraints through the optimum (1, 1): max x + y.
        let rows = vec![vec![1.0, 1.0], vec![2.0, 0.0], vec![0.0, 2.0], vec![1.0, 0.0], vec![3.0, 1.0]];
        let bounds = [2.0, 2.0, 2.0, 1.0, 4.0];
        let solution = maximize(&[1.0, 1.0], &rows, &bounds).unwrap();
        assert!(close(solution.objective, 2.0), "{solution:?}");
        let dual_value: f64 = solution.duals.iter().zip(bounds).map(|(y, b)| y * b).sum();
        assert!(close(dual_value, 2.0), "{solution:?}");
        // Dual feasibility: Aᵀy ≥ c.
        for j in 0..2 {
            let column: f64 = rows.iter().zip(&solution.duals).map(|(row, y)| row[j] * y).sum();
            assert!(column >= 1.0 - 1e-9, "{solution:?}");
        }
    }

    #[test]
    fn reports_an_unbounded_objective() {
        assert_eq!(maximize(&[1.0, 0.0], &[vec![0.0, 1.0]], &[1.0]), None);
    }

    #[test]
    fn a_zero_objective_stays_at_the_origin() {
        let solution = maximize(&[0.0, 0.0], &[vec![1.0, 1.0]], &[1.0]).unwrap();
        assert_eq!(solution.objective, 0.0);
        assert_eq!(solution.values, vec![0.0, 0.0]);
    }
}
