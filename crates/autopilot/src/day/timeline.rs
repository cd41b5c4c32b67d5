//! What one strategy ran over the day: spans of time with the segments
//! that served and the GPUs held, and the reconfigurations.
//!
//! A transition holds every GPU of the old and the new plan from its start
//! to its end (make before break: both count towards GPU-hours). A step's
//! segments stop when the step starts and its new segments serve from its
//! end.
//!
//! Each span of a transition remembers the segments that served before it
//! and those that serve after it, so what the transition itself costs
//! (capacity neither plan lacks) can be told from what the traffic or the
//! new plan would have cost anyway. The segments serving partway through
//! a transition are built when measured, step after step: a day holds one
//! plan per reconfiguration.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use tessera_core::{GpuAssignment, InstanceAssignment, Operation, Plan, SharedInstance, Step};

use crate::transition::Transition;

/// A span of time with the same segments serving.
#[derive(Debug, Clone)]
pub(super) struct Span {
    /// When it starts, seconds.
    pub start_s: f64,
    /// When it ends, seconds.
    pub end_s: f64,
    /// GPUs held.
    pub gpus: usize,
    /// The segments serving.
    pub serving: Serving,
}

/// The segments serving in a span: a whole plan, or partway through a
/// transition. A transition's spans share its two plans and its steps'
/// operations; the segments serving partway are built when asked
/// ([`Timeline::serving_plans`]), so a day holds one plan per
/// reconfiguration, not one per step.
#[derive(Debug, Clone)]
pub(super) enum Serving {
    /// A plan, whole.
    Plan(Arc<Plan>),
    /// While step `step` of `passage` runs: what the steps before it
    /// started, less what they and it stopped.
    Partway { passage: Arc<Passage>, step: usize },
}

impl Serving {
    /// During a transition: the plans before and after it.
    pub fn between(&self) -> Option<(&Plan, &Plan)> {
        match self {
            Serving::Plan(_) => None,
            Serving::Partway { passage, .. } => Some((&passage.before, &passage.after)),
        }
    }
}

/// A transition as the timeline keeps it.
#[derive(Debug)]
pub(super) struct Passage {
    before: Arc<Plan>,
    after: Arc<Plan>,
    /// Per step: the places it stops, then those it starts.
    steps: Vec<(Vec<Place>, Vec<Place>)>,
}

/// A reconfiguration.
#[derive(Debug, Clone, Copy)]
pub(super) struct Reconfigured {
    /// When it started, seconds.
    pub time_s: f64,
    /// GPUs whose MIG layout changed.
    pub gpus: usize,
    /// MPS processes started.
    pub processes: u64,
}

/// One strategy's day.
#[derive(Debug, Clone)]
pub(super) struct Timeline {
    pub spans: Vec<Span>,
    pub reconfigurations: Vec<Reconfigured>,
    /// The plan that runs once every transition so far has ended.
    current: Arc<Plan>,
    /// When the day ends, seconds.
    end_s: f64,
}

/// A running segment's place: node, GPU index, `profile@start`.
type Place = (u32, u32, String);

/// What serves on an instance: a service's segment, or a shared
/// instance's executor.
#[derive(Debug, Clone)]
enum Resident {
    Segment(InstanceAssignment),
    Executor(SharedInstance),
}

/// What serves where, with its GPU (without its instances).
type Placed = BTreeMap<Place, (GpuAssignment, Resident)>;

impl Timeline {
    /// A day of `end_s` seconds that starts with `plan` running.
    pub fn new(plan: &Plan, end_s: f64) -> Timeline {
        let current = Arc::new(plan.clone());
        let first = Span { start_s: 0.0, end_s, gpus: plan.gpu_count, serving: Serving::Plan(current.clone()) };
        Timeline { spans: vec![first], reconfigurations: Vec::new(), current, end_s }
    }

