//! A shared instance against a real GPU: several light models served by
//! one executor under the serialized discipline
//! (`examples/workloads/torch_serve.py --members` writes the run), each
//! member's measured share within its SLO beside what the serialized model
//! ([`crate::serialized`]) predicts from the member profiles the run
//! measured, at the rates it served.

use serde::{Deserialize, Serialize};

use crate::error::ServingError;
use crate::measured::MeasuredBatch;
use crate::serialized::{busy_share, member_figures, Member, MemberLoad};

/// The percentile a shared run's members are judged at.
const MEMBER_PERCENTILE: f64 = 99.0;

/// One shared-instance run (fields the script writes beside these are
/// ignored).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct MeasuredShared {
    /// Seconds of arrivals.
    pub seconds: f64,
    /// Requests arriving before this (seconds) were not counted.
    pub warmup_s: f64,
    /// The share of the run the executor was busy.
    pub busy_share: f64,
    /// The members, each with its own Poisson stream and queue.
    pub members: Vec<MeasuredMember>,
}

/// One member as served.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct MeasuredMember {
    /// The model.
    pub model: String,
    /// Its largest batch (the serialized model judges batch 1).
    pub batch: u32,
    /// Its arrival rate, req/s.
    pub rate_rps: f64,
    /// Its latency SLO, ms.
    pub slo_ms: f64,
    /// Its full batch, profiled alone on the instance.
    pub profile: MeasuredBatch,
    /// Requests counted (after the warm-up).
    pub requests: u64,
    /// Measured 99th percentile latency, ms.
    pub p99_ms: f64,
    /// The share of its requests (0–1) within `slo_ms`.
    pub within_slo: f64,
}

/// What the model says of one member.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemberComparison {
    /// The member as measured.
    pub measured: MeasuredMember,
    /// The model's share of its requests within its SLO (0–1).
    pub model_within_slo: f64,
    /// The model's 99th percentile latency, ms (infinite past the model's
    /// horizon).
    pub model_p99_ms: f64,
}

/// A shared run beside the model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SharedComparison {
    /// The executor's busy share, measured.
    pub busy_share: f64,
    /// The executor's busy share the profiles and rates give (Σ rate ×
    /// batch time).
    pub model_busy_share: f64,
    /// Each member.
    pub members: Vec<MemberComparison>,
}

impl MeasuredShared {
    /// Parses the JSON of a shared run.
    ///
    /// # Errors
    /// Text that is not JSON of the run's shape, naming the field and place.
    pub fn from_json(text: &str) -> Result<MeasuredShared, ServingError> {
        serde_json::from_str(text).map_err(|error| ServingError::invalid("run", error.to_string()))
    }

    /// Every member's measured share within its SLO beside the serialized
    /// model's, at the rates served and the batch times profiled.
    ///
    /// # Errors
    /// Fewer than two members, a member at a batch other than 1 (the model
    /// judges batch 1), a rate, SLO or batch time that is not positive, a
    /// share outside 0–1, or an executor the rates overload.
    pub fn compare_with_model(&self) -> Result<SharedComparison, ServingError> {
        if self.members.len() < 2 {
            return Err(ServingError::invalid("members", "a shared run has at least two members"));
        }
        let mut loads = Vec::with_capacity(self.members.len());
        for member in &self.members {
            let at =
                |field: &str, what: String| ServingError::invalid(field, format!("member {}: {what}", member.model));
            if member.batch != 1 || member.profile.batch != 1 {
                return Err(at("batch", format!("{}: the serialized model judges members at batch 1", member.batch)));
            }
            for (field, value) in
                [("rate_rps", member.rate_rps), ("slo_ms", member.slo_ms), ("latency_ms", member.profile.latency_ms)]
            {
                if !(value.is_finite() && value > 0.0) {
                    return Err(at(field, format!("{value} is not positive")));
                }
            }
            if !(0.0..=1.0).contains(&member.within_slo) {
                return Err(at("within_slo", format!("{} is not a share in 0–1", member.within_slo)));
            }
            let load = MemberLoad { rate_rps: member.rate_rps, busy_ms: member.profile.latency_ms };
            loads.push(Member { load, slo_ms: member.slo_ms, percentile: MEMBER_PERCENTILE });
        }
        let members = self
            .members
            .iter()
            .enumerate()
            .map(|(index, measured)| {
                let figures = member_figures(&loads, index, 0.0)?;
                Ok(MemberComparison {
                    measured: measured.clone(),
                    model_within_slo: figures.attainment,
                    model_p99_ms: figures.latency_ms,
                })
            })
            .collect::<Result<Vec<_>, ServingError>>()?;
        let model_busy_share = busy_share(&loads);
        Ok(SharedComparison { busy_share: self.busy_share, model_busy_share, members })
    }
}
