//! The descending ladder heights of the full-batch random walk.
//!
//! Above the boundary the queue at service starts moves as the random walk
//! `x -> x - B + A`, `A ~ Poisson(mu)`, `mu = lambda S_B < B`. Its strict
//! descending ladder height `H` (how far a new minimum lies below the old
//! one) takes values `1..=B`, and by the Wiener–Hopf factorisation
//! `z^B (1 - E[z^-H]) = z^B - sum_d h_d z^(B-d)` is the monic polynomial
//! whose roots are the `B` roots of `z^B = exp(mu (z - 1))` in the closed
//! unit disk. Root `r` is the unique fixed point in the disk of
//! `z = w^r exp(mu (z - 1) / B)`, `w = exp(2 pi i / B)` (a contraction of
//! factor `mu / B < 1`), found by a few fixed-point steps and Newton's
//! method. The polynomial is evaluated at the `B`-th roots of unity (a
//! product of `B` factors, each exact to rounding) and its coefficients
//! read back by the inverse discrete Fourier transform.

use std::f64::consts::PI;
use std::ops::{Mul, Sub};

/// A complex number (only what the roots need).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Complex {
    re: f64,
    im: f64,
}

impl Complex {
    const ONE: Complex = Complex { re: 1.0, im: 0.0 };

    fn polar(modulus: f64, angle: f64) -> Complex {
        Complex { re: modulus * angle.cos(), im: modulus * angle.sin() }
    }

    fn exp(self) -> Complex {
        Complex::polar(self.re.exp(), self.im)
    }

    fn scale(self, factor: f64) -> Complex {
        Complex { re: self.re * factor, im: self.im * factor }
    }

    fn norm_sqr(self) -> f64 {
        self.re * self.re + self.im * self.im
    }

    fn div(self, other: Complex) -> Complex {
        let d = other.re * other.re + other.im * other.im;
        Complex { re: (self.re * other.re + self.im * other.im) / d, im: (self.im * other.re - self.re * other.im) / d }
    }
}

impl Mul for Complex {
    type Output = Complex;
    fn mul(self, o: Complex) -> Complex {
        Complex { re: self.re * o.re - self.im * o.im, im: self.re * o.im + self.im * o.re }
    }
}

impl Sub for Complex {
    type Output = Complex;
    fn sub(self, o: Complex) -> Complex {
        Complex { re: self.re - o.re, im: self.im - o.im }
    }
}

/// The root of `z = w exp(rho (z - 1))` in the unit disk, `w = exp(i angle)`,
/// `rho = mu / B < 1`.
fn disk_root(angle: f64, rho: f64) -> Complex {
    let w = Complex::polar(1.0, angle);
    let image = |z: Complex| w * (z - Complex::ONE).scale(rho).exp();
    // Fixed-point steps from the origin stay in the disk and approach the
    // root (a contraction of factor rho there); Newton then polishes it,
    // and a last fixed-point step leaves a fixed point to rounding.
    let mut z = image(Complex { re: 0.0, im: 0.0 });
    for _ in 0..3 {
        z = image(z);
    }
    for _ in 0..60 {
        let fz = image(z);
        let residual = z - fz;
        // d/dz (z - w exp(rho (z - 1))) = 1 - rho w exp(rho (z - 1)).
        let step = residual.div(Complex::ONE - fz.scale(rho));
        let next = z - step;
        if next.norm_sqr() > 1.0 || !next.re.is_finite() || !next.im.is_finite() {
            // Newton left the disk: fall back on the contraction alone.
            z = fz;
            continue;
        }
        z = next;
        if step.norm_sqr() <= 1e-30 {
            break;
        }
    }
    image(z)
}

