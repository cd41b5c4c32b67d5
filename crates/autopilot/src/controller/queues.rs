//! Rule 8 of the controller: each service's backlog estimated from its
//! observed rates, and the capacity that drains it.

use std::collections::HashMap;

use tessera_core::{Plan, ServiceSlo};

use super::Controller;

impl Controller {
    /// Carries each service's estimated backlog over the `elapsed_s` its
    /// observed `rates_rps` were the mean of (rule 8); none before a plan
    /// runs or the first observation.
    pub(super) fn estimate_queues(&mut self, rates_rps: &[f64], elapsed_s: Option<f64>) {
        let (Some(plan), Some(elapsed_s)) = (&self.plan, elapsed_s) else { return };
        if self.config.drain_s == 0.0 {
            return;
        }
        let throughputs = dedicated_throughputs_rps(plan, self.planner.services());
        for ((queued, &rate_rps), throughput_rps) in self.queued.iter_mut().zip(rates_rps).zip(throughputs) {
            *queued = match throughput_rps {
                Some(throughput_rps) => (*queued + (rate_rps - throughput_rps) * elapsed_s).max(0.0),
                None => 0.0,
            };
        }
    }

    /// Each service's forecast, plus what drains its estimated backlog
    /// within `drain_s` (rule 8).
    pub(super) fn forecast_with_queues(&self) -> Vec<f64> {
        let forecast_rps = self.forecaster.forecast();
        match self.config.drain_s > 0.0 {
            true => forecast_rps
                .iter()
                .zip(&self.queued)
                .map(|(rate, queued)| rate + queued / self.config.drain_s)
                .collect(),
            false => forecast_rps,
        }
    }

    /// The services among `short` with requests queued, in words (empty
    /// when none).
    pub(super) fn queued_words(&self, short: &[(usize, String)]) -> String {
        let queued: Vec<String> = (short.iter())
            .filter(|&&(index, _)| self.queued[index] > 0.0)
            .map(|&(index, _)| format!("{} {:.0}", self.services()[index].service, self.queued[index]))
            .collect();
        match queued.is_empty() {
            true => String::new(),
            false => format!(
                " (requests queued beyond throughput, each drained within {:.0} s: {})",
                self.config.drain_s,
                queued.join(", ")
            ),
        }
    }
}

/// Each of `services`' segments' full-batch throughput together in
/// `plan`, as profiled (req/s, in the services' order); `None` for a
/// service with no segment of its own or a member of a shared instance.
fn dedicated_throughputs_rps(plan: &Plan, services: &[ServiceSlo]) -> Vec<Option<f64>> {
    let index: HashMap<&str, usize> =
        services.iter().enumerate().map(|(index, slo)| (slo.service.as_str(), index)).collect();
    let mut throughputs_rps = vec![0.0; services.len()];
    let mut shared = vec![false; services.len()];
    for gpu in &plan.gpus {
        for instance in &gpu.instances {
            if let Some(&service) = index.get(instance.service.as_str()) {
                throughputs_rps[service] += instance.throughput_rps;
            }
        }
        for member in gpu.shared.iter().flat_map(|instance| &instance.members) {
            if let Some(&service) = index.get(member.service.as_str()) {
                shared[service] = true;
            }
        }
    }
    (throughputs_rps.into_iter().zip(shared))
        .map(|(throughput_rps, shared)| (throughput_rps > 0.0 && !shared).then_some(throughput_rps))
        .collect()
}
