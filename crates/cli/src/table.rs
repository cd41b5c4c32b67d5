//! Aligned text tables for the terminal, fitted to its width.
//!
//! A table is as wide as its content when that fits the width limit (see
//! [`crate::terminal::set_width_limit`]); otherwise its text columns give up space, widest
//! first, down to a floor. A cell then wraps onto more lines between its
//! pieces — its words, or the pieces it was built from (a GPU's MIG tiles,
//! a service's segment groups); a single piece too long for its column
//! breaks inside, onto as many lines as it needs: nothing is ever cut.
//! The first column (what the row is about) and numeric columns
//! (right-aligned) are never narrowed; when the table still does not fit,
//! one space instead of two separates its columns. Widths count
//! characters, not bytes.

use crate::terminal::{chars, width_limit};

/// The narrowest a text column is squeezed to (or its header's width, if
/// less).
const MIN_TEXT_WIDTH: usize = 10;

/// A text column is not squeezed below its longest word (a name, a tile)
/// when that word is at most this long: other columns give up space first.
const MAX_WORD_FLOOR: usize = 32;

/// Spaces between columns.
const GAP: usize = 2;

/// Spaces between the columns of a table that does not fit with [`GAP`].
const NARROW_GAP: usize = 1;

/// A table of text cells with a header row; numeric columns are
/// right-aligned.
#[derive(Debug, Default)]
pub struct TextTable {
    header: Vec<String>,
    /// Each row's cells, each cell its pieces (one piece unless it wraps).
    rows: Vec<Vec<Vec<String>>>,
}

impl TextTable {
    /// A table with these column titles.
    pub fn new(header: &[&str]) -> Self {
        TextTable { header: header.iter().map(|h| h.to_string()).collect(), rows: Vec::new() }
    }

    /// Appends a row (as many cells as columns); a cell wraps between its
    /// words.
    pub fn row(&mut self, cells: Vec<String>) {
        self.row_of_pieces(cells.iter().map(|cell| words(cell)).collect());
    }

    /// Appends a row whose cells are made of pieces: a cell too wide for
    /// its column breaks onto more lines between pieces, never inside one.
    pub fn row_of_pieces(&mut self, cells: Vec<Vec<String>>) {
        debug_assert_eq!(cells.len(), self.header.len());
        self.rows.push(cells);
    }

    /// Renders within the process's width limit.
    pub fn render(&self) -> String {
        self.render_within(width_limit())
    }

    /// Renders within `limit` characters (`None`: no limit), two spaces
    /// between columns.
    pub fn render_within(&self, limit: Option<usize>) -> String {
        let columns = self.header.len();
        let numeric: Vec<bool> = (0..columns)
            .map(|c| !self.rows.is_empty() && self.rows.iter().all(|r| joined(&r[c]).parse::<f64>().is_ok()))
            .collect();
        let (widths, gap) = match self.fit(limit, &numeric, GAP) {
            (widths, 0) => (widths, GAP),
            _ => (self.fit(limit, &numeric, NARROW_GAP).0, NARROW_GAP),
        };
        let mut out = String::new();
        let header: Vec<Vec<String>> = self.header.iter().map(|h| header_words(h)).collect();
        for row in std::iter::once(&header).chain(&self.rows) {
            let cells: Vec<Vec<String>> = row.iter().zip(&widths).map(|(cell, &w)| lay_out(cell, w)).collect();
            let height = cells.iter().map(Vec::len).max().unwrap_or(1);
            for line_index in 0..height {
                let mut line = String::new();
                for (c, cell) in cells.iter().enumerate() {
                    let text = cell.get(line_index).map_or("", String::as_str);
                    let pad = " ".repeat(widths[c].saturating_sub(chars(text)));
                    if numeric[c] {
                        line.push_str(&pad);
                        line.push_str(text);
                    } else {
                        line.push_str(text);
                        line.push_str(&pad);
                    }
                    line.push_str(&" ".repeat(gap));
                }
                out.push_str(line.trim_end());
                out.push('\n');
            }
        }
        out
    }

