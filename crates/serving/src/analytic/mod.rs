//! The exact percentile latency of a segment under Poisson arrivals, and
//! the highest rate at which it meets a percentile SLO.
//!
//! # The model
//!
//! A service's requests reach its segments at random in proportion to
//! routing weights, and within a segment a Kubernetes Service picks one of
//! the `procs` MPS processes at random ([`crate::Discipline::RandomPerProcess`]);
//! each process keeps its own FIFO queue. Random splitting of a Poisson
//! stream gives each process an independent Poisson stream of rate
//! `lambda = rate / procs`, so a segment is `procs` independent copies of
//! one single-server queue, and its percentile latency is that queue's.
//!
//! The queue batches greedily: when the process is free and `n >= 1`
//! requests wait, it takes the first `k = min(n, B)` and runs for
//! `S_k = shape.latency_ms(k)` (deterministic, non-decreasing in `k`);
//! when none wait it idles, and the next arrival starts a batch of one at
//! once. A request's latency `T` is its wait plus its batch's run time.
//! Batch sizes of equal latency form one *level* (`process`).
//!
//! # The method
//!
//! 1. **The queue at service starts** (`chain`). `X`, the requests waiting
//!    when a batch starts, is a Markov chain: from `x <= B` it goes to
//!    `A ~ Poisson(lambda S_x)` (to 1 if `A = 0`: the server idles, then
//!    serves the next arrival alone), from `x = B + c` to `c + A`,
//!    `A ~ Poisson(mu)`, `mu = lambda S_B`. It is stable iff `mu < B`.
//!    Above `B` it is the random walk `x - B + A`, whose strict descending
//!    ladder heights `h_1..h_B` are the coefficients of the monic polynomial
//!    whose roots are the `B` roots of `z^B = exp(mu (z - 1))` in the unit
//!    disk (Wiener–Hopf; `ladder`: Newton's method per root, the polynomial
//!    evaluated on the unit circle, coefficients by the inverse DFT). From
//!    them: the chain censored on the boundary `1..=B` (a jump above `B`
//!    comes back by ladder steps), whose rows depend only on the level, so
//!    its stationary vector follows from one small level-to-level matrix
//!    (GTH elimination, no subtractions); the states above `B` by
//!    Ramaswami's recursion on the chain censored on `1..=y` (positive terms
//!    only, so stable); and the total mass above `B` in closed form from the
//!    mean drift, `sum_{x>B} pi(x) = sum_{x<=B} pi(x) (lambda S_x + e^(-lambda S_x) - x) / (B - mu)`.
//!    Nothing is truncated but Poisson terms below `1e-21`.
//! 2. **What an arrival sees** (`latency`). By PASTA it finds the server
//!    idle for the time-average idle fraction, or a batch that started in
//!    state `x` (weight `pi(x)`) `e` ms ago, `e` uniform over its run
//!    `[0, S)`, with `j = max(x - B, 0) + Poisson(lambda e)` requests ahead.
//!    With `m = floor(j / B)` its batch starts `U_m = S + m S_B` after that
//!    batch did (the `m` batches ahead are full), whatever `e`, and holds
//!    `min(B, j - m B + 1 + Poisson(lambda (U_m - e)))` requests. So
//!    `P(T > t) = [sum_x pi(x) int_0^S P(miss | x, e) de] / E[cycle]`. Per
//!    `e` the inner probability is in closed form: at most one band `m` is
//!    neither surely late nor surely on time, and its term needs
//!    `P(n < a, K >= a + q)` for every count `a` ahead, a recursion of `O(1)`
//!    per `a` (given the total `K` of arrivals by the band's start, the
//!    arrivals before the tagged one are binomial). The integral over `e` is
//!    split where the band or the largest batch that meets `t` change (the
//!    integrand is smooth between) and taken by 4-point Gauss–Legendre rules
//!    on panels of at most `max(8, sqrt(lambda S) / 2)` expected arrivals.
//!    States from `B (1 + ceil((t - S_1) / S_B))` up are surely late: their
//!    mass comes from the drift identity, not a sum. (The recursion stops
//!    early where the tail has become negligible, and at four million
//!    states, beyond which arrivals are counted as late: conservative, and
//!    reached only by absurd SLOs or loads within a hair of full; `t` is
//!    taken no larger than four full batches past that, where `P(T > t)`
//!    hardly falls any more.) A shape whose batches spread
//!    ([`SegmentShape::p99_ratio`] `r`) is this queue with every latency
//!    `(r - 1) S_B` longer: `P(T > t)` is taken at `t - (r - 1) S_B`.
//! 3. **Searches** (`search`). The percentile latency is the smallest `t`
//!    with `P(T > t) <= 1 - p/100` (Brent's method on `t` against
//!    `ln P(T > t)`, nearly linear in `t` where the tail is exponential, to a
//!    relative precision of `1e-9`, from above). Its bracket starts at `S_1`,
//!    where `P(T > S_1)` is the busy share of time (PASTA: only an arrival
//!    that finds the process idle takes `S_1`), and, with the SLO known to be
//!    met, ends at the SLO. The capacity is the largest rate with
//!    `P(T > slo) <= 1 - p/100`; `P(T > slo)` rises with the rate (checked by
//!    the tests), and the search (Brent's method on `-ln(1 - rho)` against
//!    `ln P(T > slo)`, `rho = mu / B`, from a heavy-traffic first guess)
//!    keeps a bracket whose low end always meets the SLO and stops when the
//!    bracket is `1e-3` wide (relative): it returns the low end, never above
//!    the true capacity. No load above `1 - 1e-3` is tried: a segment that
//!    meets its SLO there is within the tolerance of its capacity. Usually
//!    3 to 5 rates are evaluated.
//! 4. **A service** (`service`): [`predict_service`] tabulates each of its
//!    segments' queues once, evaluates each at the SLO, and searches for the
//!    percentile latency on the segment that misses most first, then only
//!    on a segment whose requests still outlast that latency too often.
//!
//! Cost per rate: `O(B^2)` for the roots and ladder heights, `O(B h)` for
//! the boundary (`h` the Poisson spread above `B`), `O(B t / S_B)` states
//! times that spread for the recursion, and a few dozen to a few hundred
//! quadrature nodes of `O(B + spread)` each.
//!
//! # What the model shows about batching profiles
//!
//! Where a profile's batch latency roughly doubles with its batch size, each
//! level can sustain itself (a level's batches leave about as many requests
//! behind as it holds), and the queue switches between levels only through
//! rare arrival counts, every hundred thousand requests or so. A percentile
//! near such a switch is exact here but takes billions of simulated
//! requests to see; the same holds near full load, where the tail comes
//! from long excursions of the queue.
//!
//! # Precision
//!
//! Checked by the tests: the ladder heights against the killed random walk,
//! the chain against power iteration and dense GTH elimination (to `1e-8`,
//! also at 99.2% load and in a profile that switches between levels), the
//! per-`e` recursion against direct double sums, the quadrature against a
//! much finer one (`1e-4`), M/D/1 against Erlang's formula (to `1e-8`, and
//! to `1e-9` at 99-99.7% load against the formula in 400-digit arithmetic),
//! the whole `P(T > t)` against a brute-force oracle (dense chain, direct
//! sums, a midpoint rule between the jumps in `e`), and against a
//! request-level simulation of ParvaGPU's configurations at their
//! capacities.

