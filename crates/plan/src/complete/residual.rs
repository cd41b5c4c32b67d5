//! What the latency model misses near measured points: its residuals,
//! smoothed over neighbouring configurations (a Gaussian kernel in grid
//! steps, shrunk towards zero away from measurements), subtracted from its
//! predictions.

use super::model::Coordinates;

/// Kernel widths tried, in grid steps.
const WIDTHS: [f64; 4] = [0.5, 0.75, 1.0, 1.5];

/// Shrinkage weights tried: the kernel weight of an imaginary zero
/// residual at every prediction.
const SHRINKAGES: [f64; 4] = [0.25, 0.5, 1.0, 2.0];

/// One ln-size-scale step between neighbouring instance sizes, roughly.
const SCALE_STEP: f64 = 0.5;

/// A kernel smoother of residuals.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Smoother {
    /// Kernel width, grid steps.
    pub width: f64,
    /// Shrinkage weight.
    pub shrinkage: f64,
}

impl Smoother {
    /// The smoothed residual at `at` from `residuals` (position and residual),
    /// leaving out the one at `exclude`.
    pub fn at(&self, residuals: &[(Coordinates, f64)], at: &Coordinates, exclude: Option<usize>) -> f64 {
        let (mut weighted, mut total) = (0.0, self.shrinkage);
        for (i, (position, residual)) in residuals.iter().enumerate() {
            if Some(i) == exclude {
                continue;
            }
            let weight = (-steps_squared(position, at) / (2.0 * self.width * self.width)).exp();
            weighted += weight * residual;
            total += weight;
        }
        weighted / total
    }
}

/// Squared distance in grid steps: size scale, log2 batch, processes.
fn steps_squared(a: &Coordinates, b: &Coordinates) -> f64 {
    ((a.ln_scale - b.ln_scale) / SCALE_STEP).powi(2)
        + (a.batch.log2() - b.batch.log2()).powi(2)
        + (a.procs - b.procs).powi(2)
}

/// The smoother that best predicts each model's left-out residual from its
/// other residuals, over every model together (`models`: each model's
/// residuals, with each point's own leave-one-out model residual);
/// `None` when none improves on no correction.
pub(crate) fn choose(models: &[Vec<(Coordinates, f64, f64)>]) -> Option<Smoother> {
    let uncorrected: f64 = models.iter().flatten().map(|(_, _, loo)| loo * loo).sum();
    let mut best: Option<(f64, Smoother)> = None;
    for width in WIDTHS {
        for shrinkage in SHRINKAGES {
            let smoother = Smoother { width, shrinkage };
            let error: f64 = models
                .iter()
                .map(|points| {
                    let residuals: Vec<(Coordinates, f64)> = points.iter().map(|(at, r, _)| (*at, *r)).collect();
                    points
                        .iter()
                        .enumerate()
                        .map(|(i, (at, _, loo))| (loo - smoother.at(&residuals, at, Some(i))).powi(2))
                        .sum::<f64>()
                })
                .sum();
            if error < uncorrected && best.is_none_or(|(b, _)| error < b) {
                best = Some((error, smoother));
            }
        }
    }
    best.map(|(_, smoother)| smoother)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(batch: f64) -> Coordinates {
        Coordinates { ln_scale: 0.0, batch, procs: 1.0 }
    }

    #[test]
    fn smooths_nearby_residuals_and_shrinks_far_away() {
        let residuals = vec![(at(4.0), 0.2), (at(8.0), 0.2)];
        let smoother = Smoother { width: 1.0, shrinkage: 0.5 };
        let near = smoother.at(&residuals, &at(8.0), None);
        assert!(near > 0.1 && near < 0.2, "{near}");
        assert!(smoother.at(&residuals, &at(256.0), None).abs() < 1e-4);
    }

    #[test]
    fn chooses_a_smoother_only_for_residuals_with_local_structure() {
        let structured: Vec<(Coordinates, f64, f64)> =
            [1.0, 2.0, 4.0, 8.0, 16.0, 32.0].iter().map(|&b| (at(b), if b < 6.0 { 0.2 } else { -0.2 }, 0.0)).collect();
        let structured: Vec<_> = structured.into_iter().map(|(a, r, _)| (a, r, r)).collect();
        assert!(choose(&[structured]).is_some());
        let alternating: Vec<(Coordinates, f64, f64)> = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0]
            .iter()
            .enumerate()
            .map(|(i, &b)| {
                let r = if i % 2 == 0 { 0.2 } else { -0.2 };
                (at(b), r, r)
            })
            .collect();
        assert!(choose(&[alternating]).is_none());
    }
}
