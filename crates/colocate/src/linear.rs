//! Least squares and z-scoring, small and exact enough for a few hundred
//! rows and tens of features.

/// Mean and sample standard deviation (ddof 1) of each column.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Standardizer {
    mean: Vec<f64>,
    std: Vec<f64>,
}

impl Standardizer {
    /// Fits on `rows` (at least two, all of one length). A constant column
    /// gets a standard deviation of 1, so it maps to 0.
    pub fn fit(rows: &[Vec<f64>]) -> Self {
        let width = rows.first().map_or(0, Vec::len);
        let (mean, std) = (0..width).map(|j| mean_and_std(&rows.iter().map(|r| r[j]).collect::<Vec<_>>())).unzip();
        Standardizer { mean, std }
    }

    /// `row` in standard units.
    pub fn apply(&self, row: &[f64]) -> Vec<f64> {
        row.iter().zip(&self.mean).zip(&self.std).map(|((v, m), s)| (v - m) / s).collect()
    }
}

/// Mean and sample standard deviation (ddof 1) of `values` (at least two);
/// a standard deviation of 0 is reported as 1.
pub fn mean_and_std(values: &[f64]) -> (f64, f64) {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, if variance > 0.0 { variance.sqrt() } else { 1.0 })
}

/// A linear model `intercept + coef · x`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LinearFit {
    /// The constant term.
    pub intercept: f64,
    /// One coefficient per feature.
    pub coef: Vec<f64>,
}

impl LinearFit {
    /// The model's value at `x`.
    pub fn predict(&self, x: &[f64]) -> f64 {
        self.intercept + self.coef.iter().zip(x).map(|(c, v)| c * v).sum::<f64>()
    }
}

/// Relative size below which a pivot counts as zero (rank deficiency).
const RANK_TOLERANCE: f64 = 1e-10;

/// Ordinary least squares with an intercept, by Householder QR. Columns
/// that are linear combinations of earlier ones (and the intercept) get a
/// zero coefficient.
pub fn least_squares(x: &[Vec<f64>], y: &[f64]) -> LinearFit {
    let rows = x.len();
    let width = x.first().map_or(0, Vec::len) + 1;
    // Column-major design matrix with the intercept first.
    let mut a: Vec<Vec<f64>> =
        (0..width).map(|j| if j == 0 { vec![1.0; rows] } else { x.iter().map(|r| r[j - 1]).collect() }).collect();
    let mut b = y.to_vec();
    let scale = a.iter().flatten().fold(0.0f64, |m, v| m.max(v.abs())).max(1.0);
    let mut independent = vec![false; width];
    let mut r_rows: Vec<usize> = Vec::new();
    let mut next_row = 0;
    for j in 0..width {
        if next_row >= rows {
            break;
        }
        let norm = a[j][next_row..].iter().map(|v| v * v).sum::<f64>().sqrt();
        if norm <= RANK_TOLERANCE * scale {
            continue;
        }
        // Householder reflection zeroing a[j][next_row+1..].
        let alpha = if a[j][next_row] > 0.0 { -norm } else { norm };
        let mut v: Vec<f64> = a[j][next_row..].to_vec();
        v[0] -= alpha;
        let v_norm2: f64 = v.iter().map(|t| t * t).sum();
        if v_norm2 > 0.0 {
            for column in a.iter_mut().skip(j) {
                let dot: f64 = v.iter().zip(&column[next_row..]).map(|(p, q)| p * q).sum();
                let factor = 2.0 * dot / v_norm2;
                for (value, vi) in column[next_row..].iter_mut().zip(&v) {
                    *value -= factor * vi;
                }
            }
            let dot: f64 = v.iter().zip(&b[next_row..]).map(|(p, q)| p * q).sum();
            let factor = 2.0 * dot / v_norm2;
            for (value, vi) in b[next_row..].iter_mut().zip(&v) {
                *value -= factor * vi;
            }
        }
        independent[j] = true;
        r_rows.push(j);
        next_row += 1;
    }
    // Back substitution over the independent columns.
    let mut solution = vec![0.0; width];
    for (row, &j) in r_rows.iter().enumerate().rev() {
        let mut value = b[row];
        for &k in r_rows.iter().skip(row + 1) {
            value -= a[k][row] * solution[k];
        }
        solution[j] = value / a[j][row];
    }
    LinearFit { intercept: solution[0], coef: solution[1..].to_vec() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovers_an_exact_linear_relation() {
        let x: Vec<Vec<f64>> = (0..20).map(|i| vec![i as f64, ((i * 7) % 5) as f64]).collect();
        let y: Vec<f64> = x.iter().map(|r| 3.0 + 2.0 * r[0] - 0.5 * r[1]).collect();
        let fit = least_squares(&x, &y);
        assert!((fit.intercept - 3.0).abs() < 1e-9);
        assert!((fit.coef[0] - 2.0).abs() < 1e-9 && (fit.coef[1] + 0.5).abs() < 1e-9);
        assert!((fit.predict(&[1.0, 1.0]) - 4.5).abs() < 1e-9);
    }

    #[test]
    fn minimizes_squared_error_with_noise() {
        let x: Vec<Vec<f64>> = (0..30).map(|i| vec![i as f64]).collect();
        let y: Vec<f64> = (0..30).map(|i| i as f64 + if i % 2 == 0 { 1.0 } else { -1.0 }).collect();
        let fit = least_squares(&x, &y);
        let sse = |c: f64, m: f64| x.iter().zip(&y).map(|(r, t)| (c + m * r[0] - t).powi(2)).sum::<f64>();
        let best = sse(fit.intercept, fit.coef[0]);
        assert!(best <= sse(fit.intercept + 0.01, fit.coef[0]) && best <= sse(fit.intercept, fit.coef[0] + 0.001));
    }

    #[test]
    fn a_duplicated_column_gets_no_weight() {
        let x: Vec<Vec<f64>> = (0..10).map(|i| vec![i as f64, i as f64]).collect();
        let y: Vec<f64> = (0..10).map(|i| 2.0 * i as f64).collect();
        let fit = least_squares(&x, &y);
        assert!((fit.predict(&[4.0, 4.0]) - 8.0).abs() < 1e-9);
        assert_eq!(fit.coef[1], 0.0);
    }

    #[test]
    fn standardizes_with_sample_deviation() {
        let s = Standardizer::fit(&[vec![1.0, 5.0], vec![3.0, 5.0]]);
        assert_eq!(s.apply(&[3.0, 5.0]), vec![1.0 / 2f64.sqrt(), 0.0]);
    }
}
