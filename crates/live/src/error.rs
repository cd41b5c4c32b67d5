//! The live loop's one error type.

use std::net::SocketAddr;

/// What went wrong setting up the live loop's parts.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// A setting the loop cannot use: one line that names it and says why
    /// (`--prometheus 'https://…': HTTPS is not supported; …`).
    #[error("{0}")]
    Setting(String),
    /// The deploy target could not be read (e.g. a cluster's inventory).
    #[error("the deploy target: {0}")]
    Target(String),
    /// The metrics' address could not be listened on.
    #[error("--metrics-addr {address}: {source}")]
    Listen {
        /// The address asked for.
        address: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}
