//! Test fixtures shared by the store's workload and colocation tests.

use tessera_core::colocation::{Colocation, GroupMember, WorkloadMetrics};

use super::Store;

/// Metrics with awkward values (no short decimal form, subnormal, huge)
/// so that the round trip has to be exact.
pub(crate) fn metrics(name: &str, seed: f64) -> WorkloadMetrics {
    WorkloadMetrics {
        workload: name.to_string(),
        kernel: [seed / 3.0, 0.1 + 0.2 + seed, 5e-324, 1e300 * seed, seed.sqrt(), 0.0],
        exclusive_rps: 98.348 + seed / 7.0,
        sm_util_pct: std::f64::consts::PI * seed,
        mem_util_pct: f64::MIN_POSITIVE,
        memory_gb: 2.0 + seed,
    }
}

pub(crate) fn member(name: &str, seed: f64) -> GroupMember {
    GroupMember { metrics: metrics(name, seed), colocated_rps: seed / 11.0 }
}

pub(crate) fn colocation(members: &[(&str, f64)]) -> Colocation {
    Colocation { members: members.iter().map(|&(name, seed)| member(name, seed)).collect() }
}

pub(crate) fn count(store: &Store, table: &str) -> i64 {
    store.conn.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |row| row.get(0)).unwrap()
}

pub(crate) fn assert_one_line(message: &str, parts: &[&str]) {
    assert!(!message.contains('\n'), "{message}");
    for part in parts {
        assert!(message.contains(part), "'{part}' missing from: {message}");
    }
}
