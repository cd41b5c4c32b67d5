//! Segment profiles: how fast one model runs in one MIG instance.
//!
//! A *segment* is one MIG instance serving one model with `procs` MPS
//! processes, each running batches of `batch` requests. Its profile point
//! gives the segment's throughput (all processes together) and the latency
//! of one batch. Configurations that do not fit in memory are simply absent:
//! a catalogue never holds an infeasible point. A [`SourcedProfile`] also
//! says which points are measured and which predicted (with conservative
//! bounds), and which configurations were measured out of memory.

use std::collections::BTreeMap;

use crate::error::CoreError;
use crate::gpu::GpuModel;
use crate::timing::BatchTiming;

/// The knobs of one segment: instance size, batch size and MPS processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct SegmentConfig {
    /// MIG instance size in compute slices (GPCs).
    pub size_gpcs: u8,
    /// Requests per batch.
    pub batch: u32,
    /// MPS processes of the model inside the instance.
    pub procs: u32,
}

impl std::fmt::Display for SegmentConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}g batch {} x {} proc", self.size_gpcs, self.batch, self.procs)
    }
}

/// A measured (or modelled) operating point of one segment configuration.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ProfilePoint {
    /// The configuration.
    pub config: SegmentConfig,
    /// Requests per second of the whole segment (all processes together).
    pub throughput_rps: f64,
    /// Milliseconds to run one batch in one process at this concurrency.
    pub latency_ms: f64,
    /// Device memory the whole segment needs (all processes), in GB, when
    /// known; planners skip a point that needs more than its instance has.
    pub memory_gb: Option<f64>,
    /// The spread of its batch times, its dispatch gap and its serving
    /// slowdown, where measured ([`ProfilePoint::with_timing`]).
    #[serde(default, skip_serializing_if = "BatchTiming::is_empty")]
    pub timing: BatchTiming,
}

/// How far a point's throughput may exceed what its processes can finish
/// (procs × batch per latency) before it contradicts its own numbers:
/// latencies rounded to whole milliseconds (ParvaGPU's: up to 1.33× on
/// its data) stay within it, 1e308 req/s at 50 ms does not.
pub const THROUGHPUT_SLACK: f64 = 2.0;

impl ProfilePoint {
    /// A validated profile point: a throughput above
    /// [`THROUGHPUT_SLACK`] × procs × batch ÷ latency contradicts its
    /// latency and is refused.
    pub fn new(
        config: SegmentConfig,
        throughput_rps: f64,
        latency_ms: f64,
        memory_gb: Option<f64>,
    ) -> Result<Self, CoreError> {
        if config.size_gpcs == 0 || config.size_gpcs > 7 {
            return Err(CoreError::invalid("size_gpcs", "between 1 and 7", config.size_gpcs));
        }
        if config.batch == 0 {
            return Err(CoreError::invalid("batch", "at least 1", config.batch));
        }
        if config.procs == 0 {
            return Err(CoreError::invalid("procs", "at least 1", config.procs));
        }
        if !(throughput_rps.is_finite() && throughput_rps > 0.0) {
            return Err(CoreError::invalid("throughput_rps", "a positive number", throughput_rps));
        }
        if !(latency_ms.is_finite() && latency_ms > 0.0) {
            return Err(CoreError::invalid("latency_ms", "a positive number", latency_ms));
        }
        if let Some(memory) = memory_gb {
            if !(memory.is_finite() && memory >= 0.0) {
                return Err(CoreError::invalid("memory_gb", "a non-negative number", memory));
            }
        }
        // Its processes finish at most procs × batch requests per latency.
        let most_rps = f64::from(config.procs) * f64::from(config.batch) * 1000.0 / latency_ms;
        if throughput_rps > THROUGHPUT_SLACK * most_rps {
            return Err(CoreError::invalid(
                "throughput_rps",
                "at most twice procs × batch ÷ latency (what the point's processes can finish)",
                crate::text::number(throughput_rps, 3),
            ));
        }
        Ok(ProfilePoint { config, throughput_rps, latency_ms, memory_gb, timing: BatchTiming::default() })
    }

