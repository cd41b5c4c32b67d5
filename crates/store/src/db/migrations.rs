//! The store's schema, as an ordered list of migrations.
//!
//! Migration `i` (0-based) brings the database from version `i` to `i + 1`;
//! the version is kept in SQLite's `PRAGMA user_version`. Never edit a
//! released migration: append a new one.

use std::path::Path;

use rusqlite::{Connection, TransactionBehavior};

use crate::error::StoreError;

/// Every migration, oldest first.
pub(crate) const MIGRATIONS: &[&str] = &[
    // v1: imports and profile points.
    r#"
    CREATE TABLE imports (
        id INTEGER PRIMARY KEY,
        source TEXT NOT NULL,
        format TEXT NOT NULL,
        imported_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
        "rows" INTEGER NOT NULL CHECK ("rows" >= 0)
    );
    CREATE TABLE profiles (
        gpu_model TEXT NOT NULL CHECK (length(gpu_model) > 0),
        model TEXT NOT NULL CHECK (length(model) > 0),
        size_gpcs INTEGER NOT NULL CHECK (size_gpcs > 0),
        batch INTEGER NOT NULL CHECK (batch > 0),
        procs INTEGER NOT NULL CHECK (procs > 0),
        throughput_rps REAL NOT NULL CHECK (throughput_rps > 0),
        latency_ms REAL NOT NULL CHECK (latency_ms > 0),
        memory_gb REAL NULL CHECK (memory_gb IS NULL OR memory_gb >= 0),
        import_id INTEGER NOT NULL REFERENCES imports(id),
        PRIMARY KEY (gpu_model, model, size_gpcs, batch, procs)
    );
    CREATE INDEX profiles_by_import ON profiles(import_id);
    "#,
    // v2: workloads (metrics alone) and measured colocations under MPS.
    r#"
    CREATE TABLE workloads (
        name TEXT NOT NULL PRIMARY KEY CHECK (length(name) > 0),
        threads REAL NOT NULL CHECK (threads >= 0),
        sm_throughput_pct REAL NOT NULL CHECK (sm_throughput_pct >= 0),
        dram_throughput_pct REAL NOT NULL CHECK (dram_throughput_pct >= 0),
        memory_throughput_pct REAL NOT NULL CHECK (memory_throughput_pct >= 0),
        registers REAL NOT NULL CHECK (registers >= 0),
        static_shared_memory REAL NOT NULL CHECK (static_shared_memory >= 0),
        exclusive_rps REAL NOT NULL CHECK (exclusive_rps > 0),
        sm_util_pct REAL NOT NULL CHECK (sm_util_pct >= 0),
        mem_util_pct REAL NOT NULL CHECK (mem_util_pct >= 0),
        memory_gb REAL NOT NULL CHECK (memory_gb >= 0),
        import_id INTEGER NOT NULL REFERENCES imports(id)
    );
    CREATE INDEX workloads_by_import ON workloads(import_id);
    CREATE TABLE colocations (
        id INTEGER PRIMARY KEY,
        import_id INTEGER NOT NULL REFERENCES imports(id),
        size INTEGER NOT NULL CHECK (size >= 2)
    );
    CREATE INDEX colocations_by_import ON colocations(import_id);
    CREATE TABLE colocation_members (
        colocation_id INTEGER NOT NULL REFERENCES colocations(id) ON DELETE CASCADE,
        position INTEGER NOT NULL CHECK (position >= 0),
        workload TEXT NOT NULL CHECK (length(workload) > 0),
        colocated_rps REAL NOT NULL CHECK (colocated_rps >= 0),
        threads REAL NOT NULL CHECK (threads >= 0),
        sm_throughput_pct REAL NOT NULL CHECK (sm_throughput_pct >= 0),
        dram_throughput_pct REAL NOT NULL CHECK (dram_throughput_pct >= 0),
        memory_throughput_pct REAL NOT NULL CHECK (memory_throughput_pct >= 0),
        registers REAL NOT NULL CHECK (registers >= 0),
        static_shared_memory REAL NOT NULL CHECK (static_shared_memory >= 0),
        exclusive_rps REAL NOT NULL CHECK (exclusive_rps > 0),
        sm_util_pct REAL NOT NULL CHECK (sm_util_pct >= 0),
        mem_util_pct REAL NOT NULL CHECK (mem_util_pct >= 0),
        memory_gb REAL NOT NULL CHECK (memory_gb >= 0),
        PRIMARY KEY (colocation_id, position)
    );
    CREATE INDEX colocation_members_by_workload ON colocation_members(workload);
    "#,
    // v3: registered workloads (how to run and measure them) and the journal
    // of actions taken on hardware.
    r#"
    CREATE TABLE registered_workloads (
        name TEXT NOT NULL PRIMARY KEY CHECK (length(name) > 0),
        family TEXT NOT NULL,
        task TEXT NOT NULL CHECK (task IN ('inference', 'training')),
        batch INTEGER NOT NULL CHECK (batch >= 1),
        command TEXT NOT NULL CHECK (length(command) > 0),
        throughput_regex TEXT NULL
    );
    CREATE TABLE journal (
        id INTEGER PRIMARY KEY,
        at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
        action TEXT NOT NULL CHECK (length(action) > 0),
        detail TEXT NOT NULL
    );
    "#,
    // v4: kernel metrics of workloads without metrics alone yet (an
    // imported Nsight Compute report on a machine without a GPU); they move
    // into `workloads` when the metrics alone are stored.
    r#"
    CREATE TABLE kernel_metrics (
        name TEXT NOT NULL PRIMARY KEY CHECK (length(name) > 0),
        threads REAL NOT NULL CHECK (threads >= 0),
        sm_throughput_pct REAL NOT NULL CHECK (sm_throughput_pct >= 0),
        dram_throughput_pct REAL NOT NULL CHECK (dram_throughput_pct >= 0),
        memory_throughput_pct REAL NOT NULL CHECK (memory_throughput_pct >= 0),
        registers REAL NOT NULL CHECK (registers >= 0),
        static_shared_memory REAL NOT NULL CHECK (static_shared_memory >= 0),
        import_id INTEGER NOT NULL REFERENCES imports(id)
    );
    "#,
    // v5: the service's tenants (SLOs with a version for optimistic
    // concurrency) and planning jobs, each with its inputs and, when done,
    // its plan.
    r#"
    CREATE TABLE services (
        name TEXT NOT NULL PRIMARY KEY CHECK (length(name) > 0),
        model TEXT NOT NULL CHECK (length(model) > 0),
        rate_rps REAL NOT NULL CHECK (rate_rps > 0),
        latency_ms REAL NOT NULL CHECK (latency_ms > 0),
        image TEXT NULL,
        args TEXT NOT NULL DEFAULT '[]',
        version INTEGER NOT NULL CHECK (version >= 1),
        updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))
    );
    CREATE TABLE plan_jobs (
        id INTEGER PRIMARY KEY,
        status TEXT NOT NULL CHECK (status IN ('queued', 'running', 'done', 'failed')),
        request TEXT NOT NULL,
        inputs TEXT NOT NULL,
        plan TEXT NULL,
        error TEXT NULL,
        created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
        started_at TEXT NULL,
        finished_at TEXT NULL,
        CHECK ((status = 'done') = (plan IS NOT NULL)),
        CHECK ((status = 'failed') = (error IS NOT NULL))
    );
    "#,
    // v6: each service's percentile: the share of its requests (%) that
    // must finish within its latency SLO.
    r#"
    ALTER TABLE services ADD COLUMN percentile REAL NOT NULL DEFAULT 99.0
        CHECK (percentile > 0 AND percentile < 100);
    "#,
    // v7: the autopilot's decisions, each with its reason, the GPUs before
    // and after, and the rates it saw and forecast (JSON objects by
    // service).
    r#"
    CREATE TABLE autopilot_decisions (
        id INTEGER PRIMARY KEY,
        time_s REAL NOT NULL,
        action TEXT NOT NULL CHECK (length(action) > 0),
        reason TEXT NOT NULL,
        gpus_before INTEGER NOT NULL CHECK (gpus_before >= 0),
        gpus_after INTEGER NOT NULL CHECK (gpus_after >= 0),
        observed_rps TEXT NOT NULL DEFAULT '{}',
        forecast_rps TEXT NOT NULL DEFAULT '{}',
        outcome TEXT NOT NULL
    );
    CREATE INDEX autopilot_decisions_by_time ON autopilot_decisions(time_s);
    "#,
    // v8: what a profile point measured of its batch times beside their
    // mean (each NULL where not measured).
    r#"
    ALTER TABLE profiles ADD COLUMN latency_p50_ms REAL NULL CHECK (latency_p50_ms IS NULL OR latency_p50_ms > 0);
    ALTER TABLE profiles ADD COLUMN latency_p99_ms REAL NULL CHECK (latency_p99_ms IS NULL OR latency_p99_ms > 0);
    ALTER TABLE profiles ADD COLUMN dispatch_gap_ms REAL NULL CHECK (dispatch_gap_ms IS NULL OR dispatch_gap_ms >= 0);
    ALTER TABLE profiles ADD COLUMN serving_slowdown REAL NULL;
    "#,
];