    /// `transition` from the plan that runs to `new` starts at `time_s`;
    /// returns when it ends.
    pub fn reconfigure(&mut self, time_s: f64, new: &Plan, transition: &Transition) -> f64 {
        self.reconfigurations.push(Reconfigured {
            time_s,
            gpus: transition.totals.gpus_reconfigured(),
            processes: transition.totals.processes_restarted,
        });
        let before = self.current.clone();
        let held: BTreeSet<(u32, u32)> = before.gpus.iter().chain(&new.gpus).map(|gpu| (gpu.node, gpu.index)).collect();
        let places = |step: &Step, stops: bool| -> Vec<Place> {
            let mut places = Vec::new();
            for gpu in &step.gpus {
                for operation in &gpu.operations {
                    let instance = match (operation, stops) {
                        (Operation::Stop { instance, .. } | Operation::StopShared { instance, .. }, true) => instance,
                        (Operation::Start { instance, .. } | Operation::StartShared { instance, .. }, false) => {
                            instance
                        }
                        _ => continue,
                    };
                    places.push((gpu.node, gpu.index, instance.clone()));
                }
            }
            places
        };
        let steps = transition.steps.iter().map(|timed| (places(&timed.step, true), places(&timed.step, false)));
        self.current = Arc::new(new.clone());
        let passage = Arc::new(Passage { before, after: self.current.clone(), steps: steps.collect() });
        let mut at_s = time_s;
        for (step, timed) in transition.steps.iter().enumerate() {
            self.begin(at_s, held.len(), Serving::Partway { passage: passage.clone(), step });
            at_s += timed.duration_s;
        }
        self.begin(at_s, new.gpu_count, Serving::Plan(self.current.clone()));
        at_s
    }

    /// A new span from `start_s` (the last one ends there); nothing past
    /// the day's end.
    fn begin(&mut self, start_s: f64, gpus: usize, serving: Serving) {
        if start_s >= self.end_s {
            return;
        }
        if let Some(last) = self.spans.last_mut() {
            last.end_s = start_s;
        }
        self.spans.retain(|span| span.end_s > span.start_s);
        self.spans.push(Span { start_s, end_s: self.end_s, gpus, serving });
    }

    /// The segments serving in each span, in order, as plans' GPUs (no
    /// service reports): a transition's spans are built step after step
    /// from the plan before it.
    pub fn serving_plans(&self) -> impl Iterator<Item = Arc<Plan>> + '_ {
        let mut partway: Option<Partway> = None;
        self.spans.iter().map(move |span| match &span.serving {
            Serving::Plan(plan) => {
                partway = None;
                plan.clone()
            }
            Serving::Partway { passage, step } => {
                let going_on = partway.take().filter(|at| Arc::ptr_eq(&at.passage, passage) && at.step <= *step);
                let mut at = going_on.unwrap_or_else(|| Partway::new(passage.clone()));
                at.advance_to(*step);
                let plan = serving_plan(&passage.before, &at.running);
                partway = Some(at);
                plan
            }
        })
    }
}

/// Where a transition is: the segments serving while one of its steps
/// runs.
struct Partway {
    passage: Arc<Passage>,
    step: usize,
    running: Placed,
    incoming: Placed,
}

impl Partway {
    /// The first step of `passage` running: what it stops has stopped.
    fn new(passage: Arc<Passage>) -> Partway {
        let running = placed(&passage.before).collect();
        let incoming = placed(&passage.after).collect();
        let mut at = Partway { passage, step: 0, running, incoming };
        at.stop(0);
        at
    }

    /// On to step `to` (no earlier than this one): each step ends, its
    /// segments start, then the next stops what it stops.
    fn advance_to(&mut self, to: usize) {
        while self.step < to {
            for place in &self.passage.steps[self.step].1 {
                if let Some(segment) = self.incoming.get(place) {
                    self.running.insert(place.clone(), segment.clone());
                }
            }
            self.step += 1;
            self.stop(self.step);
        }
    }

    fn stop(&mut self, step: usize) {
        for place in &self.passage.steps[step].0 {
            self.running.remove(place);
        }
    }
}

/// Every segment and shared executor of `plan` by its place, with its GPU
/// (without its instances).
fn placed(plan: &Plan) -> impl Iterator<Item = (Place, (GpuAssignment, Resident))> + '_ {
    plan.gpus.iter().flat_map(|gpu| {
        let bare = GpuAssignment { instances: Vec::new(), shared: Vec::new(), ..*gpu };
        let bare_shared = bare.clone();
        let place = |profile: &str, start: u8| (gpu.node, gpu.index, format!("{profile}@{start}"));
        let segments = gpu
            .instances
            .iter()
            .map(move |i| (place(&i.profile, i.start), (bare.clone(), Resident::Segment(i.clone()))));
        let executors = (gpu.shared.iter())
            .map(move |s| (place(&s.profile, s.start), (bare_shared.clone(), Resident::Executor(s.clone()))));
        segments.chain(executors)
    })
}

