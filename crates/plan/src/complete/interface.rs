//! What profile completion is asked and answers: the grid of
//! configurations, the method, the request, and per model its completed
//! profile with each prediction's intervals and memory feasibility.

use std::collections::BTreeSet;

use tessera_core::{GpuModel, SegmentConfig, SourcedProfile};

use crate::error::PlanError;

/// The share of held-out values each interval is calibrated to cover (on
/// the pooled leave-one-out residuals).
pub const INTERVAL_COVERAGE: f64 = 0.99;

/// The batch sizes of ParvaGPU's profile grid.
pub const GRID_BATCHES: [u32; 9] = [1, 2, 4, 8, 16, 32, 64, 128, 256];

/// The process counts of ParvaGPU's profile grid.
pub const GRID_PROCS: [u32; 5] = [1, 2, 3, 4, 5];

/// The configurations a profile covers: every instance size of the GPU
/// model × these batch sizes × these process counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileGrid {
    /// Batch sizes.
    pub batches: Vec<u32>,
    /// MPS process counts.
    pub procs: Vec<u32>,
}

impl Default for ProfileGrid {
    /// ParvaGPU's grid: batches 1 to 256 in powers of two, 1 to 5 processes.
    fn default() -> Self {
        ProfileGrid { batches: GRID_BATCHES.to_vec(), procs: GRID_PROCS.to_vec() }
    }
}

impl ProfileGrid {
    /// Every configuration of the grid on `gpu_model`, sorted.
    pub fn configs(&self, gpu_model: GpuModel) -> Result<Vec<SegmentConfig>, PlanError> {
        let (batches, procs) = self.axes()?;
        let mut configs = Vec::new();
        for size_gpcs in gpu_model.spec().sizes() {
            for &batch in &batches {
                for &procs in &procs {
                    configs.push(SegmentConfig { size_gpcs, batch, procs });
                }
            }
        }
        configs.sort();
        Ok(configs)
    }

    /// The sorted, deduplicated batch sizes and process counts.
    fn axes(&self) -> Result<(Vec<u32>, Vec<u32>), PlanError> {
        let batches: BTreeSet<u32> = self.batches.iter().copied().collect();
        let procs: BTreeSet<u32> = self.procs.iter().copied().collect();
        if batches.is_empty() || batches.contains(&0) {
            return Err(PlanError::EmptyGrid { what: "batch size" });
        }
        if procs.is_empty() || procs.contains(&0) {
            return Err(PlanError::EmptyGrid { what: "process count" });
        }
        Ok((batches.into_iter().collect(), procs.into_iter().collect()))
    }
}

/// How unmeasured points are predicted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CompletionMethod {
    /// The latency model fitted per model with a prior learned across
    /// models (the default: it measures better).
    #[default]
    Model,
    /// Local-linear interpolation of log throughput among the nearest
    /// measured points (the baseline).
    Interpolation,
}

/// What to complete.
#[derive(Debug, Clone, Copy)]
pub struct CompletionRequest<'a> {
    /// The GPU model whose profiles are completed.
    pub gpu_model: GpuModel,
    /// The measured profiles (profiles of other GPU models are ignored, and
    /// so are predicted points: completion starts from measurements only).
    pub profiles: &'a [SourcedProfile],
    /// The configurations to cover.
    pub grid: &'a ProfileGrid,
    /// How to predict.
    pub method: CompletionMethod,
}

/// A predicted value with its interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    /// The interval's lower end.
    pub low: f64,
    /// The central estimate.
    pub estimate: f64,
    /// The interval's upper end.
    pub high: f64,
}

impl Interval {
    /// `true` when `value` lies within the interval.
    pub fn covers(&self, value: f64) -> bool {
        self.low <= value && value <= self.high
    }
}

/// Whether a configuration is assumed to fit in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feasibility {
    /// Assumed to fit: planners may use it.
    Fits,
    /// Not assumed to fit (too close to what is measured out of memory, or
    /// more than the measured points vouch for): left out of the profile.
    Unsure,
    /// Needs at least as much memory as a configuration measured out of
    /// memory.
    OutOfMemory,
}

/// The prediction of one unmeasured configuration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prediction {
    /// The configuration.
    pub config: SegmentConfig,
    /// Segment throughput, req/s.
    pub throughput_rps: Interval,
    /// Batch latency, ms.
    pub latency_ms: Interval,
    /// Whether it is assumed to fit in memory.
    pub feasibility: Feasibility,
}

/// One model's completed profile.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelCompletion {
    /// The measured points, the predicted points assumed to fit, and the
    /// configurations measured out of memory.
    pub profile: SourcedProfile,
    /// Every configuration of the grid that was not measured (fitting or
    /// out of memory), with its prediction.
    pub predictions: Vec<Prediction>,
}
