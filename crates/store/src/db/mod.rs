//! The profile store: an SQLite database of imported profile points.
//!
//! Opening a store applies any pending schema migrations (opening it
//! read-only changes nothing and needs the current schema); the profile
//! operations live in the `profiles` submodule; workloads' metrics alone in
//! `workloads`, their kernel metrics awaiting them in `kernel_metrics`, the
//! columns both share with colocation members in `metric_columns`; measured
//! colocations in `colocations`; registered workloads and the journal in
//! `workloads_registry`;
//! the autopilot's decisions in `autopilot`.

mod autopilot;
mod colocations;
#[cfg(test)]
mod fixtures;
mod kernel_metrics;
mod metric_columns;
mod migrations;
mod profiles;
mod services;
mod workloads;
mod workloads_registry;

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use crate::error::StoreError;

pub use autopilot::AutopilotDecision;
pub use colocations::{ColocationImportSummary, StoredColocation};
pub use kernel_metrics::KernelMetricsStored;
pub use profiles::{ImportSummary, ProfileSummary};
pub use services::{JobStatus, StoredJob, StoredService};
pub use workloads_registry::{JournalEntry, RegisteredWorkload, WorkloadTask};

/// What a store holds, counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreCounts {
    /// The schema version.
    pub schema_version: u32,
    /// (GPU model, model) profiles.
    pub profiles: u64,
    /// Profile points, summed over the profiles.
    pub profile_points: u64,
    /// Workloads with metrics alone.
    pub workloads: u64,
    /// Registered workloads (how to run them).
    pub registered_workloads: u64,
    /// Measured colocations.
    pub colocations: u64,
    /// Imports recorded (of profiles, workloads and colocations).
    pub imports: u64,
    /// Journal entries.
    pub journal_entries: u64,
}

/// How long a write waits for another process's lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// An open profile store.
#[derive(Debug)]
pub struct Store {
    conn: Connection,
    path: PathBuf,
}

/// Records an import of `rows` rows of `format` from `source` in
/// `transaction`; its id, which the imported rows refer to.
pub(crate) fn record_import(
    transaction: &rusqlite::Transaction<'_>,
    source: &str,
    format: &str,
    rows: usize,
) -> rusqlite::Result<i64> {
    transaction.execute(
        r#"INSERT INTO imports (source, format, "rows") VALUES (?1, ?2, ?3)"#,
        rusqlite::params![source, format, rows as i64],
    )?;
    Ok(transaction.last_insert_rowid())
}

/// What [`Store::migrate`] did: the schema version before and after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchemaMigration {
    /// The version the database had (0: a new database).
    pub from: u32,
    /// The version it has now, this program's.
    pub to: u32,
}

/// A folder where a store file is expected is refused by name (SQLite
/// would say only "disk I/O error").
fn refuse_directory(path: &Path) -> Result<(), StoreError> {
    match path.is_dir() {
        true => Err(StoreError::io(
            path,
            std::io::Error::new(
                std::io::ErrorKind::IsADirectory,
                "is a folder, not a store file (name a file in it, e.g. profiles.sqlite)",
            ),
        )),
        false => Ok(()),
    }
}

/// The default database location: `<data_dir>/tessera/profiles.sqlite`,
/// where `<data_dir>` is the platform's per-user data folder (e.g.
/// `~/.local/share` on Linux). `None` when no home folder is known.
pub fn default_path() -> Option<PathBuf> {
    let dirs = directories::BaseDirs::new()?;
    Some(dirs.data_dir().join("tessera").join("profiles.sqlite"))
}

