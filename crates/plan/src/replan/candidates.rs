//! The configurations each service may run on each GPU model under the
//! rule, with their maximum provisioning ratios, best throughput first:
//! the ones a replan may give an instance, and whether a running segment
//! may stay.

use std::collections::HashMap;

use tessera_core::{GpuModel, InstanceAssignment, ProfilePoint};

use crate::problem::Problem;

/// The configurations each service may run on each GPU model, with their
/// maximum provisioning ratios, by throughput (best first).
pub(super) struct Candidates<'r> {
    request: &'r Problem<'r>,
    cache: HashMap<(GpuModel, usize), Vec<(ProfilePoint, f64)>>,
}

impl<'r> Candidates<'r> {
    pub(super) fn new(request: &'r Problem<'r>) -> Self {
        Candidates { request, cache: HashMap::new() }
    }

    fn of(&mut self, model: GpuModel, service: usize) -> &[(ProfilePoint, f64)] {
        let request = self.request;
        self.cache.entry((model, service)).or_insert_with(|| {
            let slo = &request.services[service];
            let Some(profile) = request.catalog.get(model, &slo.model) else {
                return Vec::new();
            };
            let mut points: Vec<(ProfilePoint, f64)> = request
                .judge()
                .judged_points(profile, slo, request.max_procs)
                .unwrap_or_default()
                .into_iter()
                .filter_map(|p| request.rule.max_provision_ratio(&p, slo.latency_slo_ms).map(|ratio| (p, ratio)))
                .collect();
            points.sort_by(|a, b| b.0.throughput_rps.total_cmp(&a.0.throughput_rps));
            points
        })
    }

    /// The best configuration of `size` for `service` once its provisioning
    /// reaches `ratio` (rate multiples).
    pub(super) fn best(
        &mut self,
        model: GpuModel,
        service: usize,
        size: u8,
        ratio: impl Fn(f64) -> f64,
    ) -> Option<ProfilePoint> {
        self.of(model, service)
            .iter()
            .find(|(p, cap)| p.config.size_gpcs == size && ratio(p.throughput_rps) <= *cap)
            .map(|(p, _)| *p)
    }

    /// The configuration `point` as the catalogue has it now, if the
    /// service may still run it.
    pub(super) fn current(
        &mut self,
        model: GpuModel,
        service: usize,
        instance: &InstanceAssignment,
    ) -> Option<ProfilePoint> {
        self.of(model, service)
            .iter()
            .find(|(p, _)| {
                p.config.size_gpcs == instance.size
                    && p.config.batch == instance.batch
                    && p.config.procs == instance.procs
            })
            .map(|(p, _)| *p)
    }

    pub(super) fn cap(&mut self, model: GpuModel, service: usize, point: &ProfilePoint) -> f64 {
        self.of(model, service).iter().find(|(p, _)| p.config == point.config).map_or(f64::INFINITY, |(_, cap)| *cap)
    }
}
