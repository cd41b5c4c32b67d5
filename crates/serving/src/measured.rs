//! The model against a real GPU: a serving run measured on hardware
//! (`examples/workloads/torch_serve.py` writes one) beside what the model
//! predicts for the same profile and arrival rate.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tessera_core::BatchTiming;

use crate::analytic;
use crate::arrivals::ArrivalModel;
use crate::capacity::Capacities;
use crate::error::ServingError;
use crate::shape::SegmentShape;
use crate::simulate::{simulate, SimulationOptions};
use crate::system::{ServedSegment, ServedService, ServingSystem};

/// One measured run: a model served by `procs` processes with batches of up
/// to `max_batch`, its profile, and the latency percentiles measured at
/// several loads under Poisson arrivals (the JSON `torch_serve.py` writes;
/// fields it writes beside these are ignored).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct MeasuredServing {
    /// The model served.
    pub model: String,
    /// The largest batch a process runs.
    pub max_batch: u32,
    /// Processes serving from one queue each, requests routed to them at
    /// random.
    pub procs: u32,
    /// Seconds of arrivals per load.
    pub seconds: f64,
    /// Requests arriving before this (seconds) were not counted.
    pub warmup_s: f64,
    /// The profile: every batch size's mean latency, measured back to back.
    pub profile: Vec<MeasuredBatch>,
    /// The loads served.
    pub levels: Vec<MeasuredLevel>,
    /// The rate a plan routes to this segment (req/s), where the run served
    /// it at that capacity: the planner's promise, measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planned_capacity_rps: Option<f64>,
}

/// One profiled batch size.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct MeasuredBatch {
    /// Requests in the batch.
    pub batch: u32,
    /// Its mean latency, ms.
    pub latency_ms: f64,
    /// Its median latency, ms, where measured.
    #[serde(default)]
    pub p50_ms: Option<f64>,
    /// Its 99th percentile latency, ms, where measured.
    #[serde(default)]
    pub p99_ms: Option<f64>,
}

/// One load served and what was measured.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct MeasuredLevel {
    /// The offered rate over the full batch's throughput.
    pub utilisation: f64,
    /// The arrival rate counted, req/s.
    pub arrived_rps: f64,
    /// Requests counted (after the warm-up).
    pub requests: u64,
    /// Measured median latency, ms.
    pub p50_ms: f64,
    /// Measured 99th percentile latency, ms.
    pub p99_ms: f64,
    /// Measured 99.9th percentile latency, ms.
    pub p999_ms: f64,
    /// The mean time between one batch's end and the next one's start in a
    /// busy process, µs, where measured.
    #[serde(default)]
    pub dispatch_gap_us: Option<f64>,
    /// Each batch size's mean run time while serving, ms, by batch size,
    /// where measured.
    #[serde(default)]
    pub service_ms_by_batch: Option<BTreeMap<String, f64>>,
    /// The latency SLO each request was counted against, ms, where the run
    /// counted one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo_ms: Option<f64>,
    /// The share of requests (0–1) that finished within `slo_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within_slo: Option<f64>,
}

impl MeasuredLevel {
    /// Refuses an SLO that is not a positive latency, or a share within it
    /// outside 0–1 or without its SLO.
    fn check_slo(&self) -> Result<(), ServingError> {
        let at = |field: &str, value: f64, what: &str| {
            ServingError::invalid(field, format!("{value} at load {} is not {what}", self.utilisation))
        };
        if let Some(slo_ms) = self.slo_ms.filter(|ms| !(ms.is_finite() && *ms > 0.0)) {
            return Err(at("slo_ms", slo_ms, "a positive latency"));
        }
        match self.within_slo {
            Some(share) if !(0.0..=1.0).contains(&share) => Err(at("within_slo", share, "a share in 0–1")),
            Some(share) if self.slo_ms.is_none() => Err(at("within_slo", share, "counted against an slo_ms")),
            _ => Ok(()),
        }
    }

