//! Placing a plan on the nodes of a deploy target: the pure half of every
//! cluster adapter.
//!
//! An adapter (Kubernetes today; Slurm, Nomad or a list of hosts would be
//! the same) reads its nodes into an [`Inventory`] — each node's name, GPU
//! model, GPU count and whether its GPUs take MIG — and leaves the rest
//! here: the fleet a plan may use ([`Inventory::offers`]), the node of each
//! of the plan's GPUs ([`Inventory::place`], recorded in
//! [`Plan::node_names`]), whether a plan fits ([`Inventory::check`]), and
//! which node a plan's node number means ([`NodeRef`], [`node_number`]).

use std::collections::BTreeMap;
use std::fmt;

use tessera_core::text::count;
use tessera_core::{GpuAssignment, GpuModel, GpuOffer, Plan};

use crate::error::PlanError;

/// One GPU node of a deploy target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetNode {
    /// The node's name in its cluster.
    pub name: String,
    /// The product name its GPUs report (for messages).
    pub product: String,
    /// Its GPU model.
    pub gpu_model: GpuModel,
    /// Its GPUs.
    pub gpu_count: u32,
    /// Whether its GPUs can be partitioned with MIG.
    pub mig_capable: bool,
    /// The plan node number the node was given by hand, if any (for plans
    /// that record no node names).
    pub node_number: Option<u32>,
}

/// A deploy target's GPU nodes, and the nodes left out with the reason.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inventory {
    /// Nodes with GPUs of a known model, sorted by name.
    pub nodes: Vec<TargetNode>,
    /// One line per node left out (unknown product, missing facts, no
    /// MIG).
    pub left_out: Vec<String>,
}

/// A node of a plan as a target names it: by the name the plan records
/// for its number, or (a plan recording none) by the number itself.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum NodeRef {
    /// The node with this name.
    Named(String),
    /// The node given this plan node number by hand.
    Numbered(u32),
}

impl NodeRef {
    /// Plan node `node` of `plan`: named when the plan records node names
    /// (a number beyond them is an error), numbered otherwise.
    pub fn of(plan: &Plan, node: u32) -> Result<NodeRef, PlanError> {
        if plan.node_names.is_empty() {
            return Ok(NodeRef::Numbered(node));
        }
        plan.node_names.get(node as usize).map(|name| NodeRef::Named(name.clone())).ok_or_else(|| {
            PlanError::Placement(format!(
                "the plan's GPUs on node {node} have no node name (the plan names {})",
                count(plan.node_names.len(), "node")
            ))
        })
    }
}

impl fmt::Display for NodeRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeRef::Named(name) => write!(f, "node '{name}'"),
            NodeRef::Numbered(number) => write!(f, "the node numbered {number}"),
        }
    }
}

/// The plan node number of the target node called `name`, whose hand-given
/// number (if any) is `given`: its position among the plan's node names
/// when the plan records them, else `given`.
pub fn node_number(plan: &Plan, name: &str, given: Option<u32>) -> Option<u32> {
    if plan.node_names.is_empty() {
        given
    } else {
        plan.node_names.iter().position(|known| known == name).and_then(|p| u32::try_from(p).ok())
    }
}

impl Inventory {
    /// The node called `name`.
    pub fn node(&self, name: &str) -> Option<&TargetNode> {
        self.nodes.iter().find(|node| node.name == name)
    }

    /// The node `node` refers to.
    pub fn find(&self, node: &NodeRef) -> Option<&TargetNode> {
        match node {
            NodeRef::Named(name) => self.node(name),
            NodeRef::Numbered(number) => self.nodes.iter().find(|n| n.node_number == Some(*number)),
        }
    }

    /// MIG-capable GPUs per model.
    pub fn fleet(&self) -> BTreeMap<GpuModel, u64> {
        let mut fleet = BTreeMap::new();
        for node in self.nodes.iter().filter(|node| node.mig_capable) {
            *fleet.entry(node.gpu_model).or_insert(0) += u64::from(node.gpu_count);
        }
        fleet
    }

    /// The fleet a plan for this target may use: every GPU model with
    /// MIG-capable GPUs, limited to their number, at the cost `priced`
    /// gives it (else 1). An error when there is none.
    pub fn offers(&self, priced: &[GpuOffer]) -> Result<Vec<GpuOffer>, PlanError> {
        let offers: Vec<GpuOffer> = self
            .fleet()
            .into_iter()
            .map(|(model, gpus)| {
                let cost = priced.iter().find(|offer| offer.model == model).map_or(1.0, |offer| offer.cost);
                GpuOffer { model, cost, limit: Some(gpus) }
            })
            .collect();
        if offers.is_empty() {
            return Err(PlanError::EmptyTarget);
        }
        Ok(offers)
    }

