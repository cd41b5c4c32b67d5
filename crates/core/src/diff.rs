//! What changes between two plans of one fleet: per GPU, per service, and
//! in total.
//!
//! A GPU is the same GPU in both plans when it has the same node and index.
//! A MIG instance is the same instance when it is on the same GPU with the
//! same profile and start. A segment is the same segment when it is the same
//! instance running the same service, model, batch and process count.
//!
//! * A GPU present in both plans is **unchanged** when its model, its
//!   instances and their segments are the same; **services changed** when
//!   its MIG layout (model and the set of profile@start) is the same but a
//!   segment differs; **layout changed** otherwise.
//! * A GPU only in the old plan is **removed**, only in the new **added**.
//! * **Instances created / destroyed** count MIG instances only in the new /
//!   old plan (a reassigned instance is neither).
//! * **Processes restarted** counts the MPS processes the transition starts:
//!   every process of a segment of the new plan that is not kept.
//! * A **service changes** when one of its segments is added or removed
//!   (its other segments keep running).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use serde::Serialize;

use crate::gpu::GpuModel;
use crate::plan::{GpuAssignment, InstanceAssignment, Plan};

/// How one GPU changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuChange {
    /// Same layout, same segments.
    Unchanged,
    /// Same MIG layout, other segments in some of its instances.
    ServicesChanged,
    /// Another MIG layout (or another GPU model).
    LayoutChanged,
    /// Only in the new plan.
    Added,
    /// Only in the old plan.
    Removed,
}

impl GpuChange {
    /// The change's name in tables and JSON, e.g. `layout changed`.
    pub fn name(self) -> &'static str {
        match self {
            GpuChange::Unchanged => "unchanged",
            GpuChange::ServicesChanged => "services changed",
            GpuChange::LayoutChanged => "layout changed",
            GpuChange::Added => "added",
            GpuChange::Removed => "removed",
        }
    }
}

/// One GPU of either plan and how it changes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuDiff {
    /// Node number.
    pub node: u32,
    /// GPU index within the node.
    pub index: u32,
    /// The GPU model (the new plan's where the GPU is in both).
    pub gpu_model: GpuModel,
    /// How it changes.
    pub change: GpuChange,
    /// The old MIG layout, `profile@start` largest first (empty if added).
    pub old_layout: Vec<String>,
    /// The new MIG layout (empty if removed).
    pub new_layout: Vec<String>,
    /// MIG instances created on it.
    pub instances_created: usize,
    /// MIG instances destroyed on it.
    pub instances_destroyed: usize,
    /// MPS processes started on it.
    pub processes_restarted: u64,
}

/// One service of either plan and how its segments change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServiceDiff {
    /// Service name.
    pub service: String,
    /// Segments in both plans.
    pub segments_kept: usize,
    /// Segments only in the new plan.
    pub segments_added: usize,
    /// Segments only in the old plan.
    pub segments_removed: usize,
}

impl ServiceDiff {
    /// `true` when a segment of the service is added or removed.
    pub fn changed(&self) -> bool {
        self.segments_added + self.segments_removed > 0
    }
}

/// The totals of a diff.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DiffTotals {
    /// GPUs in both plans, unchanged.
    pub gpus_unchanged: usize,
    /// GPUs in both plans with the same layout and other segments.
    pub gpus_services_changed: usize,
    /// GPUs in both plans with another layout.
    pub gpus_layout_changed: usize,
    /// GPUs only in the new plan.
    pub gpus_added: usize,
    /// GPUs only in the old plan.
    pub gpus_removed: usize,
    /// MIG instances created.
    pub instances_created: usize,
    /// MIG instances destroyed.
    pub instances_destroyed: usize,
    /// MPS processes started (see the module documentation).
    pub processes_restarted: u64,
    /// Services with a segment added or removed.
    pub services_changed: usize,
}

impl DiffTotals {
    /// GPUs of the old plan whose layout is kept (unchanged or services
    /// changed only).
    pub fn layouts_kept(&self) -> usize {
        self.gpus_unchanged + self.gpus_services_changed
    }

