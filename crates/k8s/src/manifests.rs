//! A plan as Kubernetes objects: the plan for the node agents (a
//! ConfigMap per node, see [`crate::node_plan`]), then per segment a
//! `ResourceClaim` for its MIG device and a `Deployment` of `procs` pods
//! sharing it through MPS, per service and configuration a `Service` over
//! those pods, and per service an `HTTPRoute` weighing its configurations
//! by capacity (see [`crate::routing`] for the serving discipline, and
//! [`crate::pods`] for the pods' requests, probes and updates).
//!
//! A shared instance (several light services, one executor) is one claim
//! and one single-pod Deployment `shared-nN-gG-P-T` running its members'
//! common image as a multi-model server: `TESSERA_SHARING` names the
//! discipline, `TESSERA_MEMBERS` (JSON) lists each member's `service`,
//! `model` and `batch`. One Service of the same name selects its pod, and
//! each member's HTTPRoute reaches it with the member's name in the
//! `X-Tessera-Service` header ([`crate::routing::SHARED_MEMBER_HEADER`]).
//! Members of different images or arguments are refused, named.
//!
//! Segment `S` on node `N`, GPU `G`, instance `P@T` is the Deployment
//! `S-nN-gG-P-T` (P without dots). Its claim asks the DRA driver for a MIG
//! device of profile `P` whose memory slices start at `T` by a CEL selector;
//! once the node's agent has reported the MIG device it made for the
//! instance, the selector also names that device's UUID and its parent
//! GPU's, so the claim gets exactly the planned instance.
//!
//! The attribute names are the NVIDIA DRA driver's (k8s-dra-driver-gpu,
//! `cmd/gpu-kubelet-plugin`, read at commit 22407113): a MIG device
//! publishes the attributes `profile`, `parentUUID` and (static MIG, the
//! devices Tessera's agent makes) `uuid`; its placement is no attribute but
//! one capacity `memorySlice<i>` per memory slice it holds, so the start
//! slice is selected by `'memorySlice<T>' in device.capacity[…]`. The
//! driver's dynamic-MIG mode publishes no memory slices; its devices would
//! not match, which is why Tessera runs with static MIG devices. A claim's spec cannot change, so its name ends in a
//! hash of its spec: a new selector is a new claim, and the old one is
//! pruned.

use std::collections::BTreeMap;

use gateway_api::apis::standard::httproutes::HttpRoute;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::api::resource::v1::ResourceClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use tessera_core::{GpuAssignment, InstanceAssignment, Plan, SharedInstance};
use tessera_plan::NodeRef;

use crate::error::K8sError;
use crate::labels::{CONFIG_LABEL, MANAGED_BY, NODE_NUMBER_LABEL, PLAN_ID, SERVICE_LABEL};
use crate::names::{config_name, plan_id, profile_part, service_names};
use crate::node_plan::{node_config_map, node_parts};
use crate::options::ExportOptions;
use crate::routing::{
    backend_name, backend_service, check_backend_counts, service_route, shared_instance_service, Backend,
};
use crate::segment_objects::{claim, deployment, selector_expression, NodeDevice, Workload};

/// One object, typed.
#[derive(Debug, Clone, PartialEq)]
pub enum Manifest {
    /// A node's part of the plan, for its agent.
    ConfigMap(ConfigMap),
    /// A segment's MIG device.
    ResourceClaim(ResourceClaim),
    /// A segment's processes.
    Deployment(Box<Deployment>),
    /// A service's pods of one configuration behind one address.
    Service(Box<Service>),
    /// A service's requests split across its segments.
    HttpRoute(Box<HttpRoute>),
}

