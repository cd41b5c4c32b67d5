//! Tessera on Kubernetes: a plan becomes a running cluster through the
//! Kubernetes API, with the MIG layouts exactly as planned.
//!
//! - [`Cluster`]: the connection (kube, a runtime of its own; every error
//!   one line naming the context, the request and the cause).
//! - Inventory: [`inventory`] reads the cluster's GPU nodes from GPU
//!   Feature Discovery's labels into a `tessera_plan::Inventory` (placing a
//!   plan on them and checking it are pure, in tessera-plan) and the DRA
//!   driver's MIG devices from its ResourceSlices.
//! - Workloads: [`manifests`] turns a plan into its objects — the plan for
//!   the agents (a ConfigMap per node holding only that node's part), per segment a `ResourceClaim`
//!   (`resource.k8s.io/v1`) for its MIG device with an opaque
//!   [`MigDeviceConfig`] sharing it through MPS, a `Deployment` of `procs`
//!   pods sharing the claim (requests, probes, a rolling update that never
//!   runs more processes than planned: [`pods`]; the claim and the
//!   Deployment are built in `segment_objects`); per service and
//!   configuration (GPU model, MIG profile, batch, processes) a `Service`
//!   over its pods, and per service a Gateway API `HTTPRoute` splitting its
//!   requests across those Services in proportion to their capacities.
//!   [`routing`] states the serving discipline this sets up (the one
//!   tessera-serving models) and how a service is served without the
//!   Gateway API.
//! - [`apply_plan`] applies them by server-side apply (field manager
//!   `tessera`), make before break from the plan the cluster records
//!   ([`running_plan`]) through the intermediate states of
//!   [`plan_transition`], in bulk with bounded concurrency, pruning last;
//!   [`cluster_status`] compares the cluster with the plan.
//! - [`slo_rules`]: each service's SLO recording rules and multi-window,
//!   multi-burn-rate alerts, as a rules file and a `PrometheusRule`.
//! - The node agent: [`reconcile_node`] (one pass) and [`run_agent`] (the
//!   loop) apply the node's MIG layout through `tessera-gpu` and report a
//!   label state machine.
//!
//! With the `fake` feature (tests only; never in the shipped binary) the
//! crate also exports `FakeApiServer`, an in-process API server on
//! 127.0.0.1.

mod agent;
mod apply;
mod cluster;
mod error;
mod events;
#[cfg(any(test, feature = "fake"))]
mod fake;
mod inventory;
mod labels;
mod lease;
mod manifests;
mod mig_config;
mod names;
mod node_plan;
mod options;
pub mod pods;
pub mod routing;
mod segment_objects;
pub mod slo_rules;
mod transition;

pub use agent::{reconcile_node, run_agent, AgentOptions, Outcome, PlanSource};
pub use apply::{
    apply_plan, cluster_status, running_plan, Action, ApplyOptions, Change, ClusterStatus, NodeStatus, Progress,
    SegmentStatus,
};
pub use cluster::{Cluster, ClusterOptions, Kind, WriteFence, FIELD_MANAGER};
pub use error::K8sError;
pub use events::{decision_event, record_decision, DecisionEvent, AUTOPILOT_CONTROLLER};
#[cfg(any(test, feature = "fake"))]
pub use fake::FakeApiServer;
pub use inventory::{
    inventory, ClusterInventory, SliceDevice, COUNT_LABEL, MEMORY_LABEL, MIG_CAPABLE_LABEL, PRODUCT_LABEL,
};
pub use labels::{
    CONFIG_LABEL, DEFAULT_NAMESPACE, DEVICES_ANNOTATION, MANAGED_BY, NODE_NUMBER_LABEL, PLAN_ID, PLAN_KEY,
    REASON_ANNOTATION, SEGMENT_LABEL, SERVICE_LABEL, STATE_LABEL,
};
pub use lease::{LeaderElector, Leadership, LeaseOptions};
pub use manifests::{manifests, manifests_with, node_file_name, Manifest, Manifests, PlanObjects};
pub use mig_config::{MigDeviceConfig, DRA_DRIVER, MIG_DEVICE_CLASS};
pub use names::plan_id;
pub use node_plan::{
    merge_parts, node_config_map_name, node_part, node_parts, node_plan_id, read_node_part, recorded_parts, NodePart,
    MAX_OBJECT_BYTES, NODE_CONFIG_MAP_PREFIX, NODE_KEY, NODE_NAME_KEY,
};
pub use options::ExportOptions;
pub use pods::{PodOptions, Requests};
pub use routing::{route_weights, GatewayRef};
pub use segment_objects::NodeDevice;
pub use transition::{plan_transition, TransitionStep};