    /// GPUs whose MIG layout is created, changed or torn down: layout
    /// changed, added or removed.
    pub fn gpus_reconfigured(&self) -> usize {
        self.gpus_layout_changed + self.gpus_added + self.gpus_removed
    }

    /// `true` when nothing changes.
    pub fn is_empty(&self) -> bool {
        *self == DiffTotals { gpus_unchanged: self.gpus_unchanged, ..DiffTotals::default() }
    }

    /// The replanning objective after the GPU bound, smaller is better: GPUs
    /// reconfigured, then instances created + destroyed, then processes
    /// restarted.
    pub fn churn(&self) -> (usize, usize, u64) {
        (self.gpus_reconfigured(), self.instances_created + self.instances_destroyed, self.processes_restarted)
    }
}

/// Every change from one plan to another.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanDiff {
    /// Every GPU of either plan, by node and index.
    pub gpus: Vec<GpuDiff>,
    /// Every service of either plan, by name.
    pub services: Vec<ServiceDiff>,
    /// The totals.
    pub totals: DiffTotals,
}

/// A MIG instance's identity on its GPU.
type InstanceKey<'a> = (&'a str, u8);

/// What runs in an instance: service, model, batch, processes.
type SegmentKey<'a> = (&'a str, &'a str, u32, u32);

/// What runs in an instance.
fn segment_of(instance: &InstanceAssignment) -> SegmentKey<'_> {
    (&instance.service, &instance.model, instance.batch, instance.procs)
}

fn layout_of(gpu: &GpuAssignment) -> Vec<String> {
    gpu.instances.iter().map(|i| format!("{}@{}", i.profile, i.start)).collect()
}

fn instances_by_key(gpu: &GpuAssignment) -> HashMap<InstanceKey<'_>, &InstanceAssignment> {
    gpu.instances.iter().map(|i| ((i.profile.as_str(), i.start), i)).collect()
}

/// Compares one GPU of both plans: its change, instances created and
/// destroyed, and the segments of the new one that are kept.
fn compare_gpu(old: &GpuAssignment, new: &GpuAssignment) -> (GpuChange, usize, usize, Vec<bool>) {
    if old.gpu_model != new.gpu_model {
        return (GpuChange::LayoutChanged, new.instances.len(), old.instances.len(), vec![false; new.instances.len()]);
    }
    let before = instances_by_key(old);
    let after = instances_by_key(new);
    let created = after.keys().filter(|key| !before.contains_key(*key)).count();
    let destroyed = before.keys().filter(|key| !after.contains_key(*key)).count();
    let kept: Vec<bool> = new
        .instances
        .iter()
        .map(|i| before.get(&(i.profile.as_str(), i.start)).is_some_and(|o| segment_of(o) == segment_of(i)))
        .collect();
    let change = if created + destroyed > 0 {
        GpuChange::LayoutChanged
    } else if kept.iter().all(|&k| k) && old.instances.len() == new.instances.len() {
        GpuChange::Unchanged
    } else {
        GpuChange::ServicesChanged
    };
    (change, created, destroyed, kept)
}

