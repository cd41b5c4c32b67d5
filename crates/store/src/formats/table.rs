//! Reading CSV files into rows that remember their line numbers, and turning
//! cells into numbers with errors that name the file, line and field.

use std::path::{Path, PathBuf};
use std::str::FromStr;

use csv::{ReaderBuilder, StringRecord, Trim};

use crate::error::StoreError;

/// One non-blank CSV record and the 1-based line it starts on.
#[derive(Debug)]
pub(crate) struct Record {
    /// 1-based line number in the file.
    pub line: u64,
    /// The trimmed fields.
    pub fields: StringRecord,
}

/// A CSV file with a header line, read whole.
#[derive(Debug)]
pub(crate) struct Table {
    /// The file, as given by the caller.
    pub path: PathBuf,
    header: StringRecord,
    /// The data rows, blank lines skipped.
    pub rows: Vec<Record>,
}

/// A column found in a header.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Column<'a> {
    /// Position in the record.
    pub index: usize,
    /// Its header name.
    pub name: &'a str,
}

/// Reads every non-blank record of `path` (a line of only whitespace is
/// blank), trimmed, with its line number.
fn read_records(path: &Path) -> Result<Vec<Record>, StoreError> {
    let bytes = std::fs::read(path).map_err(|cause| StoreError::io(path, cause))?;
    parse_records(path, &bytes)
}

/// Every non-blank record of `bytes` (the contents of `path`), as
/// [`read_records`].
fn parse_records(path: &Path, bytes: &[u8]) -> Result<Vec<Record>, StoreError> {
    let lines = LineIndex::new(bytes);
    let mut reader = ReaderBuilder::new().has_headers(false).flexible(true).trim(Trim::All).from_reader(bytes);
    let mut records = Vec::new();
    for result in reader.records() {
        let fields = result.map_err(|error| csv_error(path, &lines, &error))?;
        let line = fields.position().map_or(0, |p| lines.line_at(p.byte()));
        let blank = fields.len() == 1 && fields[0].is_empty();
        if !blank {
            records.push(Record { line, fields });
        }
    }
    Ok(records)
}

/// Line numbers of a file's bytes. The CSV reader's own line count is one
/// too low after a `\r\n` line end (it ends a record at the `\r` and counts
/// the `\n` as part of the next one), so lines are counted here, from the
/// byte where a record starts.
struct LineIndex<'a> {
    /// The file.
    bytes: &'a [u8],
    /// The offset of every `\n`.
    newlines: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    fn new(bytes: &'a [u8]) -> LineIndex<'a> {
        let newlines = bytes.iter().enumerate().filter(|(_, byte)| **byte == b'\n').map(|(offset, _)| offset).collect();
        LineIndex { bytes, newlines }
    }

    /// The 1-based line of the first byte at or after `offset` that is not a
    /// line end (a record reported at the `\n` of a `\r\n` begins on the
    /// next line).
    fn line_at(&self, offset: u64) -> u64 {
        let start = usize::try_from(offset).map_or(self.bytes.len(), |offset| offset.min(self.bytes.len()));
        let text = self.bytes[start..].iter().position(|byte| !matches!(byte, b'\r' | b'\n'));
        let first_text = text.map_or(self.bytes.len(), |i| start + i);
        self.newlines.partition_point(|&newline| newline < first_text) as u64 + 1
    }
}

/// Converts a CSV-level error (bad UTF-8) into a one-line error.
fn csv_error(path: &Path, lines: &LineIndex<'_>, error: &csv::Error) -> StoreError {
    let line = error.position().map_or(0, |p| lines.line_at(p.byte()));
    // csv's own message repeats its (miscounted) position: only the cause.
    let (field, message) = match error.kind() {
        csv::ErrorKind::Utf8 { err, .. } => (format!("column {}", err.field() + 1), "invalid UTF-8".to_string()),
        _ => ("row".to_string(), error.to_string()),
    };
    StoreError::Parse { path: path.to_path_buf(), line, field, message }
}

