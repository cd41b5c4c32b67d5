//! A plan is data: which MIG instances each GPU gets, which segment runs in
//! each, and how every service fares. It can be saved, verified, rendered
//! and applied independently of the planner that produced it.

use std::collections::BTreeMap;

use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize, Serializer};

use crate::gpu::GpuModel;
use crate::shared::{SharedInstance, SharedMember, Sharing};
use crate::slo::ServiceImage;

/// The largest robustness margin a plan may be made or recorded with:
/// every batch twice as slow as profiled.
pub const MAX_MARGIN: f64 = 1.0;

/// A recorded margin: a share in `[0, MAX_MARGIN]` (a plan edited out of
/// that range is refused as it is read, not planned or checked forever).
fn margin_share<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<f64>, D::Error> {
    let margin: Option<f64> = Deserialize::deserialize(deserializer)?;
    match margin {
        Some(share) if !(0.0..=MAX_MARGIN).contains(&share) => Err(serde::de::Error::custom(format!(
            "margin: {} is not a share in [0, {MAX_MARGIN}]",
            crate::text::number(share, 3)
        ))),
        _ => Ok(margin),
    }
}

/// A complete deployment plan. Reading one refuses fields it does not know
/// (every struct of a plan does), so a misspelt field is an error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// Number of GPUs used (equals `gpus.len()`).
    pub gpu_count: usize,
    /// Σ GPUs × cost per GPU over the fleet.
    #[serde(default)]
    pub total_cost: f64,
    /// The strategy that produced the plan, e.g. `parva`.
    pub strategy: String,
    /// The latency rule the plan was made under, e.g. `parva`.
    pub latency_rule: String,
    /// GPUs per node used to number nodes.
    pub gpus_per_node: u32,
    /// The GPU models offered and how many of each the plan uses.
    #[serde(default)]
    pub fleet: Vec<FleetUse>,
    /// Every GPU with at least one instance.
    pub gpus: Vec<GpuAssignment>,
    /// Every service with its provisioned throughput and latency.
    pub services: Vec<ServiceReport>,
    /// How close to optimal the plan is proven to be, when the strategy
    /// knows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optimality: Option<Optimality>,
    /// Things a reader should know, e.g. profiles that were estimated.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The cluster's name of each node, by node number, when the plan was
    /// made for a Kubernetes cluster (`tessera plan --cluster`); empty
    /// otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_names: Vec<String>,
    /// Each service's container image and arguments, from the service
    /// definition, for running the plan in a cluster; the planners never
    /// read it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub images: BTreeMap<String, ServiceImage>,
    /// The traffic the plan was proven under and the routing it assumes
    /// (and the deployment sets up); absent in plans of rules that assume
    /// evenly spaced arrivals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traffic: Option<Traffic>,
    /// The robustness margin the plan was proven under (capacity rules
    /// only): every SLO is met with every batch this share slower than
    /// profiled (0.06: 6% slower). Absent in plans that record none (made
    /// before margins, read from a CSV without the column, of rules
    /// without capacities).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "margin_share")]
    pub margin: Option<f64>,
}

/// How requests reach a plan's segments: a service's requests go to its
/// segments at random in proportion to their [`InstanceAssignment::capacity`]
/// (a Gateway API route's weights), and within a segment as `discipline`
/// says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Traffic {
    /// The arrival process the plan was proven under, e.g. `poisson`.
    pub arrivals: String,
    /// How a segment's MPS processes share its requests, e.g. `random`
    /// (a Service picks a process at random; each keeps its own queue).
    pub discipline: String,
}

/// One GPU model of the fleet and its use in a plan.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FleetUse {
    /// The GPU model.
    pub gpu_model: GpuModel,
    /// Cost of one GPU.
    pub cost_per_gpu: f64,
    /// Most GPUs available, if limited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// GPUs of this model the plan uses.
    pub gpus: u64,
}

/// A plan's objective against a proven lower bound.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Optimality {
    /// What is minimized: `gpus`, or `cost` for a fleet of several models.
    pub objective: String,
    /// The plan's value of the objective.
    pub value: f64,
    /// No plan can do better than this.
    pub lower_bound: f64,
    /// `true` when the value equals the lower bound.
    pub proven_optimal: bool,
    /// (value − lower bound) / lower bound.
    pub gap: f64,
}

