//! Applying against the fake API server: dependency order, idempotence,
//! prune, conflicts with another field manager, RBAC refusals, a server
//! error in the middle, an unreachable or unauthorized server.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::json;
use tessera_core::Plan;
use tessera_k8s::{
    apply_plan, cluster_status, manifests, node_plan_id, Action, ApplyOptions, Change, Cluster, ClusterOptions,
    FakeApiServer,
};

use crate::common::{a100_node, connect, demo_plan, fake_cluster};

pub fn options() -> ApplyOptions {
    ApplyOptions {
        namespace: "tessera".into(),
        dry_run: false,
        force_conflicts: false,
        layout_timeout: Duration::from_secs(30),
        poll: Duration::from_millis(20),
        routes: Some(tessera_k8s::GatewayRef::default()),
        pods: tessera_k8s::PodOptions::default(),
        concurrency: 8,
    }
}

/// The demo plan placed on two 2-GPU A100 nodes.
pub fn placed_plan() -> Plan {
    let mut plan = demo_plan();
    let typed: Vec<k8s_openapi::api::core::v1::Node> = [a100_node("gpu-a", 2), a100_node("gpu-b", 2)]
        .into_iter()
        .map(|n| serde_json::from_value(n).unwrap())
        .collect();
    plan = tessera_k8s::inventory(&typed, &[]).nodes.place(&plan).unwrap();
    plan
}

/// Marks every node of `plan` as its agent would after success (with its
/// part's id).
fn agents_done(server: &FakeApiServer, plan: &Plan) {
    for (number, name) in ["gpu-a", "gpu-b"].into_iter().enumerate() {
        let mut node = server.get("nodes", "", name).unwrap();
        node["metadata"]["labels"]["tessera.io/mig.state"] = "success".into();
        node["metadata"]["annotations"] = json!({"tessera.io/plan-id": node_plan_id(plan, number as u32)});
        server.put(node);
    }
}

fn setup() -> (tempfile::TempDir, FakeApiServer, Cluster, Plan) {
    let dir = tempfile::tempdir().unwrap();
    let (server, cluster) = fake_cluster(&[a100_node("gpu-a", 2), a100_node("gpu-b", 2)], dir.path());
    let plan = placed_plan();
    agents_done(&server, &plan);
    server.ready_on_apply();
    (dir, server, cluster, plan)
}

/// The plan's segments, configurations of a service (one Service each) and
/// services (one HTTPRoute each).
fn counts(plan: &Plan) -> (usize, usize, usize) {
    let segments = plan.gpus.iter().map(|g| g.instances.len()).sum::<usize>();
    let configurations: std::collections::BTreeSet<(&str, &str, u32, u32)> = plan
        .gpus
        .iter()
        .flat_map(|g| &g.instances)
        .map(|i| (i.service.as_str(), i.profile.as_str(), i.batch, i.procs))
        .collect();
    let services: std::collections::BTreeSet<&str> = configurations.iter().map(|c| c.0).collect();
    (segments, configurations.len(), services.len())
}

fn changes(actions: &[Action]) -> BTreeMap<&'static str, usize> {
    let mut counts = BTreeMap::new();
    for action in actions {
        *counts.entry(action.change.word()).or_insert(0) += 1;
    }
    counts
}

fn writes(server: &FakeApiServer) -> Vec<String> {
    server.requests().into_iter().filter(|r| r.starts_with("PATCH") || r.starts_with("DELETE")).collect()
}

#[test]
fn apply_writes_in_dependency_order_and_a_second_apply_changes_nothing() {
    let (_dir, server, cluster, plan) = setup();
    let (segments, configurations, services) = counts(&plan);
    let objects = 2 + 2 * segments + configurations + services;
    let actions = apply_plan(&cluster, &plan, &options(), &mut |_| {}).unwrap();
    assert_eq!(changes(&actions), BTreeMap::from([("created", objects)]));
    let writes = writes(&server);
    let kinds: Vec<&str> = writes.iter().map(|w| w.split(' ').nth(1).unwrap()).collect();
    let last_claim = kinds.iter().rposition(|k| *k == "resourceclaims").unwrap();
    let first_deployment = kinds.iter().position(|k| *k == "deployments").unwrap();
    assert_eq!(kinds[0], "configmaps");
    assert!(last_claim < first_deployment, "{writes:#?}");
    // The wait for the nodes comes between the plan and the claims.
    let requests = server.requests();
    let config_map = requests.iter().position(|r| r.starts_with("PATCH configmaps")).unwrap();
    let claim = requests.iter().position(|r| r.starts_with("PATCH resourceclaims")).unwrap();
    assert!(requests[config_map..claim].iter().any(|r| r == "GET nodes"));
    // Server-side apply as `tessera`: the fake stored the objects.
    assert_eq!(server.list("deployments").len(), segments);
    assert_eq!(server.list("services").len(), configurations);
    assert_eq!(server.list("httproutes").len(), services);
    let last_deployment = kinds.iter().rposition(|k| *k == "deployments").unwrap();
    let first_route = kinds.iter().position(|k| *k == "httproutes").unwrap();
    assert!(last_deployment < first_route, "routes last: {writes:#?}");

    server.clear_requests();
    let again = apply_plan(&cluster, &plan, &options(), &mut |_| {}).unwrap();
    assert_eq!(changes(&again), BTreeMap::from([("unchanged", objects)]));
    assert_eq!(crate::apply::writes(&server), Vec::<String>::new());
}

