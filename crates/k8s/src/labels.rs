//! The labels, annotations and keys Tessera writes on Kubernetes objects,
//! and its default namespace: one place, read by every file that makes or
//! reads those objects.

/// `app.kubernetes.io/managed-by`, `tessera` on every object Tessera makes
/// (prune deletes only those).
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// The plan an object belongs to (label), and the plan a node's state is
/// about (annotation).
pub const PLAN_ID: &str = "tessera.io/plan-id";
/// The service a segment serves (its Kubernetes name).
pub const SERVICE_LABEL: &str = "tessera.io/service";
/// The segment's Deployment name, on its pods.
pub const SEGMENT_LABEL: &str = "tessera.io/segment";
/// A segment's configuration (GPU model, MIG profile, batch, processes:
/// `a100-80gb-3g40gb-b8-p2`), on its Deployment and pods; with the
/// service's label it selects a configuration's pods for its Service (see
/// [`crate::routing`]).
pub const CONFIG_LABEL: &str = "tessera.io/config";
/// On nodes of a plan made without cluster node names: the plan's node
/// number (`kubectl label node NAME tessera.io/node=N`); on the objects of
/// a node (its ConfigMap, claims, Deployments): the plan node they are for.
pub const NODE_NUMBER_LABEL: &str = "tessera.io/node";
/// A node's MIG layout state, written by its agent: `pending`, `success`
/// or `failed` (as mig-manager's `nvidia.com/mig.config.state`).
pub const STATE_LABEL: &str = "tessera.io/mig.state";
/// Why a node's state is `pending` or `failed`.
pub const REASON_ANNOTATION: &str = "tessera.io/mig.reason";
/// The MIG devices a node's agent made for the plan (JSON, [`NodeDevice`](crate::NodeDevice)s).
pub const DEVICES_ANNOTATION: &str = "tessera.io/mig.devices";
/// The key of a node's ConfigMap holding its part of the plan (Tessera's
/// versioned JSON).
pub const PLAN_KEY: &str = "plan.json";
/// The namespace Tessera uses unless told otherwise.
pub const DEFAULT_NAMESPACE: &str = "tessera";
