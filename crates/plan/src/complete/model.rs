//! The latency model behind profile completion, and its fit.
//!
//! The physics of the synthetic profiles (`tessera_core::synthetic`),
//! loosened to what measurements show. One batch of `b` requests in a
//! segment of `p` MPS processes in an instance of effective size `e` takes
//! the soft maximum (a smooth `max`, sharpness `n`) of three times:
//!
//! ```text
//! floor      L0                                   launch and framework overhead
//! alone      b · u · (e_max / e)^αu               one process's own compute
//! shared     p · (w0 · (e_max / e)^α0 + b · w · (e_max / e)^αw)
//!                                                 the instance's capacity, shared by p processes
//! latency_ms = (floor^n + alone^n + shared^n)^(1/n)
//! throughput_rps = 1000 · p · b / latency_ms       (batches back to back in every process)
//! ```
//!
//! The effective size `e` is the geometric mean of an instance's compute
//! and memory slices: a 4g and a 3g instance share four memory slices, and
//! measured capacity grows by about as much from one to the other as the
//! geometric mean does. Eight parameters: `ln L0`, `ln u`, `αu`, `ln w0`,
//! `α0`, `ln w`, `αw`, `ln n`. They are fitted by Levenberg–Marquardt to
//! the log latency and log throughput of a model's measured points, with a
//! Gaussian prior on the parameters (from the other models' fits, see
//! `complete`), so that a few points suffice. Measurements are not always
//! clean (ParvaGPU's profiles hold points at twice their neighbours'
//! throughput), so the fit is robust: iteratively reweighted, a point's
//! weight falls as its residual grows beyond [`HUBER_LIMIT`] noise units
//! (Huber's loss).

use super::linalg::{cholesky, solve, Matrix};

/// Number of parameters.
pub(crate) const PARAMETERS: usize = 8;

/// The parameters, in fit space (logs of times, exponents, log sharpness).
pub(crate) type Theta = [f64; PARAMETERS];

/// Standard deviation of one measurement's log latency or log throughput
/// around the model (measurement noise and model error together); it
/// weighs the data against the prior.
const NOISE_SD: f64 = 0.05;

/// Residuals (in noise units) beyond which a point's weight falls.
const HUBER_LIMIT: f64 = 2.0;

/// The largest ln residual that counts in full: a larger one is an outlier
/// as far as the robust fit and the residual smoothing are concerned.
pub(crate) const OUTLIER_LIMIT: f64 = HUBER_LIMIT * NOISE_SD;

/// Reweighting rounds of the robust fit.
const REWEIGHTING_ROUNDS: usize = 4;

/// Levenberg–Marquardt iterations at most.
const MAX_ITERATIONS: usize = 200;

/// Where a configuration sits in the model's coordinates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Coordinates {
    /// `ln(e_max / e)` of its instance size (0 for the largest).
    pub ln_scale: f64,
    /// Batch size.
    pub batch: f64,
    /// MPS processes.
    pub procs: f64,
}

impl Coordinates {
    /// `ln(1000 · p · b)`: throughput (req/s) = this − ln latency (ms).
    pub fn ln_work(&self) -> f64 {
        (1000.0 * self.procs * self.batch).ln()
    }
}

/// One measured point.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Observation {
    /// Where.
    pub at: Coordinates,
    /// ln of the batch latency, ms.
    pub ln_latency_ms: f64,
    /// ln of the segment's throughput, req/s.
    pub ln_throughput_rps: f64,
}

/// A Gaussian prior on the parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Prior {
    /// Means.
    pub mean: Theta,
    /// Standard deviations.
    pub sd: Theta,
}

impl Prior {
    /// A weak prior that holds any plausible model: times from 0.1 µs to
    /// seconds, exponents near 1, a sharpness near 3.
    pub fn weak() -> Prior {
        Prior { mean: [2.0, 0.0, 0.8, -1.0, 0.5, -1.0, 0.8, 3f64.ln()], sd: [3.0, 4.0, 0.5, 4.0, 0.5, 4.0, 0.5, 0.7] }
    }
}

/// ln latency (ms) of `at` under `theta`.
pub(crate) fn ln_latency(theta: &Theta, at: &Coordinates) -> f64 {
    let sharpness = theta[7].exp();
    let floor = theta[0];
    let alone = at.batch.ln() + theta[1] + theta[2] * at.ln_scale;
    let per_batch = (theta[3] + theta[4] * at.ln_scale).exp();
    let per_sample = (theta[5] + theta[6] * at.ln_scale).exp();
    let shared = at.procs.ln() + (per_batch + at.batch * per_sample).ln();
    let terms = [floor, alone, shared];
    let top = terms.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    top + terms.iter().map(|t| (sharpness * (t - top)).exp()).sum::<f64>().ln() / sharpness
}

