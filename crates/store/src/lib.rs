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
pub use formats::trace::{read_arrival_trace, TIMESTAMP_COLUMN};
pub use formats::traffic::{read_traffic_csv, write_traffic_csv, TRAFFIC_HEADER};
pub use fs::write_atomic;
