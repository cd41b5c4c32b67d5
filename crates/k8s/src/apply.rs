//! Applying a plan: make before break from the plan the cluster runs (the
//! nodes' recorded parts, see [`crate::node_plan`]) to the new one, through
//! the intermediate states of [`crate::transition`]; then the whole plan's
//! objects, and what Tessera manages that the plan no longer has deleted
//! last. Reading back how the cluster fares against the plan.
//!
//! Each step: the state without the segments the step stops is applied
//! (routing objects first, then those segments' Deployments deleted), the
//! step's nodes get their new parts, their agents reconfigure the GPUs
//! (the nodes report `success` for their part's id), the new segments'
//! claims (pinned to the MIG devices the agents report) and Deployments are
//! applied, and the step waits until every new Deployment is ready before
//! the next, then applies the state's routing. A first apply is one step
//! (every GPU is added). Objects are written in bulk, `concurrency`
//! requests in flight; an object as planned is not written.
//!
//! GPUs the new plan no longer has are emptied by their agents in their
//! step (see [`crate::transition`]); a node that is not in the cluster any
//! more has nothing to empty and is not waited for. An apply that finds
//! GPUs a run before it emptied in the parts (it was interrupted) first
//! waits until their agents report the empty layouts, so no node's part is
//! replaced or pruned before its GPUs are empty.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use serde_json::Value;
use tessera_core::text::count;
use tessera_core::{GpuAssignment, Plan};
use tessera_plan::NodeRef;

use crate::cluster::{Cluster, Kind};
use crate::error::K8sError;
use crate::labels::{
    DEVICES_ANNOTATION, MANAGED_BY, NODE_NUMBER_LABEL, PLAN_ID, REASON_ANNOTATION, SEGMENT_LABEL, STATE_LABEL,
};
use crate::manifests::{manifests_with, state_objects, Manifest, Manifests};
use crate::names::plan_id;
use crate::node_plan::{merge_parts, node_parts, recorded_parts, NodePart};
use crate::options::ExportOptions;
use crate::pods::PodOptions;
use crate::routing::GatewayRef;
use crate::segment_objects::NodeDevice;
use crate::transition::plan_transition;

/// How `apply_plan` runs.
#[derive(Debug, Clone, PartialEq)]
pub struct ApplyOptions {
    /// The namespace of the plan's objects.
    pub namespace: String,
    /// Change nothing; report what would change.
    pub dry_run: bool,
    /// Take over fields another field manager owns.
    pub force_conflicts: bool,
    /// How long to wait for the nodes' layouts, and for a step's new
    /// segments to be ready.
    pub layout_timeout: Duration,
    /// How often to look at the nodes while waiting.
    pub poll: Duration,
    /// The Gateway the services' routes attach to; `None`: no routes.
    pub routes: Option<GatewayRef>,
    /// Requests, port and probes of the pods.
    pub pods: PodOptions,
    /// Requests in flight at a time when writing objects in bulk.
    pub concurrency: usize,
}

impl ApplyOptions {
    /// What the objects are made with.
    fn export(&self) -> ExportOptions {
        ExportOptions { namespace: self.namespace.clone(), routes: self.routes.clone(), pods: self.pods.clone() }
    }
}

/// What `apply_plan` reports as it goes.
#[derive(Debug, Clone, PartialEq)]
pub enum Progress {
    /// A step of the transition begins (or, in a dry run, would run): its
    /// number from 1, how many there are, and what it does.
    Step {
        /// Its number, from 1.
        number: usize,
        /// How many steps.
        of: usize,
        /// What it does, one line.
        summary: String,
    },
    /// An object was written, found as planned, or deleted.
    Action(Action),
}

/// What happened (or, in a dry run, would happen) to one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// It did not exist.
    Created,
    /// It differed.
    Updated,
    /// It was as planned: not written.
    Unchanged,
    /// Tessera made it for an earlier plan: deleted.
    Deleted,
}

