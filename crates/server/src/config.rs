//! How the server is configured: where it listens, the store, the token,
//! which routes are open, and its limits.

use std::fmt;
use std::io::Read;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::ServerError;

/// The shortest token accepted, bytes.
pub const MIN_TOKEN_BYTES: usize = 16;

/// The bearer token that mutating routes (and, unless opened, reading
/// routes) require. Its `Debug` shows no secret, so logging a
/// configuration never logs it.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiToken(String);

impl fmt::Debug for ApiToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiToken(<hidden>)")
    }
}

impl ApiToken {
    /// A token given as text (an environment variable's value): trimmed,
    /// at least [`MIN_TOKEN_BYTES`] long, visible ASCII only.
    pub fn new(text: &str, origin: &str) -> Result<ApiToken, ServerError> {
        let token = text.trim();
        if token.len() < MIN_TOKEN_BYTES {
            return Err(ServerError::Token(format!(
                "{origin}: the token must be at least {MIN_TOKEN_BYTES} characters (found {})",
                token.len()
            )));
        }
        if !token.bytes().all(|byte| byte.is_ascii_graphic()) {
            return Err(ServerError::Token(format!(
                "{origin}: the token must be visible ASCII characters without spaces"
            )));
        }
        Ok(ApiToken(token.to_string()))
    }

    /// The token in the first line of the file at `path`.
    pub fn from_file(path: &Path) -> Result<ApiToken, ServerError> {
        let text = std::fs::read_to_string(path)
            .map_err(|cause| ServerError::TokenFile { path: path.to_path_buf(), cause })?;
        ApiToken::new(text.lines().next().unwrap_or(""), &path.display().to_string())
    }

    /// A fresh random token (32 hex digits from the operating system's
    /// random source), for a server whose only client is this process.
    pub fn random() -> Result<ApiToken, ServerError> {
        let mut bytes = [0u8; 16];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut random| random.read_exact(&mut bytes))
            .map_err(|cause| ServerError::TokenFile { path: PathBuf::from("/dev/urandom"), cause })?;
        Ok(ApiToken(bytes.iter().map(|byte| format!("{byte:02x}")).collect()))
    }

    /// The token's text, for a client that must send it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// `true` when `presented` is this token, compared in time that does
    /// not depend on where they differ (only on the presented length).
    pub fn matches(&self, presented: &[u8]) -> bool {
        constant_time_eq(self.0.as_bytes(), presented)
    }
}

/// Equality of `a` and `b` that looks at every byte whatever they hold.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let difference = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | std::hint::black_box(x ^ y));
    std::hint::black_box(difference) == 0
}

/// Everything `tessera serve` is told.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Where to listen; a loopback address unless `allow_remote`.
    pub listen: SocketAddr,
    /// Allow a listen address outside the loopback range.
    pub allow_remote: bool,
    /// The SQLite store (opened read-write, migrated).
    pub store_path: PathBuf,
    /// The bearer token.
    pub token: ApiToken,
    /// Let reading routes (GET: lists, plans, pages, metrics, the API
    /// document) answer without the token.
    pub public_reads: bool,
    /// Largest request body, bytes.
    pub max_body_bytes: usize,
    /// Longest a request may take before it is answered 503 `timeout`.
    pub request_timeout: Duration,
    /// Longest a request's head (its line and headers) may take to arrive,
    /// from the connection's opening or the last response on it; past it
    /// the connection is closed.
    pub header_timeout: Duration,
    /// Planning jobs run at once; more wait in the queue.
    pub planning_workers: usize,
    /// Jobs queued or running at most; beyond, a new job is refused (503).
    pub max_jobs: usize,
    /// Extra time a planning job gets past its own time limit before it is
    /// declared over its limit.
    pub job_grace: Duration,
    /// How long shutdown waits for open requests to be answered and running
    /// jobs to finish (both at once); then open connections are closed,
    /// jobs still running are failed (the server stopped while they ran)
    /// and the process does not wait for their threads.
    pub shutdown_wait: Duration,
}

impl ServeConfig {
    /// A configuration with the defaults: 8 MiB bodies, 30 s per request
    /// and per request head,
    /// 2 planning workers, 1,000 jobs, 5 s of grace, 5 s for running jobs
    /// at shutdown, reads closed.
    pub fn new(listen: SocketAddr, store_path: PathBuf, token: ApiToken) -> ServeConfig {
        ServeConfig {
            listen,
            allow_remote: false,
            store_path,
            token,
            public_reads: false,
            max_body_bytes: 8 << 20,
            request_timeout: Duration::from_secs(30),
            header_timeout: Duration::from_secs(30),
            planning_workers: 2,
            max_jobs: 1000,
            job_grace: Duration::from_secs(5),
            shutdown_wait: Duration::from_secs(5),
        }
    }

    /// Refuses a listen address outside the loopback range unless
    /// `allow_remote`, and zero workers or jobs.
    pub fn check(&self) -> Result<(), ServerError> {
        if !self.listen.ip().is_loopback() && !self.allow_remote {
            return Err(ServerError::Listen {
                address: self.listen.to_string(),
                reason: "not a loopback address; pass --allow-remote to listen beyond this machine".to_string(),
            });
        }
        if self.planning_workers == 0 || self.max_jobs == 0 {
            return Err(ServerError::Runtime("planning workers and the job limit must be at least 1".to_string()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole_and_never_show() {
        let token = ApiToken::new("  0123456789abcdef\n", "env").unwrap();
        assert!(token.matches(b"0123456789abcdef"));
        assert!(!token.matches(b"0123456789abcdeF"));
        assert!(!token.matches(b"0123456789abcde"));
        assert!(!format!("{token:?}").contains("0123"));
        assert!(ApiToken::new("short", "env").unwrap_err().to_string().contains("at least 16"));
        assert!(ApiToken::new("0123456789 abcdef", "env").is_err());
        let random = ApiToken::random().unwrap();
        assert_eq!(random.expose().len(), 32);
        assert_ne!(random, ApiToken::random().unwrap());
    }

    #[test]
    fn a_remote_address_needs_an_explicit_flag() {
        let token = ApiToken::new("0123456789abcdef", "t").unwrap();
        let mut config = ServeConfig::new("0.0.0.0:8080".parse().unwrap(), PathBuf::from("s"), token);
        assert!(config.check().unwrap_err().to_string().contains("--allow-remote"));
        config.allow_remote = true;
        assert!(config.check().is_ok());
        config.listen = "127.0.0.1:0".parse().unwrap();
        config.allow_remote = false;
        assert!(config.check().is_ok());
    }
}
