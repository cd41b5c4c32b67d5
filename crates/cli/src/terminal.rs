//! The terminal's width, and fitting prose and shell command lines to it.
//!
//! Tables ([`crate::table`]) fit the width by wrapping and cutting cells;
//! a line of prose wraps between words; a shell command line (a deploy's
//! dry run) wraps between words outside quotes with a ` \` continuation,
//! so the wrapped text still runs when pasted into a shell.

use std::sync::OnceLock;

/// The width output fits when nothing else is said: an 80-column terminal.
pub const DEFAULT_WIDTH: usize = 80;

/// Indentation of a wrapped command's continuation lines.
const COMMAND_INDENT: &str = "    ";

/// The process's width limit: `None` for no limit (`--wide`).
static WIDTH_LIMIT: OnceLock<Option<usize>> = OnceLock::new();

/// Sets the width all output of this process fits (once, from `main`);
/// `None` lets it be as wide as its content.
pub fn set_width_limit(limit: Option<usize>) {
    let _ = WIDTH_LIMIT.set(limit);
}

/// The width output fits: `None` for no limit.
pub fn width_limit() -> Option<usize> {
    *WIDTH_LIMIT.get_or_init(|| Some(DEFAULT_WIDTH))
}

/// The width of the terminal: `COLUMNS` when set, else the width of the
/// terminal standard output is, else [`DEFAULT_WIDTH`].
pub fn detect_width() -> usize {
    let columns = std::env::var("COLUMNS").ok().and_then(|value| value.trim().parse::<usize>().ok());
    let terminal = || console::Term::stdout().size_checked().map(|(_rows, columns)| usize::from(columns));
    columns.filter(|&width| width > 0).or_else(terminal).unwrap_or(DEFAULT_WIDTH)
}

/// `text` (one line) wrapped between words to the width limit, the first
/// line starting with `first`, the others with `indent`.
pub fn wrap_words(text: &str, first: &str, indent: &str) -> String {
    pack(text.split(' ').filter(|word| !word.is_empty()), width_limit(), first, indent, "")
}

/// A shell command line wrapped between words outside quotes to the width
/// limit, each broken line ending in ` \` and the next indented, so the
/// result runs as the line did. A comment (`# …`) wraps as a comment.
pub fn wrap_command(line: &str) -> String {
    if line.starts_with("# ") {
        return pack(line.split(' ').filter(|word| !word.is_empty()), width_limit(), "", "#   ", "");
    }
    pack(shell_words(line).into_iter(), width_limit(), "", COMMAND_INDENT, " \\")
}

/// Packs `words` greedily onto lines of at most `width` characters (a
/// word longer than a line gets one of its own), the first line starting
/// with `first`, the others with `indent`; each broken line ends with `end`.
fn pack<'a>(
    words: impl Iterator<Item = &'a str>,
    width: Option<usize>,
    first: &str,
    indent: &str,
    end: &str,
) -> String {
    let words: Vec<&str> = words.collect();
    let mut lines: Vec<String> = vec![first.to_string()];
    let mut empty = true;
    for (i, word) in words.iter().enumerate() {
        let line = lines.last_mut().expect("at least one line");
        if empty {
            line.push_str(word);
            empty = false;
            continue;
        }
        // The rest fits on this line: no break, so no room for `end` needed.
        let rest: usize = words[i..].iter().map(|w| 1 + chars(w)).sum();
        let fits = |extra: usize| width.is_none_or(|w| chars(line) + extra <= w);
        if fits(rest) || fits(1 + chars(word) + chars(end)) {
            line.push(' ');
            line.push_str(word);
        } else {
            line.push_str(end);
            lines.push(format!("{indent}{word}"));
        }
    }
    lines.join("\n")
}

/// The words of a shell command line: split at spaces outside single
/// quotes (the only quoting Tessera writes) and backslash escapes.
fn shell_words(line: &str) -> Vec<&str> {
    let mut words = Vec::new();
    let (mut start, mut quoted, mut escaped) = (None, false, false);
    for (i, c) in line.char_indices() {
        match (c, quoted, escaped) {
            (_, _, true) => escaped = false,
            ('\\', false, false) => escaped = true,
            ('\'', _, false) => quoted = !quoted,
            (' ', false, false) => {
                if let Some(s) = start.take() {
                    words.push(&line[s..i]);
                }
                continue;
            }
            _ => {}
        }
        start.get_or_insert(i);
    }
    if let Some(s) = start {
        words.push(&line[s..]);
    }
    words
}

/// The width of `text` in characters (not bytes).
pub fn chars(text: &str) -> usize {
    text.chars().count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_words_keep_quoted_spaces_and_escapes() {
        assert_eq!(
            shell_words("A='x y' sh -c 'it'\\''s' >>log 2>&1 &"),
            ["A='x y'", "sh", "-c", "'it'\\''s'", ">>log", "2>&1", "&"]
        );
        assert_eq!(shell_words("  a  b "), ["a", "b"]);
    }

    #[test]
    fn a_wrapped_command_runs_as_the_line_did() {
        let line = "A=1 B='two words' sh -c 'echo \"$A $B it'\\''s\"' 2>/dev/null";
        let run = |text: &str| std::process::Command::new("sh").args(["-c", text]).output().unwrap().stdout;
        assert_eq!(String::from_utf8(run(line)).unwrap(), "1 two words it's\n");
        for width in 10..=line.len() + 4 {
            let wrapped = pack(shell_words(line).into_iter(), Some(width), "", "    ", " \\");
            assert_eq!(run(&wrapped), run(line), "{wrapped}");
            let last = wrapped.lines().count() - 1;
            assert!(wrapped.lines().enumerate().all(|(i, l)| i == last || l.ends_with(" \\")), "{wrapped}");
            if width >= line.len() {
                assert_eq!(wrapped, line, "a line that fits is left alone");
            }
        }
    }

    #[test]
    fn a_comment_wraps_as_a_comment() {
        let comment = "# no registered workload for model gpt2 batch 1";
        assert_eq!(
            pack(comment.split(' '), Some(30), "", "#   ", ""),
            "# no registered workload for\n#   model gpt2 batch 1"
        );
    }

    #[test]
    fn words_wrap_to_the_width_with_an_indent() {
        let text = "schedule: alpha beta gamma delta epsilon";
        assert_eq!(pack(text.split(' '), Some(21), "", "  ", ""), "schedule: alpha beta\n  gamma delta epsilon");
        assert_eq!(pack("a b c".split(' '), Some(5), "  ", "  ", ""), "  a b\n  c");
        assert_eq!(pack(text.split(' '), None, "", "  ", ""), text);
        assert_eq!(pack("averyveryverylongword x".split(' '), Some(8), "", "", ""), "averyveryverylongword\nx");
    }
}
