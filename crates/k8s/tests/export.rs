//! A plan as manifests: valid against Kubernetes' schemas, round-tripping
//! through the k8s-openapi types, one Deployment of `procs` pods and one
//! claim per segment.

use std::collections::BTreeMap;

use gateway_api::apis::standard::httproutes::HttpRoute;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::api::resource::v1::ResourceClaim;
use serde_json::Value;
use tessera_k8s::{decision_event, manifests, DecisionEvent, Manifest, NodeDevice, DEFAULT_NAMESPACE};
use tessera_plan::NodeRef;

use crate::common::{demo_plan, export_files, validate};

/// Parses a YAML file of documents and checks that each typed object
/// gives back the same JSON.
fn round_trip(yaml: &str) -> Vec<Value> {
    let values: Vec<Value> = serde_saphyr::from_multiple(yaml).unwrap();
    values.into_iter().map(|value| round_trip_one(value, yaml)).collect()
}

fn round_trip_one(value: Value, yaml: &str) -> Value {
    let typed = match value["kind"].as_str().unwrap() {
        "ConfigMap" => serde_json::to_value(serde_json::from_value::<ConfigMap>(value.clone()).unwrap()),
        "ResourceClaim" => serde_json::to_value(serde_json::from_value::<ResourceClaim>(value.clone()).unwrap()),
        "Deployment" => serde_json::to_value(serde_json::from_value::<Deployment>(value.clone()).unwrap()),
        "Service" => serde_json::to_value(serde_json::from_value::<Service>(value.clone()).unwrap()),
        "HTTPRoute" => serde_json::to_value(serde_json::from_value::<HttpRoute>(value.clone()).unwrap()),
        other => panic!("unexpected kind {other}"),
    }
    .unwrap();
    assert_eq!(typed, value, "{yaml}");
    value
}

#[test]
fn the_demo_plan_exports_objects_that_validate_and_round_trip() {
    let plan = demo_plan();
    let exported = manifests(&plan, DEFAULT_NAMESPACE, &BTreeMap::new()).unwrap();
    let segments = plan.gpus.iter().map(|gpu| gpu.instances.len()).sum::<usize>();
    let routes = exported.of_kind("HTTPRoute").count();
    assert_eq!(routes, plan.images.len());
    let fronts = exported.of_kind("Service").count();
    assert!(routes <= fronts && fronts < segments, "a Service per service and configuration");
    assert_eq!(exported.objects.len(), exported.nodes.len() + 2 * segments + fronts + routes);
    assert!(exported.notes.is_empty(), "{:?}", exported.notes);
    let dir = tempfile::tempdir().unwrap();
    let mut nodes = 0;
    let mut documents = 0;
    for (name, yaml) in exported.files() {
        let objects = round_trip(&yaml);
        documents += objects.len();
        // The Services and routes, of no one node, are in cluster.yaml
        // (validated below; the Gateway API's HTTPRoutes, which
        // kubernetes-validate does not know, by their typed round trip and
        // the routing tests).
        if name == "cluster.yaml" {
            assert!(objects.iter().all(|o| o["kind"] == "Service" || o["kind"] == "HTTPRoute"), "{name}");
            assert_eq!(objects.len(), fronts + routes);
            continue;
        }
        // One file per node, holding that node's objects.
        let node = name.strip_prefix("node-").and_then(|n| n.strip_suffix(".yaml")).unwrap();
        assert!(
            objects.iter().all(|o| o["metadata"]["labels"]["tessera.io/node"] == node.trim_start_matches('n')),
            "{name}"
        );
        nodes += 1;
    }
    assert_eq!(documents, exported.objects.len());
    assert_eq!(nodes, exported.nodes.len());
    // The stream parses into the same documents.
    let documents: Vec<Value> = serde_saphyr::from_multiple(&exported.yaml_stream()).unwrap();
    assert_eq!(documents, exported.objects.iter().map(Manifest::to_value).collect::<Vec<_>>());
    validate(&export_files(&exported, dir.path()));
}

