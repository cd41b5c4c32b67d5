//! Make before break: a replan of the demo (rates changed, `plan --from`)
//! applied to a fake cluster that runs the old plan, with the agents
//! reconfiguring their GPUs from their nodes' ConfigMaps and a Deployment
//! controller that makes pods ready only once their node's layout is in
//! place. After every write the fake API server keeps, each service's
//! routed capacity must stay at or above its demand — unless the steps name
//! it as one that must dip. The routed capacity is what the route can
//! carry: its weights split the requests across the configurations'
//! Services, each Service evenly across the ready pods it selects, so it is
//! the largest rate at which no Service gets more than its ready pods'
//! capacity. An apply interrupted mid-way resumes from the cluster's
//! objects. A replan onto fewer GPUs has their agents empty the GPUs it
//! drops before their nodes' parts change or go, also when resumed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::Value;
use tessera_core::{GpuModel, Plan, ServiceImage, ServiceSlo, Sharing};
use tessera_gpu::FakeNvidiaSmi;
use tessera_k8s::{
    apply_plan, cluster_status, manifests, plan_transition, read_node_part, reconcile_node, running_plan, Action,
    AgentOptions, ApplyOptions, Cluster, FakeApiServer, K8sError, Manifest, Outcome, PlanSource,
};
use tessera_plan::{plan, GpuPosition, PlanInputs, PlanRequest, ReplanFrom};

use crate::agent::agent_options;
use crate::apply::options;
use crate::common::{a100_node, connect, fake_cluster};

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
    let from =
        ReplanFrom { current: &old, max_extra_gpus: 2, drained: Vec::new(), lost: Vec::new(), within_layouts: false };
    let new =
        plan(&PlanRequest { from: Some(from), target: Some(&target), ..PlanRequest::new(&new_inputs) }).unwrap().plan;
    (old, new)
}

/// The demo placed on the three nodes, and a replan from it after every
/// service's rate halves that drains every GPU of the last node it uses (so
/// the new plan does not use that node); that node's number.
fn old_and_without_last_node() -> (Plan, Plan, u32) {
    let inputs = PlanInputs::demo(&[GpuModel::A100_80GB]).unwrap();
    let target = inventory();
    let old = plan(&PlanRequest { target: Some(&target), ..PlanRequest::new(&inputs) }).unwrap().plan;
    let halved: Vec<ServiceSlo> =
        inputs.services().iter().map(|s| ServiceSlo { rate_rps: s.rate_rps * 0.5, ..s.clone() }).collect();
    let new_inputs = inputs.for_services(halved);
    let last = old.gpus.iter().map(|g| g.node).max().unwrap();
    let drained =
        old.gpus.iter().filter(|g| g.node == last).map(|g| GpuPosition { node: g.node, index: g.index }).collect();
    let from = ReplanFrom { current: &old, max_extra_gpus: 0, drained, lost: Vec::new(), within_layouts: false };
    let new =
        plan(&PlanRequest { from: Some(from), target: Some(&target), ..PlanRequest::new(&new_inputs) }).unwrap().plan;
    assert!(new.gpus.iter().all(|g| g.node != last), "the replan leaves node {last}: {new:#?}");
    (old, new, last)
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
    run_cluster_without(server, cluster, dir, drivers, applying, None)
}