/// `h[d] = P(H = d)` for `d = 0..=B` (`h[0] = 0`): the strict descending
/// ladder height distribution of the walk `x -> x - B + Poisson(mu)`,
/// `0 <= mu < B`. Probabilities are clamped at 0 (rounding leaves some at
/// `-1e-17`) and renormalised.
pub(crate) fn ladder_heights(batch: usize, mu: f64) -> Vec<f64> {
    let mut h = vec![0.0; batch + 1];
    if batch == 1 {
        h[1] = 1.0;
        return h;
    }
    let rho = mu / batch as f64;
    let b = batch as f64;
    // Roots: r = 0 is z = 1; r and B - r are conjugate.
    let roots: Vec<Complex> = (0..batch)
        .map(|r| {
            if r == 0 {
                Complex::ONE
            } else if 2 * r > batch {
                Complex { re: 0.0, im: 0.0 } // filled from its conjugate below
            } else {
                disk_root(2.0 * PI * r as f64 / b, rho)
            }
        })
        .collect();
    let roots: Vec<Complex> = (0..batch)
        .map(|r| if 2 * r > batch { Complex { re: roots[batch - r].re, im: -roots[batch - r].im } } else { roots[r] })
        .collect();
    // E[z^-H] at z = the j-th root of unity: 1 - prod_r (z - z_r) (z^B = 1).
    // Conjugate symmetry: only j <= B/2 is needed.
    let unity: Vec<Complex> = (0..batch).map(|j| Complex::polar(1.0, 2.0 * PI * j as f64 / b)).collect();
    let half = batch / 2;
    let transform: Vec<Complex> = (0..=half)
        .map(|j| {
            let z = unity[j];
            let product = roots.iter().fold(Complex::ONE, |acc, &root| acc * (z - root));
            Complex::ONE - product
        })
        .collect();
    // h_d = (1/B) sum_j H_j z_j^d, d = 1..=B (d = B is residue 0); H_(B-j)
    // is the conjugate of H_j, so each pair adds twice the real part.
    for (d, slot) in h.iter_mut().enumerate().skip(1) {
        let mut sum = transform[0].re;
        let mut index = 0;
        for (j, value) in transform.iter().enumerate().skip(1) {
            index += d;
            if index >= batch {
                index -= batch;
            }
            let z = unity[index];
            let real = value.re * z.re - value.im * z.im;
            sum += if 2 * j == batch { real } else { 2.0 * real };
        }
        *slot = (sum / b).max(0.0);
    }
    let total: f64 = h.iter().sum();
    for p in &mut h {
        *p /= total;
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analytic::poisson::Poisson;

    /// The ladder heights by brute force: the walk started at 0, killed
    /// when it first goes below 0, iterated until its mass is gone.
    fn ladder_by_iteration(batch: usize, mu: f64) -> Vec<f64> {
        let poisson = Poisson::new(mu);
        let top = 400usize;
        let mut mass = vec![0.0; top + 1];
        mass[0] = 1.0;
        let mut h = vec![0.0; batch + 1];
        for _ in 0..200_000 {
            let mut next = vec![0.0; top + 1];
            let mut alive = 0.0;
            for (x, &m) in mass.iter().enumerate() {
                if m == 0.0 {
                    continue;
                }
                for (i, &p) in poisson.pmf_window().iter().enumerate() {
                    let y = x as i64 - batch as i64 + (poisson.lo() + i) as i64;
                    if y < 0 {
                        h[(-y) as usize] += m * p;
                    } else if (y as usize) <= top {
                        next[y as usize] += m * p;
                        alive += m * p;
                    }
                }
            }
            mass = next;
            if alive < 1e-15 {
                break;
            }
        }
        h
    }

    #[test]
    fn roots_give_the_ladder_heights_of_brute_force() {
        for (batch, mu) in [(2usize, 1.0), (4, 3.0), (8, 7.2), (16, 4.0), (5, 4.0)] {
            let fast = ladder_heights(batch, mu);
            let slow = ladder_by_iteration(batch, mu);
            for d in 1..=batch {
                assert!((fast[d] - slow[d]).abs() < 1e-9, "B {batch} mu {mu} d {d}: {} vs {}", fast[d], slow[d]);
            }
        }
    }

    #[test]
    fn heights_are_a_distribution_up_to_large_batches_and_loads() {
        for (batch, rho) in [(256usize, 0.999), (256, 0.5), (128, 0.9999), (64, 0.01), (3, 0.999_999)] {
            let h = ladder_heights(batch, rho * batch as f64);
            assert!(h.iter().all(|&p| p >= 0.0));
            assert!((h.iter().sum::<f64>() - 1.0).abs() < 1e-12);
            // Mean ladder height is finite and at least 1.
            let mean: f64 = h.iter().enumerate().map(|(d, p)| d as f64 * p).sum();
            assert!(mean >= 1.0 && mean <= batch as f64, "B {batch} rho {rho}: {mean}");
        }
    }
}
