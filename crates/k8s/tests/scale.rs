//! The reference catalogue of 1,100 services (ParvaGPU's measured profiles,
//! `../shared/tools/scale_catalogue.py`), planned with ParvaGPU's strategy
//! and exported: one ConfigMap per node, each far under Kubernetes' 1 MiB
//! limit (sizes are deterministic), whose parts make the plan again; one
//! note however many services are renamed; every service routed, those of
//! more segments than a route rule may list (16) included. Timings are
//! `tessera bench k8s`'s.

use std::collections::BTreeMap;

use tessera_core::{GpuModel, ServiceImage};
use tessera_k8s::{manifests_with, merge_parts, read_node_part, ExportOptions, Manifest, MAX_OBJECT_BYTES};
use tessera_plan::{plan, PlanInputs, PlanRequest, ProfileOrigin, Strategy};
use tessera_store::{read_profile_dir, read_slo_scenario};

#[test]
fn every_node_object_of_the_1100_service_plan_is_far_under_1_mib_and_every_service_is_routed() {
    let dir = tempfile::tempdir().unwrap();
    let Some(catalogue) = tessera_testkit::scale_catalogue(1_100, dir.path()) else { return };
    let gpu = GpuModel::A100_80GB;
    let catalog = read_profile_dir(&catalogue.join("prof_data"), gpu).unwrap().catalog();
    let models: Vec<String> = catalog.models(gpu).map(str::to_string).collect();
    let services =
        read_slo_scenario(&catalogue.join("SLO_req_rate.csv"), &catalogue.join("SLO_latency.csv"), 1, &models).unwrap();
    let images: BTreeMap<String, ServiceImage> = services
        .iter()
        .map(|s| {
            (s.service.clone(), ServiceImage { image: "registry.example/serve:1".into(), args: vec!["{batch}".into()] })
        })
        .collect();
    let inputs = PlanInputs::new(services, catalog, ProfileOrigin::Measured, &[gpu]).unwrap().with_images(images);
    let plan = plan(&PlanRequest { strategy: Strategy::Parva, ..PlanRequest::new(&inputs) }).unwrap().plan;
    let exported = manifests_with(&plan, &ExportOptions::new("tessera"), &BTreeMap::new()).unwrap();
    let mut parts = BTreeMap::new();
    let mut largest = 0;
    for object in exported.of_kind("ConfigMap") {
        let bytes = serde_json::to_vec(&object.to_value()).unwrap().len();
        largest = largest.max(bytes);
        let part = read_node_part(&object.to_value()).unwrap();
        parts.insert(part.number, part);
    }
    assert_eq!(parts.len(), exported.nodes.len());
    assert!(largest * 8 < MAX_OBJECT_BYTES, "the largest node object is {largest} bytes");
    assert!(exported.objects.iter().all(|o| serde_json::to_vec(&o.to_value()).unwrap().len() < MAX_OBJECT_BYTES));
    assert_eq!(merge_parts(&parts).unwrap().gpus, plan.gpus);
    check_every_service_is_routed(&plan, &exported);
    // The catalogue's service names hold `_`: renamed, said in one line.
    assert_eq!(exported.notes.len(), 1, "{:?}", exported.notes);
    assert!(exported.notes[0].starts_with("1100 services have other names in Kubernetes"), "{}", exported.notes[0]);
}

/// Every service has a route of at most 16 backends, each backend a Service
/// whose selector picks pods of one configuration, and every segment's pods
/// are behind exactly one backend of its service's route; some services
/// have more segments than 16.
fn check_every_service_is_routed(plan: &tessera_core::Plan, exported: &tessera_k8s::Manifests) {
    let mut segments: BTreeMap<&str, usize> = BTreeMap::new();
    for instance in plan.gpus.iter().flat_map(|g| &g.instances) {
        *segments.entry(instance.service.as_str()).or_default() += 1;
    }
    assert!(segments.values().any(|n| *n > 16), "some service has more than 16 segments");
    // The segments of one service and configuration have equal capacities,
    // so one Service over their pods splits in proportion.
    let mut capacities: BTreeMap<(&str, String, &str, u32, u32), f64> = BTreeMap::new();
    for gpu in &plan.gpus {
        for i in &gpu.instances {
            let key = (i.service.as_str(), gpu.gpu_model.to_string(), i.profile.as_str(), i.batch, i.procs);
            let first = *capacities.entry(key).or_insert(i.capacity());
            assert!((i.capacity() / first - 1.0).abs() < 1e-12, "{}: {} vs {first}", i.service, i.capacity());
        }
    }
    let selectors: BTreeMap<&str, &BTreeMap<String, String>> = exported
        .objects
        .iter()
        .filter_map(|o| match o {
            Manifest::Service(s) => Some((o.name(), s.spec.as_ref()?.selector.as_ref()?)),
            _ => None,
        })
        .collect();
    // Per (service, configuration) selector: the backends naming it.
    let mut routed: BTreeMap<(String, String), usize> = BTreeMap::new();
    let mut routes = 0;
    for object in exported.of_kind("HTTPRoute") {
        let Manifest::HttpRoute(route) = object else { unreachable!() };
        routes += 1;
        let backends = route.spec.rules.as_ref().unwrap()[0].backend_refs.as_ref().unwrap();
        assert!(!backends.is_empty() && backends.len() <= 16, "{}: {} backends", object.name(), backends.len());
        for backend in backends {
            let selector = selectors[backend.name.as_str()];
            assert_eq!(selector["tessera.io/service"], object.name());
            assert!(backend.weight.unwrap() > 0);
            *routed.entry((object.name().to_string(), selector["tessera.io/config"].clone())).or_default() += 1;
        }
    }
    assert_eq!(routes, segments.len(), "every service has a route");
    for object in exported.of_kind("Deployment") {
        let Manifest::Deployment(deployment) = object else { unreachable!() };
        let labels = deployment.spec.as_ref().unwrap().template.metadata.as_ref().unwrap().labels.as_ref().unwrap();
        let key = (labels["tessera.io/service"].clone(), labels["tessera.io/config"].clone());
        assert_eq!(routed.get(&key), Some(&1), "{}: its pods behind one backend of its route", object.name());
    }
}