/// One GPU and its MIG instances. In JSON its `instances` hold both kinds,
/// largest first: a dedicated one with a service's fields, a shared one
/// with `sharing` and `members`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(try_from = "GpuRecord")]
pub struct GpuAssignment {
    /// Node number (global GPU index / GPUs per node).
    pub node: u32,
    /// GPU index within the node.
    pub index: u32,
    /// The GPU model.
    pub gpu_model: GpuModel,
    /// Its MIG instances that serve one service each, largest first.
    pub instances: Vec<InstanceAssignment>,
    /// Its MIG instances shared by several services, largest first.
    pub shared: Vec<SharedInstance>,
}

impl GpuAssignment {
    /// A GPU of dedicated `instances` only.
    pub fn dedicated(node: u32, index: u32, gpu_model: GpuModel, instances: Vec<InstanceAssignment>) -> Self {
        GpuAssignment { node, index, gpu_model, instances, shared: Vec::new() }
    }

    /// Every instance's MIG profile, size and start, dedicated and shared.
    pub fn layout(&self) -> impl Iterator<Item = (&str, u8, u8)> {
        let dedicated = self.instances.iter().map(|i| (i.profile.as_str(), i.size, i.start));
        dedicated.chain(self.shared.iter().map(|i| (i.profile.as_str(), i.size, i.start)))
    }

    /// Whether the GPU has no instance of either kind.
    pub fn is_empty(&self) -> bool {
        self.instances.is_empty() && self.shared.is_empty()
    }
}

/// A GPU as JSON has it: one list of instances of both kinds.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GpuRecord {
    node: u32,
    index: u32,
    gpu_model: GpuModel,
    instances: Vec<InstanceRecord>,
}

/// An instance as JSON has it: a service's fields, or `sharing` and
/// `members`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InstanceRecord {
    profile: String,
    size: u8,
    start: u8,
    service: Option<String>,
    model: Option<String>,
    batch: Option<u32>,
    procs: Option<u32>,
    throughput_rps: Option<f64>,
    latency_ms: Option<f64>,
    capacity_rps: Option<f64>,
    sharing: Option<Sharing>,
    members: Option<Vec<SharedMember>>,
}

impl TryFrom<GpuRecord> for GpuAssignment {
    type Error = String;

    fn try_from(record: GpuRecord) -> Result<Self, String> {
        let mut gpu = GpuAssignment::dedicated(record.node, record.index, record.gpu_model, Vec::new());
        for (position, instance) in record.instances.into_iter().enumerate() {
            let at = format!("GPU {}:{} instance {}", record.node, record.index, position + 1);
            let InstanceRecord { profile, size, start, sharing, members, .. } = instance;
            if sharing.is_some() || members.is_some() {
                let dedicated_fields = [
                    ("service", instance.service.is_some()),
                    ("model", instance.model.is_some()),
                    ("batch", instance.batch.is_some()),
                    ("procs", instance.procs.is_some()),
                    ("throughput_rps", instance.throughput_rps.is_some()),
                    ("latency_ms", instance.latency_ms.is_some()),
                    ("capacity_rps", instance.capacity_rps.is_some()),
                ];
                if let Some((field, _)) = dedicated_fields.iter().find(|(_, present)| *present) {
                    return Err(format!("{at}: a shared instance lists `members` and takes no `{field}` of its own"));
                }
                let sharing = sharing.ok_or_else(|| format!("{at}: a shared instance needs `sharing`"))?;
                let members = members.ok_or_else(|| format!("{at}: a shared instance needs `members`"))?;
                gpu.shared.push(SharedInstance { profile, size, start, sharing, members });
                continue;
            }
            let missing = |field: &str| format!("{at}: missing field `{field}`");
            gpu.instances.push(InstanceAssignment {
                profile,
                size,
                start,
                service: instance.service.ok_or_else(|| missing("service"))?,
                model: instance.model.ok_or_else(|| missing("model"))?,
                batch: instance.batch.ok_or_else(|| missing("batch"))?,
                procs: instance.procs.ok_or_else(|| missing("procs"))?,
                throughput_rps: instance.throughput_rps.ok_or_else(|| missing("throughput_rps"))?,
                latency_ms: instance.latency_ms.ok_or_else(|| missing("latency_ms"))?,
                capacity_rps: instance.capacity_rps,
            });
        }
        Ok(gpu)
    }
}