impl Manifest {
    /// Its kind.
    pub fn kind(&self) -> &'static str {
        match self {
            Manifest::ConfigMap(_) => "ConfigMap",
            Manifest::ResourceClaim(_) => "ResourceClaim",
            Manifest::Deployment(_) => "Deployment",
            Manifest::Service(_) => "Service",
            Manifest::HttpRoute(_) => "HTTPRoute",
        }
    }

    fn metadata(&self) -> &ObjectMeta {
        match self {
            Manifest::ConfigMap(object) => &object.metadata,
            Manifest::ResourceClaim(object) => &object.metadata,
            Manifest::Deployment(object) => &object.metadata,
            Manifest::Service(object) => &object.metadata,
            Manifest::HttpRoute(object) => &object.metadata,
        }
    }

    /// Its labels.
    pub fn labels(&self) -> Option<&BTreeMap<String, String>> {
        self.metadata().labels.as_ref()
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        match self {
            Manifest::ConfigMap(object) => &mut object.metadata,
            Manifest::ResourceClaim(object) => &mut object.metadata,
            Manifest::Deployment(object) => &mut object.metadata,
            Manifest::Service(object) => &mut object.metadata,
            Manifest::HttpRoute(object) => &mut object.metadata,
        }
    }

    /// Its name.
    pub fn name(&self) -> &str {
        self.metadata().name.as_deref().unwrap_or_default()
    }

    /// The whole object as JSON (`apiVersion` and `kind` included).
    pub fn to_value(&self) -> serde_json::Value {
        let value = match self {
            Manifest::ConfigMap(object) => serde_json::to_value(object),
            Manifest::ResourceClaim(object) => serde_json::to_value(object),
            Manifest::Deployment(object) => serde_json::to_value(object),
            Manifest::Service(object) => serde_json::to_value(object),
            Manifest::HttpRoute(object) => serde_json::to_value(object),
        };
        value.expect("Kubernetes objects always serialize")
    }

    /// As one YAML document.
    pub fn to_yaml(&self) -> String {
        let yaml = match self {
            Manifest::ConfigMap(object) => serde_saphyr::to_string(object),
            Manifest::ResourceClaim(object) => serde_saphyr::to_string(object),
            Manifest::Deployment(object) => serde_saphyr::to_string(object),
            Manifest::Service(object) => serde_saphyr::to_string(object),
            Manifest::HttpRoute(object) => serde_saphyr::to_string(object),
        };
        yaml.expect("Kubernetes objects always serialize as YAML")
    }

    /// Documents in one YAML stream, each after `---`.
    pub fn yaml_documents<'m>(objects: impl IntoIterator<Item = &'m Manifest>) -> String {
        let mut yaml = String::new();
        for object in objects {
            yaml.push_str("---\n");
            yaml.push_str(&object.to_yaml());
        }
        yaml
    }
}

/// A plan's objects, in the order they are applied, and what the reader
/// should know (names that had to change).
#[derive(Debug, Clone, PartialEq)]
pub struct Manifests {
    /// The plan's id.
    pub plan_id: String,
    /// The namespace of every object.
    pub namespace: String,
    /// The plan's nodes, by node number.
    pub nodes: BTreeMap<u32, NodeRef>,
    /// The objects: the nodes' ConfigMaps, the claims, the Deployments, the
    /// Services (one per service and configuration), the HTTPRoutes.
    pub objects: Vec<Manifest>,
    /// Names that were changed to be valid Kubernetes names.
    pub notes: Vec<String>,
}

impl Manifests {
    /// One YAML stream of every object, `---` between documents.
    pub fn yaml_stream(&self) -> String {
        Manifest::yaml_documents(&self.objects)
    }

