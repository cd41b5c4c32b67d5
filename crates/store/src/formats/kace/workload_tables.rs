//! KACE's per-workload tables: `system_metrics.csv` and a folder of
//! `output_<workload>_ncu_total.csv` kernel tables, joined by workload name;
//! and writing one kernel table.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use tessera_core::colocation::{WorkloadMetrics, KERNEL_METRIC_NAMES};

use crate::error::StoreError;
use crate::formats::table::{Cell, Table};

/// One row of `system_metrics.csv`.
struct SystemRow {
    /// The line it is on.
    line: u64,
    /// `Exclusive100`.
    exclusive_rps: f64,
    /// `sm%`.
    sm_util_pct: f64,
    /// `mem%`.
    mem_util_pct: f64,
    /// `memcap`.
    memory_gb: f64,
}

/// Reads `system_metrics.csv`, keyed by workload name (which must be
/// unique).
fn read_system_metrics(path: &Path) -> Result<BTreeMap<String, SystemRow>, StoreError> {
    let table = Table::read(path)?;
    table.reject_unknown_columns(&["Type", "Exclusive100", "sm%", "mem%", "memcap", "Exclusive50"])?;
    let workload = table.require("Type")?;
    let exclusive = table.require("Exclusive100")?;
    let sm = table.require("sm%")?;
    let mem = table.require("mem%")?;
    let memcap = table.require("memcap")?;
    let mut rows = BTreeMap::new();
    for record in &table.rows {
        let cell = |column| Cell::of(path, record, column);
        let name = cell(workload).name()?;
        if let Some(first) = rows.get(name).map(|row: &SystemRow| row.line) {
            return Err(cell(workload).error(format!("workload '{name}' already listed on line {first}")));
        }
        let row = SystemRow {
            line: record.line,
            exclusive_rps: cell(exclusive).positive()?,
            sm_util_pct: cell(sm).non_negative()?,
            mem_util_pct: cell(mem).non_negative()?,
            memory_gb: cell(memcap).non_negative()?,
        };
        rows.insert(name.to_string(), row);
    }
    Ok(rows)
}

/// Reads one `output_<workload>_ncu_total.csv` file: exactly one row of the
/// six kernel metrics whose `Type` is `workload`.
fn read_kernel_file(path: &Path, workload: &str) -> Result<[f64; 6], StoreError> {
    let table = Table::read(path)?;
    let mut known = KERNEL_METRIC_NAMES.to_vec();
    known.push("Type");
    table.reject_unknown_columns(&known)?;
    let columns = KERNEL_METRIC_NAMES.iter().map(|name| table.require(name)).collect::<Result<Vec<_>, _>>()?;
    let type_column = table.require("Type")?;
    if let Some(extra) = table.rows.get(1) {
        return Err(StoreError::Parse {
            path: path.to_path_buf(),
            line: extra.line,
            field: "row".to_string(),
            message: format!("expected one data row (one workload per file), found {}", table.rows.len()),
        });
    }
    let record = &table.rows[0];
    let type_cell = Cell::of(path, record, type_column);
    if type_cell.name()? != workload {
        return Err(
            type_cell.error(format!("workload '{}' differs from '{workload}' in the file name", type_cell.text))
        );
    }
    let mut kernel = [0.0; 6];
    for (value, column) in kernel.iter_mut().zip(columns) {
        *value = Cell::of(path, record, column).non_negative()?;
    }
    Ok(kernel)
}

/// What [`kernel_table_csv`] writes, in errors.
const KERNEL_TABLE: &str = "KACE kernel table";

/// `dir/output_<workload>_ncu_total.csv`: where KACE keeps one workload's
/// kernel metrics, and where [`read_workload_tables`] finds them.
pub fn kernel_table_path(dir: &Path, workload: &str) -> PathBuf {
    dir.join(format!("output_{workload}_ncu_total.csv"))
}

/// KACE's `output_<workload>_ncu_total.csv`: a header of the six
/// [`KERNEL_METRIC_NAMES`] and `Type`, and one row of `kernel` with the
/// workload's name as `Type`, numbers in Rust's shortest round-trip
/// notation (so [`read_workload_tables`] gives back the same values). A
/// name that cannot be a `Type` and part of a file name (empty, spaces
/// around it, `/`, `\`, `,`, `"` or a control character) is refused.
pub fn kernel_table_csv(workload: &str, kernel: &[f64; 6]) -> Result<String, StoreError> {
    check_kernel_table_name(workload)?;
    let header = KERNEL_METRIC_NAMES.join(",");
    let row: Vec<String> = kernel.iter().map(f64::to_string).collect();
    Ok(format!("{header},Type\n{},{workload}\n", row.join(",")))
}