    /// The point with what was measured of its batch times beside their
    /// mean ([`BatchTiming::check`]ed).
    pub fn with_timing(self, timing: BatchTiming) -> Result<Self, CoreError> {
        timing.check()?;
        Ok(ProfilePoint { timing, ..self })
    }

    /// Throughput per compute slice, the configurator's efficiency measure.
    pub fn throughput_per_gpc(&self) -> f64 {
        self.throughput_rps / f64::from(self.config.size_gpcs)
    }
}

/// Every profiled configuration of one model on one GPU model.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ModelProfile {
    /// The GPU model it was profiled on.
    pub gpu_model: GpuModel,
    /// The model (workload) name, e.g. `resnet50`.
    pub model: String,
    points: Vec<ProfilePoint>,
}

impl ModelProfile {
    /// A validated profile: every size exists on `gpu_model`, no
    /// configuration appears twice. Points are kept sorted by configuration.
    pub fn new(
        gpu_model: GpuModel,
        model: impl Into<String>,
        mut points: Vec<ProfilePoint>,
    ) -> Result<Self, CoreError> {
        let model = model.into();
        crate::slo::check_name("model", &model)?;
        for point in &points {
            gpu_model.spec().profile_for_size(point.config.size_gpcs)?;
        }
        points.sort_by_key(|p| p.config);
        if let Some(pair) = points.windows(2).find(|pair| pair[0].config == pair[1].config) {
            return Err(CoreError::invalid(
                "configuration",
                "listed once per model and GPU",
                format!("{} twice for {model}", pair[0].config),
            ));
        }
        Ok(ModelProfile { gpu_model, model, points })
    }

    /// The feasible points, sorted by (size, batch, procs).
    pub fn points(&self) -> &[ProfilePoint] {
        &self.points
    }

    /// The memory one process of `config`'s batch needs, GB, and whether
    /// it was measured: the point's `memory_gb` over its processes where
    /// profiled; else an upper bound from the points that ran, assuming
    /// only that memory grows with the batch: `p` processes of batch `b`
    /// that ran in an instance of `M` GB show that one process of any batch
    /// up to `b` needs at most `M / p`. `None` when no point bounds it.
    pub fn process_memory_gb(&self, config: SegmentConfig) -> Option<(f64, bool)> {
        if let Some(measured) = self.point(config).and_then(|point| point.memory_gb) {
            return Some((measured / f64::from(config.procs), true));
        }
        let spec = self.gpu_model.spec();
        self.points
            .iter()
            .filter(|point| point.config.batch >= config.batch)
            .filter_map(|point| {
                let instance = spec.profile_for_size(point.config.size_gpcs).ok()?;
                Some(f64::from(instance.memory_gb) / f64::from(point.config.procs))
            })
            .reduce(f64::min)
            .map(|bound| (bound, false))
    }

    /// The point of one configuration, if it was profiled and is feasible.
    pub fn point(&self, config: SegmentConfig) -> Option<&ProfilePoint> {
        self.points.binary_search_by_key(&config, |p| p.config).ok().map(|index| &self.points[index])
    }
}

/// Where a point of a [`SourcedProfile`] comes from.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum PointSource {
    /// Measured: planners use its numbers as they are.
    Measured,
    /// Predicted from the model's measured points: the point's numbers are
    /// the central estimate, and planners use these conservative bounds.
    Predicted {
        /// The lower end of the throughput's interval, req/s (whole segment).
        throughput_low_rps: f64,
        /// The upper end of the batch latency's interval, ms.
        latency_high_ms: f64,
    },
}

/// A profile point and where it comes from.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SourcedPoint {
    /// The point: measured numbers, or a prediction's central estimate.
    pub point: ProfilePoint,
    /// Measured or predicted.
    pub source: PointSource,
}

