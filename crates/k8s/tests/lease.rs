//! Leader election against the fake API server: one of two replicas
//! leads; a silent leader stops acting before another takes the Lease; a
//! leader that wakes after losing it writes nothing; under random pauses
//! two replicas never act at once.

use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::json;
use tessera_k8s::{Cluster, FakeApiServer, K8sError, Kind, LeaderElector, Leadership, LeaseOptions};

use crate::common::connect;

/// Quick timing for tests: a 600 ms Lease, 300 ms renew deadline, 50 ms
/// retry period.
fn elector(identity: &str) -> Arc<LeaderElector> {
    let options = LeaseOptions {
        lease_duration: Duration::from_millis(600),
        renew_deadline: Duration::from_millis(300),
        retry_period: Duration::from_millis(50),
        ..LeaseOptions::new("tessera", "tessera-autopilot", identity)
    };
    Arc::new(LeaderElector::new(options).unwrap())
}

fn setup() -> (tempfile::TempDir, FakeApiServer) {
    (tempfile::tempdir().unwrap(), FakeApiServer::start())
}

fn standby(holder: &str) -> Leadership {
    Leadership::Standby { holder: holder.to_string() }
}

#[test]
fn one_of_two_replicas_leads_and_the_other_stands_by() {
    let (dir, server) = setup();
    let cluster = connect(&server, dir.path());
    let (a, b) = (elector("replica-a"), elector("replica-b"));
    assert_eq!(a.try_lead(&cluster).unwrap(), Leadership::Leading);
    assert_eq!(b.try_lead(&cluster).unwrap(), standby("replica-a"));
    assert_eq!(a.try_lead(&cluster).unwrap(), Leadership::Leading, "the holder renews");
    assert_eq!(b.try_lead(&cluster).unwrap(), standby("replica-a"));
    assert!(a.is_leading() && !b.is_leading());
    let lease = server.get("leases", "tessera", "tessera-autopilot").unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], "replica-a");
    assert_eq!(lease["spec"]["leaseDurationSeconds"], 1);
    assert_eq!(lease["spec"]["leaseTransitions"], 0);
    let renewed = lease["spec"]["renewTime"].as_str().unwrap();
    assert!(renewed.ends_with('Z') && renewed.len() == "2026-11-29T16:37:42.123456Z".len(), "{renewed}");
}

#[test]
fn a_silent_leader_stops_acting_before_another_takes_the_lease() {
    let (dir, server) = setup();
    let cluster = connect(&server, dir.path());
    let (a, b) = (elector("replica-a"), elector("replica-b"));
    let renewed = Instant::now();
    assert_eq!(a.try_lead(&cluster).unwrap(), Leadership::Leading);
    // Replica a goes silent; b tries every retry period.
    let taken = loop {
        if b.try_lead(&cluster).unwrap() == Leadership::Leading {
            break Instant::now();
        }
        assert!(renewed.elapsed() < Duration::from_secs(5), "b never took the Lease");
        thread::sleep(Duration::from_millis(50));
    };
    assert!(taken - renewed >= Duration::from_millis(600), "taken after {:?}", taken - renewed);
    assert!(!a.is_leading(), "a still believes it leads when b takes over");
    let lease = server.get("leases", "tessera", "tessera-autopilot").unwrap();
    assert_eq!(
        (lease["spec"]["holderIdentity"].as_str(), lease["spec"]["leaseTransitions"].as_i64()),
        (Some("replica-b"), Some(1))
    );
}

#[test]
fn a_leader_that_wakes_after_losing_the_lease_writes_nothing() {
    let (dir, server) = setup();
    let a = elector("replica-a");
    let cluster_a = connect(&server, dir.path()).fenced_by(a.clone());
    let cluster_b = connect(&server, dir.path());
    let config_map = |value: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "probe", "namespace": "tessera"},
               "data": {"written-by": value}})
    };
    // Not leading yet: the fence takes the Lease on the first write.
    cluster_a.apply(Kind::ConfigMap, "tessera", "probe", &config_map("a"), false).unwrap();
    assert!(a.is_leading());
    // a pauses (a long GC, a partition) past the Lease's duration; b takes it.
    let b = elector("replica-b");
    let started = Instant::now();
    while b.try_lead(&cluster_b).unwrap() != Leadership::Leading {
        assert!(started.elapsed() < Duration::from_secs(5), "b never took the Lease");
        thread::sleep(Duration::from_millis(50));
    }
    let error = cluster_a.apply(Kind::ConfigMap, "tessera", "probe", &config_map("a again"), false).unwrap_err();
    assert!(matches!(error, K8sError::NotLeading(_)), "{error}");
    assert_eq!(
        error.to_string(),
        "replica-a no longer leads through Lease tessera/tessera-autopilot: replica-b holds it; it writes nothing more"
    );
    assert_eq!(server.get("configmaps", "tessera", "probe").unwrap()["data"]["written-by"], "a");
    assert!(cluster_a.delete(Kind::ConfigMap, "tessera", "probe").is_err());
}

/// When each replica may have acted: from the start of a `try_lead` that
/// won to its end plus the renew deadline (a superset of the window the
/// elector allows).
type Windows = Arc<Mutex<Vec<(usize, Instant, Instant)>>>;

#[test]
fn two_replicas_with_random_pauses_never_lead_at_once() {
    let (dir, server) = setup();
    let windows: Windows = Arc::default();
    let deadline = Duration::from_millis(300);
    let replicas: Vec<_> = (0..2)
        .map(|id| {
            let cluster: Cluster = connect(&server, dir.path());
            let windows = windows.clone();
            thread::spawn(move || {
                let me = elector(&format!("replica-{id}"));
                let mut state = 0x9e37_79b9_7f4a_7c15_u64 + id as u64;
                let until = Instant::now() + Duration::from_secs(4);
                while Instant::now() < until {
                    let start = Instant::now();
                    if me.try_lead(&cluster).unwrap() == Leadership::Leading {
                        windows.lock().unwrap().push((id, start, Instant::now() + deadline));
                    }
                    // xorshift: now and then a pause longer than the Lease (its
                    // recorded duration is a whole second).
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    let pause = if state.is_multiple_of(12) { 1_200 } else { 50 };
                    thread::sleep(Duration::from_millis(pause));
                }
            })
        })
        .collect();
    for replica in replicas {
        replica.join().unwrap();
    }
    let windows = windows.lock().unwrap();
    for id in 0..2 {
        assert!(windows.iter().any(|w| w.0 == id), "replica {id} never led");
    }
    for (k, first) in windows.iter().enumerate() {
        for second in &windows[k + 1..] {
            let overlap = first.1 < second.2 && second.1 < first.2;
            assert!(first.0 == second.0 || !overlap, "two leaders at once: {first:?} and {second:?}");
        }
    }
}

#[test]
fn timing_where_a_holder_could_outlive_its_lease_is_refused() {
    let options = LeaseOptions {
        renew_deadline: Duration::from_secs(20),
        ..LeaseOptions::new("tessera", "tessera-autopilot", "replica-a")
    };
    let error = LeaderElector::new(options).unwrap_err().to_string();
    assert_eq!(
        error,
        "leader election: the retry period (2 s) must be shorter than the renew deadline (20 s), and that shorter \
         than the lease duration (15 s)"
    );
    assert!(LeaderElector::new(LeaseOptions::new("tessera", "tessera-autopilot", "")).is_err());
}
