//! The make-before-break ordering of a transition between two plans of
//! one fleet ([`transition_steps`]): which GPUs change in which step, so
//! that every step starts new segments before it stops what they replace
//! and names any service whose capacity dips.
//!
//! A shared instance's executor is one unit: it is kept when its members
//! are, and otherwise stopped and started whole, so every member stops
//! being served there while its GPU's step runs (a member that also has
//! capacity elsewhere keeps it; one that does not is reported as a dip).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;

use crate::diff::Resident;
use crate::gpu::GpuModel;
use crate::plan::{GpuAssignment, Plan};
use crate::shared::{SharedInstance, Sharing};

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
    /// Stop a shared instance's executor: none of its members is served
    /// there until an executor starts again.
    StopShared {
        /// The instance, `profile@start`.
        instance: String,
        /// Its members' services.
        services: Vec<String>,
    },
    /// Start a shared instance's executor serving its members.
    StartShared {
        /// The instance, `profile@start`.
        instance: String,
        /// How the members take turns.
        sharing: Sharing,
        /// Its members' services.
        services: Vec<String>,
    },
}

impl Operation {
    /// `true` for an operation that stops serving (a segment or an
    /// executor).
    pub fn stops_serving(&self) -> bool {
        matches!(self, Operation::Stop { .. } | Operation::StopShared { .. })
    }

    /// `true` for an operation that starts serving (a segment or an
    /// executor).
    pub fn starts_serving(&self) -> bool {
        matches!(self, Operation::Start { .. } | Operation::StartShared { .. })
    }
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
            Operation::StopShared { instance, services } => {
                write!(f, "stop the executor of {} on {instance}", crate::text::few_named(services))
            }
            Operation::StartShared { instance, sharing, services } => {
                write!(f, "start a {sharing} executor of {} on {instance}", crate::text::few_named(services))
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

/// A segment in a transition's bookkeeping: its service (an index into
/// [`Ledger::names`]) and throughput.
type Running = (usize, f64);

/// One GPU's operations with the segments they stop and start, and what
/// its stops take from each service (summed, in the order they stop).
struct GpuChangeSet {
    gpu: GpuOperations,
    stopped: Vec<Running>,
    started: Vec<Running>,
    stopped_by_service: Vec<Running>,
}

/// The services of a transition by index, with each one's rate in the
/// new plan (`None`: not in it) and what runs for it now, req/s.
struct Ledger<'a> {
    names: Vec<&'a str>,
    index: HashMap<&'a str, usize>,
    rate_rps: Vec<Option<f64>>,
    provisioned_rps: Vec<f64>,
}

impl<'a> Ledger<'a> {
    /// The services of `new` at their rates, nothing provisioned yet.
    fn of(new: &'a Plan) -> Ledger<'a> {
        let mut ledger =
            Ledger { names: Vec::new(), index: HashMap::new(), rate_rps: Vec::new(), provisioned_rps: Vec::new() };
        for service in &new.services {
            let at = ledger.service(&service.service);
            ledger.rate_rps[at] = Some(service.rate_rps);
        }
        ledger
    }

    /// The index of `name`, added when new.
    fn service(&mut self, name: &'a str) -> usize {
        if let Some(&at) = self.index.get(name) {
            return at;
        }
        self.names.push(name);
        self.rate_rps.push(None);
        self.provisioned_rps.push(0.0);
        self.index.insert(name, self.names.len() - 1);
        self.names.len() - 1
    }

    /// What each service gets from `resident`.
    fn serves(&mut self, resident: &Resident<'a>) -> Vec<Running> {
        match resident {
            Resident::Segment(i) => vec![(self.service(&i.service), i.capacity())],
            Resident::Executor(s) => s.members.iter().map(|m| (self.service(&m.service), m.capacity_rps)).collect(),
        }
    }

    /// Adds `sign` × each segment's throughput to what its service has.
    fn provision(&mut self, segments: &[Running], sign: f64) {
        for &(service, rps) in segments {
            self.provisioned_rps[service] += sign * rps;
        }
    }

    /// Whether a GPU whose stops take `stopped_by_service` can join a step
    /// already stopping `stopping` with no service falling below its rate.
    fn joins_without_dip(&self, stopping: &Stopping, stopped_by_service: &[Running]) -> bool {
        stopped_by_service.iter().all(|&(service, rps)| {
            let Some(rate_rps) = self.rate_rps[service] else { return true };
            let left_rps = self.provisioned_rps[service] - stopping.rps[service] - rps;
            left_rps >= rate_rps * (1.0 - 1e-9)
        })
    }

    /// The services below their rate while `stopping` is stopped, by name.
    fn dips(&self, stopping: &Stopping) -> Vec<Dip> {
        let mut dips: Vec<Dip> = stopping
            .touched
            .iter()
            .filter_map(|&service| {
                let rate_rps = self.rate_rps[service]?;
                let provisioned_rps = self.provisioned_rps[service] - stopping.rps[service];
                (provisioned_rps < rate_rps * (1.0 - 1e-9)).then(|| Dip {
                    service: self.names[service].to_string(),
                    rate_rps,
                    provisioned_rps,
                })
            })
            .collect();
        dips.sort_by(|a, b| a.service.cmp(&b.service));
        dips
    }
}

/// What a step stops so far, per service, req/s.
struct Stopping {
    rps: Vec<f64>,
    /// The services with something stopped, each once, and their marks.
    touched: Vec<usize>,
    is_touched: Vec<bool>,
}

impl Stopping {
    /// Nothing stopped of `services` services.
    fn new(services: usize) -> Stopping {
        Stopping { rps: vec![0.0; services], touched: Vec::new(), is_touched: vec![false; services] }
    }

