//! What the kept layouts cannot cover, planned by the `optimal` strategy on
//! new GPUs within the fleet's limits less the GPUs kept.

use std::collections::HashMap;

use tessera_core::{Placement, ProfilePoint, ServiceSlo};

use super::work::{Ledger, Slot, WorkGpu};
use crate::allocate::Segment;
use crate::error::PlanError;
use crate::optimal::plan_optimal;
use crate::problem::Problem;

/// Plans what the kept layouts cannot cover on new GPUs, with the
/// `optimal` strategy and the fleet's limits less the GPUs kept.
pub(super) fn plan_residual(request: &Problem<'_>, gpus: &[WorkGpu]) -> Result<Vec<WorkGpu>, PlanError> {
    let ledger = Ledger::of(request.services, gpus);
    let residual: Vec<ServiceSlo> = request
        .services
        .iter()
        .enumerate()
        .filter(|&(s, _)| ledger.deficit(s) > 0.0)
        .map(|(s, slo)| ServiceSlo { rate_rps: ledger.deficit(s), ..slo.clone() })
        .collect();
    if residual.is_empty() {
        return Ok(Vec::new());
    }
    let mut fleet = request.fleet.clone();
    for offer in &mut fleet {
        let used = gpus.iter().filter(|g| g.model == offer.model).count() as u64;
        offer.limit = offer.limit.map(|limit| limit.saturating_sub(used));
    }
    fleet.retain(|offer| offer.limit != Some(0));
    if fleet.is_empty() {
        return Err(PlanError::EmptyFleet);
    }
    let sub = Problem { fleet, services: &residual, ..request.clone() };
    let plan = plan_optimal(&sub)?;
    let index: HashMap<&str, usize> =
        request.services.iter().enumerate().map(|(i, s)| (s.service.as_str(), i)).collect();
    Ok(plan
        .gpus
        .iter()
        .map(|gpu| WorkGpu {
            model: gpu.gpu_model,
            position: None,
            slots: gpu
                .instances
                .iter()
                .map(|instance| Slot {
                    placement: Placement {
                        profile: gpu
                            .gpu_model
                            .spec()
                            .profile_by_name(&instance.profile)
                            .expect("planned profiles exist"),
                        start: instance.start,
                    },
                    segment: Some(Segment {
                        service: index[instance.service.as_str()],
                        point: ProfilePoint {
                            config: tessera_core::SegmentConfig {
                                size_gpcs: instance.size,
                                batch: instance.batch,
                                procs: instance.procs,
                            },
                            throughput_rps: instance.capacity(),
                            latency_ms: instance.latency_ms,
                            memory_gb: None,
                            timing: tessera_core::BatchTiming::default(),
                        },
                    }),
                })
                .collect(),
        })
        .collect())
}
