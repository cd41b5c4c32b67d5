//! Routing as planned and pods an admin accepts: one Service per segment
//! selecting exactly its pods, one HTTPRoute per service whose weights keep
//! the segments' capacities' proportions, the Gateway configurable or no
//! routes at all, requests, probes and the rolling update; invalid plans
//! refused.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use tessera_core::Plan;
use tessera_k8s::{manifests, manifests_with, ExportOptions, GatewayRef, Manifest, Manifests, Requests};

use crate::common::{demo_plan, validate};

fn services(exported: &Manifests) -> Vec<&Service> {
    exported.objects.iter().filter_map(|o| if let Manifest::Service(s) = o { Some(s.as_ref()) } else { None }).collect()
}

fn deployments(exported: &Manifests) -> Vec<&Deployment> {
    exported
        .objects
        .iter()
        .filter_map(|o| if let Manifest::Deployment(d) = o { Some(d.as_ref()) } else { None })
        .collect()
}

/// The demo plan with capacities recorded (as the percentile rule does),
/// deliberately unequal and unlike the throughputs.
fn plan_with_capacities() -> Plan {
    let mut plan = demo_plan();
    for (n, instance) in plan.gpus.iter_mut().flat_map(|g| &mut g.instances).enumerate() {
        instance.capacity_rps = Some(instance.throughput_rps * (0.5 + 0.07 * n as f64));
    }
    plan
}

#[test]
fn each_segment_has_one_service_selecting_exactly_its_pods() {
    let plan = demo_plan();
    let exported = manifests(&plan, "t", &BTreeMap::new()).unwrap();
    let services = services(&exported);
    let deployments = deployments(&exported);
    assert_eq!(services.len(), deployments.len());
    for service in &services {
        let spec = service.spec.as_ref().unwrap();
        let selector = spec.selector.as_ref().unwrap();
        let selected: Vec<&&Deployment> = deployments
            .iter()
            .filter(|d| {
                let labels = d.spec.as_ref().unwrap().template.metadata.as_ref().unwrap().labels.as_ref().unwrap();
                selector.iter().all(|(k, v)| labels.get(k) == Some(v))
            })
            .collect();
        assert_eq!(selected.len(), 1, "{:?} selects {} Deployments", service.metadata.name, selected.len());
        let port = &spec.ports.as_ref().unwrap()[0];
        let container = &selected[0].spec.as_ref().unwrap().template.spec.as_ref().unwrap().containers[0];
        let container_port = container.ports.as_ref().unwrap()[0].container_port;
        assert_eq!(
            port.target_port,
            Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(container_port))
        );
        assert_eq!(spec.session_affinity.as_deref(), Some("None"));
    }
}

#[test]
fn each_service_has_one_route_over_its_segments_weighted_by_capacity() {
    let plan = plan_with_capacities();
    let exported = manifests(&plan, "t", &BTreeMap::new()).unwrap();
    let names: BTreeSet<String> = services(&exported).iter().map(|s| s.metadata.name.clone().unwrap()).collect();
    let routes: Vec<_> =
        exported.objects.iter().filter_map(|o| if let Manifest::HttpRoute(r) = o { Some(r) } else { None }).collect();
    let planned: BTreeSet<&str> = plan.gpus.iter().flat_map(|g| &g.instances).map(|i| i.service.as_str()).collect();
    assert_eq!(routes.len(), planned.len(), "one route per service");
    for route in routes {
        let service = route.metadata.name.as_deref().unwrap();
        let parents = route.spec.parent_refs.as_ref().unwrap();
        assert_eq!(parents.len(), 1);
        assert_eq!((parents[0].name.as_str(), parents[0].namespace.as_deref()), ("tessera", None), "the default");
        let rules = route.spec.rules.as_ref().unwrap();
        assert_eq!(rules.len(), 1);
        let path = rules[0].matches.as_ref().unwrap()[0].path.as_ref().unwrap();
        assert_eq!(path.value.as_deref(), Some(format!("/{service}").as_str()));
        let backends = rules[0].backend_refs.as_ref().unwrap();
        assert!(backends.len() <= 16, "the Gateway API allows 16 backends per rule");
        // The segments of the service, in plan order, with their capacities.
        let segments: Vec<(String, f64)> = plan
            .gpus
            .iter()
            .flat_map(|g| g.instances.iter().map(move |i| (g, i)))
            .filter(|(_, i)| i.service == service)
            .map(|(g, i)| {
                (format!("{service}-n{}-g{}-{}-{}", g.node, g.index, i.profile.replace('.', ""), i.start), i.capacity())
            })
            .collect();
        assert_eq!(
            backends.iter().map(|b| b.name.clone()).collect::<Vec<_>>(),
            segments.iter().map(|s| s.0.clone()).collect::<Vec<_>>()
        );
        let total_weight: f64 = backends.iter().map(|b| f64::from(b.weight.unwrap())).sum();
        let total_capacity: f64 = segments.iter().map(|s| s.1).sum();
        for (backend, (_, capacity)) in backends.iter().zip(&segments) {
            assert!(names.contains(&backend.name), "{} is no Service", backend.name);
            let weight = backend.weight.unwrap();
            assert!((0..=1_000_000).contains(&weight));
            let routed = f64::from(weight) / total_weight;
            let share = capacity / total_capacity;
            assert!((routed / share - 1.0).abs() <= 1e-3, "{}: routed {routed}, planned {share}", backend.name);
            assert_eq!(backend.port, Some(80));
        }
        assert!(backends.iter().any(|b| b.weight == Some(1_000_000)), "the largest segment has the largest weight");
    }
}

