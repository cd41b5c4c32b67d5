//! The plan for the node agents, split per node: one ConfigMap per plan
//! node holding only its part of the plan (its GPUs' layouts, the reports
//! and images of the services with a segment there), so that every object
//! stays far under Kubernetes' 1 MiB limit however large the fleet, and
//! each agent reads only its own.
//!
//! A node's part is a plan of its own (Tessera's versioned JSON) with the
//! node's GPUs under their plan node number; its id (the `tessera.io/plan-id`
//! the agent reports on its node) is a hash of that JSON, so an agent's
//! report says exactly which layout it applied. The ConfigMap's
//! `tessera.io/plan-id` label names the whole plan it came from.
//!
//! The plan the cluster runs is the union of the recorded parts
//! ([`recorded_parts`], [`merge_parts`]): `k8s status` and the
//! make-before-break `k8s apply` read it from there, not from local files.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;
use tessera_core::{GpuAssignment, Plan, ServiceReport};
use tessera_plan::NodeRef;

use crate::cluster::{Cluster, Kind};
use crate::error::K8sError;
use crate::labels::{MANAGED_BY, NODE_NUMBER_LABEL, PLAN_ID, PLAN_KEY};
use crate::names::plan_id;

/// The prefix of every node's ConfigMap: `tessera-node-NAME` on a plan
/// with node names, `tessera-node-nN` on one without.
pub const NODE_CONFIG_MAP_PREFIX: &str = "tessera-node-";
/// The key of a node's ConfigMap holding its plan node number.
pub const NODE_KEY: &str = "node";
/// The key of a node's ConfigMap holding its cluster name (plans made with
/// node names only).
pub const NODE_NAME_KEY: &str = "node-name";
/// `app.kubernetes.io/component` of the nodes' ConfigMaps.
pub const NODE_PLAN_COMPONENT: &str = "node-plan";
/// Kubernetes' limit on one object (etcd's request limit), bytes.
pub const MAX_OBJECT_BYTES: usize = 1024 * 1024;

const COMPONENT: &str = "app.kubernetes.io/component";

/// The ConfigMap name of plan node `node`.
pub fn node_config_map_name(node: &NodeRef) -> String {
    match node {
        NodeRef::Named(name) => format!("{NODE_CONFIG_MAP_PREFIX}{name}"),
        NodeRef::Numbered(number) => format!("{NODE_CONFIG_MAP_PREFIX}n{number}"),
    }
}

/// Node `node`'s part of `plan`: its GPUs (by index), and the reports (by
/// name) and images of the services with a segment on them; the plan's
/// strategy, rule, node size and traffic; nothing of the rest of the fleet.
/// The same node of the same plan always gives the same part.
pub fn node_part(plan: &Plan, node: u32) -> Plan {
    node_parts(plan).remove(&node).unwrap_or_else(|| part_of(plan, Vec::new(), &HashMap::new()))
}

/// Every node's part of `plan` (see [`node_part`]), made in one pass.
pub fn node_parts(plan: &Plan) -> BTreeMap<u32, Plan> {
    let reports: HashMap<&str, &ServiceReport> = plan.services.iter().map(|s| (s.service.as_str(), s)).collect();
    let mut gpus: BTreeMap<u32, Vec<GpuAssignment>> = BTreeMap::new();
    for gpu in &plan.gpus {
        gpus.entry(gpu.node).or_default().push(gpu.clone());
    }
    gpus.into_iter().map(|(node, gpus)| (node, part_of(plan, gpus, &reports))).collect()
}

/// The part of `plan` with `gpus`.
fn part_of(plan: &Plan, mut gpus: Vec<GpuAssignment>, reports: &HashMap<&str, &ServiceReport>) -> Plan {
    gpus.sort_by_key(|gpu| gpu.index);
    let dedicated = gpus.iter().flat_map(|gpu| &gpu.instances).map(|i| i.service.as_str());
    let members = gpus.iter().flat_map(|gpu| &gpu.shared).flat_map(|s| &s.members).map(|m| m.service.as_str());
    let services: BTreeSet<&str> = dedicated.chain(members).collect();
    Plan {
        gpu_count: gpus.len(),
        total_cost: 0.0,
        strategy: plan.strategy.clone(),
        latency_rule: plan.latency_rule.clone(),
        gpus_per_node: plan.gpus_per_node,
        fleet: Vec::new(),
        services: services.iter().filter_map(|s| reports.get(s).map(|r| (*r).clone())).collect(),
        optimality: None,
        notes: Vec::new(),
        node_names: Vec::new(),
        images: services.iter().filter_map(|s| plan.images.get(*s).map(|i| ((*s).to_string(), i.clone()))).collect(),
        traffic: plan.traffic.clone(),
        margin: plan.margin,
        gpus,
    }
}

/// The id an agent reports once node `node`'s layout of `plan` is in place:
/// a hash of its part.
pub fn node_plan_id(plan: &Plan, node: u32) -> String {
    plan_id(&node_part(plan, node))
}