impl Serialize for GpuAssignment {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        #[serde(untagged)]
        enum Entry<'a> {
            Dedicated(&'a InstanceAssignment),
            Shared(&'a SharedInstance),
        }
        let mut entries: Vec<(u8, u8, Entry<'_>)> =
            self.instances.iter().map(|i| (i.size, i.start, Entry::Dedicated(i))).collect();
        entries.extend(self.shared.iter().map(|i| (i.size, i.start, Entry::Shared(i))));
        entries.sort_by_key(|&(size, start, _)| (std::cmp::Reverse(size), start));
        let instances: Vec<Entry<'_>> = entries.into_iter().map(|(_, _, entry)| entry).collect();
        let mut state = serializer.serialize_struct("GpuAssignment", 4)?;
        state.serialize_field("node", &self.node)?;
        state.serialize_field("index", &self.index)?;
        state.serialize_field("gpu_model", &self.gpu_model)?;
        state.serialize_field("instances", &instances)?;
        state.end()
    }
}

/// One MIG instance with the segment it serves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstanceAssignment {
    /// MIG profile name, e.g. `3g.40gb`.
    pub profile: String,
    /// Compute slices (GPCs).
    pub size: u8,
    /// Start memory slice (explicit placement).
    pub start: u8,
    /// The service it serves.
    pub service: String,
    /// The model the service runs.
    pub model: String,
    /// Requests per batch.
    pub batch: u32,
    /// MPS processes.
    pub procs: u32,
    /// Segment throughput in requests/s (all processes), as profiled.
    pub throughput_rps: f64,
    /// Latency of one batch in ms.
    pub latency_ms: f64,
    /// The most requests/s the plan routes to the segment, when its rule
    /// allows less than the throughput (a percentile SLO under random
    /// arrivals); absent: the throughput. See [`InstanceAssignment::capacity`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_rps: Option<f64>,
}

impl InstanceAssignment {
    /// The most requests/s the plan routes to this segment: its
    /// `capacity_rps`, else its throughput. A service's requests are routed
    /// to its segments in proportion to it.
    pub fn capacity(&self) -> f64 {
        self.capacity_rps.unwrap_or(self.throughput_rps)
    }
}

/// How one service fares under the plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceReport {
    /// Service name.
    pub service: String,
    /// Model name.
    pub model: String,
    /// Required request rate.
    pub rate_rps: f64,
    /// Latency objective.
    pub latency_slo_ms: f64,
    /// Sum of the capacity of the service's segments
    /// ([`InstanceAssignment::capacity`]).
    pub provisioned_rps: f64,
    /// The latency the plan's latency rule predicts for the slowest segment
    /// (under a percentile rule: that segment's percentile latency at its
    /// routed rate).
    pub worst_latency_ms: f64,
    /// Number of segments serving it.
    pub segments: usize,
    /// `true` when the rate is covered and the latency rule holds.
    pub met: bool,
    /// Under a percentile rule: the share of requests (%) that must finish
    /// within the SLO.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percentile: Option<f64>,
    /// Under a percentile rule: the share of requests predicted to finish
    /// within the SLO (0 to 1) at the service's rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_attainment: Option<f64>,
    /// Under a percentile rule and Poisson arrivals: the largest uniform
    /// slowdown of its batches (a share of their profiled latency: 0.05 is
    /// 5% slower) at which every segment of it still meets its SLO at the
    /// rate routed to it; negative when it misses at the profiled speed.
    /// A service whose tolerance is below the plan's margin sits on the
    /// edge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerance: Option<f64>,
    /// Under a percentile rule and Poisson arrivals: the offered load of
    /// its busiest segment, the rate routed to it over its full-batch
    /// throughput as profiled (0 to 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busiest_load: Option<f64>,
}

/// The precision tolerances are found to (a share of batch time), from
/// below: a tolerance this close under a margin may be the margin itself.
pub const TOLERANCE_PRECISION: f64 = 1e-3;

/// The slowdowns a service's tolerance is searched among: from twice as
/// fast to three times as slow as profiled. A tolerance at the top means
/// at least that much.
pub const TOLERANCE_RANGE: (f64, f64) = (-0.5, 2.0);

