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

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};

use tessera_core::colocation::{Colocation, GroupMember, WorkloadMetrics, KERNEL_METRIC_NAMES};

use crate::error::StoreError;
use crate::formats::table::{Cell, Column, Record, Table};

/// What [`write_colocations`] calls its output in error messages.
const WRITTEN: &str = "KACE colocation CSV";

/// The colocations read from a KACE colocation file.
#[derive(Debug, Clone, PartialEq)]
pub struct ColocationImport {
    /// The measured colocations, in file order; members in column order
    /// `w1..wK`.
    pub rows: Vec<Colocation>,
    /// Rows skipped because a throughput cell (colocated or exclusive) was
    /// `None`, `nan` or empty.
    pub skipped_unmeasured: usize,
}

/// A colocation's identity: each member's workload and colocated
/// throughput (exact bits), in workload order, so that the same measurement
/// is recognised whatever the order of its members. Two rows with the same
/// identity are one measurement listed twice.
pub(crate) type Identity = Vec<(String, u64)>;

/// The identity of `colocation`.
pub(crate) fn identity(colocation: &Colocation) -> Identity {
    identity_of(colocation.members.iter().map(|member| (member.metrics.workload.clone(), member.colocated_rps)))
}

/// The identity of a colocation of these (workload, colocated throughput)
/// members.
pub(crate) fn identity_of(members: impl IntoIterator<Item = (String, f64)>) -> Identity {
    let mut identity: Identity = members.into_iter().map(|(workload, rps)| (workload, rps.to_bits())).collect();
    identity.sort_unstable();
    identity
}

/// A colocation in words: `a + b (10.5, 3.25 samples/s)`.
pub(crate) fn describe(colocation: &Colocation) -> String {
    let names: Vec<&str> = colocation.members.iter().map(|member| member.metrics.workload.as_str()).collect();
    let rates: Vec<String> = colocation.members.iter().map(|member| member.colocated_rps.to_string()).collect();
    format!("{} ({} samples/s)", names.join(" + "), rates.join(", "))
}

/// `w{i}_<kernel metric>`.
fn kernel_column(i: usize, name: &str) -> String {
    format!("w{i}_{name}")
}

/// The non-kernel columns of member `i`, in the order [`MemberColumns`]
/// keeps them: workload, colocated and exclusive throughput, SM %, memory
/// %, memory capacity.
fn other_columns(i: usize) -> [String; 6] {
    [
        format!("workload{i}"),
        format!("w{i}throughput"),
        format!("w{i}exclusive_throughput"),
        format!("w{i}sm%"),
        format!("w{i}mem%"),
        format!("w{i}memcap"),
    ]
}

/// The header [`write_colocations`] writes for K members: the kernel
/// metrics member by member, then each other column for all members, as
/// KACE lays it out (without the `idx{i}` columns).
fn header(k: usize) -> Vec<String> {
    let mut columns: Vec<String> =
        (1..=k).flat_map(|i| KERNEL_METRIC_NAMES.iter().map(move |name| kernel_column(i, name))).collect();
    for kind in 0..6 {
        columns.extend((1..=k).map(|i| other_columns(i)[kind].clone()));
    }
    columns
}

/// The columns of one member in a colocation file.
struct MemberColumns<'a> {
    /// The kernel metrics, in [`KERNEL_METRIC_NAMES`] order.
    kernel: [Column<'a>; 6],
    /// `workload{i}`.
    workload: Column<'a>,
    /// `w{i}throughput`.
    colocated: Column<'a>,
    /// `w{i}exclusive_throughput`.
    exclusive: Column<'a>,
    /// `w{i}sm%`.
    sm: Column<'a>,
    /// `w{i}mem%`.
    mem: Column<'a>,
    /// `w{i}memcap`.
    memcap: Column<'a>,
}

