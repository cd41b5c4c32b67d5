//! Errors: [`ApiError`], what a request gets back (a status, a stable code
//! and the library's one-line message, as JSON), and [`ServerError`], why
//! the server could not start or run.

use axum::extract::path::ErrorKind;
use axum::extract::rejection::{BytesRejection, JsonRejection, PathRejection, QueryRejection};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use tessera_store::StoreError;

/// An error answered to a request: `{"error": {"code": …, "message": …}}`
/// with its HTTP status. The code is stable (clients branch on it); the
/// message is one line, the same words the command line prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// A stable, machine-readable code, e.g. `version_conflict`.
    pub code: &'static str,
    /// What is wrong, in one line.
    pub message: String,
}

/// The JSON body of every error.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// The error inside [`ErrorBody`].
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ErrorDetail {
    /// A stable code: `bad_request`, `invalid_path`, `invalid_query`, `malformed_json`, `invalid_body`,
    /// `unsupported_media_type`, `body_too_large`, `unauthorized`, `not_found`, `method_not_allowed`,
    /// `already_exists`, `version_conflict`, `precondition_required`, `invalid_input`, `unknown_model`,
    /// `unknown_service`, `no_plan`, `queue_full`, `store_unavailable`, `timeout`, `shutting_down`,
    /// `internal`.
    #[schema(example = "version_conflict")]
    pub code: String,
    /// What is wrong, in one line.
    #[schema(
        example = "service 'search' is at version 3, not 2: it changed since it was read; read it again and retry"
    )]
    pub message: String,
}

impl ApiError {
    /// An error with this status, code and message.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { status, code, message: message.into() }
    }

    /// 422: the request is well-formed but its content cannot be used.
    pub fn invalid(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_input", message)
    }

    /// 404: what the path names does not exist.
    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// 400: a header or parameter is malformed.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    /// 500: a fault of the server itself.
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }

    /// 413: the body is over the server's limit, which the message states.
    pub fn body_too_large(limit_bytes: usize) -> ApiError {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!("the request body is larger than this server accepts ({limit_bytes} bytes at most)"),
        )
    }

    /// An answer the framework made with this status and no error of ours
    /// (an empty 405, a text rejection), in this API's codes: `text` is its
    /// body, when it has one.
    pub(crate) fn from_status(status: StatusCode, text: &str) -> ApiError {
        let code = match status {
            StatusCode::UNAUTHORIZED => "unauthorized",
            StatusCode::NOT_FOUND => "not_found",
            StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
            StatusCode::PAYLOAD_TOO_LARGE => "body_too_large",
            StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
            StatusCode::UNPROCESSABLE_ENTITY => "invalid_input",
            StatusCode::REQUEST_TIMEOUT | StatusCode::GATEWAY_TIMEOUT => "timeout",
            StatusCode::SERVICE_UNAVAILABLE => "store_unavailable",
            server if server.is_server_error() => "internal",
            _ => "bad_request",
        };
        let text = one_line(text);
        let message = if text.is_empty() {
            status.canonical_reason().unwrap_or("the request failed").to_lowercase()
        } else {
            text
        };
        ApiError::new(status, code, message)
    }

    /// The response: the JSON body with `content-type: application/json`.
    /// ([`IntoResponse`] adds the error itself to the response's extensions,
    /// where the error layer finds it to finish it: see `boundary`.)
    pub(crate) fn finished(&self) -> Response {
        let body = ErrorBody { error: ErrorDetail { code: self.code.to_string(), message: self.message.clone() } };
        let mut response = (self.status, axum::Json(body)).into_response();
        response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        response
    }
}

