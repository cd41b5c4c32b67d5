//! The one error type of `tessera-store`.
//!
//! Every message is a single line that starts with the file (or database)
//! it concerns and, for file contents, the 1-based line number as it appears
//! in the file (the header is line 1), then names the field, column or model
//! and says what is wrong.
//!
//! A message carries its cause's text (the operating system's or SQLite's
//! words) itself, and no variant exposes the cause through
//! [`std::error::Error::source`]: the binary prints the whole chain with
//! `{:#}`, so a cause both in the message and in the chain would be printed
//! twice.

use std::io;
use std::path::{Path, PathBuf};

use tessera_core::CoreError;

/// Everything that can go wrong while reading, writing or storing profiles
/// and service-level objectives.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A file or folder could not be read, written or created.
    #[error("{}: {cause}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The operating system's error.
        cause: io::Error,
    },
    /// Writing to an output stream (not a named file) failed.
    #[error("writing {what}: {cause}")]
    Write {
        /// What was being written, e.g. `deployment CSV`.
        what: String,
        /// The underlying error.
        cause: io::Error,
    },
    /// A value that could not be parsed or is out of its allowed range.
    #[error("{}:{line}: field '{field}': {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line number in the file.
        line: u64,
        /// The column name (or column number and model for headerless files).
        field: String,
        /// What is wrong, including the offending text.
        message: String,
    },
    /// A header column the format does not know (e.g. a misspelt name).
    #[error("{}:1: unknown column '{column}' (expected: {expected})", path.display())]
    UnknownColumn {
        /// The file.
        path: PathBuf,
        /// The column nobody reads.
        column: String,
        /// The columns the format knows.
        expected: String,
    },
    /// A required column is absent from the header.
    #[error("{}:1: missing column '{column}' (the header has: {found})", path.display())]
    MissingColumn {
        /// The file.
        path: PathBuf,
        /// The column that is required.
        column: String,
        /// The header's columns, comma-separated.
        found: String,
    },
    /// A column name appears more than once in the header.
    #[error("{}:1: column '{column}' appears more than once in the header", path.display())]
    DuplicateColumn {
        /// The file.
        path: PathBuf,
        /// The repeated column name.
        column: String,
    },
    /// A row with the wrong number of fields.
    #[error("{}:{line}: expected {expected} fields ({detail}), found {found}", path.display())]
    FieldCount {
        /// The file.
        path: PathBuf,
        /// 1-based line number in the file.
        line: u64,
        /// Fields the row must have.
        expected: usize,
        /// Fields the row has.
        found: usize,
        /// Where the expected count comes from, e.g. `one per header column`.
        detail: String,
    },
    /// A file without usable data rows.
    #[error("{}:{line}: {reason}", path.display())]
    NoRows {
        /// The file.
        path: PathBuf,
        /// The last line read (1 for a header-only file).
        line: u64,
        /// Why nothing could be used.
        reason: String,
    },
    /// A colocation file whose header describes fewer than two workloads.
    #[error("{}:1: columns for {found} workload(s) (w1_Threads .. w{found}_Threads), a colocation needs at least 2", path.display())]
    TooFewWorkloads {
        /// The file.
        path: PathBuf,
        /// The largest `i` with a `w{i}_Threads` column (0 when none).
        found: usize,
    },
    /// Colocations that cannot be written as one file, e.g. of mixed sizes.
    #[error("writing {what}: {detail}")]
    Unwritable {
        /// What was being written, e.g. `KACE colocation CSV`.
        what: String,
        /// What is wrong with the data, naming the colocation and field.
        detail: String,
    },
    /// A profile folder without any `*.csv` file.
    #[error("{}: no *.csv profile file in this folder", path.display())]
    EmptyDir {
        /// The folder.
        path: PathBuf,
    },
    /// A scenario number outside the rows of an SLO file.
    #[error("{}: scenario {scenario} is out of range ({})", path.display(), scenario_range(*available))]
    ScenarioOutOfRange {
        /// The SLO file.
        path: PathBuf,
        /// The scenario asked for (1-based).
        scenario: usize,
        /// Number of scenarios (non-blank rows) in the file.
        available: usize,
    },
    /// A row whose values the domain model rejects, e.g. a MIG size the GPU
    /// model does not offer.
    #[error("{}:{line}: field '{field}': {cause}", path.display())]
    Domain {
        /// The file.
        path: PathBuf,
        /// 1-based line number in the file.
        line: u64,
        /// The column (or model) concerned.
        field: String,
        /// The domain model's verdict (boxed to keep the error small).
        cause: Box<CoreError>,
    },
    /// The same segment configuration listed twice for one model.
    #[error("{}:{line}: model '{model}': configuration {config} already listed on line {first_line}", path.display())]
    DuplicateConfig {
        /// The file.
        path: PathBuf,
        /// The line of the repeated configuration.
        line: u64,
        /// The model.
        model: String,
        /// The configuration, e.g. `3g batch 8 x 2 proc`.
        config: String,
        /// The line where it first appeared.
        first_line: u64,
    },
    /// The same measured colocation listed twice in a colocation file.
    #[error("{}:{line}: colocation {colocation} already listed on line {first_line}", path.display())]
    DuplicateColocation {
        /// The file.
        path: PathBuf,
        /// The line of the repeated colocation.
        line: u64,
        /// Its members and colocated throughputs, in words.
        colocation: String,
        /// The line where it first appeared.
        first_line: u64,
    },
    /// The same service name listed twice in an SLO file.
    #[error("{}:{line}: field 'service': service '{service}' already listed on line {first_line}", path.display())]
    DuplicateService {
        /// The file.
        path: PathBuf,
        /// The line of the repeated service.
        line: u64,
        /// The service name.
        service: String,
        /// The line where it first appeared.
        first_line: u64,
    },
    /// The same (GPU model, model) profile given twice to one import.
    #[error("{}: import from '{source_name}': model '{model}' on {gpu} is given twice", path.display())]
    DuplicateProfile {
        /// The database.
        path: PathBuf,
        /// The import's source.
        source_name: String,
        /// The GPU model id.
        gpu: String,
        /// The model.
        model: String,
    },
    /// An SQLite operation failed.
    #[error("{}: {context}: {cause}", path.display())]
    Sqlite {
        /// The database (`:memory:` for an in-memory store).
        path: PathBuf,
        /// What the store was doing.
        context: String,
        /// SQLite's error (boxed to keep the error small).
        cause: Box<rusqlite::Error>,
    },
    /// A plan file that is not a Tessera plan (not JSON, or not of the
    /// plan's shape, e.g. a field the format does not know).
    #[error("{}: not a Tessera plan: {detail}", path.display())]
    PlanFormat {
        /// The file.
        path: PathBuf,
        /// What is wrong, in serde's words (naming the field).
        detail: String,
    },
    /// A plan file of another format version.
    #[error("{}: plan version {found} is not supported (this build reads versions {oldest} to {newest})", path.display())]
    PlanVersion {
        /// The file.
        path: PathBuf,
        /// The file's version.
        found: u64,
        /// The oldest version this build reads.
        oldest: u32,
        /// The version this build writes (the newest it reads).
        newest: u32,
    },
    /// A database written by a newer Tessera.
    #[error("{}: database schema version {found} is newer than this program supports ({supported}); upgrade Tessera", path.display())]
    SchemaTooNew {
        /// The database.
        path: PathBuf,
        /// The version found in the database.
        found: u32,
        /// The newest version this code knows.
        supported: u32,
    },
    /// A database of an older schema opened read-only (reading it would
    /// need the migrations a writing command applies).
    #[error("{}: database schema version {found} is older than this program's ({supported}); a command that writes to the store upgrades it, e.g. `tessera store migrate`", path.display())]
    SchemaTooOld {
        /// The database.
        path: PathBuf,
        /// The version found in the database.
        found: u32,
        /// The version this code reads.
        supported: u32,
    },
    /// A workload definition that cannot be registered.
    #[error("{}: workload '{name}': {detail}", path.display())]
    InvalidWorkload {
        /// The database.
        path: PathBuf,
        /// The workload's name as given (may be empty).
        name: String,
        /// What is wrong, naming the field.
        detail: String,
    },
    /// Something asked to be removed that the store does not hold.
    #[error("{}: no {what} in the store (it holds: {known})", path.display())]
    NotStored {
        /// The database.
        path: PathBuf,
        /// What was asked for, e.g. `profile of model 'bert' on a100-80gb`.
        what: String,
        /// What the store holds of that kind, comma-separated (`no …` when
        /// nothing).
        known: String,
    },
    /// A workload name that is not registered.
    #[error(
        "{}: no registered workload '{name}' (known: {known}){}",
        path.display(),
        if *measured {
            "; it is a measured workload (system metrics from `colocate import`, part of the colocation \
             data), not a registered one: `workload` commands manage registered workloads, the commands \
             profiling and deploys run"
        } else {
            ""
        }
    )]
    UnknownWorkload {
        /// The database.
        path: PathBuf,
        /// The name asked for.
        name: String,
        /// The registered names, comma-separated (`none` when there are none).
        known: String,
        /// Whether the name is a measured workload's (colocation data).
        measured: bool,
    },
    /// Stored data that the domain model rejects (edited by hand?).
    #[error("{}: stored profile of model '{model}' on '{gpu}' is invalid: {detail}", path.display())]
    Corrupt {
        /// The database.
        path: PathBuf,
        /// The GPU model as stored.
        gpu: String,
        /// The model as stored.
        model: String,
        /// What is wrong.
        detail: String,
    },
    /// A service created under a name the store already holds.
    #[error("{}: service '{service}' already exists (update it with its version instead)", path.display())]
    ServiceExists {
        /// The database.
        path: PathBuf,
        /// The service's name.
        service: String,
    },
    /// A change made from a version of a service that is no longer the
    /// stored one (another writer changed it first).
    #[error("{}: service '{service}' is at version {found}, not {expected}: it changed since it was read; read it again and retry", path.display())]
    VersionConflict {
        /// The database.
        path: PathBuf,
        /// The service's name.
        service: String,
        /// The version the writer read.
        expected: u64,
        /// The version stored.
        found: u64,
    },
    /// Something asked for by name or id that the store does not hold.
    #[error("{}: no {what} in the store", path.display())]
    NotFound {
        /// The database.
        path: PathBuf,
        /// What was asked for, e.g. `service 'search'`.
        what: String,
    },
    /// A stored row that cannot be read back (edited by hand?).
    #[error("{}: stored {what} is invalid: {detail}", path.display())]
    CorruptRow {
        /// The database.
        path: PathBuf,
        /// The row, e.g. `service 'search'`.
        what: String,
        /// What is wrong.
        detail: String,
    },
}

