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
//! * A GPU only in the old plan is **removed**, only in the new **added**;
//!   where the GPU model at a node and index changes, they are two GPUs:
//!   the old one removed, the new one added.
//! * **Instances created / destroyed** count MIG instances only in the new /
//!   old plan (a reassigned instance is neither).
//! * **Processes restarted** counts the MPS processes the transition starts:
//!   every process of a segment of the new plan that is not kept.
//! * A **service changes** when one of its segments is added or removed
//!   (its other segments keep running).
//!
//! A shared instance runs one executor process for all its members; each
//! member counts as a segment of its service (service, model, batch). The
//! instance is kept when its members are; a service moving in or out of it
//! restarts its executor only (one process), and the members that stay are
//! kept segments.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use serde::Serialize;

use crate::gpu::GpuModel;
use crate::plan::{GpuAssignment, InstanceAssignment, Plan};
use crate::shared::SharedInstance;

/// How one GPU changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuChange {
    /// Same layout, same segments.
    Unchanged,
    /// Same MIG layout, other segments in some of its instances.
    ServicesChanged,
    /// Another MIG layout.
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
pub(crate) type InstanceKey<'a> = (&'a str, u8);

/// What runs in an instance: service, model, batch, processes.
pub(crate) type SegmentKey<'a> = (&'a str, &'a str, u32, u32);

/// What runs in an instance.
pub(crate) fn segment_of(instance: &InstanceAssignment) -> SegmentKey<'_> {
    (&instance.service, &instance.model, instance.batch, instance.procs)
}

/// Every instance of a GPU, dedicated and shared, `profile@start`.
pub(crate) fn layout_of(gpu: &GpuAssignment) -> Vec<String> {
    gpu.layout().map(|(profile, _, start)| format!("{profile}@{start}")).collect()
}

/// What runs in one MIG instance: one service's segment (its MPS
/// processes), or a shared instance's one executor serving its members.
/// The diff counts it; a transition stops and starts it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Resident<'a> {
    /// A dedicated instance's segment.
    Segment(&'a InstanceAssignment),
    /// A shared instance's executor.
    Executor(&'a SharedInstance),
}

impl<'a> Resident<'a> {
    /// Everything that runs on `gpu` (none when there is no GPU).
    pub(crate) fn all_on(gpu: Option<&'a GpuAssignment>) -> Vec<Resident<'a>> {
        let Some(gpu) = gpu else { return Vec::new() };
        let segments = gpu.instances.iter().map(Resident::Segment);
        segments.chain(gpu.shared.iter().map(Resident::Executor)).collect()
    }

    /// Its instance's profile and start.
    pub(crate) fn place(&self) -> InstanceKey<'a> {
        match self {
            Resident::Segment(i) => (&i.profile, i.start),
            Resident::Executor(s) => (&s.profile, s.start),
        }
    }

    /// `profile@start`.
    pub(crate) fn name(&self) -> String {
        let (profile, start) = self.place();
        format!("{profile}@{start}")
    }

    /// `true` when `other` runs the same work: the same segment, or an
    /// executor of the same discipline serving the same members.
    pub(crate) fn same_work(&self, other: &Resident<'_>) -> bool {
        match (self, other) {
            (Resident::Segment(a), Resident::Segment(b)) => segment_of(a) == segment_of(b),
            (Resident::Executor(a), Resident::Executor(b)) => a.same_executor(b),
            _ => false,
        }
    }

    /// The processes starting it starts.
    fn processes(&self) -> u64 {
        match self {
            Resident::Segment(i) => u64::from(i.procs),
            Resident::Executor(_) => 1,
        }
    }

    /// Each service's part in it: the segment, or each member (as a
    /// segment of its service, model and batch in the executor's process).
    fn parts(&self) -> Vec<SegmentKey<'a>> {
        match self {
            Resident::Segment(i) => vec![segment_of(i)],
            Resident::Executor(s) => {
                s.members.iter().map(|m| (m.service.as_str(), m.model.as_str(), m.batch, 0)).collect()
            }
        }
    }
}

/// Every instance of `gpu` with what runs in it.
fn residents(gpu: Option<&GpuAssignment>) -> HashMap<InstanceKey<'_>, Resident<'_>> {
    Resident::all_on(gpu).into_iter().map(|resident| (resident.place(), resident)).collect()
}

/// One GPU's changes: how it changes, instances created and destroyed,
/// processes started, and each service's parts kept, added and removed.
struct GpuChanges<'a> {
    change: GpuChange,
    created: usize,
    destroyed: usize,
    processes: u64,
    parts: Vec<(&'a str, usize, usize, usize)>,
}

