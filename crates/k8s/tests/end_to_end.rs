//! The demo plan from planning to a running cluster, against the fakes:
//! plan → export → schema validation → apply (waiting for the agents) →
//! each node's agent applies its layout on the fake driver → status says
//! everything runs as planned.

use std::time::Duration;

use tessera_k8s::{
    apply_plan, cluster_status, manifests, reconcile_node, AgentOptions, ApplyOptions, Outcome, PlanSource,
};

use crate::agent::agent_options;
use crate::apply::placed_plan;
use crate::common::{a100_node, connect, driver_for, export_files, fake_cluster, validate};

#[test]
fn the_demo_plan_runs_as_planned() {
    let dir = tempfile::tempdir().unwrap();
    let (server, cluster) = fake_cluster(&[a100_node("gpu-a", 2), a100_node("gpu-b", 2)], dir.path());
    let plan = placed_plan();
    let exported = manifests(&plan, "tessera", &Default::default()).unwrap();
    validate(&export_files(&exported, dir.path()));
    std::fs::write(dir.path().join("plan.json"), tessera_store::plan_json(&plan)).unwrap();

    let applying = {
        let (plan, cluster) = (plan.clone(), connect(&server, dir.path()));
        std::thread::spawn(move || {
            let options = ApplyOptions {
                namespace: "tessera".into(),
                dry_run: false,
                force_conflicts: false,
                layout_timeout: Duration::from_secs(60),
                poll: Duration::from_millis(20),
                routes: Some(tessera_k8s::GatewayRef::default()),
                pods: tessera_k8s::PodOptions::default(),
                concurrency: 4,
            };
            apply_plan(&cluster, &plan, &options, &mut |_| {})
        })
    };
    let mut drivers = [driver_for(&plan, 0), driver_for(&plan, 1)];
    let mut done = [false, false];
    for _ in 0..100 {
        for (number, node) in ["gpu-a", "gpu-b"].into_iter().enumerate() {
            // The agents read their nodes' parts through the API.
            let options = AgentOptions {
                plan: PlanSource::Cluster { namespace: "tessera".into() },
                ..agent_options(node, &dir.path().join("plan.json"))
            };
            let outcome = reconcile_node(&cluster, &mut drivers[number], &options, &mut |_| {}).unwrap();
            if matches!(outcome, Outcome::Pending(_)) && server.plugin_restarts().contains(&node.to_string()) {
                // The DRA driver's plugin restarted and publishes what exists.
                server.publish_mig_slices(node, &mut drivers[number], &plan, number as u32);
            }
            done[number] = outcome == Outcome::Success;
        }
        // The Deployment controller: pods run and are ready.
        server.run_deployments(0);
        if done == [true, true] && applying.is_finished() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let actions = applying.join().unwrap().unwrap();
    assert!(actions.iter().all(|a| a.change.word() == "created"), "{actions:#?}");
    // Every claim is pinned to the MIG device its agent made.
    for claim in server.list("resourceclaims") {
        let expression = claim["spec"]["devices"]["requests"][0]["exactly"]["selectors"][0]["cel"]["expression"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(expression.contains(".uuid == 'MIG-fake-"), "{expression}");
    }
    server.run_deployments(0);
    let status = cluster_status(&cluster, &plan, "tessera").unwrap();
    assert!(status.as_planned(), "{:#?}", status.differences());
    assert_eq!(status.segments.len(), plan.gpus.iter().map(|g| g.instances.len()).sum::<usize>());
    assert!(status.nodes.iter().all(|n| n.state.as_deref() == Some("success") && n.current));
    for (number, driver) in drivers.iter().enumerate() {
        for gpu in plan.gpus.iter().filter(|g| g.node == number as u32) {
            assert_eq!(driver.layout(gpu.index).len(), gpu.instances.len());
        }
    }
    // A pod restarting shows in the status; a missing Deployment too.
    server.run_deployments(2);
    let status = cluster_status(&cluster, &plan, "tessera").unwrap();
    assert!(status.segments.iter().all(|s| s.restarts == 2 * u64::from(s.planned)));
}
