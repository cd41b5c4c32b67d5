//! The OpenAPI document: every route the server answers is in it (and
//! nothing else is answered), and every example it gives is accepted.

use crate::util::{error_of, example_profiles_csv, start_server_in, store_with_colocations};
use serde_json::{json, Value};

/// Every (method, path) of the document, in document order.
pub(crate) fn operations(doc: &Value) -> Vec<(String, String, Value)> {
    let mut found = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            found.push((method.to_uppercase(), path.clone(), operation.clone()));
        }
    }
    found
}

/// `path` with each `{param}` replaced by its example.
pub(crate) fn concrete(path: &str, operation: &Value) -> String {
    let mut path = path.to_string();
    for parameter in operation["parameters"].as_array().into_iter().flatten() {
        if parameter["in"] == "path" {
            let example = &parameter["example"];
            let text = example.as_str().map_or_else(|| example.to_string(), str::to_string);
            path = path.replace(&format!("{{{}}}", parameter["name"].as_str().unwrap()), &text);
        }
    }
    path
}

/// The example of an operation's JSON body, if it has one.
pub(crate) fn body_example(doc: &Value, operation: &Value) -> Option<Value> {
    let schema = &operation["requestBody"]["content"]["application/json"]["schema"];
    let name = schema["$ref"].as_str()?.rsplit('/').next()?;
    let example = &doc["components"]["schemas"][name]["example"];
    (!example.is_null()).then(|| example.clone())
}

/// The example headers of an operation.
pub(crate) fn header_examples(operation: &Value) -> Vec<(String, String)> {
    operation["parameters"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|parameter| parameter["in"] == "header")
        .map(|parameter| {
            (
                parameter["name"].as_str().unwrap().to_lowercase(),
                parameter["example"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_is_documented_and_every_example_is_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let _ = store_with_colocations(dir.path());
    let mut server = start_server_in(dir, |_| {}).await;
    let mut client = server.client().await;
    let doc = client.get("/openapi.json").await.unwrap().json();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"), "{}", doc["openapi"]);
    let import = json!({"format": "tessera", "files": {"example.csv": example_profiles_csv()}});
    assert_eq!(client.post("/v1/profiles", &import).await.unwrap().status, 201);
    let job = client.post("/v1/plans", &json!({"demo": true})).await.unwrap().json()["id"].as_u64().unwrap();
    crate::util::wait_job(&mut client, job).await;

    let mut operations = operations(&doc);
    // Creations first, then reads, updates, and removals last.
    let order = |method: &str| ["POST", "GET", "PUT", "DELETE"].iter().position(|m| *m == method).unwrap();
    operations.sort_by_key(|(method, path, _)| (order(method), path.clone()));
    let documented: Vec<String> = operations.iter().map(|(method, path, _)| format!("{method} {path}")).collect();
    for expected in [
        "GET /healthz",
        "GET /readyz",
        "GET /metrics",
        "GET /openapi.json",
        "GET /docs",
        "GET /",
        "POST /v1/plans",
        "GET /v1/plans/{id}",
        "POST /v1/verify",
        "POST /v1/simulate",
        "POST /v1/colocation/recommend",
        "PUT /v1/services/{name}",
        "DELETE /v1/profiles/{gpu_model}/{model}",
    ] {
        assert!(documented.contains(&expected.to_string()), "{expected} is not documented: {documented:?}");
    }
    for (method, path, operation) in &operations {
        let target = concrete(path, operation);
        let headers = header_examples(operation);
        let headers: Vec<(&str, &str)> = headers.iter().map(|(name, value)| (name.as_str(), value.as_str())).collect();
        let body = body_example(&doc, operation);
        if operation.get("requestBody").is_some() {
            assert!(body.is_some(), "{method} {path} has a body without an example");
        }
        let answer = client.send(method, &target, body.as_ref(), &headers).await.unwrap();
        let (code, message) = error_of(&answer);
        // The route exists, and its example is understood.
        assert_ne!(code, "not_found", "{method} {target}: {message}");
        assert!(
            ![400, 401, 405, 413, 415, 422].contains(&answer.status),
            "{method} {target} refused its documented example: {} {message}",
            answer.status
        );
        assert!(
            operation["responses"].get(answer.status.to_string()).is_some() || answer.status == 409,
            "{method} {target} answered {}, which its document does not list",
            answer.status
        );
    }
    // Routes the document does not list are not answered.
    for (method, path) in [("GET", "/v1/jobs"), ("POST", "/v1/healthz"), ("PATCH", "/v1/services/search")] {
        let answer = client.send(method, path, None, &[]).await.unwrap();
        assert!([404, 405].contains(&answer.status), "{method} {path} answered {}", answer.status);
    }
    server.stop().await;
}