impl Change {
    /// In words.
    pub fn word(self) -> &'static str {
        match self {
            Change::Created => "created",
            Change::Updated => "updated",
            Change::Unchanged => "unchanged",
            Change::Deleted => "deleted",
        }
    }
}

/// One object's change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Action {
    /// Its kind.
    pub kind: String,
    /// Its name.
    pub name: String,
    /// The change.
    pub change: Change,
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} {}", self.kind, self.name, self.change.word())
    }
}

/// `true` when every field `desired` sets has that value in `live` (maps
/// compared key by key, lists element by element): applying it would
/// change nothing.
pub fn contains(live: &Value, desired: &Value) -> bool {
    match (live, desired) {
        (Value::Object(live), Value::Object(desired)) => {
            desired.iter().all(|(key, value)| live.get(key).is_some_and(|have| contains(have, value)))
        }
        (Value::Array(live), Value::Array(desired)) => {
            live.len() == desired.len() && live.iter().zip(desired).all(|(have, want)| contains(have, want))
        }
        (live, desired) => live == desired,
    }
}

/// The managed objects of `kind` in the namespace, by name.
fn managed(cluster: &Cluster, kind: Kind, namespace: &str) -> Result<BTreeMap<String, Value>, K8sError> {
    let items = cluster.list(kind, Some(namespace), Some(&format!("{MANAGED_BY}=tessera")), None)?;
    Ok(items
        .into_iter()
        .filter_map(|item| item["metadata"]["name"].as_str().map(str::to_string).map(|name| (name, item)))
        .collect())
}

/// The kinds `apply_plan` writes, in the order a state is applied.
const WORKLOAD_KINDS: [&str; 3] = ["ConfigMap", "ResourceClaim", "Deployment"];

/// Applies `objects` (all of one kind) in bulk: each compared with the live
/// object of that name, those not as planned written.
fn apply_kind(
    cluster: &Cluster,
    kind_name: &str,
    objects: &[&Manifest],
    options: &ApplyOptions,
    on_progress: &mut dyn FnMut(&Progress),
) -> Result<Vec<Action>, K8sError> {
    if objects.is_empty() {
        return Ok(Vec::new());
    }
    let kind = Kind::named(kind_name).ok_or_else(|| K8sError::Plan(format!("Tessera cannot apply a {kind_name}")))?;
    let live = managed(cluster, kind, &options.namespace)?;
    let mut actions = Vec::with_capacity(objects.len());
    let mut writes: Vec<(String, Value)> = Vec::new();
    for object in objects {
        let desired = object.to_value();
        let change = match live.get(object.name()) {
            None => Change::Created,
            Some(live) if contains(live, &desired) => Change::Unchanged,
            Some(_) => Change::Updated,
        };
        if change != Change::Unchanged {
            writes.push((object.name().to_string(), desired));
        }
        actions.push(Action { kind: kind_name.into(), name: object.name().into(), change });
    }
    if !options.dry_run && !writes.is_empty() {
        let batch: Vec<(&str, &Value)> = writes.iter().map(|(name, value)| (name.as_str(), value)).collect();
        cluster.apply_all(kind, &options.namespace, &batch, options.force_conflicts, options.concurrency)?;
    }
    for action in &actions {
        on_progress(&Progress::Action(action.clone()));
    }
    Ok(actions)
}

/// Applies the objects of `manifests` of the kinds `kinds` (in the order
/// given; `None`: every kind but the workload kinds, e.g. routing).
fn apply_kinds(
    cluster: &Cluster,
    manifests: &Manifests,
    kinds: Option<&[&str]>,
    options: &ApplyOptions,
    on_progress: &mut dyn FnMut(&Progress),
) -> Result<Vec<Action>, K8sError> {
    let order: Vec<&str> = match kinds {
        Some(kinds) => kinds.to_vec(),
        None => {
            let mut others: Vec<&str> =
                manifests.objects.iter().map(Manifest::kind).filter(|k| !WORKLOAD_KINDS.contains(k)).collect();
            others.dedup();
            others
        }
    };
    let mut actions = Vec::new();
    for kind in order {
        let objects: Vec<&Manifest> = manifests.of_kind(kind).collect();
        actions.extend(apply_kind(cluster, kind, &objects, options, on_progress)?);
    }
    Ok(actions)
}

