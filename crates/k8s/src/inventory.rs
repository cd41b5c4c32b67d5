//! The cluster as a deploy target: its GPU nodes read from their Node
//! objects (GPU Feature Discovery's labels) into a `tessera_plan::Inventory`
//! (placing a plan on them and checking one against them are pure, in
//! `tessera_plan::placement`), and the DRA driver's MIG devices from its
//! ResourceSlices.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::ResourceSlice;
use tessera_core::text::count;
use tessera_plan::{Inventory, TargetNode};

use crate::labels::NODE_NUMBER_LABEL;
use crate::mig_config::DRA_DRIVER;

/// GPU Feature Discovery's label of a node's GPU product.
pub const PRODUCT_LABEL: &str = "nvidia.com/gpu.product";
/// … of its GPU count.
pub const COUNT_LABEL: &str = "nvidia.com/gpu.count";
/// … of one GPU's memory, MiB.
pub const MEMORY_LABEL: &str = "nvidia.com/gpu.memory";
/// … of whether its GPUs can run MIG.
pub const MIG_CAPABLE_LABEL: &str = "nvidia.com/mig.capable";

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

/// GPU Feature Discovery's product without its MIG suffix (the `single`
/// MIG strategy appends `-MIG-<profile>`).
fn base_product(product: &str) -> &str {
    product.find("-MIG-").map_or(product, |at| &product[..at])
}

/// The cluster as a deploy target: its GPU nodes and the DRA driver's MIG
/// devices on them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterInventory {
    /// The GPU nodes (those with a product label of a known GPU model) and
    /// the ones left out, with the reason.
    pub nodes: Inventory,
    /// The MIG devices the DRA driver publishes, by node name.
    pub mig_devices: BTreeMap<String, Vec<SliceDevice>>,
}

/// The GPU nodes among `nodes` (those with a product label), and the MIG
/// devices `slices` list for them.
pub fn inventory(nodes: &[Node], slices: &[ResourceSlice]) -> ClusterInventory {
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
            Ok(gpu_model) => inventory.nodes.push(TargetNode {
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
    ClusterInventory { nodes: inventory, mig_devices: mig_devices(slices) }
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
