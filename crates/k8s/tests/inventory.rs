//! The cluster's fleet from GPU Feature Discovery's labels, a plan placed
//! on it, and plans that do not fit it.

use k8s_openapi::api::core::v1::Node;
use tessera_core::GpuModel;
use tessera_k8s::inventory;

use crate::common::{a100_node, demo_plan, fake_cluster, gfd_node};

fn nodes() -> Vec<serde_json::Value> {
    vec![
        a100_node("gpu-a100-0", 8),
        gfd_node("gpu-h100-0", "NVIDIA-H100-80GB-HBM3", 8, 81559, true),
        gfd_node("gpu-h200-0", "NVIDIA-H200", 8, 143771, true),
        // The `single` MIG strategy appends the profile to the product.
        gfd_node("gpu-a100-1", "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb", 4, 81920, true),
        gfd_node("gpu-l4-0", "NVIDIA-L4", 1, 23034, false),
        gfd_node("gpu-a100-pcie-nomig", "NVIDIA-A100-PCIE-40GB", 2, 40960, false),
        serde_json::json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "cpu-0", "labels": {"kubernetes.io/hostname": "cpu-0"}}}),
    ]
}

#[test]
fn gpu_feature_discovery_labels_give_the_fleet_and_unknown_gpus_are_named_and_left_out() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, cluster) = fake_cluster(&nodes(), dir.path());
    let found = cluster.inventory().unwrap().nodes;
    let models: Vec<(&str, GpuModel, u32, bool)> =
        found.nodes.iter().map(|n| (n.name.as_str(), n.gpu_model, n.gpu_count, n.mig_capable)).collect();
    assert_eq!(
        models,
        [
            ("gpu-a100-0", GpuModel::A100_80GB, 8, true),
            ("gpu-a100-1", GpuModel::A100_80GB, 4, true),
            ("gpu-a100-pcie-nomig", GpuModel::A100_40GB, 2, false),
            ("gpu-h100-0", GpuModel::H100_80GB, 8, true),
            ("gpu-h200-0", GpuModel::H200_141GB, 8, true),
        ]
    );
    assert_eq!(found.left_out.len(), 2, "{:#?}", found.left_out);
    assert!(
        found.left_out[0].starts_with("node 'gpu-l4-0' is left out: 'NVIDIA-L4' is no GPU Tessera knows"),
        "{}",
        found.left_out[0]
    );
    assert_eq!(
        found.left_out[1],
        "node 'gpu-a100-pcie-nomig' is left out: its 2 a100-40gbs are not MIG-capable (nvidia.com/mig.capable is not 'true')"
    );
    let fleet: Vec<(GpuModel, u64)> = found.fleet().into_iter().collect();
    assert_eq!(fleet, [(GpuModel::A100_80GB, 12), (GpuModel::H100_80GB, 8), (GpuModel::H200_141GB, 8)]);
}

#[test]
fn a_plan_is_placed_on_the_clusters_nodes_in_name_order_and_checked() {
    let typed: Vec<Node> = [a100_node("b-node", 2), a100_node("a-node", 2)]
        .into_iter()
        .map(|n| serde_json::from_value(n).unwrap())
        .collect();
    let found = inventory(&typed, &[]).nodes;
    let plan = demo_plan();
    assert!(plan.gpus.len() > 2 && plan.gpus.len() <= 4, "the demo uses {} GPUs", plan.gpus.len());
    let placed = found.place(&plan).unwrap();
    assert_eq!(placed.node_names, ["a-node", "b-node"]);
    let slots: Vec<(u32, u32)> = placed.gpus.iter().map(|g| (g.node, g.index)).collect();
    assert_eq!(&slots[..3], [(0, 0), (0, 1), (1, 0)]);
    assert_eq!(placed.gpus_per_node, 2);
    found.check(&placed).unwrap();
    // Too few GPUs of the model.
    let small = inventory(&typed[..1], &[]).nodes;
    let error = small.place(&plan).unwrap_err().to_string();
    assert_eq!(error, "the plan needs more a100-80gb GPUs than the cluster's MIG-capable nodes have (2)");
}

#[test]
fn plans_that_do_not_fit_the_cluster_are_refused_naming_each_problem() {
    let plan = {
        let typed: Vec<Node> =
            [a100_node("a-node", 4)].into_iter().map(|n| serde_json::from_value(n).unwrap()).collect();
        inventory(&typed, &[]).nodes.place(&demo_plan()).unwrap()
    };
    let cluster = |node: serde_json::Value| inventory(&[serde_json::from_value(node).unwrap()], &[]).nodes;
    let error = cluster(a100_node("other-node", 4)).check(&plan).unwrap_err().to_string();
    assert_eq!(error, "the plan does not fit the cluster: node 'a-node' of the plan is not a GPU node of the cluster");
    let error =
        cluster(gfd_node("a-node", "NVIDIA-H100-80GB-HBM3", 4, 81559, true)).check(&plan).unwrap_err().to_string();
    assert!(error.starts_with("the plan does not fit the cluster: node 'a-node' has h100-80gb GPUs (NVIDIA-H100-80GB-HBM3) but the plan puts a100-80gb there"), "{error}");
    let error =
        cluster(gfd_node("a-node", "NVIDIA-A100-SXM4-80GB", 4, 81920, false)).check(&plan).unwrap_err().to_string();
    assert!(error.contains("node 'a-node' has GPUs that are not MIG-capable"), "{error}");
    let error = cluster(a100_node("a-node", 1)).check(&plan).unwrap_err().to_string();
    assert!(error.contains("node 'a-node' has 1 GPU but the plan uses GPU 1"), "{error}");
}
