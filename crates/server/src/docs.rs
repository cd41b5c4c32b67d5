//! The OpenAPI 3.1 document (built by `utoipa` from the handlers'
//! annotations, the same list the router is built from) at `/openapi.json`,
//! and an interactive page at `/docs` that reads it: every operation with
//! its parameters and example body, sent from the page with the token.

use axum::extract::State;
use axum::http::header;
use axum::response::{Html, IntoResponse};
use std::collections::BTreeMap;

use utoipa::openapi::path::{Operation, Parameter, ParameterIn};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder};
use utoipa::Modify;

use crate::api::tags;
use crate::state::AppState;

/// The document's fixed parts; the paths come from the router.
#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "Tessera",
        description = "Plans DL inference services onto NVIDIA GPUs (MIG + MPS): profiles, services, planning jobs, \
                       plans, verification, colocation and simulation. Mutating routes need `Authorization: Bearer \
                       TOKEN`; reading routes too unless the server runs with --public-reads. Every error — the \
                       framework's too: an unknown route 404, a method a route does not take 405, a request past \
                       the time limit 503 `timeout` — is `{\"error\": {\"code\", \"message\"}}` as \
                       `application/json`. JSON bodies are objects."
    ),
    modifiers(&BearerAuth),
    tags(
        (name = "operations", description = "Health, readiness, metrics"),
        (name = "profiles", description = "Profiles of models in MIG instances"),
        (name = "services", description = "Tenants' services and their SLOs, versioned"),
        (name = "plans", description = "Planning jobs, stored plans, verification"),
        (name = "analysis", description = "Colocation and oversubscription simulation"),
        (name = "pages", description = "HTML pages and this document")
    )
)]
pub(crate) struct ApiDoc;

/// Adds the bearer-token security scheme.
struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new().scheme(HttpAuthScheme::Bearer).description(Some("the server's token")).build(),
            ),
        );
    }
}

/// Documents, on every operation of `api`, the error answers the shared
/// layers and extractors give it (see `boundary` and `api::extract`) where
/// the handler's own list does not already name the status: 401 on routes
/// behind the token, 400 where an integer path parameter or a query string
/// may not parse, and 400, 413, 415 and 422 where a JSON body is taken.
pub(crate) fn document_errors(api: &mut utoipa::openapi::OpenApi) {
    for item in api.paths.paths.values_mut() {
        let operations = [&mut item.get, &mut item.put, &mut item.post, &mut item.delete, &mut item.patch];
        for operation in operations.into_iter().flatten() {
            for (status, reasons) in shared_errors(operation) {
                let reasons = reasons.join("; ");
                operation.responses.responses.entry(status.to_string()).or_insert_with(|| {
                    let content = ContentBuilder::new().schema(Some(Ref::from_schema_name("ErrorBody"))).build();
                    RefOr::T(ResponseBuilder::new().description(reasons).content("application/json", content).build())
                });
            }
        }
    }
}

/// The statuses the shared layers and extractors may answer `operation`
/// with, and why (with the codes).
fn shared_errors(operation: &Operation) -> BTreeMap<u16, Vec<&'static str>> {
    let mut errors: BTreeMap<u16, Vec<&'static str>> = BTreeMap::new();
    if operation.security.as_ref().is_some_and(|security| !security.is_empty()) {
        errors.entry(401).or_default().push("no token, a wrong one, or another scheme than Bearer (`unauthorized`)");
    }
    let parameters = operation.parameters.iter().flatten();
    let integer = |parameter: &&Parameter| {
        serde_json::to_value(&parameter.schema).is_ok_and(|schema| schema["type"] == "integer")
    };
    if parameters.clone().filter(|p| p.parameter_in == ParameterIn::Path).any(|p| integer(&p)) {
        errors.entry(400).or_default().push("a path parameter is not a number (`invalid_path`)");
    }
    if parameters.clone().any(|p| p.parameter_in == ParameterIn::Query) {
        errors.entry(400).or_default().push("the query string does not parse (`invalid_query`)");
    }
    if operation.request_body.is_some() {
        errors.entry(400).or_default().push("the body is not JSON (`malformed_json`)");
        errors.entry(413).or_default().push("the body is over the server's limit, stated in bytes (`body_too_large`)");
        errors.entry(415).or_default().push("the body is not sent as `application/json` (`unsupported_media_type`)");
        errors.entry(422).or_default().push(
            "the body is not a JSON object, or a field is unknown, missing or of the wrong type (`invalid_body`)",
        );
    }
    errors
}