impl SourcedPoint {
    /// A validated point: a prediction's bounds are positive, finite and on
    /// the safe side of its estimate (throughput at most, latency at least).
    pub fn new(point: ProfilePoint, source: PointSource) -> Result<Self, CoreError> {
        if let PointSource::Predicted { throughput_low_rps, latency_high_ms } = source {
            if !(throughput_low_rps.is_finite()
                && throughput_low_rps > 0.0
                && throughput_low_rps <= point.throughput_rps)
            {
                return Err(CoreError::invalid(
                    "throughput_low_rps",
                    "a positive number no larger than throughput_rps",
                    throughput_low_rps,
                ));
            }
            if !(latency_high_ms.is_finite() && latency_high_ms >= point.latency_ms) {
                return Err(CoreError::invalid(
                    "latency_high_ms",
                    "a number no smaller than latency_ms",
                    latency_high_ms,
                ));
            }
        }
        Ok(SourcedPoint { point, source })
    }

    /// The point planners use: measured numbers as they are, a prediction's
    /// conservative bounds (lowest throughput, highest latency).
    pub fn planning_point(&self) -> ProfilePoint {
        match self.source {
            PointSource::Measured => self.point,
            PointSource::Predicted { throughput_low_rps, latency_high_ms } => {
                ProfilePoint { throughput_rps: throughput_low_rps, latency_ms: latency_high_ms, ..self.point }
            }
        }
    }

    /// `true` for a measured point.
    pub fn is_measured(&self) -> bool {
        self.source == PointSource::Measured
    }
}

/// One model's profile on one GPU model with the origin of every point,
/// and the configurations measured not to fit in memory (ParvaGPU's `0,0`
/// rows): what profile completion starts from and what it writes.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SourcedProfile {
    /// The GPU model.
    pub gpu_model: GpuModel,
    /// The model (workload) name.
    pub model: String,
    points: Vec<SourcedPoint>,
    out_of_memory: Vec<SegmentConfig>,
}

impl SourcedProfile {
    /// A validated profile: every size exists on `gpu_model` and no
    /// configuration appears twice, among the points and the out-of-memory
    /// configurations together. Both lists are kept sorted.
    pub fn new(
        gpu_model: GpuModel,
        model: impl Into<String>,
        points: Vec<SourcedPoint>,
        mut out_of_memory: Vec<SegmentConfig>,
    ) -> Result<Self, CoreError> {
        let model = model.into();
        let profile = ModelProfile::new(gpu_model, model.as_str(), points.iter().map(|p| p.point).collect())?;
        let mut points = points;
        points.sort_by_key(|p| p.point.config);
        out_of_memory.sort();
        for config in &out_of_memory {
            gpu_model.spec().profile_for_size(config.size_gpcs)?;
        }
        let twice = out_of_memory
            .windows(2)
            .find(|pair| pair[0] == pair[1])
            .map(|pair| (pair[0], "out of memory twice"))
            .or_else(|| {
                out_of_memory
                    .iter()
                    .find(|&&c| profile.point(c).is_some())
                    .map(|&c| (c, "both measured and out of memory"))
            });
        if let Some((config, how)) = twice {
            return Err(CoreError::invalid(
                "configuration",
                "listed once per model and GPU",
                format!("{config} {how} for {}", profile.model),
            ));
        }
        Ok(SourcedProfile { gpu_model, model: profile.model, points, out_of_memory })
    }

    /// A profile whose every point is measured.
    pub fn measured(profile: &ModelProfile, out_of_memory: Vec<SegmentConfig>) -> Result<Self, CoreError> {
        let points = profile.points().iter().map(|&point| SourcedPoint { point, source: PointSource::Measured });
        SourcedProfile::new(profile.gpu_model, profile.model.as_str(), points.collect(), out_of_memory)
    }

