//! Random input never crashes the program: whatever bytes a file holds and
//! whatever a plan or trace is edited into, `tessera` answers with status
//! 0 (accepted), 1 (a one-line error) or 2 (a usage error) — never a panic
//! (status 101), never a signal, never a multi-line error.

use std::path::Path;
use std::process::Output;

use proptest::prelude::*;
use serde_json::Value;
use tempfile::TempDir;

use crate::util::stderr;

/// Cases per property: each runs the binary, so they are few but varied.
const CASES: u32 = 40;

/// How long one run may take: a debug build answers each of these inputs
/// in about a second.
const ANSWER_LIMIT: std::time::Duration = std::time::Duration::from_secs(120);

/// Runs the binary as `util::tessera` does, killed once it has run for
/// [`ANSWER_LIMIT`] (a failed case).
fn tessera(args: &[&str], store: &Path) -> Result<Output, TestCaseError> {
    let dir = TempDir::new().unwrap();
    let (out_path, err_path) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(args)
        .env_remove("COLUMNS")
        .env("TESSERA_STORE", store)
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .expect("the tessera binary runs");
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > ANSWER_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            return Err(TestCaseError::fail(format!("{args:?}: no answer in {} s", ANSWER_LIMIT.as_secs())));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    Ok(Output { status, stdout: std::fs::read(&out_path).unwrap(), stderr: std::fs::read(&err_path).unwrap() })
}

/// Checks the contract above for one run.
fn check(output: &Output, what: &str) -> Result<(), TestCaseError> {
    let message = stderr(output);
    let status = output.status.code();
    prop_assert!(matches!(status, Some(0..=2)), "{what}: status {status:?}: {message}");
    prop_assert!(!message.contains("panicked"), "{what}: {message}");
    if status == Some(1) {
        prop_assert_eq!(message.trim_end().lines().count(), 1, "{}: one-line error expected: {}", what, message);
    }
    Ok(())
}

/// CSV-like bytes: mostly the characters CSV files are made of, sometimes
/// anything.
fn csv_bytes() -> impl Strategy<Value = Vec<u8>> {
    let csv_char = prop_oneof![
        8 => prop::sample::select(b"abc,,,\n\r\"0123456789.-e +_/x".to_vec()),
        1 => any::<u8>(),
    ];
    prop::collection::vec(csv_char, 0..400)
}

/// A header that the readers recognise, so random rows reach the parsers.
fn with_header(header: &str, body: &[u8]) -> Vec<u8> {
    let mut bytes = header.as_bytes().to_vec();
    bytes.extend_from_slice(body);
    bytes
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> String {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path.display().to_string()
}

/// A JSON value that replaces a leaf: numbers of every size and sign,
/// strings, nulls, booleans, empty containers.
fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_filter("JSON numbers are finite", |x| x.is_finite()).prop_map(Value::from),
        prop::sample::select(vec![0.0, -1.0, 1e300, 1e-300, 0.5, 8.0, 4294967296.0]).prop_map(Value::from),
        "[a-z0-9.@-]{0,12}".prop_map(Value::from),
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        Just(Value::Array(Vec::new())),
        Just(Value::Object(Default::default())),
    ]
}

/// Every path to a leaf or container in `value`.
fn paths(value: &Value, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    out.push(prefix.clone());
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                prefix.push(key.clone());
                paths(child, prefix, out);
                prefix.pop();
            }
        }
        Value::Array(items) => {
            for (index, child) in items.iter().enumerate() {
                prefix.push(index.to_string());
                paths(child, prefix, out);
                prefix.pop();
            }
        }
        _ => {}
    }
}

fn at<'a>(value: &'a mut Value, path: &[String]) -> Option<&'a mut Value> {
    path.iter().try_fold(value, |node, key| match node {
        Value::Object(map) => map.get_mut(key),
        Value::Array(items) => key.parse::<usize>().ok().and_then(|i| items.get_mut(i)),
        _ => None,
    })
}