/// Node `number`'s ConfigMap holding `part` (of whole plan `whole_id`).
/// A part over [`MAX_OBJECT_BYTES`] is refused, naming the node.
pub fn node_config_map(
    part: &Plan,
    number: u32,
    node: &NodeRef,
    namespace: &str,
    whole_id: &str,
) -> Result<ConfigMap, K8sError> {
    let json = String::from_utf8(tessera_store::plan_json(part)).expect("plan JSON is UTF-8");
    let size = json.len();
    if size > MAX_OBJECT_BYTES {
        return Err(K8sError::Plan(format!(
            "{node}'s part of the plan is {size} bytes, over Kubernetes' limit of {MAX_OBJECT_BYTES} bytes for one object (fewer, larger segments per node would fit)"
        )));
    }
    let mut data = BTreeMap::from([(PLAN_KEY.to_string(), json), (NODE_KEY.to_string(), number.to_string())]);
    if let NodeRef::Named(name) = node {
        data.insert(NODE_NAME_KEY.to_string(), name.clone());
    }
    let labels = BTreeMap::from([
        (MANAGED_BY.to_string(), "tessera".to_string()),
        (PLAN_ID.to_string(), whole_id.to_string()),
        (COMPONENT.to_string(), NODE_PLAN_COMPONENT.to_string()),
        (NODE_NUMBER_LABEL.to_string(), number.to_string()),
    ]);
    Ok(ConfigMap {
        metadata: ObjectMeta {
            name: Some(node_config_map_name(node)),
            namespace: Some(namespace.into()),
            labels: Some(labels),
            ..Default::default()
        },
        data: Some(data),
        ..Default::default()
    })
}

/// One node's part as the cluster records it.
#[derive(Debug, Clone, PartialEq)]
pub struct NodePart {
    /// The plan node number.
    pub number: u32,
    /// The node.
    pub node: NodeRef,
    /// Its part of the plan.
    pub plan: Plan,
    /// Its id (what its agent reports once the layout is in place).
    pub id: String,
    /// The whole plan it came from (the ConfigMap's label).
    pub whole_id: String,
}

/// A node's part from its ConfigMap (as the API server sends it).
pub fn read_node_part(config_map: &Value) -> Result<NodePart, K8sError> {
    let name = config_map["metadata"]["name"].as_str().unwrap_or("?");
    let data = &config_map["data"];
    let bad = |what: &str| K8sError::Plan(format!("ConfigMap {name}: {what}"));
    let number = data[NODE_KEY].as_str().and_then(|n| n.parse().ok()).ok_or_else(|| bad("no node number"))?;
    let json = data[PLAN_KEY].as_str().ok_or_else(|| bad(&format!("no {PLAN_KEY}")))?;
    let plan = tessera_store::parse_plan(&format!("ConfigMap {name}"), json.as_bytes())?;
    let node = match data[NODE_NAME_KEY].as_str() {
        Some(host) => NodeRef::Named(host.to_string()),
        None => NodeRef::Numbered(number),
    };
    Ok(NodePart {
        number,
        node,
        id: plan_id(&plan),
        plan,
        whole_id: config_map["metadata"]["labels"][PLAN_ID].as_str().unwrap_or_default().to_string(),
    })
}

/// The label selector of the nodes' ConfigMaps.
pub fn node_plan_selector() -> String {
    format!("{MANAGED_BY}=tessera,{COMPONENT}={NODE_PLAN_COMPONENT}")
}

/// Every node's part the cluster records in `namespace`, by node number.
pub fn recorded_parts(cluster: &Cluster, namespace: &str) -> Result<BTreeMap<u32, NodePart>, K8sError> {
    let items = cluster.list(Kind::ConfigMap, Some(namespace), Some(&node_plan_selector()), None)?;
    items.iter().map(|item| read_node_part(item).map(|part| (part.number, part))).collect()
}

/// The plan the parts make together: every node's GPUs, each service once
/// (its report from the first node that has it), the images, the node
/// names; strategy and rule of the first part. `None` without parts.
pub fn merge_parts(parts: &BTreeMap<u32, NodePart>) -> Option<Plan> {
    let first = parts.values().next()?;
    let mut plan = Plan { node_names: Vec::new(), ..first.plan.clone() };
    plan.gpus.clear();
    plan.services.clear();
    plan.images.clear();
    let mut seen = BTreeSet::new();
    for part in parts.values() {
        plan.gpus.extend(part.plan.gpus.iter().cloned());
        for report in &part.plan.services {
            if seen.insert(report.service.clone()) {
                plan.services.push(report.clone());
            }
        }
        plan.images.extend(part.plan.images.iter().map(|(s, i)| (s.clone(), i.clone())));
    }
    if let Some(last) = parts.keys().last() {
        if parts.values().all(|part| matches!(part.node, NodeRef::Named(_))) {
            let mut names = vec![String::new(); *last as usize + 1];
            for part in parts.values() {
                if let NodeRef::Named(name) = &part.node {
                    names[part.number as usize] = name.clone();
                }
            }
            plan.node_names = names;
        }
    }
    plan.gpus.sort_by_key(|gpu| (gpu.node, gpu.index));
    plan.services.sort_by(|a, b| a.service.cmp(&b.service));
    plan.gpu_count = plan.gpus.len();
    Some(plan)
}
