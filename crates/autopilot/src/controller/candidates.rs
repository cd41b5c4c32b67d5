//! The replans the controller may take and what their transitions would
//! cost: the replan with the fewest reconfigurations, and the ways around
//! a dip (rule 6 of the controller).

use std::collections::{BTreeSet, HashMap};

use rayon::prelude::*;
use tessera_core::text::count;
use tessera_core::{Plan, ServiceSlo};
use tessera_plan::{GpuPosition, PlanError, Planned};

use super::config::ControllerConfig;
use crate::free_slices::add_in_free_slices;
use crate::planner::Planner;
use crate::transition::Transition;

/// A replan the controller may take.
#[derive(Debug, Clone)]
pub(super) struct Candidate {
    /// The new plan.
    pub plan: Plan,
    /// The way there, timed.
    pub transition: Transition,
    /// GPUs of the fresh optimum at the same rates; `None` for a swap,
    /// planned within the running instances without it.
    pub fresh_gpus: Option<usize>,
    /// A service its transition leaves below its forecast, in words.
    pub dip: Option<String>,
}

/// A way around a scale-up's dip or long transition (see
/// [`Replanner::scale_up`]).
enum Alternative {
    /// A replan with room for this many GPUs over the fresh optimum.
    Wider(u64),
    /// The running plan with segments added.
    Added,
    /// A replan draining this GPU.
    Drained(GpuPosition),
}

/// The planner under the controller's configuration, making candidates.
pub(super) struct Replanner<'a> {
    /// Plans at given rates.
    pub planner: &'a Planner,
    /// The controller's configuration.
    pub config: &'a ControllerConfig,
}

