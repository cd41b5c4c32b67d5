//! `P(T > t)`: the chance that a Poisson arrival's latency exceeds `t`.
//!
//! By PASTA an arrival finds the server idle (latency `S_1`) for the
//! fraction `idle / cycle` of time, or else in a batch that started with
//! `x` waiting (weight `pi(x)`), `e` ms ago (`e` uniform on `[0, S)`,
//! `S` that batch's latency), with `j = c + n` requests ahead of it
//! (`c = max(x - B, 0)` left over, `n ~ Poisson(lambda e)` come since).
//! Its batch is band `m = floor(j / B)` (the `m` batches ahead are full) and
//! starts `U_m = S + m S_B` after that batch did, whatever `e`; it holds
//! `min(B, c + K + 1 - m B)` requests, `K ~ Poisson(lambda U_m)` being the
//! other arrivals in `[0, U_m)`. The latency `U_m - e + S_size` misses `t`
//! surely when `U_m - e + S_1 > t`, never when `U_m - e + S_B <= t`, and in
//! between (one band `m_p` at most) exactly when the batch exceeds
//! `q = max{k : S_k <= t - U_m + e}`, i.e. `K >= m_p B + q - c`. So, per
//! unit of weight,
//!
//! `miss(c, e) = P(n >= m_miss B - c) + P(L <= c + n < L + B, K >= L + q - c)`,
//! `L = m_p B`, and with `a = L - c` the second term is
//! `P(K >= a + q) - D(a) - P(n >= a + B)`, `D(a) = P(n < a, K >= a + q)`,
//! computed for every `a` at once by the recursion
//! `D(a + 1) = D(a) + P(n = a) P(N' > q) - P(K = a + q) P(Bin(a + q, e / U) < a)`
//! (`N' = K - n ~ Poisson(lambda (U - e))`; given `K`, `n` is binomial), the
//! binomial term itself a running sum. The integral over `e` is split where
//! `m_miss`, `m_p` or `q` change and taken by Gauss–Legendre rules on pieces
//! a few arrivals long, where the integrand is smooth.

use super::chain::{Stationary, MAX_CARRIES};
use super::poisson::{survival, Poisson};
use super::process::Process;

/// Gauss–Legendre rules on `[-1, 1]` of 2, 4 and 8 points: the positive
/// nodes and their weights (each node `x` stands for `x` and `-x`).
const GAUSS_2: [(f64, f64); 1] = [(0.577_350_269_189_625_8, 1.0)];
const GAUSS_4: [(f64, f64); 2] =
    [(0.339_981_043_584_856_3, 0.652_145_154_862_546_1), (0.861_136_311_594_052_6, 0.347_854_845_137_453_9)];
const GAUSS_8: [(f64, f64); 4] = [
    (0.183_434_642_495_649_8, 0.362_683_783_378_362),
    (0.525_532_409_916_329, 0.313_706_645_877_887_3),
    (0.796_666_477_413_626_7, 0.222_381_034_453_374_5),
    (0.960_289_856_497_536_3, 0.101_228_536_290_376_3),
];

/// Reusable buffers of the integral.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    ahead: Poisson,
    total: Poisson,
    weights: Vec<f64>,
    suffix: Vec<f64>,
    before: Vec<f64>,
    breaks: Vec<f64>,
    reciprocal: Vec<f64>,
}

/// How finely pieces are cut: into panels of at most `arrivals` expected
/// arrivals (or the square root of a batch's arrivals over `per_root`,
/// when larger), each integrated by 2, 4 or 8 points as it spans at most
/// `two`, at most `four`, or more expected arrivals.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Resolution {
    /// Expected arrivals per panel, at least.
    pub(crate) arrivals: f64,
    /// Panels per square root of the arrivals in a batch.
    pub(crate) per_root: f64,
    /// Panels with at most this many expected arrivals take 2 points.
    pub(crate) two: f64,
    /// Panels with at most this many expected arrivals take 4 points.
    pub(crate) four: f64,
}

