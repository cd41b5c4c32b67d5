//! Applying a plan's objects in dependency order — the plan for the agents,
//! each node's layout reported `success`, the claims, the Deployments —
//! deleting what Tessera manages that the plan no longer has, and reading
//! back how the cluster fares against the plan.
//!
//! Deployments the plan no longer has are deleted *before* the layouts
//! change (their MIG devices may be destroyed, and an agent refuses a GPU
//! that still runs processes); claims no longer used, at the end.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use serde_json::Value;
use tessera_core::text::count;
use tessera_core::Plan;
use tessera_plan::NodeRef;

use crate::cluster::{Cluster, Kind};
use crate::error::K8sError;
use crate::manifests::{
    manifests, manifests_with, Manifest, Manifests, NodeDevice, DEVICES_ANNOTATION, MANAGED_BY, NODE_NUMBER_LABEL,
    PLAN_ID, REASON_ANNOTATION, SEGMENT_LABEL, STATE_LABEL,
};
use crate::options::ExportOptions;
use crate::pods::PodOptions;
use crate::routing::GatewayRef;

/// How `apply_plan` runs.
#[derive(Debug, Clone, PartialEq)]
pub struct ApplyOptions {
    /// The namespace of the plan's objects.
    pub namespace: String,
    /// Change nothing; report what would change.
    pub dry_run: bool,
    /// Take over fields another field manager owns.
    pub force_conflicts: bool,
    /// How long to wait for the nodes' layouts.
    pub layout_timeout: Duration,
    /// How often to look at the nodes while waiting.
    pub poll: Duration,
    /// The Gateway the services' routes attach to; `None`: no routes.
    pub routes: Option<GatewayRef>,
    /// Requests, port and probes of the pods.
    pub pods: PodOptions,
}