/// Deletes the managed objects of `kind` not in `keep`, in bulk.
fn prune(
    cluster: &Cluster,
    kind: Kind,
    kind_name: &str,
    keep: &BTreeSet<&str>,
    options: &ApplyOptions,
    on_progress: &mut dyn FnMut(&Progress),
) -> Result<Vec<Action>, K8sError> {
    let names: Vec<String> =
        managed(cluster, kind, &options.namespace)?.into_keys().filter(|name| !keep.contains(name.as_str())).collect();
    if !options.dry_run && !names.is_empty() {
        let batch: Vec<&str> = names.iter().map(String::as_str).collect();
        cluster.delete_all(kind, &options.namespace, &batch, options.concurrency)?;
    }
    let actions: Vec<Action> =
        names.into_iter().map(|name| Action { kind: kind_name.into(), name, change: Change::Deleted }).collect();
    for action in &actions {
        on_progress(&Progress::Action(action.clone()));
    }
    Ok(actions)
}

/// The node objects of the plan's nodes, by node number.
fn plan_nodes(cluster: &Cluster, nodes: &BTreeMap<u32, NodeRef>) -> Result<BTreeMap<u32, Value>, K8sError> {
    let all = cluster.list(Kind::Node, None, None, None)?;
    let by_name: BTreeMap<&str, &Value> =
        all.iter().filter_map(|object| object["metadata"]["name"].as_str().map(|name| (name, object))).collect();
    let by_number: BTreeMap<&str, &Value> = all
        .iter()
        .filter_map(|object| object["metadata"]["labels"][NODE_NUMBER_LABEL].as_str().map(|n| (n, object)))
        .collect();
    let mut found = BTreeMap::new();
    for (number, node) in nodes {
        let object = match node {
            NodeRef::Named(name) => by_name.get(name.as_str()),
            NodeRef::Numbered(n) => by_number.get(n.to_string().as_str()),
        };
        if let Some(object) = object {
            found.insert(*number, (*object).clone());
        }
    }
    Ok(found)
}

/// A node's (state, plan id, reason).
fn node_state(node: &Value) -> (Option<&str>, Option<&str>, Option<&str>) {
    let metadata = &node["metadata"];
    (
        metadata["labels"][STATE_LABEL].as_str(),
        metadata["annotations"][PLAN_ID].as_str(),
        metadata["annotations"][REASON_ANNOTATION].as_str(),
    )
}

/// The devices each node's agent reported for its part's id in `ids`.
fn reported_devices(nodes: &BTreeMap<u32, Value>, ids: &BTreeMap<u32, String>) -> BTreeMap<u32, Vec<NodeDevice>> {
    nodes
        .iter()
        .filter(|(number, node)| node_state(node).1.is_some_and(|id| ids.get(number).is_some_and(|want| want == id)))
        .filter_map(|(number, node)| {
            let text = node["metadata"]["annotations"][DEVICES_ANNOTATION].as_str()?;
            Some((*number, serde_json::from_str(text).ok()?))
        })
        .collect()
}

/// Each node's part id of `plan`.
fn part_ids(plan: &Plan) -> BTreeMap<u32, String> {
    node_parts(plan).into_iter().map(|(number, part)| (number, plan_id(&part))).collect()
}

