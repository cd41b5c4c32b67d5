//! Completing each model's profile: the latency model (or the
//! interpolation baseline) fitted per model, twice, under a weak prior and
//! then under the prior every model's first fit gives; intervals scaled on
//! the pooled leave-one-out residuals; predictions of every unmeasured
//! configuration of the grid, the ones assumed to fit in memory added to
//! the profile.

use std::collections::BTreeSet;

use tessera_core::{GpuModel, PointSource, ProfilePoint, SegmentConfig, SourcedPoint, SourcedProfile};

use super::interface::{
    CompletionMethod, CompletionRequest, Feasibility, Interval, ModelCompletion, Prediction, INTERVAL_COVERAGE,
};
use super::interpolate;
use super::memory::MemoryEvidence;
use super::model::{self, Coordinates, Fit, Observation, Prior, Theta, PARAMETERS};
use super::residual::{self, Smoother};
use crate::error::PlanError;

/// Completes the profile of every model measured on `request.gpu_model`,
/// in model-name order. A model with no measured point, or with measured
/// points in one instance size only, is an error that says what to
/// measure.
pub fn complete_profiles(request: &CompletionRequest<'_>) -> Result<Vec<ModelCompletion>, PlanError> {
    let gpu_model = request.gpu_model;
    let grid_configs = request.grid.configs(gpu_model)?;
    let measured = measured_profiles(request)?;
    let fitted: Vec<Fitted> = match request.method {
        CompletionMethod::Model => fit_models(gpu_model, &measured),
        CompletionMethod::Interpolation => measured
            .iter()
            .map(|profile| {
                let observations = observations_of(gpu_model, profile);
                Fitted {
                    leave_one_out: interpolate::leave_one_out(&observations),
                    predictor: Predictor::Interpolation(observations),
                }
            })
            .collect(),
    };
    let scales = interval_scales(&fitted);
    measured
        .iter()
        .zip(&fitted)
        .zip(scales)
        .map(|((profile, fitted), scale)| complete_one(&grid_configs, profile, fitted, scale))
        .collect()
}

/// The measured points of every profile of the GPU model, checked to be
/// enough to complete.
fn measured_profiles(request: &CompletionRequest<'_>) -> Result<Vec<SourcedProfile>, PlanError> {
    let gpu_model = request.gpu_model;
    let ours: Vec<&SourcedProfile> = request.profiles.iter().filter(|p| p.gpu_model == gpu_model).collect();
    if ours.is_empty() {
        let found: BTreeSet<String> = request.profiles.iter().map(|p| p.gpu_model.to_string()).collect();
        let found =
            if found.is_empty() { "none".to_string() } else { found.into_iter().collect::<Vec<_>>().join(", ") };
        return Err(PlanError::NothingToComplete { gpu: gpu_model.to_string(), found });
    }
    let mut measured = Vec::with_capacity(ours.len());
    for profile in ours {
        let points: Vec<SourcedPoint> = profile.points().iter().filter(|p| p.is_measured()).copied().collect();
        check_enough(gpu_model, &profile.model, &points)?;
        let model = profile.model.as_str();
        let measured_only = SourcedProfile::new(gpu_model, model, points, profile.out_of_memory().to_vec())
            .map_err(|error| cannot_complete(model, gpu_model, error))?;
        measured.push(measured_only);
    }
    measured.sort_by(|a, b| a.model.cmp(&b.model));
    Ok(measured)
}

/// The error for a profile the domain refuses (which a valid input cannot
/// give: its points are a subset of a valid profile's).
fn cannot_complete(model: &str, gpu_model: GpuModel, error: tessera_core::CoreError) -> PlanError {
    PlanError::CannotComplete { model: model.to_string(), gpu: gpu_model.to_string(), reason: error.to_string() }
}