#[test]
fn a_new_plan_prunes_what_the_old_one_had_deployments_first_claims_last() {
    let (_dir, server, cluster, plan) = setup();
    apply_plan(&cluster, &plan, &options(), &mut |_| {}).unwrap();
    let mut smaller = plan.clone();
    for gpu in &mut smaller.gpus {
        gpu.instances.retain(|i| i.service != "thumbnails");
    }
    smaller.gpus.retain(|g| !g.instances.is_empty());
    smaller.services.retain(|s| s.service != "thumbnails");
    smaller.gpu_count = smaller.gpus.len();
    agents_done(&server, &smaller);
    let gone = plan.gpus.iter().flat_map(|g| &g.instances).filter(|i| i.service == "thumbnails").count();
    let (_, configurations, _) = counts(&plan);
    let (_, configurations_left, _) = counts(&smaller);
    assert!(gone > 0);
    server.clear_requests();
    let actions = apply_plan(&cluster, &smaller, &options(), &mut |_| {}).unwrap();
    let deleted: Vec<&Action> = actions.iter().filter(|a| a.change == Change::Deleted).collect();
    // Per segment its Deployment and claim, per configuration its Service,
    // and the service's route.
    assert_eq!(deleted.len(), 2 * gone + configurations - configurations_left + 1, "{actions:#?}");
    assert!(deleted.iter().all(|a| a.name.starts_with("thumbnails")), "{deleted:#?}");
    let writes = writes(&server);
    let first_patch = writes.iter().position(|w| w.starts_with("PATCH")).unwrap();
    assert!(writes[..first_patch].iter().all(|w| w.starts_with("DELETE deployments")), "{writes:#?}");
    assert!(writes.last().unwrap().starts_with("DELETE resourceclaims"));
    assert!(server
        .list("deployments")
        .iter()
        .all(|d| !d["metadata"]["name"].as_str().unwrap().starts_with("thumbnails")));
    // Objects of others are never pruned.
    server.put(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "not-ours", "namespace": "tessera"}}));
    apply_plan(&cluster, &smaller, &options(), &mut |_| {}).unwrap();
    assert!(server.get("deployments", "tessera", "not-ours").is_some());
}

#[test]
fn a_field_another_manager_owns_is_a_conflict_unless_forced() {
    let (_dir, server, cluster, plan) = setup();
    apply_plan(&cluster, &plan, &options(), &mut |_| {}).unwrap();
    let name = server.list("deployments")[0]["metadata"]["name"].as_str().unwrap().to_string();
    server.edit_as("kubectl-scale", "deployments", "tessera", &name, ".spec.replicas", json!(9));
    let error = apply_plan(&cluster, &plan, &options(), &mut |_| {}).unwrap_err().to_string();
    assert!(error.starts_with(&format!("Kubernetes context 'fake' ({}): apply Deployment tessera/{name}: Apply failed with 1 conflict(s): conflict with \"kubectl-scale\": .spec.replicas (409 Conflict)", server.url())), "{error}");
    assert!(error.ends_with("rerun with --force-conflicts to take them over)") && !error.contains('\n'), "{error}");
    let forced = ApplyOptions { force_conflicts: true, ..options() };
    apply_plan(&cluster, &plan, &forced, &mut |_| {}).unwrap();
    assert_ne!(server.get("deployments", "tessera", &name).unwrap()["spec"]["replicas"], 9);
}

#[test]
fn rbac_refusals_and_bad_credentials_are_one_line_naming_context_and_cause() {
    let (_dir, server, cluster, plan) = setup();
    server.fail("PATCH", "resourceclaims", 0, 403);
    let error = apply_plan(&cluster, &plan, &options(), &mut |_| {}).unwrap_err().to_string();
    assert!(error.contains("apply ResourceClaim tessera/"), "{error}");
    assert!(
        error.contains(
            "is forbidden: User \"system:serviceaccount:tessera:tessera\" cannot patch resource \"resourceclaims\""
        ),
        "{error}"
    );
    assert!(error.ends_with("(403 Forbidden) (RBAC does not allow it: see deploy/kubernetes/10-rbac.yaml)"), "{error}");
    server.heal();
    server.fail("GET", "nodes", 0, 401);
    let error = apply_plan(&cluster, &plan, &options(), &mut |_| {}).unwrap_err().to_string();
    assert_eq!(error, format!("Kubernetes context 'fake' ({}): list nodes: Unauthorized (401 Unauthorized) (the credentials were refused)", server.url()));
}