    /// The files of an export, made one at a time: per plan node one
    /// multi-document file, `node-NAME.yaml` (`node-nN.yaml` on a plan
    /// without node names), with that node's objects in apply order (its
    /// ConfigMap, claims, Deployments); objects of no one node (those
    /// without a `tessera.io/node` label: the Services and HTTPRoutes) in
    /// `cluster.yaml`. `kubectl apply -f DIR` applies them all.
    pub fn files(&self) -> impl Iterator<Item = (String, String)> + '_ {
        let mut groups: BTreeMap<String, Vec<&Manifest>> = BTreeMap::new();
        for object in &self.objects {
            let node = object
                .metadata()
                .labels
                .as_ref()
                .and_then(|labels| labels.get(NODE_NUMBER_LABEL))
                .and_then(|n| n.parse::<u32>().ok())
                .and_then(|n| self.nodes.get(&n));
            let file = node.map_or_else(|| "cluster.yaml".to_string(), node_file_name);
            groups.entry(file).or_default().push(object);
        }
        groups.into_iter().map(|(file, objects)| (file, Manifest::yaml_documents(objects)))
    }

    /// Labels every object as belonging to plan `id` (a transition's
    /// intermediate states belong to the plan being applied).
    pub fn relabel(&mut self, id: &str) {
        for object in &mut self.objects {
            if let Some(labels) = object.metadata_mut().labels.as_mut() {
                if labels.contains_key(PLAN_ID) {
                    labels.insert(PLAN_ID.into(), id.into());
                }
            }
        }
        self.plan_id = id.to_string();
    }

    /// The objects of one kind.
    pub fn of_kind<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a Manifest> + 'a {
        self.objects.iter().filter(move |object| object.kind() == kind)
    }
}

/// The export file of a node's objects: `node-NAME.yaml`, or
/// `node-nN.yaml` on a plan without node names.
pub fn node_file_name(node: &NodeRef) -> String {
    match node {
        NodeRef::Named(name) => format!("node-{name}.yaml"),
        NodeRef::Numbered(number) => format!("node-n{number}.yaml"),
    }
}

/// Labels every object of the plan carries.
fn common_labels(plan_id: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(MANAGED_BY.to_string(), "tessera".to_string()), (PLAN_ID.to_string(), plan_id.to_string())])
}

/// The segment's name: `S-nN-gG-P-T`.
fn segment_name(service: &str, gpu: &GpuAssignment, instance: &InstanceAssignment) -> String {
    format!("{service}-n{}-g{}-{}-{}", gpu.node, gpu.index, profile_part(&instance.profile), instance.start)
}

/// A plan's objects, made node by node: what every object needs (the
/// plan's id, the services' Kubernetes names, each node's part, the export
/// options) is decided once for the whole plan, so that a node's objects
/// are the same whether made alone or with all the others, and a fleet's
/// objects need not all be in memory at once. The Services and HTTPRoutes,
/// each over a service's segments across nodes, are made apart
/// ([`PlanObjects::routing_objects`]).
pub struct PlanObjects<'a> {
    plan: &'a Plan,
    options: &'a ExportOptions,
    devices: &'a BTreeMap<u32, Vec<NodeDevice>>,
    plan_id: String,
    names: BTreeMap<String, String>,
    parts: BTreeMap<u32, Plan>,
    /// Per service (Kubernetes name), per configuration, its summed
    /// capacity in requests/s.
    backends: BTreeMap<String, BTreeMap<String, f64>>,
    /// Per service (Kubernetes name) served by shared instances, per shared
    /// instance (its Deployment and Service name), the member's capacity in
    /// requests/s.
    shared_backends: BTreeMap<String, BTreeMap<String, f64>>,
    /// The plan's nodes, by node number.
    pub nodes: BTreeMap<u32, NodeRef>,
    /// Names that were changed to be valid Kubernetes names (one note).
    pub notes: Vec<String>,
}