/// The gradient of [`ln_latency`] in the parameters (central differences).
fn gradient(theta: &Theta, at: &Coordinates) -> Theta {
    const STEP: f64 = 1e-6;
    let mut gradient = [0.0; PARAMETERS];
    for (j, slot) in gradient.iter_mut().enumerate() {
        let (mut up, mut down) = (*theta, *theta);
        up[j] += STEP;
        down[j] -= STEP;
        *slot = (ln_latency(&up, at) - ln_latency(&down, at)) / (2.0 * STEP);
    }
    gradient
}

/// A fitted model.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Fit {
    /// The parameters.
    pub theta: Theta,
    /// The inverse of the Gauss–Newton Hessian at `theta` (the parameters'
    /// approximate posterior covariance).
    covariance: Matrix,
    /// Per observation, the leave-one-out residuals (prediction − measured)
    /// of ln latency and ln throughput, from the linearised refit without
    /// it.
    pub leave_one_out: Vec<(f64, f64)>,
}

impl Fit {
    /// ln latency at `at`, and the variance of that estimate from the
    /// parameters' uncertainty.
    pub fn predict(&self, at: &Coordinates) -> (f64, f64) {
        let g = gradient(&self.theta, at);
        (ln_latency(&self.theta, at), quadratic_form(&self.covariance, &g))
    }
}

/// `gᵀ M g`.
fn quadratic_form(m: &Matrix, g: &Theta) -> f64 {
    m.iter().zip(g).map(|(row, gi)| gi * row.iter().zip(g).map(|(a, gj)| a * gj).sum::<f64>()).sum()
}

/// The penalised cost: squared residuals of the data (in noise units) and
/// of the prior.
fn cost(theta: &Theta, observations: &[Observation], weights: &[f64], prior: &Prior) -> f64 {
    let data: f64 = observations
        .iter()
        .zip(weights)
        .map(|(o, weight)| {
            let (latency, throughput) = residuals(theta, o);
            weight * (latency * latency + throughput * throughput) / (NOISE_SD * NOISE_SD)
        })
        .sum();
    let prior: f64 = (0..PARAMETERS).map(|j| ((theta[j] - prior.mean[j]) / prior.sd[j]).powi(2)).sum();
    data + prior
}

/// The residuals (prediction − measured) of ln latency and ln throughput.
fn residuals(theta: &Theta, o: &Observation) -> (f64, f64) {
    let ln_latency = ln_latency(theta, &o.at);
    (ln_latency - o.ln_latency_ms, o.at.ln_work() - ln_latency - o.ln_throughput_rps)
}

/// The Gauss–Newton normal equations at `theta`: `JᵀJ` and `Jᵀr`.
fn normal_equations(theta: &Theta, observations: &[Observation], weights: &[f64], prior: &Prior) -> (Matrix, Theta) {
    let mut hessian = vec![vec![0.0; PARAMETERS]; PARAMETERS];
    let mut slope = [0.0; PARAMETERS];
    for (o, point_weight) in observations.iter().zip(weights) {
        let weight = point_weight / (NOISE_SD * NOISE_SD);
        let g = gradient(theta, &o.at);
        // d(latency residual) = g, d(throughput residual) = −g.
        let (latency, throughput) = residuals(theta, o);
        let residual_sum = latency - throughput;
        for i in 0..PARAMETERS {
            slope[i] += weight * g[i] * residual_sum;
            for j in 0..PARAMETERS {
                hessian[i][j] += 2.0 * weight * g[i] * g[j];
            }
        }
    }
    for j in 0..PARAMETERS {
        let precision = 1.0 / (prior.sd[j] * prior.sd[j]);
        hessian[j][j] += precision;
        slope[j] += precision * (theta[j] - prior.mean[j]);
    }
    (hessian, slope)
}

/// Fits the model to `observations` from `start` under `prior`, robustly.
pub(crate) fn fit(observations: &[Observation], prior: &Prior, start: &Theta) -> Fit {
    let mut weights = vec![1.0; observations.len()];
    let mut theta = *start;
    for _ in 0..REWEIGHTING_ROUNDS {
        theta = minimise(observations, &weights, prior, &theta);
        for (weight, o) in weights.iter_mut().zip(observations) {
            let (latency, throughput) = residuals(&theta, o);
            let size = 0.5 * (latency.abs() + throughput.abs()) / NOISE_SD;
            *weight = if size <= HUBER_LIMIT { 1.0 } else { HUBER_LIMIT / size };
        }
    }
    let (hessian, _) = normal_equations(&theta, observations, &weights, prior);
    let covariance = invert(&hessian);
    let leave_one_out = observations
        .iter()
        .zip(&weights)
        .map(|(o, weight)| {
            let g = gradient(&theta, &o.at);
            // Leverage of the point's two residual rows, which share the
            // gradient (with opposite signs): H_ii = q [[1, −1], [−1, 1]].
            let q = weight * quadratic_form(&covariance, &g) / (NOISE_SD * NOISE_SD);
            let (latency, throughput) = residuals(&theta, o);
            let scale = 1.0 / (1.0 - 2.0 * q).max(1e-6);
            (scale * ((1.0 - q) * latency - q * throughput), scale * ((1.0 - q) * throughput - q * latency))
        })
        .collect();
    Fit { theta, covariance, leave_one_out }
}

