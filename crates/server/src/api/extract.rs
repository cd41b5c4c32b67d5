//! The extractors every handler takes its inputs through — [`ApiJson`],
//! [`ApiPath`] and [`ApiQuery`] — wrapping axum's so that each refusal (a
//! bad path parameter or query string, a body of another content type, too
//! large, malformed, not an object, of the wrong shape) is an [`ApiError`]
//! in the documented shape.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, RawPathParams, Request};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap};
use serde::de::{DeserializeOwned, IgnoredAny};

use crate::error::ApiError;
use crate::state::AppState;

/// A JSON request body: an object (serde would read an array as a
/// struct's fields in order; this API takes objects only), sent as
/// `application/json` (or `…+json`), at most the server's body limit.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ApiJson<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppState> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        if !is_json(request.headers()) {
            return Err(ApiError::new(
                axum::http::StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "the body must be JSON: send `Content-Type: application/json`",
            ));
        }
        let limit_bytes = state.inner.config.max_body_bytes;
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(|rejection| ApiError::from_bytes_rejection(&rejection, limit_bytes))?;
        let first = bytes.iter().find(|byte| !byte.is_ascii_whitespace());
        if first != Some(&b'{') {
            // Malformed JSON is answered as such; well-formed JSON that is not
            // an object is refused by its kind.
            let axum::Json(IgnoredAny) = axum::Json::<IgnoredAny>::from_bytes(&bytes)?;
            let kind = match first {
                Some(b'[') => "an array",
                Some(b'"') => "a string",
                Some(b't' | b'f') => "a boolean",
                Some(b'n') => "null",
                _ => "a number",
            };
            return Err(ApiError::new(
                axum::http::StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_body",
                format!("the body must be a JSON object ({{\"field\": value, …}}), not {kind}"),
            ));
        }
        let axum::Json(value) = axum::Json::<T>::from_bytes(&bytes)?;
        Ok(ApiJson(value))
    }
}

/// `content-type` is JSON: `application/json` or `application/…+json`,
/// parameters (`; charset=utf-8`) aside — as axum's own `Json` decides.
fn is_json(headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(header::CONTENT_TYPE).and_then(|value| value.to_str().ok()) else {
        return false;
    };
    let essence = value.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    let Some(subtype) = essence.strip_prefix("application/") else { return false };
    subtype == "json" || subtype.ends_with("+json")
}

/// The path's parameters; one that does not parse is 400 `invalid_path`
/// naming the parameter and its value.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ApiPath<T>(pub T);

impl<T, S> FromRequestParts<S> for ApiPath<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(value)) => Ok(ApiPath(value)),
            Err(rejection) => {
                let raw = RawPathParams::from_request_parts(parts, state).await.ok();
                let keys: Vec<&str> = raw.iter().flat_map(|raw| raw.iter().map(|(key, _)| key)).collect();
                let only_key = if keys.len() == 1 { keys.first().copied() } else { None };
                Err(ApiError::from_path_rejection(&rejection, only_key))
            }
        }
    }
}

/// The query string's parameters; one that does not parse is 400
/// `invalid_query`.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ApiQuery<T>(pub T);

impl<T, S> FromRequestParts<S> for ApiQuery<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let axum::extract::Query(value) = axum::extract::Query::<T>::from_request_parts(parts, state).await?;
        Ok(ApiQuery(value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_content_types_are_recognised_as_axum_does() {
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::CONTENT_TYPE, value.parse().unwrap());
            is_json(&headers)
        };
        assert!(with("application/json"));
        assert!(with("Application/JSON; charset=utf-8"));
        assert!(with("application/merge-patch+json"));
        assert!(!with("text/plain"));
        assert!(!with("application/jsonx"));
        assert!(!is_json(&HeaderMap::new()));
    }
}