impl Store {
    /// Opens (creating it and its parent folders if needed) the database at
    /// `path`, in WAL mode with foreign keys enforced, and migrates its
    /// schema to the current version.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        Store::open_migrating(path).map(|(store, _)| store)
    }

    /// Opens the store at `path` as [`Store::open`] does, and says which
    /// schema version it was at before ([`SchemaMigration`]).
    pub fn migrate(path: &Path) -> Result<SchemaMigration, StoreError> {
        let (store, from) = Store::open_migrating(path)?;
        Ok(SchemaMigration { from, to: store.schema_version()? })
    }

    /// [`Store::open`], and the schema version the database had.
    fn open_migrating(path: &Path) -> Result<(Store, u32), StoreError> {
        refuse_directory(path)?;
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|cause| StoreError::io(parent, cause))?;
        }
        let conn = Connection::open(path).map_err(|source| StoreError::sqlite(path, "opening the database", source))?;
        Store::configure(conn, path.to_path_buf())
    }

    /// Opens the existing database at `path` for reading only, for commands
    /// that only read: no folder or file is created, nothing is migrated or
    /// configured, and every write fails. A store of an older schema is
    /// refused (a command that writes upgrades it), as is a newer one. A
    /// store in a folder this process may not write, whose write-ahead log
    /// is absent or empty (no writer has changes pending), is read as an
    /// immutable file:
    /// SQLite could not otherwise create the shared-memory file it reads a
    /// WAL database with.
    pub fn open_read_only(path: &Path) -> Result<Store, StoreError> {
        refuse_directory(path)?;
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags)
            .map_err(|source| StoreError::sqlite(path, "opening the database read-only", source))?;
        let store = Store { conn, path: path.to_path_buf() };
        match store.check_current() {
            Err(StoreError::Sqlite { cause, .. }) if needs_immutable(&cause, path) => {
                let flags = flags | OpenFlags::SQLITE_OPEN_URI;
                let conn = Connection::open_with_flags(immutable_uri(path), flags)
                    .map_err(|source| StoreError::sqlite(path, "opening the database read-only", source))?;
                let store = Store { conn, path: path.to_path_buf() };
                store.check_current()?;
                Ok(store)
            }
            checked => checked.map(|()| store),
        }
    }

    /// Refuses a schema other than [`migrations::SUPPORTED_VERSION`] (the
    /// read-only check).
    fn check_current(&self) -> Result<(), StoreError> {
        let found = self.schema_version()?;
        let supported = migrations::SUPPORTED_VERSION;
        match found.cmp(&supported) {
            std::cmp::Ordering::Equal => Ok(()),
            std::cmp::Ordering::Greater => Err(StoreError::SchemaTooNew { path: self.path.clone(), found, supported }),
            std::cmp::Ordering::Less => Err(StoreError::SchemaTooOld { path: self.path.clone(), found, supported }),
        }
    }

    /// A fresh store that lives in memory only (for tests and dry runs).
    pub fn open_in_memory() -> Result<Store, StoreError> {
        let path = PathBuf::from(":memory:");
        let conn = Connection::open_in_memory()
            .map_err(|source| StoreError::sqlite(&path, "opening an in-memory database", source))?;
        Store::configure(conn, path).map(|(store, _)| store)
    }

    fn configure(mut conn: Connection, path: PathBuf) -> Result<(Store, u32), StoreError> {
        let sqlite = |context: &str| {
            let (path, context) = (path.clone(), context.to_string());
            move |source| StoreError::sqlite(&path, context, source)
        };
        conn.busy_timeout(BUSY_TIMEOUT).map_err(sqlite("setting the busy timeout"))?;
        conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get::<_, String>(0))
            .map_err(sqlite("enabling write-ahead logging"))?;
        conn.pragma_update(None, "foreign_keys", true).map_err(sqlite("enabling foreign keys"))?;
        let from = migrations::migrate(&mut conn, &path)?;
        Ok((Store { conn, path }, from))
    }

    /// The database file (`:memory:` for an in-memory store).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The database's schema version (`PRAGMA user_version`).
    pub fn schema_version(&self) -> Result<u32, StoreError> {
        migrations::version(&self.conn).map_err(|source| self.sqlite("reading the schema version", source))
    }

    /// The schema version and how many of each thing the store holds.
    pub fn counts(&self) -> Result<StoreCounts, StoreError> {
        let count = |sql: &str| -> Result<u64, StoreError> {
            self.conn
                .query_row(sql, [], |row| row.get::<_, i64>(0))
                .map(|n| n.unsigned_abs())
                .map_err(|error| self.sqlite("counting what the store holds", error))
        };
        Ok(StoreCounts {
            schema_version: self.schema_version()?,
            profiles: count("SELECT COUNT(*) FROM (SELECT DISTINCT gpu_model, model FROM profiles)")?,
            profile_points: count("SELECT COUNT(*) FROM profiles")?,
            workloads: count("SELECT COUNT(*) FROM workloads")?,
            registered_workloads: count("SELECT COUNT(*) FROM registered_workloads")?,
            colocations: count("SELECT COUNT(*) FROM colocations")?,
            imports: count("SELECT COUNT(*) FROM imports")?,
            journal_entries: count("SELECT COUNT(*) FROM journal")?,
        })
    }

    /// SQLite's integrity check of the whole database: `ok`, or the first
    /// problems it found, one per line.
    pub fn integrity_check(&self) -> Result<String, StoreError> {
        let mut statement =
            self.conn.prepare("PRAGMA integrity_check").map_err(|e| self.sqlite("checking integrity", e))?;
        let rows =
            statement.query_map([], |row| row.get::<_, String>(0)).map_err(|e| self.sqlite("checking integrity", e))?;
        let mut lines = Vec::new();
        for row in rows {
            lines.push(row.map_err(|e| self.sqlite("checking integrity", e))?);
        }
        Ok(lines.join("\n"))
    }

    /// An SQLite error with the database path and what the store was doing.
    fn sqlite(&self, context: &str, source: rusqlite::Error) -> StoreError {
        StoreError::sqlite(&self.path, context, source)
    }
}

