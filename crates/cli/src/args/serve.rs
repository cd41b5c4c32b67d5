//! `tessera serve`: the HTTP service.

use std::path::PathBuf;

use clap::Args;

use super::parse_seconds;

/// `tessera serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Where to listen: an address or a host name (`localhost:8080`, its
    /// first address). A loopback address unless --allow-remote.
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "ADDRESS:PORT", value_parser = parse_listen)]
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
    /// Seconds a request's line and headers may take to arrive (from the
    /// connection's opening, or the first byte of a later request on it);
    /// past them the connection is closed.
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0, value_parser = parse_seconds)]
    pub header_timeout: f64,
    /// Largest request body, MiB.
    #[arg(long, value_name = "MIB", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub max_body_mib: u32,
}

/// A listen address: `ADDRESS:PORT`, or `HOST:PORT` resolved to the host's
/// first address.
fn parse_listen(text: &str) -> Result<std::net::SocketAddr, String> {
    use std::net::ToSocketAddrs;
    if let Ok(address) = text.parse() {
        return Ok(address);
    }
    let mut resolved = text.to_socket_addrs().map_err(|error| format!("not ADDRESS:PORT or HOST:PORT ({error})"))?;
    resolved.next().ok_or_else(|| format!("{text} resolves to no address"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listen_address_may_name_its_host() {
        assert_eq!(parse_listen("127.0.0.1:8080").unwrap().to_string(), "127.0.0.1:8080");
        assert!(parse_listen("localhost:8080").unwrap().ip().is_loopback());
        assert!(parse_listen("localhost").unwrap_err().starts_with("not ADDRESS:PORT or HOST:PORT"));
    }
}