impl<'a> PlanObjects<'a> {
    /// The objects that run `plan` as `options` say; `devices` (by node
    /// number) are the MIG devices the agents reported, pinning each claim
    /// to its instance. A plan the verifier's structural checks refuse (the
    /// MIG lattice, the fleet) is refused with their reasons. Every service
    /// needs an image (the plan's `images`, from its SLO file's `image` and
    /// `args` columns); those without one are named in the error. With
    /// routes, a service of more configurations than one route rule may
    /// weigh is refused, named.
    pub fn new(
        plan: &'a Plan,
        options: &'a ExportOptions,
        devices: &'a BTreeMap<u32, Vec<NodeDevice>>,
    ) -> Result<PlanObjects<'a>, K8sError> {
        tessera_plan::check_structure(plan)?;
        PlanObjects::of_state(plan, options, devices)
    }

    /// As [`PlanObjects::new`], for a state of a transition between two
    /// plans (a GPU may be drained empty): no structural check.
    pub(crate) fn of_state(
        plan: &'a Plan,
        options: &'a ExportOptions,
        devices: &'a BTreeMap<u32, Vec<NodeDevice>>,
    ) -> Result<PlanObjects<'a>, K8sError> {
        let members = plan.shared_instances().flat_map(|(_, shared)| &shared.members).map(|m| m.service.as_str());
        let mut missing: Vec<&str> = plan
            .gpus
            .iter()
            .flat_map(|gpu| &gpu.instances)
            .map(|instance| instance.service.as_str())
            .chain(members)
            .filter(|service| !plan.images.contains_key(*service))
            .collect();
        missing.sort_unstable();
        missing.dedup();
        if !missing.is_empty() {
            return Err(K8sError::Plan(format!(
                "{} no container image: {} (add `image` and `args` columns to the SLO file and plan again)",
                if missing.len() == 1 { "1 service has" } else { "services have" },
                missing.join(", ")
            )));
        }
        for (gpu, shared) in plan.shared_instances() {
            shared_image(plan, gpu, shared)?;
        }
        let mut nodes = BTreeMap::new();
        for gpu in &plan.gpus {
            if let std::collections::btree_map::Entry::Vacant(entry) = nodes.entry(gpu.node) {
                entry.insert(NodeRef::of(plan, gpu.node)?);
            }
        }
        let (names, notes) = service_names(
            plan.services
                .iter()
                .map(|report| report.service.as_str())
                .chain(plan.gpus.iter().flat_map(|gpu| &gpu.instances).map(|instance| instance.service.as_str()))
                .chain(plan.shared_instances().flat_map(|(_, shared)| &shared.members).map(|m| m.service.as_str()))
                .collect::<std::collections::BTreeSet<_>>(),
        );
        let mut backends: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
        for gpu in &plan.gpus {
            for instance in &gpu.instances {
                let configs = backends.entry(names[&instance.service].clone()).or_default();
                *configs.entry(config_name(gpu.gpu_model, instance)).or_default() += instance.capacity();
            }
        }
        let mut shared_backends: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
        for (gpu, shared) in plan.shared_instances() {
            for member in &shared.members {
                let entry = shared_backends.entry(names[&member.service].clone()).or_default();
                *entry.entry(shared_segment_name(gpu, shared)).or_default() += member.capacity_rps;
            }
        }
        if options.routes.is_some() {
            let services: std::collections::BTreeSet<&String> = backends.keys().chain(shared_backends.keys()).collect();
            check_backend_counts(services.into_iter().map(|service| {
                let count = |of: &BTreeMap<String, BTreeMap<String, f64>>| of.get(service).map_or(0, BTreeMap::len);
                (service.as_str(), count(&backends) + count(&shared_backends))
            }))?;
        }
        Ok(PlanObjects {
            plan,
            options,
            devices,
            plan_id: plan_id(plan),
            names,
            parts: node_parts(plan),
            backends,
            shared_backends,
            nodes,
            notes,
        })
    }

    /// Node `number`'s objects: its ConfigMap, then per segment its claim and
    /// Deployment (none for a node without GPUs in the plan).
    pub fn node_objects(&self, number: u32) -> Result<Vec<Manifest>, K8sError> {
        let (Some(node), Some(part)) = (self.nodes.get(&number), self.parts.get(&number)) else {
            return Ok(Vec::new());
        };
        let namespace = self.options.namespace.as_str();
        let mut objects = vec![Manifest::ConfigMap(node_config_map(part, number, node, namespace, &self.plan_id)?)];
        let mut deployments = Vec::new();
        for gpu in &part.gpus {
            for instance in &gpu.instances {
                let service = &self.names[&instance.service];
                let segment = segment_name(service, gpu, instance);
                let mut labels = common_labels(&self.plan_id);
                labels.insert(SERVICE_LABEL.into(), service.clone());
                labels.insert(NODE_NUMBER_LABEL.into(), gpu.node.to_string());
                let device = self.devices.get(&gpu.node).and_then(|list| {
                    list.iter()
                        .find(|d| d.gpu == gpu.index && d.profile == instance.profile && d.start == instance.start)
                });
                let expression = selector_expression(&instance.profile, instance.start, device);
                let claim = claim(namespace, &segment, labels.clone(), expression, instance.procs);
                let placed = (node, claim.metadata.name.clone().unwrap_or_default(), &self.options.pods);
                let image = &self.plan.images[&instance.service];
                let workload = Workload::of_segment(instance, image, config_name(gpu.gpu_model, instance), placed);
                deployments.push(Manifest::Deployment(Box::new(deployment(namespace, &segment, labels, workload))));
                objects.push(Manifest::ResourceClaim(claim));
            }
            for shared in &gpu.shared {
                let segment = shared_segment_name(gpu, shared);
                let mut labels = common_labels(&self.plan_id);
                labels.insert(NODE_NUMBER_LABEL.into(), gpu.node.to_string());
                let device = self.devices.get(&gpu.node).and_then(|list| {
                    list.iter().find(|d| d.gpu == gpu.index && d.profile == shared.profile && d.start == shared.start)
                });
                let expression = selector_expression(&shared.profile, shared.start, device);
                let claim = claim(namespace, &segment, labels.clone(), expression, 1);
                let image = shared_image(self.plan, gpu, shared)?;
                let config = format!("{}-{}-shared", gpu.gpu_model, profile_part(&shared.profile));
                let placed = (node, claim.metadata.name.clone().unwrap_or_default(), &self.options.pods);
                let workload = Workload::of_shared(&segment, shared, image, config, placed);
                deployments.push(Manifest::Deployment(Box::new(deployment(namespace, &segment, labels, workload))));
                objects.push(Manifest::ResourceClaim(claim));
            }
        }
        objects.extend(deployments);
        Ok(objects)
    }

    /// The objects over nodes: per service and configuration a Service
    /// over its pods, then (unless the options ask for no routes) per
    /// service an HTTPRoute over those Services, weighted by their
    /// capacities.
    pub fn routing_objects(&self) -> Vec<Manifest> {
        let namespace = self.options.namespace.as_str();
        let labels_of = |service: &str| {
            let mut labels = common_labels(&self.plan_id);
            labels.insert(SERVICE_LABEL.into(), service.to_string());
            labels
        };
        let mut objects: Vec<Manifest> = Vec::new();
        for (service, configs) in &self.backends {
            for config in configs.keys() {
                let mut labels = labels_of(service);
                labels.insert(CONFIG_LABEL.into(), config.clone());
                let front = backend_service(namespace, service, config, labels, self.options.pods.port);
                objects.push(Manifest::Service(Box::new(front)));
            }
        }
        let shared_segments: std::collections::BTreeSet<&String> =
            self.shared_backends.values().flat_map(BTreeMap::keys).collect();
        for segment in shared_segments {
            let front =
                shared_instance_service(namespace, segment, common_labels(&self.plan_id), self.options.pods.port);
            objects.push(Manifest::Service(Box::new(front)));
        }
        let Some(gateway) = &self.options.routes else { return objects };
        let plan_names: BTreeMap<&str, &str> =
            self.names.iter().map(|(plan_name, name)| (name.as_str(), plan_name.as_str())).collect();
        let services: std::collections::BTreeSet<&String> =
            self.backends.keys().chain(self.shared_backends.keys()).collect();
        for service in services {
            let dedicated = self.backends.get(service).into_iter().flatten().map(|(config, capacity_rps)| Backend {
                service: backend_name(service, config),
                capacity_rps: *capacity_rps,
            });
            let shared = self.shared_backends.get(service);
            let on_shared = shared
                .into_iter()
                .flatten()
                .map(|(segment, capacity_rps)| Backend { service: segment.clone(), capacity_rps: *capacity_rps });
            let backends: Vec<Backend> = dedicated.chain(on_shared).collect();
            let member = shared.and(plan_names.get(service.as_str()).copied());
            let route = service_route(namespace, service, labels_of(service), gateway, &backends, member);
            objects.push(Manifest::HttpRoute(Box::new(route)));
        }
        objects
    }
}

