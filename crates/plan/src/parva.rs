//! The `parva` strategy: ParvaGPU's configurator and allocator, made
//! physically valid (explicit MIG starts on the real lattice), unbounded in
//! GPUs, and never dropping a segment.

use tessera_core::{GpuModel, GpuOffer, Lattice, Plan};

use crate::allocate::{dissolve_small_gpus, place_largest_first, Fleet, Segment, SmallPieces};
use crate::assemble::build_plan;
use crate::configure::{configure, SegmentChoice};
use crate::error::PlanError;
use crate::latency::LatencyRule;
use crate::problem::Problem;
use crate::strategy::Strategy;

/// GPUs using at most this many compute slices are dissolved (ParvaGPU: 4).
pub const DISSOLVE_MAX_USED_GPCS: u32 = 4;

/// ParvaGPU places at most one 3g instance per GPU.
pub const MAX_3G_PER_GPU: u32 = 1;

/// Plans `request` with the `parva` strategy. A plan with more GPUs than
/// the fleet's count limit is an error (ParvaGPU's heuristic proves
/// nothing, so a plan within the limit may still exist).
pub fn plan_parva(request: &Problem<'_>) -> Result<Plan, PlanError> {
    let offer = single_gpu(request)?;
    let gpu = offer.model;
    let choices = configure_all(request, gpu)?;
    let lattice = Lattice::new(gpu);
    let mut fleet = Fleet::new(&lattice).with_size_cap(3, MAX_3G_PER_GPU);
    let segments: Vec<Segment> = choices
        .iter()
        .enumerate()
        .flat_map(|(service, choice)| choice.segments().map(move |point| Segment { service, point }))
        .collect();
    place_largest_first(&mut fleet, &segments);
    let pieces: Vec<SmallPieces> = choices
        .iter()
        .map(|choice| SmallPieces {
            one: choice.best_by_size.get(&1).copied(),
            two: choice.best_by_size.get(&2).copied(),
        })
        .collect();
    dissolve_small_gpus(&mut fleet, &pieces, DISSOLVE_MAX_USED_GPCS);
    let gpus: Vec<_> = fleet.into_gpus().into_iter().map(|segments| (gpu, segments)).collect();
    request.check_plan_size(gpus.len())?;
    if let Some(limit) = offer.limit.filter(|&limit| gpus.len() as u64 > limit) {
        return Err(PlanError::LimitsNotMet { gpu: gpu.to_string(), needed: gpus.len() as u64, limit });
    }
    Ok(build_plan(request, gpus, "parva"))
}

/// The one GPU model of the request's fleet (its cost and limit do not
/// change ParvaGPU's decisions).
fn single_gpu(request: &Problem<'_>) -> Result<GpuOffer, PlanError> {
    match request.fleet.as_slice() {
        [offer] => Ok(*offer),
        [] => Err(PlanError::EmptyFleet),
        _ => Err(PlanError::SingleGpuOnly { strategy: "parva" }),
    }
}

/// Validates the request and runs the configurator for every service.
fn configure_all(request: &Problem<'_>, gpu: GpuModel) -> Result<Vec<SegmentChoice>, PlanError> {
    if !Strategy::Parva.supports(request.rule) {
        return Err(PlanError::UnsupportedRule {
            strategy: "parva",
            supported: LatencyRule::Parva.name(),
            asked: request.rule.name(),
        });
    }
    request.check()?;
    let (choices, unservable): (Vec<_>, Vec<_>) = request
        .services
        .iter()
        .map(|slo| configure(request.profile(slo, gpu)?, slo, request.judge(), request.max_procs))
        .partition(Result::is_ok);
    PlanError::all(unservable.into_iter().filter_map(Result::err).collect())?;
    Ok(choices.into_iter().filter_map(Result::ok).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::synthetic::{builtin_catalog, demo_services};
    use tessera_core::{ProfileCatalog, ServiceSlo};

    fn request<'a>(catalog: &'a ProfileCatalog, services: &'a [ServiceSlo]) -> Problem<'a> {
        Problem::parva(GpuModel::A100_80GB, catalog, services)
    }

    #[test]
    fn demo_plan_meets_every_service() {
        let catalog = builtin_catalog();
        let services = demo_services();
        let plan = plan_parva(&request(&catalog, &services)).unwrap();
        assert!(plan.gpu_count >= 1);
        assert!(plan.services.iter().all(|s| s.met), "{:#?}", plan.services);
        assert!(plan.services.iter().all(|s| s.segments > 0));
    }

    #[test]
    fn a_count_limit_holds_or_fails_clearly() {
        let catalog = builtin_catalog();
        let services = demo_services();
        let unlimited = plan_parva(&request(&catalog, &services)).unwrap();
        let gpus = unlimited.gpu_count as u64;
        let limited = |limit| Problem {
            fleet: vec![GpuOffer { limit: Some(limit), ..GpuOffer::plain(GpuModel::A100_80GB) }],
            ..request(&catalog, &services)
        };
        assert_eq!(plan_parva(&limited(gpus)).unwrap().gpu_count as u64, gpus);
        let error = plan_parva(&limited(gpus - 1)).unwrap_err();
        assert_eq!(error, PlanError::LimitsNotMet { gpu: "a100-80gb".into(), needed: gpus, limit: gpus - 1 });
    }

    #[test]
    fn unknown_model_and_duplicates_are_errors() {
        let catalog = builtin_catalog();
        let mut services = vec![ServiceSlo::new("x", "alexnet", 10.0, 100.0).unwrap()];
        let error = plan_parva(&request(&catalog, &services)).unwrap_err().to_string();
        assert!(error.contains("alexnet") && error.contains("bert-base"), "{error}");
        services = vec![ServiceSlo::new("x", "gpt2", 10.0, 500.0).unwrap(); 2];
        assert_eq!(plan_parva(&request(&catalog, &services)).unwrap_err(), PlanError::DuplicateService("x".into()));
        assert_eq!(plan_parva(&request(&catalog, &[])).unwrap_err(), PlanError::NoServices);
        let services = demo_services();
        let mixed = Problem {
            fleet: vec![GpuOffer::plain(GpuModel::A100_80GB), GpuOffer::plain(GpuModel::H100_80GB)],
            ..request(&catalog, &services)
        };
        assert_eq!(plan_parva(&mixed).unwrap_err(), PlanError::SingleGpuOnly { strategy: "parva" });
    }
}