mod cache;
mod chain;
mod ladder;
mod latency;
mod poisson;
mod process;
mod search;
mod service;

pub use cache::{AttainmentCache, CapacityCache, ATTAINMENT_TOLERANCE};
pub use service::{predict_service, SegmentsPrediction};

use crate::error::ServingError;
use crate::shape::SegmentShape;
use latency::Scratch;
use process::Process;

/// The `percentile`-th percentile latency (ms) of a segment of `shape`
/// whose processes share `rate_rps` requests per second at random (Poisson
/// arrivals). `f64::INFINITY` when a process's share reaches its full-batch
/// throughput (or comes so close that the percentile lies beyond four
/// million waiting requests, which the model does not tabulate); `S_1` (a
/// lone request's latency) at rate 0.
///
/// # Errors
/// A rate that is negative or not finite, a percentile outside `(0, 100)`.
pub fn percentile_latency_ms(shape: &SegmentShape, rate_rps: f64, percentile: f64) -> Result<f64, ServingError> {
    check_rate(rate_rps)?;
    let late = check_percentile(percentile)?;
    let process = Process::of(shape);
    Ok(search::latency_at(&process, per_process_per_ms(shape, rate_rps), late))
}

/// The fraction of requests whose latency is at most `latency_slo_ms`
/// when a segment of `shape` serves `rate_rps` (Poisson arrivals); 0 when
/// the processes cannot keep up.
///
/// # Errors
/// A rate or SLO that is negative or not finite.
pub fn attainment(shape: &SegmentShape, rate_rps: f64, latency_slo_ms: f64) -> Result<f64, ServingError> {
    check_rate(rate_rps)?;
    check_slo(latency_slo_ms)?;
    let process = Process::of(shape);
    let miss = search::miss_at(&process, per_process_per_ms(shape, rate_rps), latency_slo_ms, &mut Scratch::default());
    Ok(1.0 - miss)
}

/// Whether a segment of `shape` serving `rate_rps` (Poisson arrivals)
/// keeps its `percentile`-th percentile latency within `latency_ms`:
/// `P(T > latency_ms) <= 1 - percentile / 100`, the same verdict as
/// [`percentile_latency_ms`]` <= latency_ms` from one evaluation of the
/// queue instead of a search (what a check needs; false when the
/// processes cannot keep up).
///
/// # Errors
/// A rate or latency that is negative or not finite, a percentile outside
/// `(0, 100)`.
pub fn meets_percentile(
    shape: &SegmentShape,
    rate_rps: f64,
    percentile: f64,
    latency_ms: f64,
) -> Result<bool, ServingError> {
    check_rate(rate_rps)?;
    let late = check_percentile(percentile)?;
    check_slo(latency_ms)?;
    let process = Process::of(shape);
    let miss = search::miss_at(&process, per_process_per_ms(shape, rate_rps), latency_ms, &mut Scratch::default());
    Ok(miss <= late)
}