/// Waits until every node of `ids` reports `success` for its part's id; a
/// node reporting `failed` for it ends the wait with its reason.
fn wait_for_layouts(
    cluster: &Cluster,
    nodes: &BTreeMap<u32, NodeRef>,
    ids: &BTreeMap<u32, String>,
    options: &ApplyOptions,
) -> Result<BTreeMap<u32, Value>, K8sError> {
    let deadline = Instant::now() + options.layout_timeout;
    loop {
        let objects = plan_nodes(cluster, nodes)?;
        let mut waiting = Vec::new();
        for (number, want) in ids {
            let node = &nodes[number];
            match objects.get(number).map(node_state) {
                Some((Some("success"), Some(id), _)) if id == want => {}
                Some((Some("failed"), Some(id), reason)) if id == want => {
                    return Err(K8sError::Plan(format!(
                        "{node} failed to apply its MIG layout: {}",
                        reason.unwrap_or("no reason given")
                    )));
                }
                Some((state, id, reason)) => waiting.push(format!(
                    "{node} ({}{}{})",
                    state.unwrap_or("no state"),
                    if state.is_some() && id != Some(want.as_str()) { " of an earlier plan" } else { "" },
                    reason.map(|r| format!(": {r}")).unwrap_or_default()
                )),
                None => waiting.push(format!("{node} (not in the cluster)")),
            }
        }
        if waiting.is_empty() {
            return Ok(objects);
        }
        if Instant::now() >= deadline {
            return Err(K8sError::Timeout(format!(
                "after {:.0} s, {} not applied the plan's MIG layout: {} (is the agent's DaemonSet running there?)",
                options.layout_timeout.as_secs_f64(),
                if waiting.len() == 1 { "1 node has".to_string() } else { format!("{} nodes have", waiting.len()) },
                waiting.join("; ")
            )));
        }
        cluster.sleep(options.poll);
    }
}

/// Waits until each Deployment of `names` has all its replicas ready.
fn wait_until_ready(cluster: &Cluster, names: &BTreeSet<String>, options: &ApplyOptions) -> Result<(), K8sError> {
    if names.is_empty() {
        return Ok(());
    }
    let deadline = Instant::now() + options.layout_timeout;
    loop {
        let live = managed(cluster, Kind::Deployment, &options.namespace)?;
        let waiting: Vec<&str> = names
            .iter()
            .filter(|name| {
                live.get(name.as_str()).is_none_or(|d| {
                    let want = d["spec"]["replicas"].as_u64().unwrap_or(1);
                    d["status"]["readyReplicas"].as_u64().unwrap_or(0) < want
                })
            })
            .map(String::as_str)
            .collect();
        if waiting.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(K8sError::Timeout(format!(
                "after {:.0} s, {} not ready: {} (rerun to resume from here)",
                options.layout_timeout.as_secs_f64(),
                if waiting.len() == 1 {
                    "1 new segment is".to_string()
                } else {
                    format!("{} new segments are", waiting.len())
                },
                waiting.join(", ")
            )));
        }
        cluster.sleep(options.poll);
    }
}

/// The plan the cluster runs: the union of the nodes' recorded parts, or
/// an empty plan when none is recorded.
pub fn running_plan(cluster: &Cluster, namespace: &str, like: &Plan) -> Result<Plan, K8sError> {
    Ok(plan_of_parts(&recorded_parts(cluster, namespace)?, like))
}

/// The union of `parts`, or an empty plan like `like` without any.
fn plan_of_parts(parts: &BTreeMap<u32, NodePart>, like: &Plan) -> Plan {
    merge_parts(parts).unwrap_or_else(|| {
        Plan::from_gpus(Vec::new(), like.strategy.clone(), like.latency_rule.clone(), like.gpus_per_node)
    })
}

/// Waits until the agents of the nodes whose recorded part empties a GPU
/// report that part (a run interrupted after handing them their teardown);
/// nodes no longer in the cluster have nothing to empty.
fn finish_teardowns(
    cluster: &Cluster,
    parts: &BTreeMap<u32, NodePart>,
    options: &ApplyOptions,
) -> Result<(), K8sError> {
    let emptying: BTreeMap<u32, NodeRef> = parts
        .values()
        .filter(|part| part.plan.gpus.iter().any(GpuAssignment::is_empty))
        .map(|part| (part.number, part.node.clone()))
        .collect();
    if emptying.is_empty() {
        return Ok(());
    }
    let present = plan_nodes(cluster, &emptying)?;
    let ids: BTreeMap<u32, String> = present.keys().map(|number| (*number, parts[number].id.clone())).collect();
    wait_for_layouts(cluster, &emptying, &ids, options).map(drop)
}

