//! Make before break: a replan of the demo (rates changed, `plan --from`)
//! applied to a fake cluster that runs the old plan, with the agents
//! reconfiguring their GPUs from their nodes' ConfigMaps and a Deployment
//! controller that makes pods ready only once their node's layout is in
//! place. After every write the fake API server keeps, each service's
//! routed capacity (its ready segments' capacities) must stay at or above
//! its demand — unless the steps name it as one that must dip. An apply
//! interrupted mid-way resumes from the cluster's objects.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::Value;
use tessera_core::{GpuModel, Plan, ServiceSlo};
use tessera_gpu::FakeNvidiaSmi;
use tessera_k8s::{
    apply_plan, cluster_status, manifests, plan_transition, read_node_part, reconcile_node, Action, AgentOptions,
    Cluster, FakeApiServer, K8sError, Manifest, Outcome, PlanSource,
};
use tessera_plan::{plan, PlanInputs, PlanRequest, ReplanFrom};

use crate::agent::agent_options;
use crate::apply::options;
use crate::common::{a100_node, connect, fake_cluster, publish_slices};

const NODES: [&str; 3] = ["gpu-a", "gpu-b", "gpu-c"];

fn inventory() -> tessera_plan::Inventory {
    let typed: Vec<k8s_openapi::api::core::v1::Node> =
        NODES.iter().map(|n| serde_json::from_value(a100_node(n, 2)).unwrap()).collect();
    tessera_k8s::inventory(&typed, &[]).nodes
}

/// The demo placed on the three nodes, and a replan from it after the
/// first service's rate grows by half and the second's halves.
fn old_and_new() -> (Plan, Plan) {
    let inputs = PlanInputs::demo(&[GpuModel::A100_80GB]).unwrap();
    let target = inventory();
    let old = plan(&PlanRequest { target: Some(&target), ..PlanRequest::new(&inputs) }).unwrap().plan;
    let changed: Vec<ServiceSlo> = inputs
        .services()
        .iter()
        .enumerate()
        .map(|(n, s)| ServiceSlo { rate_rps: s.rate_rps * [1.5, 0.5].get(n).copied().unwrap_or(1.0), ..s.clone() })
        .collect();
    let new_inputs = inputs.for_services(changed);
    let from = ReplanFrom { current: &old, max_extra_gpus: 2, drained: Vec::new(), lost: Vec::new() };
    let new =
        plan(&PlanRequest { from: Some(from), target: Some(&target), ..PlanRequest::new(&new_inputs) }).unwrap().plan;
    (old, new)
}