/// The largest uniform slowdown `s` in `range` of a segment's batches
/// (every batch `1 + s` times its profiled latency; negative is faster) at
/// which a segment of `shape` serving `rate_rps` (Poisson arrivals) keeps
/// its `percentile`-th percentile latency within `latency_ms`: the same
/// verdict as [`meets_percentile`] on `shape.slowed_by(s)`, to within
/// 0.1% (of batch time) from below. `range.0` when it misses even there,
/// `range.1` when it meets there.
///
/// # Errors
/// A rate or latency that is negative or not finite, a percentile outside
/// `(0, 100)`, a range that is not `-1 < low < high` and finite.
pub fn tolerance(
    shape: &SegmentShape,
    rate_rps: f64,
    percentile: f64,
    latency_ms: f64,
    range: (f64, f64),
) -> Result<f64, ServingError> {
    check_rate(rate_rps)?;
    let late = check_percentile(percentile)?;
    check_slo(latency_ms)?;
    let (low, high) = range;
    if !(low.is_finite() && high.is_finite() && -1.0 < low && low < high) {
        return Err(ServingError::invalid("range", format!("({low}, {high}) is not -1 < low < high")));
    }
    let process = Process::of(shape);
    Ok(search::tolerance(&process, per_process_per_ms(shape, rate_rps), late, latency_ms, range))
}

/// What the model predicts of a segment at one rate: its percentile
/// latency and its attainment of an SLO.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prediction {
    /// The percentile latency, ms ([`percentile_latency_ms`], to `1e-6`).
    pub latency_ms: f64,
    /// The share of requests within the SLO ([`attainment`]).
    pub attainment: f64,
}

/// [`percentile_latency_ms`] and [`attainment`] together, from one
/// tabulation of the queue, and faster than apart: when the SLO is met it
/// bounds the latency search from above, and the latency is found to a
/// relative precision of `1e-6` (from above) rather than `1e-9`.
///
/// # Errors
/// As [`percentile_latency_ms`] and [`attainment`].
pub fn predict(
    shape: &SegmentShape,
    rate_rps: f64,
    percentile: f64,
    latency_slo_ms: f64,
) -> Result<Prediction, ServingError> {
    check_rate(rate_rps)?;
    let late = check_percentile(percentile)?;
    check_slo(latency_slo_ms)?;
    let process = Process::of(shape);
    let lambda = per_process_per_ms(shape, rate_rps);
    let (latency_ms, miss) =
        search::latency_and_miss(&process, lambda, late, Some(latency_slo_ms), search::PREDICTION_TOLERANCE);
    Ok(Prediction { latency_ms, attainment: 1.0 - miss })
}

/// The highest rate (requests per second, the whole segment) at which a
/// segment of `shape` keeps its `percentile`-th percentile latency within
/// `latency_slo_ms` under Poisson arrivals: 0 when a lone request misses
/// (`S_1 > latency_slo_ms`), below the full-batch throughput otherwise.
/// Found to a relative precision of `1e-3`, from below: it never exceeds
/// the true capacity.
///
/// # Errors
/// A percentile outside `(0, 100)`, an SLO that is negative or not finite.
pub fn capacity_rps(shape: &SegmentShape, percentile: f64, latency_slo_ms: f64) -> Result<f64, ServingError> {
    let late = check_percentile(percentile)?;
    check_slo(latency_slo_ms)?;
    let process = Process::of(shape);
    Ok(search::capacity_per_ms(&process, late, latency_slo_ms) * f64::from(shape.procs()) * 1000.0)
}

/// One process's share of `rate_rps`, in requests per ms.
fn per_process_per_ms(shape: &SegmentShape, rate_rps: f64) -> f64 {
    rate_rps / f64::from(shape.procs()) / 1000.0
}

/// A rate must be finite and not negative.
fn check_rate(rate_rps: f64) -> Result<(), ServingError> {
    if rate_rps.is_finite() && rate_rps >= 0.0 {
        Ok(())
    } else {
        Err(ServingError::invalid("rate_rps", format!("{rate_rps} is not a rate (finite, >= 0 requests/s)")))
    }
}

/// A percentile must lie strictly between 0 and 100; returns the fraction
/// of requests allowed to miss, `1 - percentile / 100`.
pub(crate) fn check_percentile(percentile: f64) -> Result<f64, ServingError> {
    if percentile.is_finite() && percentile > 0.0 && percentile < 100.0 {
        Ok(1.0 - percentile / 100.0)
    } else {
        Err(ServingError::invalid("percentile", format!("{percentile} is not strictly between 0 and 100")))
    }
}

/// A latency objective must be finite and not negative.
pub(crate) fn check_slo(latency_slo_ms: f64) -> Result<(), ServingError> {
    if latency_slo_ms.is_finite() && latency_slo_ms >= 0.0 {
        Ok(())
    } else {
        Err(ServingError::invalid("latency_slo_ms", format!("{latency_slo_ms} is not a latency (finite, >= 0 ms)")))
    }
}
