//! `tessera serve`: the HTTP service.

use std::path::PathBuf;

use clap::Args;

use super::parse_seconds;

/// `tessera serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Where to listen. A loopback address unless --allow-remote.
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "ADDRESS:PORT")]
    pub listen: std::net::SocketAddr,
    /// A file whose first line is the API token (at least 16 characters);
    /// without it, the TESSERA_TOKEN environment variable. Requests that
    /// change anything must send `Authorization: Bearer TOKEN`.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Let reading routes (GET: lists, plans, pages, metrics, the API
    /// document) answer without the token.
    #[arg(long)]
    pub public_reads: bool,
    /// Allow a listen address outside the loopback range.
    #[arg(long)]
    pub allow_remote: bool,
    /// Planning jobs that run at once (more wait in a queue).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub workers: u32,
    /// Seconds a request may take before it is answered 503.
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0, value_parser = parse_seconds)]
    pub request_timeout: f64,
    /// Largest request body, MiB.
    #[arg(long, value_name = "MIB", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub max_body_mib: u32,
}