/// A model can be completed from measured points in two instance sizes.
pub(super) fn check_enough(gpu_model: GpuModel, model: &str, points: &[SourcedPoint]) -> Result<(), PlanError> {
    let sizes: BTreeSet<u8> = points.iter().map(|p| p.point.config.size_gpcs).collect();
    let all_sizes: Vec<u8> = gpu_model.spec().sizes().collect();
    let (smallest, largest) = (all_sizes.first().copied().unwrap_or(1), all_sizes.last().copied().unwrap_or(1));
    let reason = match sizes.iter().next() {
        None => format!(
            "it has no measured point; measure configurations in at least two instance sizes first, e.g. \
             {} and {}",
            SegmentConfig { size_gpcs: smallest, batch: 1, procs: 1 },
            SegmentConfig { size_gpcs: largest, batch: 8, procs: 1 }
        ),
        Some(&only) if sizes.len() == 1 => {
            let other = if only == largest { smallest } else { largest };
            format!(
                "its measured points are all in {only}g instances, and completion needs two instance sizes; \
                 measure e.g. {} too",
                SegmentConfig { size_gpcs: other, batch: 8, procs: 1 }
            )
        }
        Some(_) => return Ok(()),
    };
    Err(PlanError::CannotComplete { model: model.to_string(), gpu: gpu_model.to_string(), reason })
}

/// The model's coordinates of a configuration on a GPU model: the log of
/// the largest instance's effective size over this one's (see `model`).
fn coordinates(gpu_model: GpuModel, config: SegmentConfig) -> Coordinates {
    let spec = gpu_model.spec();
    let effective = |size: u8| {
        spec.profile_for_size(size)
            .map_or(f64::from(size), |p| (f64::from(p.compute_slices) * f64::from(p.memory_slices)).sqrt())
    };
    let largest = spec.sizes().map(effective).fold(1.0, f64::max);
    Coordinates {
        ln_scale: (largest / effective(config.size_gpcs)).ln(),
        batch: f64::from(config.batch),
        procs: f64::from(config.procs),
    }
}

/// The measured points of a profile as observations.
fn observations_of(gpu_model: GpuModel, profile: &SourcedProfile) -> Vec<Observation> {
    profile
        .points()
        .iter()
        .map(|p| Observation {
            at: coordinates(gpu_model, p.point.config),
            ln_latency_ms: p.point.latency_ms.ln(),
            ln_throughput_rps: p.point.throughput_rps.ln(),
        })
        .collect()
}

/// What a method learned from one model: predictions and its leave-one-out
/// residuals.
#[derive(Debug, Clone)]
pub(crate) struct Fitted {
    /// Per measured point, the leave-one-out residuals (prediction −
    /// measured) of ln latency and ln throughput, and the variance of the
    /// prediction there.
    pub leave_one_out: Vec<(f64, f64, f64)>,
    /// The predictor.
    pub predictor: Predictor,
}

/// How a fitted model predicts.
#[derive(Debug, Clone)]
pub(crate) enum Predictor {
    /// The latency model, less its smoothed residuals (when they help).
    Model(Fit, Option<(Smoother, Vec<(Coordinates, f64)>)>),
    /// Interpolation among these observations.
    Interpolation(Vec<Observation>),
}

impl Fitted {
    /// ln latency at `at` and the variance of that estimate.
    fn predict(&self, at: &Coordinates) -> (f64, f64) {
        match &self.predictor {
            Predictor::Model(fit, None) => fit.predict(at),
            Predictor::Model(fit, Some((smoother, residuals))) => {
                let (ln_latency, variance) = fit.predict(at);
                (ln_latency - smoother.at(residuals, at, None), variance)
            }
            Predictor::Interpolation(observations) => (interpolate::ln_latency(observations, at, None), 0.0),
        }
    }
}

