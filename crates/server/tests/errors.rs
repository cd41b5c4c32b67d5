//! Every error in the documented shape, on every route of the OpenAPI
//! document (the router and the document are made from one list, so the
//! document's paths are the routes): a bad path or query parameter, a method the
//! route does not take, no token, another scheme than Bearer, a malformed
//! or non-object JSON body, another content type — and unknown routes.

use regex::Regex;
use serde_json::Value;
use tessera_server::ClientResponse;

use crate::openapi::{body_example, concrete, header_examples, operations};
use crate::util::{import_example_profiles, start_server, TOKEN};

/// The codes the document lists (in `ErrorDetail.code`'s description).
fn documented_codes(doc: &Value) -> Vec<String> {
    let text = doc["components"]["schemas"]["ErrorDetail"]["properties"]["code"]["description"].as_str().unwrap();
    Regex::new("`([a-z_]+)`").unwrap().captures_iter(text).map(|found| found[1].to_string()).collect()
}

/// What every error answer is checked against.
struct Shape {
    /// The documented codes.
    codes: Vec<String>,
    /// The store's folder, which no body may show.
    private: String,
}

impl Shape {
    /// Asserts `answer` is `{"error": {"code", "message"}}` as JSON with
    /// `status`, a documented code (`code` when given), a one-line message
    /// and no path of the store; returns the message.
    fn check(&self, what: &str, answer: &ClientResponse, status: u16, code: Option<&str>) -> String {
        assert_eq!(answer.status, status, "{what}: {}", answer.text());
        assert_eq!(answer.header("content-type"), Some("application/json"), "{what}: {}", answer.text());
        let body = answer.json();
        let keys = |value: &Value| value.as_object().map(|object| object.keys().cloned().collect::<Vec<_>>());
        assert_eq!(keys(&body), Some(vec!["error".to_string()]), "{what}: {}", answer.text());
        assert_eq!(keys(&body["error"]), Some(vec!["code".to_string(), "message".to_string()]), "{what}");
        let found = body["error"]["code"].as_str().unwrap();
        assert!(self.codes.iter().any(|known| known == found), "{what}: code '{found}' is not documented");
        if let Some(code) = code {
            assert_eq!(found, code, "{what}: {}", answer.text());
        }
        let message = body["error"]["message"].as_str().unwrap();
        assert!(!message.is_empty() && !message.contains('\n'), "{what}: {message:?}");
        assert!(!answer.text().contains(&self.private), "{what} shows the store's path: {}", answer.text());
        message.to_string()
    }
}

