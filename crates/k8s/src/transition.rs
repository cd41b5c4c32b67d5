//! A plan change as a sequence of intermediate states, make before break.
//!
//! The steps are `tessera diff --steps`' ([`tessera_core::transition_steps`]):
//! first the GPUs whose change stops nothing (added GPUs, instances created
//! in free slices), then the GPUs that stop segments, grouped so that no
//! service falls below its demand (a service that must dip is named with
//! how low), GPUs that only tear down last. Each step is expressed as two
//! states — plans whose GPUs are each at their old or their new assignment
//! — and `k8s apply` applies each state's manifests, whatever objects they
//! hold:
//!
//! - **drained**: the state before the step without the segments the step
//!   stops (routing shifts away from them, then their Deployments go);
//! - **after**: the step's GPUs at their new layout and segments (their
//!   agents reconfigure them, the new segments start and must be ready
//!   before the next step).
//!
//! Each state's objects include its routing (see [`crate::routing`]): a
//! service's route weighs each configuration by the segments the state
//! runs, so the drained state's route has taken the stopped segments'
//! weight off before their Deployments go, and the after state's route
//! adds the new segments' weight once they are ready.
//!
//! A GPU the target no longer has is **emptied**, not left out: from its
//! step on it stays in the states with no instances, so its node's part
//! says it is empty and the node's agent destroys its MIG layout (a node the
//! target no longer uses gets a part of empty GPUs). It leaves the parts
//! only with the target itself, at the end, once its agent has reported the
//! empty layout; only then is the ConfigMap of a node the target no longer
//! uses pruned.
//!
//! Nothing else is deleted until the end. Because every state is derived
//! from the plan the cluster records (the nodes' parts) and the target, a
//! run interrupted at any point resumes: the GPUs already switched (or
//! emptied) are unchanged against the target and drop out of the remaining
//! steps.

use std::collections::{BTreeMap, BTreeSet};

use tessera_core::text::few_named;
use tessera_core::{transition_steps, Dip, GpuAssignment, InstanceAssignment, Plan, SharedInstance};

/// One step of a transition.
#[derive(Debug, Clone, PartialEq)]
pub struct TransitionStep {
    /// The GPUs it changes, (node, index).
    pub gpus: Vec<(u32, u32)>,
    /// Those of them it empties (the target no longer has them): their
    /// agents destroy their MIG layouts.
    pub empties: Vec<(u32, u32)>,
    /// Segments it stops, `service on node N GPU G profile@start`.
    pub stops: Vec<String>,
    /// Segments it starts, same form.
    pub starts: Vec<String>,
    /// Services below their demand while it runs.
    pub dips: Vec<Dip>,
    /// The state while it runs: the state before without the stopped
    /// segments.
    pub drained: Plan,
    /// The state after it.
    pub after: Plan,
}

impl TransitionStep {
    /// The step in words, one line.
    pub fn summary(&self) -> String {
        let listed = |gpus: &[(u32, u32)]| -> String {
            gpus.iter().map(|(node, index)| format!("{node}:{index}")).collect::<Vec<_>>().join(" ")
        };
        let dips = if self.dips.is_empty() {
            "no service below its demand".to_string()
        } else {
            let named: Vec<String> = self
                .dips
                .iter()
                .map(|dip| format!("{} dips to {:.1} of {:.1} req/s", dip.service, dip.provisioned_rps, dip.rate_rps))
                .collect();
            named.join(", ")
        };
        let empties =
            if self.empties.is_empty() { String::new() } else { format!(", empty GPUs {}", listed(&self.empties)) };
        format!(
            "GPUs {}: stop {}, start {}{empties}; {dips}",
            listed(&self.gpus),
            if self.stops.is_empty() { "nothing".to_string() } else { self.stops.join(", ") },
            if self.starts.is_empty() { "nothing".to_string() } else { self.starts.join(", ") },
        )
    }
}

/// What runs in an instance: service, model, batch, processes.
fn same_segment(a: &InstanceAssignment, b: &InstanceAssignment) -> bool {
    (&a.service, &a.model, a.batch, a.procs) == (&b.service, &b.model, b.batch, b.procs)
}

fn describe(gpu: &GpuAssignment, instance: &InstanceAssignment) -> String {
    format!("{} on node {} GPU {} {}@{}", instance.service, gpu.node, gpu.index, instance.profile, instance.start)
}

/// `the executor of x, y, z and 2 more on node N GPU G profile@start`.
fn describe_shared(gpu: &GpuAssignment, shared: &SharedInstance) -> String {
    let services: Vec<&str> = shared.members.iter().map(|m| m.service.as_str()).collect();
    format!(
        "the executor of {} on node {} GPU {} {}@{}",
        few_named(&services),
        gpu.node,
        gpu.index,
        shared.profile,
        shared.start
    )
}

/// Whether `gpu` (of the same GPU model) runs `instance`'s segment on the
/// same instance.
fn runs_segment(gpu: &GpuAssignment, instance: &InstanceAssignment) -> bool {
    gpu.instances
        .iter()
        .any(|i| i.profile == instance.profile && i.start == instance.start && same_segment(i, instance))
}