impl Replanner<'_> {
    /// The services, in the planner's order.
    fn services(&self) -> &[ServiceSlo] {
        self.planner.services()
    }

    /// A replan from `running` for `plan_rps` within `extra_gpus` of the
    /// fresh optimum, with its first dip.
    pub fn replan_for(
        &self,
        running: &Plan,
        plan_rps: &[f64],
        dip_rps: &[f64],
        extra_gpus: u64,
    ) -> Result<Candidate, PlanError> {
        let planned = self.planner.replan(plan_rps, running, extra_gpus, &[])?;
        Ok(self.replanned(running, planned, dip_rps))
    }

    /// A replan from `running` for `plan_rps` within `extra_gpus` of the
    /// fresh optimum with `gpu` drained (its segments moved elsewhere
    /// before it is emptied), with its first dip.
    fn replan_drained(
        &self,
        running: &Plan,
        plan_rps: &[f64],
        dip_rps: &[f64],
        extra_gpus: u64,
        gpu: GpuPosition,
    ) -> Result<Candidate, PlanError> {
        let planned = self.planner.replan(plan_rps, running, extra_gpus, &[gpu])?;
        Ok(self.replanned(running, planned, dip_rps))
    }

    /// Whether `candidate` may be taken as it is: no dip, and a transition
    /// within [`ControllerConfig::max_transition_s`].
    pub fn fits(&self, candidate: &Candidate) -> bool {
        candidate.dip.is_none() && candidate.transition.duration_s() <= self.config.max_transition_s
    }

    /// The scale-up to `up_rps`: the replan with the fewest
    /// reconfigurations; if it dips or takes longer than
    /// [`ControllerConfig::max_transition_s`], of it, the replan with room
    /// to keep every running GPU and add up to
    /// [`ControllerConfig::dip_extra_gpus`], the running plan with segments
    /// added (`added_to`) and the replans draining one of the
    /// `dip_extra_gpus + 1` least used GPUs, the one without a dip within
    /// the time on the fewest GPUs (then the fewest reconfigured), else the
    /// one without a dip on the fewest GPUs; the first when all dip.
    pub fn scale_up(&self, running: &Plan, up_rps: &[f64], dip_rps: &[f64]) -> Result<Candidate, PlanError> {
        let first = self.replan_for(running, up_rps, dip_rps, self.config.max_extra_gpus)?;
        if self.fits(&first) {
            return Ok(first);
        }
        let room = (running.gpu_count as u64 + self.config.dip_extra_gpus)
            .saturating_sub(first.fresh_gpus.unwrap_or(first.plan.gpu_count) as u64);
        // The alternatives are independent replans: made side by side.
        let wider = (room > self.config.max_extra_gpus).then_some(Alternative::Wider(room));
        let drained =
            least_used(running, self.config.dip_extra_gpus as usize + 1).into_iter().map(Alternative::Drained);
        let alternatives: Vec<Alternative> = wider.into_iter().chain([Alternative::Added]).chain(drained).collect();
        let made: Vec<Result<Candidate, PlanError>> = alternatives
            .into_par_iter()
            .map(|alternative| match alternative {
                Alternative::Wider(room) => self.replan_for(running, up_rps, dip_rps, room),
                Alternative::Added => self.added_to(running, up_rps, dip_rps),
                Alternative::Drained(gpu) => {
                    self.replan_drained(running, up_rps, dip_rps, self.config.max_extra_gpus, gpu)
                }
            })
            .collect();
        let best =
            made.into_iter().flatten().chain([first.clone()]).filter(|candidate| candidate.dip.is_none()).min_by_key(
                |candidate| {
                    (!self.fits(candidate), candidate.plan.gpu_count, candidate.transition.totals.gpus_reconfigured())
                },
            );
        Ok(best.unwrap_or(first))
    }

    /// The swap to `swap_rps`: the replan within the running MIG
    /// instances, taken only when it changes no GPU's MIG layout and adds
    /// none (instances that stay change service: only processes restart)
    /// and does not dip; `None` otherwise. No fresh optimum is planned:
    /// a swap is weighed against nothing but the keep test.
    pub fn swapped(&self, running: &Plan, swap_rps: &[f64], dip_rps: &[f64]) -> Option<Candidate> {
        let plan = self.planner.replan_within_layouts(swap_rps, running).ok()?;
        let candidate = self.candidate(running, plan, None, dip_rps);
        let swaps = !candidate.transition.is_empty() && candidate.transition.keeps_layouts();
        (swaps && candidate.dip.is_none()).then_some(candidate)
    }

    /// `running` with segments added for what each service lacks of
    /// `up_rps` (a fresh plan of the shortfalls, its segments put in the
    /// running GPUs' free slices where they fit, on new GPUs otherwise): no
    /// running segment stops. The planner checks the whole (a replan of it
    /// that changes nothing) and reports its services. A member of a
    /// running shared instance gets nothing added (a member has no other
    /// segment: its executor changes only by a replan); when every short
    /// service is one, there is nothing to add.
    pub fn added_to(&self, running: &Plan, up_rps: &[f64], dip_rps: &[f64]) -> Result<Candidate, PlanError> {
        let members: BTreeSet<&str> =
            running.shared_instances().flat_map(|(_, shared)| &shared.members).map(|m| m.service.as_str()).collect();
        let short: Vec<(usize, f64)> = up_rps
            .iter()
            .zip(self.capacities_rps(running))
            .enumerate()
            .filter(|(_, (&rate, capacity))| rate > *capacity * (1.0 + 1e-9))
            .map(|(index, (rate, capacity))| (index, rate - capacity))
            .collect();
        let (shared, shortfalls): (Vec<_>, Vec<_>) =
            short.into_iter().partition(|&(index, _)| members.contains(self.services()[index].service.as_str()));
        if shortfalls.is_empty() && !shared.is_empty() {
            let names: Vec<&str> = shared.iter().map(|&(index, _)| self.services()[index].service.as_str()).collect();
            return Err(PlanError::InvalidOption {
                field: "share",
                message: format!("{} short in shared instances, which grow only by a replan", names.join(", ")),
            });
        }
        let extra = self.planner.fresh_for(&shortfalls)?;
        let mut merged = running.clone();
        add_in_free_slices(&mut merged, extra.gpus);
        self.as_is(running, &merged, up_rps, dip_rps)
    }

    /// `plan`, made by hand from `running`, as a candidate: the planner
    /// checks it whole (a replan of it for `rates_rps` that changes
    /// nothing) and reports its services.
    fn as_is(&self, running: &Plan, plan: &Plan, rates_rps: &[f64], dip_rps: &[f64]) -> Result<Candidate, PlanError> {
        let planned = self.planner.replan(rates_rps, plan, plan.gpu_count as u64, &[])?;
        Ok(self.replanned(running, planned, dip_rps))
    }

    /// A replan from `running` as a candidate, with its fresh optimum's
    /// GPUs.
    fn replanned(&self, running: &Plan, planned: Planned, dip_rps: &[f64]) -> Candidate {
        let fresh_gpus = planned.replan.as_ref().map_or(planned.plan.gpu_count, |c| c.fresh.gpu_count);
        self.candidate(running, planned.plan, Some(fresh_gpus), dip_rps)
    }

    /// `plan` as a candidate from `running`: its timed transition and its
    /// first dip (a service below its rate in `dip_rps` and below its
    /// capacity in `running` while a step runs).
    fn candidate(&self, running: &Plan, plan: Plan, fresh_gpus: Option<usize>, dip_rps: &[f64]) -> Candidate {
        let floor_rps: Vec<f64> =
            dip_rps.iter().zip(self.capacities_rps(running)).map(|(dip, capacity)| dip.min(capacity)).collect();
        let transition = Transition::between(running, &plan, &self.config.reconfiguration);
        let dip = self.dip_below(&transition, &floor_rps);
        Candidate { plan, transition, fresh_gpus, dip }
    }

    /// The first service `transition` leaves below its rate in `floor_rps`
    /// while a step runs, in words.
    fn dip_below(&self, transition: &Transition, floor_rps: &[f64]) -> Option<String> {
        transition.dips().find_map(|dip| {
            let index = self.services().iter().position(|slo| slo.service == dip.service)?;
            (dip.provisioned_rps < floor_rps[index] * (1.0 - 1e-9)).then(|| {
                format!(
                    "{} at {:.1} req/s while a step runs, below its {:.1}",
                    dip.service, dip.provisioned_rps, floor_rps[index]
                )
            })
        })
    }

    /// GPUs `running` would need at `rates_rps`, roughly: each service's
    /// share of its GPUs (compute slices; of a shared instance, its share
    /// of the executor's busy time) times its rate over its capacity.
    pub fn estimated_gpus(&self, running: &Plan, rates_rps: &[f64]) -> f64 {
        let index_of: HashMap<&str, usize> =
            self.services().iter().enumerate().map(|(index, slo)| (slo.service.as_str(), index)).collect();
        let mut gpus = vec![0.0; self.services().len()];
        for gpu in &running.gpus {
            let slices = f64::from(gpu.gpu_model.spec().compute_slices);
            for instance in &gpu.instances {
                if let Some(&index) = index_of.get(instance.service.as_str()) {
                    gpus[index] += f64::from(instance.size) / slices;
                }
            }
            // A member holds its share of the executor's busy time.
            for shared in &gpu.shared {
                let busy = shared.busy_share(0.0);
                for member in &shared.members {
                    if let Some(&index) = index_of.get(member.service.as_str()) {
                        let share =
                            if busy > 0.0 { member.busy_share() / busy } else { 1.0 / shared.members.len() as f64 };
                        gpus[index] += f64::from(shared.size) / slices * share;
                    }
                }
            }
        }
        let capacities = self.capacities_rps(running);
        (0..gpus.len())
            .map(|index| match capacities[index] {
                capacity_rps if capacity_rps > 0.0 => gpus[index] * rates_rps[index] / capacity_rps,
                _ => gpus[index],
            })
            .sum()
    }

    /// Each service's capacity in `plan` (req/s, in the services' order).
    pub fn capacities_rps(&self, plan: &Plan) -> Vec<f64> {
        self.services()
            .iter()
            .map(|slo| {
                let report = plan.services.iter().find(|report| report.service == slo.service);
                report.map_or(0.0, |report| report.provisioned_rps)
            })
            .collect()
    }

    /// The scale-down to take from `running` to `plan_rps` in place of
    /// `first` (the replan within `max_extra_gpus` of the fresh optimum,
    /// releasing at least `threshold` GPUs) when it dips or takes longer
    /// than [`ControllerConfig::max_transition_s`]: a replan releasing as
    /// many GPUs (when only a dip was wrong), then half as many, then half
    /// again, down to `threshold`; a release whose replan dips is tried
    /// draining each of the `dip_extra_gpus + 1` least used GPUs (its
    /// segments move to free room first, then it is torn down). The first
    /// that fits and releases at least `threshold`; `None` when none does.
    pub fn scale_down_within_limits(
        &self,
        running: &Plan,
        plan_rps: &[f64],
        dip_rps: &[f64],
        threshold: usize,
        first: &Candidate,
    ) -> Option<Candidate> {
        let released = running.gpu_count.saturating_sub(first.plan.gpu_count);
        let mut releases = Vec::new();
        if first.transition.duration_s() <= self.config.max_transition_s {
            releases.push(released);
        }
        let mut release = released;
        while release > threshold {
            release = (release / 2).max(threshold);
            releases.push(release);
        }
        let least_used = least_used(running, self.config.dip_extra_gpus as usize + 1);
        let takes = |tried: &Candidate| self.fits(tried) && running.gpu_count >= tried.plan.gpu_count + threshold;
        for release in releases {
            let extra_gpus =
                running.gpu_count.saturating_sub(release + first.fresh_gpus.unwrap_or(first.plan.gpu_count)) as u64;
            let plain = match release == released {
                true => first.clone(),
                false => match self.replan_for(running, plan_rps, dip_rps, extra_gpus) {
                    Ok(plain) => plain,
                    Err(_) => continue,
                },
            };
            if takes(&plain) {
                return Some(plain);
            }
            if plain.dip.is_none() {
                continue;
            }
            // Drained replans side by side; the first of them that fits.
            let drained: Vec<Option<Candidate>> = least_used
                .par_iter()
                .map(|&gpu| self.replan_drained(running, plan_rps, dip_rps, extra_gpus, gpu).ok())
                .collect();
            let drained = drained.into_iter().flatten().find(takes);
            if drained.is_some() {
                return drained;
            }
        }
        None
    }
}

