//! What the test modules share: the demo plan, GPU Feature Discovery's
//! node objects, a fake cluster, the fake DRA driver's ResourceSlices and
//! the schema validator.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use tessera_core::{GpuModel, Plan};
use tessera_gpu::FakeNvidiaSmi;
use tessera_k8s::{Cluster, ClusterOptions, FakeApiServer, Manifests};
use tessera_plan::{plan, PlanInputs, PlanRequest, Strategy};

/// The demo services planned on A100-80GB (ParvaGPU's strategy: quick),
/// with the demo's images.
pub fn demo_plan() -> Plan {
    let inputs = PlanInputs::demo(&[GpuModel::A100_80GB]).unwrap();
    plan(&PlanRequest { strategy: Strategy::Parva, ..PlanRequest::new(&inputs) }).unwrap().plan
}

/// A node as GPU Feature Discovery labels it.
pub fn gfd_node(name: &str, product: &str, count: u32, memory_mib: u64, mig_capable: bool) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
        "kubernetes.io/hostname": name,
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": product,
        "nvidia.com/gpu.count": count.to_string(),
        "nvidia.com/gpu.memory": memory_mib.to_string(),
        "nvidia.com/gpu.family": "ampere",
        "nvidia.com/mig.capable": mig_capable.to_string(),
        "nvidia.com/mig.strategy": "mixed",
        "nvidia.com/cuda.driver-version.full": "580.95.05",
    }}, "status": {"capacity": {"cpu": "64"}}})
}

/// An A100-80GB node (SXM4) with `count` GPUs.
pub fn a100_node(name: &str, count: u32) -> Value {
    gfd_node(name, "NVIDIA-A100-SXM4-80GB", count, 81920, true)
}

/// Where the DRA driver's plugin pods are in tests.
pub const DRA_NAMESPACE: &str = "dra-driver-nvidia-gpu";
/// Their label.
pub const DRA_LABEL: (&str, &str) = ("dra-driver-nvidia-gpu-component", "kubelet-plugin");

/// A fake API server holding `nodes` (with the DRA plugin on each), and a
/// client of it.
pub fn fake_cluster(nodes: &[Value], dir: &Path) -> (FakeApiServer, Cluster) {
    let server = FakeApiServer::start();
    for node in nodes {
        server.put(node.clone());
    }
    let names: Vec<&str> = nodes.iter().filter_map(|n| n["metadata"]["name"].as_str()).collect();
    server.run_dra_plugin(DRA_NAMESPACE, DRA_LABEL.0, DRA_LABEL.1, &names);
    let cluster = connect(&server, dir);
    (server, cluster)
}

/// A client of `server`.
pub fn connect(server: &FakeApiServer, dir: &Path) -> Cluster {
    Cluster::connect(&ClusterOptions { kubeconfig: Some(server.kubeconfig(dir)), context: None }).unwrap()
}

/// The fake nvidia-smi with the plan's GPUs of node `number`.
pub fn driver_for(plan: &Plan, number: u32) -> FakeNvidiaSmi {
    plan.gpus
        .iter()
        .filter(|g| g.node == number)
        .fold(FakeNvidiaSmi::new(), |fake, g| fake.with_gpu(g.index, g.gpu_model))
}

pub use tessera_testkit::kubernetes_validate as validate;

/// Writes the export's files into `dir`; their paths. kubernetes-validate
/// checks every core object in them and passes over the Gateway API's
/// HTTPRoutes (of `cluster.yaml`), which it has no schema for, with a
/// warning: those are checked by their typed round trip.
pub fn export_files(exported: &Manifests, dir: &Path) -> Vec<PathBuf> {
    exported
        .files()
        .map(|(name, yaml)| {
            let path = dir.join(name);
            std::fs::write(&path, yaml).unwrap();
            path
        })
        .collect()
}
