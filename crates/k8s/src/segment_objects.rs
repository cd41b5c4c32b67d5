//! A segment's own objects: the `ResourceClaim` of its MIG device and the
//! `Deployment` of its processes (a shared instance's: one pod of the
//! members' multi-model server). See [`crate::manifests`] for how a plan
//! becomes objects and why a claim selects its device as it does.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Container, EnvVar, PodResourceClaim, PodSpec, PodTemplateSpec, ResourceClaim as ContainerClaim,
    ResourceRequirements, Toleration,
};
use k8s_openapi::api::resource::v1::{
    CELDeviceSelector, DeviceClaim, DeviceClaimConfiguration, DeviceRequest, DeviceSelector, ExactDeviceRequest,
    OpaqueDeviceConfiguration, ResourceClaim, ResourceClaimSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use serde::{Deserialize, Serialize};
use tessera_core::{InstanceAssignment, ServiceImage, SharedInstance};
use tessera_plan::NodeRef;

use crate::labels::{CONFIG_LABEL, NODE_NUMBER_LABEL, PLAN_ID, SEGMENT_LABEL, STATE_LABEL};
use crate::mig_config::{MigDeviceConfig, DRA_DRIVER, MIG_DEVICE_CLASS};
use crate::names::stable_hash;
use crate::pods::{rolling_update, PodOptions};

/// One MIG device a node's agent made for a planned instance, as it
/// reports it in [`DEVICES_ANNOTATION`](crate::DEVICES_ANNOTATION).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeDevice {
    /// The GPU's index on the node.
    pub gpu: u32,
    /// The instance's MIG profile.
    pub profile: String,
    /// Its start slice.
    pub start: u8,
    /// The MIG device's UUID.
    pub uuid: String,
    /// Its GPU's UUID (from the DRA driver's ResourceSlice).
    pub parent_uuid: String,
}

/// The pod node selector that pins to plan node `node`: its hostname, or
/// (a plan without node names) the `tessera.io/node=N` label.
fn selector(node: &NodeRef) -> (String, String) {
    match node {
        NodeRef::Named(name) => ("kubernetes.io/hostname".into(), name.clone()),
        NodeRef::Numbered(number) => (NODE_NUMBER_LABEL.into(), number.to_string()),
    }
}