/// Fits the latency model to every profile: first under the weak prior,
/// then under the prior the first fits of all models give; then corrects
/// each by its smoothed residuals when that predicts left-out points
/// better.
fn fit_models(gpu_model: GpuModel, profiles: &[SourcedProfile]) -> Vec<Fitted> {
    let observations: Vec<Vec<Observation>> = profiles.iter().map(|p| observations_of(gpu_model, p)).collect();
    let weak = Prior::weak();
    let first: Vec<Fit> = observations.iter().map(|o| model::fit(o, &weak, &start(o))).collect();
    let learned = learned_prior(&first, &weak);
    let fits: Vec<Fit> = observations
        .iter()
        .zip(&first)
        .map(|(observations, first)| model::fit(observations, &learned, &first.theta))
        .collect();
    // Each point's ln latency residual (latency as measured and as its
    // throughput implies), and the same from the fit without it.
    let residuals: Vec<Vec<(Coordinates, f64, f64)>> = fits
        .iter()
        .zip(&observations)
        .map(|(fit, observations)| {
            observations
                .iter()
                .zip(&fit.leave_one_out)
                .map(|(o, &(latency, throughput))| {
                    let ln_latency = model::ln_latency(&fit.theta, &o.at);
                    let residual = ln_latency - 0.5 * (o.ln_latency_ms + o.at.ln_work() - o.ln_throughput_rps);
                    // An outlier's residual is smoothed at the outlier limit.
                    let residual = residual.clamp(-model::OUTLIER_LIMIT, model::OUTLIER_LIMIT);
                    (o.at, residual, 0.5 * (latency - throughput))
                })
                .collect()
        })
        .collect();
    let smoother = residual::choose(&residuals);
    fits.into_iter()
        .zip(observations)
        .zip(residuals)
        .map(|((fit, observations), residuals)| {
            let points: Vec<(Coordinates, f64)> = residuals.iter().map(|(at, r, _)| (*at, *r)).collect();
            let leave_one_out = fit
                .leave_one_out
                .iter()
                .zip(&observations)
                .enumerate()
                .map(|(i, (&(latency, throughput), o))| {
                    let correction = smoother.map_or(0.0, |s| s.at(&points, &o.at, Some(i)));
                    (latency - correction, throughput + correction, fit.predict(&o.at).1)
                })
                .collect();
            let correction = smoother.map(|s| (s, points));
            Fitted { leave_one_out, predictor: Predictor::Model(fit, correction) }
        })
        .collect()
}

/// A starting point for the fit: the weak prior's mean with the floor at
/// the fastest measured latency and the per-request times at the cheapest
/// measured one.
fn start(observations: &[Observation]) -> Theta {
    let mut theta = Prior::weak().mean;
    let fastest = observations.iter().map(|o| o.ln_latency_ms).fold(f64::INFINITY, f64::min);
    let per_request =
        observations.iter().map(|o| o.ln_latency_ms - (o.at.batch * o.at.procs).ln()).fold(f64::INFINITY, f64::min);
    if fastest.is_finite() {
        theta[0] = fastest;
    }
    if per_request.is_finite() {
        theta[1] = per_request;
        theta[5] = per_request;
    }
    theta
}

/// The prior learned from the first fits: per parameter, their median and
/// spread (1.4826 × the median absolute deviation, no tighter than a tenth
/// of the weak prior's). With fewer than three models the weak prior stays.
fn learned_prior(fits: &[Fit], weak: &Prior) -> Prior {
    if fits.len() < 3 {
        return *weak;
    }
    let mut prior = *weak;
    for j in 0..PARAMETERS {
        let values: Vec<f64> = fits.iter().map(|f| f.theta[j]).collect();
        let center = median(&values);
        let deviations: Vec<f64> = values.iter().map(|v| (v - center).abs()).collect();
        prior.mean[j] = center;
        prior.sd[j] = (1.4826 * median(&deviations)).max(weak.sd[j] / 10.0);
    }
    prior
}

/// The median of `values` (0 for none).
fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// How wide one model's intervals are: `z · sqrt(residual variance +
/// prediction variance)`, separately for ln latency and ln throughput.
#[derive(Debug, Clone, Copy, PartialEq)]
struct IntervalScale {
    /// The multiplier `z`.
    z: f64,
    /// Residual variance of ln latency.
    latency_variance: f64,
    /// Residual variance of ln throughput.
    throughput_variance: f64,
}

