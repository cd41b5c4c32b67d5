//! The node agent's state machine against the fake nvidia-smi and the fake
//! API server: pending → success once the DRA driver shows the planned
//! devices; failed with the reason; resuming after dying mid-layout;
//! emptying the GPUs its part lists without instances.

use std::path::Path;
use std::time::Duration;

use tessera_core::{GpuAssignment, GpuModel, Plan};
use tessera_gpu::FakeNvidiaSmi;
use tessera_k8s::{reconcile_node, AgentOptions, Cluster, FakeApiServer, NodeDevice, Outcome, PlanSource};

use crate::apply::placed_plan;
use crate::common::{a100_node, driver_for, fake_cluster, DRA_LABEL, DRA_NAMESPACE};

pub fn agent_options(node: &str, plan_path: &Path) -> AgentOptions {
    AgentOptions {
        node: node.into(),
        plan: PlanSource::File(plan_path.to_path_buf()),
        force: false,
        dra_namespace: DRA_NAMESPACE.into(),
        dra_plugin_selector: format!("{}={}", DRA_LABEL.0, DRA_LABEL.1),
        slices_timeout: Duration::from_secs(300),
    }
}

fn state(server: &FakeApiServer, node: &str) -> (String, String) {
    let node = server.get("nodes", "", node).unwrap();
    (
        node["metadata"]["labels"]["tessera.io/mig.state"].as_str().unwrap_or_default().to_string(),
        node["metadata"]["annotations"]["tessera.io/mig.reason"].as_str().unwrap_or_default().to_string(),
    )
}

struct Setup {
    dir: tempfile::TempDir,
    server: FakeApiServer,
    cluster: Cluster,
    plan: Plan,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let (server, cluster) = fake_cluster(&[a100_node("gpu-a", 2), a100_node("gpu-b", 2)], dir.path());
    let plan = placed_plan();
    std::fs::write(dir.path().join("plan.json"), tessera_store::plan_json(&plan)).unwrap();
    Setup { dir, server, cluster, plan }
}

fn pass(setup: &Setup, driver: &mut FakeNvidiaSmi, options: &AgentOptions) -> (Outcome, Vec<String>) {
    let mut events = Vec::new();
    let outcome = reconcile_node(&setup.cluster, driver, options, &mut |e| events.push(e)).unwrap();
    (outcome, events)
}

#[test]
fn the_layout_is_applied_then_success_once_the_dra_driver_shows_exactly_the_planned_devices() {
    let setup = setup();
    let options = agent_options("gpu-a", &setup.dir.path().join("plan.json"));
    let mut driver = driver_for(&setup.plan, 0);
    let (outcome, events) = pass(&setup, &mut driver, &options);
    let Outcome::Pending(reason) = outcome else { panic!("{outcome:?}") };
    assert!(reason.starts_with("waiting for the DRA driver's ResourceSlices: missing GPU 0 "), "{reason}");
    assert!(events[0].starts_with("applying the MIG layout of plan "), "{events:#?}");
    assert!(events.iter().any(|e| e.contains("nvidia-smi mig -i 0 -cgi ")), "{events:#?}");
    assert_eq!(setup.server.plugin_restarts(), ["gpu-a"]);
    assert_eq!(state(&setup.server, "gpu-a").0, "pending");
    for gpu in setup.plan.gpus.iter().filter(|g| g.node == 0) {
        let mut planned: Vec<(String, u8, usize)> =
            gpu.instances.iter().map(|i| (i.profile.clone(), i.start, 1)).collect();
        planned.sort();
        assert_eq!(driver.layout(gpu.index), planned);
    }

    // Before the plugin publishes, another pass waits without restarting it again.
    let (outcome, _) = pass(&setup, &mut driver, &options);
    assert!(matches!(outcome, Outcome::Pending(_)));
    assert_eq!(setup.server.plugin_restarts().len(), 1);

    setup.server.publish_mig_slices("gpu-a", &mut driver, &setup.plan, 0);
    let (outcome, _) = pass(&setup, &mut driver, &options);
    assert_eq!(outcome, Outcome::Success);
    let node = setup.server.get("nodes", "", "gpu-a").unwrap();
    assert_eq!(node["metadata"]["labels"]["tessera.io/mig.state"], "success");
    assert_eq!(node["metadata"]["annotations"]["tessera.io/plan-id"], tessera_k8s::plan_id(&setup.plan));
    assert!(node["metadata"]["annotations"].get("tessera.io/mig.reason").is_none());
    let devices: Vec<NodeDevice> =
        serde_json::from_str(node["metadata"]["annotations"]["tessera.io/mig.devices"].as_str().unwrap()).unwrap();
    let planned = setup.plan.gpus.iter().filter(|g| g.node == 0).map(|g| g.instances.len()).sum::<usize>();
    assert_eq!(devices.len(), planned);
    assert!(devices
        .iter()
        .all(|d| d.uuid.starts_with("MIG-fake-") && d.parent_uuid == format!("GPU-fake-gpu-a-{}", d.gpu)));

    // Idempotent: nothing is written, nothing restarted, nothing changed.
    setup.server.clear_requests();
    let changes_before = driver.log.len();
    let (outcome, events) = pass(&setup, &mut driver, &options);
    assert_eq!(outcome, Outcome::Success);
    assert!(events.is_empty(), "{events:#?}");
    assert!(setup.server.requests().iter().all(|r| r.starts_with("GET")), "{:#?}", setup.server.requests());
    assert!(driver.log[changes_before..].iter().all(|l| !l.contains("-cgi") && !l.contains("-dgi")));
}

