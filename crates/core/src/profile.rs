//! Segment profiles: how fast one model runs in one MIG instance.
//!
//! A *segment* is one MIG instance serving one model with `procs` MPS
//! processes, each running batches of `batch` requests. Its profile point
//! gives the segment's throughput (all processes together) and the latency
//! of one batch. Configurations that do not fit in memory are simply absent:
//! a catalogue never holds an infeasible point.

use std::collections::BTreeMap;

use crate::error::CoreError;
use crate::gpu::GpuModel;

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
}

impl ProfilePoint {
    /// A validated profile point.
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
        Ok(ProfilePoint { config, throughput_rps, latency_ms, memory_gb })
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
        if model.trim().is_empty() {
            return Err(CoreError::invalid("model", "a non-empty name", "''"));
        }
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

    /// The point of one configuration, if it was profiled and is feasible.
    pub fn point(&self, config: SegmentConfig) -> Option<&ProfilePoint> {
        self.points.binary_search_by_key(&config, |p| p.config).ok().map(|index| &self.points[index])
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
    fn profile_rejects_sizes_the_gpu_lacks_and_duplicates() {
        let point = |size| ProfilePoint::new(config(size, 1, 1), 10.0, 1.0, None).unwrap();
        assert!(ModelProfile::new(GpuModel::A30_24GB, "m", vec![point(3)]).is_err());
        assert!(ModelProfile::new(GpuModel::A100_80GB, "m", vec![point(3), point(3)]).is_err());
        let profile = ModelProfile::new(GpuModel::A100_80GB, "m", vec![point(7), point(1)]).unwrap();
        assert_eq!(profile.points()[0].config.size_gpcs, 1);
        assert!(profile.point(config(7, 1, 1)).is_some());
        assert!(profile.point(config(2, 1, 1)).is_none());
    }
}