/// The schema version this code writes and understands.
pub(crate) const SUPPORTED_VERSION: u32 = MIGRATIONS.len() as u32;

/// The database's schema version.
pub(crate) fn version(conn: &Connection) -> rusqlite::Result<u32> {
    conn.pragma_query_value(None, "user_version", |row| row.get(0))
}

/// Brings the database to [`SUPPORTED_VERSION`]: the pending migrations run
/// in order inside one write transaction (so concurrent openers apply them
/// once). A database newer than this code is refused. Returns the version
/// the database had.
pub(crate) fn migrate(conn: &mut Connection, path: &Path) -> Result<u32, StoreError> {
    let sqlite = |context: &str| {
        let context = context.to_string();
        move |source| StoreError::sqlite(path, context, source)
    };
    let too_new = |found| StoreError::SchemaTooNew { path: path.to_path_buf(), found, supported: SUPPORTED_VERSION };
    let found = version(conn).map_err(sqlite("reading the schema version"))?;
    if found == SUPPORTED_VERSION {
        return Ok(found);
    }
    if found > SUPPORTED_VERSION {
        return Err(too_new(found));
    }
    let transaction = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sqlite("starting the schema migration"))?;
    // Another process may have migrated since the first look.
    let found = version(&transaction).map_err(sqlite("reading the schema version"))?;
    if found > SUPPORTED_VERSION {
        return Err(too_new(found));
    }
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        let version = index as u32 + 1;
        let context = format!("migrating the schema to version {version}");
        transaction.execute_batch(sql).map_err(sqlite(&context))?;
        transaction.pragma_update(None, "user_version", version).map_err(sqlite(&context))?;
    }
    transaction.commit().map_err(sqlite("committing the schema migration"))?;
    Ok(found)
}
