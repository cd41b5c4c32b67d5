//! The cluster's GPU fleet, from its Node objects (GPU Feature Discovery's
//! labels) and the DRA driver's ResourceSlices; placing a plan on it; and
//! checking a plan against it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::ResourceSlice;
use tessera_core::text::count;
use tessera_core::{GpuModel, Plan};

use crate::error::K8sError;
use crate::manifests::{NodeRef, NODE_NUMBER_LABEL};
use crate::mig_config::DRA_DRIVER;

/// GPU Feature Discovery's label of a node's GPU product.
pub const PRODUCT_LABEL: &str = "nvidia.com/gpu.product";
/// … of its GPU count.
pub const COUNT_LABEL: &str = "nvidia.com/gpu.count";
/// … of one GPU's memory, MiB.
pub const MEMORY_LABEL: &str = "nvidia.com/gpu.memory";
/// … of whether its GPUs can run MIG.
pub const MIG_CAPABLE_LABEL: &str = "nvidia.com/mig.capable";

/// A node with GPUs of a model Tessera knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterNode {
    /// The node's name.
    pub name: String,
    /// GPU Feature Discovery's product, e.g. `NVIDIA-A100-SXM4-80GB`.
    pub product: String,
    /// The GPU model it is.
    pub gpu_model: GpuModel,
    /// Its GPUs.
    pub gpu_count: u32,
    /// `true` when GPU Feature Discovery says the GPUs can run MIG.
    pub mig_capable: bool,
    /// The node's plan node number label, if any.
    pub node_number: Option<u32>,
}

/// A MIG device the DRA driver publishes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SliceDevice {
    /// Its device name in the slice.
    pub name: String,
    /// Its MIG profile.
    pub profile: String,
    /// Its UUID.
    pub uuid: String,
    /// Its GPU's UUID.
    pub parent_uuid: String,
}

/// The cluster's GPU nodes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inventory {
    /// Nodes with GPUs of a known model, by name.
    pub nodes: Vec<ClusterNode>,
    /// Why other GPU nodes were left out, one line each.
    pub left_out: Vec<String>,
    /// The MIG devices of each node's ResourceSlices, by node name.
    pub mig_devices: BTreeMap<String, Vec<SliceDevice>>,
}

impl Inventory {
    /// The node named `name`.
    pub fn node(&self, name: &str) -> Option<&ClusterNode> {
        self.nodes.iter().find(|node| node.name == name)
    }

    /// The node `node` of a plan refers to.
    pub fn find(&self, node: &NodeRef) -> Option<&ClusterNode> {
        match node {
            NodeRef::Named(name) => self.node(name),
            NodeRef::Numbered(number) => self.nodes.iter().find(|n| n.node_number == Some(*number)),
        }
    }

    /// MIG-capable GPUs per model, for planning.
    pub fn fleet(&self) -> BTreeMap<GpuModel, u64> {
        let mut fleet = BTreeMap::new();
        for node in self.nodes.iter().filter(|node| node.mig_capable) {
            *fleet.entry(node.gpu_model).or_insert(0) += u64::from(node.gpu_count);
        }
        fleet
    }
}

/// GPU Feature Discovery's product without its MIG suffix (the `single`
/// MIG strategy appends `-MIG-<profile>`).
fn base_product(product: &str) -> &str {
    product.find("-MIG-").map_or(product, |at| &product[..at])
}

/// The GPU nodes among `nodes` (those with a product label), and the MIG
/// devices `slices` list for them.
pub fn inventory(nodes: &[Node], slices: &[ResourceSlice]) -> Inventory {
    let mut inventory = Inventory::default();
    for node in nodes {
        let name = node.metadata.name.clone().unwrap_or_default();
        let labels = node.metadata.labels.clone().unwrap_or_default();
        let Some(product) = labels.get(PRODUCT_LABEL) else { continue };
        let memory_mib = labels.get(MEMORY_LABEL).and_then(|m| m.parse::<u64>().ok());
        let gpu_count = labels.get(COUNT_LABEL).and_then(|c| c.parse::<u32>().ok());
        let (Some(memory_mib), Some(gpu_count)) = (memory_mib, gpu_count) else {
            inventory.left_out.push(format!(
                "node '{name}' ({product}) is left out: it lacks a numeric {MEMORY_LABEL} or {COUNT_LABEL} label"
            ));
            continue;
        };
        match tessera_gpu::gpu_model_from_name(base_product(product), memory_mib) {
            Ok(gpu_model) => inventory.nodes.push(ClusterNode {
                name,
                product: product.clone(),
                gpu_model,
                gpu_count,
                mig_capable: labels.get(MIG_CAPABLE_LABEL).is_some_and(|v| v == "true"),
                node_number: labels.get(NODE_NUMBER_LABEL).and_then(|n| n.parse().ok()),
            }),
            Err(why) => inventory.left_out.push(format!("node '{name}' is left out: {why}")),
        }
    }
    for node in inventory.nodes.iter().filter(|node| !node.mig_capable) {
        inventory.left_out.push(format!(
            "node '{}' is left out: its {} are not MIG-capable ({MIG_CAPABLE_LABEL} is not 'true')",
            node.name,
            count(node.gpu_count as usize, node.gpu_model.id())
        ));
    }
    inventory.nodes.sort_by(|a, b| a.name.cmp(&b.name));
    inventory.mig_devices = mig_devices(slices);
    inventory
}