/// Compares one GPU of both plans: either may be missing, and where both
/// are there they are one GPU model ([`diff_plans`] splits a GPU whose
/// model changes into a removal and an addition).
fn compare_gpu<'a>(old: Option<&'a GpuAssignment>, new: Option<&'a GpuAssignment>) -> GpuChanges<'a> {
    let (before, after) = (residents(old), residents(new));
    let created = after.keys().filter(|key| !before.contains_key(*key)).count();
    let destroyed = before.keys().filter(|key| !after.contains_key(*key)).count();
    let kept = |key: &InstanceKey<'_>, resident: &Resident<'_>| before.get(key).is_some_and(|b| b.same_work(resident));
    let processes = after.iter().filter(|(key, resident)| !kept(key, resident)).map(|(_, r)| r.processes()).sum();
    let all_kept = after.iter().all(|(key, resident)| kept(key, resident)) && before.len() == after.len();
    let change = match (old, new) {
        (None, _) => GpuChange::Added,
        (_, None) => GpuChange::Removed,
        _ if created + destroyed > 0 => GpuChange::LayoutChanged,
        _ if all_kept => GpuChange::Unchanged,
        _ => GpuChange::ServicesChanged,
    };
    let parts_of = |residents: &HashMap<InstanceKey<'a>, Resident<'a>>| -> HashSet<(InstanceKey<'a>, SegmentKey<'a>)> {
        residents
            .iter()
            .flat_map(|(key, resident)| resident.parts().into_iter().map(move |part| (*key, part)))
            .collect()
    };
    let (old_parts, new_parts) = (parts_of(&before), parts_of(&after));
    let mut parts = Vec::new();
    for entry in &new_parts {
        let kept = old_parts.contains(entry);
        parts.push((entry.1 .0, usize::from(kept), usize::from(!kept), 0));
    }
    for entry in old_parts.difference(&new_parts) {
        parts.push((entry.1 .0, 0, 0, 1));
    }
    GpuChanges { change, created, destroyed, processes, parts }
}

