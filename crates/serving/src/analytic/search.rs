//! The two searches: the latency at a percentile (over `t`, one arrival
//! rate) and the capacity at a percentile and SLO (over the rate).

use super::chain::{Stationary, MAX_CARRIES};
use super::latency::{miss_probability, Scratch};
use super::process::Process;
use tessera_core::plan::TOLERANCE_PRECISION;

/// Relative width at which the capacity search stops: the capacity it
/// returns is the lower end of a bracket this narrow around the true one.
pub(crate) const CAPACITY_TOLERANCE: f64 = 1e-3;

/// Relative width at which the percentile search stops.
pub(crate) const LATENCY_TOLERANCE: f64 = 1e-9;

/// Relative width at which the percentile search of a prediction stops
/// (a figure for reports, read to a few digits).
pub(crate) const PREDICTION_TOLERANCE: f64 = 1e-6;

/// `P(T > t_ms)` at `lambda` requests per ms (1 when the process cannot keep up).
pub(crate) fn miss_at(process: &Process, lambda: f64, t_ms: f64, scratch: &mut Scratch) -> f64 {
    if lambda <= 0.0 {
        return if process.lone_ms() > t_ms { 1.0 } else { 0.0 };
    }
    match Stationary::new(process, lambda) {
        Some(mut chain) => miss_probability(&mut chain, t_ms, scratch),
        None => 1.0,
    }
}

/// The smallest `t` with `P(T > t) <= late` at `lambda` requests per ms
/// (`late = 1 - percentile / 100`); infinite when the process cannot keep
/// up, or when `t` lies beyond [`MAX_CARRIES`] waiting requests.
pub(crate) fn latency_at(process: &Process, lambda: f64, late: f64) -> f64 {
    latency_and_miss(process, lambda, late, None, LATENCY_TOLERANCE).0
}

/// The percentile latency of [`latency_at`], to a relative precision of
/// `tolerance` (from above), and, when `slo_ms` is given, `P(T > slo_ms)`
/// ([`miss_at`]), from one tabulation of the queue. When
/// the SLO is met, `[S_1, slo_ms]` brackets the latency at once and the
/// search skips widening its bracket: about half the evaluations of
/// asking for both apart.
pub(crate) fn latency_and_miss(
    process: &Process,
    lambda: f64,
    late: f64,
    slo_ms: Option<f64>,
    tolerance: f64,
) -> (f64, f64) {
    if lambda <= 0.0 {
        let first = process.lone_ms();
        let miss = slo_ms.map_or(f64::NAN, |slo| if first > slo { 1.0 } else { 0.0 });
        return (first, miss);
    }
    let Some(mut chain) = Stationary::new(process, lambda) else {
        return (f64::INFINITY, 1.0);
    };
    let mut scratch = Scratch::default();
    let at_slo = slo_ms.map(|slo| (slo, miss_probability(&mut chain, slo, &mut scratch)));
    let latency_ms = latency_on(&mut chain, late, at_slo, tolerance, &mut scratch);
    (latency_ms, at_slo.map_or(f64::NAN, |(_, miss)| miss))
}

/// The smallest `t` with `P(T > t) <= late` on `chain`, to a relative
/// precision of `tolerance` (from above); `at_slo`, a `(t, P(T > t))`
/// already evaluated, bounds the search from above when `P(T > t) <= late`.
/// Infinite when `t` lies beyond [`MAX_CARRIES`] waiting requests.
pub(crate) fn latency_on(
    chain: &mut Stationary<'_>,
    late: f64,
    at_slo: Option<(f64, f64)>,
    tolerance: f64,
    scratch: &mut Scratch,
) -> f64 {
    let process = chain.process();
    let first = process.lone_ms();
    // Below S_1 (and the allowance) every arrival misses; there only those
    // that find the process idle meet it.
    let at_first = 1.0 - chain.idle_share();
    if at_first <= late {
        return first;
    }
    let mut miss = |t: f64| miss_probability(chain, t, scratch);
    let (mut lo, mut lo_value) = (first, at_first);
    let known_high = at_slo.filter(|&(slo, value)| slo > first && value <= late);
    let (hi, hi_value) = match known_high {
        Some(high) => high,
        None => {
            let mut gap = process.full_ms();
            loop {
                let t = first + gap;
                if ((t - first) / process.full_ms()).ceil() * process.batch() as f64 > MAX_CARRIES as f64 {
                    // Beyond what the model tabulates (see MAX_CARRIES).
                    return f64::INFINITY;
                }
                let value = miss(t);
                if value <= late {
                    break (t, value);
                }
                (lo, lo_value) = (t, value);
                gap *= 2.0;
            }
        }
    };
    // Brent's method on ln P(T > t) - ln late, continuous above S_1 and,
    // the tail being roughly exponential, nearly linear in t.
    let target = late.ln();
    let g = |t: f64| miss(t).max(1e-300).ln() - target;
    let log = |value: f64| value.max(1e-300).ln() - target;
    let close = |meets: f64, misses: f64| (meets - misses).abs() <= tolerance * meets;
    brent(g, (lo, log(lo_value)), (hi, log(hi_value)), close, |meets| 0.25 * tolerance * meets)
}

