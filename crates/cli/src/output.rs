//! The one way the binary writes what it produces.
//!
//! Results go to standard output through [`outln!`], [`out!`] or [`emit`];
//! notes for people go to standard error through [`note`]. Nothing else
//! prints (bare `println!` and friends are refused by clippy in this crate).
//! A closed standard output (`tessera … | head -1`) is not a failure of the
//! command: writing returns [`StdoutClosed`], every command passes it up
//! with `?`, and `main` ends quietly with status 0, as ripgrep does.

use std::fmt;
use std::io::{ErrorKind, IsTerminal, Write};
use std::path::Path;

use anyhow::{Context, Result};

/// Standard output was closed by the reader (a broken pipe): the program
/// ends quietly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StdoutClosed;

impl fmt::Display for StdoutClosed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("standard output is closed")
    }
}

impl std::error::Error for StdoutClosed {}

/// `true` when `error` (or a cause of it) is [`StdoutClosed`].
pub fn is_stdout_closed(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| cause.is::<StdoutClosed>())
}

/// Writes `text` to standard output and flushes it.
pub fn write_stdout(text: fmt::Arguments<'_>) -> Result<()> {
    write_bytes(text.to_string().as_bytes())
}

fn write_bytes(bytes: &[u8]) -> Result<()> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == ErrorKind::BrokenPipe => Err(StdoutClosed.into()),
        Err(error) => Err(error).context("cannot write to standard output"),
    }
}

/// Writes a formatted line to standard output; `?` it.
macro_rules! outln {
    () => {
        $crate::output::write_stdout(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::output::write_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// Writes formatted text to standard output; `?` it.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::output::write_stdout(format_args!($($arg)*))
    };
}

pub(crate) use {out, outln};

/// Writes a note for people (`note: …`) to standard error, wrapped between
/// words to the width limit when standard error is a terminal (a log keeps
/// one line per note). A closed standard error is ignored: notes are never
/// worth failing for.
pub fn note(text: fmt::Arguments<'_>) {
    let line = format!("note: {text}");
    let line = if std::io::stderr().is_terminal() { crate::terminal::wrap_words(&line, "", "  ") } else { line };
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// Writes a line to standard error, ignoring a closed standard error
/// (`main`'s error line).
pub fn error_line(text: fmt::Arguments<'_>) {
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}

/// `true` when `output` names standard output: absent, or `-`.
pub fn is_stdout(output: Option<&Path>) -> bool {
    output.is_none_or(|path| path == Path::new("-"))
}

/// Writes `bytes` to the file `output` atomically, or to standard output
/// when `output` is absent or `-`.
pub fn emit(bytes: &[u8], output: Option<&Path>) -> Result<()> {
    match output {
        Some(path) if !is_stdout(output) => Ok(tessera_store::write_atomic(path, bytes)?),
        _ => write_bytes(bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_stdout_is_told_apart_from_other_errors() {
        let closed = anyhow::Error::new(StdoutClosed).context("while listing profiles");
        assert!(is_stdout_closed(&closed));
        let other = anyhow::Error::new(std::io::Error::from(ErrorKind::BrokenPipe)).context("nvidia-smi");
        assert!(!is_stdout_closed(&other), "only standard output's own broken pipe is quiet");
    }

    #[test]
    fn a_dash_means_standard_output() {
        assert!(is_stdout(None));
        assert!(is_stdout(Some(Path::new("-"))));
        assert!(!is_stdout(Some(Path::new("./-"))));
        assert!(!is_stdout(Some(Path::new("plan.json"))));
    }
}
