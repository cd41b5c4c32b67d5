//! A minimal blocking HTTP client for the rate source: `GET` over plain
//! HTTP/1.0 (the server closes the connection after its answer, so the
//! body runs to the end of the stream), with one deadline for connecting,
//! sending and reading. Enough for Prometheus' API; HTTPS is refused with
//! a clear error.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// The largest answer read, bytes: a rate query's answer is a few hundred.
const MAX_ANSWER_BYTES: u64 = 16 << 20;

/// A base URL: `http://HOST[:PORT][/PREFIX]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseUrl {
    /// The host, as given (a name or an address; IPv6 in brackets).
    host: String,
    /// The port (80 when none is given).
    port: u16,
    /// The path prefix, without a trailing `/` (empty for none).
    prefix: String,
}

impl BaseUrl {
    /// Parses `text`, or says in one line why it is not a base URL this
    /// client can use.
    pub fn parse(text: &str) -> Result<BaseUrl, String> {
        let Some(rest) = text.strip_prefix("http://") else {
            return Err(if text.starts_with("https://") {
                format!("'{text}': HTTPS is not supported; reach Prometheus over plain HTTP (e.g. its in-cluster Service, or `kubectl port-forward`)")
            } else {
                format!("'{text}': expected http://HOST[:PORT][/PREFIX]")
            });
        };
        let (authority, path) = rest.split_once('/').map_or((rest, ""), |(authority, path)| (authority, path));
        if authority.is_empty() || authority.contains('@') || path.contains(['?', '#']) {
            return Err(format!("'{text}': expected http://HOST[:PORT][/PREFIX] (no user, query or fragment)"));
        }
        let (host, port) = match authority.rsplit_once(':') {
            Some((host, port)) if !port.contains(']') => {
                let port = port.parse::<u16>().map_err(|_| format!("'{text}': port '{port}' is not a port number"))?;
                (host, port)
            }
            _ => (authority, 80),
        };
        let prefix = path.trim_end_matches('/');
        let prefix = if prefix.is_empty() { String::new() } else { format!("/{prefix}") };
        Ok(BaseUrl { host: host.to_string(), port, prefix })
    }

    /// `http://HOST:PORT/PREFIX`, for messages.
    pub fn text(&self) -> String {
        format!("http://{}:{}{}", self.host, self.port, self.prefix)
    }

    /// `GET PREFIX/path_and_query`: the status and the body, or why there
    /// is none (unreachable, timed out, not HTTP), within `timeout`.
    pub fn get(&self, path_and_query: &str, timeout: Duration) -> Result<(u16, Vec<u8>), String> {
        let deadline = Instant::now() + timeout;
        let left = || deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
        let address = (self.host.trim_start_matches('[').trim_end_matches(']'), self.port)
            .to_socket_addrs()
            .map_err(|error| format!("cannot resolve {}: {error}", self.host))?
            .next()
            .ok_or_else(|| format!("{} resolves to no address", self.host))?;
        let mut stream = TcpStream::connect_timeout(&address, left()).map_err(|error| error.to_string())?;
        let request = format!(
            "GET {}{path_and_query} HTTP/1.0\r\nHost: {}:{}\r\nAccept: application/json\r\nUser-Agent: tessera-autopilot\r\n\r\n",
            self.prefix, self.host, self.port
        );
        stream.set_write_timeout(Some(left())).map_err(|error| error.to_string())?;
        stream.write_all(request.as_bytes()).map_err(|error| format!("sending the query: {error}"))?;
        let mut answer = Vec::new();
        let mut buffer = [0u8; 8192];
        loop {
            stream.set_read_timeout(Some(left())).map_err(|error| error.to_string())?;
            match stream.read(&mut buffer) {
                Ok(0) => break,
                Ok(read) => answer.extend_from_slice(&buffer[..read]),
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(error) if matches!(error.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                    return Err(format!("no complete answer within {} s", timeout.as_secs_f64()));
                }
                Err(error) => return Err(format!("reading the answer: {error}")),
            }
            if answer.len() as u64 > MAX_ANSWER_BYTES {
                return Err(format!("the answer exceeds {MAX_ANSWER_BYTES} bytes"));
            }
            if Instant::now() >= deadline {
                return Err(format!("no complete answer within {} s", timeout.as_secs_f64()));
            }
        }
        parse_answer(&answer)
    }
}