impl Resolution {
    /// What the searches use. Over ParvaGPU's catalogue (every third
    /// configuration, each SLO, at its capacity and 0.7 of it, where
    /// `P(T > t) >= 1e-4`) it differs from [`Resolution::FINE`] by at most
    /// `2.7e-5` of `P(T > t)`, with 40% fewer nodes than 8-point rules.
    pub(crate) const DEFAULT: Resolution = Resolution { arrivals: 8.0, per_root: 2.0, two: 0.1, four: f64::INFINITY };
    /// A reference: panels of one expected arrival, 8 points each.
    #[cfg(test)]
    pub(crate) const FINE: Resolution = Resolution { arrivals: 1.0, per_root: 64.0, two: 0.0, four: 0.0 };
}

/// `P(T > t_ms)` for an arrival at the stationary process.
pub(crate) fn miss_probability(chain: &mut Stationary<'_>, t_ms: f64, scratch: &mut Scratch) -> f64 {
    miss_probability_at(chain, t_ms, scratch, Resolution::DEFAULT)
}

/// [`miss_probability`] at a given quadrature resolution.
pub(crate) fn miss_probability_at(
    chain: &mut Stationary<'_>,
    t_ms: f64,
    scratch: &mut Scratch,
    resolution: Resolution,
) -> f64 {
    let process = chain.process();
    // The queue of mean latencies must meet what the allowance leaves.
    let t_ms = t_ms - process.allowance_ms();
    let batch = process.batch();
    let first = process.first_ms();
    let full = process.full_ms();
    if t_ms < first {
        return 1.0;
    }
    // Beyond four full batches past the table's last state (MAX_CARRIES
    // carried; the rest counts as late whatever t), P(T > t) falls only
    // through states at the table's very end: t is taken no larger
    // (conservative), and a larger one (an SLO of a billion batches)
    // would overflow the band arithmetic.
    let t_ms = t_ms.min(first + full * (MAX_CARRIES / batch + 4) as f64);
    // Requests in band >= surely_late miss whatever the batch and elapsed time.
    let surely_late = ((t_ms - first) / full).ceil().max(0.0) as usize;
    let carries = surely_late.saturating_mul(batch);
    let lambda = chain.lambda();
    let levels = process.levels();
    let mut late_ms = 0.0;
    // A class whose whole share of time is below this is left out (all its
    // arrivals missing would move P(T > t) by less than 1e-11).
    let negligible_ms = 1e-11 * chain.cycle_ms();
    for g in 0..levels - 1 {
        let mass = chain.level_mass()[g];
        if mass * process.latency_ms(g) < negligible_ms {
            continue;
        }
        scratch.weights.clear();
        scratch.weights.push(mass);
        late_ms += class_late_ms(process, lambda, process.latency_ms(g), t_ms, scratch, resolution);
    }
    let top_mass = chain.level_mass()[levels - 1];
    // States not tabulated (negligible, or beyond the table) count as late.
    let carries = chain.tabulate(carries);
    let carried = chain.carried(carries);
    let carry = chain.carry(carries);
    scratch.weights.clear();
    scratch.weights.extend_from_slice(carry);
    scratch.weights[0] = top_mass;
    if (top_mass + carried) * full >= negligible_ms {
        late_ms += class_late_ms(process, lambda, full, t_ms, scratch, resolution);
    }
    let rest = (chain.above() - carried).max(0.0);
    late_ms += rest * full;
    (late_ms / chain.cycle_ms()).clamp(0.0, 1.0)
}