/// The `count` GPUs of `plan` with the fewest compute slices in use (the
/// first by position among equals).
fn least_used(plan: &Plan, count: usize) -> Vec<GpuPosition> {
    let mut gpus: Vec<(u32, GpuPosition)> = plan
        .gpus
        .iter()
        .map(|gpu| {
            let used = gpu.layout().map(|(_, size, _)| u32::from(size)).sum();
            (used, GpuPosition { node: gpu.node, index: gpu.index })
        })
        .collect();
    gpus.sort();
    gpus.into_iter().take(count).map(|(_, position)| position).collect()
}

/// A change of plan in words: `6 → 7 GPUs (fresh optimum 6), 1
/// reconfigured, 2 processes started, 41 s` (a swap, planned without a
/// fresh optimum, names none).
pub(super) fn change_words(old: &Plan, new: &Candidate) -> String {
    let fresh = new.fresh_gpus.map_or(String::new(), |gpus| format!(" (fresh optimum {gpus})"));
    format!(
        "{} → {}{fresh}, {} reconfigured, {} started, {:.0} s",
        old.gpu_count,
        count(new.plan.gpu_count, "GPU"),
        new.transition.totals.gpus_reconfigured(),
        count(new.transition.totals.processes_restarted, "process"),
        new.transition.duration_s()
    )
}

