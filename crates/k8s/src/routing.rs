//! Traffic routed as planned: per service and configuration a `Service`
//! selecting that service's pods of that configuration, and per service a
//! Gateway API `HTTPRoute` (`gateway.networking.k8s.io/v1`) splitting the
//! service's requests across those Services in proportion to their
//! capacities.
//!
//! # The serving discipline
//!
//! Tessera's serving model (tessera-serving, `Discipline::RandomPerProcess`,
//! "random per-process queues") assumes that a service's requests are split
//! across its segments in proportion to their capacities, and that within a
//! segment each MPS process has its own queue and a request goes to one of
//! them at random. Put together: each request goes to one of the service's
//! processes, each process chosen with probability its share of the
//! service's capacity (a segment's capacity over its `procs` processes).
//! The objects set up exactly that:
//!
//! - Each pod is one serving process with its own queue: a segment's
//!   Deployment runs `procs` pods (`replicas = procs`).
//! - A **configuration** is what a pod's capacity depends on besides its
//!   service: the GPU model, the MIG profile, the batch and the number of
//!   MPS processes (the `tessera.io/config` label, e.g.
//!   `a100-80gb-3g40gb-b8-p2`). Pods of one service and one configuration
//!   are interchangeable servers of equal capacity (a verified plan records
//!   the same capacity for every segment of a service and configuration),
//!   so one `Service` over all of them, picking a ready pod per request,
//!   gives each the same share: exactly its share of the configuration's
//!   capacity.
//! - The `HTTPRoute`'s `backendRefs` carry one weight per configuration,
//!   proportional to its summed capacity (`capacity_rps` where the plan
//!   records it, else `throughput_rps`), so the Gateway sends each request
//!   to a configuration with the planned probability, and the
//!   configuration's Service to one of its pods: each process's share of the
//!   service's requests is its share of the capacity.
//!
//! The pick among a Service's pods is the Gateway implementation's
//! (Envoy-based ones pick an endpoint per request; a uniform random or
//! round-robin pick both keep each process's share equal, round robin with
//! less variance than the model assumes) or, for a client calling the
//! Service directly, kube-proxy's, which picks an endpoint uniformly at
//! random per connection: per request only when each request opens its own
//! connection.
//!
//! **Why one Service per configuration, always**, rather than one per
//! segment (or grouping only services of many segments): the Gateway API
//! allows [`MAX_BACKENDS`] backends per rule, and large plans have services
//! of more segments than that (the 11,000-service reference plan under the
//! percentile rule: 105 services, of up to 28 segments) but few
//! configurations (at most 4 per service there); one rule for every service
//! keeps one code path, fewer objects, and a plan change is no worse for it. During a change (see
//! [`crate::plan_transition`]) each state's route weighs each configuration by
//! the segments that state runs: a new segment's pods join their
//! configuration's Service as each becomes ready, before the route's weight
//! rises (they only take load off their peers), and a stopped segment's
//! weight is taken off the route before its Deployment is deleted (its
//! peers then get exactly their share once its pods are gone). A segment
//! whose pods are not all ready leaves its configuration's load spread over
//! its peers' pods, rather than over its own remaining ones as a
//! per-segment Service would. A service of more than [`MAX_BACKENDS`]
//! configurations cannot be weighed by one rule and is refused, named
//! ([`check_backend_counts`]).
//!
//! A service served by a shared instance (see [`crate::manifests`]) has
//! one backend per shared instance hosting it (the planner gives it one):
//! the Service over that instance's one pod, with the service named in
//! [`SHARED_MEMBER_HEADER`] so that the pod's multi-model server puts the
//! request in the member's queue.
//!
//! Without the Gateway API (`ExportOptions::routes` `None`, `--no-routes`)
//! the per-configuration Services are still made, and whoever sends a
//! service's requests (a client library, a service mesh) must weigh them by
//! the weights [`route_weights`] computes from their capacities; one Service
//! over all of a service's pods would split requests evenly across pods of
//! unequal capacity, which is not the plan.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use gateway_api::apis::standard::httproutes::{
    HttpRoute, HttpRouteParentRefs, HttpRouteRules, HttpRouteRulesBackendRefs, HttpRouteRulesFilters,
    HttpRouteRulesFiltersRequestHeaderModifier, HttpRouteRulesFiltersRequestHeaderModifierSet,
    HttpRouteRulesFiltersType, HttpRouteRulesFiltersUrlRewrite, HttpRouteRulesFiltersUrlRewritePath,
    HttpRouteRulesFiltersUrlRewritePathType, HttpRouteRulesMatches, HttpRouteRulesMatchesPath,
    HttpRouteRulesMatchesPathType, HttpRouteSpec,
};
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::error::K8sError;
use crate::labels::{CONFIG_LABEL, SEGMENT_LABEL, SERVICE_LABEL};
use crate::names::stable_hash;