#[test]
fn a_gpu_of_another_model_or_with_running_processes_fails_with_the_reason_and_is_retried() {
    let setup = setup();
    let options = agent_options("gpu-a", &setup.dir.path().join("plan.json"));
    let mut wrong = FakeNvidiaSmi::new().with_gpu(0, GpuModel::H100_80GB).with_gpu(1, GpuModel::H100_80GB);
    let (outcome, _) = pass(&setup, &mut wrong, &options);
    let expected = "GPU 0 is an NVIDIA H100 80GB HBM3 (h100-80gb) but the plan wants a100-80gb";
    assert_eq!(outcome, Outcome::Failed(expected.into()));
    assert_eq!(state(&setup.server, "gpu-a"), ("failed".to_string(), expected.to_string()));

    let mut busy = driver_for(&setup.plan, 0);
    busy.set_processes(0, 2);
    let (outcome, _) = pass(&setup, &mut busy, &options);
    let Outcome::Failed(reason) = outcome else { panic!("{outcome:?}") };
    assert_eq!(reason, "GPU 0 runs 2 compute processes: stop them or pass --force");
    assert!(busy.layout(0).is_empty(), "nothing changed on a busy GPU");
    busy.set_processes(0, 0);
    let (outcome, _) = pass(&setup, &mut busy, &options);
    assert!(matches!(outcome, Outcome::Pending(_)), "retried once the processes are gone: {outcome:?}");
}

#[test]
fn an_agent_that_dies_mid_layout_leaves_the_node_pending_and_the_next_one_resumes() {
    let setup = setup();
    let options = agent_options("gpu-b", &setup.dir.path().join("plan.json"));
    let mut driver = driver_for(&setup.plan, 1);
    let died = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut created = 0;
        reconcile_node(&setup.cluster, &mut driver, &options, &mut |event| {
            if event.contains(" -cgi ") {
                created += 1;
                assert!(created < 1, "the agent dies after its first GPU instance");
            }
        })
    }));
    assert!(died.is_err());
    let (state_now, reason) = state(&setup.server, "gpu-b");
    assert_eq!(state_now, "pending", "never success while half done");
    assert!(reason.starts_with("applying the MIG layout of plan "), "{reason}");
    let half: usize = setup.plan.gpus.iter().filter(|g| g.node == 1).map(|g| driver.layout(g.index).len()).sum();
    assert_eq!(half, 1, "one instance was made before the agent died");

    let (outcome, events) = pass(&setup, &mut driver, &options);
    assert!(events[0].starts_with("resuming an interrupted run: applying the MIG layout of plan "), "{events:#?}");
    assert!(matches!(outcome, Outcome::Pending(_)), "{outcome:?}");
    setup.server.publish_mig_slices("gpu-b", &mut driver, &setup.plan, 1);
    assert_eq!(pass(&setup, &mut driver, &options).0, Outcome::Success);
}

