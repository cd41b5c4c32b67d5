//! The little dense linear algebra the fits need: solving a small
//! symmetric positive definite system and inverting it (Cholesky).

/// A square matrix, row-major.
pub(crate) type Matrix = Vec<Vec<f64>>;

/// The Cholesky factor `L` (lower triangular, `A = L Lᵀ`) of a symmetric
/// positive definite `a`; `None` when `a` is not positive definite.
pub(crate) fn cholesky(a: &Matrix) -> Option<Matrix> {
    let n = a.len();
    let mut l = vec![vec![0.0; n]; n];
    for i in 0..n {
        for j in 0..=i {
            let dot: f64 = (0..j).map(|k| l[i][k] * l[j][k]).sum();
            if i == j {
                let diagonal = a[i][i] - dot;
                if !(diagonal > 0.0 && diagonal.is_finite()) {
                    return None;
                }
                l[i][i] = diagonal.sqrt();
            } else {
                l[i][j] = (a[i][j] - dot) / l[j][j];
            }
        }
    }
    Some(l)
}

/// Solves `L Lᵀ x = b` for the Cholesky factor `l`.
pub(crate) fn solve(l: &Matrix, b: &[f64]) -> Vec<f64> {
    let n = l.len();
    let mut y = vec![0.0; n];
    for i in 0..n {
        y[i] = (b[i] - (0..i).map(|k| l[i][k] * y[k]).sum::<f64>()) / l[i][i];
    }
    let mut x = vec![0.0; n];
    for i in (0..n).rev() {
        x[i] = (y[i] - (i + 1..n).map(|k| l[k][i] * x[k]).sum::<f64>()) / l[i][i];
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn solves_a_positive_definite_system_and_refuses_an_indefinite_one() {
        let a = vec![vec![4.0, 2.0, 0.6], vec![2.0, 5.0, 1.0], vec![0.6, 1.0, 3.0]];
        let x = [1.0, -2.0, 0.5];
        let b: Vec<f64> = a.iter().map(|row| row.iter().zip(&x).map(|(a, x)| a * x).sum()).collect();
        let solved = solve(&cholesky(&a).unwrap(), &b);
        for (got, want) in solved.iter().zip(x) {
            assert!((got - want).abs() < 1e-12, "{solved:?}");
        }
        assert!(cholesky(&vec![vec![1.0, 2.0], vec![2.0, 1.0]]).is_none());
    }
}
