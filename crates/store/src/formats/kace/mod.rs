//! KACE's colocation files (SoCC'24): measured colocations of K ≥ 2
//! workloads sharing a GPU under MPS, and the per-workload metric tables.
//!
//! - Colocations (`pairs_mps100.csv` and the published splits), one row per
//!   colocation, columns found by name in any order. For every member
//!   `i` in `1..=K`: the six kernel metrics `w{i}_<name>` (names in
//!   [`KERNEL_METRIC_NAMES`], e.g. `w1_Compute (SM) Throughput`),
//!   `workload{i}`, `w{i}throughput` (colocated samples/s),
//!   `w{i}exclusive_throughput` (alone, samples/s), `w{i}sm%`, `w{i}mem%`
//!   and `w{i}memcap` (GB). `idx{i}` columns may be present and are ignored.
//!   K is the largest `i` with a `w{i}_Threads` column.
//! - Published splits: a folder with one subfolder per split, each holding
//!   `training_set.csv` and `testing_set.csv` in the colocation form.
//! - Workload tables: `system_metrics.csv`
//!   (`Type,Exclusive100,sm%,mem%,memcap,Exclusive50`) and a folder of
//!   `output_<workload>_ncu_total.csv` files, one row of the six kernel
//!   metrics plus `Type` each.
//!
//! One file per job: `colocations` reads and writes the colocation form,
//! `splits` the split folders, `workload_tables` the per-workload tables.

mod colocations;
mod splits;
mod workload_tables;

#[cfg(test)]
mod fixtures;

pub(crate) use colocations::{identity, identity_of, Identity};
pub use colocations::{read_colocations, write_colocations, ColocationImport};
pub use splits::{read_splits, KaceSplit, TESTING_FILE, TRAINING_FILE};
pub use workload_tables::{check_kernel_table_name, kernel_table_csv, kernel_table_path, read_workload_tables};