impl<'a> MemberColumns<'a> {
    /// Finds every column of member `i`, failing on the first one missing.
    fn find(table: &'a Table, i: usize) -> Result<Self, StoreError> {
        let mut kernel = Vec::with_capacity(KERNEL_METRIC_NAMES.len());
        for name in KERNEL_METRIC_NAMES {
            kernel.push(table.require(&kernel_column(i, name))?);
        }
        let [workload, colocated, exclusive, sm, mem, memcap] = other_columns(i);
        Ok(MemberColumns {
            kernel: kernel.try_into().unwrap_or_else(|_| unreachable!("six kernel metric names")),
            workload: table.require(&workload)?,
            colocated: table.require(&colocated)?,
            exclusive: table.require(&exclusive)?,
            sm: table.require(&sm)?,
            mem: table.require(&mem)?,
            memcap: table.require(&memcap)?,
        })
    }

    /// `true` when this member's colocated or exclusive throughput was not
    /// measured in `record`.
    fn unmeasured(&self, path: &Path, record: &Record) -> bool {
        [self.colocated, self.exclusive].into_iter().any(|column| is_unmeasured(Cell::of(path, record, column).text))
    }

    /// This member of the colocation in `record`.
    fn read(&self, path: &'a Path, record: &'a Record) -> Result<GroupMember, StoreError> {
        let cell = |column| Cell::of(path, record, column);
        let mut kernel = [0.0; 6];
        for (value, column) in kernel.iter_mut().zip(self.kernel) {
            *value = cell(column).non_negative()?;
        }
        Ok(GroupMember {
            metrics: WorkloadMetrics {
                workload: cell(self.workload).name()?.to_string(),
                kernel,
                exclusive_rps: cell(self.exclusive).positive()?,
                sm_util_pct: cell(self.sm).non_negative()?,
                mem_util_pct: cell(self.mem).non_negative()?,
                memory_gb: cell(self.memcap).non_negative()?,
            },
            colocated_rps: cell(self.colocated).non_negative()?,
        })
    }
}

/// `true` for a throughput cell that marks a measurement as missing:
/// empty, `None` or `nan` (any case).
fn is_unmeasured(text: &str) -> bool {
    text.is_empty() || text.eq_ignore_ascii_case("none") || text.eq_ignore_ascii_case("nan")
}

/// The number of members K: the largest `i` with a `w{i}_Threads` column.
/// Every member needs twelve columns, so no valid `i` exceeds the column
/// count; larger indices are left to the unknown-column check.
fn group_size(table: &Table) -> Result<usize, StoreError> {
    let columns = table.rows.first().map_or(0, |record| record.fields.len());
    let mut k = 0;
    for i in 1..=columns {
        if table.optional(&kernel_column(i, KERNEL_METRIC_NAMES[0]))?.is_some() {
            k = i;
        }
    }
    Ok(k)
}

/// Reads a KACE colocation CSV with K ≥ 2 members per row (see the module
/// documentation for the columns). Rows whose colocated or exclusive
/// throughput is `None`, `nan` or empty are skipped and counted; any other
/// cell that is not a number, or is negative, is an error naming the file,
/// line and column (exclusive throughputs must be above zero). A row that
/// repeats an earlier one (the same workloads with the same colocated
/// throughputs, in any member order) is an error naming both lines.
pub fn read_colocations(path: &Path) -> Result<ColocationImport, StoreError> {
    let table = Table::read(path)?;
    let k = group_size(&table)?;
    if k < 2 {
        return Err(StoreError::TooFewWorkloads { path: path.to_path_buf(), found: k });
    }
    let members = (1..=k).map(|i| MemberColumns::find(&table, i)).collect::<Result<Vec<_>, _>>()?;
    let mut known = header(k);
    known.extend((1..=k).map(|i| format!("idx{i}")));
    table.reject_unknown_columns(&known.iter().map(String::as_str).collect::<Vec<_>>())?;

    let mut rows = Vec::with_capacity(table.rows.len());
    let mut lines = HashMap::with_capacity(table.rows.len());
    let mut skipped_unmeasured = 0;
    for record in &table.rows {
        if members.iter().any(|member| member.unmeasured(path, record)) {
            skipped_unmeasured += 1;
            continue;
        }
        let members = members.iter().map(|member| member.read(path, record)).collect::<Result<_, _>>()?;
        let colocation = Colocation { members };
        if let Some(first_line) = lines.insert(identity(&colocation), record.line) {
            return Err(StoreError::DuplicateColocation {
                path: path.to_path_buf(),
                line: record.line,
                colocation: describe(&colocation),
                first_line,
            });
        }
        rows.push(colocation);
    }
    Ok(ColocationImport { rows, skipped_unmeasured })
}