/// A tolerance as a signed percentage of batch time: `+5.8%`, `-1.2%`,
/// `≥ +200.0%` at the top of [`TOLERANCE_RANGE`].
pub fn tolerance_text(tolerance: f64) -> String {
    let at_top = tolerance >= TOLERANCE_RANGE.1;
    format!("{}{:+.1}%", if at_top { "≥ " } else { "" }, 100.0 * tolerance)
}

impl ServiceReport {
    /// Whether the service bears every batch `margin` slower than profiled
    /// (its tolerance reaches the margin, to [`TOLERANCE_PRECISION`]);
    /// `None` when it records no tolerance.
    pub fn bears(&self, margin: f64) -> Option<bool> {
        self.tolerance.map(|tolerance| tolerance + TOLERANCE_PRECISION >= margin)
    }

    /// The share of its provisioned throughput the service's rate uses
    /// (rate / provisioned; every segment of a service runs at it), or
    /// `None` when nothing is provisioned.
    pub fn utilisation(&self) -> Option<f64> {
        (self.provisioned_rps > 0.0).then(|| self.rate_rps / self.provisioned_rps)
    }
}

impl Plan {
    /// A plan of `gpus` made by `strategy` under `latency_rule`, numbered
    /// with `gpus_per_node` GPUs per node: its GPU count, and a fleet of
    /// every GPU model it uses at cost 1 and no limit (so its total cost is
    /// its GPU count); no service report, proof, notes, node names or
    /// images. Set those with struct update syntax.
    pub fn from_gpus(
        gpus: Vec<GpuAssignment>,
        strategy: impl Into<String>,
        latency_rule: impl Into<String>,
        gpus_per_node: u32,
    ) -> Plan {
        let mut fleet: Vec<FleetUse> = Vec::new();
        for gpu in &gpus {
            match fleet.iter_mut().find(|counted| counted.gpu_model == gpu.gpu_model) {
                Some(counted) => counted.gpus += 1,
                None => fleet.push(FleetUse { gpu_model: gpu.gpu_model, cost_per_gpu: 1.0, limit: None, gpus: 1 }),
            }
        }
        Plan {
            gpu_count: gpus.len(),
            total_cost: gpus.len() as f64,
            strategy: strategy.into(),
            latency_rule: latency_rule.into(),
            gpus_per_node,
            fleet,
            gpus,
            services: Vec::new(),
            optimality: None,
            notes: Vec::new(),
            node_names: Vec::new(),
            images: BTreeMap::new(),
            traffic: None,
            margin: None,
        }
    }

    /// Total compute slices used by the plan's instances, dedicated and
    /// shared.
    pub fn compute_slices_used(&self) -> u32 {
        self.gpus.iter().flat_map(GpuAssignment::layout).map(|(_, size, _)| u32::from(size)).sum()
    }

    /// The plan's shared instances, with the GPU of each.
    pub fn shared_instances(&self) -> impl Iterator<Item = (&GpuAssignment, &SharedInstance)> {
        self.gpus.iter().flat_map(|gpu| gpu.shared.iter().map(move |shared| (gpu, shared)))
    }

    /// What each service's instances provide, req/s: its segments'
    /// capacities and its shares of shared instances.
    pub fn provided_rps(&self) -> BTreeMap<&str, f64> {
        let mut provided: BTreeMap<&str, f64> = BTreeMap::new();
        for gpu in &self.gpus {
            for instance in &gpu.instances {
                *provided.entry(instance.service.as_str()).or_default() += instance.capacity();
            }
            for member in gpu.shared.iter().flat_map(|shared| &shared.members) {
                *provided.entry(member.service.as_str()).or_default() += member.capacity_rps;
            }
        }
        provided
    }

    /// The services whose report claims more than their instances provide
    /// (by more than 0.1%): a plan edited after it was made. Each with the
    /// req/s its report claims and its instances provide.
    pub fn overstated_reports(&self) -> Vec<(&str, f64, f64)> {
        let provided = self.provided_rps();
        self.services
            .iter()
            .filter_map(|report| {
                let actual = provided.get(report.service.as_str()).copied().unwrap_or(0.0);
                (report.provisioned_rps > actual * 1.001 + 1e-9).then_some((
                    report.service.as_str(),
                    report.provisioned_rps,
                    actual,
                ))
            })
            .collect()
    }