#[test]
fn without_the_dra_plugin_or_a_plan_the_agent_says_so() {
    let setup = setup();
    let mut options = agent_options("gpu-a", &setup.dir.path().join("absent.json"));
    let mut driver = driver_for(&setup.plan, 0);
    let (outcome, _) = pass(&setup, &mut driver, &options);
    assert!(matches!(outcome, Outcome::Idle(ref why) if why.starts_with("no plan at ")), "{outcome:?}");
    options.plan = PlanSource::File(setup.dir.path().join("plan.json"));
    options.dra_namespace = "elsewhere".into();
    let (outcome, _) = pass(&setup, &mut driver, &options);
    assert_eq!(
        outcome,
        Outcome::Failed("no DRA kubelet plugin pod (dra-driver-nvidia-gpu-component=kubelet-plugin) on this node in namespace elsewhere; the MIG devices cannot be published".into())
    );
    let missing = AgentOptions { node: "no-such-node".into(), ..options };
    let error = reconcile_node(&setup.cluster, &mut driver, &missing, &mut |_| {}).unwrap_err().to_string();
    assert!(error.ends_with("node 'no-such-node' does not exist (pass the pod's spec.nodeName as --node)"), "{error}");
}

#[test]
fn gpus_listed_empty_are_emptied_and_one_no_longer_there_is_passed_over() {
    let setup = setup();
    let path = setup.dir.path().join("plan.json");
    let options = agent_options("gpu-a", &path);
    let mut driver = driver_for(&setup.plan, 0);
    pass(&setup, &mut driver, &options);
    setup.server.publish_mig_slices("gpu-a", &mut driver, &setup.plan, 0);
    assert_eq!(pass(&setup, &mut driver, &options).0, Outcome::Success);
    let ours: Vec<u32> = setup.plan.gpus.iter().filter(|g| g.node == 0).map(|g| g.index).collect();
    assert!(ours.iter().all(|&index| !driver.layout(index).is_empty()));

    // The node's part now lists its GPUs empty, and one it does not have.
    let mut emptied = setup.plan.clone();
    for gpu in emptied.gpus.iter_mut().filter(|g| g.node == 0) {
        gpu.instances.clear();
    }
    emptied.gpus.push(GpuAssignment {
        node: 0,
        index: 7,
        gpu_model: GpuModel::A100_80GB,
        instances: Vec::new(),
        shared: Vec::new(),
    });
    std::fs::write(&path, tessera_store::plan_json(&emptied)).unwrap();
    let (outcome, events) = pass(&setup, &mut driver, &options);
    assert!(events.iter().any(|e| e.starts_with("GPU 7 is to be emptied but is not there (")), "{events:#?}");
    assert!(events.iter().any(|e| e.contains(" -dgi ") || e.contains(" -dci ")), "{events:#?}");
    assert!(ours.iter().all(|&index| driver.layout(index).is_empty()), "emptied");
    // The driver must stop publishing the destroyed devices.
    let Outcome::Pending(reason) = outcome else { panic!("{outcome:?}") };
    assert_eq!(reason, "waiting for the DRA driver's ResourceSlices: the layout changed");
    assert_eq!(setup.server.plugin_restarts(), ["gpu-a", "gpu-a"]);
    // The plugin publishes what the GPUs have: nothing of GPU 7, which it
    // does not see either.
    let there = Plan { gpus: emptied.gpus.iter().filter(|g| g.index != 7).cloned().collect(), ..emptied.clone() };
    setup.server.publish_mig_slices("gpu-a", &mut driver, &there, 0);
    assert_eq!(pass(&setup, &mut driver, &options).0, Outcome::Success);
    let node = setup.server.get("nodes", "", "gpu-a").unwrap();
    assert_eq!(node["metadata"]["annotations"]["tessera.io/mig.devices"], "[]");
    assert_eq!(node["metadata"]["annotations"]["tessera.io/plan-id"], tessera_k8s::plan_id(&emptied));
}