    /// Column widths with `gap` spaces between columns: the content's, then
    /// text columns narrowed, widest first, until the table fits `limit` or
    /// every column is at its floor (a text column's floor is
    /// [`MIN_TEXT_WIDTH`], its header's longest word or its cells' longest
    /// word up to [`MAX_WORD_FLOOR`]; the first column and numeric ones
    /// keep their values' width), and by how many characters the table
    /// still exceeds `limit`. Headers wrap between words like cells.
    fn fit(&self, limit: Option<usize>, numeric: &[bool], gap: usize) -> (Vec<usize>, usize) {
        let columns = self.header.len();
        let header =
            |c: usize| header_words(&self.header[c]).iter().map(|word| chars(word.trim_start())).max().unwrap_or(0);
        let values = |c: usize| self.rows.iter().map(|r| chars(&joined(&r[c]))).max().unwrap_or(0);
        let longest_word = |c: usize| {
            let pieces = self.rows.iter().flat_map(|r| r[c].iter().flat_map(|piece| words(piece)));
            pieces.map(|word| chars(word.trim_start())).filter(|&n| n <= MAX_WORD_FLOOR).max().unwrap_or(0)
        };
        let mut widths: Vec<usize> = (0..columns).map(|c| values(c).max(chars(&self.header[c]))).collect();
        let Some(limit) = limit else { return (widths, 0) };
        let floors: Vec<usize> = (0..columns)
            .map(|c| match numeric[c] || c == 0 {
                true => values(c).max(header(c)),
                false => widths[c].min(MIN_TEXT_WIDTH.max(header(c)).max(longest_word(c))),
            })
            .collect();
        let total = widths.iter().sum::<usize>() + gap * columns.saturating_sub(1);
        let mut excess = total.saturating_sub(limit);
        let shrinkable = |widths: &[usize], c: usize| widths[c] > floors[c];
        while excess > 0 {
            let widest = (0..columns).filter(|&c| shrinkable(&widths, c)).max_by_key(|&c| (widths[c], usize::MAX - c));
            let Some(c) = widest else { break };
            // Down to the next-widest shrinkable column in one step.
            let next = (0..columns).filter(|&d| d != c && shrinkable(&widths, d)).map(|d| widths[d]).max();
            let step = (widths[c] - next.unwrap_or(floors[c]).max(floors[c])).clamp(1, excess);
            widths[c] -= step;
            excess -= step;
        }
        (widths, excess)
    }
}

/// The "imported at" and "source" cells of a listing: within the terminal
/// the time to the minute and the source's file name; with `--wide` (no
/// width limit) both in full (JSON always has both in full).
pub fn provenance_cells(imported_at: &str, source: &str) -> [String; 2] {
    let imported_at = imported_at.replacen('T', " ", 1);
    if width_limit().is_none() {
        return [imported_at, source.to_string()];
    }
    let file_name = std::path::Path::new(source).file_name().map(|name| name.to_string_lossy().into_owned());
    [imported_at.chars().take(16).collect(), file_name.unwrap_or_else(|| source.to_string())]
}

/// `text` as pieces that break before each run of spaces and after each
/// `/` (so paths wrap too): `a b/c` is `a`, ` b/`, `c`.
fn words(text: &str) -> Vec<String> {
    let mut pieces: Vec<String> = vec![String::new()];
    let mut previous = None;
    for c in text.chars() {
        let starts_word = c == ' ' && previous.is_some_and(|p: char| p != ' ');
        let after_slash = previous == Some('/') && c != ' ';
        if starts_word || after_slash {
            pieces.push(String::new());
        }
        if let Some(piece) = pieces.last_mut() {
            piece.push(c);
        }
        previous = Some(c);
    }
    pieces
}

/// A header as pieces that break before each run of spaces only (`req/s`
/// stays whole).
fn header_words(text: &str) -> Vec<String> {
    let mut pieces: Vec<String> = Vec::new();
    for (i, word) in text.split(' ').enumerate() {
        pieces.push(if i == 0 { word.to_string() } else { format!(" {word}") });
    }
    pieces
}

/// A cell's pieces as one string.
fn joined(pieces: &[String]) -> String {
    pieces.concat()
}