/// The one image of `shared`'s members (its multi-model server): every
/// member must have an image, and the same one with the same arguments.
fn shared_image<'p>(
    plan: &'p Plan,
    gpu: &GpuAssignment,
    shared: &SharedInstance,
) -> Result<&'p tessera_core::ServiceImage, K8sError> {
    let mut images = shared.members.iter().map(|m| (m.service.as_str(), plan.images.get(&m.service)));
    let instance = || format!("node {} gpu {} {}@{}", gpu.node, gpu.index, shared.profile, shared.start);
    let Some((first, Some(image))) = images.next() else {
        return Err(K8sError::Plan(format!("{}: a shared instance's first member has no container image", instance())));
    };
    for (service, other) in images {
        if other != Some(image) {
            return Err(K8sError::Plan(format!(
                "{}: {first} and {service} share the instance but not one container image and arguments; a shared \
                 instance runs one multi-model server (give its members one `image` and `args`, or plan without \
                 --share)",
                instance()
            )));
        }
    }
    Ok(image)
}

/// A shared instance's Deployment (and Service) name: `shared-nN-gG-P-T`.
fn shared_segment_name(gpu: &GpuAssignment, shared: &SharedInstance) -> String {
    format!("shared-n{}-g{}-{}-{}", gpu.node, gpu.index, profile_part(&shared.profile), shared.start)
}