/// Reads a headerless CSV file: every non-blank line is a record.
pub(crate) fn read_headerless(path: &Path) -> Result<Vec<Record>, StoreError> {
    read_records(path)
}

impl Table {
    /// Reads a CSV file whose first non-blank line is the header. Every data
    /// row must have as many fields as the header; a file without data rows
    /// is an error.
    pub fn read(path: &Path) -> Result<Table, StoreError> {
        Table::from_records(path, read_records(path)?)
    }

    /// Parses `bytes`, the contents of `path` (or of what `path` names in
    /// messages), as [`Table::read`] reads a file.
    pub fn parse(path: &Path, bytes: &[u8]) -> Result<Table, StoreError> {
        Table::from_records(path, parse_records(path, bytes)?)
    }

    fn from_records(path: &Path, records: Vec<Record>) -> Result<Table, StoreError> {
        let mut records = records.into_iter();
        let Some(Record { line: header_line, fields: header }) = records.next() else {
            return Err(StoreError::NoRows {
                path: path.to_path_buf(),
                line: 1,
                reason: "the file is empty (expected a header line)".to_string(),
            });
        };
        let rows: Vec<Record> = records.collect();
        if rows.is_empty() {
            return Err(StoreError::NoRows {
                path: path.to_path_buf(),
                line: header_line,
                reason: "no data rows after the header".to_string(),
            });
        }
        if let Some(row) = rows.iter().find(|row| row.fields.len() != header.len()) {
            return Err(StoreError::FieldCount {
                path: path.to_path_buf(),
                line: row.line,
                expected: header.len(),
                found: row.fields.len(),
                detail: "one per header column".to_string(),
            });
        }
        Ok(Table { path: path.to_path_buf(), header, rows })
    }

    /// The column named `name` (exact after trimming), which must exist once.
    pub fn require(&self, name: &str) -> Result<Column<'_>, StoreError> {
        self.optional(name)?.ok_or_else(|| StoreError::MissingColumn {
            path: self.path.clone(),
            column: name.to_string(),
            found: self.header.iter().collect::<Vec<_>>().join(","),
        })
    }

    /// Fails on the first header column not in `known`: in a format whose
    /// columns are optional, a misspelt name must not be silently ignored.
    pub fn reject_unknown_columns(&self, known: &[&str]) -> Result<(), StoreError> {
        match self.header.iter().find(|column| !known.contains(column)) {
            Some(column) => Err(StoreError::UnknownColumn {
                path: self.path.clone(),
                column: column.to_string(),
                expected: known.join(", "),
            }),
            None => Ok(()),
        }
    }

    /// The column named `name` if present; an error if it appears twice.
    pub fn optional(&self, name: &str) -> Result<Option<Column<'_>>, StoreError> {
        let mut matches = self.header.iter().enumerate().filter(|(_, header)| *header == name);
        let found = matches.next();
        if matches.next().is_some() {
            return Err(StoreError::DuplicateColumn { path: self.path.clone(), column: name.to_string() });
        }
        Ok(found.map(|(index, name)| Column { index, name }))
    }
}

/// A cell being interpreted: where it is, for error messages.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cell<'a> {
    /// The file.
    pub path: &'a Path,
    /// 1-based line number.
    pub line: u64,
    /// The column name or description.
    pub field: &'a str,
    /// The trimmed text.
    pub text: &'a str,
}

