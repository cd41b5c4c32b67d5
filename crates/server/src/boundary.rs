//! Where every error answer is finished, in one place: an [`ApiError`]
//! from a handler, an extractor or a layer, and the framework's own
//! answers (an empty 405, a text rejection) alike leave as
//! `{"error": {"code", "message"}}` with `content-type: application/json`,
//! and no message names a file of the server (the store's path becomes
//! "the store").

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;

use crate::error::ApiError;
use crate::state::AppState;

/// The most of a framework error body read to reword it.
const FRAMEWORK_BODY_BYTES: usize = 16 * 1024;

/// The layer: finishes every answer of status 400 or more.
pub(crate) async fn finish_errors(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    let mut response = next.run(request).await;
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let error = match response.extensions_mut().remove::<ApiError>() {
        Some(error) => error,
        None => {
            let (parts, body) = response.into_parts();
            let text = axum::body::to_bytes(body, FRAMEWORK_BODY_BYTES).await.unwrap_or_default();
            let text = String::from_utf8_lossy(&text);
            let error = framework_error(&state, (&method, &path), status, &parts.headers, &text);
            response = Response::from_parts(parts, axum::body::Body::empty());
            error
        }
    };
    let error = error.without_paths(state.private_paths());
    let mut finished = error.finished();
    // Keep the answer's other headers (`Allow`, `WWW-Authenticate`, ids).
    for (name, value) in response.headers() {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            finished.headers_mut().append(name.clone(), value.clone());
        }
    }
    *finished.status_mut() = status;
    finished
}

/// An answer the framework made without an [`ApiError`] (status
/// `status`, headers `headers`, body `text`), as one.
fn framework_error(
    state: &AppState,
    request: (&Method, &str),
    status: StatusCode,
    headers: &HeaderMap,
    text: &str,
) -> ApiError {
    let (method, path) = request;
    match status {
        StatusCode::METHOD_NOT_ALLOWED => {
            let allowed = headers.get(header::ALLOW).and_then(|value| value.to_str().ok()).unwrap_or("");
            let allowed: Vec<&str> = allowed.split(',').map(str::trim).filter(|m| !m.is_empty()).collect();
            // The router adds `Allow` outside this layer on most routes.
            let takes = match allowed.is_empty() {
                true => "its Allow header lists the methods it takes".to_string(),
                false => format!("it takes {}", allowed.join(", ")),
            };
            ApiError::new(status, "method_not_allowed", format!("{path} does not take {method}; {takes}"))
        }
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::body_too_large(state.inner.config.max_body_bytes),
        _ => ApiError::from_status(status, text),
    }
}