/// `path` with parameter `name` set to `value` and the others to their
/// examples.
fn with_parameter(path: &str, operation: &Value, name: &str, value: &str) -> String {
    concrete(&path.replace(&format!("{{{name}}}"), value), operation)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_answers_every_error_in_the_documented_shape() {
    let mut server = start_server(|_| {}).await;
    let mut client = server.client().await;
    let mut anonymous = server.anonymous().await;
    import_example_profiles(&mut client).await;
    let doc = client.get("/openapi.json").await.unwrap().json();
    let shape = Shape { codes: documented_codes(&doc), private: server.dir.path().display().to_string() };
    assert!(shape.codes.len() >= 20, "{:?}", shape.codes);
    let operations = operations(&doc);
    assert!(operations.len() >= 20, "{} operations", operations.len());
    let mut checked = [0usize; 5];
    for (method, path, operation) in &operations {
        let target = concrete(path, operation);
        let headers = header_examples(operation);
        let headers: Vec<(&str, &str)> = headers.iter().map(|(name, value)| (name.as_str(), value.as_str())).collect();
        let body = body_example(&doc, operation);

        // A bad path parameter: a number that is not one is 400; a name
        // that is not there is the route's own 4xx.
        for parameter in operation["parameters"].as_array().into_iter().flatten().filter(|p| p["in"] == "path") {
            let name = parameter["name"].as_str().unwrap();
            let integer = parameter["schema"]["type"] == "integer";
            let bad = with_parameter(path, operation, name, if integer { "abc" } else { "no-such-thing" });
            let answer = client.send(method, &bad, body.as_ref(), &headers).await.unwrap();
            let what = format!("{method} {bad}");
            if integer {
                let message = shape.check(&what, &answer, 400, Some("invalid_path"));
                assert_eq!(message, format!("path parameter '{name}': 'abc' is not a whole number such as 1"));
            } else {
                assert!((400..500).contains(&answer.status), "{what}: {}", answer.text());
                shape.check(&what, &answer, answer.status, None);
            }
            checked[0] += 1;
        }
        // A number in the query string that is not one.
        let query = operation["parameters"].as_array().into_iter().flatten().filter(|p| p["in"] == "query");
        for parameter in query.filter(|p| p["schema"]["type"].to_string().contains("integer")) {
            let name = parameter["name"].as_str().unwrap();
            let bad = format!("{target}?{name}=abc");
            let answer = client.send(method, &bad, None, &headers).await.unwrap();
            let message = shape.check(&format!("{method} {bad}"), &answer, 400, Some("invalid_query"));
            assert!(message.starts_with("query string: ") && message.contains(name), "{message}");
            checked[0] += 1;
        }

        // A method the route does not take.
        let taken: Vec<&str> = doc["paths"][path].as_object().unwrap().keys().map(String::as_str).collect::<Vec<_>>();
        let other = ["delete", "put", "post", "get"].into_iter().find(|m| !taken.contains(m)).unwrap();
        for wrong in ["PATCH", &other.to_uppercase()] {
            let answer = client.send(wrong, &target, None, &[]).await.unwrap();
            let what = format!("{wrong} {target}");
            let message = shape.check(&what, &answer, 405, Some("method_not_allowed"));
            let allow = answer.header("allow").unwrap_or_else(|| panic!("{what}: no Allow header"));
            assert!(allow.to_lowercase().contains(method.to_lowercase().as_str()), "{what}: Allow: {allow}");
            // Never "it takes " with nothing after it.
            let takes = message
                .strip_prefix(&format!("{target} does not take {wrong}; "))
                .unwrap_or_else(|| panic!("{what}: {message}"));
            assert!(
                takes == "its Allow header lists the methods it takes" || takes.len() > "it takes ".len(),
                "{what}: {message}"
            );
            checked[1] += 1;
        }

        // No token, and a token in another scheme.
        let guarded = operation.get("security").is_some();
        let answer = anonymous.send(method, &target, body.as_ref(), &headers).await.unwrap();
        let basic = [("authorization", "Basic dGVzc2VyYTpzZWNyZXQ=")];
        let with_basic = anonymous.send(method, &target, body.as_ref(), &[&headers[..], &basic[..]].concat()).await;
        let with_basic = with_basic.unwrap();
        if guarded {
            let what = format!("{method} {target} without a token");
            shape.check(&what, &answer, 401, Some("unauthorized"));
            assert_eq!(answer.header("www-authenticate"), Some("Bearer"), "{what}");
            let what = format!("{method} {target} with Basic");
            let message = shape.check(&what, &with_basic, 401, Some("unauthorized"));
            assert!(message.contains("'Basic' scheme"), "{what}: {message}");
            checked[2] += 1;
        } else {
            assert_ne!(answer.status, 401, "{method} {target} is open, yet asks for a token");
        }

        // Bodies: malformed, not an object, another content type.
        if operation.get("requestBody").is_some() {
            let cases: [(&str, &[u8], u16, &str, &str); 6] = [
                ("application/json", b"{", 400, "malformed_json", "EOF while parsing"),
                ("application/json", b"[true,\"parva\"]", 422, "invalid_body", "not an array"),
                ("application/json", b"[]", 422, "invalid_body", "not an array"),
                ("application/json", b" \"parva\"", 422, "invalid_body", "not a string"),
                ("application/json", b"[true,", 400, "malformed_json", "EOF while parsing"),
                ("text/plain", b"{}", 415, "unsupported_media_type", "Content-Type: application/json"),
            ];
            for (content_type, bytes, status, code, words) in cases {
                let answer =
                    client.send_bytes(method, &target, Some(content_type), bytes.to_vec(), &headers).await.unwrap();
                let what = format!("{method} {target} with {content_type} {}", String::from_utf8_lossy(bytes));
                let message = shape.check(&what, &answer, status, Some(code));
                assert!(message.contains(words), "{what}: {message}");
                assert!(operation["responses"].get(status.to_string()).is_some(), "{what}: {status} is not documented");
            }
            checked[3] += 1;
        }
        // Every error these cases may give is documented on the route.
        if guarded {
            assert!(operation["responses"].get("401").is_some(), "{method} {path}: 401 is not documented");
        }
        checked[4] += 1;
    }
    // Every kind of case was met: integer and named path parameters, guarded
    // routes and JSON bodies.
    assert!(checked.iter().all(|count| *count > 0), "{checked:?}");

    for (method, path) in [("GET", "/v1/nowhere"), ("DELETE", "/nowhere"), ("POST", "/v1/plans/1/nothing")] {
        let answer = client.send(method, path, None, &[]).await.unwrap();
        shape.check(&format!("{method} {path}"), &answer, 404, Some("not_found"));
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bearer_scheme_is_read_in_any_case() {
    let mut server = start_server(|_| {}).await;
    let mut anonymous = server.anonymous().await;
    for scheme in ["Bearer", "bearer", "BEARER"] {
        let authorization = format!("{scheme} {TOKEN}");
        let body = serde_json::json!({"demo": true});
        let answer =
            anonymous.send("POST", "/v1/plans", Some(&body), &[("authorization", &authorization)]).await.unwrap();
        assert!(answer.status < 300, "{scheme}: {} {}", answer.status, answer.text());
    }
    let wrong = anonymous.send("GET", "/v1/plans", None, &[("authorization", "Bearerx token")]).await.unwrap();
    assert_eq!(wrong.status, 401, "{}", wrong.text());
    server.stop().await;
}