/// A state's objects, labelled as the target plan's (every state of a
/// transition belongs to the plan being applied).
fn state_manifests(state: &Plan, target_id: &str, options: &ApplyOptions) -> Result<Manifests, K8sError> {
    let mut objects = state_objects(state, &options.export(), &BTreeMap::new())?;
    objects.relabel(target_id);
    Ok(objects)
}

/// Applies one state's nodes and segments: the parts of `nodes`, their
/// layouts awaited, then claims and Deployments (pinned to the reported
/// devices), then the rest (routing) once the Deployments in `new` are
/// ready.
fn apply_state(
    cluster: &Cluster,
    state: &Plan,
    target_id: &str,
    nodes: &BTreeSet<u32>,
    options: &ApplyOptions,
    on_progress: &mut dyn FnMut(&Progress),
) -> Result<(Vec<Action>, Manifests), K8sError> {
    let first = state_manifests(state, target_id, options)?;
    let touched: Vec<&Manifest> = first
        .of_kind("ConfigMap")
        .filter(|object| {
            object
                .labels()
                .and_then(|labels| labels.get(NODE_NUMBER_LABEL))
                .and_then(|n| n.parse::<u32>().ok())
                .is_some_and(|n| nodes.contains(&n))
        })
        .collect();
    let mut actions = apply_kind(cluster, "ConfigMap", &touched, options, on_progress)?;
    let ids = part_ids(state);
    // A node whose part only empties GPUs and that is not in the cluster any
    // more has nothing to empty.
    let present = plan_nodes(cluster, &first.nodes)?;
    let serving: BTreeSet<u32> = state.gpus.iter().filter(|gpu| !gpu.is_empty()).map(|g| g.node).collect();
    let waited: BTreeMap<u32, String> = ids
        .iter()
        .filter(|(n, _)| nodes.contains(n) && (present.contains_key(n) || serving.contains(n)))
        .map(|(n, id)| (*n, id.clone()))
        .collect();
    let objects = if options.dry_run || waited.is_empty() {
        present
    } else {
        wait_for_layouts(cluster, &first.nodes, &waited, options)?
    };
    let mut pinned = state_objects(state, &options.export(), &reported_devices(&objects, &ids))?;
    pinned.relabel(target_id);
    let workloads = apply_kinds(cluster, &pinned, Some(&WORKLOAD_KINDS[1..]), options, on_progress)?;
    let started: BTreeSet<String> = workloads
        .iter()
        .filter(|a| a.kind == "Deployment" && a.change != Change::Unchanged)
        .map(|a| a.name.clone())
        .collect();
    actions.extend(workloads);
    if !options.dry_run {
        wait_until_ready(cluster, &started, options)?;
    }
    actions.extend(apply_kinds(cluster, &pinned, None, options, on_progress)?);
    Ok((actions, pinned))
}