/// Checks that `rows` can be written as one KACE file that reads back
/// equal: one group size K ≥ 2, finite non-negative numbers (exclusive
/// throughput above zero), non-empty names without surrounding spaces.
/// Returns K.
fn check_writable(rows: &[Colocation]) -> Result<usize, StoreError> {
    let unwritable = |detail: String| StoreError::Unwritable { what: WRITTEN.to_string(), detail };
    let k = rows.iter().map(|row| row.members.len()).max().unwrap_or(0);
    if k < 2 {
        return Err(unwritable(format!("the largest colocation has {k} workload(s), a colocation needs at least 2")));
    }
    for (n, row) in rows.iter().enumerate().map(|(n, row)| (n + 1, row)) {
        if row.members.len() != k {
            return Err(unwritable(format!(
                "colocation {n} has {} workload(s), others have {k} (one file holds one group size)",
                row.members.len()
            )));
        }
        for (i, member) in row.members.iter().enumerate().map(|(i, member)| (i + 1, member)) {
            let metrics = &member.metrics;
            let workload = &metrics.workload;
            if workload.is_empty() || workload.trim() != workload {
                return Err(unwritable(format!(
                    "colocation {n}, field 'workload{i}': name '{workload}' is empty or has surrounding spaces"
                )));
            }
            let [_, colocated, exclusive, sm, mem, memcap] = other_columns(i);
            let kernel =
                KERNEL_METRIC_NAMES.iter().zip(metrics.kernel).map(|(name, value)| (kernel_column(i, name), value));
            let values = kernel.chain([
                (colocated, member.colocated_rps),
                (sm, metrics.sm_util_pct),
                (mem, metrics.mem_util_pct),
                (memcap, metrics.memory_gb),
            ]);
            for (column, value) in values {
                if !(value.is_finite() && value >= 0.0) {
                    return Err(unwritable(format!(
                        "colocation {n} ('{workload}'), field '{column}': {value} is not a finite non-negative number"
                    )));
                }
            }
            let value = metrics.exclusive_rps;
            if !(value.is_finite() && value > 0.0) {
                return Err(unwritable(format!(
                    "colocation {n} ('{workload}'), field '{exclusive}': {value} is not a finite positive number"
                )));
            }
        }
    }
    Ok(k)
}

/// Writes colocations in KACE's colocation CSV form (without `idx{i}`
/// columns), numbers in Rust's shortest round-trip notation, so that
/// [`read_colocations`] gives back the same values. Every colocation must
/// have the same number K ≥ 2 of members and valid values (see
/// [`read_colocations`]); nothing is written otherwise.
pub fn write_colocations<W: Write>(out: W, rows: &[Colocation]) -> Result<(), StoreError> {
    let k = check_writable(rows)?;
    let write_error = |cause: std::io::Error| StoreError::Write { what: WRITTEN.to_string(), cause };
    let mut writer = csv::Writer::from_writer(out);
    writer.write_record(header(k)).map_err(|error| write_error(error.into()))?;
    for row in rows {
        let mut record: Vec<String> =
            row.members.iter().flat_map(|member| member.metrics.kernel.map(|value| value.to_string())).collect();
        let per_member: [fn(&GroupMember) -> String; 6] = [
            |member| member.metrics.workload.clone(),
            |member| member.colocated_rps.to_string(),
            |member| member.metrics.exclusive_rps.to_string(),
            |member| member.metrics.sm_util_pct.to_string(),
            |member| member.metrics.mem_util_pct.to_string(),
            |member| member.metrics.memory_gb.to_string(),
        ];
        for field in per_member {
            record.extend(row.members.iter().map(field));
        }
        writer.write_record(&record).map_err(|error| write_error(error.into()))?;
    }
    writer.flush().map_err(write_error)
}

/// A split's training colocations, in each subfolder of a splits folder.
pub const TRAINING_FILE: &str = "training_set.csv";

