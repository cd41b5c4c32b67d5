//! `tessera report`: a plan drawn as HTML or SVG.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

/// `tessera report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The plan (JSON, as `tessera plan --format json` writes it).
    pub plan: PathBuf,
    /// Write here (atomically) instead of to standard output.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// `html`: the whole report; `svg`: the tiles alone.
    #[arg(long, value_enum, default_value_t = ReportFormat::Html)]
    pub format: ReportFormat,
    /// The page's title (default: the plan's file name).
    #[arg(long)]
    pub title: Option<String>,
}

/// What `tessera report` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    /// One self-contained HTML page.
    Html,
    /// The tiles alone, one SVG document.
    Svg,
}
