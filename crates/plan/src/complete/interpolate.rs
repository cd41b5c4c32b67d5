//! The baseline: plain interpolation in log space. The ln latency of a
//! configuration is a local-linear fit (weighted least squares on ln size
//! scale, ln batch and ln processes) to its nearest measured points.

use super::linalg::{cholesky, solve};
use super::model::{Coordinates, Observation};

/// Measured points each prediction uses.
const NEIGHBOURS: usize = 8;

/// Ridge on the local slopes, so that points on a line or a plane still
/// give an answer.
const RIDGE: f64 = 1e-3;

/// The exact leave-one-out residuals of the baseline, whose "fit" is the
/// observations themselves: per observation, the residuals (prediction −
/// measured) of ln latency and ln throughput, and a prediction variance of
/// zero.
pub(crate) fn leave_one_out(observations: &[Observation]) -> Vec<(f64, f64, f64)> {
    observations
        .iter()
        .enumerate()
        .map(|(i, o)| {
            let predicted = ln_latency(observations, &o.at, Some(i));
            let latency = predicted - o.ln_latency_ms;
            let throughput = o.at.ln_work() - predicted - o.ln_throughput_rps;
            (latency, throughput, 0.0)
        })
        .collect()
}

/// The features of a point: ln scale, ln batch, ln processes.
fn features(at: &Coordinates) -> [f64; 3] {
    [at.ln_scale, at.batch.ln(), at.procs.ln()]
}

/// The interpolated ln latency at `at` from `observations`, leaving out
/// the one at `exclude`.
pub(crate) fn ln_latency(observations: &[Observation], at: &Coordinates, exclude: Option<usize>) -> f64 {
    let target = features(at);
    let mut nearest: Vec<(f64, &Observation)> = observations
        .iter()
        .enumerate()
        .filter(|(i, _)| Some(*i) != exclude)
        .map(|(_, o)| {
            let distance: f64 = features(&o.at).iter().zip(&target).map(|(a, b)| (a - b).powi(2)).sum();
            (distance, o)
        })
        .collect();
    nearest.sort_by(|a, b| a.0.total_cmp(&b.0));
    nearest.truncate(NEIGHBOURS);
    let mut normal = vec![vec![0.0; 4]; 4];
    let mut right = [0.0; 4];
    for (distance, o) in &nearest {
        let weight = 1.0 / (distance + 0.05);
        let f = features(&o.at);
        let row = [1.0, f[0] - target[0], f[1] - target[1], f[2] - target[2]];
        // Each point's ln latency as its ln throughput implies it, and as
        // measured: both count.
        let value = 0.5 * (o.ln_latency_ms + (o.at.ln_work() - o.ln_throughput_rps));
        for i in 0..4 {
            right[i] += weight * row[i] * value;
            for j in 0..4 {
                normal[i][j] += weight * row[i] * row[j];
            }
        }
    }
    for (j, row) in normal.iter_mut().enumerate().skip(1) {
        row[j] += RIDGE;
    }
    match cholesky(&normal) {
        Some(factor) => solve(&factor, &right)[0],
        None => nearest.first().map_or(0.0, |(_, o)| o.ln_latency_ms),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reproduces_a_log_linear_surface() {
        // ln latency = 1 + 0.5 ln scale + 0.8 ln batch + 0.3 ln procs.
        let truth = |at: &Coordinates| 1.0 + 0.5 * at.ln_scale + 0.8 * at.batch.ln() + 0.3 * at.procs.ln();
        let mut observations = Vec::new();
        for ln_scale in [0.0, 1.0, 2.0] {
            for batch in [1.0, 4.0, 16.0] {
                for procs in [1.0, 2.0] {
                    let at = Coordinates { ln_scale, batch, procs };
                    let ln_latency_ms = truth(&at);
                    observations.push(Observation {
                        at,
                        ln_latency_ms,
                        ln_throughput_rps: at.ln_work() - ln_latency_ms,
                    });
                }
            }
        }
        let at = Coordinates { ln_scale: 0.5, batch: 8.0, procs: 3.0 };
        assert!((ln_latency(&observations, &at, None) - truth(&at)).abs() < 0.01);
        let residuals = leave_one_out(&observations);
        assert!(residuals.iter().all(|r| r.0.abs() < 0.01), "{residuals:?}");
    }
}
