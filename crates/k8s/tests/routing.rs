//! Routing as planned and pods an admin accepts: one Service per service
//! and configuration selecting exactly its pods of that configuration, one
//! HTTPRoute per service whose weights keep the configurations'
//! capacities' proportions (so each pod's share is its capacity's), the
//! Gateway configurable or no routes at all, requests, probes and the
//! rolling update; invalid plans refused.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use tessera_core::Plan;
use tessera_k8s::{manifests, manifests_with, ExportOptions, GatewayRef, Manifest, Manifests, Requests};

use crate::common::{demo_plan, export_files, validate};

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

/// The demo plan with a second configuration for every service of two
/// segments or more: its every other segment runs a batch one larger (the
/// objects do not look at profiles).
fn plan_of_several_configurations() -> Plan {
    let mut plan = demo_plan();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for instance in plan.gpus.iter_mut().flat_map(|g| &mut g.instances) {
        let n = seen.entry(instance.service.clone()).or_default();
        if *n % 2 == 1 {
            instance.batch += 1;
        }
        *n += 1;
    }
    plan
}

/// That plan with capacities recorded (as the percentile rule does), unlike
/// the throughputs and unequal across configurations, equal within one (as
/// a verified plan's are).
fn plan_with_equal_capacities_per_configuration() -> Plan {
    let mut plan = plan_of_several_configurations();
    let mut factors: BTreeMap<(String, String, u32, u32), f64> = BTreeMap::new();
    for instance in plan.gpus.iter_mut().flat_map(|g| &mut g.instances) {
        let key = (instance.service.clone(), instance.profile.clone(), instance.batch, instance.procs);
        let next = 0.5 + 0.07 * factors.len() as f64;
        let factor = *factors.entry(key).or_insert(next);
        instance.capacity_rps = Some(instance.throughput_rps * factor);
    }
    plan
}

/// The labels of a Deployment's pods.
fn pod_labels(deployment: &Deployment) -> &BTreeMap<String, String> {
    deployment.spec.as_ref().unwrap().template.metadata.as_ref().unwrap().labels.as_ref().unwrap()
}

/// Each segment's (Deployment, service, configuration, capacity, processes)
/// in plan order: the configuration as the routing module names it.
fn segments(plan: &Plan) -> Vec<(String, String, String, f64, u32)> {
    plan.gpus
        .iter()
        .flat_map(|g| g.instances.iter().map(move |i| (g, i)))
        .map(|(g, i)| {
            let profile = i.profile.replace('.', "");
            (
                format!("{}-n{}-g{}-{profile}-{}", i.service, g.node, g.index, i.start),
                i.service.clone(),
                format!("{}-{profile}-b{}-p{}", g.gpu_model, i.batch, i.procs),
                i.capacity(),
                i.procs,
            )
        })
        .collect()
}

#[test]
fn each_configuration_of_a_service_has_one_service_selecting_exactly_its_pods() {
    let plan = plan_of_several_configurations();
    let exported = manifests(&plan, "t", &BTreeMap::new()).unwrap();
    let services = services(&exported);
    let deployments = deployments(&exported);
    let planned = segments(&plan);
    let configurations: BTreeSet<(&str, &str)> = planned.iter().map(|s| (s.1.as_str(), s.2.as_str())).collect();
    assert_eq!(services.len(), configurations.len());
    assert!(configurations.len() < planned.len(), "the demo has segments of the same configuration");
    let mut covered = BTreeSet::new();
    for service in &services {
        let spec = service.spec.as_ref().unwrap();
        let selector = spec.selector.as_ref().unwrap();
        let selected: Vec<&&Deployment> =
            deployments.iter().filter(|d| selector.iter().all(|(k, v)| pod_labels(d).get(k) == Some(v))).collect();
        // Exactly the service's segments of one configuration.
        let names: BTreeSet<&str> = selected.iter().map(|d| d.metadata.name.as_deref().unwrap()).collect();
        let (service_name, config) = (&selector["tessera.io/service"], &selector["tessera.io/config"]);
        let expected: BTreeSet<&str> =
            planned.iter().filter(|s| s.1 == *service_name && s.2 == *config).map(|s| s.0.as_str()).collect();
        assert!(!expected.is_empty(), "{:?} selects no planned segment", service.metadata.name);
        assert_eq!(names, expected, "{:?}", service.metadata.name);
        covered.extend(names);
        assert_eq!(service.metadata.name.as_deref(), Some(format!("{service_name}-{config}").as_str()));
        let port = &spec.ports.as_ref().unwrap()[0];
        for deployment in selected {
            let container = &deployment.spec.as_ref().unwrap().template.spec.as_ref().unwrap().containers[0];
            let container_port = container.ports.as_ref().unwrap()[0].container_port;
            assert_eq!(
                port.target_port,
                Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(container_port))
            );
        }
        assert_eq!(spec.session_affinity.as_deref(), Some("None"));
    }
    assert_eq!(covered.len(), planned.len(), "every segment's pods are behind a Service");
}