/// The port every segment's Service listens on.
pub const SERVICE_PORT: i32 = 80;
/// The name of the Gateway routes attach to unless told otherwise (in the
/// objects' namespace).
pub const DEFAULT_GATEWAY: &str = "tessera";
/// The largest weight a Gateway API backend may carry.
pub const MAX_WEIGHT: i32 = 1_000_000;
/// The most backends one `HTTPRoute` rule may list (the Gateway API's
/// `maxItems`).
pub const MAX_BACKENDS: usize = 16;

/// Refuses routes for services of more configurations than one rule may
/// weigh ([`MAX_BACKENDS`]), naming them: `(service, configurations)`.
pub fn check_backend_counts<'a>(counts: impl IntoIterator<Item = (&'a str, usize)>) -> Result<(), K8sError> {
    let over: Vec<String> = counts
        .into_iter()
        .filter(|(_, configurations)| *configurations > MAX_BACKENDS)
        .map(|(service, configurations)| format!("{service} ({configurations})"))
        .collect();
    if over.is_empty() {
        return Ok(());
    }
    Err(K8sError::Plan(format!(
        "more configurations (GPU model, MIG profile, batch, processes) than an HTTPRoute rule may weigh \
         ({MAX_BACKENDS}): {}; export with --no-routes and weigh the configurations' Services in the client",
        over.join(", ")
    )))
}

/// The Gateway an `HTTPRoute` attaches to (its `parentRefs` entry):
/// `NAMESPACE/NAME[:SECTION]` or `NAME[:SECTION]` (the route's namespace).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayRef {
    /// The Gateway's namespace; `None`: the route's own.
    pub namespace: Option<String>,
    /// The Gateway's name.
    pub name: String,
    /// One listener of the Gateway (`sectionName`); `None`: every listener
    /// that accepts the route.
    pub section: Option<String>,
}

impl Default for GatewayRef {
    fn default() -> Self {
        GatewayRef { namespace: None, name: DEFAULT_GATEWAY.into(), section: None }
    }
}

/// Whether `text` is a DNS-1123 label (letters, digits, `-`, at most 63).
fn is_label(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 63
        && text.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !text.starts_with('-')
        && !text.ends_with('-')
}

impl FromStr for GatewayRef {
    type Err = K8sError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = |why: &str| {
            K8sError::Plan(format!("gateway '{text}': {why} (expected NAMESPACE/NAME[:SECTION] or NAME[:SECTION])"))
        };
        let (path, section) = match text.split_once(':') {
            Some((path, section)) => (path, Some(section)),
            None => (text, None),
        };
        let (namespace, name) = match path.split_once('/') {
            Some((namespace, name)) => (Some(namespace), name),
            None => (None, path),
        };
        for (what, part) in [("namespace", namespace), ("name", Some(name)), ("section", section)] {
            if let Some(part) = part {
                if !is_label(part) {
                    return Err(bad(&format!("the {what} '{part}' is not a DNS-1123 label")));
                }
            }
        }
        Ok(GatewayRef {
            namespace: namespace.map(str::to_string),
            name: name.into(),
            section: section.map(str::to_string),
        })
    }
}

impl fmt::Display for GatewayRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(namespace) = &self.namespace {
            write!(f, "{namespace}/")?;
        }
        write!(f, "{}", self.name)?;
        if let Some(section) = &self.section {
            write!(f, ":{section}")?;
        }
        Ok(())
    }
}

/// The Gateway API weights of segments of the given capacities (req/s):
/// proportional to them, the largest [`MAX_WEIGHT`], each rounded to the
/// nearest integer and at least 1 for a positive capacity (0 for none).
/// Every segment's share of the traffic is then its share of the capacity
/// to within 0.1% (relative) whenever its capacity is at least 1/2000 of
/// the largest (its weight is then at least 500, its rounding at most
/// 0.1%); smaller segments still get traffic, less exactly.
pub fn route_weights(capacities_rps: &[f64]) -> Vec<i32> {
    let largest = capacities_rps.iter().copied().filter(|c| c.is_finite()).fold(0.0_f64, f64::max);
    capacities_rps
        .iter()
        .map(|&capacity| {
            if capacity.is_nan() || capacity <= 0.0 || largest <= 0.0 {
                return 0;
            }
            let scaled = (capacity.min(largest) / largest * f64::from(MAX_WEIGHT)).round();
            // In 1..=MAX_WEIGHT by construction, so the cast is exact.
            (scaled as i32).clamp(1, MAX_WEIGHT)
        })
        .collect()
}