/// The changes from `old` to `new` (see the module documentation).
pub fn diff_plans(old: &Plan, new: &Plan) -> PlanDiff {
    let key = |gpu: &GpuAssignment| (gpu.node, gpu.index);
    let old_gpus: BTreeMap<(u32, u32), &GpuAssignment> = old.gpus.iter().map(|g| (key(g), g)).collect();
    let new_gpus: BTreeMap<(u32, u32), &GpuAssignment> = new.gpus.iter().map(|g| (key(g), g)).collect();
    let positions: BTreeSet<(u32, u32)> = old_gpus.keys().chain(new_gpus.keys()).copied().collect();
    let mut per_service: BTreeMap<String, ServiceDiff> = BTreeMap::new();
    let mut tally = |name: &str, kept: usize, added: usize, removed: usize| {
        let diff = per_service.entry(name.to_string()).or_insert_with(|| ServiceDiff {
            service: name.to_string(),
            segments_kept: 0,
            segments_added: 0,
            segments_removed: 0,
        });
        diff.segments_kept += kept;
        diff.segments_added += added;
        diff.segments_removed += removed;
    };
    let mut gpus = Vec::with_capacity(positions.len());
    let mut totals = DiffTotals::default();
    for position in positions {
        let (node, index) = position;
        let (before, after) = (old_gpus.get(&position).copied(), new_gpus.get(&position).copied());
        let (change, created, destroyed, processes, gpu_model) = match (before, after) {
            (Some(old_gpu), Some(new_gpu)) => {
                let (change, created, destroyed, kept) = compare_gpu(old_gpu, new_gpu);
                let mut processes = 0;
                let kept_segments: HashSet<(InstanceKey<'_>, SegmentKey<'_>)> = new_gpu
                    .instances
                    .iter()
                    .zip(&kept)
                    .filter(|(_, &k)| k)
                    .map(|(i, _)| ((i.profile.as_str(), i.start), segment_of(i)))
                    .collect();
                for (instance, &k) in new_gpu.instances.iter().zip(&kept) {
                    if k {
                        tally(&instance.service, 1, 0, 0);
                    } else {
                        tally(&instance.service, 0, 1, 0);
                        processes += u64::from(instance.procs);
                    }
                }
                for instance in &old_gpu.instances {
                    let kept = old_gpu.gpu_model == new_gpu.gpu_model
                        && kept_segments.contains(&((instance.profile.as_str(), instance.start), segment_of(instance)));
                    if !kept {
                        tally(&instance.service, 0, 0, 1);
                    }
                }
                (change, created, destroyed, processes, new_gpu.gpu_model)
            }
            (None, Some(new_gpu)) => {
                new_gpu.instances.iter().for_each(|i| tally(&i.service, 0, 1, 0));
                let processes = new_gpu.instances.iter().map(|i| u64::from(i.procs)).sum();
                (GpuChange::Added, new_gpu.instances.len(), 0, processes, new_gpu.gpu_model)
            }
            (Some(old_gpu), None) => {
                old_gpu.instances.iter().for_each(|i| tally(&i.service, 0, 0, 1));
                (GpuChange::Removed, 0, old_gpu.instances.len(), 0, old_gpu.gpu_model)
            }
            (None, None) => unreachable!("every position comes from one of the plans"),
        };
        match change {
            GpuChange::Unchanged => totals.gpus_unchanged += 1,
            GpuChange::ServicesChanged => totals.gpus_services_changed += 1,
            GpuChange::LayoutChanged => totals.gpus_layout_changed += 1,
            GpuChange::Added => totals.gpus_added += 1,
            GpuChange::Removed => totals.gpus_removed += 1,
        }
        totals.instances_created += created;
        totals.instances_destroyed += destroyed;
        totals.processes_restarted += processes;
        gpus.push(GpuDiff {
            node,
            index,
            gpu_model,
            change,
            old_layout: before.map(layout_of).unwrap_or_default(),
            new_layout: after.map(layout_of).unwrap_or_default(),
            instances_created: created,
            instances_destroyed: destroyed,
            processes_restarted: processes,
        });
    }
    let services: Vec<ServiceDiff> = per_service.into_values().collect();
    totals.services_changed = services.iter().filter(|s| s.changed()).count();
    PlanDiff { gpus, services, totals }
}

/// One operation on one GPU during a transition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Operation {
    /// Stop a segment's MPS processes.
    Stop {
        /// The instance, `profile@start`.
        instance: String,
        /// Its service.
        service: String,
    },
    /// Destroy a MIG instance.
    Destroy {
        /// The instance, `profile@start`.
        instance: String,
    },
    /// Create a MIG instance.
    Create {
        /// The instance, `profile@start`.
        instance: String,
    },
    /// Start a segment's MPS processes.
    Start {
        /// The instance, `profile@start`.
        instance: String,
        /// Its service.
        service: String,
        /// Requests per batch.
        batch: u32,
        /// MPS processes.
        procs: u32,
    },
}