/// `document` with `edits` applied: each replaces the node at a path
/// (chosen by index into every path) with a leaf, or removes it.
fn edited(document: &Value, edits: &[(usize, Option<Value>)]) -> Value {
    let mut value = document.clone();
    for (choice, replacement) in edits {
        let mut all = Vec::new();
        paths(&value, &mut Vec::new(), &mut all);
        let path = &all[choice % all.len()];
        match (replacement, path.split_last()) {
            (Some(leaf), _) => {
                if let Some(node) = at(&mut value, path) {
                    *node = leaf.clone();
                }
            }
            (None, Some((last, parent))) => match at(&mut value, parent) {
                Some(Value::Object(map)) => {
                    map.remove(last);
                }
                Some(Value::Array(items)) => {
                    if let Ok(i) = last.parse::<usize>() {
                        if i < items.len() {
                            items.remove(i);
                        }
                    }
                }
                _ => {}
            },
            (None, None) => {}
        }
    }
    value
}

fn edits() -> impl Strategy<Value = Vec<(usize, Option<Value>)>> {
    prop::collection::vec((any::<usize>(), prop::option::weighted(0.8, json_leaf())), 1..4)
}

/// The demo plan as JSON, made once per test.
fn demo_plan(dir: &Path) -> Value {
    let output = tessera(&["plan", "--demo", "--format", "json"], &dir.join("store.sqlite")).unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    serde_json::from_slice(&output.stdout).unwrap()
}

/// A small generated trace, made once per test.
fn small_trace(dir: &Path) -> Value {
    let output =
        tessera(&["simulate", "generate", "--clients", "3", "--operations", "2"], &dir.join("store.sqlite")).unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    serde_json::from_slice(&output.stdout).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: CASES, ..ProptestConfig::default() })]

    #[test]
    fn random_slo_files_never_crash_plan(body in csv_bytes(), headed in any::<bool>()) {
        let dir = TempDir::new().unwrap();
        let bytes = if headed { with_header("service,model,rate_rps,latency_ms\n", &body) } else { body };
        let slo = write(dir.path(), "slo.csv", &bytes);
        let output = tessera(&["plan", "--demo", "--slo", &slo, "--time-limit", "1"], &dir.path().join("s.sqlite"))?;
        check(&output, "plan --slo")?;
    }

    #[test]
    fn random_profile_files_never_crash_plan(body in csv_bytes(), headed in any::<bool>()) {
        let dir = TempDir::new().unwrap();
        let header = "gpu_model,model,size_gpcs,batch,procs,throughput_rps,latency_ms,memory_gb\n";
        let bytes = if headed { with_header(header, &body) } else { body };
        let profiles = write(dir.path(), "profiles.csv", &bytes);
        let slo = write(dir.path(), "slo.csv", b"service,model,rate_rps,latency_ms\ns,a,10,100\n");
        let args = ["plan", "--profiles", &profiles, "--slo", &slo, "--time-limit", "1"];
        check(&tessera(&args, &dir.path().join("s.sqlite"))?, "plan --profiles")?;
        let args = ["profiles", "import", &profiles, "--format", "native"];
        check(&tessera(&args, &dir.path().join("s.sqlite"))?, "profiles import")?;
    }

    #[test]
    fn edited_plans_never_crash_verify(edits in edits()) {
        let dir = TempDir::new().unwrap();
        let plan = edited(&demo_plan(dir.path()), &edits);
        let path = write(dir.path(), "plan.json", &serde_json::to_vec(&plan).unwrap());
        check(&tessera(&["verify", &path, "--demo"], &dir.path().join("s.sqlite"))?, "verify")?;
    }

    #[test]
    fn edited_traces_never_crash_simulate(edits in edits(), scheduler in prop::sample::select(vec!["fifo", "greedy", "ga"])) {
        let dir = TempDir::new().unwrap();
        let trace = edited(&small_trace(dir.path()), &edits);
        let path = write(dir.path(), "trace.json", &serde_json::to_vec(&trace).unwrap());
        let args = ["simulate", "--trace", &path, "--scheduler", scheduler, "--generations", "5"];
        check(&tessera(&args, &dir.path().join("s.sqlite"))?, "simulate")?;
    }

    #[test]
    fn random_numbers_on_the_command_line_never_crash(
        value in prop_oneof![
            any::<f64>().prop_map(|x| x.to_string()),
            Just("1e20".to_string()), Just("-0".to_string()), Just("NaN".to_string()), Just("inf".to_string()),
            "[0-9e.+-]{1,8}",
        ],
        option in prop::sample::select(vec!["--time-limit", "--max-procs", "--gpus-per-node"]),
    ) {
        let dir = TempDir::new().unwrap();
        let output = tessera(&["plan", "--demo", option, &value], &dir.path().join("s.sqlite"))?;
        check(&output, &format!("plan --demo {option} {value}"))?;
    }
}