/// A split's testing colocations, beside [`TRAINING_FILE`].
pub const TESTING_FILE: &str = "testing_set.csv";

/// One published split of KACE's colocations.
#[derive(Debug, Clone, PartialEq)]
pub struct KaceSplit {
    /// The subfolder's name, e.g. `rand10`.
    pub name: String,
    /// The subfolder; it holds [`TRAINING_FILE`] and [`TESTING_FILE`].
    pub folder: PathBuf,
    /// The colocations of [`TRAINING_FILE`].
    pub training: ColocationImport,
    /// The colocations of [`TESTING_FILE`].
    pub testing: ColocationImport,
}

/// Reads every subfolder of `dir` that holds both [`TRAINING_FILE`] and
/// [`TESTING_FILE`] (others are skipped), in name order, each file as by
/// [`read_colocations`]. A folder without such a subfolder is an error.
pub fn read_splits(dir: &Path) -> Result<Vec<KaceSplit>, StoreError> {
    let io_error = |cause| StoreError::io(dir, cause);
    let mut folders = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io_error)? {
        let folder = entry.map_err(io_error)?.path();
        if folder.join(TRAINING_FILE).is_file() && folder.join(TESTING_FILE).is_file() {
            folders.push(folder);
        }
    }
    if folders.is_empty() {
        return Err(io_error(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("no subfolder holds {TRAINING_FILE} and {TESTING_FILE}"),
        )));
    }
    folders.sort();
    folders
        .into_iter()
        .map(|folder| {
            Ok(KaceSplit {
                name: folder.file_name().map_or_else(String::new, |name| name.to_string_lossy().into_owned()),
                training: read_colocations(&folder.join(TRAINING_FILE))?,
                testing: read_colocations(&folder.join(TESTING_FILE))?,
                folder,
            })
        })
        .collect()
}

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

    /// One fixture row: every column of `header(k)` with a distinct value.
    fn fixture_row(k: usize, row: usize) -> BTreeMap<String, String> {
        let mut cells = BTreeMap::new();
        for (j, column) in header(k).into_iter().enumerate() {
            let value = match column.strip_prefix("workload") {
                Some(i) => format!("model{i}_batch{row}-inf"),
                None => ((row * 1000 + j) as f64 / 7.0 + 0.5).to_string(),
            };
            cells.insert(column, value);
        }
        cells
    }

    /// CSV text with `columns` in the given order.
    fn render(columns: &[String], rows: &[BTreeMap<String, String>]) -> String {
        let mut text = columns.join(",") + "\n";
        for row in rows {
            let cells: Vec<&str> = columns.iter().map(|column| row.get(column).map_or("7", String::as_str)).collect();
            text += &(cells.join(",") + "\n");
        }
        text
    }

    fn fixture(k: usize, rows: usize) -> (Vec<String>, Vec<BTreeMap<String, String>>) {
        (header(k), (0..rows).map(|row| fixture_row(k, row)).collect())
    }

    fn read_text(text: &str) -> Result<ColocationImport, StoreError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.csv");
        std::fs::write(&path, text).unwrap();
        read_colocations(&path)
    }

    fn assert_names(message: &str, parts: &[&str]) {
        assert!(!message.contains('\n'), "{message}");
        for part in parts {
            assert!(message.contains(part), "'{part}' missing from: {message}");
        }
    }

    fn number(row: &BTreeMap<String, String>, column: &str) -> f64 {
        row[column].parse().unwrap()
    }

    #[test]
    fn reads_a_three_way_fixture_in_any_column_order() {
        let (mut columns, rows) = fixture(3, 2);
        columns.reverse();
        columns.insert(4, "idx2".to_string());
        columns.push("idx1".to_string());
        columns.push("idx3".to_string());
        let import = read_text(&render(&columns, &rows)).unwrap();
        assert_eq!(import.skipped_unmeasured, 0);
        assert_eq!(import.rows.len(), 2);
        for (colocation, row) in import.rows.iter().zip(&rows) {
            assert_eq!(colocation.members.len(), 3);
            for (i, member) in colocation.members.iter().enumerate().map(|(i, member)| (i + 1, member)) {
                let metrics = &member.metrics;
                assert_eq!(metrics.workload, row[&format!("workload{i}")]);
                assert_eq!(member.colocated_rps, number(row, &format!("w{i}throughput")));
                assert_eq!(metrics.exclusive_rps, number(row, &format!("w{i}exclusive_throughput")));
                assert_eq!(metrics.sm_util_pct, number(row, &format!("w{i}sm%")));
                assert_eq!(metrics.mem_util_pct, number(row, &format!("w{i}mem%")));
                assert_eq!(metrics.memory_gb, number(row, &format!("w{i}memcap")));
                for (value, name) in metrics.kernel.iter().zip(KERNEL_METRIC_NAMES) {
                    assert_eq!(*value, number(row, &kernel_column(i, name)));
                }
            }
        }
        assert_eq!(import.rows[1].members[2].metrics.workload, "model3_batch1-inf");
    }

    #[test]
    fn skips_and_counts_unmeasured_rows() {
        let (columns, mut rows) = fixture(2, 6);
        rows[0].insert("w2throughput".to_string(), "None".to_string());
        rows[2].insert("w1throughput".to_string(), "nan".to_string());
        rows[3].insert("w1exclusive_throughput".to_string(), String::new());
        rows[5].insert("w2exclusive_throughput".to_string(), "NaN".to_string());
        let import = read_text(&render(&columns, &rows)).unwrap();
        assert_eq!(import.skipped_unmeasured, 4);
        let names: Vec<&str> = import.rows.iter().map(|row| row.members[0].metrics.workload.as_str()).collect();
        assert_eq!(names, ["model1_batch1-inf", "model1_batch4-inf"]);

        // Only throughputs can be unmeasured: a missing kernel metric is an error.
        rows[1].insert("w2_Registers".to_string(), "None".to_string());
        let message = read_text(&render(&columns, &rows)).unwrap_err().to_string();
        assert_names(&message, &["p.csv:3:", "'w2_Registers'", "'None'"]);
    }

    #[test]
    fn a_row_listed_twice_is_an_error_naming_both_lines() {
        let (columns, mut rows) = fixture(2, 4);
        rows.push(rows[1].clone());
        let message = read_text(&render(&columns, &rows)).unwrap_err().to_string();
        let expected = format!(
            "p.csv:6: colocation model1_batch1-inf + model2_batch1-inf ({}, {} samples/s) already listed on line 3",
            rows[1]["w1throughput"], rows[1]["w2throughput"]
        );
        assert!(message.ends_with(&expected), "{message}");

        // The same measurement with its members swapped is the same row.
        let (columns, mut rows) = fixture(2, 2);
        let mut swapped = rows[0].clone();
        for (one, two) in header(1).iter().zip(header(1).iter().map(|column| column.replacen('1', "2", 1))) {
            let (a, b) = (rows[0][one].clone(), rows[0][&two].clone());
            swapped.insert(one.clone(), b);
            swapped.insert(two, a);
        }
        rows.push(swapped);
        let message = read_text(&render(&columns, &rows)).unwrap_err().to_string();
        assert_names(&message, &["p.csv:4:", "already listed on line 2"]);

        // The same workloads measured at other throughputs are another row.
        let (columns, mut rows) = fixture(2, 2);
        let mut again = rows[0].clone();
        again.insert("w1throughput".to_string(), "1.5".to_string());
        rows.push(again);
        assert_eq!(read_text(&render(&columns, &rows)).unwrap().rows.len(), 3);
    }

    #[test]
    fn missing_columns_are_named() {
        for (k, missing) in [(2, "w2throughput"), (3, "w3_DRAM Throughput"), (2, "workload1"), (3, "w2memcap")] {
            let (mut columns, rows) = fixture(k, 1);
            columns.retain(|column| column != missing);
            let message = read_text(&render(&columns, &rows)).unwrap_err().to_string();
            assert_names(&message, &["p.csv:1:", "missing column", &format!("'{missing}'")]);
        }
        // A gap in the members: w3 exists, so w2 is required.
        let (mut columns, rows) = fixture(3, 1);
        columns.retain(|column| !column.starts_with("w2_"));
        let message = read_text(&render(&columns, &rows)).unwrap_err().to_string();
        assert_names(&message, &["p.csv:1:", "missing column", "'w2_Threads'"]);
    }

    #[test]
    fn unknown_columns_are_rejected() {
        for unknown in ["w1_throughput", "idx3", "extra"] {
            let (mut columns, rows) = fixture(2, 1);
            columns.push(unknown.to_string());
            let message = read_text(&render(&columns, &rows)).unwrap_err().to_string();
            assert_names(&message, &["p.csv:1:", "unknown column", &format!("'{unknown}'"), "w2memcap"]);
        }
    }

    #[test]
    fn fewer_than_two_members_is_an_error() {
        let (mut columns, rows) = fixture(2, 1);
        columns.retain(|column| !column.contains('2'));
        let message = read_text(&render(&columns, &rows)).unwrap_err().to_string();
        assert_names(&message, &["p.csv:1:", "1 workload(s)", "at least 2"]);
        let message = read_text("workload1,workload2\na,b\n").unwrap_err().to_string();
        assert_names(&message, &["p.csv:1:", "0 workload(s)", "at least 2"]);
    }

    #[test]
    fn bad_values_name_file_line_and_field() {
        let cases = [
            (1, "w2sm%", "high", "'high'"),
            (0, "w1_Registers", "-1", "non-negative"),
            (1, "w1throughput", "-3.5", "non-negative"),
            (0, "w2exclusive_throughput", "0", "positive"),
            (1, "w1memcap", "inf", "'inf'"),
            (0, "workload2", "", "empty"),
        ];
        for (row, column, text, expected) in cases {
            let (columns, mut rows) = fixture(2, 2);
            rows[row].insert(column.to_string(), text.to_string());
            let message = read_text(&render(&columns, &rows)).unwrap_err().to_string();
            assert_names(&message, &[&format!("p.csv:{}:", row + 2), &format!("field '{column}'"), expected]);
        }
    }

    fn member(name: &str, seed: f64) -> GroupMember {
        GroupMember {
            metrics: WorkloadMetrics {
                workload: name.to_string(),
                kernel: [seed * 1e21, 0.1 + 0.2, 1e-7, seed / 3.0, 0.0, 12.345678901234567],
                exclusive_rps: seed + 1.0 / 3.0,
                sm_util_pct: 96.0,
                mem_util_pct: seed / 7.0,
                memory_gb: 1.4,
            },
            colocated_rps: seed * 0.7,
        }
    }

    fn round_trip(rows: &[Colocation]) -> ColocationImport {
        let mut bytes = Vec::new();
        write_colocations(&mut bytes, rows).unwrap();
        read_text(std::str::from_utf8(&bytes).unwrap()).unwrap()
    }

    #[test]
    fn colocations_round_trip_exactly() {
        let pairs = vec![
            Colocation { members: vec![member("a_batch2-inf", 1.0), member("a_batch2-inf", 1.0)] },
            Colocation { members: vec![member("b, quoted", 2.5), member("c_batch8-train", 1e-3)] },
        ];
        let import = round_trip(&pairs);
        assert_eq!((import.rows, import.skipped_unmeasured), (pairs, 0));
        let triples = vec![Colocation { members: vec![member("x", 3.0), member("y", 4.0), member("z", 5.0)] }];
        assert_eq!(round_trip(&triples).rows, triples);
    }

    #[test]
    fn unwritable_colocations_are_refused() {
        let pair = Colocation { members: vec![member("a", 1.0), member("b", 2.0)] };
        let triple = Colocation { members: vec![member("a", 1.0), member("b", 2.0), member("c", 3.0)] };
        let single = Colocation { members: vec![member("a", 1.0)] };
        let mut nan = pair.clone();
        nan.members[1].colocated_rps = f64::NAN;
        let mut zero = pair.clone();
        zero.members[0].metrics.exclusive_rps = 0.0;
        let mut spaced = pair.clone();
        spaced.members[1].metrics.workload = " b".to_string();
        let cases: [(Vec<Colocation>, &[&str]); 6] = [
            (vec![triple, pair.clone()], &["colocation 2", "2 workload(s)", "others have 3"]),
            (vec![single], &["1 workload(s)", "at least 2"]),
            (vec![], &["0 workload(s)", "at least 2"]),
            (vec![pair.clone(), nan], &["colocation 2", "'w2throughput'", "NaN"]),
            (vec![zero], &["colocation 1", "'w1exclusive_throughput'", "positive"]),
            (vec![spaced], &["colocation 1", "'workload2'", "' b'"]),
        ];
        for (rows, parts) in cases {
            let mut bytes = Vec::new();
            let message = write_colocations(&mut bytes, &rows).unwrap_err().to_string();
            assert_names(&message, parts);
            assert_names(&message, &["writing KACE colocation CSV"]);
            assert!(bytes.is_empty(), "nothing is written on error");
        }
    }

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

    /// The real KACE data, when the shared data folder is present.
    fn real_data() -> Option<PathBuf> {
        tessera_testkit::shared_data("kace")
    }

    #[test]
    fn reads_real_kace_pairs_and_splits() {
        let Some(dir) = real_data() else { return };
        let import = read_colocations(&dir.join("pairs_mps100.csv")).unwrap();
        assert_eq!((import.rows.len(), import.skipped_unmeasured), (181, 0));
        assert!(import.rows.iter().all(|row| row.members.len() == 2));
        let first = &import.rows[0].members[0].metrics;
        assert_eq!(first.workload, "bert-base-cased_batch8-inf");
        assert!((first.exclusive_rps - 98.348).abs() < 1e-3, "{}", first.exclusive_rps);
        assert_eq!(round_trip(&import.rows).rows, import.rows);

        let splits = read_splits(&dir.join("splits/n_occur_3")).unwrap();
        let names: Vec<&str> = splits.iter().map(|split| split.name.as_str()).collect();
        assert_eq!(names, ["rand10", "rand20", "rand30", "rand40", "rand50"]);
        let (training, testing) = (&splits[0].training, &splits[0].testing);
        assert_eq!((training.rows.len(), training.skipped_unmeasured), (40, 0));
        assert_eq!(testing.rows.len(), 141);
    }

    #[test]
    fn splits_are_the_subfolders_with_both_files_in_name_order() {
        let dir = tempfile::tempdir().unwrap();
        let pairs = |n: usize| {
            let (columns, rows) = fixture(2, n);
            render(&columns, &rows)
        };
        for (name, files) in [("b", vec![TRAINING_FILE, TESTING_FILE]), ("a", vec![TRAINING_FILE, TESTING_FILE])] {
            std::fs::create_dir(dir.path().join(name)).unwrap();
            for (n, file) in files.into_iter().enumerate() {
                std::fs::write(dir.path().join(name).join(file), pairs(n + 1)).unwrap();
            }
        }
        std::fs::create_dir(dir.path().join("c")).unwrap();
        std::fs::write(dir.path().join("c").join(TRAINING_FILE), pairs(1)).unwrap();
        std::fs::write(dir.path().join("notes.txt"), "not a split").unwrap();
        let splits = read_splits(dir.path()).unwrap();
        let summary: Vec<(&str, usize, usize)> =
            splits.iter().map(|s| (s.name.as_str(), s.training.rows.len(), s.testing.rows.len())).collect();
        assert_eq!(summary, [("a", 1, 2), ("b", 1, 2)]);
        assert_eq!(splits[0].folder, dir.path().join("a"));

        std::fs::write(dir.path().join("b").join(TESTING_FILE), "w1_Threads\n1\n").unwrap();
        let message = read_splits(dir.path()).unwrap_err().to_string();
        assert_names(&message, &["testing_set.csv:1:", "at least 2"]);
        let message = read_splits(&dir.path().join("c")).unwrap_err().to_string();
        assert_names(&message, &["c: no subfolder holds training_set.csv and testing_set.csv"]);
        let message = read_splits(&dir.path().join("absent")).unwrap_err().to_string();
        assert_names(&message, &["absent: No such file or directory"]);
    }

    #[test]
    fn real_workload_tables_agree_with_the_pairs() {
        let Some(dir) = real_data() else { return };
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