impl std::fmt::Display for Operation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Operation::Stop { instance, service } => write!(f, "stop {service} on {instance}"),
            Operation::Destroy { instance } => write!(f, "destroy {instance}"),
            Operation::Create { instance } => write!(f, "create {instance}"),
            Operation::Start { instance, service, batch, procs } => {
                write!(f, "start {service} b{batch}×{procs} on {instance}")
            }
        }
    }
}

/// The operations of one GPU in one step, in order: stops, destroys,
/// creates, starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GpuOperations {
    /// Node number.
    pub node: u32,
    /// GPU index within the node.
    pub index: u32,
    /// What to do, in order.
    pub operations: Vec<Operation>,
}

/// A service below its rate while a step runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Dip {
    /// The service.
    pub service: String,
    /// Its rate in the new plan, req/s.
    pub rate_rps: f64,
    /// What its running segments provide while the step runs, req/s.
    pub provisioned_rps: f64,
}

/// One step of a transition: GPUs changed together.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    /// Each GPU's operations.
    pub gpus: Vec<GpuOperations>,
    /// Services below their rate while the step runs.
    pub dips: Vec<Dip>,
}

/// A segment in a transition's bookkeeping: service and throughput.
type Running = (String, f64);

/// One GPU's operations with the segments they stop and start.
type GpuChangeSet = (GpuOperations, Vec<Running>, Vec<Running>);

/// Adds `sign` × each segment's throughput to its service's total.
fn add_all(totals: &mut HashMap<String, f64>, segments: &[Running], sign: f64) {
    for (service, rps) in segments {
        *totals.entry(service.clone()).or_default() += sign * rps;
    }
}

/// The services below their rate while `stopping` is stopped.
fn dips_of(
    rates: &HashMap<&str, f64>,
    provisioned: &HashMap<String, f64>,
    stopping: &HashMap<String, f64>,
) -> Vec<Dip> {
    let mut dips: Vec<Dip> = stopping
        .iter()
        .filter_map(|(service, stopped_rps)| {
            let rate_rps = *rates.get(service.as_str())?;
            let provisioned_rps = provisioned.get(service).copied().unwrap_or(0.0) - stopped_rps;
            (provisioned_rps < rate_rps * (1.0 - 1e-9)).then(|| Dip {
                service: service.clone(),
                rate_rps,
                provisioned_rps,
            })
        })
        .collect();
    dips.sort_by(|a, b| a.service.cmp(&b.service));
    dips
}

/// Ends the step of the GPUs in `current` (if any): its dips, then what it
/// stops and starts counted as done.
fn close_step(
    current: &mut Vec<GpuChangeSet>,
    rates: &HashMap<&str, f64>,
    provisioned: &mut HashMap<String, f64>,
    steps: &mut Vec<Step>,
) {
    if current.is_empty() {
        return;
    }
    let mut stopping = HashMap::new();
    for (_, stopped, _) in current.iter() {
        add_all(&mut stopping, stopped, 1.0);
    }
    let dips = dips_of(rates, provisioned, &stopping);
    for (_, stopped, started) in current.iter() {
        add_all(provisioned, stopped, -1.0);
        add_all(provisioned, started, 1.0);
    }
    steps.push(Step { gpus: current.drain(..).map(|(gpu, ..)| gpu).collect(), dips });
}

