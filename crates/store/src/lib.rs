//! Tessera's profile store and file formats.
//!
//! This is the only crate that reads or writes files holding profiles and
//! service-level objectives; `tessera-core` stays free of I/O and
//! `tessera-plan` works on the domain types this crate produces.
//!
//! - `db`: the profile store, an SQLite database ([`Store`]) with versioned
//!   migrations, atomic imports that replace a model's old points, and
//!   loading into a [`tessera_core::ProfileCatalog`]; workload metrics and
//!   measured colocations, imported atomically and loaded back exactly;
//!   registered workloads (how to run and measure them) and a journal of
//!   actions taken on hardware; the autopilot's decisions.
//! - `formats::parvagpu`: ParvaGPU's profile folders, SLO scenario tables
//!   and deployment map.
//! - `formats::native`: Tessera's own CSV formats for profiles and SLOs,
//!   with units in the column names.
//! - `formats::plan`: Tessera's plan files, JSON (versioned) and CSV, and
//!   reading any plan file (ParvaGPU's deployment map too) by its content.
//! - `formats::kace`: KACE's colocation measurements (K ≥ 2 workloads
//!   sharing a GPU under MPS), its published split folders and per-workload
//!   metric tables.
//! - `formats::traffic`: traffic files, request rates over time
//!   (`time_s,service,rate_rps`) read into a
//!   [`tessera_core::TrafficCurve`] and written from one.
//! - `fs`: atomic file writes.
//!
//! Every error is a [`StoreError`] whose message is one line naming the
//! file, the line (1-based, header = line 1) and the field concerned.
//!
//! # Design notes
//!
//! A tour of the modules; ARCHITECTURE.md holds the crate's invariants and
//! the tests that enforce them.
//!
//! **API boundary:** private modules, root re-exports; the home of the
//! database and of every file format people bring (profiles, SLOs, plans,
//! deployment maps, KACE's colocation files, arrival traces, traffic files). Documents a
//! crate defines as serde types are read where the type lives: the
//! simulator's traces and schedules in tessera-sim, serving runs measured
//! on a GPU in tessera-serving, trained colocation models in tessera-colocate, Nsight Compute's CSV in tessera-gpu. `formats::table` reads CSV with line
//! numbers counted from the bytes (`\r\n` files number lines as an editor
//! does) and header lookup; `formats::points` validates rows into
//! `ModelProfile`s; `formats::parvagpu` ParvaGPU's profile folders, scenario
//! files and deployment map; `formats::native` Tessera's profile and SLO
//! CSVs; `formats::plan` the versioned plan JSON document (unknown fields and
//! other versions refused; `PlanDocument` carries a plan into any JSON
//! answer) and Tessera's plan CSV; `formats::plan_file` is `read_plan_file`,
//! the one reader every command uses, which tells JSON, plan CSV and
//! ParvaGPU's map apart by content (a map only with `MapProfiles`: it names
//! models, not numbers); `formats::traffic` traffic files
//! (`time_s,service,rate_rps`, read into tessera-core's `TrafficCurve`
//! with errors naming the line); `formats::trace` arrival traces (a `TIMESTAMP`
//! column of seconds or UTC dates, as seconds from the first arrival); `formats::native` also reads and writes completed profiles (the
//! `source`, `throughput_low_rps` and `latency_high_ms` columns; out-of-memory
//! rows), and `formats::parvagpu` keeps a folder's `0,0` rows as out-of-memory
//! configurations; `formats::kace` KACE's colocation files (`colocations`:
//! any K, a row listed twice is an error), split folders (`splits`) and
//! per-workload tables with the kernel table `tessera profile kernels` writes
//! (`workload_tables`). `db` is the SQLite `Store` (one file per table or group of
//! tables: `profiles`, `workloads`, `kernel_metrics`, `colocations`, …): versioned
//! migrations on `PRAGMA user_version` (v2 workloads and colocations, v3 the
//! workload registry and the deploy journal, v4 kernel metrics awaiting their
//! workload's metrics alone, v5 the services — SLOs with a version for the
//! service's `If-Match` — with their plans and journal, in `db/services.rs`,
//! v6 each service's percentile, v7 the autopilot's decisions in
//! `db/autopilot.rs`: `AutopilotDecision` with its reason, GPUs before and
//! after, observed and forecast rates as JSON, and its outcome, v8 each
//! profile point's batch timing), WAL, one transaction per import or removal,
//! `open_read_only` for commands that only read (no migration, no write), and
//! a colocation identical to a stored one not stored again. `fs::write_atomic`
//! writes through a uniquely named temporary file, fsync, rename and a
//! directory sync. Error type: `StoreError`.

mod db;
mod error;
mod formats;
mod fs;

pub use db::{
    default_path, AutopilotDecision, ColocationImportSummary, ImportSummary, JobStatus, JournalEntry,
    KernelMetricsStored, ProfileSummary, RegisteredWorkload, SchemaMigration, Store, StoreCounts, StoredColocation,
    StoredJob, StoredService, WorkloadTask,
};
pub use error::StoreError;
pub use formats::container_args::parse_container_args;
pub use formats::kace::{
    check_kernel_table_name, kernel_table_csv, kernel_table_path, read_colocations, read_splits, read_workload_tables,
    write_colocations, ColocationImport, KaceSplit, TESTING_FILE, TRAINING_FILE,
};
pub use formats::native::{
    parse_profiles_csv, read_profiles_csv, read_service_images, read_slo_csv, read_sourced_profiles_csv,
    write_profiles_csv, write_slo_csv, write_sourced_profiles_csv,
};
pub use formats::parvagpu::{
    parse_parvagpu_profile, read_deployment_csv, read_profile_dir, read_slo_scenario, write_deployment_csv,
    ProfileDirImport,
};
pub use formats::plan::{parse_plan, plan_json, write_plan_csv, PlanDocument, PLAN_CSV_HEADER, PLAN_VERSION};
pub use formats::plan_file::{read_plan_file, MapProfiles};
pub use formats::trace::{read_arrival_trace, ArrivalTrace, TIMESTAMP_COLUMN};
pub use formats::traffic::{read_traffic, read_traffic_csv, write_traffic_csv, Traffic, CV_COLUMN, TRAFFIC_HEADER};
pub use fs::write_atomic;