/// The largest arrival rate (requests per ms) with `P(T > t_ms) <= late`,
/// to [`CAPACITY_TOLERANCE`], from below; 0 when a lone request misses.
///
/// The search runs on `y = -ln(1 - rho)`, `rho = lambda S_B / B` the load
/// (so that loads near 1 are as easy to resolve as small ones), against
/// `g(y) = ln P(T > t) - ln late`, increasing in `y`. It keeps a bracket
/// whose low end meets the SLO (`g <= 0`) and whose high end does not,
/// shrinks it by Brent's method (inverse quadratic and secant steps,
/// bisection when they stall; `P(T > t)` can rise almost like a step where
/// the queue switches between a small-batch and a full-batch regime), and
/// returns the low end once the bracket's loads are within the tolerance.
pub(crate) fn capacity_per_ms(process: &Process, late: f64, t_ms: f64) -> f64 {
    if process.lone_ms() > t_ms {
        return 0.0;
    }
    let full_rate = process.full_rate_per_ms();
    let mut scratch = Scratch::default();
    let target = late.ln();
    let rho_of = |y: f64| -(-y).exp_m1();
    let mut g = |y: f64| {
        let miss = miss_at(process, rho_of(y) * full_rate, t_ms, &mut scratch);
        miss.max(1e-300).ln() - target
    };
    // A first guess from heavy traffic: above the boundary the queue's
    // tail decays like exp(-theta x), rho = theta / (e^theta - 1), and a
    // request that finds x waiting leaves about x S_B / B later.
    let batch = process.batch() as f64;
    let full = process.full_ms();
    let theta = -late.ln() * full / (batch * (t_ms - process.allowance_ms() - full).max(0.5 * full));
    // No load above 1 - CAPACITY_TOLERANCE is tried: a segment that meets
    // its SLO there has its capacity within the tolerance of it (none is
    // above the full-batch throughput), and loads closer to full need ever
    // longer tables (an SLO of a billion batches would never finish).
    let y_max = -CAPACITY_TOLERANCE.ln();
    let guess = (theta / theta.exp_m1()).clamp(0.3, rho_of(y_max));
    // Then outwards, by secant steps (at least 0.35 and at most 3 in y),
    // until the root is bracketed.
    let mut y = -(1.0 - guess).ln();
    let mut value = g(y);
    let mut step: f64 = if value > 0.0 { -0.35 } else { 0.35 };
    let (mut low, mut g_low, mut high, mut g_high) = (f64::NAN, f64::NAN, f64::NAN, f64::NAN);
    loop {
        if value > 0.0 {
            (high, g_high) = (y, value);
        } else {
            (low, g_low) = (y, value);
            if y >= y_max {
                return rho_of(y) * full_rate;
            }
        }
        if !low.is_nan() && !high.is_nan() {
            break;
        }
        let next = if y + step <= 0.0 { 0.25 * y } else { (y + step).min(y_max) };
        if rho_of(next) < 1e-12 {
            return 0.0;
        }
        let next_value = g(next);
        // The secant through the last two points, kept moving the same way.
        let slope = (next_value - value) / (next - y);
        let reach = if slope > 0.0 { -next_value / slope } else { 3.0 * step.signum() };
        step = if step > 0.0 { reach.clamp(0.35, 3.0) } else { reach.clamp(-3.0, -0.35) };
        (y, value) = (next, next_value);
    }
    let close = |meets: f64, misses: f64| rho_of(misses) <= rho_of(meets) * (1.0 + CAPACITY_TOLERANCE);
    // A step in y of this size moves the load by a quarter of the tolerance.
    let step_min = |meets: f64| 0.25 * CAPACITY_TOLERANCE * rho_of(meets) / (1.0 - rho_of(meets));
    rho_of(brent(g, (low, g_low), (high, g_high), close, step_min)) * full_rate
}