/// The changes from `old` to `new` (see the module documentation).
pub fn diff_plans(old: &Plan, new: &Plan) -> PlanDiff {
    let key = |gpu: &GpuAssignment| (gpu.node, gpu.index);
    let old_gpus: BTreeMap<(u32, u32), &GpuAssignment> = old.gpus.iter().map(|g| (key(g), g)).collect();
    let new_gpus: BTreeMap<(u32, u32), &GpuAssignment> = new.gpus.iter().map(|g| (key(g), g)).collect();
    let positions: BTreeSet<(u32, u32)> = old_gpus.keys().chain(new_gpus.keys()).copied().collect();
    let mut per_service: BTreeMap<String, ServiceDiff> = BTreeMap::new();
    let mut gpus = Vec::with_capacity(positions.len());
    let mut totals = DiffTotals::default();
    // A position whose GPU model changes holds two GPUs: the old one
    // removed, the new one added.
    let pairs = positions.into_iter().flat_map(|position| {
        let (before, after) = (old_gpus.get(&position).copied(), new_gpus.get(&position).copied());
        match (before, after) {
            (Some(old_gpu), Some(new_gpu)) if old_gpu.gpu_model != new_gpu.gpu_model => {
                vec![(position, Some(old_gpu), None), (position, None, Some(new_gpu))]
            }
            _ => vec![(position, before, after)],
        }
    });
    for (position, before, after) in pairs {
        let (node, index) = position;
        let Some(gpu_model) = after.or(before).map(|gpu| gpu.gpu_model) else {
            unreachable!("every position comes from one of the plans")
        };
        let changes = compare_gpu(before, after);
        for (service, kept, added, removed) in changes.parts {
            let diff = per_service.entry(service.to_string()).or_insert_with(|| ServiceDiff {
                service: service.to_string(),
                segments_kept: 0,
                segments_added: 0,
                segments_removed: 0,
            });
            diff.segments_kept += kept;
            diff.segments_added += added;
            diff.segments_removed += removed;
        }
        match changes.change {
            GpuChange::Unchanged => totals.gpus_unchanged += 1,
            GpuChange::ServicesChanged => totals.gpus_services_changed += 1,
            GpuChange::LayoutChanged => totals.gpus_layout_changed += 1,
            GpuChange::Added => totals.gpus_added += 1,
            GpuChange::Removed => totals.gpus_removed += 1,
        }
        totals.instances_created += changes.created;
        totals.instances_destroyed += changes.destroyed;
        totals.processes_restarted += changes.processes;
        gpus.push(GpuDiff {
            node,
            index,
            gpu_model,
            change: changes.change,
            old_layout: before.map(layout_of).unwrap_or_default(),
            new_layout: after.map(layout_of).unwrap_or_default(),
            instances_created: changes.created,
            instances_destroyed: changes.destroyed,
            processes_restarted: changes.processes,
        });
    }
    let services: Vec<ServiceDiff> = per_service.into_values().collect();
    totals.services_changed = services.iter().filter(|s| s.changed()).count();
    PlanDiff { gpus, services, totals }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn instance(profile: &str, start: u8, service: &str, procs: u32) -> InstanceAssignment {
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

    pub(crate) fn gpu(node: u32, index: u32, instances: Vec<InstanceAssignment>) -> GpuAssignment {
        GpuAssignment::dedicated(node, index, GpuModel::A100_80GB, instances)
    }

    pub(crate) fn plan(gpus: Vec<GpuAssignment>) -> Plan {
        Plan::from_gpus(gpus, "optimal", "parva", 8)
    }

    pub(crate) fn old() -> Plan {
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

    pub(crate) fn shared(start: u8, services: &[&str]) -> crate::SharedInstance {
        let member = |service: &str| crate::SharedMember {
            service: service.to_string(),
            model: "m".to_string(),
            batch: 1,
            latency_ms: 5.0,
            throughput_rps: 200.0,
            capacity_rps: 4.0,
            memory_gb: 2.0,
        };
        crate::SharedInstance {
            profile: "1g.10gb".to_string(),
            size: 1,
            start,
            sharing: crate::Sharing::Serialized,
            members: services.iter().map(|s| member(s)).collect(),
        }
    }

    #[test]
    fn a_service_joining_a_shared_instance_restarts_its_executor_only() {
        let mut old = old();
        old.gpus[0].instances.truncate(1);
        old.gpus[0].shared = vec![shared(4, &["x", "y"]), shared(5, &["z", "w"])];
        let mut new = old.clone();
        new.gpus[0].shared[0].members.push(shared(4, &["v"]).members.remove(0));
        let diff = diff_plans(&old, &new);
        assert_eq!(diff.gpus[0].change, GpuChange::ServicesChanged);
        assert_eq!(diff.gpus[0].new_layout, ["4g.40gb@0", "1g.10gb@4", "1g.10gb@5"]);
        let totals = diff.totals;
        assert_eq!((totals.instances_created, totals.instances_destroyed, totals.processes_restarted), (0, 0, 1));
        assert_eq!(totals.services_changed, 1, "{:?}", diff.services);
        let parts = |name: &str| {
            let s = diff.services.iter().find(|s| s.service == name).unwrap();
            (s.segments_kept, s.segments_added, s.segments_removed)
        };
        assert_eq!((parts("v"), parts("x"), parts("z")), ((0, 1, 0), (1, 0, 0), (1, 0, 0)));
        assert!(diff_plans(&new, &new).totals.is_empty());
        // Moving to another instance: both executors restart.
        let mut moved = new.clone();
        let leaving = moved.gpus[0].shared[0].members.remove(0);
        moved.gpus[0].shared[1].members.push(leaving);
        let totals = diff_plans(&new, &moved).totals;
        assert_eq!((totals.processes_restarted, totals.services_changed), (2, 1));
    }

    #[test]
    fn another_gpu_model_at_a_position_is_that_gpu_removed_and_another_added() {
        let mut new = old();
        new.gpus[1].gpu_model = GpuModel::H100_80GB;
        let diff = diff_plans(&old(), &new);
        let rows: Vec<(u32, GpuChange, GpuModel)> =
            diff.gpus.iter().map(|g| (g.index, g.change, g.gpu_model)).collect();
        assert_eq!(
            rows,
            [
                (0, GpuChange::Unchanged, GpuModel::A100_80GB),
                (1, GpuChange::Removed, GpuModel::A100_80GB),
                (1, GpuChange::Added, GpuModel::H100_80GB)
            ]
        );
        assert_eq!((diff.totals.instances_created, diff.totals.instances_destroyed), (1, 1));
        let c = diff.services.iter().find(|s| s.service == "c").unwrap();
        assert_eq!((c.segments_kept, c.segments_added, c.segments_removed), (0, 1, 1));
        assert!(crate::hardware_change(&old(), &new).is_some_and(|why| why.contains("node 0 gpu 1 is an a100-80gb")));
        assert_eq!(crate::hardware_change(&old(), &old()), None);
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
}