/// A CEL string literal.
fn cel_string(text: &str) -> String {
    format!("'{}'", text.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// The claim's CEL expression: the profile and placement, and the devices
/// when known.
pub(crate) fn selector_expression(profile: &str, start: u8, device: Option<&NodeDevice>) -> String {
    let attribute = |name: &str| format!("device.attributes['{DRA_DRIVER}'].{name}");
    let mut terms = vec![
        format!("{} == {}", attribute("profile"), cel_string(profile)),
        format!("'memorySlice{start}' in device.capacity['{DRA_DRIVER}']"),
    ];
    if let Some(device) = device {
        terms.push(format!("{} == {}", attribute("parentUUID"), cel_string(&device.parent_uuid)));
        terms.push(format!("{} == {}", attribute("uuid"), cel_string(&device.uuid)));
    }
    terms.join(" && ")
}

/// The request name inside every claim.
const REQUEST: &str = "mig";

/// The claim of `segment`'s MIG device: `expression` selects it, and
/// MPS is configured for `procs` processes; its name ends in a hash of
/// its spec.
pub(crate) fn claim(
    namespace: &str,
    segment: &str,
    labels: BTreeMap<String, String>,
    expression: String,
    procs: u32,
) -> ResourceClaim {
    let spec = ResourceClaimSpec {
        devices: Some(DeviceClaim {
            requests: Some(vec![DeviceRequest {
                name: REQUEST.into(),
                exactly: Some(ExactDeviceRequest {
                    device_class_name: MIG_DEVICE_CLASS.into(),
                    selectors: Some(vec![DeviceSelector { cel: Some(CELDeviceSelector { expression }) }]),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            config: Some(vec![DeviceClaimConfiguration {
                requests: Some(vec![REQUEST.into()]),
                opaque: Some(OpaqueDeviceConfiguration {
                    driver: DRA_DRIVER.into(),
                    parameters: RawExtension(MigDeviceConfig::mps_for(procs).to_value()),
                }),
            }]),
            ..Default::default()
        }),
    };
    let hash = stable_hash(serde_json::to_string(&spec).expect("a claim spec serializes").as_bytes());
    ResourceClaim {
        metadata: ObjectMeta {
            name: Some(format!("{segment}-{:06x}", hash & 0xff_ffff)),
            namespace: Some(namespace.into()),
            labels: Some(labels),
            ..Default::default()
        },
        spec,
        ..Default::default()
    }
}

/// What a segment's (or a shared instance's) Deployment runs.
pub(crate) struct Workload<'a> {
    /// The service whose pod requests apply (a shared instance's
    /// Deployment name, which has none of its own, takes the default).
    requests_of: &'a str,
    /// The container's environment.
    env: Vec<(&'static str, String)>,
    /// Pods: one per MPS process.
    replicas: u32,
    /// The container's arguments.
    args: Vec<String>,
    config: String,
    image: &'a str,
    node: &'a NodeRef,
    claim: String,
    pods: &'a PodOptions,
}

impl<'a> Workload<'a> {
    /// The workload of a dedicated segment: its service's image, with
    /// `TESSERA_SERVICE`, `TESSERA_MODEL`, `TESSERA_BATCH` and
    /// `TESSERA_PROCS` set.
    pub(crate) fn of_segment(
        instance: &'a InstanceAssignment,
        image: &'a ServiceImage,
        config: String,
        (node, claim, pods): (&'a NodeRef, String, &'a PodOptions),
    ) -> Self {
        Workload {
            requests_of: &instance.service,
            env: vec![
                ("TESSERA_SERVICE", instance.service.clone()),
                ("TESSERA_MODEL", instance.model.clone()),
                ("TESSERA_BATCH", instance.batch.to_string()),
                ("TESSERA_PROCS", instance.procs.to_string()),
            ],
            replicas: instance.procs,
            args: image.args_for(instance.batch),
            config,
            image: &image.image,
            node,
            claim,
            pods,
        }
    }

    /// The workload of a shared instance: one pod of the members' common
    /// image (a multi-model server), with `TESSERA_SHARING` (the
    /// discipline) and `TESSERA_MEMBERS` (JSON: each member's `service`,
    /// `model` and `batch`) set.
    pub(crate) fn of_shared(
        segment: &'a str,
        shared: &'a SharedInstance,
        image: &'a ServiceImage,
        config: String,
        (node, claim, pods): (&'a NodeRef, String, &'a PodOptions),
    ) -> Self {
        Workload {
            requests_of: segment,
            env: shared.server_env().to_vec(),
            replicas: 1,
            args: image.args_for(1),
            config,
            image: &image.image,
            node,
            claim,
            pods,
        }
    }
}

/// The Deployment of `segment` running `workload`.
pub(crate) fn deployment(
    namespace: &str,
    segment: &str,
    labels: BTreeMap<String, String>,
    workload: Workload<'_>,
) -> Deployment {
    let pods = workload.pods;
    let (requests, limits) = pods.requests_of(workload.requests_of).requests_and_limits();
    let mut labels = labels;
    labels.insert(CONFIG_LABEL.into(), workload.config);
    let mut pod_labels: BTreeMap<String, String> = labels.clone();
    pod_labels.remove(PLAN_ID);
    pod_labels.insert(SEGMENT_LABEL.into(), segment.into());
    let env = workload
        .env
        .into_iter()
        .map(|(name, value)| EnvVar { name: name.into(), value: Some(value), ..Default::default() })
        .collect();
    let (node_key, node_value) = selector(workload.node);
    let args = workload.args;
    Deployment {
        metadata: ObjectMeta {
            name: Some(segment.into()),
            namespace: Some(namespace.into()),
            labels: Some(labels),
            ..Default::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(i32::try_from(workload.replicas).unwrap_or(i32::MAX)),
            // Never more processes on the device than planned.
            strategy: Some(rolling_update()),
            selector: LabelSelector {
                match_labels: Some(BTreeMap::from([(SEGMENT_LABEL.to_string(), segment.to_string())])),
                ..Default::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta { labels: Some(pod_labels), ..Default::default() }),
                spec: Some(PodSpec {
                    node_selector: Some(BTreeMap::from([
                        (node_key, node_value),
                        (STATE_LABEL.to_string(), "success".to_string()),
                    ])),
                    tolerations: Some(vec![Toleration {
                        key: Some("nvidia.com/gpu".into()),
                        operator: Some("Exists".into()),
                        effect: Some("NoSchedule".into()),
                        ..Default::default()
                    }]),
                    resource_claims: Some(vec![PodResourceClaim {
                        name: REQUEST.into(),
                        resource_claim_name: Some(workload.claim),
                        ..Default::default()
                    }]),
                    containers: vec![Container {
                        name: "serve".into(),
                        image: Some(workload.image.to_string()),
                        args: (!args.is_empty()).then_some(args),
                        env: Some(env),
                        ports: Some(vec![pods.container_port()]),
                        readiness_probe: Some(pods.readiness()),
                        liveness_probe: Some(pods.liveness()),
                        startup_probe: Some(pods.startup()),
                        resources: Some(ResourceRequirements {
                            claims: Some(vec![ContainerClaim { name: REQUEST.into(), ..Default::default() }]),
                            requests: Some(requests),
                            limits: Some(limits),
                        }),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        ..Default::default()
    }
}