impl From<StoreError> for ApiError {
    /// A store that cannot serve (full or read-only disk, locked) is 503
    /// with its reason; a missing row 404; a version conflict or a name
    /// taken 409; anything else the request's fault, 422.
    fn from(error: StoreError) -> ApiError {
        let message = error.to_string();
        match error {
            StoreError::NotFound { .. } | StoreError::NotStored { .. } => ApiError::not_found(message),
            StoreError::VersionConflict { .. } => ApiError::new(StatusCode::CONFLICT, "version_conflict", message),
            StoreError::ServiceExists { .. } => ApiError::new(StatusCode::CONFLICT, "already_exists", message),
            ref unavailable if unavailable.is_unavailable() => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "store_unavailable", message)
            }
            StoreError::Sqlite { .. } | StoreError::CorruptRow { .. } | StoreError::Corrupt { .. } => {
                ApiError::internal(message)
            }
            _ => ApiError::invalid(message),
        }
    }
}

impl From<tessera_plan::PlanError> for ApiError {
    /// The planner refusing a request is the request's fault: 422 with the
    /// planner's one-line reason.
    fn from(error: tessera_plan::PlanError) -> ApiError {
        ApiError::invalid(error.to_string())
    }
}

impl From<JsonRejection> for ApiError {
    /// Axum's reasons for refusing a JSON body, in this API's codes: bad
    /// syntax 400, a body of the wrong shape (an unknown field, a missing
    /// one, a wrong type) 422, another content type 415.
    fn from(rejection: JsonRejection) -> ApiError {
        let status = rejection.status();
        let code = match &rejection {
            JsonRejection::JsonSyntaxError(_) => "malformed_json",
            JsonRejection::JsonDataError(_) => "invalid_body",
            JsonRejection::MissingJsonContentType(_) => "unsupported_media_type",
            _ => "bad_request",
        };
        let message = match &rejection {
            JsonRejection::MissingJsonContentType(_) => {
                "the body must be JSON: send `Content-Type: application/json`".to_string()
            }
            other => one_line(&other.body_text()),
        };
        ApiError::new(status, code, message)
    }
}

impl ApiError {
    /// A body that could not be read: over the limit (413, stating
    /// `limit_bytes`) or cut off.
    pub(crate) fn from_bytes_rejection(rejection: &BytesRejection, limit_bytes: usize) -> ApiError {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::body_too_large(limit_bytes)
        } else {
            ApiError::new(rejection.status(), "bad_request", one_line(&rejection.body_text()))
        }
    }

    /// A path that does not fit its route's parameters (400 `invalid_path`,
    /// naming the parameter when `only_key` is the route's only one).
    pub(crate) fn from_path_rejection(rejection: &PathRejection, only_key: Option<&str>) -> ApiError {
        let PathRejection::FailedToDeserializePathParams(failed) = rejection else {
            return ApiError::from_status(rejection.status(), &rejection.body_text());
        };
        let (key, value, expected) = match failed.kind() {
            ErrorKind::ParseErrorAtKey { key, value, expected_type } => (Some(key.as_str()), value, *expected_type),
            ErrorKind::ParseError { value, expected_type } => (only_key, value, *expected_type),
            ErrorKind::ParseErrorAtIndex { value, expected_type, .. } => (None, value, *expected_type),
            other => return ApiError::new(rejection.status(), "invalid_path", one_line(&other.to_string())),
        };
        let wanted = match expected {
            "u8" | "u16" | "u32" | "u64" | "usize" => "a whole number such as 1".to_string(),
            other => format!("a value of type {other}"),
        };
        let named = key.map_or_else(|| "a path parameter".to_string(), |key| format!("path parameter '{key}'"));
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_path", one_line(&format!("{named}: '{value}' is not {wanted}")))
    }
}

impl From<QueryRejection> for ApiError {
    /// A query string that does not fit the route's parameters: 400
    /// `invalid_query` with serde's reason.
    fn from(rejection: QueryRejection) -> ApiError {
        let text = rejection.body_text();
        let reason = text.strip_prefix("Failed to deserialize query string: ").unwrap_or(&text);
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_query", one_line(&format!("query string: {reason}")))
    }
}

/// `text` on one line (serde's messages may hold line breaks).
pub(crate) fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = self.finished();
        response.extensions_mut().insert(self);
        response
    }
}