    /// Withdraws the claims of [`Plan::overstated_reports`]: each such
    /// service's report takes what its instances provide, and is no
    /// longer met nor predicted; returns the note saying so (also added to
    /// the plan's notes), or `None` when every report holds.
    pub fn withdraw_overstated_claims(&mut self) -> Option<String> {
        let overstated: BTreeMap<String, f64> =
            self.overstated_reports().into_iter().map(|(service, _, actual)| (service.to_string(), actual)).collect();
        if overstated.is_empty() {
            return None;
        }
        let mut named = Vec::new();
        for report in &mut self.services {
            if let Some(&actual) = overstated.get(&report.service) {
                if named.len() < 3 {
                    named.push(format!(
                        "{} claims {} req/s, its instances provide {}",
                        report.service,
                        crate::text::number(report.provisioned_rps, 1),
                        crate::text::number(actual, 1)
                    ));
                }
                report.provisioned_rps = actual;
                report.met = false;
                report.predicted_attainment = None;
                report.tolerance = None;
            }
        }
        let more = overstated.len().saturating_sub(named.len());
        let note = format!(
            "{} the plan's instances provide (edited after planning?): {}{}; shown as the instances give them and not \
             claimed met (`tessera verify` checks the plan against its profiles)",
            if overstated.len() == 1 {
                "1 service's report claims more than".to_string()
            } else {
                format!("{} services' reports claim more than", overstated.len())
            },
            named.join("; "),
            if more > 0 { format!("; and {more} more") } else { String::new() }
        );
        self.notes.push(note.clone());
        Some(note)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu_json(instances: &str) -> String {
        format!(r#"{{"node": 0, "index": 1, "gpu_model": "a100-80gb", "instances": [{instances}]}}"#)
    }

    const DEDICATED: &str = r#"{"profile": "3g.40gb", "size": 3, "start": 4, "service": "chat", "model": "bert",
        "batch": 8, "procs": 2, "throughput_rps": 100.0, "latency_ms": 40.0}"#;
    const SHARED: &str = r#"{"profile": "1g.10gb", "size": 1, "start": 0, "sharing": "serialized", "members": [
        {"service": "a", "model": "resnet50", "batch": 1, "latency_ms": 5.0, "throughput_rps": 196.0,
         "capacity_rps": 8.0, "memory_gb": 2.0}]}"#;

    #[test]
    fn a_gpu_reads_both_kinds_of_instance_and_writes_them_largest_first() {
        let gpu: GpuAssignment = serde_json::from_str(&gpu_json(&format!("{SHARED}, {DEDICATED}"))).unwrap();
        assert_eq!((gpu.instances.len(), gpu.shared.len()), (1, 1));
        assert_eq!(gpu.shared[0].members[0].service, "a");
        assert_eq!(gpu.layout().count(), 2);
        let written = serde_json::to_value(&gpu).unwrap();
        assert_eq!(written["instances"][0]["service"], "chat", "the 3g first");
        assert_eq!(written["instances"][1]["sharing"], "serialized");
        assert!(written["instances"][1].get("service").is_none(), "a shared instance has no service of its own");
        assert_eq!(serde_json::from_value::<GpuAssignment>(written).unwrap(), gpu);
    }

    #[test]
    fn a_mixed_up_instance_is_refused_naming_the_field() {
        let both = SHARED.replace(r#""sharing""#, r#""service": "x", "sharing""#);
        let error = serde_json::from_str::<GpuAssignment>(&gpu_json(&both)).unwrap_err().to_string();
        assert!(
            error.contains("GPU 0:1 instance 1: a shared instance lists `members` and takes no `service`"),
            "{error}"
        );
        let missing = DEDICATED.replace(r#""batch": 8, "#, "");
        let error = serde_json::from_str::<GpuAssignment>(&gpu_json(&missing)).unwrap_err().to_string();
        assert!(error.contains("missing field `batch`"), "{error}");
        let unknown = DEDICATED.replace(r#""procs""#, r#""mig": 1, "procs""#);
        assert!(serde_json::from_str::<GpuAssignment>(&gpu_json(&unknown)).unwrap_err().to_string().contains("mig"));
    }

    #[test]
    fn a_tolerance_at_the_top_of_the_searched_range_says_at_least() {
        assert_eq!(tolerance_text(0.058), "+5.8%");
        assert_eq!(tolerance_text(-0.012), "-1.2%");
        assert_eq!(tolerance_text(TOLERANCE_RANGE.1), "≥ +200.0%");
        assert_eq!(tolerance_text(1.999), "+199.9%");
    }
}
