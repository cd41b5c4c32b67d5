//! `tessera workload add | list` end to end.

use std::path::Path;
use std::process::Output;

use crate::util::tessera;

fn add(store: &Path, name: &str, batch: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "workload",
        "add",
        name,
        "--family",
        "bert-base-cased",
        "--task",
        "inference",
        "--batch",
        batch,
        "--command",
        "python serve.py --batch {batch}",
    ];
    args.extend_from_slice(extra);
    tessera(&args, store)
}

#[test]
fn add_then_list_as_table_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store.sqlite");
    let listed = tessera(&["workload", "list"], &store);
    assert!(listed.status.success());
    assert!(String::from_utf8_lossy(&listed.stdout).contains("no registered workloads"));

    let output = add(&store, "bert-base-cased_batch8-inf", "8", &["--throughput-regex", r"rate: ([0-9.]+)/s"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(String::from_utf8_lossy(&output.stdout).contains("python serve.py --batch 8"));
    let output = add(&store, "a-bert_batch2-inf", "2", &[]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));

    let table = tessera(&["workload", "list", "--wide"], &store);
    assert!(table.status.success());
    let text = String::from_utf8_lossy(&table.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[1].starts_with("a-bert_batch2-inf") && lines[1].contains("tessera:throughput="), "{text}");
    assert!(lines[2].contains("python serve.py --batch 8") && lines[2].contains("rate: ([0-9.]+)/s"), "{text}");

    let json = tessera(&["workload", "list", "--format", "json"], &store);
    assert!(json.status.success());
    let rows: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["name"], "a-bert_batch2-inf");
    assert_eq!(rows[0]["throughput_regex"], serde_json::Value::Null);
    assert_eq!(rows[1]["family"], "bert-base-cased");
    assert_eq!(rows[1]["task"], "inference");
    assert_eq!(rows[1]["batch"], 8);
    assert_eq!(rows[1]["command"], "python serve.py --batch {batch}");
    assert_eq!(rows[1]["command_line"], "python serve.py --batch 8");

    // Adding again replaces, and says what it replaced.
    let output = add(&store, "a-bert_batch2-inf", "4", &[]);
    assert!(output.status.success());
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(
        said.starts_with(
            "replaced workload a-bert_batch2-inf (python serve.py --batch 4; was python serve.py --batch 2)"
        ),
        "{said}"
    );
    let json = tessera(&["workload", "list", "--format", "json"], &store);
    let rows: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!((rows.as_array().unwrap().len(), &rows[0]["batch"]), (2, &serde_json::json!(4)));
}

#[test]
fn a_bad_regex_is_a_one_line_error_and_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store.sqlite");
    for (regex, expected) in [("([0-9.]+", "does not compile"), ("[0-9.]+", "has 0 capture groups")] {
        let output = add(&store, "w", "8", &["--throughput-regex", regex]);
        assert!(!output.status.success());
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
        assert!(stderr.contains("throughput_regex") && stderr.contains(expected), "{stderr}");
    }
    let json = tessera(&["workload", "list", "--format", "json"], &store);
    let rows: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert!(rows.as_array().unwrap().is_empty());
}

#[test]
fn a_deploy_dry_run_journals_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store.sqlite");
    let plan = dir.path().join("plan.json");
    let plan = plan.to_str().unwrap();
    let output = tessera(&["plan", "--demo", "--format", "json", "-o", plan], &store);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    // An empty PATH: no nvidia-smi, so the dry run assumes empty GPUs.
    let output =
        crate::util::run_with_env(&["deploy", plan, "--node", "0"], &[("PATH", dir.path()), ("TESSERA_STORE", &store)]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(!store.exists() || tessera_store::Store::open(&store).unwrap().journal_entries().unwrap().is_empty());
}

#[test]
fn removing_a_measured_workload_says_it_is_not_a_registered_one() {
    let dir = tempfile::TempDir::new().unwrap();
    let store = crate::util::store_in(&dir);
    let Some(pairs) = tessera_testkit::shared_data("kace/pairs_mps100.csv") else { return };
    let Some(system) = tessera_testkit::shared_data("kace/system_metrics.csv") else { return };
    let Some(kernels) = tessera_testkit::shared_data("kace/kernel_metrics") else { return };
    let (pairs, system, kernels) = (pairs.to_str().unwrap(), system.to_str().unwrap(), kernels.to_str().unwrap());
    let output = crate::util::tessera(
        &["colocate", "import", pairs, "--system-metrics", system, "--kernel-metrics", kernels],
        &store,
    );
    assert!(output.status.success(), "{}", crate::util::stderr(&output));
    assert!(crate::util::stdout(&output).contains("imported the system metrics of 29 measured workloads"));
    crate::util::fails_with(
        &["workload", "remove", "bert-base-cased_batch8-inf"],
        &store,
        &["no registered workload 'bert-base-cased_batch8-inf' (known: none)", "it is a measured workload"],
    );
}

#[test]
fn a_command_without_a_batch_placeholder_is_registered_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store.sqlite");
    let args = ["workload", "add", "fixed", "--family", "f", "--task", "inference", "--batch", "8"];
    let output = tessera(&[&args[..], &["--command", "python serve_b8.py"]].concat(), &store);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let note = String::from_utf8_lossy(&output.stderr);
    assert!(note.starts_with("note: --command has no {batch}: it runs as given at every batch size"), "{note}");
    let output = tessera(&[&args[..], &["--command", "python serve.py {batch}"]].concat(), &store);
    assert!(output.stderr.is_empty(), "{}", String::from_utf8_lossy(&output.stderr));
}
