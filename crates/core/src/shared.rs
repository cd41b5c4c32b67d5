//! Shared MIG instances: one instance hosting several light services.
//!
//! A dedicated instance ([`crate::InstanceAssignment`]) serves one service.
//! A [`SharedInstance`] serves several, each a [`SharedMember`] with its
//! own queue, taking turns on the instance as its [`Sharing`] says. In a
//! plan's JSON both sit in a GPU's `instances`: a shared one names its
//! `sharing` and lists its `members` instead of a service's fields.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// How the members of a shared instance take turns on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Sharing {
    /// One executor runs one batch at a time, taking it from the member
    /// queue whose oldest request is oldest: every member runs as its solo
    /// profile says, and waits behind the others' batches (no interference
    /// to predict).
    #[default]
    Serialized,
}

impl Sharing {
    /// Every discipline.
    pub const ALL: [Sharing; 1] = [Sharing::Serialized];

    /// The name in plans and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Sharing::Serialized => "serialized",
        }
    }
}

impl fmt::Display for Sharing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Sharing {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Sharing::ALL
            .into_iter()
            .find(|sharing| sharing.name() == s)
            .ok_or_else(|| format!("unknown sharing '{s}' (known: serialized)"))
    }
}

/// One service of a shared instance: its queue's batches, as profiled
/// alone in an instance of the shared instance's size with one process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SharedMember {
    /// The service.
    pub service: String,
    /// The model it runs.
    pub model: String,
    /// Requests per batch.
    pub batch: u32,
    /// Latency of one batch in ms, as profiled alone.
    pub latency_ms: f64,
    /// Throughput in requests/s as profiled alone (the instance all its).
    pub throughput_rps: f64,
    /// The requests/s the plan routes to the member: all of its service's.
    pub capacity_rps: f64,
    /// Device memory the member needs at its batch (GB): measured, or an
    /// upper bound from the profiles (the plan's notes say which).
    pub memory_gb: f64,
}

impl SharedMember {
    /// The time one batch holds the executor (ms): its latency, or its
    /// share of the profiled throughput where that is longer.
    pub fn busy_ms(&self) -> f64 {
        self.latency_ms.max(1000.0 * f64::from(self.batch) / self.throughput_rps)
    }

    /// The share of time the executor is busy with this member at its
    /// routed rate, as profiled, when each batch is full.
    pub fn busy_share(&self) -> f64 {
        self.capacity_rps / f64::from(self.batch) * self.busy_ms() / 1000.0
    }
}

/// One MIG instance shared by several services.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SharedInstance {
    /// MIG profile name, e.g. `1g.10gb`.
    pub profile: String,
    /// Compute slices (GPCs).
    pub size: u8,
    /// Start memory slice (explicit placement).
    pub start: u8,
    /// How the members take turns.
    pub sharing: Sharing,
    /// The services it hosts, each with its own queue.
    pub members: Vec<SharedMember>,
}

impl SharedInstance {
    /// The share of time the executor is busy at the members' routed rates
    /// with every batch `slowdown` slower than profiled, when each batch
    /// is full (0 to 1 for a stable instance).
    pub fn busy_share(&self, slowdown: f64) -> f64 {
        self.members.iter().map(SharedMember::busy_share).sum::<f64>() * (1.0 + slowdown)
    }

    /// `true` when `other` runs the same executor: the same discipline
    /// serving the same members (service, model and batch, in order).
    pub fn same_executor(&self, other: &SharedInstance) -> bool {
        let serves = |shared: &SharedInstance| -> Vec<(String, String, u32)> {
            shared.members.iter().map(|m| (m.service.clone(), m.model.clone(), m.batch)).collect()
        };
        self.sharing == other.sharing && serves(self) == serves(other)
    }

    /// What a multi-model server running the instance is told, as
    /// environment variables: `TESSERA_SHARING` (the discipline) and
    /// `TESSERA_MEMBERS` (JSON: each member's `service`, `model` and
    /// `batch`, in the plan's order). The one contract of such a server,
    /// whoever starts it (a Kubernetes pod, a node deploy).
    pub fn server_env(&self) -> [(&'static str, String); 2] {
        let members: Vec<serde_json::Value> = self
            .members
            .iter()
            .map(|m| serde_json::json!({"service": m.service, "model": m.model, "batch": m.batch}))
            .collect();
        [
            ("TESSERA_SHARING", self.sharing.to_string()),
            ("TESSERA_MEMBERS", serde_json::Value::Array(members).to_string()),
        ]
    }

    /// The members' memory together (GB).
    pub fn memory_gb(&self) -> f64 {
        self.members.iter().map(|member| member.memory_gb).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(service: &str, rate: f64) -> SharedMember {
        SharedMember {
            service: service.into(),
            model: "resnet50".into(),
            batch: 1,
            latency_ms: 5.0,
            throughput_rps: 196.0,
            capacity_rps: rate,
            memory_gb: 2.0,
        }
    }

    #[test]
    fn a_member_holds_the_executor_for_the_longer_of_latency_and_throughput() {
        let m = member("a", 10.0);
        assert!((m.busy_ms() - 1000.0 / 196.0).abs() < 1e-9);
        let slow = SharedMember { latency_ms: 9.0, ..m };
        assert_eq!(slow.busy_ms(), 9.0);
    }

    #[test]
    fn busy_share_and_memory_add_up_over_members() {
        let shared = SharedInstance {
            profile: "1g.10gb".into(),
            size: 1,
            start: 0,
            sharing: Sharing::Serialized,
            members: vec![member("a", 10.0), member("b", 30.0)],
        };
        let busy = 40.0 * (1000.0 / 196.0) / 1000.0;
        assert!((shared.busy_share(0.0) - busy).abs() < 1e-12);
        assert!((shared.busy_share(0.1) - 1.1 * busy).abs() < 1e-12);
        assert_eq!(shared.memory_gb(), 4.0);
        let [sharing, members] = shared.server_env();
        assert_eq!(sharing, ("TESSERA_SHARING", "serialized".to_string()));
        assert_eq!(
            members.1,
            r#"[{"batch":1,"model":"resnet50","service":"a"},{"batch":1,"model":"resnet50","service":"b"}]"#
        );
        assert_eq!("serialized".parse::<Sharing>(), Ok(Sharing::Serialized));
        assert!("mps".parse::<Sharing>().unwrap_err().contains("serialized"));
    }
}