/// The largest slowdown `s` in `[low, high]` (every batch `1 + s` times
/// its profiled latency) at which `P(T > t_ms) <= late` at `lambda`
/// requests per ms, to [`TOLERANCE_PRECISION`] from below: `low` when it
/// misses there, `high` when it meets there (`-1 < low < high`).
///
/// A process whose batches all take `c` times longer serves `lambda` as
/// the profiled one serves `lambda c` with every latency `c` times longer,
/// so `P(T_s > t) = P(T_0(lambda c) > t / c)`: the process is tabulated
/// once. The search starts at the profiled speed (most segments meet
/// there), caps the bracket where the full batches stop keeping up, and
/// shrinks it by Brent's method on `ln P(T > t) - ln late`.
pub(crate) fn tolerance(process: &Process, lambda: f64, late: f64, t_ms: f64, (low, high): (f64, f64)) -> f64 {
    if lambda <= 0.0 {
        // Only a lone request's latency counts.
        return (t_ms / process.lone_ms() - 1.0).clamp(low, high);
    }
    let mut scratch = Scratch::default();
    let target = late.ln();
    let mut g = |slowdown: f64| {
        let factor = 1.0 + slowdown;
        miss_at(process, lambda * factor, t_ms / factor, &mut scratch).max(1e-300).ln() - target
    };
    // At or past this slowdown the full batches cannot keep up: it misses.
    let unstable = process.full_rate_per_ms() / lambda - 1.0;
    if unstable <= low {
        return low;
    }
    let start = 0.0_f64.clamp(low, high.min(unstable));
    let at_start = g(start);
    let (meets, misses) = if at_start <= 0.0 {
        let (top, at_top) = if high < unstable { (high, g(high)) } else { (unstable, -target) };
        if at_top <= 0.0 {
            return high;
        }
        ((start, at_start), (top, at_top))
    } else {
        if start <= low {
            return low;
        }
        let at_low = g(low);
        if at_low > 0.0 {
            return low;
        }
        ((low, at_low), (start, at_start))
    };
    let close = |meets: f64, misses: f64| (misses - meets).abs() <= TOLERANCE_PRECISION;
    brent(g, meets, misses, close, |_| 0.25 * TOLERANCE_PRECISION)
}

/// Brent's method (inverse quadratic and secant steps, bisection when they
/// stall) for the root of `g` in a bracket whose ends `one` and `other`
/// (each `(x, g(x))`) have values of opposite signs. It keeps an end that
/// *meets* (`g <= 0`) and one that misses, steps at least `step_min(meets)`,
/// and returns the end that meets once `close(meets, misses)`.
fn brent(
    mut g: impl FnMut(f64) -> f64,
    one: (f64, f64),
    other: (f64, f64),
    close: impl Fn(f64, f64) -> bool,
    step_min: impl Fn(f64) -> f64,
) -> f64 {
    // b is the best point, [b, c] the bracket, a the previous b.
    let (mut a, mut fa) = one;
    let (mut b, mut fb) = other;
    let (mut c, mut fc) = (b, fb);
    let mut d = b - a;
    let mut e = d;
    loop {
        if (fb > 0.0) == (fc > 0.0) {
            (c, fc) = (a, fa);
            d = b - a;
            e = d;
        }
        if fc.abs() < fb.abs() {
            (a, fa) = (b, fb);
            (b, fb) = (c, fc);
            (c, fc) = (a, fa);
        }
        let (meets, misses) = if fb > 0.0 { (c, b) } else { (b, c) };
        if close(meets, misses) {
            return meets;
        }
        let step_min = step_min(meets);
        let half = 0.5 * (c - b);
        if e.abs() >= step_min && fa.abs() > fb.abs() {
            let s = fb / fa;
            let (mut p, mut q) = if a == c {
                (2.0 * half * s, 1.0 - s)
            } else {
                let (q, r) = (fa / fc, fb / fc);
                (s * (2.0 * half * q * (q - r) - (b - a) * (r - 1.0)), (q - 1.0) * (r - 1.0) * (s - 1.0))
            };
            if p > 0.0 {
                q = -q;
            }
            p = p.abs();
            if 2.0 * p < (3.0 * half * q - (step_min * q).abs()).min((e * q).abs()) {
                e = d;
                d = p / q;
            } else {
                d = half;
                e = d;
            }
        } else {
            d = half;
            e = d;
        }
        (a, fa) = (b, fb);
        b += if d.abs() > step_min { d } else { step_min.copysign(half) };
        fb = g(b);
    }
}