/// The lines of a cell in a column `width` wide: its pieces packed greedily
/// onto lines (a piece that starts a line without its leading spaces), a
/// piece too wide for a line broken between its words, and a word too wide
/// into line-wide chunks.
fn lay_out(pieces: &[String], width: usize) -> Vec<String> {
    let width = width.max(1);
    let mut lines: Vec<String> = Vec::new();
    let mut current = String::new();
    // A piece wider than the column breaks between its words first.
    let pieces = pieces.iter().flat_map(|piece| match chars(piece) > width {
        true => words(piece),
        false => vec![piece.clone()],
    });
    for piece in pieces {
        let piece = piece.as_str();
        if !current.is_empty() && chars(&current) + chars(piece) > width {
            lines.push(std::mem::take(&mut current));
        }
        // A piece that starts a line drops its leading spaces.
        current.push_str(if current.is_empty() { piece.trim_start() } else { piece });
        while chars(&current) > width {
            let rest: String = current.chars().skip(width).collect();
            lines.push(current.chars().take(width).collect());
            current = rest;
        }
    }
    if !current.is_empty() || lines.is_empty() {
        lines.push(current);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligns_text_left_and_numbers_right() {
        let mut table = TextTable::new(&["name", "rps"]);
        table.row(vec!["bert".into(), "5.5".into()]);
        table.row(vec!["mobilenetv2".into(), "1200.0".into()]);
        assert_eq!(table.render_within(None), "name            rps\nbert            5.5\nmobilenetv2  1200.0\n");
    }

    #[test]
    fn widths_count_characters_not_bytes() {
        let mut table = TextTable::new(&["tile", "n"]);
        table.row(vec!["b4×3".into(), "1".into()]);
        table.row(vec!["b16×10".into(), "2".into()]);
        assert_eq!(table.render_within(None), "tile    n\nb4×3    1\nb16×10  2\n");
    }

    #[test]
    fn a_wide_table_wraps_pieces_and_cuts_text_to_fit() {
        let mut table = TextTable::new(&["gpu", "layout", "note"]);
        let tiles: Vec<String> = (0..6).map(|i| format!("[1g service-{i} b1×1]")).collect();
        table.row_of_pieces(vec![vec!["0".into()], tiles, words("a rather long note that will not fit")]);
        let text = table.render_within(Some(60));
        assert!(text.lines().all(|line| line.chars().count() <= 60), "{text}");
        for i in 0..6 {
            assert!(text.contains(&format!("[1g service-{i} b1×1]")), "every tile is shown: {text}");
        }
        assert!(text.contains("a rather long note"), "the note wraps between words: {text}");
        assert!(!text.contains('…'), "nothing is cut: {text}");
        assert!(text.lines().count() > 2, "the layout wraps: {text}");
        // Unlimited: one line per row.
        assert_eq!(table.render_within(None).lines().count(), 2);
    }

    #[test]
    fn pieces_fill_each_line_before_wrapping() {
        let mut table = TextTable::new(&["gpu", "layout"]);
        let tiles: Vec<String> = (0..5).map(|i| format!("[1g s{i} b1×1]")).collect();
        table.row_of_pieces(vec![vec!["0".into()], tiles]);
        // 44 = "gpu" + 2 spaces + three 13-character tiles.
        let text = table.render_within(Some(44));
        assert_eq!(text, "gpu  layout\n  0  [1g s0 b1×1][1g s1 b1×1][1g s2 b1×1]\n     [1g s3 b1×1][1g s4 b1×1]\n");
    }

    #[test]
    fn a_word_too_long_breaks_inside_and_nothing_is_cut() {
        let mut table = TextTable::new(&["workload", "req/s", "command"]);
        let command = format!("{}y", "x".repeat(99));
        table.row(vec!["bert-base-cased_batch8-inf".into(), "123456789.5".into(), command.clone()]);
        let text = table.render_within(Some(60));
        assert!(text.contains("bert-base-cased_batch8-inf") && text.contains("123456789.5"), "{text}");
        assert!(text.lines().all(|line| line.chars().count() <= 60), "{text}");
        assert!(!text.contains('…'), "{text}");
        let column = text.find("command").unwrap();
        let commands: String = text.lines().skip(1).map(|line| line[column..].trim_end()).collect();
        assert_eq!(commands, command, "every character of the long word, in order: {text}");
        assert!(text.lines().next().unwrap().contains(" req/s "), "the header keeps req/s whole: {text}");
    }

    #[test]
    fn a_column_of_names_keeps_its_longest_name_whole_while_others_give_way() {
        let mut table = TextTable::new(&["id", "workloads", "samples/s", "imported at", "source"]);
        table.row(vec![
            "1".into(),
            "bert-base-cased_batch8-inf + wav2vec2-base-960h_batch2-inf".into(),
            "77.8 / 21.5".into(),
            "2026-11-27 02:43".into(),
            "pairs_mps100.csv".into(),
        ]);
        let text = table.render_within(Some(80));
        assert!(text.lines().all(|line| line.chars().count() <= 80), "{text}");
        for name in ["bert-base-cased_batch8-inf", "wav2vec2-base-960h_batch2-inf", "pairs_mps100.csv"] {
            assert!(text.lines().any(|line| line.contains(name)), "{name} on one line: {text}");
        }
    }

    #[test]
    fn numbers_that_do_not_fit_two_spaces_apart_fit_one_space_apart() {
        let header = ["service", "req/s", "provided", "slo", "at", "predicted", "within", "tolerance", "load"];
        let mut table = TextTable::new(&header);
        let row = ["search-ranking", "600.0", "634.1", "120.0", "99", "97.0", "99.92", "11.0", "0.83"];
        table.row(row.iter().map(|cell| cell.to_string()).collect());
        let wide = table.render_within(None);
        let widest = wide.lines().map(|line| line.chars().count()).max().unwrap();
        let limit = widest - 4;
        let text = table.render_within(Some(limit));
        assert!(text.lines().all(|line| line.chars().count() <= limit), "{text}");
        assert!(text.contains("search-ranking 600.0") && text.contains("req/s provided"), "one space apart: {text}");
        assert_eq!(table.render_within(Some(widest)), wide, "two spaces apart when that fits");
    }

    #[test]
    fn words_break_before_spaces_and_after_slashes() {
        assert_eq!(words("python serve.py  --batch 8"), ["python", " serve.py", "  --batch", " 8"]);
        assert_eq!(words(""), [""]);
        assert_eq!(words(" lead"), [" lead"]);
        assert_eq!(words("../shared/data x"), ["../", "shared/", "data", " x"]);
    }
}