/// Levenberg–Marquardt from `start` on the weighted cost.
fn minimise(observations: &[Observation], weights: &[f64], prior: &Prior, start: &Theta) -> Theta {
    let mut theta = *start;
    let mut current = cost(&theta, observations, weights, prior);
    let mut damping = 1e-3;
    for _ in 0..MAX_ITERATIONS {
        let (hessian, slope) = normal_equations(&theta, observations, weights, prior);
        let mut improved = false;
        while damping < 1e10 {
            let mut damped = hessian.clone();
            for (j, row) in damped.iter_mut().enumerate() {
                row[j] *= 1.0 + damping;
            }
            let Some(factor) = cholesky(&damped) else {
                damping *= 10.0;
                continue;
            };
            let step = solve(&factor, &slope);
            let mut candidate = theta;
            for j in 0..PARAMETERS {
                candidate[j] -= step[j];
            }
            let candidate_cost = cost(&candidate, observations, weights, prior);
            if candidate_cost.is_finite() && candidate_cost < current {
                let gain = current - candidate_cost;
                theta = candidate;
                current = candidate_cost;
                damping = (damping / 3.0).max(1e-9);
                improved = gain > 1e-10 * (1.0 + current);
                break;
            }
            damping *= 10.0;
        }
        if !improved {
            break;
        }
    }
    theta
}

/// The inverse of a symmetric positive definite matrix (the Hessian with
/// its prior is one).
fn invert(matrix: &Matrix) -> Matrix {
    let n = matrix.len();
    let Some(factor) = cholesky(matrix) else {
        return vec![vec![0.0; n]; n];
    };
    let columns: Vec<Vec<f64>> = (0..n)
        .map(|j| {
            let mut unit = vec![0.0; n];
            unit[j] = 1.0;
            solve(&factor, &unit)
        })
        .collect();
    (0..n).map(|i| (0..n).map(|j| columns[j][i]).collect()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ln_scale: f64, batch: f64, procs: f64) -> Coordinates {
        Coordinates { ln_scale, batch, procs }
    }

    fn truth() -> Theta {
        [1.6, -1.0, 0.9, -1.5, 0.4, -1.2, 0.9, 1.2]
    }

    fn observations(theta: &Theta) -> Vec<Observation> {
        let mut observations = Vec::new();
        for ln_scale in [0.0, 0.7, 1.9] {
            for batch in [1.0, 4.0, 16.0, 64.0] {
                for procs in [1.0, 3.0] {
                    let at = at(ln_scale, batch, procs);
                    let ln_latency_ms = ln_latency(theta, &at);
                    observations.push(Observation {
                        at,
                        ln_latency_ms,
                        ln_throughput_rps: at.ln_work() - ln_latency_ms,
                    });
                }
            }
        }
        observations
    }

    #[test]
    fn latency_is_a_smooth_maximum_of_floor_own_work_and_shared_capacity() {
        let theta = truth();
        let floor = theta[0].exp();
        assert!((ln_latency(&theta, &at(0.0, 1.0, 1.0)).exp() - floor).abs() < 0.2 * floor);
        // Large batches grow linearly; more processes share the capacity.
        let big = ln_latency(&theta, &at(0.0, 256.0, 1.0));
        assert!((ln_latency(&theta, &at(0.0, 512.0, 1.0)) - big - 2f64.ln()).abs() < 0.05);
        assert!(ln_latency(&theta, &at(0.0, 256.0, 4.0)) > big + 1.0);
        // Smaller instances are slower.
        assert!(ln_latency(&theta, &at(1.9, 256.0, 1.0)) > big + 1.0);
    }

    #[test]
    fn recovers_the_latency_of_unmeasured_points_from_noiseless_data() {
        let theta = truth();
        let fitted = fit(&observations(&theta), &Prior::weak(), &Prior::weak().mean);
        for point in [at(1.2, 8.0, 2.0), at(0.0, 256.0, 5.0), at(1.9, 2.0, 5.0)] {
            let (estimate, variance) = fitted.predict(&point);
            assert!((estimate - ln_latency(&theta, &point)).abs() < 0.02, "{point:?}: {fitted:?}");
            assert!(variance >= 0.0);
        }
        assert!(fitted.leave_one_out.iter().all(|(l, t)| l.abs() < 0.02 && t.abs() < 0.02), "{fitted:?}");
    }
}
