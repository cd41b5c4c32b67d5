//! KACE's colocation form: one row per measured colocation of K ≥ 2
//! workloads, read with its columns in any order and written back exactly.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

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
pub(super) fn header(k: usize) -> Vec<String> {
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::formats::kace::fixtures::{assert_names, fixture, read_text, render};

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

    #[test]
    fn reads_real_kace_pairs_and_four_way_groups() {
        let Some(dir) = tessera_testkit::shared_data("kace") else { return };
        let import = read_colocations(&dir.join("pairs_mps100.csv")).unwrap();
        assert_eq!((import.rows.len(), import.skipped_unmeasured), (181, 0));
        assert!(import.rows.iter().all(|row| row.members.len() == 2));
        let first = &import.rows[0].members[0].metrics;
        assert_eq!(first.workload, "bert-base-cased_batch8-inf");
        assert!((first.exclusive_rps - 98.348).abs() < 1e-3, "{}", first.exclusive_rps);
        assert_eq!(round_trip(&import.rows).rows, import.rows);

        // The four-way file: every row a group of four, members in column order.
        let quads = read_colocations(&dir.join("four_way_1107.csv")).unwrap();
        assert_eq!((quads.rows.len(), quads.skipped_unmeasured), (1107, 0));
        assert!(quads.rows.iter().all(|row| row.members.len() == 4));
        let first = &quads.rows[0];
        assert!(first.members.iter().all(|m| m.metrics.workload == "bert-base-cased_batch2-inf"));
        assert!((first.members[3].colocated_rps - 24.581227078996925).abs() < 1e-12);
        assert_eq!(round_trip(&quads.rows).rows, quads.rows);
    }
}