    /// Adds each segment's throughput to what its service has stopped.
    fn add(&mut self, segments: &[Running]) {
        for &(service, rps) in segments {
            if !self.is_touched[service] {
                self.is_touched[service] = true;
                self.touched.push(service);
            }
            self.rps[service] += rps;
        }
    }

    /// Nothing stopped again.
    fn clear(&mut self) {
        for &service in &self.touched {
            self.rps[service] = 0.0;
            self.is_touched[service] = false;
        }
        self.touched.clear();
    }
}

/// Ends the step of the GPUs in `current` (if any), which stop `stopping`:
/// its dips, then what it stops and starts counted as done, and nothing
/// stopping again.
fn close_step(
    current: &mut Vec<GpuChangeSet>,
    stopping: &mut Stopping,
    ledger: &mut Ledger<'_>,
    steps: &mut Vec<Step>,
) {
    if current.is_empty() {
        return;
    }
    let dips = ledger.dips(stopping);
    for change in current.iter() {
        ledger.provision(&change.stopped, -1.0);
        ledger.provision(&change.started, 1.0);
    }
    steps.push(Step { gpus: current.drain(..).map(|change| change.gpu).collect(), dips });
    stopping.clear();
}

/// The operation that stops `resident`.
fn stop(resident: &Resident<'_>) -> Operation {
    let instance = resident.name();
    match resident {
        Resident::Segment(i) => Operation::Stop { instance, service: i.service.clone() },
        Resident::Executor(s) => Operation::StopShared { instance, services: member_services(s) },
    }
}

/// The operation that starts `resident`.
fn start(resident: &Resident<'_>) -> Operation {
    let instance = resident.name();
    match resident {
        Resident::Segment(i) => {
            Operation::Start { instance, service: i.service.clone(), batch: i.batch, procs: i.procs }
        }
        Resident::Executor(s) => Operation::StartShared { instance, sharing: s.sharing, services: member_services(s) },
    }
}

/// The services of `shared`'s members, in order.
fn member_services(shared: &SharedInstance) -> Vec<String> {
    shared.members.iter().map(|m| m.service.clone()).collect()
}

/// Why no transition leads from `old` to `new` because of their hardware:
/// a node and index holding one GPU model in `old` and another in `new`
/// (no operation turns one GPU into another), or `None`.
pub fn hardware_change(old: &Plan, new: &Plan) -> Option<String> {
    let old_models: BTreeMap<(u32, u32), GpuModel> =
        old.gpus.iter().map(|g| ((g.node, g.index), g.gpu_model)).collect();
    new.gpus.iter().find_map(|gpu| {
        let before = *old_models.get(&(gpu.node, gpu.index))?;
        (before != gpu.gpu_model).then(|| {
            format!(
                "node {} gpu {} is an {before} in the old plan and an {} in the new one; no transition turns one GPU \
                 into another (plan the new fleet afresh, or place both plans on the same GPUs)",
                gpu.node, gpu.index, gpu.gpu_model
            )
        })
    })
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
pub fn transition_steps<'a>(old: &'a Plan, new: &'a Plan) -> Vec<Step> {
    let mut ledger = Ledger::of(new);
    for gpu in &old.gpus {
        for resident in Resident::all_on(Some(gpu)) {
            let serves = ledger.serves(&resident);
            ledger.provision(&serves, 1.0);
        }
    }
    let old_gpus: BTreeMap<(u32, u32), &GpuAssignment> = old.gpus.iter().map(|g| ((g.node, g.index), g)).collect();
    let new_gpus: BTreeMap<(u32, u32), &GpuAssignment> = new.gpus.iter().map(|g| ((g.node, g.index), g)).collect();
    let positions: BTreeSet<(u32, u32)> = old_gpus.keys().chain(new_gpus.keys()).copied().collect();
    // Per GPU: its operations, what it stops and what it starts.
    let mut makes: Vec<GpuChangeSet> = Vec::new();
    let mut changes: Vec<GpuChangeSet> = Vec::new();
    let mut breaks: Vec<GpuChangeSet> = Vec::new();
    for (node, index) in positions {
        let (old_gpu, new_gpu) = (old_gpus.get(&(node, index)).copied(), new_gpus.get(&(node, index)).copied());
        let same_model = match (old_gpu, new_gpu) {
            (Some(a), Some(b)) => a.gpu_model == b.gpu_model,
            _ => true,
        };
        let (before, after) = (Resident::all_on(old_gpu), Resident::all_on(new_gpu));
        let find = |list: &[Resident<'a>], resident: &Resident<'_>| {
            list.iter().find(|other| same_model && other.place() == resident.place()).copied()
        };
        let mut operations = Vec::new();
        let mut stopped: Vec<Running> = Vec::new();
        let mut started: Vec<Running> = Vec::new();
        for resident in &before {
            if find(&after, resident).is_none_or(|next| !next.same_work(resident)) {
                operations.push(stop(resident));
                stopped.extend(ledger.serves(resident));
            }
        }
        for resident in before.iter().filter(|r| find(&after, r).is_none()) {
            operations.push(Operation::Destroy { instance: resident.name() });
        }
        for resident in after.iter().filter(|r| find(&before, r).is_none()) {
            operations.push(Operation::Create { instance: resident.name() });
        }
        for resident in &after {
            if find(&before, resident).is_none_or(|previous| !previous.same_work(resident)) {
                operations.push(start(resident));
                started.extend(ledger.serves(resident));
            }
        }
        if operations.is_empty() {
            continue;
        }
        // A GPU stops a few segments: their services summed in a short list.
        let mut stopped_by_service: Vec<Running> = Vec::with_capacity(stopped.len());
        for &(service, rps) in &stopped {
            match stopped_by_service.iter_mut().find(|(known, _)| *known == service) {
                Some((_, total)) => *total += rps,
                None => stopped_by_service.push((service, rps)),
            }
        }
        let change =
            GpuChangeSet { gpu: GpuOperations { node, index, operations }, stopped, started, stopped_by_service };
        if change.stopped.is_empty() {
            makes.push(change);
        } else if change.started.is_empty() {
            breaks.push(change);
        } else {
            changes.push(change);
        }
    }
    let mut steps = Vec::new();
    if !makes.is_empty() {
        for change in &makes {
            ledger.provision(&change.started, 1.0);
        }
        steps.push(Step { gpus: makes.into_iter().map(|change| change.gpu).collect(), dips: Vec::new() });
    }
    let mut stopping = Stopping::new(ledger.names.len());
    for mut remaining in [changes, breaks] {
        let mut current: Vec<GpuChangeSet> = Vec::new();
        // GPUs before `from` cannot join this step: they did not with less
        // stopping, and a step only stops more.
        let mut from = 0;
        while !remaining.is_empty() {
            // The first GPU (by position) that joins the step without a dip:
            // a GPU whose stops the starts of earlier steps cover may go
            // before one whose stops they do not yet.
            let fits = remaining[from..]
                .iter()
                .position(|change| ledger.joins_without_dip(&stopping, &change.stopped_by_service))
                .map(|offset| from + offset);
            match fits {
                Some(index) => {
                    let change = remaining.remove(index);
                    stopping.add(&change.stopped);
                    current.push(change);
                    from = index;
                }
                None if !current.is_empty() => {
                    close_step(&mut current, &mut stopping, &mut ledger, &mut steps);
                    from = 0;
                }
                None => {
                    // Every GPU left dips on its own: the first runs alone.
                    let change = remaining.remove(0);
                    stopping.add(&change.stopped);
                    current.push(change);
                    close_step(&mut current, &mut stopping, &mut ledger, &mut steps);
                    from = 0;
                }
            }
        }
        close_step(&mut current, &mut stopping, &mut ledger, &mut steps);
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diff::layout_of;
    use crate::diff::tests::{gpu, instance, old, plan};

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
                        gpu.shared.retain(|s| !(s.profile == profile && s.start == start));
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
                    Operation::StopShared { instance, services } => {
                        let (profile, start) = key(instance);
                        let found = gpu.shared.iter_mut().find(|s| s.profile == profile && s.start == start).unwrap();
                        let members: Vec<&String> = found.members.iter().map(|m| &m.service).collect();
                        assert_eq!(members, services.iter().collect::<Vec<_>>());
                        found.members.clear();
                    }
                    Operation::StartShared { instance, services, .. } => {
                        // On an instance just created (a stand-in) or one
                        // whose executor stopped.
                        let (profile, start) = key(instance);
                        gpu.instances.retain(|i| !(i.profile == profile && i.start == start));
                        gpu.shared.retain(|s| !(s.profile == profile && s.start == start && s.members.is_empty()));
                        let names: Vec<&str> = services.iter().map(String::as_str).collect();
                        gpu.shared.push(crate::diff::tests::shared(start, &names));
                    }
                }
                let placements: Vec<crate::layout::Placement> = gpu
                    .layout()
                    .map(|(profile, _, start)| crate::layout::Placement {
                        profile: gpu.gpu_model.spec().profile_by_name(profile).unwrap(),
                        start,
                    })
                    .collect();
                crate::layout::validate_layout(gpu.gpu_model, &placements).unwrap();
            }
        }
        plan.gpus.retain(|g| !g.is_empty());
        plan.gpus.sort_by_key(|g| (g.node, g.index));
    }