/// The MIG devices of the DRA driver's ResourceSlices, by node.
pub fn mig_devices(slices: &[ResourceSlice]) -> BTreeMap<String, Vec<SliceDevice>> {
    let mut devices: BTreeMap<String, Vec<SliceDevice>> = BTreeMap::new();
    for slice in slices.iter().filter(|slice| slice.spec.driver == DRA_DRIVER) {
        let Some(node) = &slice.spec.node_name else { continue };
        for device in slice.spec.devices.iter().flatten() {
            let attributes = device.attributes.clone().unwrap_or_default();
            let text = |key: &str| attributes.get(key).and_then(|a| a.string.clone());
            if text("type").as_deref() != Some("mig") {
                continue;
            }
            let (Some(profile), Some(uuid), Some(parent_uuid)) = (text("profile"), text("uuid"), text("parentUUID"))
            else {
                continue;
            };
            devices.entry(node.clone()).or_default().push(SliceDevice {
                name: device.name.clone(),
                profile,
                uuid,
                parent_uuid,
            });
        }
    }
    for list in devices.values_mut() {
        list.sort();
    }
    devices
}

/// Places `plan` (made for the cluster's fleet: per model at most as many
/// GPUs as its MIG-capable nodes have) on the cluster's nodes: each model's
/// GPUs fill its nodes in name order, index by index; the plan's nodes are
/// renumbered in that order and named.
pub fn place_on_cluster(plan: &Plan, inventory: &Inventory) -> Result<Plan, K8sError> {
    let mut placed = plan.clone();
    let mut slots: BTreeMap<GpuModel, Vec<(&str, u32)>> = BTreeMap::new();
    for node in inventory.nodes.iter().filter(|node| node.mig_capable) {
        let list = slots.entry(node.gpu_model).or_default();
        list.extend((0..node.gpu_count).map(|index| (node.name.as_str(), index)));
    }
    let mut next: BTreeMap<GpuModel, usize> = BTreeMap::new();
    let mut names: Vec<String> = Vec::new();
    for gpu in &mut placed.gpus {
        let taken = next.entry(gpu.gpu_model).or_insert(0);
        let (name, index) = *slots.get(&gpu.gpu_model).and_then(|list| list.get(*taken)).ok_or_else(|| {
            K8sError::Plan(format!(
                "the plan needs more {} GPUs than the cluster's MIG-capable nodes have ({})",
                gpu.gpu_model,
                slots.get(&gpu.gpu_model).map_or(0, Vec::len)
            ))
        })?;
        *taken += 1;
        let number = match names.iter().position(|known| known == name) {
            Some(number) => number,
            None => {
                names.push(name.to_string());
                names.len() - 1
            }
        };
        gpu.node = u32::try_from(number).expect("fewer nodes than u32::MAX");
        gpu.index = index;
    }
    placed.gpus_per_node = inventory.nodes.iter().map(|node| node.gpu_count).max().unwrap_or(1).max(1);
    placed.node_names = names;
    Ok(placed)
}

/// Checks that every node of `plan` is in the cluster with MIG-capable
/// GPUs of the planned model and enough of them; every problem is named.
pub fn check_plan(plan: &Plan, inventory: &Inventory) -> Result<(), K8sError> {
    let mut problems = Vec::new();
    let mut seen = Vec::new();
    for gpu in &plan.gpus {
        let node = NodeRef::of(plan, gpu.node)?;
        let Some(found) = inventory.find(&node) else {
            if !seen.contains(&node) {
                problems.push(format!("{node} of the plan is not a GPU node of the cluster"));
                seen.push(node);
            }
            continue;
        };
        if found.gpu_model != gpu.gpu_model {
            problems.push(format!(
                "{node} has {} GPUs ({}) but the plan puts {} there",
                found.gpu_model, found.product, gpu.gpu_model
            ));
        } else if !found.mig_capable {
            problems.push(format!("{node} has GPUs that are not MIG-capable ({MIG_CAPABLE_LABEL} is not 'true')"));
        } else if gpu.index >= found.gpu_count {
            problems.push(format!(
                "{node} has {} but the plan uses GPU {}",
                count(found.gpu_count as usize, "GPU"),
                gpu.index
            ));
        }
    }
    problems.dedup();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(K8sError::Plan(format!("the plan does not fit the cluster: {}", problems.join("; "))))
    }
}