/// The steps from `old` to `new`, make before break: first every GPU whose
/// change stops nothing (new GPUs, instances created in free slices), then
/// the GPUs that stop segments, grouped while no service falls below its
/// rate in `new` — in the order of their positions, except that a GPU
/// whose stops would make a service dip waits for the steps whose starts
/// cover them (a GPU that makes a service dip on its own, whatever runs
/// before it, runs alone, and the dip is reported) — GPUs that only tear
/// down last. Within a GPU,
/// segments stop and instances are destroyed before new ones are created
/// and started, so every GPU's layout is valid after each operation.
pub fn transition_steps(old: &Plan, new: &Plan) -> Vec<Step> {
    let rates: HashMap<&str, f64> = new.services.iter().map(|s| (s.service.as_str(), s.rate_rps)).collect();
    let mut provisioned: HashMap<String, f64> = HashMap::new();
    for instance in old.gpus.iter().flat_map(|g| &g.instances) {
        *provisioned.entry(instance.service.clone()).or_default() += instance.capacity();
    }
    let old_gpus: BTreeMap<(u32, u32), &GpuAssignment> = old.gpus.iter().map(|g| ((g.node, g.index), g)).collect();
    let new_gpus: BTreeMap<(u32, u32), &GpuAssignment> = new.gpus.iter().map(|g| ((g.node, g.index), g)).collect();
    let positions: BTreeSet<(u32, u32)> = old_gpus.keys().chain(new_gpus.keys()).copied().collect();
    // Per GPU: its operations, what it stops and what it starts.
    let mut makes: Vec<GpuChangeSet> = Vec::new();
    let mut changes: Vec<GpuChangeSet> = Vec::new();
    let mut breaks: Vec<GpuChangeSet> = Vec::new();
    for (node, index) in positions {
        let before = old_gpus.get(&(node, index)).map_or(&[][..], |g| &g.instances[..]);
        let after = new_gpus.get(&(node, index)).map_or(&[][..], |g| &g.instances[..]);
        let same_model = match (old_gpus.get(&(node, index)), new_gpus.get(&(node, index))) {
            (Some(a), Some(b)) => a.gpu_model == b.gpu_model,
            _ => true,
        };
        let name = |i: &InstanceAssignment| format!("{}@{}", i.profile, i.start);
        let find = |list: &[InstanceAssignment], i: &InstanceAssignment| {
            list.iter().find(|o| same_model && o.profile == i.profile && o.start == i.start).cloned()
        };
        let mut operations = Vec::new();
        let mut stopped: Vec<Running> = Vec::new();
        let mut started: Vec<Running> = Vec::new();
        for instance in before {
            if find(after, instance).is_none_or(|n| segment_of(&n) != segment_of(instance)) {
                operations.push(Operation::Stop { instance: name(instance), service: instance.service.clone() });
                stopped.push((instance.service.clone(), instance.capacity()));
            }
        }
        for instance in before.iter().filter(|i| find(after, i).is_none()) {
            operations.push(Operation::Destroy { instance: name(instance) });
        }
        for instance in after.iter().filter(|i| find(before, i).is_none()) {
            operations.push(Operation::Create { instance: name(instance) });
        }
        for instance in after {
            if find(before, instance).is_none_or(|o| segment_of(&o) != segment_of(instance)) {
                operations.push(Operation::Start {
                    instance: name(instance),
                    service: instance.service.clone(),
                    batch: instance.batch,
                    procs: instance.procs,
                });
                started.push((instance.service.clone(), instance.capacity()));
            }
        }
        if operations.is_empty() {
            continue;
        }
        let entry = (GpuOperations { node, index, operations }, stopped, started);
        if entry.1.is_empty() {
            makes.push(entry);
        } else if entry.2.is_empty() {
            breaks.push(entry);
        } else {
            changes.push(entry);
        }
    }
    let mut steps = Vec::new();
    if !makes.is_empty() {
        for (_, _, started) in &makes {
            add_all(&mut provisioned, started, 1.0);
        }
        steps.push(Step { gpus: makes.into_iter().map(|(gpu, ..)| gpu).collect(), dips: Vec::new() });
    }
    for mut remaining in [changes, breaks] {
        let mut current: Vec<GpuChangeSet> = Vec::new();
        let mut stopping: HashMap<String, f64> = HashMap::new();
        while !remaining.is_empty() {
            // The first GPU (by position) that joins the step without a dip:
            // a GPU whose stops the starts of earlier steps cover may go
            // before one whose stops they do not yet.
            let fits = remaining.iter().position(|entry| joins_without_dip(&rates, &provisioned, &stopping, &entry.1));
            match fits {
                Some(index) => {
                    let entry = remaining.remove(index);
                    add_all(&mut stopping, &entry.1, 1.0);
                    current.push(entry);
                }
                None if !current.is_empty() => {
                    close_step(&mut current, &rates, &mut provisioned, &mut steps);
                    stopping.clear();
                }
                None => {
                    // Every GPU left dips on its own: the first runs alone.
                    current.push(remaining.remove(0));
                    close_step(&mut current, &rates, &mut provisioned, &mut steps);
                }
            }
        }
        close_step(&mut current, &rates, &mut provisioned, &mut steps);
    }
    steps
}