#[test]
fn each_segment_gets_a_claim_of_its_profile_and_a_deployment_of_procs_pods_sharing_it() {
    let plan = demo_plan();
    let exported = manifests(&plan, "inference", &BTreeMap::new()).unwrap();
    let claims: BTreeMap<&str, &ResourceClaim> = exported
        .objects
        .iter()
        .filter_map(|o| match o {
            Manifest::ResourceClaim(c) => Some((o.name(), c)),
            _ => None,
        })
        .collect();
    let mut seen = 0;
    for gpu in &plan.gpus {
        for instance in &gpu.instances {
            let name = format!(
                "{}-n{}-g{}-{}-{}",
                instance.service,
                gpu.node,
                gpu.index,
                instance.profile.replace('.', ""),
                instance.start
            );
            let Some(Manifest::Deployment(deployment)) =
                exported.objects.iter().find(|o| o.kind() == "Deployment" && o.name() == name)
            else {
                panic!("no Deployment {name}");
            };
            let spec = deployment.spec.as_ref().unwrap();
            assert_eq!(spec.replicas, Some(instance.procs as i32));
            let pod = spec.template.spec.as_ref().unwrap();
            let node_selector = pod.node_selector.as_ref().unwrap();
            assert_eq!(node_selector["tessera.io/node"], gpu.node.to_string(), "no node names: the node label");
            assert_eq!(node_selector["tessera.io/mig.state"], "success");
            let claim_name = pod.resource_claims.as_ref().unwrap()[0].resource_claim_name.as_deref().unwrap();
            let claim = claims[claim_name];
            let devices = claim.spec.devices.as_ref().unwrap();
            let request = devices.requests.as_ref().unwrap()[0].exactly.as_ref().unwrap();
            assert_eq!(request.device_class_name, "mig.nvidia.com");
            let expression = &request.selectors.as_ref().unwrap()[0].cel.as_ref().unwrap().expression;
            assert_eq!(
                expression,
                &format!(
                    "device.attributes['gpu.nvidia.com'].profile == '{}' && 'memorySlice{}' in device.capacity['gpu.nvidia.com']",
                    instance.profile, instance.start
                )
            );
            let config = &devices.config.as_ref().unwrap()[0].opaque.as_ref().unwrap();
            assert_eq!(config.driver, "gpu.nvidia.com");
            assert_eq!(
                config.parameters.0["sharing"]["mpsConfig"]["defaultActiveThreadPercentage"],
                100 / instance.procs
            );
            let container = &pod.containers[0];
            let image = &plan.images[&instance.service];
            assert_eq!(container.image.as_deref(), Some(image.image.as_str()));
            assert!(container.args.as_ref().unwrap().contains(&instance.batch.to_string()));
            assert_eq!(deployment.metadata.namespace.as_deref(), Some("inference"));
            let labels = deployment.metadata.labels.as_ref().unwrap();
            assert_eq!(labels["app.kubernetes.io/managed-by"], "tessera");
            assert_eq!(labels["tessera.io/plan-id"], exported.plan_id);
            assert_eq!(labels["tessera.io/service"], instance.service);
            seen += 1;
        }
    }
    assert_eq!(claims.len(), seen);
    // Each node's ConfigMap carries its part of the plan, as Tessera's
    // JSON; together they are the plan's GPUs.
    let mut parts = BTreeMap::new();
    for object in exported.of_kind("ConfigMap") {
        let part = tessera_k8s::read_node_part(&object.to_value()).unwrap();
        assert_eq!(part.plan, tessera_k8s::node_part(&plan, part.number));
        assert!(part.plan.gpus.iter().all(|g| g.node == part.number));
        assert_eq!(part.whole_id, exported.plan_id);
        parts.insert(part.number, part);
    }
    let merged = tessera_k8s::merge_parts(&parts).unwrap();
    assert_eq!(merged.gpus, plan.gpus);
    assert_eq!(merged.images, plan.images);
}

#[test]
fn reported_devices_pin_each_claim_to_its_mig_device_and_change_its_name() {
    let plan = demo_plan();
    let gpu = &plan.gpus[0];
    let instance = &gpu.instances[0];
    let device = NodeDevice {
        gpu: gpu.index,
        profile: instance.profile.clone(),
        start: instance.start,
        uuid: "MIG-1234".into(),
        parent_uuid: "GPU-abcd".into(),
    };
    let plain = manifests(&plan, "t", &BTreeMap::new()).unwrap();
    let pinned = manifests(&plan, "t", &BTreeMap::from([(gpu.node, vec![device])])).unwrap();
    let claim_of = |m: &tessera_k8s::Manifests| m.objects.iter().find(|o| o.kind() == "ResourceClaim").unwrap().clone();
    let (before, after) = (claim_of(&plain), claim_of(&pinned));
    assert_ne!(before.name(), after.name(), "a claim's spec cannot change: a new selector is a new claim");
    let Manifest::ResourceClaim(claim) = after else { unreachable!() };
    let expression = &claim.spec.devices.unwrap().requests.unwrap()[0].exactly.clone().unwrap().selectors.unwrap()[0]
        .cel
        .clone()
        .unwrap()
        .expression;
    assert!(expression.ends_with(
        "&& device.attributes['gpu.nvidia.com'].parentUUID == 'GPU-abcd' && device.attributes['gpu.nvidia.com'].uuid == 'MIG-1234'"
    ), "{expression}");
}