/// `int_0^S sum_c w(c) miss(c, e) de` for the batches of latency `S`
/// (`scratch.weights[c]`: the weight of those that left `c` waiting).
fn class_late_ms(
    process: &Process,
    lambda: f64,
    s_ms: f64,
    t_ms: f64,
    scratch: &mut Scratch,
    resolution: Resolution,
) -> f64 {
    let first = process.first_ms();
    let full = process.full_ms();
    let batch = process.batch();
    // Suffix sums of the weights.
    let n = scratch.weights.len();
    scratch.suffix.clear();
    scratch.suffix.resize(n + 1, 0.0);
    for c in (0..n).rev() {
        scratch.suffix[c] = scratch.suffix[c + 1] + scratch.weights[c];
    }
    // Where m_miss, m_p or q change: t - S - m S_B + e = S_k.
    scratch.breaks.clear();
    scratch.breaks.push(0.0);
    scratch.breaks.push(s_ms);
    for &latency in process.latencies_ms() {
        let base = s_ms + latency - t_ms;
        let mut m = (-base / full).ceil();
        loop {
            let e = base + m * full;
            if e >= s_ms {
                break;
            }
            if e > 0.0 {
                scratch.breaks.push(e);
            }
            m += 1.0;
        }
    }
    scratch.breaks.sort_by(f64::total_cmp);
    scratch.breaks.dedup();
    let spread = (resolution.arrivals).max((lambda * s_ms).sqrt() / resolution.per_root);
    let slack = (full - first) / full;
    let mut late = 0.0;
    for piece in 1..scratch.breaks.len() {
        let (e0, e1) = (scratch.breaks[piece - 1], scratch.breaks[piece]);
        if e1 <= e0 {
            continue;
        }
        let middle = 0.5 * (e0 + e1);
        let a = (t_ms - s_ms - first + middle) / full;
        let m_late = (a.floor() + 1.0).max(0.0) as usize;
        let partial = if a.floor() >= 0.0 && (a - slack).floor() < a.floor() {
            let m = a.floor() as usize;
            let q = process.largest_batch_within(t_ms - s_ms - m as f64 * full + middle);
            Some((m, q))
        } else {
            None
        };
        let panels = ((lambda * (e1 - e0)) / spread).ceil().max(1.0) as usize;
        let width = (e1 - e0) / panels as f64;
        let arrivals = lambda * width;
        let rule: &[(f64, f64)] = if arrivals <= resolution.two {
            &GAUSS_2
        } else if arrivals <= resolution.four {
            &GAUSS_4
        } else {
            &GAUSS_8
        };
        for panel in 0..panels {
            let center = e0 + (panel as f64 + 0.5) * width;
            for &(x, w) in rule {
                for e in [center - 0.5 * width * x, center + 0.5 * width * x] {
                    let value = node_late(lambda, s_ms, full, batch, e, m_late, partial, scratch);
                    late += 0.5 * width * w * value;
                }
            }
        }
    }
    late
}