    /// How much slower the full batch (`max_batch`, profiled at
    /// `profiled_ms`) ran while serving than profiled, where measured.
    fn serving_slowdown(&self, max_batch: u32, profiled_ms: f64) -> Option<f64> {
        let served_ms = self.service_ms_by_batch.as_ref()?.get(&max_batch.to_string())?;
        Some(served_ms / profiled_ms - 1.0)
    }
}

/// What the model says of one measured load.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LevelComparison {
    /// The load as measured.
    pub measured: MeasuredLevel,
    /// The model's median latency at the measured rate, ms (exact).
    pub model_p50_ms: f64,
    /// The model's 99th percentile latency, ms (exact).
    pub model_p99_ms: f64,
    /// The model's 99.9th percentile latency, ms (exact).
    pub model_p999_ms: f64,
    /// The lowest and highest p99 (ms) of the model's own runs as long as
    /// the measured one (its seconds and warm-up): how far one run's p99
    /// strays from the exact one.
    pub simulated_p99_range_ms: (f64, f64),
    /// The margin of the capacity below (every batch this share slower
    /// than profiled).
    pub margin: f64,
    /// The rate a planner would route to this segment, under that margin,
    /// for a p99 SLO equal to the p99 the GPU measured (the model's
    /// capacity, Poisson arrivals): above the measured rate, the planner
    /// would promise a latency where the GPU did not deliver it.
    pub capacity_rps_at_measured_p99: f64,
    /// How much slower the full batch ran while serving than profiled
    /// (0.004: 0.4%), where the run measured it.
    pub serving_slowdown: Option<f64>,
    /// The model's 99th percentile latency, ms, with what this load
    /// measured of serving folded into the profile as a profile carries it
    /// ([`BatchTiming`]: the serving slowdown, a faster serving counting as
    /// the profile, and the dispatch gap), where it measured either.
    pub model_p99_served_ms: Option<f64>,
    /// The model's share of requests (0–1) within the level's SLO at the
    /// measured rate (exact), where the run counted one.
    pub model_within_slo: Option<f64>,
}

impl MeasuredServing {
    /// Parses the JSON of a measured run (fields beside the run's are
    /// ignored); what the model needs is checked by [`Self::shape`] and
    /// [`Self::compare_with_model`].
    ///
    /// # Errors
    /// Text that is not JSON of the run's shape, naming the field and place.
    pub fn from_json(text: &str) -> Result<MeasuredServing, ServingError> {
        serde_json::from_str(text).map_err(|error| ServingError::invalid("run", error.to_string()))
    }

    /// The segment the run measured, its profile read as Tessera reads any
    /// profile: every batch's latency raised to any smaller batch's and
    /// capped at the full batch's ([`SegmentShape::conservative`]), its
    /// batches spread as the profile's percentiles say
    /// ([`SegmentShape::p99_ratio`]).
    ///
    /// # Errors
    /// No processes, a profile without the full batch, or a latency that is
    /// not positive.
    pub fn shape(&self) -> Result<SegmentShape, ServingError> {
        self.shape_with(None, None)
    }

    /// [`Self::shape`] with every batch `serving_slowdown` slower and the
    /// dispatch gap added, as a [`BatchTiming`] carrying them would give.
    fn shape_with(
        &self,
        serving_slowdown: Option<f64>,
        dispatch_gap_ms: Option<f64>,
    ) -> Result<SegmentShape, ServingError> {
        let timing = |batch: &MeasuredBatch| BatchTiming {
            latency_p50_ms: batch.p50_ms,
            latency_p99_ms: batch.p99_ms,
            dispatch_gap_ms,
            serving_slowdown,
        };
        let full = self.profile.iter().find(|p| p.batch == self.max_batch).ok_or_else(|| {
            ServingError::invalid("profile", format!("the full batch ({}) was not profiled", self.max_batch))
        })?;
        let smaller =
            self.profile.iter().filter(|p| p.batch < self.max_batch).map(|p| (p.batch, p.latency_ms, timing(p)));
        Ok(SegmentShape::timed(self.procs, self.max_batch, (full.latency_ms, timing(full)), smaller)?.shape)
    }