/// Applies `plan` make before break from the plan the cluster runs (see
/// the module documentation): checks it against the cluster's nodes, runs
/// each step of the transition, applies the whole plan's objects, and
/// deletes what Tessera manages that the plan no longer has. Objects as
/// planned are not written, so a second apply changes nothing; a run
/// interrupted anywhere resumes where it stopped. Each step and action is
/// reported as it happens.
pub fn apply_plan(
    cluster: &Cluster,
    plan: &Plan,
    options: &ApplyOptions,
    on_progress: &mut dyn FnMut(&Progress),
) -> Result<Vec<Action>, K8sError> {
    let target = manifests_with(plan, &options.export(), &BTreeMap::new())?;
    cluster.inventory()?.nodes.check(plan)?;
    let parts = recorded_parts(cluster, &options.namespace)?;
    if !options.dry_run {
        finish_teardowns(cluster, &parts, options)?;
    }
    let running = plan_of_parts(&parts, plan);
    let steps = plan_transition(&running, plan);
    let mut actions = Vec::new();
    let mut before = running;
    for (number, step) in steps.iter().enumerate() {
        on_progress(&Progress::Step { number: number + 1, of: steps.len(), summary: step.summary() });
        if options.dry_run {
            continue;
        }
        let drained = state_manifests(&step.drained, &target.plan_id, options)?;
        actions.extend(apply_kinds(cluster, &drained, None, options, on_progress)?);
        let kept: BTreeSet<&str> = drained.of_kind("Deployment").map(Manifest::name).collect();
        let previous = state_manifests(&before, &target.plan_id, options)?;
        let stopped: Vec<&str> =
            previous.of_kind("Deployment").map(Manifest::name).filter(|n| !kept.contains(n)).collect();
        if !stopped.is_empty() {
            cluster.delete_all(Kind::Deployment, &options.namespace, &stopped, options.concurrency)?;
            for name in stopped {
                let action = Action { kind: "Deployment".into(), name: name.into(), change: Change::Deleted };
                on_progress(&Progress::Action(action.clone()));
                actions.push(action);
            }
        }
        let nodes: BTreeSet<u32> = step.gpus.iter().map(|(node, _)| *node).collect();
        actions.extend(apply_state(cluster, &step.after, &target.plan_id, &nodes, options, on_progress)?.0);
        before = step.after.clone();
    }
    let all: BTreeSet<u32> = target.nodes.keys().copied().collect();
    let (last, target) = apply_state(cluster, plan, &target.plan_id, &all, options, on_progress)?;
    actions.extend(last);
    fn keep<'a>(target: &'a Manifests, kind: &'a str) -> BTreeSet<&'a str> {
        target.of_kind(kind).map(Manifest::name).collect()
    }
    // Deployments first (nothing runs on what goes next), then what
    // fronted and routed to them, the nodes' parts, and claims last.
    for (kind, name) in [
        (Kind::Deployment, "Deployment"),
        (Kind::Service, "Service"),
        (Kind::HttpRoute, "HTTPRoute"),
        (Kind::ConfigMap, "ConfigMap"),
        (Kind::ResourceClaim, "ResourceClaim"),
    ] {
        actions.extend(prune(cluster, kind, name, &keep(&target, name), options, on_progress)?);
    }
    Ok(per_object(actions))
}

/// One action per object, in the order first met: what happened to it over
/// the whole apply (deleted then created again: updated).
fn per_object(actions: Vec<Action>) -> Vec<Action> {
    let mut order: Vec<(String, String)> = Vec::new();
    let mut seen: BTreeMap<(String, String), Change> = BTreeMap::new();
    for action in actions {
        let key = (action.kind, action.name);
        let merged = match (seen.get(&key).copied(), action.change) {
            (None, change) => change,
            (Some(Change::Unchanged), change) | (Some(change), Change::Unchanged) => change,
            (Some(Change::Deleted), Change::Created) => Change::Updated,
            (Some(Change::Created), Change::Deleted) => Change::Deleted,
            (Some(earlier), _) => earlier,
        };
        if seen.insert(key.clone(), merged).is_none() {
            order.push(key);
        }
    }
    order
        .into_iter()
        .map(|key| {
            let change = seen[&key];
            Action { kind: key.0, name: key.1, change }
        })
        .collect()
}

/// A plan node as the cluster shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeStatus {
    /// The node.
    pub node: String,
    /// Its layout state (`pending`, `success`, `failed`), if any.
    pub state: Option<String>,
    /// `true` when the state is about this plan.
    pub current: bool,
    /// Why it is pending or failed.
    pub reason: Option<String>,
}

/// A segment as the cluster runs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentStatus {
    /// Its Deployment.
    pub deployment: String,
    /// The service (Kubernetes name).
    pub service: String,
    /// Processes planned.
    pub planned: u32,
    /// Pods ready.
    pub ready: u32,
    /// Container restarts of its pods.
    pub restarts: u64,
    /// `false` when the Deployment does not exist.
    pub exists: bool,
}