/// The Service name of a service's pods of one configuration:
/// `SERVICE-CONFIG` (both already DNS-1123 label parts), `s-` before it
/// when it does not start with a letter (a Service name is a DNS-1035
/// label), cut with a hash suffix of the whole when longer than 63
/// characters.
pub fn backend_name(service: &str, config: &str) -> String {
    let whole = format!("{service}-{config}");
    let name = if whole.starts_with(|c: char| c.is_ascii_lowercase()) { whole.clone() } else { format!("s-{whole}") };
    if name.len() <= 63 {
        return name;
    }
    let suffix = format!("{:06x}", stable_hash(whole.as_bytes()) & 0xff_ffff);
    format!("{}-{suffix}", name[..63 - suffix.len() - 1].trim_end_matches('-'))
}

/// The Service in front of a service's pods of one configuration (one pod
/// per MPS process of each of its segments; see the module docs), on
/// [`SERVICE_PORT`] forwarding to the pods' `container_port`. `labels` are
/// its own; it selects the pods by their [`SERVICE_LABEL`] and
/// [`CONFIG_LABEL`].
pub fn backend_service(
    namespace: &str,
    service: &str,
    config: &str,
    labels: BTreeMap<String, String>,
    container_port: i32,
) -> Service {
    let selector = BTreeMap::from([
        (SERVICE_LABEL.to_string(), service.to_string()),
        (CONFIG_LABEL.to_string(), config.to_string()),
    ]);
    cluster_service(namespace, backend_name(service, config), labels, selector, container_port)
}

/// The Service in front of a shared instance's one pod (its multi-model
/// server, Deployment `segment`), selected by its [`SEGMENT_LABEL`]; named
/// as the Deployment. Every member's route sends its requests there with
/// the member named in [`SHARED_MEMBER_HEADER`].
pub fn shared_instance_service(
    namespace: &str,
    segment: &str,
    labels: BTreeMap<String, String>,
    container_port: i32,
) -> Service {
    let selector = BTreeMap::from([(SEGMENT_LABEL.to_string(), segment.to_string())]);
    cluster_service(namespace, segment.to_string(), labels, selector, container_port)
}