/// Refuses a workload name that cannot be a kernel table's `Type` and part
/// of its file name (see [`kernel_table_csv`]).
pub fn check_kernel_table_name(workload: &str) -> Result<(), StoreError> {
    let bad_name = workload.is_empty()
        || workload.trim() != workload
        || workload.chars().any(|c| c.is_control() || matches!(c, '/' | '\\' | ',' | '"'));
    if bad_name {
        return Err(StoreError::Unwritable {
            what: KERNEL_TABLE.to_string(),
            detail: format!(
                "workload '{workload}': a workload name must be non-empty, without spaces around it, '/', '\\', ',' or '\"'"
            ),
        });
    }
    Ok(())
}

/// The `output_<workload>_ncu_total.csv` files of `dir`, by workload name.
fn kernel_files(dir: &Path) -> Result<BTreeMap<String, PathBuf>, StoreError> {
    let io_error = |cause| StoreError::io(dir, cause);
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(dir).map_err(io_error)? {
        let entry = entry.map_err(io_error)?;
        let file_name = entry.file_name();
        let workload = file_name.to_str().and_then(|name| name.strip_prefix("output_")?.strip_suffix("_ncu_total.csv"));
        if let Some(workload) = workload.filter(|workload| !workload.is_empty()) {
            files.insert(workload.to_string(), entry.path());
        }
    }
    if files.is_empty() {
        return Err(io_error(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "no output_<workload>_ncu_total.csv file in this folder",
        )));
    }
    Ok(files)
}

