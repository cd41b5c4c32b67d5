//! How a plan becomes objects beyond the plan itself: the namespace, the
//! routing and what every pod gets.

use crate::labels::DEFAULT_NAMESPACE;
use crate::pods::PodOptions;
use crate::routing::GatewayRef;

/// The choices of `k8s export` and `k8s apply`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportOptions {
    /// The namespace of every object.
    pub namespace: String,
    /// The Gateway every service's `HTTPRoute` attaches to; `None`: no
    /// routes (a cluster without the Gateway API; the Services, one per
    /// service and configuration, are still made, see the routing module's
    /// docs).
    pub routes: Option<GatewayRef>,
    /// Requests, port and probes of the pods.
    pub pods: PodOptions,
}

impl ExportOptions {
    /// The defaults in `namespace`: routes on the Gateway `tessera` of the
    /// same namespace, and [`PodOptions::default`].
    pub fn new(namespace: &str) -> ExportOptions {
        ExportOptions { namespace: namespace.into(), routes: Some(GatewayRef::default()), pods: PodOptions::default() }
    }
}

impl Default for ExportOptions {
    fn default() -> Self {
        ExportOptions::new(DEFAULT_NAMESPACE)
    }
}
