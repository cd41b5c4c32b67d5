//! A small HTTP/1.1 client over one kept-alive connection (hyper), for the
//! load benchmark and the tests. It connects to loopback addresses only.

use std::net::SocketAddr;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;

use crate::error::ServerError;

/// One connection to a server on this machine.
#[derive(Debug)]
pub struct Client {
    address: SocketAddr,
    sender: SendRequest<Full<Bytes>>,
    token: Option<String>,
}

/// An answer.
#[derive(Debug, Clone)]
pub struct ClientResponse {
    /// The HTTP status.
    pub status: u16,
    /// The headers, names in lower case.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl ClientResponse {
    /// The body as JSON (`null` when it is not JSON).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The value of header `name` (lower case), if present.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
    }
}

impl Client {
    /// Connects to `address`, which must be a loopback address; `token`, if
    /// any, is sent as `Authorization: Bearer` with every request.
    pub async fn connect(address: SocketAddr, token: Option<&str>) -> Result<Client, ServerError> {
        if !address.ip().is_loopback() {
            return Err(ServerError::Listen {
                address: address.to_string(),
                reason: "this client talks to servers on this machine only (a loopback address)".to_string(),
            });
        }
        let failed = |e: &dyn std::fmt::Display| ServerError::Runtime(format!("connecting to {address}: {e}"));
        let stream = tokio::net::TcpStream::connect(address).await.map_err(|e| failed(&e))?;
        stream.set_nodelay(true).map_err(|e| failed(&e))?;
        let (sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| failed(&e))?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(Client { address, sender, token: token.map(str::to_string) })
    }

    /// Sends `method path` with `headers` and, if any, `body` as JSON.
    pub async fn send(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&serde_json::Value>,
        headers: &[(&str, &str)],
    ) -> Result<ClientResponse, ServerError> {
        let bytes = body.map(|value| value.to_string().into_bytes()).unwrap_or_default();
        let content_type = body.map(|_| "application/json");
        self.send_bytes(method, path, content_type, bytes, headers).await
    }

    /// Sends `method path` with `headers` and `body` as it is, labelled
    /// `content_type` (none when `None`).
    pub async fn send_bytes(
        &mut self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: Vec<u8>,
        headers: &[(&str, &str)],
    ) -> Result<ClientResponse, ServerError> {
        let mut builder = hyper::Request::builder().method(method).uri(path).header("host", self.address.to_string());
        if let Some(content_type) = content_type {
            builder = builder.header("content-type", content_type);
        }
        if let Some(token) = &self.token {
            builder = builder.header("authorization", format!("Bearer {token}"));
        }
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        let request = builder
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| ServerError::Runtime(format!("building a request for {path}: {e}")))?;
        let failed = |e: &dyn std::fmt::Display| ServerError::Runtime(format!("{method} {path}: {e}"));
        self.sender.ready().await.map_err(|e| failed(&e))?;
        let response = self.sender.send_request(request).await.map_err(|e| failed(&e))?;
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .map(|(name, value)| (name.as_str().to_string(), value.to_str().unwrap_or("").to_string()))
            .collect();
        let body = response.into_body().collect().await.map_err(|e| failed(&e))?.to_bytes().to_vec();
        Ok(ClientResponse { status, headers, body })
    }

    /// `GET path`.
    pub async fn get(&mut self, path: &str) -> Result<ClientResponse, ServerError> {
        self.send("GET", path, None, &[]).await
    }

    /// `POST path` with `body` as JSON.
    pub async fn post(&mut self, path: &str, body: &serde_json::Value) -> Result<ClientResponse, ServerError> {
        self.send("POST", path, Some(body), &[]).await
    }
}
