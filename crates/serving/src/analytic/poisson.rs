//! Poisson probabilities over the window of counts that holds all of their
//! mass but terms below [`NEGLIGIBLE`].

/// A probability below which a Poisson term is left out of its window. The
/// terms left out on either side sum to less than about `1e-19`.
pub(crate) const NEGLIGIBLE: f64 = 1e-21;

/// Stirling's series for `ln(k!) - (k ln k - k + ln(2 pi k) / 2)`, `k >= 16`
/// (error below `1e-14`).
fn stirling_correction(k: f64) -> f64 {
    let inv = 1.0 / k;
    let inv2 = inv * inv;
    inv * (1.0 / 12.0 - inv2 * (1.0 / 360.0 - inv2 * (1.0 / 1260.0 - inv2 * (1.0 / 1680.0))))
}

/// `ln(k!)`: exact products below 16, Stirling's series above.
#[cfg(test)]
pub(crate) fn ln_factorial(k: usize) -> f64 {
    if k < 16 {
        return (2..=k).map(|i| i as f64).product::<f64>().ln();
    }
    let k = k as f64;
    k * k.ln() - k + 0.5 * (2.0 * std::f64::consts::PI * k).ln() + stirling_correction(k)
}

/// `ln P(N = k)` for `N ~ Poisson(mean)`, `mean > 0`, written so that no
/// large terms cancel when `k` is near the mean.
fn ln_pmf(k: usize, mean: f64) -> f64 {
    if k < 16 {
        let factorial: f64 = (2..=k).map(|i| i as f64).product();
        return -mean + k as f64 * mean.ln() - factorial.ln();
    }
    let kf = k as f64;
    kf * ((mean - kf) / kf).ln_1p() + (kf - mean)
        - 0.5 * (2.0 * std::f64::consts::PI * kf).ln()
        - stirling_correction(kf)
}

/// `P(N >= k)` for `N ~ Poisson(mean)`, summed from `P(N = k)` over the
/// shorter tail until its terms are negligible.
pub(crate) fn survival(k: usize, mean: f64) -> f64 {
    if k == 0 {
        return 1.0;
    }
    if mean <= 0.0 {
        return 0.0;
    }
    if k as f64 > mean {
        // Upper tail: terms fall by mean / (j + 1) < 1.
        let mut p = ln_pmf(k, mean).exp();
        let mut sum = 0.0;
        let mut j = k;
        while p >= NEGLIGIBLE * 1e-3 {
            sum += p;
            j += 1;
            p *= mean / j as f64;
        }
        sum
    } else {
        // 1 - P(N <= k - 1); terms fall by j / mean <= 1 going down.
        let mut j = k - 1;
        let mut p = ln_pmf(j, mean).exp();
        let mut sum = 0.0;
        loop {
            sum += p;
            if j == 0 || p < NEGLIGIBLE * 1e-3 {
                break;
            }
            p *= j as f64 / mean;
            j -= 1;
        }
        1.0 - sum
    }
}

/// The distribution of a Poisson count of a given mean: its probabilities
/// and survival function over `lo..=hi`, counts outside that window being
/// negligible (a count below `lo` is taken to have probability 0 and
/// `P(N >= k) = 1` for `k <= lo`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Poisson {
    lo: usize,
    /// `pmf[i] = P(N = lo + i)`.
    pmf: Vec<f64>,
    /// `sf[i] = P(N >= lo + i)`, summed from the top of the window.
    sf: Vec<f64>,
    /// `reciprocal[k] = 1 / k` (index 0 unused), grown as needed.
    reciprocal: Vec<f64>,
}

impl Poisson {
    /// The distribution of mean `mean` (finite, `>= 0`).
    pub(crate) fn new(mean: f64) -> Poisson {
        let mut poisson = Poisson::default();
        poisson.set(mean);
        poisson
    }

    /// Recomputes the window for mean `mean` (finite, `>= 0`), reusing the
    /// buffers.
    pub(crate) fn set(&mut self, mean: f64) {
        self.pmf.clear();
        self.sf.clear();
        if mean <= 0.0 {
            self.lo = 0;
            self.pmf.push(1.0);
            self.sf.push(1.0);
            return;
        }
        // Walk out from the mode, where the probability is largest, until
        // the terms fall below NEGLIGIBLE (they only fall further away from
        // it): down by p(k-1) = p(k) k / mean, up by p(k+1) = p(k) mean /
        // (k+1) with tabled reciprocals (no division in the chain). Beyond
        // 10 sqrt(mean) + 24 from the mode every term is below 1e-23, so
        // that bounds both walks.
        let mode = mean.floor() as usize;
        let reach = (10.0 * mean.sqrt()) as usize + 24;
        while self.reciprocal.len() <= mode + reach {
            let next = self.reciprocal.len().max(1);
            self.reciprocal.push(1.0 / next as f64);
        }
        let at_mode = ln_pmf(mode, mean).exp();
        let inverse_mean = 1.0 / mean;
        // Downwards first, into pmf in reverse, then turned around.
        let mut p = at_mode;
        let mut k = mode;
        while k > 0 && mode - k < reach {
            p *= k as f64 * inverse_mean;
            if p < NEGLIGIBLE {
                break;
            }
            self.pmf.push(p);
            k -= 1;
        }
        self.lo = k;
        self.pmf.reverse();
        self.pmf.push(at_mode);
        let mut p = at_mode;
        for inverse in &self.reciprocal[mode + 1..=mode + reach] {
            p *= mean * inverse;
            if p < NEGLIGIBLE {
                break;
            }
            self.pmf.push(p);
        }
        self.sf.resize(self.pmf.len(), 0.0);
        let mut tail = 0.0;
        for (sf, &p) in self.sf.iter_mut().zip(&self.pmf).rev() {
            tail += p;
            *sf = tail;
        }
        self.sf[0] = 1.0;
    }

