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
//! new plan would have cost anyway.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use tessera_core::{GpuAssignment, InstanceAssignment, Operation, Plan, SharedInstance};

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
    /// The segments serving, as a plan's GPUs (no service reports).
    pub serving: Arc<Plan>,
    /// During a transition: the segments that served before it and those
    /// that serve after it.
    pub between: Option<(Arc<Plan>, Arc<Plan>)>,
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

impl Timeline {
    /// A day of `end_s` seconds that starts with `plan` running.
    pub fn new(plan: &Plan, end_s: f64) -> Timeline {
        let first = Span { start_s: 0.0, end_s, gpus: plan.gpu_count, serving: Arc::new(plan.clone()), between: None };
        Timeline { spans: vec![first], reconfigurations: Vec::new(), end_s }
    }

    /// `transition` from `old` to `new` starts at `time_s`; returns when it
    /// ends.
    pub fn reconfigure(&mut self, time_s: f64, old: &Plan, new: &Plan, transition: &Transition) -> f64 {
        self.reconfigurations.push(Reconfigured {
            time_s,
            gpus: transition.totals.gpus_reconfigured(),
            processes: transition.totals.processes_restarted,
        });
        let held: BTreeSet<(u32, u32)> = old.gpus.iter().chain(&new.gpus).map(|gpu| (gpu.node, gpu.index)).collect();
        let mut running: BTreeMap<Place, (GpuAssignment, Resident)> = placed(old).collect();
        let incoming: BTreeMap<Place, (GpuAssignment, Resident)> = placed(new).collect();
        let between = (Arc::new(old.clone()), Arc::new(new.clone()));
        let mut at_s = time_s;
        for timed in &transition.steps {
            for gpu in &timed.step.gpus {
                for operation in &gpu.operations {
                    if let Operation::Stop { instance, .. } | Operation::StopShared { instance, .. } = operation {
                        running.remove(&(gpu.node, gpu.index, instance.clone()));
                    }
                }
            }
            self.begin(at_s, held.len(), serving_plan(old, &running), Some(between.clone()));
            at_s += timed.duration_s;
            for gpu in &timed.step.gpus {
                for operation in &gpu.operations {
                    if let Operation::Start { instance, .. } | Operation::StartShared { instance, .. } = operation {
                        let place = (gpu.node, gpu.index, instance.clone());
                        if let Some(segment) = incoming.get(&place) {
                            running.insert(place, segment.clone());
                        }
                    }
                }
            }
        }
        self.begin(at_s, new.gpu_count, between.1, None);
        at_s
    }

    /// A new span from `start_s` (the last one ends there); nothing past
    /// the day's end.
    fn begin(&mut self, start_s: f64, gpus: usize, serving: Arc<Plan>, between: Option<(Arc<Plan>, Arc<Plan>)>) {
        if start_s >= self.end_s {
            return;
        }
        if let Some(last) = self.spans.last_mut() {
            last.end_s = start_s;
        }
        self.spans.retain(|span| span.end_s > span.start_s);
        self.spans.push(Span { start_s, end_s: self.end_s, gpus, serving, between });
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
fn serving_plan(like: &Plan, running: &BTreeMap<Place, (GpuAssignment, Resident)>) -> Arc<Plan> {
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