impl StoreError {
    /// `true` when the store itself cannot serve the request right now —
    /// its disk is full or read-only, the file cannot be opened or written,
    /// another writer holds the lock — rather than the request being wrong.
    pub fn is_unavailable(&self) -> bool {
        match self {
            StoreError::Io { .. } => true,
            StoreError::Sqlite { cause, .. } => matches!(
                cause.sqlite_error_code(),
                Some(
                    rusqlite::ErrorCode::DiskFull
                        | rusqlite::ErrorCode::ReadOnly
                        | rusqlite::ErrorCode::CannotOpen
                        | rusqlite::ErrorCode::SystemIoFailure
                        | rusqlite::ErrorCode::DatabaseBusy
                        | rusqlite::ErrorCode::DatabaseLocked
                        | rusqlite::ErrorCode::PermissionDenied
                )
            ),
            _ => false,
        }
    }

    /// An operating-system error on the file or folder at `path`.
    pub(crate) fn io(path: &Path, cause: io::Error) -> Self {
        StoreError::Io { path: path.to_path_buf(), cause }
    }

    /// An SQLite error on the database at `path` while doing `context`.
    pub(crate) fn sqlite(path: &Path, context: impl Into<String>, cause: rusqlite::Error) -> Self {
        StoreError::Sqlite { path: path.to_path_buf(), context: context.into(), cause: Box::new(cause) }
    }

    /// A domain-model rejection of `field` on `line` of the file at `path`.
    pub(crate) fn domain(path: &Path, line: u64, field: impl Into<String>, cause: CoreError) -> Self {
        StoreError::Domain { path: path.to_path_buf(), line, field: field.into(), cause: Box::new(cause) }
    }
}

/// The scenarios a file offers, in words.
fn scenario_range(available: usize) -> String {
    match available {
        0 => "the file has no scenario rows".to_string(),
        1 => "the file has only scenario 1".to_string(),
        n => format!("the file has scenarios 1 to {n}"),
    }
}