#[test]
fn a_service_without_an_image_is_named_and_nothing_is_made() {
    let mut plan = demo_plan();
    plan.images.remove("photo-tagging");
    plan.images.remove("chat-assist");
    let error = manifests(&plan, "t", &BTreeMap::new()).unwrap_err().to_string();
    assert_eq!(
        error,
        "services have no container image: chat-assist, photo-tagging (add `image` and `args` columns to the SLO file and plan again)"
    );
}

#[test]
fn invalid_service_names_are_sanitized_deterministically_with_a_note() {
    let mut plan = demo_plan();
    for gpu in &mut plan.gpus {
        for instance in &mut gpu.instances {
            if instance.service == "photo-tagging" {
                instance.service = "Photo_Tagging".into();
            }
        }
    }
    for report in &mut plan.services {
        if report.service == "photo-tagging" {
            report.service = "Photo_Tagging".into();
        }
    }
    let image = plan.images.remove("photo-tagging").unwrap();
    plan.images.insert("Photo_Tagging".into(), image);
    let first = manifests(&plan, "t", &BTreeMap::new()).unwrap();
    assert_eq!(first.notes, ["service 'Photo_Tagging' is 'photo-tagging' in Kubernetes (not a valid Kubernetes name)"]);
    assert!(first.objects.iter().any(|o| o.name().starts_with("photo-tagging-n0-")));
    assert_eq!(first, manifests(&plan, "t", &BTreeMap::new()).unwrap(), "the same names every time");
}

#[test]
fn named_nodes_pin_pods_by_host_name_and_a_missing_name_is_an_error() {
    let mut plan = demo_plan();
    let nodes = plan.gpus.iter().map(|g| g.node).max().unwrap() + 1;
    plan.node_names = (0..nodes).map(|n| format!("gpu-node-{n}")).collect();
    let exported = manifests(&plan, "t", &BTreeMap::new()).unwrap();
    assert_eq!(exported.nodes[&0], NodeRef::Named("gpu-node-0".into()));
    let Some(Manifest::Deployment(deployment)) = exported.objects.iter().find(|o| o.kind() == "Deployment") else {
        panic!()
    };
    let selector = deployment.spec.clone().unwrap().template.spec.unwrap().node_selector.unwrap();
    assert!(selector["kubernetes.io/hostname"].starts_with("gpu-node-"));
    plan.node_names.truncate(0);
    plan.node_names.push("only-one".into());
    if nodes > 1 {
        let error = manifests(&plan, "t", &BTreeMap::new()).unwrap_err().to_string();
        assert!(error.starts_with("the plan's GPUs on node 1 have no node name (the plan names 1 node)"), "{error}");
    }
}

#[test]
fn an_autopilot_decision_event_validates() {
    let dir = tempfile::TempDir::new().unwrap();
    let decision = DecisionEvent {
        time_s: 1_764_000_000.5,
        reason: "ScaleUp",
        action: "Reconfigure",
        note: "scaling up: photo-tagging at 700.0 req/s: 92.10% < 99%",
        warning: false,
    };
    let (name, event) = decision_event(DEFAULT_NAMESPACE, &decision).unwrap();
    let typed: k8s_openapi::api::events::v1::Event = serde_json::from_value(event.clone()).unwrap();
    assert_eq!(typed.metadata.name.as_deref(), Some(name.as_str()));
    let path = dir.path().join("event.yaml");
    std::fs::write(&path, serde_json::to_string(&event).unwrap()).unwrap();
    validate(&[path]);
}

#[test]
fn the_install_manifests_validate() {
    let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/kubernetes");
    let mut paths: Vec<_> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    paths.sort();
    assert!(paths.len() >= 3, "{paths:?}");
    for path in &paths {
        let text = std::fs::read_to_string(path).unwrap();
        let documents: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
        assert!(!documents.is_empty(), "{}", path.display());
    }
    validate(&paths);
}

#[test]
fn a_node_whose_part_would_exceed_the_object_limit_is_refused_naming_it() {
    let mut plan = demo_plan();
    let service = plan.gpus[0].instances[0].service.clone();
    plan.images.get_mut(&service).unwrap().args = vec!["x".repeat(tessera_k8s::MAX_OBJECT_BYTES)];
    let error = manifests(&plan, "t", &BTreeMap::new()).unwrap_err().to_string();
    assert!(
        error.starts_with(&format!("the node numbered {}'s part of the plan is ", plan.gpus[0].node))
            && error.contains("bytes, over Kubernetes' limit of 1048576 bytes for one object"),
        "{error}"
    );
}