/// The segments and executors of `running` as a plan numbered like `like`.
fn serving_plan(like: &Plan, running: &Placed) -> Arc<Plan> {
    let mut gpus: BTreeMap<(u32, u32), GpuAssignment> = BTreeMap::new();
    for ((node, index, _), (gpu, resident)) in running {
        let serving = gpus.entry((*node, *index)).or_insert_with(|| gpu.clone());
        match resident {
            Resident::Segment(instance) => serving.instances.push(instance.clone()),
            Resident::Executor(shared) => serving.shared.push(shared.clone()),
        }
    }
    Arc::new(Plan::from_gpus(
        gpus.into_values().collect(),
        like.strategy.clone(),
        like.latency_rule.clone(),
        like.gpus_per_node,
    ))
}

#[cfg(test)]
mod tests {
    use tessera_core::GpuModel;
    use tessera_plan::{align_to, reseat, PlanInputs};

    use super::*;
    use crate::planner::{PlanSettings, Planner};
    use crate::transition::ReconfigurationTimes;

    /// Every GPU's instances and executors, by place.
    fn residents(plan: &Plan) -> Vec<Place> {
        placed(plan).map(|(place, _)| place).collect()
    }

    #[test]
    fn a_transition_serves_step_by_step_from_the_plan_before_to_the_plan_after() {
        let inputs = PlanInputs::demo(&[GpuModel::A100_80GB]).unwrap();
        let planner = Planner::new(inputs.clone(), PlanSettings::default());
        let rates_rps: Vec<f64> = inputs.services().iter().map(|slo| slo.rate_rps).collect();
        let old = planner.fresh(&rates_rps).unwrap();
        let doubled: Vec<f64> = rates_rps.iter().map(|rate| rate * 2.0).collect();
        let new = reseat(&old, align_to(&old, planner.fresh(&doubled).unwrap(), &[]));
        let transition = Transition::between(&old, &new, &ReconfigurationTimes::default());
        assert!(transition.steps.len() >= 2, "{} steps", transition.steps.len());

        let mut timeline = Timeline::new(&old, 3600.0);
        let ends_s = timeline.reconfigure(600.0, &new, &transition);
        let plans: Vec<Arc<Plan>> = timeline.serving_plans().collect();
        assert_eq!(plans.len(), timeline.spans.len());
        assert_eq!(timeline.spans.len(), transition.steps.len() + 2);
        assert_eq!((timeline.spans[1].start_s, timeline.spans.last().unwrap().start_s), (600.0, ends_s));
        assert_eq!(residents(&plans[0]), residents(&old));
        assert_eq!(residents(plans.last().unwrap()), residents(&new));

        // Partway, step after step: what the step and those before it
        // stopped is gone, what those before it started serves.
        let stops = |step: &Step| -> Vec<Place> {
            let mut places = Vec::new();
            for gpu in &step.gpus {
                for operation in &gpu.operations {
                    if let Operation::Stop { instance, .. } | Operation::StopShared { instance, .. } = operation {
                        places.push((gpu.node, gpu.index, instance.clone()));
                    }
                }
            }
            places
        };
        let (old_places, new_places) = (residents(&old), residents(&new));
        for (step, plan) in plans[1..plans.len() - 1].iter().enumerate() {
            let serving = residents(plan);
            assert!(stops(&transition.steps[step].step).iter().all(|place| !serving.contains(place)), "step {step}");
            assert!(serving.iter().all(|place| old_places.contains(place) || new_places.contains(place)));
            assert_eq!(
                timeline.spans[step + 1].serving.between().map(|(before, _)| before.gpu_count),
                Some(old.gpu_count)
            );
        }
        assert!(plans.windows(2).any(|pair| residents(&pair[0]) != residents(&pair[1])));
    }
}