/// A ClusterIP Service on [`SERVICE_PORT`] over the pods `selector` picks.
fn cluster_service(
    namespace: &str,
    name: String,
    labels: BTreeMap<String, String>,
    selector: BTreeMap<String, String>,
    container_port: i32,
) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(namespace.into()),
            labels: Some(labels),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".into()),
            selector: Some(selector),
            // No affinity: each connection picks a pod afresh.
            session_affinity: Some("None".into()),
            ports: Some(vec![ServicePort {
                name: Some("http".into()),
                protocol: Some("TCP".into()),
                port: SERVICE_PORT,
                target_port: Some(IntOrString::Int(container_port)),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The request header naming the service a request is for, which the
/// route of a service served by a shared instance sets: the instance's
/// multi-model server picks the member's queue by it (the plan's service
/// name, as the server's `TESSERA_MEMBERS` lists it).
pub const SHARED_MEMBER_HEADER: &str = "X-Tessera-Service";

/// One backend of a service's route: the Service over its pods of one
/// configuration, and their summed capacity.
#[derive(Debug, Clone, PartialEq)]
pub struct Backend {
    /// The Service's name ([`backend_name`], or a shared instance's
    /// Deployment name).
    pub service: String,
    /// The configuration's capacity in requests/s: the sum of its
    /// segments'.
    pub capacity_rps: f64,
}

/// The `HTTPRoute` of one service (named as the service, `name`): requests
/// whose path starts with `/NAME` reach its configurations' Services
/// (`backends`) with the prefix replaced by `/`, weighted by
/// [`route_weights`] of their capacities. A service served by a shared
/// instance passes its plan name as `member`: the route also sets
/// [`SHARED_MEMBER_HEADER`] to it (a dedicated segment's server ignores
/// the header).
pub fn service_route(
    namespace: &str,
    name: &str,
    labels: BTreeMap<String, String>,
    gateway: &GatewayRef,
    backends: &[Backend],
    member: Option<&str>,
) -> HttpRoute {
    let mut filters = vec![HttpRouteRulesFilters {
        r#type: HttpRouteRulesFiltersType::UrlRewrite,
        url_rewrite: Some(HttpRouteRulesFiltersUrlRewrite {
            path: Some(HttpRouteRulesFiltersUrlRewritePath {
                r#type: HttpRouteRulesFiltersUrlRewritePathType::ReplacePrefixMatch,
                replace_prefix_match: Some("/".into()),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }];
    if let Some(member) = member {
        filters.push(HttpRouteRulesFilters {
            r#type: HttpRouteRulesFiltersType::RequestHeaderModifier,
            request_header_modifier: Some(HttpRouteRulesFiltersRequestHeaderModifier {
                set: Some(vec![HttpRouteRulesFiltersRequestHeaderModifierSet {
                    name: SHARED_MEMBER_HEADER.into(),
                    value: member.into(),
                }]),
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    let capacities: Vec<f64> = backends.iter().map(|backend| backend.capacity_rps).collect();
    let backend_refs = backends
        .iter()
        .zip(route_weights(&capacities))
        .map(|(backend, weight)| HttpRouteRulesBackendRefs {
            name: backend.service.clone(),
            port: Some(SERVICE_PORT),
            weight: Some(weight),
            ..Default::default()
        })
        .collect();
    let mut route = HttpRoute::new(
        name,
        HttpRouteSpec {
            parent_refs: Some(vec![HttpRouteParentRefs {
                name: gateway.name.clone(),
                namespace: gateway.namespace.clone(),
                section_name: gateway.section.clone(),
                ..Default::default()
            }]),
            rules: Some(vec![HttpRouteRules {
                matches: Some(vec![HttpRouteRulesMatches {
                    path: Some(HttpRouteRulesMatchesPath {
                        r#type: Some(HttpRouteRulesMatchesPathType::PathPrefix),
                        value: Some(format!("/{name}")),
                    }),
                    ..Default::default()
                }]),
                filters: Some(filters),
                backend_refs: Some(backend_refs),
                ..Default::default()
            }]),
            ..Default::default()
        },
    );
    route.metadata.namespace = Some(namespace.into());
    route.metadata.labels = Some(labels);
    route
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_keep_the_capacities_proportions() {
        let capacities = [432.3, 191.7, 12.5, 0.0];
        let weights = route_weights(&capacities);
        assert_eq!(weights[0], MAX_WEIGHT);
        assert_eq!(weights[3], 0);
        let total_weight: f64 = weights.iter().map(|&w| f64::from(w)).sum();
        let total_capacity: f64 = capacities.iter().sum();
        for (capacity, weight) in capacities.iter().zip(&weights).take(3) {
            let planned = capacity / total_capacity;
            let routed = f64::from(*weight) / total_weight;
            assert!((routed / planned - 1.0).abs() < 1e-3, "{capacity}: {routed} vs {planned}");
        }
        assert_eq!(route_weights(&[1e-12, 1.0]), [1, MAX_WEIGHT], "a positive capacity still gets traffic");
        assert_eq!(route_weights(&[]), Vec::<i32>::new());
    }

    #[test]
    fn services_of_more_than_16_configurations_are_named() {
        assert!(check_backend_counts([("a", 16), ("b", 1)]).is_ok());
        let error = check_backend_counts([("a", 17), ("b", 2), ("c", 40)]).unwrap_err().to_string();
        assert!(error.contains("than an HTTPRoute rule may weigh (16): a (17), c (40); "), "{error}");
        assert!(!error.contains('\n'), "one line: {error}");
    }

    #[test]
    fn gateway_references_parse_and_print_back() {
        for text in ["gw", "infra/gw", "infra/gw:https", "gw:http"] {
            assert_eq!(text.parse::<GatewayRef>().unwrap().to_string(), text);
        }
        let parsed: GatewayRef = "infra/gw:https".parse().unwrap();
        assert_eq!(parsed.namespace.as_deref(), Some("infra"));
        assert_eq!(parsed.section.as_deref(), Some("https"));
        let error = "Infra/gw".parse::<GatewayRef>().unwrap_err().to_string();
        assert!(error.contains("namespace 'Infra' is not a DNS-1123 label"), "{error}");
        assert!("a/b/c".parse::<GatewayRef>().is_err());
        assert!("gw:".parse::<GatewayRef>().is_err());
    }

    #[test]
    fn backend_names_are_dns_1035_labels_and_stable() {
        assert_eq!(backend_name("bert", "a100-80gb-3g40gb-b8-p2"), "bert-a100-80gb-3g40gb-b8-p2");
        assert_eq!(backend_name("3d", "a100-80gb-3g40gb-b8-p2"), "s-3d-a100-80gb-3g40gb-b8-p2");
        let service = "a".repeat(40);
        let long = backend_name(&service, "h200-141gb-1g18gb-me-b1024-p48");
        assert!(long.len() <= 63 && !long.ends_with('-'), "{long}");
        assert_eq!(long, backend_name(&service, "h200-141gb-1g18gb-me-b1024-p48"), "the same name every time");
        assert_ne!(long, backend_name(&service, "h200-141gb-1g18gb-me-b1024-p24"), "the hash tells them apart");
    }
}