impl IntervalScale {
    /// Half-widths (ln latency, ln throughput) at a prediction variance.
    fn half_widths(&self, prediction_variance: f64) -> (f64, f64) {
        (
            self.z * (self.latency_variance + prediction_variance).sqrt(),
            self.z * (self.throughput_variance + prediction_variance).sqrt(),
        )
    }
}

/// Pseudo-observations of the pooled residual variance in each model's own.
const POOLED_WEIGHT: f64 = 5.0;

/// Each model's interval scale: its residual variances shrunk towards the
/// pooled ones, and one multiplier for all models, the
/// [`INTERVAL_COVERAGE`] quantile of the pooled standardized leave-one-out
/// residuals.
fn interval_scales(fitted: &[Fitted]) -> Vec<IntervalScale> {
    let all: Vec<&(f64, f64, f64)> = fitted.iter().flat_map(|f| &f.leave_one_out).collect();
    let pooled =
        |pick: fn(&(f64, f64, f64)) -> f64| all.iter().map(|r| pick(r).powi(2)).sum::<f64>() / all.len().max(1) as f64;
    let (pooled_latency, pooled_throughput) = (pooled(|r| r.0), pooled(|r| r.1));
    let mut scales: Vec<IntervalScale> = fitted
        .iter()
        .map(|f| {
            let n = f.leave_one_out.len() as f64;
            let shrunk = |own: f64, pooled: f64| (own + POOLED_WEIGHT * pooled) / (n + POOLED_WEIGHT);
            IntervalScale {
                z: 1.0,
                latency_variance: shrunk(f.leave_one_out.iter().map(|r| r.0 * r.0).sum(), pooled_latency),
                throughput_variance: shrunk(f.leave_one_out.iter().map(|r| r.1 * r.1).sum(), pooled_throughput),
            }
        })
        .collect();
    let mut standardized: Vec<f64> = fitted
        .iter()
        .zip(&scales)
        .flat_map(|(f, scale)| {
            f.leave_one_out.iter().flat_map(move |&(latency, throughput, variance)| {
                let (latency_width, throughput_width) = scale.half_widths(variance);
                [latency.abs() / latency_width.max(1e-12), throughput.abs() / throughput_width.max(1e-12)]
            })
        })
        .collect();
    standardized.sort_by(f64::total_cmp);
    let z = match standardized.len() {
        0 => 2.0,
        n => standardized[((INTERVAL_COVERAGE * n as f64).ceil() as usize).clamp(1, n) - 1],
    };
    for scale in &mut scales {
        scale.z = z;
    }
    scales
}

/// One model's completion.
fn complete_one(
    grid_configs: &[SegmentConfig],
    measured: &SourcedProfile,
    fitted: &Fitted,
    scale: IntervalScale,
) -> Result<ModelCompletion, PlanError> {
    let gpu_model = measured.gpu_model;
    let known: BTreeSet<SegmentConfig> =
        measured.points().iter().map(|p| p.point.config).chain(measured.out_of_memory().iter().copied()).collect();
    let evidence = MemoryEvidence::new(
        gpu_model,
        measured.points().iter().map(|p| p.point.config).collect(),
        measured.out_of_memory().to_vec(),
    );
    let mut points = measured.points().to_vec();
    let mut predictions = Vec::new();
    for &config in grid_configs.iter().filter(|c| !known.contains(c)) {
        let at = coordinates(gpu_model, config);
        let (ln_latency, variance) = fitted.predict(&at);
        let (latency_width, throughput_width) = scale.half_widths(variance);
        let ln_throughput = at.ln_work() - ln_latency;
        let interval = |center: f64, width: f64| Interval {
            low: (center - width).exp(),
            estimate: center.exp(),
            high: (center + width).exp(),
        };
        let prediction = Prediction {
            config,
            throughput_rps: interval(ln_throughput, throughput_width),
            latency_ms: interval(ln_latency, latency_width),
            feasibility: evidence.feasibility(config),
        };
        if prediction.feasibility == Feasibility::Fits {
            if let Some(point) = predicted_point(&prediction) {
                points.push(point);
            }
        }
        predictions.push(prediction);
    }
    let profile = SourcedProfile::new(gpu_model, measured.model.as_str(), points, measured.out_of_memory().to_vec())
        .map_err(|error| cannot_complete(&measured.model, gpu_model, error))?;
    Ok(ModelCompletion { profile, predictions })
}