/// `sum_c w(c) miss(c, e)` at one elapsed time `e`.
#[allow(clippy::too_many_arguments)]
fn node_late(
    lambda: f64,
    s_ms: f64,
    full: f64,
    batch: usize,
    e: f64,
    m_late: usize,
    partial: Option<(usize, usize)>,
    scratch: &mut Scratch,
) -> f64 {
    let Scratch { ahead, total, weights, suffix, before, reciprocal, .. } = scratch;
    let n = weights.len();
    ahead.set(lambda * e);
    let (lo, hi) = (ahead.lo(), ahead.hi());
    let sf = ahead.sf_window();
    // Term 1: j = c + n >= m_late B. Weights from k0 - lo up surely are;
    // those in [k0 - hi, k0 - lo) are by the survival function of n.
    let k0 = m_late * batch;
    let c_sure = k0.saturating_sub(lo).min(n);
    let mut value = suffix[c_sure];
    let c_from = k0.saturating_sub(hi);
    if c_from < c_sure {
        let (newest, oldest) = (k0 - (c_sure - 1) - lo, k0 - c_from - lo);
        value += weights[c_from..c_sure].iter().zip(sf[newest..=oldest].iter().rev()).map(|(w, p)| w * p).sum::<f64>();
    }
    // Term 2: the band that meets t only when its batch is small enough.
    let Some((m, q)) = partial else { return value };
    let band = m * batch;
    let c_first = band.saturating_sub(hi);
    let c_last = (band + batch - 1).min(n - 1);
    if c_first > c_last {
        return value;
    }
    let sf_ahead = |k: i64| ahead.sf(k);
    let u = s_ms + m as f64 * full;
    let a_max = band - c_first;
    let a_min = band as i64 - c_last as i64;
    let beyond_q = survival(q + 1, lambda * (u - e));
    total.set_for(lambda * u, (a_min.min(0) + q as i64).max(0) as usize, a_max + q);
    let (band, q, batch) = (band as i64, q as i64, batch as i64);
    if total.lo() > a_max + q as usize {
        // K >= a + q surely: D(a) = P(n < a) P(N' > q).
        // Folded in order onto `value` (the same sum as a loop, but kept in a register).
        return weights[c_first..=c_last].iter().zip(c_first..).fold(value, |value, (w, c)| {
            let a = band - c as i64;
            let part = 1.0 - beyond_q * (1.0 - sf_ahead(a)) - sf_ahead(a + batch);
            value + w * part.max(0.0)
        });
    }
    // before[a] = D(a), a = 0..=a_max, by its recursion; b = P(Bin(a + q,
    // beta) = a) in logarithms while it underflows, `below` its running
    // sum P(Bin(a + q, beta) <= a - 1).
    let beta = e / u;
    let top = a_max + q as usize + 2;
    while reciprocal.len() <= top {
        let next = reciprocal.len().max(1);
        reciprocal.push(1.0 / next as f64);
    }
    before.clear();
    before.push(0.0);
    let (ln_beta, ln_rest) = (beta.ln(), (1.0 - beta).ln());
    let mut log_b = q as f64 * ln_rest;
    let mut b = if log_b > -700.0 { log_b.exp() } else { 0.0 };
    let mut linear = b > 0.0;
    let mut below = 0.0;
    let mut d = 0.0;
    for a in 0..a_max {
        let step_in = ahead.pmf(a as i64) * beyond_q;
        let step_out = total.pmf(a as i64 + q) * below;
        d += step_in - step_out;
        before.push(d);
        let ratio = (a + q as usize + 1) as f64 * reciprocal[a + 1];
        if linear {
            below += (1.0 - beta) * b;
            b *= beta * ratio;
        } else {
            log_b += ln_beta + ratio.ln();
            if log_b > -700.0 {
                b = log_b.exp();
                linear = true;
            }
        }
    }
    weights[c_first..=c_last].iter().zip(c_first..).fold(value, |value, (w, c)| {
        let a = band - c as i64;
        let d = if a > 0 { before[a as usize] } else { 0.0 };
        let part = total.sf(a + q) - d - sf_ahead(a + batch);
        value + w * part.max(0.0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shape::SegmentShape;

    /// `sum_c w(c) miss(c, e)` by direct sums over the requests ahead and
    /// the arrivals that fill the batch.
    fn node_by_sums(process: &Process, lambda: f64, s_ms: f64, e: f64, t_ms: f64, weights: &[f64]) -> f64 {
        let batch = process.batch();
        let full = process.full_ms();
        let ahead = Poisson::new(lambda * e);
        let mut value = 0.0;
        for (c, &w) in weights.iter().enumerate() {
            for (i, &p) in ahead.pmf_window().iter().enumerate() {
                let j = c + ahead.lo() + i;
                let m = j / batch;
                let u = s_ms + m as f64 * full;
                let filling = Poisson::new(lambda * (u - e));
                let mut late = 0.0;
                for (k, &pk) in filling.pmf_window().iter().enumerate() {
                    let size = (j - m * batch + 1 + filling.lo() + k).min(batch);
                    let latency = u - e + process.latency_ms(process.level_of(size));
                    if latency > t_ms {
                        late += pk;
                    }
                }
                value += w * p * late;
            }
        }
        value
    }

    #[test]
    fn node_recursion_matches_direct_sums() {
        let cases = [
            (
                SegmentShape::new(1, vec![(1, 5.0), (2, 6.0), (4, 9.0), (8, 15.0), (16, 27.0)]).unwrap(),
                0.9,
                vec![20.0, 33.0, 61.0, 80.0],
                vec![9.0, 27.0],
            ),
            // Far bands: the batch surely fills (the fast path).
            (
                SegmentShape::new(1, vec![(1, 5.0), (16, 12.0), (64, 40.0)]).unwrap(),
                0.95,
                vec![70.0, 150.0],
                vec![12.0, 40.0],
            ),
        ];
        let weights: Vec<f64> = (0..200).map(|c| (-(c as f64) / 9.0).exp() * (1.0 + (c % 5) as f64)).collect();
        let mut scratch = Scratch::default();
        for (shape, rho, ts, ss) in &cases {
            let process = Process::of(shape);
            let (first, full, batch) = (process.first_ms(), process.full_ms(), process.batch());
            let lambda = rho * process.full_rate_per_ms();
            for &t_ms in ts {
                for &s_ms in ss {
                    for e in [0.03, 0.4, 0.87].map(|f| f * s_ms) {
                        let a = (t_ms - s_ms - first + e) / full;
                        let m_late = (a.floor() + 1.0).max(0.0) as usize;
                        let slack = (full - first) / full;
                        let partial = (a.floor() >= 0.0 && (a - slack).floor() < a.floor()).then(|| {
                            let m = a.floor() as usize;
                            (m, process.largest_batch_within(t_ms - s_ms - m as f64 * full + e))
                        });
                        scratch.weights = weights.clone();
                        scratch.suffix = vec![0.0; weights.len() + 1];
                        for c in (0..weights.len()).rev() {
                            scratch.suffix[c] = scratch.suffix[c + 1] + weights[c];
                        }
                        let fast = node_late(lambda, s_ms, full, batch, e, m_late, partial, &mut scratch);
                        let slow = node_by_sums(&process, lambda, s_ms, e, t_ms, &weights);
                        assert!((fast - slow).abs() < 1e-11, "t {t_ms} S {s_ms} e {e}: {fast} vs {slow}");
                    }
                }
            }
        }
    }

    #[test]
    fn the_default_quadrature_matches_a_fine_one() {
        let shapes = [
            SegmentShape::new(1, vec![(1, 9.0), (4, 10.0), (16, 12.0), (64, 38.0), (128, 72.0), (256, 143.0)]).unwrap(),
            SegmentShape::new(1, vec![(1, 14.0), (2, 18.0), (4, 24.0), (8, 37.0), (16, 64.0)]).unwrap(),
            SegmentShape::new(1, vec![(1, 10.0), (2, 11.0), (4, 16.0)]).unwrap(),
        ];
        let mut scratch = Scratch::default();
        for shape in &shapes {
            let process = Process::of(shape);
            for rho in [0.5, 0.8, 0.97] {
                let mut chain = Stationary::new(&process, rho * process.full_rate_per_ms()).unwrap();
                for multiple in [1.3, 2.5, 6.0] {
                    let t_ms = process.first_ms() + multiple * process.full_ms();
                    let fine = miss_probability_at(&mut chain, t_ms, &mut scratch, Resolution::FINE);
                    let default = miss_probability(&mut chain, t_ms, &mut scratch);
                    // Relative where it matters (percentiles up to p99.99),
                    // absolute below.
                    let error = (default - fine).abs() / fine.max(1e-4);
                    assert!(error < 1e-4, "{shape:?} rho {rho} t {t_ms}: {default} vs {fine}");
                }
            }
        }
    }

    #[test]
    fn at_the_first_latency_only_the_idle_arrivals_meet_it() {
        let shapes = [
            SegmentShape::new(1, vec![(1, 9.0), (4, 10.0), (16, 12.0), (64, 38.0)]).unwrap(),
            SegmentShape::new(2, vec![(1, 14.0), (2, 18.0), (4, 24.0), (8, 37.0), (16, 64.0)]).unwrap(),
        ];
        let mut scratch = Scratch::default();
        for shape in &shapes {
            let process = Process::of(shape);
            for rho in [0.05, 0.4, 0.9] {
                let mut chain = Stationary::new(&process, rho * process.full_rate_per_ms()).unwrap();
                let busy = 1.0 - chain.idle_share();
                let integrated = miss_probability(&mut chain, process.first_ms(), &mut scratch);
                assert!(busy > 0.0 && busy <= 1.0, "{shape:?} rho {rho}: busy {busy}");
                assert!((integrated - busy).abs() < 1e-9, "{shape:?} rho {rho}: {integrated} vs {busy}");
            }
        }
    }
}