/// Whether `gpu` (of the same GPU model) runs `shared`'s executor on the
/// same instance.
fn runs_executor(gpu: &GpuAssignment, shared: &SharedInstance) -> bool {
    gpu.shared.iter().any(|s| s.profile == shared.profile && s.start == shared.start && s.same_executor(shared))
}

/// What runs on `gpu` that `other` (the same GPU model, or none) does not
/// run the same, each in words.
fn not_run_on(gpu: &GpuAssignment, other: Option<&GpuAssignment>) -> Vec<String> {
    let segments =
        gpu.instances.iter().filter(|i| !other.is_some_and(|o| runs_segment(o, i))).map(|i| describe(gpu, i));
    let executors =
        gpu.shared.iter().filter(|s| !other.is_some_and(|o| runs_executor(o, s))).map(|s| describe_shared(gpu, s));
    segments.chain(executors).collect()
}

/// `state` with the GPUs at `positions` taken from `target`, emptied where
/// `target` has none (see the module docs); services, images and node names
/// of both, the target's where both have them.
fn with_gpus(state: &Plan, target: &Plan, positions: &BTreeSet<(u32, u32)>) -> Plan {
    let targets: BTreeMap<(u32, u32), &GpuAssignment> = target.gpus.iter().map(|g| ((g.node, g.index), g)).collect();
    let mut gpus: Vec<GpuAssignment> = Vec::with_capacity(state.gpus.len());
    for gpu in &state.gpus {
        let position = (gpu.node, gpu.index);
        if !positions.contains(&position) {
            gpus.push(gpu.clone());
        } else if !targets.contains_key(&position) {
            gpus.push(GpuAssignment { instances: Vec::new(), shared: Vec::new(), ..gpu.clone() });
        }
    }
    gpus.extend(positions.iter().filter_map(|position| targets.get(position)).map(|gpu| (*gpu).clone()));
    gpus.sort_by_key(|gpu| (gpu.node, gpu.index));
    let mut plan = Plan { gpus, ..target.clone() };
    let known: BTreeSet<String> = target.services.iter().map(|s| s.service.clone()).collect();
    plan.services.extend(state.services.iter().filter(|s| !known.contains(&s.service)).cloned());
    for (service, image) in &state.images {
        plan.images.entry(service.clone()).or_insert_with(|| image.clone());
    }
    if plan.node_names.len() < state.node_names.len() {
        let extra = state.node_names[plan.node_names.len()..].to_vec();
        plan.node_names.extend(extra);
    }
    plan.gpu_count = plan.gpus.len();
    plan
}

/// `state` without the segments of `positions` that `after` does not run
/// the same (their instances stay, idle).
fn drained(state: &Plan, after: &Plan, positions: &BTreeSet<(u32, u32)>) -> (Plan, Vec<String>) {
    let after_gpus: BTreeMap<(u32, u32), &GpuAssignment> = after.gpus.iter().map(|g| ((g.node, g.index), g)).collect();
    let mut plan = state.clone();
    let mut stops = Vec::new();
    for gpu in plan.gpus.iter_mut().filter(|gpu| positions.contains(&(gpu.node, gpu.index))) {
        // Another GPU model at the position runs nothing of this one.
        let next = after_gpus.get(&(gpu.node, gpu.index)).filter(|n| n.gpu_model == gpu.gpu_model);
        stops.extend(not_run_on(gpu, next.copied()));
        gpu.instances.retain(|instance| next.is_some_and(|n| runs_segment(n, instance)));
        gpu.shared.retain(|shared| next.is_some_and(|n| runs_executor(n, shared)));
    }
    (plan, stops)
}

/// The steps from `running` to `target`, each with its states (see the
/// module documentation). Empty when the GPUs are as `target` has them.
pub fn plan_transition(running: &Plan, target: &Plan) -> Vec<TransitionStep> {
    let mut state = running.clone();
    let mut steps = Vec::new();
    for step in transition_steps(running, target) {
        let positions: BTreeSet<(u32, u32)> = step.gpus.iter().map(|g| (g.node, g.index)).collect();
        let after = with_gpus(&state, target, &positions);
        let (drained, stops) = drained(&state, &after, &positions);
        let before_gpus: BTreeMap<(u32, u32), &GpuAssignment> =
            state.gpus.iter().map(|g| ((g.node, g.index), g)).collect();
        let mut starts = Vec::new();
        for gpu in after.gpus.iter().filter(|gpu| positions.contains(&(gpu.node, gpu.index))) {
            let before = before_gpus.get(&(gpu.node, gpu.index)).filter(|b| b.gpu_model == gpu.gpu_model);
            starts.extend(not_run_on(gpu, before.copied()));
        }
        let empties = after
            .gpus
            .iter()
            .filter(|gpu| gpu.is_empty() && positions.contains(&(gpu.node, gpu.index)))
            .map(|gpu| (gpu.node, gpu.index))
            .collect();
        steps.push(TransitionStep {
            gpus: positions.into_iter().collect(),
            empties,
            stops,
            starts,
            dips: step.dips,
            drained,
            after: after.clone(),
        });
        state = after;
    }
    steps
}
