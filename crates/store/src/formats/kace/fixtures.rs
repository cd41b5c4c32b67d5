//! Test fixtures shared by the KACE format's tests: colocation files built
//! column by column, and one-line error checks.

use std::collections::BTreeMap;

use super::colocations::header;
use super::{read_colocations, ColocationImport};
use crate::error::StoreError;

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
pub(crate) fn render(columns: &[String], rows: &[BTreeMap<String, String>]) -> String {
    let mut text = columns.join(",") + "\n";
    for row in rows {
        let cells: Vec<&str> = columns.iter().map(|column| row.get(column).map_or("7", String::as_str)).collect();
        text += &(cells.join(",") + "\n");
    }
    text
}

pub(crate) fn fixture(k: usize, rows: usize) -> (Vec<String>, Vec<BTreeMap<String, String>>) {
    (header(k), (0..rows).map(|row| fixture_row(k, row)).collect())
}

pub(crate) fn read_text(text: &str) -> Result<ColocationImport, StoreError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.csv");
    std::fs::write(&path, text).unwrap();
    read_colocations(&path)
}

pub(crate) fn assert_names(message: &str, parts: &[&str]) {
    assert!(!message.contains('\n'), "{message}");
    for part in parts {
        assert!(message.contains(part), "'{part}' missing from: {message}");
    }
}