/// `true` when reading the WAL database at `path` failed because SQLite
/// could not create its shared-memory file beside it (a folder this process
/// may not write) and its write-ahead log is absent or empty, so no writer
/// has changes pending: the file alone is the whole database.
fn needs_immutable(error: &rusqlite::Error, path: &Path) -> bool {
    let cannot_open =
        matches!(error.sqlite_error_code(), Some(rusqlite::ErrorCode::CannotOpen | rusqlite::ErrorCode::ReadOnly));
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    cannot_open && std::fs::metadata(&wal).map_or(true, |log| log.len() == 0)
}

/// The URI `file:<path>?immutable=1`, the path percent-encoded.
fn immutable_uri(path: &Path) -> String {
    let mut uri = String::from("file:");
    for &byte in path.as_os_str().as_encoded_bytes() {
        if byte.is_ascii_alphanumeric() || b"/._-~".contains(&byte) {
            uri.push(char::from(byte));
        } else {
            uri.push_str(&format!("%{byte:02X}"));
        }
    }
    uri.push_str("?immutable=1");
    uri
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_folders_and_migrates_to_the_current_version() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a").join("b").join("profiles.sqlite");
        let store = Store::open(&path).unwrap();
        assert_eq!(store.schema_version().unwrap(), migrations::SUPPORTED_VERSION);
        assert_eq!(store.path(), path);
        let mode: String = store.conn.pragma_query_value(None, "journal_mode", |row| row.get(0)).unwrap();
        assert_eq!(mode, "wal");
        let foreign_keys: bool = store.conn.pragma_query_value(None, "foreign_keys", |row| row.get(0)).unwrap();
        assert!(foreign_keys);
        drop(store);
        // Reopening is a no-op migration.
        let store = Store::open(&path).unwrap();
        assert_eq!(store.schema_version().unwrap(), migrations::SUPPORTED_VERSION);
    }

    /// A database at `path` with the schema of version 1.
    fn version_1_database(path: &Path) -> Connection {
        let conn = Connection::open(path).unwrap();
        conn.execute_batch(migrations::MIGRATIONS[0]).unwrap();
        conn.pragma_update(None, "user_version", 1).unwrap();
        conn
    }

    #[test]
    fn migrates_a_version_1_database_keeping_its_profiles() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("profiles.sqlite");
        {
            let conn = version_1_database(&path);
            conn.execute_batch(
                r#"INSERT INTO imports (source, format, "rows") VALUES ('old.csv', 'native', 1);
                INSERT INTO profiles VALUES ('a100-80gb', 'bert', 1, 4, 1, 10.5, 5.5, 1.25, 1);"#,
            )
            .unwrap();
        }
        let mut store = Store::open(&path).unwrap();
        assert_eq!(store.schema_version().unwrap(), migrations::SUPPORTED_VERSION);
        let list = store.list_profiles().unwrap();
        assert_eq!(list.len(), 1);
        assert_eq!((list[0].model.as_str(), list[0].points, list[0].source.as_str()), ("bert", 1, "old.csv"));
        let catalog = store.load_catalog(None).unwrap();
        let point = &catalog.get(tessera_core::GpuModel::A100_80GB, "bert").unwrap().points()[0];
        assert_eq!((point.throughput_rps, point.latency_ms, point.memory_gb), (10.5, 5.5, Some(1.25)));
        // The new tables are there and usable.
        assert!(store.load_workloads().unwrap().is_empty() && store.load_colocations().unwrap().is_empty());
        let metrics = tessera_core::colocation::WorkloadMetrics {
            workload: "a".to_string(),
            kernel: [1.0; 6],
            exclusive_rps: 2.0,
            sm_util_pct: 3.0,
            mem_util_pct: 4.0,
            memory_gb: 5.0,
        };
        store.import_workloads(std::slice::from_ref(&metrics), "w").unwrap();
        drop(store);
        let store = Store::open(&path).unwrap();
        assert_eq!(store.load_workloads().unwrap(), vec![metrics]);
        assert_eq!(store.list_profiles().unwrap().len(), 1);
    }

    #[test]
    fn refuses_a_newer_schema() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("profiles.sqlite");
        let store = Store::open(&path).unwrap();
        store.conn.pragma_update(None, "user_version", 99).unwrap();
        drop(store);
        let error = Store::open(&path).unwrap_err();
        assert!(matches!(error, StoreError::SchemaTooNew { found: 99, .. }));
        let message = error.to_string();
        assert!(message.contains("profiles.sqlite") && message.contains("99"), "{message}");
    }

    /// The file's bytes and modification time.
    fn snapshot(path: &Path) -> (Vec<u8>, std::time::SystemTime) {
        (std::fs::read(path).unwrap(), std::fs::metadata(path).unwrap().modified().unwrap())
    }

    fn bert_profile() -> tessera_core::ModelProfile {
        let config = tessera_core::SegmentConfig { size_gpcs: 1, batch: 4, procs: 1 };
        let point = tessera_core::ProfilePoint::new(config, 10.0, 5.0, None).unwrap();
        tessera_core::ModelProfile::new(tessera_core::GpuModel::A100_80GB, "bert", vec![point]).unwrap()
    }

    #[test]
    fn a_read_only_store_reads_and_never_writes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("profiles.sqlite");
        Store::open(&path).unwrap().import_profiles(&[bert_profile()], "p.csv", "native").unwrap();
        let before = snapshot(&path);
        let mut store = Store::open_read_only(&path).unwrap();
        assert_eq!(store.list_profiles().unwrap().len(), 1);
        assert_eq!(store.load_catalog(None).unwrap().len(), 1);
        let message = store.import_profiles(&[bert_profile()], "q.csv", "native").unwrap_err().to_string();
        assert!(message.contains("readonly database"), "{message}");
        drop(store);
        assert_eq!(snapshot(&path), before);
        let missing = dir.path().join("absent.sqlite");
        assert!(Store::open_read_only(&missing).is_err());
        assert!(!missing.exists(), "nothing is created");
    }

    #[test]
    fn a_store_of_another_schema_is_not_read_only_opened() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.sqlite");
        drop(version_1_database(&path));
        let before = snapshot(&path);
        let message = Store::open_read_only(&path).unwrap_err().to_string();
        assert!(
            message.ends_with(&format!(
                "old.sqlite: database schema version 1 is older than this program's ({}); a command that writes \
                 to the store upgrades it, e.g. `tessera store migrate`",
                migrations::SUPPORTED_VERSION
            )),
            "{message}"
        );
        assert_eq!(snapshot(&path), before);
        Store::open(&path).unwrap().conn.pragma_update(None, "user_version", 99).unwrap();
        assert!(matches!(Store::open_read_only(&path), Err(StoreError::SchemaTooNew { found: 99, .. })));
    }

    /// Where SQLite cannot create the shared-memory file of a WAL database
    /// (here a dangling link stands in its way, as a folder without write
    /// permission would for a user other than root; tests may run as root),
    /// the file is read as immutable, whatever characters its path has.
    #[cfg(unix)]
    #[test]
    fn a_store_whose_shared_memory_file_cannot_be_made_is_read_as_immutable() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a b?c#d%e.sqlite");
        Store::open(&path).unwrap().import_profiles(&[bert_profile()], "p.csv", "native").unwrap();
        let mut shm = path.as_os_str().to_owned();
        shm.push("-shm");
        std::os::unix::fs::symlink(dir.path().join("no-such-folder").join("shm"), &shm).unwrap();
        let before = snapshot(&path);
        let store = Store::open_read_only(&path).unwrap();
        assert_eq!(store.list_profiles().unwrap()[0].model, "bert");
        drop(store);
        assert_eq!(snapshot(&path), before);
        assert_eq!(immutable_uri(Path::new("/d/a b?c#d%e")), "file:/d/a%20b%3Fc%23d%25e?immutable=1");
    }

    #[test]
    fn counts_what_the_store_holds() {
        let mut store = Store::open_in_memory().unwrap();
        let empty = store.counts().unwrap();
        assert_eq!(empty.schema_version, migrations::SUPPORTED_VERSION);
        assert_eq!((empty.profiles, empty.profile_points, empty.colocations, empty.journal_entries), (0, 0, 0, 0));
        let mut a30 = bert_profile();
        a30.gpu_model = tessera_core::GpuModel::A30_24GB;
        store.import_profiles(&[bert_profile(), a30], "p.csv", "native").unwrap();
        store.journal("deploy-apply", "x").unwrap();
        let counts = store.counts().unwrap();
        assert_eq!(
            (counts.profiles, counts.profile_points, counts.imports, counts.journal_entries, counts.workloads),
            (2, 2, 1, 1, 0)
        );
    }

    #[test]
    fn default_path_ends_in_tessera_profiles() {
        if let Some(path) = default_path() {
            assert!(path.ends_with("tessera/profiles.sqlite"), "{}", path.display());
        }
    }

    #[test]
    fn in_memory_store_is_migrated() {
        let store = Store::open_in_memory().unwrap();
        assert_eq!(store.schema_version().unwrap(), migrations::SUPPORTED_VERSION);
        assert_eq!(store.integrity_check().unwrap(), "ok");
    }
}