impl<'a> Cell<'a> {
    /// The cell of `column` in `record`.
    pub fn of(path: &'a Path, record: &'a Record, column: Column<'a>) -> Cell<'a> {
        Cell { path, line: record.line, field: column.name, text: record.fields.get(column.index).unwrap_or("") }
    }

    /// A parse error about this cell.
    pub fn error(&self, message: impl Into<String>) -> StoreError {
        StoreError::Parse {
            path: self.path.to_path_buf(),
            line: self.line,
            field: self.field.to_string(),
            message: message.into(),
        }
    }

    /// A domain error about this cell.
    pub fn domain(&self, source: tessera_core::CoreError) -> StoreError {
        StoreError::domain(self.path, self.line, self.field, source)
    }

    /// A non-empty text.
    pub fn name(&self) -> Result<&'a str, StoreError> {
        if self.text.is_empty() {
            return Err(self.error("expected a name, got an empty cell"));
        }
        Ok(self.text)
    }

    /// A whole number of type `T` (no sign, no fraction).
    pub fn whole<T: FromStr>(&self) -> Result<T, StoreError> {
        self.text.parse().map_err(|_| self.error(format!("expected a whole number, got '{}'", self.text)))
    }

    /// A finite number (its range is the domain's to check).
    pub fn number(&self) -> Result<f64, StoreError> {
        match self.text.parse::<f64>() {
            Ok(value) if value.is_finite() => Ok(value),
            _ => Err(self.error(format!("expected a number, got '{}'", self.text))),
        }
    }

    /// A finite number that is zero or more.
    pub fn non_negative(&self) -> Result<f64, StoreError> {
        match self.text.parse::<f64>() {
            Ok(value) if value.is_finite() && value >= 0.0 => Ok(value),
            Ok(_) => Err(self.error(format!("expected a non-negative number, got '{}'", self.text))),
            Err(_) => Err(self.error(format!("expected a number, got '{}'", self.text))),
        }
    }

    /// A finite number above zero.
    pub fn positive(&self) -> Result<f64, StoreError> {
        match self.text.parse::<f64>() {
            Ok(value) if value.is_finite() && value > 0.0 => Ok(value),
            Ok(_) => Err(self.error(format!("expected a positive number, got '{}'", self.text))),
            Err(_) => Err(self.error(format!("expected a number, got '{}'", self.text))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The line of every record of `bytes`.
    fn lines_of(bytes: &[u8]) -> Vec<u64> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.csv");
        std::fs::write(&path, bytes).unwrap();
        read_headerless(&path).unwrap().iter().map(|record| record.line).collect()
    }

    #[test]
    fn line_numbers_hold_for_every_line_end() {
        let cases: [(&[u8], &[u64]); 9] = [
            (b"h\na\nb\n", &[1, 2, 3]),
            (b"h\r\na\r\nb\r\n", &[1, 2, 3]),
            (b"h\na\nb", &[1, 2, 3]),
            (b"h\r\na\r\nb", &[1, 2, 3]),
            (b"h\r\n\r\n\r\na\r\n \r\nb", &[1, 4, 6]),
            (b"\n\nh\na\n", &[3, 4]),
            (b"\r\n\r\nh\r\na\r\n", &[3, 4]),
            (b"\xef\xbb\xbfh\r\na\r\n", &[1, 2]),
            (b"h\r\n\"two\r\nlines\",x\r\nb\r\n", &[1, 2, 4]),
        ];
        for (bytes, expected) in cases {
            assert_eq!(lines_of(bytes), expected, "{:?}", String::from_utf8_lossy(bytes));
        }
    }

    #[test]
    fn a_bad_byte_is_reported_on_its_own_line_after_crlf() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.csv");
        std::fs::write(&path, b"h,i\r\na,b\r\nc,\xff\r\n").unwrap();
        let message = read_headerless(&path).unwrap_err().to_string();
        assert!(message.ends_with("t.csv:3: field 'column 2': invalid UTF-8"), "{message}");
    }

    #[test]
    fn a_header_only_file_names_the_header_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.csv");
        std::fs::write(&path, b"\r\n\r\nh,i\r\n").unwrap();
        let message = Table::read(&path).unwrap_err().to_string();
        assert!(message.ends_with("t.csv:3: no data rows after the header"), "{message}");
    }
}