    /// Every point, sorted by configuration.
    pub fn points(&self) -> &[SourcedPoint] {
        &self.points
    }

    /// The configurations measured not to fit in memory, sorted.
    pub fn out_of_memory(&self) -> &[SegmentConfig] {
        &self.out_of_memory
    }

    /// The profile planners use: every point, predicted ones at their
    /// conservative bounds ([`SourcedPoint::planning_point`]).
    pub fn planning_profile(&self) -> ModelProfile {
        let points = self.points.iter().map(SourcedPoint::planning_point).collect();
        ModelProfile { gpu_model: self.gpu_model, model: self.model.clone(), points }
    }

    /// The measured points only.
    pub fn measured_profile(&self) -> ModelProfile {
        let points = self.points.iter().filter(|p| p.is_measured()).map(|p| p.point).collect();
        ModelProfile { gpu_model: self.gpu_model, model: self.model.clone(), points }
    }
}

/// Profiles of many models on many GPU models.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProfileCatalog {
    profiles: BTreeMap<(GpuModel, String), ModelProfile>,
}

impl ProfileCatalog {
    /// An empty catalogue.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a profile, replacing any earlier one of the same GPU and model.
    pub fn insert(&mut self, profile: ModelProfile) {
        self.profiles.insert((profile.gpu_model, profile.model.clone()), profile);
    }

    /// The profile of `model` on `gpu`.
    pub fn get(&self, gpu: GpuModel, model: &str) -> Option<&ModelProfile> {
        self.profiles.get(&(gpu, model.to_string()))
    }

    /// Every profile, ordered by GPU model, then model name.
    pub fn iter(&self) -> impl Iterator<Item = &ModelProfile> {
        self.profiles.values()
    }

    /// The model names profiled on `gpu`, alphabetically.
    pub fn models(&self, gpu: GpuModel) -> impl Iterator<Item = &str> {
        self.profiles.keys().filter(move |(g, _)| *g == gpu).map(|(_, model)| model.as_str())
    }

    /// Number of (GPU model, model) profiles.
    pub fn len(&self) -> usize {
        self.profiles.len()
    }

    /// `true` when the catalogue holds no profile.
    pub fn is_empty(&self) -> bool {
        self.profiles.is_empty()
    }
}