/// Whether the GPU stopping `stopped` can join a step already stopping
/// `stopping` with no service falling below its rate.
fn joins_without_dip(
    rates: &HashMap<&str, f64>,
    provisioned: &HashMap<String, f64>,
    stopping: &HashMap<String, f64>,
    stopped: &[Running],
) -> bool {
    let mut own: HashMap<&str, f64> = HashMap::new();
    for (service, rps) in stopped {
        *own.entry(service.as_str()).or_default() += rps;
    }
    own.iter().all(|(service, rps)| {
        let Some(&rate_rps) = rates.get(service) else { return true };
        let left_rps =
            provisioned.get(*service).copied().unwrap_or(0.0) - stopping.get(*service).copied().unwrap_or(0.0) - rps;
        left_rps >= rate_rps * (1.0 - 1e-9)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instance(profile: &str, start: u8, service: &str, procs: u32) -> InstanceAssignment {
        let size = profile.as_bytes()[0] - b'0';
        InstanceAssignment {
            profile: profile.to_string(),
            size,
            start,
            service: service.to_string(),
            model: "m".to_string(),
            batch: 4,
            procs,
            throughput_rps: 100.0,
            latency_ms: 10.0,
            capacity_rps: None,
        }
    }

    fn gpu(node: u32, index: u32, instances: Vec<InstanceAssignment>) -> GpuAssignment {
        GpuAssignment { node, index, gpu_model: GpuModel::A100_80GB, instances }
    }

    fn plan(gpus: Vec<GpuAssignment>) -> Plan {
        Plan::from_gpus(gpus, "optimal", "parva", 8)
    }

    fn old() -> Plan {
        plan(vec![
            gpu(0, 0, vec![instance("4g.40gb", 0, "a", 2), instance("3g.40gb", 4, "b", 1)]),
            gpu(0, 1, vec![instance("7g.80gb", 0, "c", 3)]),
        ])
    }

    #[test]
    fn a_plan_against_itself_changes_nothing() {
        let diff = diff_plans(&old(), &old());
        assert!(diff.totals.is_empty(), "{:?}", diff.totals);
        assert_eq!(diff.totals.gpus_unchanged, 2);
        assert_eq!(diff.totals.layouts_kept(), 2);
        assert!(diff.services.iter().all(|s| s.segments_kept == 1 && !s.changed()));
    }

    #[test]
    fn a_reassigned_instance_changes_services_only_and_starts_its_processes() {
        let mut new = old();
        new.gpus[0].instances[1] = instance("3g.40gb", 4, "c", 2);
        let diff = diff_plans(&old(), &new);
        assert_eq!(diff.gpus[0].change, GpuChange::ServicesChanged);
        assert_eq!(diff.gpus[1].change, GpuChange::Unchanged);
        let totals = diff.totals;
        assert_eq!((totals.instances_created, totals.instances_destroyed, totals.processes_restarted), (0, 0, 2));
        assert_eq!(totals.layouts_kept(), 2);
        assert_eq!(totals.services_changed, 2, "b loses a segment, c gains one");
        let c = diff.services.iter().find(|s| s.service == "c").unwrap();
        assert_eq!((c.segments_kept, c.segments_added, c.segments_removed), (1, 1, 0));
    }

    #[test]
    fn another_profile_or_start_changes_the_layout_and_counts_instances() {
        let mut new = old();
        new.gpus[1].instances = vec![instance("4g.40gb", 0, "c", 3), instance("2g.20gb", 4, "d", 1)];
        let diff = diff_plans(&old(), &new);
        assert_eq!(diff.gpus[1].change, GpuChange::LayoutChanged);
        assert_eq!(diff.gpus[1].old_layout, vec!["7g.80gb@0"]);
        let totals = diff.totals;
        assert_eq!((totals.gpus_layout_changed, totals.instances_created, totals.instances_destroyed), (1, 2, 1));
        assert_eq!(totals.processes_restarted, 4);
        assert_eq!(totals.churn(), (1, 3, 4));
    }

    #[test]
    fn gpus_only_in_one_plan_are_added_or_removed() {
        let mut new = old();
        new.gpus.remove(1);
        new.gpus.push(gpu(1, 0, vec![instance("1g.10gb", 0, "c", 1)]));
        let diff = diff_plans(&old(), &new);
        let changes: Vec<GpuChange> = diff.gpus.iter().map(|g| g.change).collect();
        assert_eq!(changes, [GpuChange::Unchanged, GpuChange::Removed, GpuChange::Added]);
        assert_eq!((diff.totals.gpus_added, diff.totals.gpus_removed, diff.totals.gpus_reconfigured()), (1, 1, 2));
        assert_eq!((diff.totals.instances_created, diff.totals.instances_destroyed), (1, 1));
    }

    /// Applies `step` to `plan`'s instances, checking every GPU's layout.
    fn apply(plan: &mut Plan, step: &Step) {
        for gpu_ops in &step.gpus {
            let at = plan.gpus.iter().position(|g| (g.node, g.index) == (gpu_ops.node, gpu_ops.index));
            let at = at.unwrap_or_else(|| {
                plan.gpus.push(gpu(gpu_ops.node, gpu_ops.index, Vec::new()));
                plan.gpus.len() - 1
            });
            let gpu = &mut plan.gpus[at];
            for operation in &gpu_ops.operations {
                let key = |text: &str| {
                    let (profile, start) = text.split_once('@').unwrap();
                    (profile.to_string(), start.parse::<u8>().unwrap())
                };
                match operation {
                    Operation::Stop { instance, service } => {
                        let (profile, start) = key(instance);
                        let found =
                            gpu.instances.iter_mut().find(|i| i.profile == profile && i.start == start).unwrap();
                        assert_eq!(&found.service, service);
                        found.service = String::new();
                    }
                    Operation::Destroy { instance } => {
                        let (profile, start) = key(instance);
                        gpu.instances.retain(|i| !(i.profile == profile && i.start == start));
                    }
                    Operation::Create { instance } => {
                        let (profile, start) = key(instance);
                        gpu.instances.push(crate::diff::tests::instance(&profile, start, "", 1));
                    }
                    Operation::Start { instance, service, procs, .. } => {
                        let (profile, start) = key(instance);
                        let found =
                            gpu.instances.iter_mut().find(|i| i.profile == profile && i.start == start).unwrap();
                        found.service = service.clone();
                        found.procs = *procs;
                    }
                }
                let placements: Vec<crate::layout::Placement> = gpu
                    .instances
                    .iter()
                    .map(|i| crate::layout::Placement {
                        profile: gpu.gpu_model.spec().profile_by_name(&i.profile).unwrap(),
                        start: i.start,
                    })
                    .collect();
                crate::layout::validate_layout(gpu.gpu_model, &placements).unwrap();
            }
        }
        plan.gpus.retain(|g| !g.instances.is_empty());
        plan.gpus.sort_by_key(|g| (g.node, g.index));
    }

    fn with_rates(mut plan: Plan) -> Plan {
        let mut rates: BTreeMap<String, f64> = BTreeMap::new();
        for i in plan.gpus.iter().flat_map(|g| &g.instances) {
            *rates.entry(i.service.clone()).or_default() += i.throughput_rps;
        }
        plan.services = rates
            .into_iter()
            .map(|(service, rate_rps)| crate::plan::ServiceReport {
                service,
                model: "m".to_string(),
                rate_rps,
                latency_slo_ms: 100.0,
                provisioned_rps: rate_rps,
                worst_latency_ms: 10.0,
                segments: 1,
                met: true,
                percentile: None,
                predicted_attainment: None,
                tolerance: None,
                busiest_load: None,
            })
            .collect();
        plan
    }

    #[test]
    fn steps_make_before_break_keep_layouts_valid_and_reach_the_new_plan() {
        let old = with_rates(old());
        let mut new = old.clone();
        // GPU 0:1 is reconfigured (c moves to two 3g), a new GPU 0:2 runs d.
        new.gpus[1].instances = vec![instance("4g.40gb", 0, "c", 3), instance("3g.40gb", 4, "c", 3)];
        new.gpus.push(gpu(0, 2, vec![instance("7g.80gb", 0, "d", 1)]));
        let new = with_rates(new);
        let steps = transition_steps(&old, &new);
        assert_eq!(steps.len(), 2, "{steps:#?}");
        assert_eq!((steps[0].gpus[0].node, steps[0].gpus[0].index), (0, 2), "the new GPU comes first");
        let mut state = old.clone();
        for step in &steps {
            apply(&mut state, step);
        }
        let layout = |p: &Plan| p.gpus.iter().map(|g| (g.node, g.index, layout_of(g))).collect::<Vec<_>>();
        let mut expected = new.clone();
        expected.gpus.iter_mut().for_each(|g| g.instances.sort_by_key(|i| i.start));
        state.gpus.iter_mut().for_each(|g| g.instances.sort_by_key(|i| i.start));
        assert_eq!(layout(&state), layout(&expected));
        // c needs 300 req/s in the new plan and has only its 0:1 segment:
        // it dips to nothing while 0:1 is reconfigured.
        assert_eq!(steps[1].dips.len(), 1, "{:?}", steps[1].dips);
        assert_eq!(steps[1].dips[0].service, "c");
        assert_eq!(steps[1].dips[0].provisioned_rps, 0.0);
    }

    #[test]
    fn a_gpu_waits_for_the_step_that_starts_what_it_stops() {
        // a moves from 0:0 (given to c) to 0:1, where x, which has another
        // segment on 0:2, gives up its 3g: 0:1 first, then 0:0, no dip; in
        // the order of positions a would have none while 0:0 changes.
        let old = with_rates(plan(vec![
            gpu(0, 0, vec![instance("7g.80gb", 0, "a", 1)]),
            gpu(0, 1, vec![instance("4g.40gb", 0, "d", 1), instance("3g.40gb", 4, "x", 1)]),
            gpu(0, 2, vec![instance("7g.80gb", 0, "x", 1)]),
        ]));
        let mut new = plan(vec![
            gpu(0, 0, vec![instance("7g.80gb", 0, "c", 1)]),
            gpu(0, 1, vec![instance("4g.40gb", 0, "d", 1), instance("3g.40gb", 4, "a", 1)]),
            gpu(0, 2, vec![instance("7g.80gb", 0, "x", 1)]),
        ]);
        new = with_rates(new);
        let steps = transition_steps(&old, &new);
        let order: Vec<Vec<(u32, u32)>> =
            steps.iter().map(|step| step.gpus.iter().map(|g| (g.node, g.index)).collect()).collect();
        assert_eq!(order, vec![vec![(0, 1)], vec![(0, 0)]]);
        assert!(steps.iter().all(|step| step.dips.is_empty()), "{steps:#?}");
    }

    #[test]
    fn a_service_with_spare_capacity_elsewhere_does_not_dip() {
        let old = with_rates(plan(vec![
            gpu(0, 0, vec![instance("7g.80gb", 0, "a", 1)]),
            gpu(0, 1, vec![instance("7g.80gb", 0, "a", 1)]),
        ]));
        // a needs only 100 req/s now; 0:1 is given back.
        let mut new = old.clone();
        new.gpus.truncate(1);
        new.services[0].rate_rps = 100.0;
        let steps = transition_steps(&old, &new);
        assert_eq!(steps.len(), 1);
        assert!(steps[0].dips.is_empty());
        assert_eq!(
            steps[0].gpus[0].operations,
            vec![
                Operation::Stop { instance: "7g.80gb@0".to_string(), service: "a".to_string() },
                Operation::Destroy { instance: "7g.80gb@0".to_string() },
            ]
        );
    }
}