/// As [`run_cluster`], with the agent of node `asleep` not running.
fn run_cluster_without(
    server: &FakeApiServer,
    cluster: &Cluster,
    dir: &Path,
    drivers: &mut [FakeNvidiaSmi],
    applying: JoinHandle<Result<Vec<Action>, K8sError>>,
    asleep: Option<&str>,
) -> Result<Vec<Action>, K8sError> {
    for _ in 0..3000 {
        for (number, node) in NODES.into_iter().enumerate().filter(|(_, node)| Some(*node) != asleep) {
            let options = AgentOptions {
                plan: PlanSource::Cluster { namespace: "tessera".into() },
                ..agent_options(node, &dir.join("unused.json"))
            };
            let outcome = reconcile_node(cluster, &mut drivers[number], &options, &mut |_| {}).unwrap();
            if matches!(outcome, Outcome::Pending(_)) && server.plugin_restarts().contains(&node.to_string()) {
                let part =
                    read_node_part(&server.get("configmaps", "tessera", &format!("tessera-node-{node}")).unwrap())
                        .unwrap();
                server.publish_mig_slices(node, &mut drivers[number], &part.plan, part.number);
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
    start_apply_with(server, dir, plan, options())
}

fn start_apply_with(
    server: &FakeApiServer,
    dir: &Path,
    plan: &Plan,
    options: ApplyOptions,
) -> JoinHandle<Result<Vec<Action>, K8sError>> {
    let (cluster, plan) = (connect(server, dir), plan.clone());
    std::thread::spawn(move || apply_plan(&cluster, &plan, &options, &mut |_| {}))
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

/// The objects of one kind.
fn of_kind<'a>(objects: &'a [Value], kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    objects.iter().filter(move |object| object["kind"] == kind)
}

/// Each service's routed capacity after a write (see the module docs): the
/// minimum over its route's weighted backends of the ready capacity behind
/// the backend's Service times the route's total weight over the backend's;
/// 0 for a backend without a Service or ready pods. The pods one Service
/// selects must all have the same capacity (its even split is then
/// proportional).
fn routed(objects: &[Value], known: &BTreeMap<(String, String, String), (String, f64)>) -> BTreeMap<String, f64> {
    // Ready Deployments: their pods' labels, their capacity and each pod's.
    let mut ready: Vec<(&serde_json::Map<String, Value>, f64, f64)> = Vec::new();
    for d in of_kind(objects, "Deployment") {
        if d["status"]["readyReplicas"] != d["spec"]["replicas"] {
            continue;
        }
        let env = d["spec"]["template"]["spec"]["containers"][0]["env"].as_array().unwrap();
        let var = |name: &str| env.iter().find(|e| e["name"] == name).unwrap()["value"].as_str().unwrap().to_string();
        let key = (d["metadata"]["name"].as_str().unwrap().to_string(), var("TESSERA_BATCH"), var("TESSERA_PROCS"));
        let capacity = known[&key].1;
        let labels = d["spec"]["template"]["metadata"]["labels"].as_object().unwrap();
        ready.push((labels, capacity, capacity / d["spec"]["replicas"].as_f64().unwrap()));
    }
    let selectors: BTreeMap<&str, &serde_json::Map<String, Value>> = of_kind(objects, "Service")
        .map(|s| (s["metadata"]["name"].as_str().unwrap(), s["spec"]["selector"].as_object().unwrap()))
        .collect();
    let behind = |service: &str| -> f64 {
        let Some(selector) = selectors.get(service) else { return 0.0 };
        let selected: Vec<(f64, f64)> = ready
            .iter()
            .filter(|(labels, ..)| selector.iter().all(|(k, v)| labels.get(k) == Some(v)))
            .map(|(_, capacity, per_pod)| (*capacity, *per_pod))
            .collect();
        if let Some((_, first)) = selected.first() {
            assert!(
                selected.iter().all(|(_, p)| (p / first - 1.0).abs() < 1e-9),
                "{service}: pods of unequal capacity"
            );
        }
        selected.iter().map(|(capacity, _)| capacity).sum()
    };
    let mut total = BTreeMap::new();
    for route in of_kind(objects, "HTTPRoute") {
        let backends = route["spec"]["rules"][0]["backendRefs"].as_array().unwrap();
        let weight = |b: &Value| b["weight"].as_f64().unwrap();
        let all: f64 = backends.iter().map(weight).sum();
        let capacity = backends
            .iter()
            .filter(|b| weight(b) > 0.0)
            .map(|b| behind(b["name"].as_str().unwrap()) * all / weight(b))
            .fold(f64::INFINITY, f64::min);
        let capacity = if capacity.is_finite() { capacity } else { 0.0 };
        total.insert(route["metadata"]["name"].as_str().unwrap().to_string(), capacity);
    }
    total
}

/// Checks every kept write: no service below min(its demand, where it
/// started) unless it is allowed to dip; returns the writes checked.
fn check_history(server: &FakeApiServer, old: &Plan, new: &Plan, allowed: &BTreeSet<String>) -> usize {
    let known = capacities(&[old, new]);
    let history = server.history();
    let start = routed(&history[0].1, &known);
    for (write, objects) in &history {
        let now = routed(objects, &known);
        for service in &new.services {
            let floor = service.rate_rps.min(start.get(&service.service).copied().unwrap_or(0.0));
            let have = now.get(&service.service).copied().unwrap_or(0.0);
            // Weights are integers: rounding moves a share by far less than
            // 1e-4 of it here.
            assert!(
                have * (1.0 + 1e-4) >= floor || allowed.contains(&service.service),
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

/// The node part of host `host` in a kept state, if any.
fn part_in(objects: &[Value], host: &str) -> Option<tessera_k8s::NodePart> {
    of_kind(objects, "ConfigMap")
        .find(|c| c["metadata"]["name"] == format!("tessera-node-{host}").as_str())
        .map(|c| read_node_part(c).unwrap())
}

/// Checks that no GPU of `gone` left its node's part (the part changed
/// without it, or the ConfigMap went) before the node's agent had reported
/// success for a part listing it empty; returns how many left.
fn check_emptied_before_gone(server: &FakeApiServer, gone: &BTreeSet<(u32, u32)>) -> usize {
    let history = server.history();
    let mut left = 0;
    for pair in history.windows(2) {
        let ((_, before), (write, after)) = (&pair[0], &pair[1]);
        for &(node, index) in gone {
            let host = NODES[node as usize];
            let listed = |part: &Option<tessera_k8s::NodePart>| {
                part.as_ref().and_then(|p| p.plan.gpus.iter().find(|g| g.index == index).cloned())
            };
            let (was, is) = (part_in(before, host), part_in(after, host));
            let (Some(gpu), None) = (listed(&was), listed(&is)) else { continue };
            left += 1;
            assert!(gpu.instances.is_empty(), "{write}: GPU {node}:{index} left {host}'s part while still serving");
            let reported = of_kind(before, "Node").find(|n| n["metadata"]["name"] == host).unwrap();
            assert_eq!(reported["metadata"]["labels"]["tessera.io/mig.state"], "success", "{write}");
            assert_eq!(
                reported["metadata"]["annotations"]["tessera.io/plan-id"],
                was.unwrap().id.as_str(),
                "{write}: GPU {node}:{index} left {host}'s part before its agent reported it empty"
            );
        }
    }
    left
}

/// The GPUs `old` has and `new` does not, (node, index).
fn dropped(old: &Plan, new: &Plan) -> BTreeSet<(u32, u32)> {
    let kept: BTreeSet<(u32, u32)> = new.gpus.iter().map(|g| (g.node, g.index)).collect();
    old.gpus.iter().map(|g| (g.node, g.index)).filter(|p| !kept.contains(p)).collect()
}

#[test]
fn a_replan_that_drops_a_node_has_its_agent_empty_its_gpus_before_its_part_goes() {
    let (old, new, last) = old_and_without_last_node();
    let gone = dropped(&old, &new);
    let steps = plan_transition(&old, &new);
    let emptied: BTreeSet<(u32, u32)> = steps.iter().flat_map(|s| s.empties.iter().copied()).collect();
    assert_eq!(emptied, gone, "the steps empty exactly the GPUs the new plan drops");
    assert!(steps.iter().any(|s| s.summary().contains(", empty GPUs ")), "{steps:#?}");
    let allowed: BTreeSet<String> = steps.iter().flat_map(|s| &s.dips).map(|d| d.service.clone()).collect();
    let mut cluster = running(&old);
    assert!(gone.iter().all(|&(node, index)| !cluster.drivers[node as usize].layout(index).is_empty()));
    let applying = start_apply(&cluster.server, cluster.dir.path(), &new);
    run_cluster(&cluster.server, &cluster.cluster, cluster.dir.path(), &mut cluster.drivers, applying).unwrap();
    for &(node, index) in &gone {
        assert_eq!(cluster.drivers[node as usize].layout(index), Vec::new(), "GPU {node}:{index} emptied");
    }
    assert_eq!(check_emptied_before_gone(&cluster.server, &gone), gone.len());
    let host = NODES[last as usize];
    assert!(cluster.server.get("configmaps", "tessera", &format!("tessera-node-{host}")).is_none(), "pruned");
    check_history(&cluster.server, &old, &new, &allowed);
    let status = cluster_status(&cluster.cluster, &new, "tessera").unwrap();
    assert!(status.as_planned(), "{:#?}", status.differences());
}

#[test]
fn an_apply_interrupted_before_an_agent_emptied_its_gpus_waits_for_it_when_resumed() {
    let (old, new, last) = old_and_without_last_node();
    let gone = dropped(&old, &new);
    let allowed: BTreeSet<String> =
        plan_transition(&old, &new).iter().flat_map(|s| &s.dips).map(|d| d.service.clone()).collect();
    let mut cluster = running(&old);
    let host = NODES[last as usize];
    // The node's agent is down: the apply hands it its teardown and stops
    // waiting for it. Run again while it is still down, the apply waits for
    // that teardown before anything else: the part stays, saying empty.
    let impatient = ApplyOptions { layout_timeout: Duration::from_secs(2), ..options() };
    for _ in 0..2 {
        let applying = start_apply_with(&cluster.server, cluster.dir.path(), &new, impatient.clone());
        let error = run_cluster_without(
            &cluster.server,
            &cluster.cluster,
            cluster.dir.path(),
            &mut cluster.drivers,
            applying,
            Some(host),
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains(&format!("node '{host}' (success of an earlier plan)")), "{error}");
        let config_map = cluster.server.get("configmaps", "tessera", &format!("tessera-node-{host}"));
        let part = read_node_part(&config_map.expect("not pruned")).unwrap();
        assert!(part.plan.gpus.iter().all(|g| g.instances.is_empty()), "the part says empty: {part:#?}");
        assert!(gone
            .iter()
            .filter(|(node, _)| *node == last)
            .all(|&(node, index)| !cluster.drivers[node as usize].layout(index).is_empty()));
    }
    // What the cluster records (the part saying empty) reads back, and its
    // status names the node that is not done.
    let recorded = running_plan(&cluster.cluster, "tessera", &new).unwrap();
    let status = cluster_status(&cluster.cluster, &recorded, "tessera").unwrap();
    let differences = status.differences();
    assert!(differences.contains(&format!("node '{host}': layout of another plan")), "{differences:#?}");
    // The agent is back; a new run waits for the teardown before anything
    // else and finishes.
    let applying = start_apply(&cluster.server, cluster.dir.path(), &new);
    run_cluster(&cluster.server, &cluster.cluster, cluster.dir.path(), &mut cluster.drivers, applying).unwrap();
    for &(node, index) in &gone {
        assert_eq!(cluster.drivers[node as usize].layout(index), Vec::new(), "GPU {node}:{index} emptied");
    }
    assert_eq!(check_emptied_before_gone(&cluster.server, &gone), gone.len());
    check_history(&cluster.server, &old, &new, &allowed);
    let status = cluster_status(&cluster.cluster, &new, "tessera").unwrap();
    assert!(status.as_planned(), "{:#?}", status.differences());
}

/// The demo's first service beside twelve light services of one image, planned with
/// shared instances; and that plan after one member leaves its instance
/// (its service gone).
fn shared_and_one_member_gone() -> (Plan, Plan, String) {
    let inputs = PlanInputs::demo(&[GpuModel::A100_80GB]).unwrap();
    let mut services = inputs.services()[..1].to_vec();
    let mut images = tessera_core::synthetic::demo_images();
    for k in 0..12 {
        let service = format!("light-{k}");
        images.insert(service.clone(), ServiceImage { image: "reg.example/multi:1".into(), args: Vec::new() });
        services.push(ServiceSlo {
            service,
            model: "resnet50".into(),
            rate_rps: f64::from(2 + k % 5),
            latency_slo_ms: 150.0,
            percentile: 99.0,
        });
    }
    let inputs = inputs.for_services(services).with_images(images);
    let target = inventory();
    let request = PlanRequest { target: Some(&target), share: Some(Sharing::Serialized), ..PlanRequest::new(&inputs) };
    let old = plan(&request).unwrap().plan;
    let mut new = old.clone();
    let gpu = new.gpus.iter_mut().find(|g| !g.shared.is_empty()).expect("light services share an instance");
    let gone = gpu.shared[0].members.pop().unwrap().service;
    new.services.retain(|s| s.service != gone);
    (old, new, gone)
}

/// Shared instances apply make before break like any other: a member
/// leaving its instance stops and starts that instance's executor (its one
/// Deployment replaced), and nothing else is deleted.
#[test]
fn a_member_leaving_a_shared_instance_replaces_that_executor_only() {
    let (old, new, gone) = shared_and_one_member_gone();
    let steps = plan_transition(&old, &new);
    assert_eq!(steps.len(), 1, "{steps:#?}");
    assert_eq!(steps[0].stops.len(), 1, "{:?}", steps[0].stops);
    assert_eq!(steps[0].starts.len(), 1, "{:?}", steps[0].starts);
    let place =
        |text: &str| text.starts_with("the executor of").then(|| text.rsplit_once(" on ").unwrap().1.to_string());
    assert_eq!(place(&steps[0].stops[0]), place(&steps[0].starts[0]), "{steps:#?}");
    assert!(place(&steps[0].stops[0]).is_some(), "{steps:#?}");
    let mut cluster = running(&old);
    let status = cluster_status(&cluster.cluster, &old, "tessera").unwrap();
    assert!(status.as_planned(), "{:#?}", status.differences());
    let applying = start_apply(&cluster.server, cluster.dir.path(), &new);
    run_cluster(&cluster.server, &cluster.cluster, cluster.dir.path(), &mut cluster.drivers, applying).unwrap();
    let status = cluster_status(&cluster.cluster, &new, "tessera").unwrap();
    assert!(status.as_planned(), "{:#?}", status.differences());
    let deleted: Vec<String> = cluster
        .server
        .history()
        .into_iter()
        .filter(|(write, _)| write.starts_with("DELETE") && write.contains("/deployments/"))
        .map(|(write, _)| write)
        .collect();
    assert_eq!(deleted.len(), 1, "{deleted:?}");
    assert!(deleted[0].contains("/deployments/shared-"), "{deleted:?}");
    let route_gone = cluster.server.list("httproutes").iter().all(|r| r["metadata"]["name"] != gone.as_str());
    assert!(route_gone, "the route of {gone} is pruned");
}