    /// `plan` (made for [`Inventory::offers`]) with each GPU on a node and
    /// GPU index of its model, and the node names recorded. A GPU whose
    /// position the plan already names (its node number a name of
    /// [`Plan::node_names`], a node of this target with a GPU of its model
    /// at its index) stays there, with its node number: a replan numbered
    /// like the running plan keeps the GPUs it keeps where they run. The
    /// others fill the free GPUs, nodes in name order.
    pub fn place(&self, plan: &Plan) -> Result<Plan, PlanError> {
        let mut placed = plan.clone();
        let mut slots: BTreeMap<GpuModel, Vec<(&str, u32)>> = BTreeMap::new();
        for node in self.nodes.iter().filter(|node| node.mig_capable) {
            let list = slots.entry(node.gpu_model).or_default();
            list.extend((0..node.gpu_count).map(|index| (node.name.as_str(), index)));
        }
        let named = |gpu: &GpuAssignment| {
            let name = plan.node_names.get(gpu.node as usize)?;
            slots.get(&gpu.gpu_model)?.iter().copied().find(|&slot| slot == (name.as_str(), gpu.index))
        };
        let mut positions: Vec<Option<(&str, u32)>> = Vec::with_capacity(plan.gpus.len());
        for gpu in &plan.gpus {
            let kept = named(gpu).filter(|slot| !positions.contains(&Some(*slot)));
            positions.push(kept);
        }
        for (at, gpu) in plan.gpus.iter().enumerate() {
            if positions[at].is_some() {
                continue;
            }
            let list = slots.get(&gpu.gpu_model).map_or(&[][..], Vec::as_slice);
            let free = list.iter().copied().find(|slot| !positions.contains(&Some(*slot))).ok_or_else(|| {
                PlanError::Placement(format!(
                    "the plan needs more {} GPUs than the cluster's MIG-capable nodes have ({})",
                    gpu.gpu_model,
                    list.len()
                ))
            })?;
            positions[at] = Some(free);
        }
        let mut names: Vec<String> = plan.node_names.clone();
        for (gpu, position) in placed.gpus.iter_mut().zip(positions) {
            let (name, index) = position.expect("every GPU was given a position above");
            let number = match names.iter().position(|known| known == name) {
                Some(number) => number,
                None => {
                    names.push(name.to_string());
                    names.len() - 1
                }
            };
            gpu.node = u32::try_from(number)
                .map_err(|_| PlanError::Placement("more nodes than a plan can number".to_string()))?;
            gpu.index = index;
        }
        placed.gpus.sort_by_key(|gpu| (gpu.node, gpu.index));
        placed.gpus_per_node = self.nodes.iter().map(|node| node.gpu_count).max().unwrap_or(1).max(1);
        placed.node_names = names;
        Ok(placed)
    }

