//! The crate's one error type.

use tessera_gpu::GpuError;
use tessera_store::StoreError;

/// Everything that can go wrong between a plan and a cluster. Each message
/// is one line with its cause's text (no `source()`), naming the context,
/// object, node or service concerned.
#[derive(Debug, thiserror::Error)]
pub enum K8sError {
    /// The API server could not be reached or refused a request.
    #[error("Kubernetes {context}: {message}")]
    Cluster {
        /// `context 'NAME' (URL)`: the kubeconfig context (or `in-cluster`)
        /// and the API server.
        context: String,
        /// What failed and why.
        message: String,
    },
    /// The plan does not fit the cluster, or cannot be turned into
    /// manifests.
    #[error("{0}")]
    Plan(String),
    /// A decision cannot be recorded as an event.
    #[error("{0}")]
    Event(String),
    /// This replica lost (or never held) the Lease that fences its
    /// writes.
    #[error("{0}")]
    NotLeading(String),
    /// A wait ran out of time.
    #[error("{0}")]
    Timeout(String),
    /// The node's GPUs refused a layout.
    #[error(transparent)]
    Gpu(#[from] GpuError),
    /// A plan file could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<tessera_plan::PlanError> for K8sError {
    fn from(error: tessera_plan::PlanError) -> K8sError {
        K8sError::Plan(error.to_string())
    }
}