#[test]
fn an_unreachable_server_is_one_line_naming_context_and_cause() {
    let dir = tempfile::tempdir().unwrap();
    let server = FakeApiServer::start();
    let kubeconfig = server.kubeconfig(dir.path());
    let url = server.url();
    drop(server);
    let cluster = Cluster::connect(&ClusterOptions { kubeconfig: Some(kubeconfig), context: None }).unwrap();
    let error = cluster.inventory().unwrap_err().to_string();
    assert!(
        error.starts_with(&format!("Kubernetes context 'fake' ({url}): list nodes: cannot reach the API server: ")),
        "{error}"
    );
    assert!(error.contains("onnection refused") && !error.contains('\n'), "{error}");
    let missing = Cluster::connect(&ClusterOptions { kubeconfig: Some(dir.path().join("none")), context: None });
    let error = missing.err().unwrap().to_string();
    assert!(error.starts_with("Kubernetes kubeconfig ") && error.contains("cannot read it: "), "{error}");
    let wrong = Cluster::connect(&ClusterOptions {
        kubeconfig: Some(dir.path().join("kubeconfig")),
        context: Some("prod".into()),
    });
    let error = wrong.err().unwrap().to_string();
    assert!(error.starts_with("Kubernetes context 'prod': bad kubeconfig: "), "{error}");
}

#[test]
fn a_server_error_in_the_middle_leaves_what_was_applied_and_a_rerun_completes_it() {
    let (_dir, server, cluster, plan) = setup();
    let (segments, configurations, services) = counts(&plan);
    server.fail("PATCH", "deployments", 2, 500);
    let one_at_a_time = ApplyOptions { concurrency: 1, ..options() };
    let error = apply_plan(&cluster, &plan, &one_at_a_time, &mut |_| {}).unwrap_err().to_string();
    assert!(error.contains("apply Deployment tessera/") && error.contains("(500 InternalError)"), "{error}");
    // What is left: the nodes' parts, every claim, the first Deployment.
    assert!(server.get("configmaps", "tessera", "tessera-node-gpu-a").is_some());
    assert_eq!(server.list("resourceclaims").len(), segments);
    assert_eq!(server.list("deployments").len(), 1);
    let actions = apply_plan(&cluster, &plan, &options(), &mut |_| {}).unwrap();
    assert_eq!(
        changes(&actions),
        BTreeMap::from([("created", segments - 1 + configurations + services), ("unchanged", 3 + segments)])
    );
    assert_eq!(server.list("deployments").len(), segments);
}

#[test]
fn waiting_ends_on_a_failed_node_or_after_the_timeout_naming_the_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let (server, cluster) = fake_cluster(&[a100_node("gpu-a", 2), a100_node("gpu-b", 2)], dir.path());
    let plan = placed_plan();
    let quick = ApplyOptions { layout_timeout: Duration::from_millis(100), ..options() };
    let error = apply_plan(&cluster, &plan, &quick, &mut |_| {}).unwrap_err().to_string();
    assert_eq!(
        error,
        "after 0 s, 2 nodes have not applied the plan's MIG layout: node 'gpu-a' (no state); node 'gpu-b' (no state) (is the agent's DaemonSet running there?)"
    );
    let mut node = server.get("nodes", "", "gpu-b").unwrap();
    node["metadata"]["labels"]["tessera.io/mig.state"] = "failed".into();
    node["metadata"]["annotations"] =
        json!({"tessera.io/plan-id": node_plan_id(&plan, 1), "tessera.io/mig.reason": "GPU 0 has 3 running processes"});
    server.put(node);
    let error = apply_plan(&cluster, &plan, &quick, &mut |_| {}).unwrap_err().to_string();
    assert_eq!(error, "node 'gpu-b' failed to apply its MIG layout: GPU 0 has 3 running processes");
    assert!(server.list("resourceclaims").is_empty(), "nothing after the plan before the layouts");
}

#[test]
fn a_dry_run_writes_nothing_and_says_what_would_change() {
    let (_dir, server, cluster, plan) = setup();
    let dry = ApplyOptions { dry_run: true, ..options() };
    let actions = apply_plan(&cluster, &plan, &dry, &mut |_| {}).unwrap();
    assert!(actions.iter().all(|a| a.change == Change::Created));
    assert_eq!(writes(&server), Vec::<String>::new());
    let status = cluster_status(&cluster, &plan, "tessera").unwrap();
    assert!(!status.as_planned());
    let _ = manifests(&plan, "tessera", &BTreeMap::new()).unwrap();
    let _ = connect(&server, _dir.path());
}