/// The status and body of a whole HTTP/1.x answer.
fn parse_answer(answer: &[u8]) -> Result<(u16, Vec<u8>), String> {
    let end = answer.windows(4).position(|window| window == b"\r\n\r\n").ok_or("not an HTTP answer (no header end)")?;
    let head = String::from_utf8_lossy(&answer[..end]);
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .split(' ')
        .nth(1)
        .filter(|_| status_line.starts_with("HTTP/1."))
        .and_then(|code| code.parse::<u16>().ok())
        .ok_or_else(|| format!("not an HTTP answer: '{status_line}'"))?;
    let chunked = lines.any(|line| {
        line.split_once(':').is_some_and(|(name, value)| {
            name.trim().eq_ignore_ascii_case("transfer-encoding") && value.trim().eq_ignore_ascii_case("chunked")
        })
    });
    let body = &answer[end + 4..];
    let body = if chunked { unchunk(body)? } else { body.to_vec() };
    Ok((status, body))
}

/// A chunked body's bytes.
fn unchunk(mut body: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let line_end = body.windows(2).position(|w| w == b"\r\n").ok_or("a chunked body without a chunk size")?;
        let size_text = String::from_utf8_lossy(&body[..line_end]);
        let size_text = size_text.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_text, 16).map_err(|_| format!("bad chunk size '{size_text}'"))?;
        body = &body[line_end + 2..];
        if size == 0 {
            return Ok(out);
        }
        let chunk = body.get(..size).ok_or("a chunked body cut short")?;
        out.extend_from_slice(chunk);
        body = body.get(size + 2..).ok_or("a chunked body cut short")?;
    }
}

/// `text` percent-encoded for a URL's query (unreserved characters kept).
pub fn query_escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len() * 3);
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => escaped.push(char::from(byte)),
            _ => escaped.push_str(&format!("%{byte:02X}")),
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_parse_with_port_and_prefix_and_refuse_the_rest() {
        let url = BaseUrl::parse("http://prometheus.monitoring:9090/prom/").unwrap();
        assert_eq!(url.text(), "http://prometheus.monitoring:9090/prom");
        assert_eq!(BaseUrl::parse("http://[::1]:9090").unwrap().text(), "http://[::1]:9090");
        assert_eq!(BaseUrl::parse("http://localhost").unwrap().text(), "http://localhost:80");
        assert!(BaseUrl::parse("https://p:9090").unwrap_err().contains("HTTPS is not supported"));
        assert!(BaseUrl::parse("p:9090").unwrap_err().contains("expected http://"));
        assert!(BaseUrl::parse("http://p:x").unwrap_err().contains("port 'x'"));
        assert!(BaseUrl::parse("http://u@p:1").is_err());
    }

    #[test]
    fn answers_parse_plain_and_chunked_and_garbage_is_named() {
        let plain = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{\"a\":1}";
        assert_eq!(parse_answer(plain).unwrap(), (200, b"{\"a\":1}".to_vec()));
        let chunked = b"HTTP/1.1 503 Service Unavailable\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n";
        assert_eq!(parse_answer(chunked).unwrap(), (503, b"abcde".to_vec()));
        assert!(parse_answer(b"SSH-2.0-OpenSSH\r\n\r\n").unwrap_err().contains("not an HTTP answer"));
        assert!(parse_answer(b"HTTP/1.1 200 OK\r\n").is_err());
        let cut = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nff\r\nabc";
        assert!(parse_answer(cut).unwrap_err().contains("cut short"));
    }

    #[test]
    fn queries_are_percent_encoded() {
        assert_eq!(query_escape(r#"sum(x{a="b c"})"#), "sum%28x%7Ba%3D%22b%20c%22%7D%29");
    }
}
