//! Minimal aligned text tables for terminal output.

use std::fmt::Write;

/// A table of text cells with a header row; numeric columns are right-aligned.
#[derive(Debug, Default)]
pub struct TextTable {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl TextTable {
    /// A table with these column titles.
    pub fn new(header: &[&str]) -> Self {
        TextTable { header: header.iter().map(|h| h.to_string()).collect(), rows: Vec::new() }
    }

    /// Appends a row (as many cells as columns).
    pub fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.header.len());
        self.rows.push(cells);
    }

    /// Renders with two spaces between columns.
    pub fn render(&self) -> String {
        let widths: Vec<usize> = (0..self.header.len())
            .map(|c| self.rows.iter().map(|r| r[c].chars().count()).chain([self.header[c].len()]).max().unwrap_or(0))
            .collect();
        let numeric: Vec<bool> = (0..self.header.len())
            .map(|c| !self.rows.is_empty() && self.rows.iter().all(|r| r[c].parse::<f64>().is_ok()))
            .collect();
        let mut out = String::new();
        for row in std::iter::once(&self.header).chain(&self.rows) {
            let mut line = String::new();
            for (c, cell) in row.iter().enumerate() {
                let _ = if numeric[c] {
                    write!(line, "{cell:>width$}  ", width = widths[c])
                } else {
                    write!(line, "{cell:<width$}  ", width = widths[c])
                };
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligns_text_left_and_numbers_right() {
        let mut table = TextTable::new(&["name", "rps"]);
        table.row(vec!["bert".into(), "5.5".into()]);
        table.row(vec!["mobilenetv2".into(), "1200.0".into()]);
        assert_eq!(table.render(), "name            rps\nbert            5.5\nmobilenetv2  1200.0\n");
    }
}