/// Plays the three agents (each reading its node's ConfigMap) and the
/// Deployment controller until `applying` ends; its result.
fn run_cluster(
    server: &FakeApiServer,
    cluster: &Cluster,
    dir: &Path,
    drivers: &mut [FakeNvidiaSmi],
    applying: JoinHandle<Result<Vec<Action>, K8sError>>,
) -> Result<Vec<Action>, K8sError> {
    for _ in 0..3000 {
        for (number, node) in NODES.into_iter().enumerate() {
            let options = AgentOptions {
                plan: PlanSource::Cluster { namespace: "tessera".into() },
                ..agent_options(node, &dir.join("unused.json"))
            };
            let outcome = reconcile_node(cluster, &mut drivers[number], &options, &mut |_| {}).unwrap();
            if matches!(outcome, Outcome::Pending(_)) && server.plugin_restarts().contains(&node.to_string()) {
                let part =
                    read_node_part(&server.get("configmaps", "tessera", &format!("tessera-node-{node}")).unwrap())
                        .unwrap();
                publish_slices(server, node, &mut drivers[number], &part.plan, part.number);
            }
        }
        // A pod starts only on a node whose agent reports its current part.
        for deployment in server.list("deployments") {
            let name = deployment["metadata"]["name"].as_str().unwrap();
            let host =
                deployment["spec"]["template"]["spec"]["nodeSelector"]["kubernetes.io/hostname"].as_str().unwrap();
            let node = server.get("nodes", "", host).unwrap();
            let part = server
                .get("configmaps", "tessera", &format!("tessera-node-{host}"))
                .map(|c| read_node_part(&c).unwrap());
            let laid_out = node["metadata"]["labels"]["tessera.io/mig.state"] == "success"
                && part.is_some_and(|p| node["metadata"]["annotations"]["tessera.io/plan-id"] == p.id.as_str());
            let ready = deployment["status"]["readyReplicas"] == deployment["spec"]["replicas"];
            if laid_out && !ready {
                server.set_ready("tessera", name);
            }
        }
        if applying.is_finished() {
            return applying.join().unwrap();
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("the apply did not finish");
}

fn start_apply(server: &FakeApiServer, dir: &Path, plan: &Plan) -> JoinHandle<Result<Vec<Action>, K8sError>> {
    let (cluster, plan) = (connect(server, dir), plan.clone());
    std::thread::spawn(move || apply_plan(&cluster, &plan, &options(), &mut |_| {}))
}

/// Each segment's capacity by (Deployment, batch, processes), from both
/// plans.
fn capacities(plans: &[&Plan]) -> BTreeMap<(String, String, String), (String, f64)> {
    let mut out = BTreeMap::new();
    for plan in plans {
        let objects = manifests(plan, "tessera", &BTreeMap::new()).unwrap();
        let deployments = objects.of_kind("Deployment");
        // Made node by node, each node's GPUs by index.
        let mut gpus = plan.gpus.clone();
        gpus.sort_by_key(|g| (g.node, g.index));
        for (object, instance) in deployments.zip(gpus.iter().flat_map(|g| &g.instances)) {
            let Manifest::Deployment(d) = object else { unreachable!() };
            let service = d.metadata.labels.as_ref().unwrap()["tessera.io/service"].clone();
            out.insert(
                (object.name().to_string(), instance.batch.to_string(), instance.procs.to_string()),
                (service, instance.capacity()),
            );
        }
    }
    out
}

/// Each service's routed capacity: its ready Deployments' capacities.
fn routed(deployments: &[Value], known: &BTreeMap<(String, String, String), (String, f64)>) -> BTreeMap<String, f64> {
    let mut total = BTreeMap::new();
    for d in deployments {
        if d["status"]["readyReplicas"] != d["spec"]["replicas"] {
            continue;
        }
        let env = d["spec"]["template"]["spec"]["containers"][0]["env"].as_array().unwrap();
        let var = |name: &str| env.iter().find(|e| e["name"] == name).unwrap()["value"].as_str().unwrap().to_string();
        let key = (d["metadata"]["name"].as_str().unwrap().to_string(), var("TESSERA_BATCH"), var("TESSERA_PROCS"));
        let (service, capacity) = &known[&key];
        *total.entry(service.clone()).or_default() += capacity;
    }
    total
}

/// Checks every kept write: no service below min(its demand, where it
/// started) unless it is allowed to dip; returns the writes checked.
fn check_history(server: &FakeApiServer, old: &Plan, new: &Plan, allowed: &BTreeSet<String>) -> usize {
    let known = capacities(&[old, new]);
    let history = server.history();
    let start = routed(&history[0].1, &known);
    for (write, deployments) in &history {
        let now = routed(deployments, &known);
        for service in &new.services {
            let floor = service.rate_rps.min(start.get(&service.service).copied().unwrap_or(0.0));
            let have = now.get(&service.service).copied().unwrap_or(0.0);
            assert!(
                have + 1e-6 >= floor || allowed.contains(&service.service),
                "after {write}: {} routes {have:.1} req/s, below {floor:.1}",
                service.service
            );
        }
    }
    history.len()
}

struct Running {
    dir: tempfile::TempDir,
    server: FakeApiServer,
    cluster: Cluster,
    drivers: Vec<FakeNvidiaSmi>,
}

/// A fake cluster running `old` (applied and ready), keeping history from
/// then on.
fn running(old: &Plan) -> Running {
    let dir = tempfile::tempdir().unwrap();
    let nodes: Vec<Value> = NODES.iter().map(|n| a100_node(n, 2)).collect();
    let (server, cluster) = fake_cluster(&nodes, dir.path());
    let mut drivers: Vec<FakeNvidiaSmi> = (0..NODES.len())
        .map(|_| FakeNvidiaSmi::new().with_gpu(0, GpuModel::A100_80GB).with_gpu(1, GpuModel::A100_80GB))
        .collect();
    let applying = start_apply(&server, dir.path(), old);
    run_cluster(&server, &cluster, dir.path(), &mut drivers, applying).unwrap();
    server.keep_history();
    Running { dir, server, cluster, drivers }
}

#[test]
fn a_replan_of_the_demo_never_routes_a_service_below_its_demand() {
    let (old, new) = old_and_new();
    let steps = plan_transition(&old, &new);
    assert!(steps.iter().any(|s| !s.stops.is_empty()), "the replan moves segments: {steps:#?}");
    assert!(steps.iter().any(|s| !s.starts.is_empty()));
    let allowed: BTreeSet<String> = steps.iter().flat_map(|s| &s.dips).map(|d| d.service.clone()).collect();
    let mut cluster = running(&old);
    let applying = start_apply(&cluster.server, cluster.dir.path(), &new);
    run_cluster(&cluster.server, &cluster.cluster, cluster.dir.path(), &mut cluster.drivers, applying).unwrap();
    let writes = check_history(&cluster.server, &old, &new, &allowed);
    assert!(writes > steps.len(), "{writes} writes for {} steps", steps.len());
    // Deleted Deployments came after the new ones of the first step.
    let history = cluster.server.history();
    let first_delete = history.iter().position(|(w, _)| w.starts_with("DELETE")).unwrap();
    let first_create = history.iter().position(|(w, _)| w.starts_with("PATCH") && w.contains("/deployments/"));
    if steps[0].stops.is_empty() {
        assert!(first_create.unwrap() < first_delete, "make before break");
    }
    let status = cluster_status(&cluster.cluster, &new, "tessera").unwrap();
    assert!(status.as_planned(), "{:#?}", status.differences());
    // Nothing left of the old plan.
    let planned: BTreeSet<String> = manifests(&new, "tessera", &BTreeMap::new())
        .unwrap()
        .of_kind("Deployment")
        .map(|o| o.name().to_string())
        .collect();
    let live: BTreeSet<String> = cluster
        .server
        .list("deployments")
        .iter()
        .map(|d| d["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(live, planned);
}

#[test]
fn an_interrupted_apply_resumes_from_the_cluster_and_still_never_dips() {
    let (old, new) = old_and_new();
    let steps = plan_transition(&old, &new);
    let allowed: BTreeSet<String> = steps.iter().flat_map(|s| &s.dips).map(|d| d.service.clone()).collect();
    let mut cluster = running(&old);
    // The first drain fails half-way: the apply stops there.
    cluster.server.fail("DELETE", "deployments", 1, 500);
    let applying = start_apply(&cluster.server, cluster.dir.path(), &new);
    let error = run_cluster(&cluster.server, &cluster.cluster, cluster.dir.path(), &mut cluster.drivers, applying)
        .unwrap_err()
        .to_string();
    assert!(error.contains("delete Deployment tessera/") && error.contains("500"), "{error}");
    cluster.server.heal();
    // A new run (nothing kept locally) finds where it is and finishes.
    let applying = start_apply(&cluster.server, cluster.dir.path(), &new);
    run_cluster(&cluster.server, &cluster.cluster, cluster.dir.path(), &mut cluster.drivers, applying).unwrap();
    check_history(&cluster.server, &old, &new, &allowed);
    let status = cluster_status(&cluster.cluster, &new, "tessera").unwrap();
    assert!(status.as_planned(), "{:#?}", status.differences());
    // A third run changes nothing.
    cluster.server.clear_requests();
    let applying = start_apply(&cluster.server, cluster.dir.path(), &new);
    let actions =
        run_cluster(&cluster.server, &cluster.cluster, cluster.dir.path(), &mut cluster.drivers, applying).unwrap();
    let changed: Vec<&Action> = actions.iter().filter(|a| a.change.word() != "unchanged").collect();
    assert!(changed.is_empty(), "{changed:#?}");
}
