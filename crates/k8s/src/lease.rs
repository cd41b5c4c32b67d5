//! Leader election through a `coordination.k8s.io/v1` Lease, so that of
//! several replicas of the autopilot exactly one acts.
//!
//! The rules are client-go's:
//! - A replica leads while its last successful renewal was *sent* less
//!   than `renew_deadline` ago, on its own monotonic clock.
//! - A replica takes the Lease from another only after it has seen the
//!   same holder and renew time, unchanged, for the Lease's whole duration,
//!   measured on its own clock from when it first saw them: no replica
//!   compares its clock with another's.
//! - Every write of the Lease is conditional: a create fails when it
//!   exists, a replace when its resourceVersion changed since it was read.
//!   Of two replicas that try at once, one wins.
//!
//! A taker's wait starts no earlier than the holder's last renewal was
//! sent, and `renew_deadline < lease_duration`, so a holder that cannot
//! renew stops acting at least `lease_duration - renew_deadline` before any
//! other replica may take the Lease. (A write already in flight when the
//! deadline passes may still land: keep that margin above the API
//! server's latency.)

use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use serde_json::{json, Value};

use crate::cluster::{Cluster, Kind, WriteFence};
use crate::error::K8sError;

/// Which Lease the replicas contend for, who this replica is, and the
/// timing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseOptions {
    /// The Lease's namespace.
    pub namespace: String,
    /// The Lease's name.
    pub name: String,
    /// This replica's name (its pod's name in a cluster).
    pub identity: String,
    /// How long a Lease not renewed stays with its holder.
    pub lease_duration: Duration,
    /// How long after sending a renewal that succeeded the holder may act.
    pub renew_deadline: Duration,
    /// How often the holder renews and the others try to take the Lease.
    pub retry_period: Duration,
}

impl LeaseOptions {
    /// The Lease `name` in `namespace` for the replica `identity`, with
    /// client-go's timing: 15 s duration, 10 s renew deadline, 2 s retry.
    pub fn new(namespace: &str, name: &str, identity: &str) -> LeaseOptions {
        LeaseOptions::scaled(namespace, name, identity, Duration::from_secs(15))
    }

    /// The same with a lease duration of `lease_duration` and client-go's
    /// timing in proportion: the renew deadline two thirds of it, the
    /// retry period two fifteenths.
    pub fn scaled(namespace: &str, name: &str, identity: &str, lease_duration: Duration) -> LeaseOptions {
        LeaseOptions {
            namespace: namespace.to_string(),
            name: name.to_string(),
            identity: identity.to_string(),
            lease_duration,
            renew_deadline: lease_duration * 2 / 3,
            retry_period: lease_duration * 2 / 15,
        }
    }

    /// One line naming what is wrong: an empty name, or timing where the
    /// holder could still act when another may take over.
    fn check(&self) -> Result<(), K8sError> {
        let invalid = |message: String| Err(K8sError::Plan(format!("leader election: {message}")));
        if self.namespace.is_empty() || self.name.is_empty() || self.identity.is_empty() {
            return invalid("the Lease's namespace and name and the replica's identity must not be empty".into());
        }
        if self.lease_duration.as_secs_f64().ceil() > f64::from(i32::MAX) {
            return invalid(format!("a lease duration of {} s is too long", self.lease_duration.as_secs_f64()));
        }
        if !(self.retry_period < self.renew_deadline && self.renew_deadline < self.lease_duration) {
            return invalid(format!(
                "the retry period ({} s) must be shorter than the renew deadline ({} s), and that shorter than the \
                 lease duration ({} s)",
                self.retry_period.as_secs_f64(),
                self.renew_deadline.as_secs_f64(),
                self.lease_duration.as_secs_f64()
            ));
        }
        Ok(())
    }

    fn what(&self) -> String {
        format!("Lease {}/{}", self.namespace, self.name)
    }
}

/// What one attempt to lead found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Leadership {
    /// This replica holds the Lease and may act.
    Leading,
    /// Another replica holds it (its identity; empty when it was just
    /// created by someone else).
    Standby {
        /// The holder's identity.
        holder: String,
    },
}

/// One replica's side of the election. Shared by the loop and the
/// [`Cluster`] whose writes it fences, hence the lock inside.
#[derive(Debug)]
pub struct LeaderElector {
    options: LeaseOptions,
    state: Mutex<ElectorState>,
}

#[derive(Debug, Default)]
struct ElectorState {
    /// Until when this replica may act, on its clock.
    leading_until: Option<Instant>,
    /// When this replica's last successful renewal was sent.
    renewed_at: Option<Instant>,
    /// The holder and renew time last read, and when they were first read
    /// so.
    seen: Option<(String, String, Instant)>,
}

impl LeaderElector {
    /// An elector for `options` (checked).
    pub fn new(options: LeaseOptions) -> Result<LeaderElector, K8sError> {
        options.check()?;
        Ok(LeaderElector { options, state: Mutex::new(ElectorState::default()) })
    }

    /// Its options.
    pub fn options(&self) -> &LeaseOptions {
        &self.options
    }

    fn state(&self) -> MutexGuard<'_, ElectorState> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether this replica may act now: it holds the Lease and its last
    /// renewal was sent less than the renew deadline ago.
    pub fn is_leading(&self) -> bool {
        self.state().leading_until.is_some_and(|until| Instant::now() < until)
    }

