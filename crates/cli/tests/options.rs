//! The planning options are one type (`tessera_plan::PlanOptions`): the
//! service's plan-job body, `tessera plan` and the autopilot's commands
//! take the same set, named alike.

use std::collections::BTreeSet;

use serde_json::Value;
use tempfile::TempDir;

use crate::util::{ask, serve, stdout, store_in, tessera, SERVE_TOKEN};

/// The OpenAPI document of a `tessera serve` started for the test.
fn openapi_document(dir: &TempDir) -> Value {
    let (mut server, address, lines) = serve(dir, &store_in(dir));
    std::thread::spawn(move || lines.for_each(drop));
    let answer = ask(
        &address,
        &format!(
            "GET /openapi.json HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {SERVE_TOKEN}\r\nconnection: close\r\n\r\n"
        ),
    );
    server.kill().unwrap();
    server.wait().unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    serde_json::from_str(body).unwrap()
}

/// The properties of schema `name`, through `$ref`s and `allOf` (the
/// flattened parts).
fn properties(doc: &Value, schema: &Value, found: &mut BTreeSet<String>) {
    if let Some(reference) = schema["$ref"].as_str() {
        let name = reference.rsplit('/').next().unwrap();
        return properties(doc, &doc["components"]["schemas"][name], found);
    }
    if let Some(fields) = schema["properties"].as_object() {
        found.extend(fields.keys().cloned());
    }
    for part in schema["allOf"].as_array().into_iter().flatten() {
        properties(doc, part, found);
    }
}

/// The schema `name`'s properties.
fn schema_properties(doc: &Value, name: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    properties(doc, &doc["components"]["schemas"][name], &mut found);
    assert!(!found.is_empty(), "schema {name} has properties");
    found
}

/// The long flags a command's `--help` lists.
fn flags(args: &[&str], dir: &TempDir) -> BTreeSet<String> {
    let mut with_help = args.to_vec();
    with_help.push("--help");
    let help = stdout(&tessera(&with_help, &store_in(dir)));
    help.split(|c: char| c.is_whitespace() || c == ',' || c == '=')
        .filter_map(|word| word.strip_prefix("--"))
        .filter(|flag| !flag.is_empty() && flag.chars().all(|c| c.is_ascii_lowercase() || c == '-'))
        .map(str::to_string)
        .collect()
}

/// The flag of JSON field `field`: the field's name with dashes, except
/// the fleet's (`--gpu`, repeated) and the time limit's (`--time-limit`).
fn flag_of(field: &str) -> String {
    match field {
        "gpus" => "gpu".to_string(),
        "time_limit_s" => "time-limit".to_string(),
        other => other.replace('_', "-"),
    }
}

#[test]
fn the_plan_command_the_service_and_the_autopilot_take_the_same_planning_options() {
    let dir = TempDir::new().unwrap();
    let doc = openapi_document(&dir);
    let options = schema_properties(&doc, "PlanOptions");
    let replan = schema_properties(&doc, "ReplanOptions");
    for expected in ["gpus", "strategy", "latency_rule", "arrivals", "time_limit_s", "max_gpus", "spread"] {
        assert!(options.contains(expected), "PlanOptions lacks {expected}: {options:?}");
    }
    let job = schema_properties(&doc, "PlanJobRequest");
    for field in options.iter().chain(&replan) {
        assert!(job.contains(field), "the plan-job body lacks {field}: {job:?}");
    }
    let plan = flags(&["plan"], &dir);
    let simulate = flags(&["autopilot", "simulate"], &dir);
    let run = flags(&["autopilot", "run"], &dir);
    for field in &options {
        let flag = flag_of(field);
        for (command, flags) in [("plan", &plan), ("autopilot simulate", &simulate), ("autopilot run", &run)] {
            assert!(flags.contains(&flag), "tessera {command} lacks --{flag} (option {field}): {flags:?}");
        }
    }
    for field in &replan {
        assert!(plan.contains(&flag_of(field)), "tessera plan lacks --{}", flag_of(field));
    }
}

#[test]
fn replan_options_need_a_running_plan() {
    let dir = TempDir::new().unwrap();
    let output = tessera(&["plan", "--demo", "--drain", "0:1"], &store_in(&dir));
    assert_eq!(output.status.code(), Some(2));
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(error.contains("--from"), "{error}");
}

#[test]
fn a_replan_may_spread() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let current = dir.path().join("current.json");
    let planned = tessera(&["plan", "--demo", "--format", "json", "-o", current.to_str().unwrap()], &store);
    assert!(planned.status.success(), "{}", String::from_utf8_lossy(&planned.stderr));
    let spread =
        tessera(&["plan", "--demo", "--from", current.to_str().unwrap(), "--spread", "--format", "json"], &store);
    assert!(spread.status.success(), "{}", String::from_utf8_lossy(&spread.stderr));
    let plan: Value = serde_json::from_str(&stdout(&spread)).unwrap();
    let notes: Vec<&str> = plan["notes"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(notes.iter().any(|note| note.starts_with("spread:")), "{notes:?}");
}