#[test]
fn each_service_has_one_route_over_its_configurations_giving_each_pod_its_capacity_share() {
    let plan = plan_with_equal_capacities_per_configuration();
    let exported = manifests(&plan, "t", &BTreeMap::new()).unwrap();
    let names: BTreeSet<String> = services(&exported).iter().map(|s| s.metadata.name.clone().unwrap()).collect();
    let routes: Vec<_> =
        exported.objects.iter().filter_map(|o| if let Manifest::HttpRoute(r) = o { Some(r) } else { None }).collect();
    let planned = segments(&plan);
    let served: BTreeSet<&str> = planned.iter().map(|s| s.1.as_str()).collect();
    assert_eq!(routes.len(), served.len(), "one route per service");
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
        let total_weight: f64 = backends.iter().map(|b| f64::from(b.weight.unwrap())).sum();
        let mine: Vec<&(String, String, String, f64, u32)> = planned.iter().filter(|s| s.1 == service).collect();
        let total_capacity: f64 = mine.iter().map(|s| s.3).sum();
        // Each pod (one MPS process) gets its backend's share evenly with
        // the backend's other pods: its share must be its capacity's.
        for segment in &mine {
            let backend_name = format!("{service}-{}", segment.2);
            let backend = backends.iter().find(|b| b.name == backend_name).expect("a backend per configuration");
            assert!(names.contains(&backend.name), "{} is no Service", backend.name);
            let pods: u32 = mine.iter().filter(|s| s.2 == segment.2).map(|s| s.4).sum();
            let routed = f64::from(backend.weight.unwrap()) / total_weight / f64::from(pods);
            let share = segment.3 / f64::from(segment.4) / total_capacity;
            assert!((routed / share - 1.0).abs() <= 1e-3, "{}: routed {routed}, planned {share}", segment.0);
            assert_eq!(backend.port, Some(80));
        }
        let configurations: BTreeSet<&str> = mine.iter().map(|s| s.2.as_str()).collect();
        assert_eq!(backends.len(), configurations.len());
        assert!(backends.iter().any(|b| b.weight == Some(1_000_000)), "the largest backend has the largest weight");
    }
}

#[test]
fn weights_follow_the_recorded_capacity_not_the_throughput() {
    let mut plan = plan_of_several_configurations();
    // A service of two configurations or more: the first two get 300 and
    // 100 req/s in all, the others 1 each.
    let planned = segments(&plan);
    let service = planned
        .iter()
        .map(|s| s.1.clone())
        .find(|service| planned.iter().filter(|s| s.1 == *service).map(|s| &s.2).collect::<BTreeSet<_>>().len() >= 2)
        .expect("a demo service of two configurations");
    let configurations: Vec<String> =
        planned.iter().filter(|s| s.1 == service).map(|s| s.2.clone()).collect::<BTreeSet<_>>().into_iter().collect();
    let of = |config: &str| planned.iter().filter(|s| s.1 == service && s.2 == config).count() as f64;
    let totals = [300.0, 100.0];
    for (instance, segment) in plan.gpus.iter_mut().flat_map(|g| &mut g.instances).zip(&planned) {
        if segment.1 == service {
            let n = configurations.iter().position(|c| *c == segment.2).unwrap();
            instance.capacity_rps = Some(totals.get(n).map_or(1.0, |total| total / of(&segment.2)));
        }
    }
    let exported = manifests(&plan, "t", &BTreeMap::new()).unwrap();
    let Some(Manifest::HttpRoute(route)) =
        exported.objects.iter().find(|o| o.kind() == "HTTPRoute" && o.name() == service)
    else {
        panic!("no route for {service}")
    };
    let weight = |config: &str| {
        let backends = route.spec.rules.as_ref().unwrap()[0].backend_refs.as_ref().unwrap();
        backends.iter().find(|b| b.name == format!("{service}-{config}")).unwrap().weight.unwrap()
    };
    assert_eq!((weight(&configurations[0]), weight(&configurations[1])), (1_000_000, 333_333));
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
    assert_eq!(bare.of_kind("Service").count(), exported.of_kind("Service").count(), "Services stay");
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
    let paths = export_files(&exported, dir.path());
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