    /// Takes or renews the Lease where the rules allow (one read, at most
    /// one conditional write). A request that fails leaves what this
    /// replica holds as it was: it still leads until its deadline.
    pub fn try_lead(&self, cluster: &Cluster) -> Result<Leadership, K8sError> {
        let sent = Instant::now();
        let now = Timestamp::now();
        let options = &self.options;
        let Some(found) = cluster.get(Kind::Lease, Some(&options.namespace), &options.name)? else {
            let lease = self.lease_object(None, now, now, 0);
            let created = cluster.create(Kind::Lease, &options.namespace, &lease)?;
            return Ok(self.settle(created, sent, now, String::new()));
        };
        let unreadable = |e: serde_json::Error| K8sError::Cluster {
            context: cluster.context().to_string(),
            message: format!("{} cannot be read: {e}", options.what()),
        };
        let lease: Lease = serde_json::from_value(found.clone()).map_err(unreadable)?;
        let spec = lease.spec.unwrap_or_default();
        let holder = spec.holder_identity.unwrap_or_default();
        let renewed = spec.renew_time.map(|time| micro_time(time.0)).unwrap_or_default();
        // The longer of the recorded duration and this replica's: replicas
        // configured apart (in a rollout) still wait long enough.
        let duration = spec
            .lease_duration_seconds
            .and_then(|seconds| u64::try_from(seconds).ok())
            .map_or(options.lease_duration, |seconds| options.lease_duration.max(Duration::from_secs(seconds)));
        let first_seen = {
            let mut state = self.state();
            match &state.seen {
                Some((seen_holder, seen_renewed, at)) if *seen_holder == holder && *seen_renewed == renewed => *at,
                _ => {
                    state.seen = Some((holder.clone(), renewed, sent));
                    sent
                }
            }
        };
        let mine = holder == options.identity;
        let expired = first_seen + duration <= sent;
        if !(mine || holder.is_empty() || expired) {
            self.state().leading_until = None;
            return Ok(Leadership::Standby { holder });
        }
        let transitions = spec.lease_transitions.unwrap_or(0).saturating_add(i32::from(!mine));
        let acquired = match (mine, spec.acquire_time) {
            (true, Some(time)) => time.0,
            _ => now,
        };
        let version = found["metadata"]["resourceVersion"].clone();
        let mut lease = self.lease_object(Some(version), acquired, now, transitions);
        if let Some(uid) = found["metadata"]["uid"].as_str() {
            lease["metadata"]["uid"] = uid.into();
        }
        let replaced = cluster.replace(Kind::Lease, &options.namespace, &options.name, &lease)?;
        Ok(self.settle(replaced, sent, now, holder))
    }

    /// Records the outcome of a conditional write sent at `sent`.
    fn settle(&self, won: bool, sent: Instant, now: Timestamp, holder: String) -> Leadership {
        let mut state = self.state();
        if won {
            state.leading_until = Some(sent + self.options.renew_deadline);
            state.renewed_at = Some(sent);
            state.seen = Some((self.options.identity.clone(), micro_time(now), sent));
            Leadership::Leading
        } else {
            state.leading_until = None;
            Leadership::Standby { holder }
        }
    }

    /// Before an action: renews the Lease when the last renewal is a retry
    /// period old, and answers whether this replica may act. A renewal
    /// that fails to reach the server keeps the lead until its deadline.
    pub fn keep_leading(&self, cluster: &Cluster) -> Result<(), K8sError> {
        let due = self.state().renewed_at.is_none_or(|at| at.elapsed() >= self.options.retry_period);
        let attempt = if due { Some(self.try_lead(cluster)) } else { None };
        if self.is_leading() {
            return Ok(());
        }
        let holder = match attempt {
            Some(Ok(Leadership::Standby { holder })) => holder,
            Some(Err(error)) => return Err(self.not_leading(format!("it could not renew it: {error}"))),
            _ => String::new(),
        };
        Err(self.not_leading(if holder.is_empty() {
            "it does not hold it".to_string()
        } else {
            format!("{holder} holds it")
        }))
    }

    fn not_leading(&self, why: String) -> K8sError {
        K8sError::NotLeading(format!(
            "{} no longer leads through {}: {why}; it writes nothing more",
            self.options.identity,
            self.options.what()
        ))
    }

    /// The Lease as this replica writes it.
    fn lease_object(&self, version: Option<Value>, acquired: Timestamp, renewed: Timestamp, transitions: i32) -> Value {
        let options = &self.options;
        let seconds = options.lease_duration.as_secs_f64().ceil() as i32;
        let mut lease = json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": options.name, "namespace": options.namespace},
            "spec": {
                "holderIdentity": options.identity,
                "leaseDurationSeconds": seconds,
                "acquireTime": micro_time(acquired),
                "renewTime": micro_time(renewed),
                "leaseTransitions": transitions,
            }
        });
        if let Some(version) = version {
            lease["metadata"]["resourceVersion"] = version;
        }
        lease
    }
}

/// A MicroTime as the API writes it: RFC 3339, microseconds, UTC.
fn micro_time(time: Timestamp) -> String {
    time.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

impl WriteFence for LeaderElector {
    fn keep(&self, cluster: &Cluster) -> Result<(), K8sError> {
        self.keep_leading(cluster)
    }
}