/// The profile point of a prediction (`None` if its numbers are not
/// finite, which a degenerate fit could give).
fn predicted_point(prediction: &Prediction) -> Option<SourcedPoint> {
    let point =
        ProfilePoint::new(prediction.config, prediction.throughput_rps.estimate, prediction.latency_ms.estimate, None)
            .ok()?;
    let source = PointSource::Predicted {
        throughput_low_rps: prediction.throughput_rps.low,
        latency_high_ms: prediction.latency_ms.high,
    };
    SourcedPoint::new(point, source).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::complete::interface::ProfileGrid;
    use tessera_core::synthetic::{synthetic_profile, MODELS};

    /// The synthetic profiles of the built-in models on the A100, keeping
    /// every `keep`-th configuration as measured.
    fn partial(keep: usize) -> (Vec<SourcedProfile>, Vec<SourcedProfile>) {
        let full: Vec<SourcedProfile> = MODELS
            .iter()
            .map(|m| SourcedProfile::measured(&synthetic_profile(GpuModel::A100_80GB, m).unwrap(), vec![]).unwrap())
            .collect();
        let kept = full
            .iter()
            .map(|p| {
                let points = p.points().iter().enumerate().filter(|(i, _)| i % keep == 0).map(|(_, p)| *p).collect();
                SourcedProfile::new(
                    p.gpu_model,
                    p.model.as_str(),
                    points,
                    vec![SegmentConfig { size_gpcs: 1, batch: 256, procs: 5 }],
                )
                .unwrap()
            })
            .collect();
        (full, kept)
    }

    fn request<'a>(profiles: &'a [SourcedProfile], grid: &'a ProfileGrid) -> CompletionRequest<'a> {
        CompletionRequest { gpu_model: GpuModel::A100_80GB, profiles, grid, method: CompletionMethod::Model }
    }

    #[test]
    fn predicts_the_synthetic_physics_closely_and_keeps_what_was_measured() {
        let (full, kept) = partial(5);
        let grid = ProfileGrid::default();
        let completions = complete_profiles(&request(&kept, &grid)).unwrap();
        assert_eq!(completions.len(), MODELS.len());
        for (completion, (truth, measured)) in completions.iter().zip(full.iter().zip(&kept)) {
            assert_eq!(completion.profile.model, truth.model);
            assert_eq!(completion.profile.out_of_memory(), measured.out_of_memory());
            for point in measured.points() {
                assert!(completion.profile.points().contains(point), "{} lost {:?}", truth.model, point);
            }
            let mut covered = 0;
            let mut errors = Vec::new();
            for prediction in &completion.predictions {
                let Some(actual) = truth.points().iter().find(|p| p.point.config == prediction.config) else {
                    continue;
                };
                let error = (prediction.throughput_rps.estimate / actual.point.throughput_rps - 1.0).abs();
                // The synthetic capacity grows with compute slices alone, the
                // model's with compute and memory slices: 3g and 4g differ.
                assert!(error < 0.15, "{} {}: {error}", truth.model, prediction.config);
                errors.push(error);
                covered += usize::from(prediction.throughput_rps.covers(actual.point.throughput_rps));
                assert!(prediction.latency_ms.low <= prediction.latency_ms.estimate);
                assert!(prediction.latency_ms.estimate <= prediction.latency_ms.high);
            }
            let compared = errors.len();
            // Noiseless points leave tiny leave-one-out residuals, so the
            // intervals are narrow and miss some of the 3g/4g bias.
            assert!(covered * 4 >= compared * 3, "{}: {covered} of {compared} covered", truth.model);
            assert!(median(&errors) < 0.05, "{}: median error {}", truth.model, median(&errors));
            // Every predicted point of the profile is assumed to fit and
            // plans at its bounds.
            for point in completion.profile.points().iter().filter(|p| !p.is_measured()) {
                let prediction = completion.predictions.iter().find(|p| p.config == point.point.config).unwrap();
                assert_eq!(prediction.feasibility, Feasibility::Fits);
                assert_eq!(point.planning_point().throughput_rps, prediction.throughput_rps.low);
                assert_eq!(point.planning_point().latency_ms, prediction.latency_ms.high);
            }
        }
    }

    #[test]
    fn the_latency_model_beats_plain_interpolation_on_the_synthetic_physics() {
        let (full, kept) = partial(7);
        let grid = ProfileGrid::default();
        let error = |method| {
            let completions = complete_profiles(&CompletionRequest { method, ..request(&kept, &grid) }).unwrap();
            let mut errors: Vec<f64> = completions
                .iter()
                .zip(&full)
                .flat_map(|(c, truth)| {
                    c.predictions.iter().filter_map(|p| {
                        let actual = truth.points().iter().find(|a| a.point.config == p.config)?;
                        Some((p.throughput_rps.estimate / actual.point.throughput_rps).ln().abs())
                    })
                })
                .collect();
            errors.sort_by(f64::total_cmp);
            errors[errors.len() / 2]
        };
        let (model, interpolation) = (error(CompletionMethod::Model), error(CompletionMethod::Interpolation));
        assert!(model < interpolation, "model {model}, interpolation {interpolation}");
    }

    #[test]
    fn says_what_to_measure_when_the_points_are_too_few() {
        let grid = ProfileGrid::default();
        let point = |size_gpcs| {
            let config = SegmentConfig { size_gpcs, batch: 8, procs: 1 };
            SourcedPoint::new(ProfilePoint::new(config, 100.0, 80.0, None).unwrap(), PointSource::Measured).unwrap()
        };
        let none = [SourcedProfile::new(GpuModel::A100_80GB, "bert", vec![], vec![]).unwrap()];
        let message = complete_profiles(&request(&none, &grid)).unwrap_err().to_string();
        assert_eq!(
            message,
            "cannot complete the profile of 'bert' on a100-80gb: it has no measured point; measure configurations in \
             at least two instance sizes first, e.g. 1g batch 1 x 1 proc and 7g batch 8 x 1 proc"
        );
        let one_size = [SourcedProfile::new(GpuModel::A100_80GB, "bert", vec![point(7)], vec![]).unwrap()];
        let message = complete_profiles(&request(&one_size, &grid)).unwrap_err().to_string();
        assert!(message.ends_with("its measured points are all in 7g instances, and completion needs two instance sizes; measure e.g. 1g batch 8 x 1 proc too"), "{message}");
        let other_gpu = [SourcedProfile::new(GpuModel::H100_80GB, "bert", vec![point(7), point(1)], vec![]).unwrap()];
        let message = complete_profiles(&request(&other_gpu, &grid)).unwrap_err().to_string();
        assert_eq!(message, "no profile measured on a100-80gb to complete (the profiles are of: h100-80gb)");
        let empty_grid = ProfileGrid { batches: vec![], procs: vec![1] };
        let message = complete_profiles(&request(&other_gpu, &empty_grid)).unwrap_err().to_string();
        assert_eq!(message, "the profile grid needs at least one batch size (and none may be 0)");
    }

    #[test]
    fn predicted_points_are_ignored_and_completion_starts_from_measurements() {
        let (_, kept) = partial(5);
        let grid = ProfileGrid::default();
        let first = complete_profiles(&request(&kept, &grid)).unwrap();
        let completed: Vec<SourcedProfile> = first.iter().map(|c| c.profile.clone()).collect();
        let again = complete_profiles(&request(&completed, &grid)).unwrap();
        assert_eq!(first, again);
    }
}