/// Measures (does not check) `apply_plan` of the plan in
/// `$TESSERA_K8S_BENCH_PLAN` against the fake API server, its nodes
/// labelled as GPU Feature Discovery does and numbered, agents played by
/// marking each node `success` for its part once its ConfigMap is there,
/// Deployments ready on apply. Run with
/// `cargo test --release -p tessera-k8s --test tests -- --ignored --nocapture apply_time`.
#[test]
#[ignore = "a measurement: run it by hand on a large plan"]
fn apply_time_of_a_large_plan_against_the_fake_server() {
    use std::time::{Duration, Instant};

    use tessera_k8s::{apply_plan, node_config_map_name, read_node_part, ApplyOptions};
    use tessera_plan::NodeRef;

    let Ok(path) = std::env::var("TESSERA_K8S_BENCH_PLAN") else {
        eprintln!("skipping: set TESSERA_K8S_BENCH_PLAN to a plan file");
        return;
    };
    let plan = tessera_store::read_plan_file(std::path::Path::new(&path), None).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = std::sync::Arc::new(tessera_k8s::FakeApiServer::start());
    let nodes: std::collections::BTreeSet<u32> = plan.gpus.iter().map(|g| g.node).collect();
    for node in &nodes {
        let mut object = crate::common::a100_node(&format!("gpu-{node}"), plan.gpus_per_node);
        object["metadata"]["labels"]["tessera.io/node"] = node.to_string().into();
        server.put(object);
    }
    server.ready_on_apply();
    let cluster = crate::common::connect(&server, dir.path());
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let agents = {
        let (server, stop) = (std::sync::Arc::clone(&server), std::sync::Arc::clone(&stop));
        std::thread::spawn(move || {
            // The ConfigMap version each agent last applied.
            let mut seen: BTreeMap<u32, serde_json::Value> = BTreeMap::new();
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                for node in &nodes {
                    let name = node_config_map_name(&NodeRef::Numbered(*node));
                    let Some(config_map) = server.get("configmaps", "tessera", &name) else { continue };
                    let version = config_map["metadata"]["resourceVersion"].clone();
                    if seen.get(node) == Some(&version) {
                        continue;
                    }
                    seen.insert(*node, version);
                    let id = read_node_part(&config_map).unwrap().id;
                    let mut object = server.get("nodes", "", &format!("gpu-{node}")).unwrap();
                    if object["metadata"]["annotations"]["tessera.io/plan-id"] != id.as_str() {
                        object["metadata"]["labels"]["tessera.io/mig.state"] = "success".into();
                        object["metadata"]["annotations"] = serde_json::json!({"tessera.io/plan-id": id});
                        server.put(object);
                    }
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        })
    };
    let options = ApplyOptions {
        namespace: "tessera".into(),
        dry_run: false,
        force_conflicts: false,
        layout_timeout: Duration::from_secs(600),
        poll: Duration::from_millis(500),
        routes: Some(tessera_k8s::GatewayRef::default()),
        pods: tessera_k8s::PodOptions::default(),
        concurrency: 32,
    };
    let started = Instant::now();
    let actions = apply_plan(&cluster, &plan, &options, &mut |_| {}).unwrap();
    let first = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let again = apply_plan(&cluster, &plan, &options, &mut |_| {}).unwrap();
    let second = started.elapsed().as_secs_f64();
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    agents.join().unwrap();
    println!(
        "apply of {} GPUs on {} nodes: {} objects in {first:.1} s; again (nothing to change): {} objects in {second:.1} s",
        plan.gpus.len(),
        server.list("nodes").len(),
        actions.len(),
        again.len()
    );
}