/// This document.
#[utoipa::path(get, path = "/openapi.json", tag = tags::PAGES, security(("bearer" = [])),
    responses((status = 200, description = "the OpenAPI 3.1 document", content_type = "application/json")))]
pub(crate) async fn openapi_json(State(state): State<AppState>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], state.openapi_json())
}

/// An interactive page over this document: each operation, its example,
/// and a form that sends it.
#[utoipa::path(get, path = "/docs", tag = tags::PAGES, security(("bearer" = [])),
    responses((status = 200, description = "HTML page", content_type = "text/html")))]
pub(crate) async fn docs_page() -> Html<&'static str> {
    Html(DOCS_PAGE)
}

/// The docs page: plain HTML and a small script, nothing fetched but the
/// document and the requests a reader sends.
const DOCS_PAGE: &str = r##"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Tessera API</title>
<style>
body{font-family:system-ui,sans-serif;margin:0;color:#1a1a1a}header{background:#1f2937;color:#f9fafb;padding:10px 20px}
header a{color:#cbd5e1}main{padding:12px 20px;max-width:1100px}details{border:1px solid #e5e7eb;border-radius:6px;margin:6px 0}
summary{padding:6px 10px;cursor:pointer}.method{display:inline-block;width:64px;font-weight:700}
.get{color:#1d4ed8}.post{color:#15803d}.put{color:#b45309}.delete{color:#b91c1c}
.op{padding:6px 14px 12px}textarea{width:100%;height:140px;font-family:monospace;font-size:12px}
pre{background:#f3f4f6;padding:8px;overflow:auto;max-height:300px;font-size:12px}label{margin-right:12px}
</style></head><body><header><b>Tessera API</b> · <a href="/openapi.json">openapi.json</a> · <a href="/">plans</a></header>
<main><p>Token (kept in this tab only): <input id="token" type="password" size="40"></p><div id="ops">loading…</div></main>
<script>
const esc = s => String(s).replace(/[&<>"']/g, c => ({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;',"'":'&#39;'}[c]));
document.getElementById('token').value = sessionStorage.getItem('tessera-token') || '';
document.getElementById('token').addEventListener('change', e => sessionStorage.setItem('tessera-token', e.target.value));
fetch('/openapi.json').then(r => r.json()).then(doc => {
  const ops = document.getElementById('ops'); ops.innerHTML = '';
  for (const [path, item] of Object.entries(doc.paths)) for (const [method, op] of Object.entries(item)) {
    const params = (op.parameters || []);
    const schema = op.requestBody && op.requestBody.content['application/json'] && op.requestBody.content['application/json'].schema;
    let example = '';
    if (schema && schema.$ref) { const s = doc.components.schemas[schema.$ref.split('/').pop()]; if (s && s.example !== undefined) example = JSON.stringify(s.example, null, 2); }
    const d = document.createElement('details');
    d.innerHTML = `<summary><span class="method ${method}">${method.toUpperCase()}</span> <code>${esc(path)}</code> — ${esc(op.summary || '')}</summary>
      <div class="op"><p>${esc(op.description || '')}</p>` +
      params.map(p => `<label>${esc(p.name)} (${esc(p.in)}) <input data-in="${esc(p.in)}" data-name="${esc(p.name)}" value="${esc(p.example ?? '')}"></label>`).join('') +
      (schema ? `<p>Body:</p><textarea>${esc(example)}</textarea>` : '') +
      `<p><button>Send</button></p><pre class="answer"></pre></div>`;
    d.querySelector('button').addEventListener('click', async () => {
      let url = path; const headers = {};
      d.querySelectorAll('input').forEach(i => { if (i.dataset.in === 'path') url = url.replace('{' + i.dataset.name + '}', encodeURIComponent(i.value));
        else if (i.dataset.in === 'header' && i.value) headers[i.dataset.name] = i.value;
        else if (i.dataset.in === 'query' && i.value) url += (url.includes('?') ? '&' : '?') + encodeURIComponent(i.dataset.name) + '=' + encodeURIComponent(i.value); });
      const token = document.getElementById('token').value; if (token) headers['Authorization'] = 'Bearer ' + token;
      const init = { method: method.toUpperCase(), headers };
      const area = d.querySelector('textarea'); if (area) { headers['Content-Type'] = 'application/json'; init.body = area.value; }
      const answer = d.querySelector('.answer'); answer.textContent = '…';
      try { const r = await fetch(url, init); const text = await r.text(); answer.textContent = r.status + ' ' + r.statusText + '\n' + text; }
      catch (e) { answer.textContent = String(e); }
    });
    ops.appendChild(d);
  }
});
</script></body></html>
"##;