/// Reads KACE's per-workload tables: `system_metrics` (`Type`,
/// `Exclusive100`, `sm%`, `mem%`, `memcap`; `Exclusive50` ignored) and the
/// `output_<workload>_ncu_total.csv` files of `kernel_dir`, joined by
/// workload name. Workloads found on only one side are skipped; the
/// complete ones are returned sorted by name. A kernel file must hold one
/// row whose `Type` matches its file name; a folder without kernel files is
/// an error.
pub fn read_workload_tables(system_metrics: &Path, kernel_dir: &Path) -> Result<Vec<WorkloadMetrics>, StoreError> {
    let system = read_system_metrics(system_metrics)?;
    let files = kernel_files(kernel_dir)?;
    let mut workloads = Vec::new();
    for (workload, path) in files {
        let kernel = read_kernel_file(&path, &workload)?;
        if let Some(row) = system.get(&workload) {
            workloads.push(WorkloadMetrics {
                workload,
                kernel,
                exclusive_rps: row.exclusive_rps,
                sm_util_pct: row.sm_util_pct,
                mem_util_pct: row.mem_util_pct,
                memory_gb: row.memory_gb,
            });
        }
    }
    Ok(workloads)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::kace::fixtures::assert_names;
    use crate::formats::kace::read_colocations;

    const KERNEL_HEADER: &str =
        "Threads,Compute (SM) Throughput,DRAM Throughput,Memory Throughput,Registers,Static Shared Memory,Type\n";

    /// A system table for a, b, c and kernel files for b, c, d (plus a
    /// file that is not a kernel file).
    fn workload_fixture(dir: &Path) -> (PathBuf, PathBuf) {
        let system = dir.join("system_metrics.csv");
        std::fs::write(
            &system,
            "Type,Exclusive100,sm%,mem%,memcap,Exclusive50\n\
             c_batch2-inf,20.5,30,4.5,1.2,\n\
             a_batch2-inf,10,10,1,1,9\n\
             b_batch8-train,5.25,97,40,3.5,4\n",
        )
        .unwrap();
        let kernels = dir.join("kernel_metrics");
        std::fs::create_dir(&kernels).unwrap();
        for (name, threads) in [("b_batch8-train", 1000.5), ("c_batch2-inf", 2000.0), ("d_batch2-inf", 1.0)] {
            let text = format!("{KERNEL_HEADER}{threads},50,20,60,1e6,7000,{name}\n");
            std::fs::write(kernels.join(format!("output_{name}_ncu_total.csv")), text).unwrap();
        }
        std::fs::write(kernels.join("README.txt"), "not a kernel file").unwrap();
        (system, kernels)
    }

    #[test]
    fn a_written_kernel_table_reads_back_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let (system, kernels) = workload_fixture(dir.path());
        let kernel = [1.5, 2.0, 1.0 / 3.0, 4.0, 5e6, 0.0];
        let text = kernel_table_csv("c_batch2-inf", &kernel).unwrap();
        assert_eq!(text, format!("{KERNEL_HEADER}1.5,2,0.3333333333333333,4,5000000,0,c_batch2-inf\n"));
        let path = kernel_table_path(&kernels, "c_batch2-inf");
        crate::write_atomic(&path, text.as_bytes()).unwrap();
        let workloads = read_workload_tables(&system, &kernels).unwrap();
        assert_eq!(workloads[1].kernel, kernel);
        for bad in ["", " w", "a/b", "a,b", "a\"b", "a\\b"] {
            let message = kernel_table_csv(bad, &kernel).unwrap_err().to_string();
            assert!(message.contains(&format!("'{bad}'")) && !message.contains('\n'), "{message}");
        }
    }

    #[test]
    fn workload_tables_join_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let (system, kernels) = workload_fixture(dir.path());
        let workloads = read_workload_tables(&system, &kernels).unwrap();
        let names: Vec<&str> = workloads.iter().map(|w| w.workload.as_str()).collect();
        assert_eq!(names, ["b_batch8-train", "c_batch2-inf"]);
        assert_eq!(
            workloads[0],
            WorkloadMetrics {
                workload: "b_batch8-train".to_string(),
                kernel: [1000.5, 50.0, 20.0, 60.0, 1e6, 7000.0],
                exclusive_rps: 5.25,
                sm_util_pct: 97.0,
                mem_util_pct: 40.0,
                memory_gb: 3.5,
            }
        );
    }

    #[test]
    fn bad_workload_tables_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let (system, kernels) = workload_fixture(dir.path());
        let kernel_file = kernels.join("output_c_batch2-inf_ncu_total.csv");
        let message_of = |file: &Path, text: &str| {
            let original = std::fs::read_to_string(file).unwrap();
            std::fs::write(file, text).unwrap();
            let message = read_workload_tables(&system, &kernels).unwrap_err().to_string();
            std::fs::write(file, original).unwrap();
            message
        };
        let message = message_of(&kernel_file, &format!("{KERNEL_HEADER}1,2,3,4,5,6,b_batch8-train\n"));
        assert_names(&message, &["output_c_batch2-inf_ncu_total.csv:2:", "'Type'", "b_batch8-train"]);
        let message = message_of(&kernel_file, &format!("{KERNEL_HEADER}1,2,3,4,5,6,c_batch2-inf\n1,2,3,4,5,6,x\n"));
        assert_names(&message, &["_ncu_total.csv:3:", "one data row"]);
        let message = message_of(&kernel_file, &format!("{KERNEL_HEADER}1,2,x3,4,5,6,c_batch2-inf\n"));
        assert_names(&message, &["_ncu_total.csv:2:", "'DRAM Throughput'", "'x3'"]);
        let message = message_of(&kernel_file, "Threads,Type\n1,c_batch2-inf\n");
        assert_names(&message, &["_ncu_total.csv:1:", "missing column", "'Compute (SM) Throughput'"]);
        let message = message_of(&system, "Type,Exclusive100,sm%,mem%,memcap\na,1,2,3,4\nb,1,2,3,4\na,1,2,3,4\n");
        assert_names(&message, &["system_metrics.csv:4:", "'Type'", "'a'", "line 2"]);
        let message = message_of(&system, "Type,Exclusive100,sm%,mem%,memcap\na,1,2,-3,4\n");
        assert_names(&message, &["system_metrics.csv:2:", "'mem%'", "'-3'"]);
        let message = message_of(&system, "Type,Exclusive100,sm%,mem%,memcap,Exclusive\na,1,2,3,4,5\n");
        assert_names(&message, &["system_metrics.csv:1:", "unknown column", "'Exclusive'"]);
        let message = message_of(&system, "Type,sm%,mem%,memcap\na,2,3,4\n");
        assert_names(&message, &["system_metrics.csv:1:", "missing column", "'Exclusive100'"]);
        let empty = dir.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        let message = read_workload_tables(&system, &empty).unwrap_err().to_string();
        assert_names(&message, &["empty", "no output_<workload>_ncu_total.csv file"]);
    }

    #[test]
    fn real_workload_tables_agree_with_the_pairs() {
        let Some(dir) = tessera_testkit::shared_data("kace") else { return };
        let workloads = read_workload_tables(&dir.join("system_metrics.csv"), &dir.join("kernel_metrics")).unwrap();
        // 51 workloads have system metrics, 30 have kernel files, 29 have both.
        assert_eq!(workloads.len(), 29);
        assert!(workloads.windows(2).all(|pair| pair[0].workload < pair[1].workload));
        let by_name: BTreeMap<&str, &WorkloadMetrics> = workloads.iter().map(|w| (w.workload.as_str(), w)).collect();
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * b.abs();
        let pairs = read_colocations(&dir.join("pairs_mps100.csv")).unwrap();
        for member in pairs.rows.iter().flat_map(|row| &row.members) {
            let (got, table) = (&member.metrics, by_name[member.metrics.workload.as_str()]);
            assert!(got.kernel.iter().zip(table.kernel).all(|(a, b)| close(*a, b)), "{}", got.workload);
            assert!(close(got.exclusive_rps, table.exclusive_rps), "{}", got.workload);
            assert!(close(got.sm_util_pct, table.sm_util_pct) && close(got.mem_util_pct, table.mem_util_pct));
            assert!(close(got.memory_gb, table.memory_gb), "{}", got.workload);
        }
    }
}