impl ApplyOptions {
    /// What the objects are made with.
    fn export(&self) -> ExportOptions {
        ExportOptions { namespace: self.namespace.clone(), routes: self.routes.clone(), pods: self.pods.clone() }
    }
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
fn managed(cluster: &Cluster, kind: Kind, namespace: &str) -> Result<BTreeSet<String>, K8sError> {
    let items = cluster.list(kind, Some(namespace), Some(&format!("{MANAGED_BY}=tessera")), None)?;
    Ok(items.iter().filter_map(|item| item["metadata"]["name"].as_str().map(str::to_string)).collect())
}

/// Applies one object unless it is as planned.
fn apply_object(cluster: &Cluster, object: &Manifest, options: &ApplyOptions) -> Result<Action, K8sError> {
    let kind = Kind::named(object.kind()).expect("manifests are of known kinds");
    let desired = object.to_value();
    let live = cluster.get(kind, Some(&options.namespace), object.name())?;
    let change = match &live {
        None => Change::Created,
        Some(live) if contains(live, &desired) => Change::Unchanged,
        Some(_) => Change::Updated,
    };
    if change != Change::Unchanged && !options.dry_run {
        cluster.apply(kind, &options.namespace, object.name(), &desired, options.force_conflicts)?;
    }
    Ok(Action { kind: object.kind().into(), name: object.name().into(), change })
}

/// Deletes the managed objects of `kind` not in `keep`.
fn prune(
    cluster: &Cluster,
    kind: Kind,
    keep: &BTreeSet<&str>,
    options: &ApplyOptions,
    on_action: &mut dyn FnMut(&Action),
) -> Result<Vec<Action>, K8sError> {
    let kind_name = match kind {
        Kind::Deployment => "Deployment",
        _ => "ResourceClaim",
    };
    let mut actions = Vec::new();
    for name in managed(cluster, kind, &options.namespace)? {
        if keep.contains(name.as_str()) {
            continue;
        }
        if !options.dry_run {
            cluster.delete(kind, &options.namespace, &name)?;
        }
        let action = Action { kind: kind_name.into(), name, change: Change::Deleted };
        on_action(&action);
        actions.push(action);
    }
    Ok(actions)
}

/// The node objects of the plan's nodes, by node number.
fn plan_nodes(cluster: &Cluster, nodes: &BTreeMap<u32, NodeRef>) -> Result<BTreeMap<u32, Value>, K8sError> {
    let all = cluster.list(Kind::Node, None, None, None)?;
    let mut found = BTreeMap::new();
    for (number, node) in nodes {
        let object = all.iter().find(|object| match node {
            NodeRef::Named(name) => object["metadata"]["name"].as_str() == Some(name),
            NodeRef::Numbered(n) => object["metadata"]["labels"][NODE_NUMBER_LABEL].as_str() == Some(&n.to_string()),
        });
        if let Some(object) = object {
            found.insert(*number, object.clone());
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

/// The devices each node's agent reported for plan `id`.
fn reported_devices(nodes: &BTreeMap<u32, Value>, id: &str) -> BTreeMap<u32, Vec<NodeDevice>> {
    nodes
        .iter()
        .filter(|(_, node)| node_state(node).1 == Some(id))
        .filter_map(|(number, node)| {
            let text = node["metadata"]["annotations"][DEVICES_ANNOTATION].as_str()?;
            Some((*number, serde_json::from_str(text).ok()?))
        })
        .collect()
}

/// Waits until every node of the plan reports `success` for it; a node
/// reporting `failed` ends the wait with its reason.
fn wait_for_layouts(
    cluster: &Cluster,
    manifests: &Manifests,
    options: &ApplyOptions,
) -> Result<BTreeMap<u32, Value>, K8sError> {
    let deadline = Instant::now() + options.layout_timeout;
    loop {
        let nodes = plan_nodes(cluster, &manifests.nodes)?;
        let mut waiting = Vec::new();
        for (number, node) in &manifests.nodes {
            match nodes.get(number).map(node_state) {
                Some((Some("success"), Some(id), _)) if id == manifests.plan_id => {}
                Some((Some("failed"), Some(id), reason)) if id == manifests.plan_id => {
                    return Err(K8sError::Plan(format!(
                        "{node} failed to apply its MIG layout: {}",
                        reason.unwrap_or("no reason given")
                    )));
                }
                Some((state, _, reason)) => waiting.push(format!(
                    "{node} ({}{})",
                    state.unwrap_or("no state"),
                    reason.map(|r| format!(": {r}")).unwrap_or_default()
                )),
                None => waiting.push(format!("{node} (not in the cluster)")),
            }
        }
        if waiting.is_empty() {
            return Ok(nodes);
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

/// Applies `plan` to the cluster: checks it against the cluster's nodes,
/// deletes Deployments of earlier plans it no longer has, publishes it to
/// the agents, waits for every node's layout, applies the claims (pinned to
/// the MIG devices the agents report) and the Deployments, and deletes
/// claims no longer used. Objects as planned are not written, so a second
/// apply changes nothing. Each action is reported as it happens.
pub fn apply_plan(
    cluster: &Cluster,
    plan: &Plan,
    options: &ApplyOptions,
    on_action: &mut dyn FnMut(&Action),
) -> Result<Vec<Action>, K8sError> {
    let first = manifests_with(plan, &options.export(), &BTreeMap::new())?;
    cluster.inventory()?.nodes.check(plan)?;
    let mut actions = Vec::new();
    let deployments: BTreeSet<&str> = first.of_kind("Deployment").map(Manifest::name).collect();
    actions.extend(prune(cluster, Kind::Deployment, &deployments, options, on_action)?);
    let config_map = first.of_kind("ConfigMap").next().expect("every plan has its ConfigMap");
    let action = apply_object(cluster, config_map, options)?;
    on_action(&action);
    actions.push(action);
    let nodes =
        if options.dry_run { plan_nodes(cluster, &first.nodes)? } else { wait_for_layouts(cluster, &first, options)? };
    let last = manifests_with(plan, &options.export(), &reported_devices(&nodes, &first.plan_id))?;
    for object in last.objects.iter().filter(|object| object.kind() != "ConfigMap") {
        let action = apply_object(cluster, object, options)?;
        on_action(&action);
        actions.push(action);
    }
    let claims: BTreeSet<&str> = last.of_kind("ResourceClaim").map(Manifest::name).collect();
    actions.extend(prune(cluster, Kind::ResourceClaim, &claims, options, on_action)?);
    Ok(actions)
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
/// pods ready and restarts.
pub fn cluster_status(cluster: &Cluster, plan: &Plan, namespace: &str) -> Result<ClusterStatus, K8sError> {
    let planned = manifests(plan, namespace, &BTreeMap::new())?;
    let objects = plan_nodes(cluster, &planned.nodes)?;
    let nodes = planned
        .nodes
        .iter()
        .map(|(number, node)| {
            let (state, id, reason) = objects.get(number).map(node_state).unwrap_or_default();
            NodeStatus {
                node: node.to_string(),
                state: state.map(str::to_string),
                current: id == Some(planned.plan_id.as_str()),
                reason: reason.map(str::to_string),
            }
        })
        .collect();
    let mut segments = Vec::new();
    for object in planned.of_kind("Deployment") {
        let Manifest::Deployment(deployment) = object else { continue };
        let planned_procs = deployment.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
        let service = deployment.metadata.labels.as_ref().and_then(|l| l.get(crate::manifests::SERVICE_LABEL)).cloned();
        let live = cluster.get(Kind::Deployment, Some(namespace), object.name())?;
        let pods =
            cluster.list(Kind::Pod, Some(namespace), Some(&format!("{SEGMENT_LABEL}={}", object.name())), None)?;
        let restarts = pods
            .iter()
            .flat_map(|pod| pod["status"]["containerStatuses"].as_array().cloned().unwrap_or_default())
            .filter_map(|status| status["restartCount"].as_u64())
            .sum();
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
