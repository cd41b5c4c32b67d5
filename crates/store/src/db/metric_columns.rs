//! The ten metric columns that `workloads` and `colocation_members` share,
//! and how a workload's metrics are bound to them and read back.

use rusqlite::types::ToSql;
use rusqlite::Row;
use tessera_core::colocation::WorkloadMetrics;

/// The metric columns shared by `workloads` and `colocation_members`, in the
/// order of [`metric_values`]: the six kernel metrics, then exclusive
/// throughput, SM and memory utilisation, and memory footprint.
pub(super) const METRIC_COLUMNS: [&str; 10] = [
    "threads",
    "sm_throughput_pct",
    "dram_throughput_pct",
    "memory_throughput_pct",
    "registers",
    "static_shared_memory",
    "exclusive_rps",
    "sm_util_pct",
    "mem_util_pct",
    "memory_gb",
];

/// `INSERT INTO workloads (name, <metrics>, import_id) VALUES (?1, ..)`,
/// the parameters in the order of [`bind`].
pub(super) fn insert_workload_sql() -> String {
    let placeholders: Vec<String> = (1..=METRIC_COLUMNS.len() + 2).map(|i| format!("?{i}")).collect();
    format!(
        "INSERT INTO workloads (name, {}, import_id) VALUES ({})",
        METRIC_COLUMNS.join(", "),
        placeholders.join(", ")
    )
}

/// The values of [`METRIC_COLUMNS`] for `metrics`.
pub(super) fn metric_values(metrics: &WorkloadMetrics) -> [f64; 10] {
    let [threads, sm, dram, memory, registers, shared] = metrics.kernel;
    [
        threads,
        sm,
        dram,
        memory,
        registers,
        shared,
        metrics.exclusive_rps,
        metrics.sm_util_pct,
        metrics.mem_util_pct,
        metrics.memory_gb,
    ]
}

/// The parameters of [`insert_workload_sql`]: the name, the metric values
/// and the import id.
pub(super) fn bind<'a>(name: &'a dyn ToSql, values: &'a [f64; 10], import_id: &'a i64) -> Vec<&'a dyn ToSql> {
    let mut bound: Vec<&dyn ToSql> = vec![name];
    bound.extend(values.iter().map(|value| value as &dyn ToSql));
    bound.push(import_id);
    bound
}

/// The metrics of `workload` read from the [`METRIC_COLUMNS`] of `row`,
/// starting at column `first`.
pub(super) fn read_metrics(row: &Row, first: usize, workload: String) -> rusqlite::Result<WorkloadMetrics> {
    let value = |i: usize| row.get::<_, f64>(first + i);
    Ok(WorkloadMetrics {
        workload,
        kernel: [value(0)?, value(1)?, value(2)?, value(3)?, value(4)?, value(5)?],
        exclusive_rps: value(6)?,
        sm_util_pct: value(7)?,
        mem_util_pct: value(8)?,
        memory_gb: value(9)?,
    })
}