    /// Each measured load beside the model's percentiles at its measured
    /// rate and the p99 range of `runs` simulated runs of the same length
    /// (seeds `0..runs`).
    ///
    /// # Errors
    /// As [`MeasuredServing::shape`]; no loads, `runs` of 0, a rate that is
    /// not positive, a warm-up not shorter than the run.
    pub fn compare_with_model(&self, runs: u64, margin: f64) -> Result<Vec<LevelComparison>, ServingError> {
        let shape = self.shape()?;
        let full_ms = shape.latency_ms(self.max_batch);
        let capacities = Capacities::new();
        if self.levels.is_empty() {
            return Err(ServingError::invalid("levels", "no load was measured"));
        }
        if runs == 0 {
            return Err(ServingError::invalid("runs", "at least one simulated run is needed"));
        }
        self.levels
            .iter()
            .map(|level| {
                if !(level.arrived_rps.is_finite() && level.arrived_rps > 0.0) {
                    return Err(ServingError::invalid(
                        "arrived_rps",
                        format!("{} at load {} is not a positive rate", level.arrived_rps, level.utilisation),
                    ));
                }
                level.check_slo()?;
                let at = |percentile| analytic::percentile_latency_ms(&shape, level.arrived_rps, percentile);
                let serving_slowdown = level.serving_slowdown(self.max_batch, full_ms);
                let dispatch_gap_ms = level.dispatch_gap_us.map(|us| us / 1000.0);
                let model_p99_served_ms = if serving_slowdown.is_some() || dispatch_gap_ms.is_some() {
                    let served = self.shape_with(serving_slowdown, dispatch_gap_ms)?;
                    Some(analytic::percentile_latency_ms(&served, level.arrived_rps, 99.0)?)
                } else {
                    None
                };
                Ok(LevelComparison {
                    measured: level.clone(),
                    model_p50_ms: at(50.0)?,
                    model_p99_ms: at(99.0)?,
                    model_p999_ms: at(99.9)?,
                    simulated_p99_range_ms: self.simulated_p99_range_ms(&shape, level, runs)?,
                    margin,
                    capacity_rps_at_measured_p99: capacities.capacity_rps(
                        &shape.slowed_by(margin),
                        99.0,
                        level.p99_ms,
                        &ArrivalModel::Poisson,
                    )?,
                    serving_slowdown,
                    model_p99_served_ms,
                    model_within_slo: level
                        .slo_ms
                        .map(|slo_ms| analytic::attainment(&shape, level.arrived_rps, slo_ms))
                        .transpose()?,
                })
            })
            .collect()
    }

    fn simulated_p99_range_ms(
        &self,
        shape: &SegmentShape,
        level: &MeasuredLevel,
        runs: u64,
    ) -> Result<(f64, f64), ServingError> {
        // The SLO only counts attainment, which is not compared here.
        let service = ServedService {
            name: self.model.clone(),
            rate_rps: level.arrived_rps,
            latency_slo_ms: level.p99_ms,
            percentile: 99.0,
        };
        let segment = ServedSegment { service: 0, shape: shape.clone(), weight: 1.0, label: "measured".into() };
        let system = ServingSystem::new(vec![service], vec![segment])?;
        let mut range = (f64::INFINITY, 0.0f64);
        for seed in 0..runs {
            let options = SimulationOptions {
                seconds: self.seconds,
                warmup_s: self.warmup_s,
                seed,
                ..SimulationOptions::default()
            };
            let report = simulate(&system, &options)?;
            let p99_ms = report.services[0]
                .measures
                .as_ref()
                .map(|measures| measures.p99_ms)
                .ok_or_else(|| ServingError::invalid("seconds", "a simulated run measured no request"))?;
            range = (range.0.min(p99_ms), range.1.max(p99_ms));
        }
        Ok(range)
    }
}