#[test]
fn weights_follow_the_recorded_capacity_not_the_throughput() {
    let mut plan = demo_plan();
    let service = plan.gpus[0].instances[0].service.clone();
    let mut segments = plan.gpus.iter_mut().flat_map(|g| &mut g.instances).filter(|i| i.service == service);
    let (first, second) = (segments.next().unwrap(), segments.next().expect("the demo service has two segments"));
    first.capacity_rps = Some(300.0);
    second.capacity_rps = Some(100.0);
    let exported = manifests(&plan, "t", &BTreeMap::new()).unwrap();
    let Some(Manifest::HttpRoute(route)) =
        exported.objects.iter().find(|o| o.kind() == "HTTPRoute" && o.name() == service)
    else {
        panic!("no route for {service}")
    };
    let weights: Vec<i32> = route.spec.rules.as_ref().unwrap()[0]
        .backend_refs
        .as_ref()
        .unwrap()
        .iter()
        .map(|b| b.weight.unwrap())
        .collect();
    assert_eq!(&weights[..2], &[1_000_000, 333_333]);
}

#[test]
fn the_gateway_is_configurable_and_routes_can_be_left_out() {
    let plan = demo_plan();
    let options = ExportOptions { routes: Some("infra/shared-gw:https".parse().unwrap()), ..ExportOptions::new("t") };
    let exported = manifests_with(&plan, &options, &BTreeMap::new()).unwrap();
    let Some(Manifest::HttpRoute(route)) = exported.of_kind("HTTPRoute").next() else { panic!() };
    let parent = &route.spec.parent_refs.as_ref().unwrap()[0];
    assert_eq!(
        (parent.name.as_str(), parent.namespace.as_deref(), parent.section_name.as_deref()),
        ("shared-gw", Some("infra"), Some("https"))
    );
    let bare =
        manifests_with(&plan, &ExportOptions { routes: None, ..ExportOptions::new("t") }, &BTreeMap::new()).unwrap();
    assert_eq!(bare.of_kind("HTTPRoute").count(), 0);
    assert_eq!(bare.of_kind("Service").count(), bare.of_kind("Deployment").count(), "Services stay");
    assert_eq!(GatewayRef::default().to_string(), "tessera");
}

#[test]
fn pods_get_requests_probes_and_a_rolling_update_that_never_adds_a_process() {
    let plan = demo_plan();
    let mut options = ExportOptions::new("t");
    let heavy = plan.gpus[0].instances[0].service.clone();
    options.pods.service_requests.insert(heavy.clone(), Requests::parse("3,12Gi").unwrap());
    options.pods.port = 9000;
    options.pods.probe_path = "/ready".into();
    let exported = manifests_with(&plan, &options, &BTreeMap::new()).unwrap();
    for deployment in deployments(&exported) {
        let spec = deployment.spec.as_ref().unwrap();
        let strategy = spec.strategy.as_ref().unwrap();
        assert_eq!(strategy.type_.as_deref(), Some("RollingUpdate"));
        let rolling = strategy.rolling_update.as_ref().unwrap();
        use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
        assert_eq!(
            (rolling.max_surge.clone(), rolling.max_unavailable.clone()),
            (Some(IntOrString::Int(0)), Some(IntOrString::Int(1)))
        );
        let container = &spec.template.spec.as_ref().unwrap().containers[0];
        let resources = container.resources.as_ref().unwrap();
        let requests = resources.requests.as_ref().unwrap();
        let service = &deployment.metadata.labels.as_ref().unwrap()["tessera.io/service"];
        let (cpu, memory) = if *service == heavy { ("3", "12Gi") } else { ("1", "4Gi") };
        assert_eq!((requests["cpu"].0.as_str(), requests["memory"].0.as_str()), (cpu, memory), "{service}");
        assert_eq!(resources.limits.as_ref().unwrap()["memory"].0, memory);
        assert!(!resources.limits.as_ref().unwrap().contains_key("cpu"), "no CPU limit");
        for probe in [&container.readiness_probe, &container.liveness_probe, &container.startup_probe] {
            let get = probe.as_ref().unwrap().http_get.as_ref().unwrap();
            assert_eq!(
                (get.path.as_deref(), &get.port),
                (Some("/ready"), &k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(9000))
            );
        }
    }
    // Every core object still validates strictly.
    let dir = tempfile::tempdir().unwrap();
    // The routes are in cluster.yaml: kubernetes-validate knows the core
    // kinds only.
    let paths: Vec<_> = exported
        .files()
        .filter(|(name, _)| name != "cluster.yaml")
        .map(|(name, yaml)| {
            let path = dir.path().join(name);
            std::fs::write(&path, yaml).unwrap();
            path
        })
        .collect();
    validate(&paths);
}

#[test]
fn a_plan_the_verifier_refuses_is_not_exported() {
    let mut plan = demo_plan();
    let gpu = plan.gpus.iter_mut().find(|g| g.instances.iter().any(|i| i.profile == "3g.40gb")).expect("a 3g");
    let instance = gpu.instances.iter_mut().find(|i| i.profile == "3g.40gb").unwrap();
    instance.start = 2;
    let error = manifests(&plan, "t", &BTreeMap::new()).unwrap_err().to_string();
    assert!(error.starts_with("the plan is invalid: node "), "{error}");
    assert!(error.contains("3g.40gb cannot start at memory slice 2"), "{error}");
    assert!(!error.contains('\n'), "one line: {error}");
}