    /// Checks that every GPU of `plan` is on a node of this target, of the
    /// planned model, MIG-capable, with that GPU index; every problem is
    /// named.
    pub fn check(&self, plan: &Plan) -> Result<(), PlanError> {
        let mut problems = Vec::new();
        let mut seen = Vec::new();
        for gpu in &plan.gpus {
            let node = NodeRef::of(plan, gpu.node)?;
            let Some(found) = self.find(&node) else {
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
                problems.push(format!("{node} has GPUs that are not MIG-capable"));
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
            Err(PlanError::Placement(format!("the plan does not fit the cluster: {}", problems.join("; "))))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inputs::PlanInputs;
    use crate::planning::{plan, PlanRequest};

    fn node(name: &str, gpu_model: GpuModel, gpu_count: u32, mig_capable: bool) -> TargetNode {
        TargetNode { name: name.into(), product: "p".into(), gpu_model, gpu_count, mig_capable, node_number: None }
    }

    #[test]
    fn a_target_offers_its_mig_capable_gpus_priced_as_asked() {
        let target = Inventory {
            nodes: vec![
                node("a", GpuModel::A100_80GB, 4, true),
                node("b", GpuModel::H100_80GB, 8, true),
                node("c", GpuModel::A100_80GB, 2, false),
            ],
            left_out: Vec::new(),
        };
        let priced = [GpuOffer { model: GpuModel::H100_80GB, cost: 1.6, limit: None }];
        let offers = target.offers(&priced).unwrap();
        assert_eq!(offers.len(), 2);
        assert_eq!((offers[0].model, offers[0].cost, offers[0].limit), (GpuModel::A100_80GB, 1.0, Some(4)));
        assert_eq!((offers[1].model, offers[1].cost, offers[1].limit), (GpuModel::H100_80GB, 1.6, Some(8)));
        let empty = Inventory { nodes: vec![node("c", GpuModel::A100_80GB, 2, false)], left_out: Vec::new() };
        assert_eq!(empty.offers(&[]).unwrap_err(), PlanError::EmptyTarget);
    }

    #[test]
    fn planning_for_a_target_places_the_plan_on_its_nodes_and_names_them() {
        let target = Inventory {
            nodes: vec![node("gpu-a", GpuModel::A100_80GB, 4, true), node("gpu-b", GpuModel::A100_80GB, 4, true)],
            left_out: Vec::new(),
        };
        let inputs = PlanInputs::demo(&[GpuModel::A100_80GB]).unwrap();
        let placed = plan(&PlanRequest { target: Some(&target), ..PlanRequest::new(&inputs) }).unwrap().plan;
        assert!(placed.gpu_count > 4, "the demo needs both nodes: {} GPUs", placed.gpu_count);
        assert_eq!(placed.node_names, ["gpu-a", "gpu-b"]);
        assert!(placed.gpus.iter().all(|gpu| gpu.index < 4), "{:?}", placed.gpus);
        target.check(&placed).unwrap();
        assert_eq!(node_number(&placed, "gpu-b", Some(7)), Some(1));
        assert_eq!(NodeRef::of(&placed, 1).unwrap(), NodeRef::Named("gpu-b".into()));
        let error = NodeRef::of(&placed, 5).unwrap_err().to_string();
        assert!(error.contains("no node name (the plan names 2 nodes)"), "{error}");
        // A plan without names is placed by the numbers nodes were given.
        let mut unnamed = placed.clone();
        unnamed.node_names.clear();
        assert_eq!(node_number(&unnamed, "gpu-b", Some(7)), Some(7));
        assert_eq!(NodeRef::of(&unnamed, 3).unwrap().to_string(), "the node numbered 3");
        let too_small = Inventory { nodes: vec![node("gpu-a", GpuModel::A100_80GB, 1, true)], left_out: Vec::new() };
        let error = too_small.place(&placed).unwrap_err().to_string();
        assert!(error.starts_with("the plan needs more a100-80gb GPUs than the cluster's MIG-capable nodes have (1)"));
    }

    #[test]
    fn a_replan_onto_a_target_keeps_the_gpus_it_keeps_where_they_run() {
        use crate::planning::ReplanFrom;
        use crate::replan::GpuPosition;
        let target = Inventory {
            nodes: vec![node("gpu-a", GpuModel::A100_80GB, 4, true), node("gpu-b", GpuModel::A100_80GB, 4, true)],
            left_out: Vec::new(),
        };
        let inputs = PlanInputs::demo(&[GpuModel::A100_80GB]).unwrap();
        let running = plan(&PlanRequest { target: Some(&target), ..PlanRequest::new(&inputs) }).unwrap().plan;
        // Draining the first GPU: a placement that filled the slots in
        // order would shift every other GPU down by one.
        let first = &running.gpus[0];
        let drained = vec![GpuPosition { node: first.node, index: first.index }];
        let from =
            ReplanFrom { current: &running, max_extra_gpus: 1, drained, lost: Vec::new(), within_layouts: false };
        let replanned =
            plan(&PlanRequest { target: Some(&target), from: Some(from), ..PlanRequest::new(&inputs) }).unwrap().plan;
        target.check(&replanned).unwrap();
        let at = |plan: &Plan, gpu: &GpuAssignment| (plan.node_names[gpu.node as usize].clone(), gpu.index);
        let was: BTreeMap<(String, u32), &GpuAssignment> = running.gpus.iter().map(|g| (at(&running, g), g)).collect();
        assert!(replanned.gpus.iter().all(|g| at(&replanned, g) != at(&running, first)), "{replanned:#?}");
        let mut kept = 0;
        for gpu in &replanned.gpus {
            // A GPU with the very instances of a running one is that one
            // kept: it must be where that one runs.
            let same = running.gpus.iter().filter(|old| old.instances == gpu.instances).count();
            if same == 1 {
                let old = running.gpus.iter().find(|old| old.instances == gpu.instances).unwrap();
                assert_eq!(at(&replanned, gpu), at(&running, old), "a kept GPU moved");
                kept += 1;
            }
            if let Some(old) = was.get(&at(&replanned, gpu)) {
                assert_eq!(old.gpu_model, gpu.gpu_model);
            }
        }
        assert!(kept > 0, "the replan keeps some GPU as it is: {replanned:#?}");
        // Node numbers stay those of the running plan.
        assert_eq!(replanned.node_names[..running.node_names.len()], running.node_names[..]);
    }
}