    /// Like [`Poisson::set`], but only the counts `from..=to` will be asked
    /// for: when they all lie in a negligible tail, no table is built.
    pub(crate) fn set_for(&mut self, mean: f64, from: usize, to: usize) {
        if mean > 0.0 {
            let mode = mean.floor() as usize;
            let ln_negligible = NEGLIGIBLE.ln();
            // Left of the mode the terms shrink at least geometrically by
            // k / mean per step down, so the tail up to `to` is bounded by
            // P(to) / (1 - to / mean); likewise on the right.
            if to < mode && ln_pmf(to, mean) - (1.0 - to as f64 / mean).ln() < ln_negligible {
                self.lo = to + 1;
                self.pmf.clear();
                self.pmf.push(0.0);
                self.sf.clear();
                self.sf.push(1.0);
                return;
            }
            if from > mode + 1 && ln_pmf(from, mean) - (1.0 - mean / (from + 1) as f64).ln() < ln_negligible {
                self.lo = from - 1;
                self.pmf.clear();
                self.pmf.push(0.0);
                self.sf.clear();
                self.sf.push(0.0);
                return;
            }
        }
        self.set(mean);
    }

    /// The smallest count in the window.
    pub(crate) fn lo(&self) -> usize {
        self.lo
    }

    /// The largest count in the window.
    pub(crate) fn hi(&self) -> usize {
        self.lo + self.pmf.len() - 1
    }

    /// `P(N >= k)` for `k` from [`Poisson::lo`] up (the first is 1).
    pub(crate) fn sf_window(&self) -> &[f64] {
        &self.sf
    }

    /// `P(N = k)` (0 outside the window).
    pub(crate) fn pmf(&self, k: i64) -> f64 {
        if k < self.lo as i64 {
            return 0.0;
        }
        self.pmf.get((k - self.lo as i64) as usize).copied().unwrap_or(0.0)
    }

    /// `P(N >= k)` (1 at and below the window, 0 above it).
    pub(crate) fn sf(&self, k: i64) -> f64 {
        if k <= self.lo as i64 {
            return 1.0;
        }
        self.sf.get((k - self.lo as i64) as usize).copied().unwrap_or(0.0)
    }

    /// The probabilities of the window, from [`Poisson::lo`] up.
    #[cfg(test)]
    pub(crate) fn pmf_window(&self) -> &[f64] {
        &self.pmf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ln_factorial_matches_the_product() {
        let mut exact = 0.0_f64;
        for k in 1..200usize {
            exact += (k as f64).ln();
            assert!((ln_factorial(k) - exact).abs() < 1e-12 * exact.max(1.0), "{k}");
        }
        assert_eq!(ln_factorial(0), 0.0);
    }

    #[test]
    fn windows_hold_the_whole_mass_and_the_right_moments() {
        for mean in [0.0, 1e-9, 0.3, 1.0, 7.5, 64.0, 255.9, 2500.0, 40000.0] {
            let poisson = Poisson::new(mean);
            let mass: f64 = poisson.pmf_window().iter().sum();
            assert!((mass - 1.0).abs() < 1e-12, "mean {mean}: mass {mass}");
            let first: f64 = poisson.pmf_window().iter().enumerate().map(|(i, p)| (poisson.lo() + i) as f64 * p).sum();
            assert!((first - mean).abs() < 1e-9 * mean.max(1.0), "mean {mean}: {first}");
            assert_eq!(poisson.sf(poisson.lo() as i64), 1.0);
            assert_eq!(poisson.sf(poisson.hi() as i64 + 1), 0.0);
            let k = mean.floor() as i64 + 1;
            let direct: f64 = (k..=poisson.hi() as i64).map(|j| poisson.pmf(j)).sum();
            assert!((poisson.sf(k) - direct).abs() < 1e-14);
            for j in [0, 1, mean as usize / 2, mean as usize, k as usize, k as usize + 3, (2.0 * mean) as usize + 1] {
                let tail = survival(j, mean);
                assert!(
                    (tail - poisson.sf(j as i64)).abs() < 1e-13,
                    "mean {mean} k {j}: {tail} vs {}",
                    poisson.sf(j as i64)
                );
            }
        }
    }
}