    fn with_rates(mut plan: Plan) -> Plan {
        let mut rates: BTreeMap<String, f64> = BTreeMap::new();
        for i in plan.gpus.iter().flat_map(|g| &g.instances) {
            *rates.entry(i.service.clone()).or_default() += i.throughput_rps;
        }
        for (_, shared) in plan.shared_instances() {
            for member in &shared.members {
                *rates.entry(member.service.clone()).or_default() += member.capacity_rps;
            }
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

    #[test]
    fn a_shared_executor_is_stopped_and_started_whole() {
        use crate::diff::tests::shared;
        let services = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        let mut old = plan(vec![gpu(0, 0, vec![instance("4g.40gb", 0, "a", 1)])]);
        old.gpus[0].shared = vec![shared(4, &["x", "y"])];
        let old = with_rates(old);

        // v joins in place: the executor restarts, x and y dip meanwhile.
        let mut joined = old.clone();
        joined.gpus[0].shared = vec![shared(4, &["x", "y", "v"])];
        let joined = with_rates(joined);
        let steps = transition_steps(&old, &joined);
        assert_eq!(steps.len(), 1, "{steps:#?}");
        assert_eq!(
            steps[0].gpus[0].operations,
            vec![
                Operation::StopShared { instance: "1g.10gb@4".into(), services: services(&["x", "y"]) },
                Operation::StartShared {
                    instance: "1g.10gb@4".into(),
                    sharing: Sharing::Serialized,
                    services: services(&["x", "y", "v"])
                },
            ]
        );
        let dipped: Vec<&str> = steps[0].dips.iter().map(|d| d.service.as_str()).collect();
        assert_eq!(dipped, ["x", "y"]);
        assert_eq!(steps[0].gpus[0].operations[1].to_string(), "start a serialized executor of x, y, v on 1g.10gb@4");

        // Moved to a new GPU: it starts there first, then the old one goes;
        // nobody dips.
        let mut moved = plan(vec![
            gpu(0, 0, vec![instance("4g.40gb", 0, "a", 1)]),
            gpu(0, 1, vec![instance("4g.40gb", 0, "b", 1)]),
        ]);
        moved.gpus[1].shared = vec![shared(5, &["x", "y", "v"])];
        let moved = with_rates(moved);
        let steps = transition_steps(&old, &moved);
        let order: Vec<Vec<(u32, u32)>> =
            steps.iter().map(|step| step.gpus.iter().map(|g| (g.node, g.index)).collect()).collect();
        assert_eq!(order, vec![vec![(0, 1)], vec![(0, 0)]]);
        assert!(steps.iter().all(|step| step.dips.is_empty()), "{steps:#?}");
        assert!(steps[1].gpus[0].operations.iter().all(|op| !op.starts_serving()));
        let mut state = old.clone();
        for step in &steps {
            apply(&mut state, step);
        }
        let layout = |p: &Plan| p.gpus.iter().map(|g| (g.node, g.index, layout_of(g))).collect::<Vec<_>>();
        assert_eq!(layout(&state), layout(&moved));
        let members = |p: &Plan| p.shared_instances().map(|(_, s)| s.members.len()).collect::<Vec<_>>();
        assert_eq!(members(&state), [3]);
    }
}