/// The order objects are applied in: the nodes' ConfigMaps, the claims,
/// the Deployments, the Services, the HTTPRoutes.
fn apply_rank(object: &Manifest) -> u8 {
    match object {
        Manifest::ConfigMap(_) => 0,
        Manifest::ResourceClaim(_) => 1,
        Manifest::Deployment(_) => 2,
        Manifest::Service(_) => 3,
        Manifest::HttpRoute(_) => 4,
    }
}

/// The objects that run `plan` in `namespace` with the default
/// [`ExportOptions`] (routes on the Gateway `tessera` of the namespace); see
/// [`manifests_with`].
pub fn manifests(
    plan: &Plan,
    namespace: &str,
    devices: &BTreeMap<u32, Vec<NodeDevice>>,
) -> Result<Manifests, K8sError> {
    manifests_with(plan, &ExportOptions::new(namespace), devices)
}

/// The objects that run `plan` as `options` say (see [`PlanObjects::new`]),
/// all of them, in apply order.
pub fn manifests_with(
    plan: &Plan,
    options: &ExportOptions,
    devices: &BTreeMap<u32, Vec<NodeDevice>>,
) -> Result<Manifests, K8sError> {
    all_objects(PlanObjects::new(plan, options, devices)?, options)
}

/// The objects of a state of a transition (see [`PlanObjects::of_state`]).
pub(crate) fn state_objects(
    state: &Plan,
    options: &ExportOptions,
    devices: &BTreeMap<u32, Vec<NodeDevice>>,
) -> Result<Manifests, K8sError> {
    all_objects(PlanObjects::of_state(state, options, devices)?, options)
}

/// Every object `made` makes, in apply order.
fn all_objects(made: PlanObjects<'_>, options: &ExportOptions) -> Result<Manifests, K8sError> {
    let segments = made.plan.gpus.iter().map(|g| g.instances.len()).sum::<usize>();
    let routing = made.backends.values().map(|configs| configs.len() + 1).sum::<usize>();
    let mut objects = Vec::with_capacity(made.nodes.len() + 2 * segments + routing);
    for number in made.nodes.keys() {
        objects.extend(made.node_objects(*number)?);
    }
    objects.extend(made.routing_objects());
    objects.sort_by_key(apply_rank);
    Ok(Manifests {
        plan_id: made.plan_id,
        namespace: options.namespace.clone(),
        nodes: made.nodes,
        objects,
        notes: made.notes,
    })
}