#[cfg(test)]
mod tests {
    use tessera_core::GpuModel;
    use tessera_plan::PlanInputs;

    use super::*;
    use crate::planner::PlanSettings;

    #[test]
    fn a_swap_hands_spare_instances_to_a_short_service_and_changes_no_layout() {
        let inputs = PlanInputs::demo(&[GpuModel::A100_80GB]).unwrap();
        let rates_rps: Vec<f64> = inputs.services().iter().map(|slo| slo.rate_rps).collect();
        let planner = Planner::new(inputs, PlanSettings::default());
        let config = ControllerConfig::default();
        let replanner = Replanner { planner: &planner, config: &config };
        let running = planner.fresh(&rates_rps).unwrap();
        let before_rps = replanner.capacities_rps(&running);

        // The first service rises past its capacity while every other
        // falls to half its rate: their spare instances can serve it.
        let mut swap_rps: Vec<f64> = rates_rps.iter().map(|rate| rate * 0.5).collect();
        swap_rps[0] = before_rps[0] * 1.2;
        let swap = replanner.swapped(&running, &swap_rps, &swap_rps).expect("a swap");
        assert!(swap.transition.keeps_layouts() && !swap.transition.only_adds());
        assert!(swap.transition.totals.processes_restarted > 0);
        assert_eq!(swap.plan.gpu_count, running.gpu_count);
        let after_rps = replanner.capacities_rps(&swap.plan);
        for (index, (&after, &wanted)) in after_rps.iter().zip(&swap_rps).enumerate() {
            assert!(after >= wanted * (1.0 - 1e-9), "service {index}: {after} < {wanted}");
        }

        // When every service rises, no instance is spare: no swap.
        let risen_rps: Vec<f64> = before_rps.iter().map(|capacity| capacity * 1.2).collect();
        assert!(replanner.swapped(&running, &risen_rps, &risen_rps).is_none());
    }
}