/// The cluster against a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterStatus {
    /// The plan's id.
    pub plan_id: String,
    /// Each plan node.
    pub nodes: Vec<NodeStatus>,
    /// Each segment.
    pub segments: Vec<SegmentStatus>,
}

impl ClusterStatus {
    /// `true` when every node's layout is in place for the plan and every
    /// segment runs all its processes.
    pub fn as_planned(&self) -> bool {
        self.nodes.iter().all(|n| n.current && n.state.as_deref() == Some("success"))
            && self.segments.iter().all(|s| s.exists && s.ready == s.planned)
    }

    /// What is not as planned, in words.
    pub fn differences(&self) -> Vec<String> {
        let nodes = self.nodes.iter().filter(|n| !(n.current && n.state.as_deref() == Some("success"))).map(|n| {
            let state = match (n.current, n.state.as_deref()) {
                (_, None) => "not reported",
                (false, Some(_)) => "of another plan",
                (true, Some(state)) => state,
            };
            format!("{}: layout {state}", n.node)
        });
        let segments = self.segments.iter().filter(|s| !(s.exists && s.ready == s.planned)).map(|s| {
            if s.exists {
                format!("{}: {} of {} ready", s.deployment, s.ready, count(s.planned as usize, "process"))
            } else {
                format!("{}: missing", s.deployment)
            }
        });
        nodes.chain(segments).collect()
    }
}

/// How the cluster runs `plan`: per node its layout state, per segment its
/// pods ready and restarts. `plan` may be what the cluster records in the
/// middle of an apply (GPUs being emptied included): nothing is written, so
/// nothing is refused.
pub fn cluster_status(cluster: &Cluster, plan: &Plan, namespace: &str) -> Result<ClusterStatus, K8sError> {
    let workloads = ExportOptions { routes: None, ..ExportOptions::new(namespace) };
    let planned = state_objects(plan, &workloads, &BTreeMap::new())?;
    let objects = plan_nodes(cluster, &planned.nodes)?;
    let ids = part_ids(plan);
    let nodes = planned
        .nodes
        .iter()
        .map(|(number, node)| {
            let (state, id, reason) = objects.get(number).map(node_state).unwrap_or_default();
            NodeStatus {
                node: node.to_string(),
                state: state.map(str::to_string),
                current: id.is_some_and(|id| ids.get(number).is_some_and(|want| want == id)),
                reason: reason.map(str::to_string),
            }
        })
        .collect();
    let live_deployments = managed(cluster, Kind::Deployment, namespace)?;
    let mut restarts_by_segment: BTreeMap<String, u64> = BTreeMap::new();
    for pod in cluster.list(Kind::Pod, Some(namespace), Some(SEGMENT_LABEL), None)? {
        let Some(segment) = pod["metadata"]["labels"][SEGMENT_LABEL].as_str() else { continue };
        let restarts: u64 = pod["status"]["containerStatuses"]
            .as_array()
            .map(|statuses| statuses.iter().filter_map(|status| status["restartCount"].as_u64()).sum())
            .unwrap_or(0);
        *restarts_by_segment.entry(segment.to_string()).or_default() += restarts;
    }
    let mut segments = Vec::new();
    for object in planned.of_kind("Deployment") {
        let Manifest::Deployment(deployment) = object else { continue };
        let planned_procs = deployment.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
        let service = deployment.metadata.labels.as_ref().and_then(|l| l.get(crate::labels::SERVICE_LABEL)).cloned();
        let live = live_deployments.get(object.name());
        let restarts = restarts_by_segment.get(object.name()).copied().unwrap_or(0);
        segments.push(SegmentStatus {
            deployment: object.name().to_string(),
            service: service.unwrap_or_default(),
            planned: u32::try_from(planned_procs).unwrap_or(0),
            ready: live.as_ref().and_then(|d| d["status"]["readyReplicas"].as_u64()).unwrap_or(0) as u32,
            restarts,
            exists: live.is_some(),
        });
    }
    Ok(ClusterStatus { plan_id: planned.plan_id, nodes, segments })
}