impl FromIterator<ModelProfile> for ProfileCatalog {
    fn from_iter<I: IntoIterator<Item = ModelProfile>>(iter: I) -> Self {
        let mut catalog = ProfileCatalog::new();
        for profile in iter {
            catalog.insert(profile);
        }
        catalog
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(size_gpcs: u8, batch: u32, procs: u32) -> SegmentConfig {
        SegmentConfig { size_gpcs, batch, procs }
    }

    #[test]
    fn rejects_non_positive_values() {
        assert!(ProfilePoint::new(config(1, 1, 1), 0.0, 1.0, None).is_err());
        assert!(ProfilePoint::new(config(1, 1, 1), 1.0, -1.0, None).is_err());
        assert!(ProfilePoint::new(config(1, 0, 1), 1.0, 1.0, None).is_err());
        assert!(ProfilePoint::new(config(1, 1, 1), f64::NAN, 1.0, None).is_err());
        assert!(ProfilePoint::new(config(1, 1, 1), 1.0, 1.0, Some(-2.0)).is_err());
        assert!(ProfilePoint::new(config(1, 1, 1), 1.0, 1.0, Some(2.0)).is_ok());
    }

    #[test]
    fn a_throughput_its_processes_cannot_finish_is_refused() {
        let error = ProfilePoint::new(config(1, 8, 1), 1e308, 50.0, None).unwrap_err().to_string();
        assert_eq!(
            error,
            "throughput_rps must be at most twice procs × batch ÷ latency (what the point's processes can finish), \
             got 1e308"
        );
        // Two processes of batch 8 at 50 ms finish 320 req/s; latencies
        // rounded to the millisecond may overstate a little.
        assert!(ProfilePoint::new(config(1, 8, 2), 320.0 * THROUGHPUT_SLACK, 50.0, None).is_ok());
        assert!(ProfilePoint::new(config(1, 8, 2), 320.0 * THROUGHPUT_SLACK * 1.01, 50.0, None).is_err());
        assert!(ProfilePoint::new(config(7, 1, 1), 662.6, 2.0, None).is_ok(), "ParvaGPU's vgg16 on 7g");
    }

    #[test]
    fn profile_rejects_sizes_the_gpu_lacks_and_duplicates() {
        let point = |size| ProfilePoint::new(config(size, 1, 1), 10.0, 1.0, None).unwrap();
        assert!(ModelProfile::new(GpuModel::A30_24GB, "m", vec![point(3)]).is_err());
        assert!(ModelProfile::new(GpuModel::A100_80GB, "m", vec![point(3), point(3)]).is_err());
        let profile = ModelProfile::new(GpuModel::A100_80GB, "m", vec![point(7), point(1)]).unwrap();
        assert_eq!(profile.points()[0].config.size_gpcs, 1);
        assert!(profile.point(config(7, 1, 1)).is_some());
        assert!(profile.point(config(2, 1, 1)).is_none());
    }

    #[test]
    fn sourced_profiles_plan_on_the_conservative_bounds_of_predictions() {
        let point = |batch, rps| ProfilePoint::new(config(2, batch, 1), rps, 10.0, None).unwrap();
        let predicted = PointSource::Predicted { throughput_low_rps: 80.0, latency_high_ms: 12.5 };
        let profile = SourcedProfile::new(
            GpuModel::A100_80GB,
            "m",
            vec![
                SourcedPoint::new(point(8, 100.0), predicted).unwrap(),
                SourcedPoint::new(point(4, 50.0), PointSource::Measured).unwrap(),
            ],
            vec![config(1, 256, 5)],
        )
        .unwrap();
        let planning = profile.planning_profile();
        assert_eq!(planning.points().len(), 2);
        assert_eq!(planning.points()[0], point(4, 50.0));
        let conservative = planning.point(config(2, 8, 1)).unwrap();
        assert_eq!((conservative.throughput_rps, conservative.latency_ms), (80.0, 12.5));
        assert_eq!(profile.measured_profile().points(), &[point(4, 50.0)]);
        assert_eq!(profile.out_of_memory(), &[config(1, 256, 5)]);
    }

    #[test]
    fn sourced_profiles_refuse_bounds_on_the_wrong_side_and_contradictions() {
        let point = ProfilePoint::new(config(2, 8, 1), 100.0, 10.0, None).unwrap();
        let optimistic = PointSource::Predicted { throughput_low_rps: 120.0, latency_high_ms: 12.0 };
        assert!(SourcedPoint::new(point, optimistic).unwrap_err().to_string().contains("throughput_low_rps"));
        let optimistic = PointSource::Predicted { throughput_low_rps: 90.0, latency_high_ms: 9.0 };
        assert!(SourcedPoint::new(point, optimistic).unwrap_err().to_string().contains("latency_high_ms"));
        let measured = SourcedPoint::new(point, PointSource::Measured).unwrap();
        let both = SourcedProfile::new(GpuModel::A100_80GB, "m", vec![measured], vec![config(2, 8, 1)]);
        assert!(both.unwrap_err().to_string().contains("2g batch 8 x 1 proc both measured and out of memory for m"));
        let twice = SourcedProfile::new(GpuModel::A100_80GB, "m", vec![], vec![config(1, 8, 1), config(1, 8, 1)]);
        assert!(twice.unwrap_err().to_string().contains("out of memory twice"));
        let missing_size = SourcedProfile::new(GpuModel::A30_24GB, "m", vec![], vec![config(3, 8, 1)]);
        assert!(missing_size.is_err());
    }
}