impl ApiError {
    /// This error with every mention of `paths` (the store's file and
    /// folder) taken out: a message that starts with a path loses it, any
    /// other mention becomes "the store".
    pub(crate) fn without_paths(mut self, paths: &[String]) -> ApiError {
        self.message = without_paths(&self.message, paths);
        self
    }
}

/// `text` with every mention of `paths` taken out (see
/// [`ApiError::without_paths`]); the longest path is taken out first.
pub(crate) fn without_paths(text: &str, paths: &[String]) -> String {
    let mut paths: Vec<&String> = paths.iter().filter(|path| !path.is_empty()).collect();
    paths.sort_by_key(|path| std::cmp::Reverse(path.len()));
    let mut text = text.to_string();
    for path in paths {
        text = text.replace(&format!("{path}: "), "").replace(path.as_str(), "the store");
    }
    text
}

/// Why the server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The token file could not be read.
    #[error("{}: {cause}", path.display())]
    TokenFile {
        /// The file.
        path: std::path::PathBuf,
        /// The operating system's error.
        cause: std::io::Error,
    },
    /// No token, or one too short.
    #[error("{0}")]
    Token(String),
    /// The listen address is not allowed or not usable.
    #[error("listen address {address}: {reason}")]
    Listen {
        /// The address.
        address: String,
        /// Why it cannot be used.
        reason: String,
    },
    /// The store could not be opened.
    #[error("{0}")]
    Store(String),
    /// The runtime or the server failed.
    #[error("{0}")]
    Runtime(String),
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn store_errors_map_to_statuses_with_their_message() {
        let path = PathBuf::from("s.sqlite");
        let conflict = StoreError::VersionConflict { path: path.clone(), service: "a".into(), expected: 1, found: 2 };
        let error = ApiError::from(conflict);
        assert_eq!((error.status, error.code), (StatusCode::CONFLICT, "version_conflict"));
        assert!(error.message.starts_with("s.sqlite: service 'a' is at version 2, not 1"));
        let missing = ApiError::from(StoreError::NotFound { path: path.clone(), what: "planning job 9".into() });
        assert_eq!(
            (missing.status, missing.message.as_str()),
            (StatusCode::NOT_FOUND, "s.sqlite: no planning job 9 in the store")
        );
        let io = StoreError::Io { path, cause: std::io::Error::from(std::io::ErrorKind::PermissionDenied) };
        assert_eq!(ApiError::from(io).status, StatusCode::SERVICE_UNAVAILABLE);
    }

    #[test]
    fn paths_are_taken_out_of_messages_longest_first() {
        let paths = ["/tmp/x".to_string(), "/tmp/x/store.sqlite".to_string()];
        assert_eq!(
            without_paths("/tmp/x/store.sqlite: service 'a' already exists", &paths),
            "service 'a' already exists"
        );
        assert_eq!(
            without_paths("cannot write /tmp/x/store.sqlite-wal in /tmp/x", &paths),
            "cannot write the store-wal in the store"
        );
        assert_eq!(without_paths("nothing to hide", &[String::new()]), "nothing to hide");
    }

    #[test]
    fn framework_answers_get_this_apis_codes() {
        let empty = ApiError::from_status(StatusCode::NOT_FOUND, "");
        assert_eq!((empty.code, empty.message.as_str()), ("not_found", "not found"));
        let text = ApiError::from_status(StatusCode::BAD_REQUEST, "Invalid\n header");
        assert_eq!((text.code, text.message.as_str()), ("bad_request", "Invalid header"));
        assert_eq!(ApiError::from_status(StatusCode::BAD_GATEWAY, "").code, "internal");
        assert!(ApiError::body_too_large(1024).message.contains("(1024 bytes at most)"));
    }

    #[test]
    fn messages_are_one_line() {
        assert_eq!(one_line("a\n  b\tc"), "a b c");
    }
}
