//! `tessera plan --from` and `tessera diff` end to end.

use std::path::Path;

use serde_json::Value;
use tempfile::TempDir;

use crate::util::{stdout, store_in, tessera};

/// Runs and expects success; returns standard output.
fn ok(args: &[&str], store: &Path) -> String {
    let output = tessera(args, store);
    assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
    stdout(&output)
}

/// The demo's services with `factors` applied to their rates, as a CSV.
fn demo_slos(dir: &Path, name: &str, factors: [f64; 6]) -> String {
    let mut csv = "service,model,rate_rps,latency_ms\n".to_string();
    for (slo, factor) in tessera_core::synthetic::demo_services().iter().zip(factors) {
        csv.push_str(&format!("{},{},{},{}\n", slo.service, slo.model, slo.rate_rps * factor, slo.latency_slo_ms));
    }
    let path = dir.join(name);
    std::fs::write(&path, csv).unwrap();
    path.display().to_string()
}

/// A folder with a store and the demo's plan written as `old.json`; the
/// paths of `old.json` and `new.json` in it.
struct Setup {
    dir: TempDir,
    store: std::path::PathBuf,
    old: String,
    new: String,
}

fn setup() -> Setup {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let old = dir.path().join("old.json").display().to_string();
    let new = dir.path().join("new.json").display().to_string();
    ok(&["plan", "--demo", "--format", "json", "-o", &old], &store);
    Setup { dir, store, old, new }
}

fn diff_json(old: &str, new: &str, store: &Path) -> Value {
    serde_json::from_str(&ok(&["diff", old, new, "--format", "json"], store)).unwrap()
}

#[test]
fn replanning_unchanged_slos_changes_nothing_and_prints_the_fresh_optimum_beside() {
    let Setup { dir: _dir, store, old, new } = setup();
    let table = ok(&["plan", "--demo", "--from", &old], &store);
    assert!(table.contains("from the current plan: MIG layouts kept"), "{table}");
    let replan_row = table.lines().find(|l| l.starts_with("replan ")).expect("a replan row");
    assert!(replan_row.contains(" 6/6 "), "{replan_row}");
    assert!(table.lines().any(|l| l.starts_with("fresh optimum ")), "{table}");
    assert!(table.lines().all(|l| l.chars().count() <= 80), "{table}");
    ok(&["plan", "--demo", "--from", &old, "--format", "json", "-o", &new], &store);
    let diff = diff_json(&old, &new, &store);
    let totals = &diff["totals"];
    assert_eq!(totals["gpus_unchanged"], 6, "{diff}");
    for field in [
        "gpus_services_changed",
        "gpus_layout_changed",
        "gpus_added",
        "gpus_removed",
        "instances_created",
        "instances_destroyed",
        "processes_restarted",
    ] {
        assert_eq!(totals[field], 0, "{field}: {diff}");
    }
    assert_eq!(diff["gpus"].as_array().unwrap().len(), 0, "only changed GPUs are listed");
}

#[test]
fn a_replan_of_new_rates_verifies_and_its_diff_adds_up() {
    let Setup { dir, store, old, new } = setup();
    let slos = demo_slos(dir.path(), "new.csv", [1.15, 0.85, 1.2, 0.9, 1.1, 0.8]);
    let output = tessera(
        &["plan", "--demo", "--slo", &slos, "--from", &old, "--max-extra-gpus", "1", "--format", "json", "-o", &new],
        &store,
    );
    assert!(output.status.success());
    let note = String::from_utf8_lossy(&output.stderr);
    assert!(note.starts_with("note: replan: ") && note.contains("fresh optimum"), "{note}");
    ok(&["verify", &new, "--demo", "--slo", &slos], &store);
    let diff = diff_json(&old, &new, &store);
    let totals = &diff["totals"];
    let count = |field: &str| totals[field].as_u64().unwrap();
    let old_gpus =
        count("gpus_unchanged") + count("gpus_services_changed") + count("gpus_layout_changed") + count("gpus_removed");
    assert_eq!(old_gpus, 6, "{diff}");
    assert_eq!(diff["layouts_kept"].as_u64().unwrap(), count("gpus_unchanged") + count("gpus_services_changed"));
    let table = ok(&["diff", &old, &new], &store);
    assert!(table.lines().nth(1).unwrap().starts_with("6 GPUs → "), "{table}");
    assert!(table.lines().all(|l| l.chars().count() <= 80), "{table}");
}

#[test]
fn a_drained_gpu_leaves_the_plan_and_the_diff_says_it_is_removed() {
    let Setup { dir: _dir, store, old, new } = setup();
    ok(
        &["plan", "--demo", "--from", &old, "--drain", "0:1", "--max-extra-gpus", "1", "--format", "json", "-o", &new],
        &store,
    );
    ok(&["verify", &new, "--demo"], &store);
    let plan: Value = serde_json::from_str(&std::fs::read_to_string(&new).unwrap()).unwrap();
    let gpus = plan["gpus"].as_array().unwrap();
    assert!(gpus.iter().all(|g| (g["node"].as_u64(), g["index"].as_u64()) != (Some(0), Some(1))), "{plan}");
    let notes = plan["notes"].as_array().unwrap();
    assert!(notes.iter().any(|n| n.as_str().unwrap().starts_with("GPU 0:1 drained")), "{plan}");
    let diff = diff_json(&old, &new, &store);
    let removed = diff["gpus"].as_array().unwrap().iter().find(|g| g["index"] == 1).expect("GPU 0:1 is listed");
    assert_eq!(removed["change"], "removed", "{diff}");
}

#[test]
fn diff_steps_order_the_changes_and_name_what_dips() {
    let Setup { dir, store, old, new } = setup();
    let slos = demo_slos(dir.path(), "new.csv", [1.15, 1.0, 1.0, 0.9, 1.0, 1.0]);
    ok(&["plan", "--demo", "--slo", &slos, "--from", &old, "--format", "json", "-o", &new], &store);
    let diff =
        serde_json::from_str::<Value>(&ok(&["diff", &old, &new, "--steps", "--format", "json"], &store)).unwrap();
    let steps = diff["steps"].as_array().unwrap();
    let changed = diff["gpus"].as_array().unwrap().len();
    let stepped: usize = steps.iter().map(|s| s["gpus"].as_array().unwrap().len()).sum();
    assert_eq!(stepped, changed, "every changed GPU is in one step: {diff}");
    for step in steps {
        for gpu in step["gpus"].as_array().unwrap() {
            let ops: Vec<&str> =
                gpu["operations"].as_array().unwrap().iter().map(|o| o["op"].as_str().unwrap()).collect();
            let rank = |op: &str| ["stop", "destroy", "create", "start"].iter().position(|o| *o == op).unwrap();
            assert!(ops.windows(2).all(|w| rank(w[0]) <= rank(w[1])), "{ops:?}");
        }
    }
    let table = ok(&["diff", &old, &new, "--steps"], &store);
    assert!(table.contains("make before break"), "{table}");
    assert!(table.lines().all(|l| l.chars().count() <= 80), "{table}");
}

#[test]
fn diff_picture_draws_each_changed_gpu_old_beside_new() {
    let Setup { dir, store, old, new } = setup();
    ok(
        &["plan", "--demo", "--from", &old, "--drain", "0:1", "--max-extra-gpus", "1", "--format", "json", "-o", &new],
        &store,
    );
    let diff = diff_json(&old, &new, &store);
    let changed = diff["gpus"].as_array().unwrap();
    let picture = dir.path().join("diff.html");
    let table = ok(&["diff", &old, &new, "--picture", &picture.display().to_string()], &store);
    assert!(table.contains("layouts kept"), "the table still prints: {table}");
    let html = std::fs::read_to_string(&picture).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>") && html.contains("old.json → new.json"));
    assert_eq!(html.matches(r#"<div class="change "#).count(), changed.len(), "one row per changed GPU");
    assert!(html.contains(r#"data-node="0" data-gpu="1" data-change="removed""#), "{html}");
    // To standard output, the page alone.
    let page = ok(&["diff", &old, &new, "--picture", "-"], &store);
    assert!(page.starts_with("<!DOCTYPE html>") && page.trim_end().ends_with("</html>"), "{page}");
}

#[test]
fn a_plan_verifies_against_its_own_services_when_no_slos_are_given() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let profiles = crate::util::write_parvagpu_fixture(dir.path()).display().to_string();
    let slos = dir.path().join("slo.csv");
    std::fs::write(&slos, "service,model,rate_rps,latency_ms\nshop,alpha,900,200\nads,beta,300,400\n").unwrap();
    let plan = dir.path().join("plan.json").display().to_string();
    ok(&["plan", "--profiles", &profiles, "--slo", slos.to_str().unwrap(), "--format", "json", "-o", &plan], &store);
    let output = tessera(&["verify", &plan, "--profiles", &profiles], &store);
    let note = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{note}");
    assert!(note.contains("no SLOs given: checked against the rates and SLOs the plan records"), "{note}");
    assert!(stdout(&output).contains("OK: ") && stdout(&output).contains("2 services"), "{}", stdout(&output));
    // What it records is what is checked: a plan edited to claim more than
    // it provides fails.
    let edited = std::fs::read_to_string(&plan).unwrap().replace("\"rate_rps\": 900.0", "\"rate_rps\": 90000.0");
    std::fs::write(&plan, edited).unwrap();
    let output = tessera(&["verify", &plan, "--profiles", &profiles], &store);
    assert_eq!(output.status.code(), Some(1));
    assert!(stdout(&output).contains("service 'shop': provisioned"), "{}", stdout(&output));
}

#[test]
fn diff_counts_services_whose_segments_change_in_words_that_say_so() {
    let Setup { dir, store, old, new } = setup();
    let slos = demo_slos(dir.path(), "more.csv", [1.15, 1.0, 1.0, 1.0, 1.0, 1.0]);
    ok(&["plan", "--demo", "--slo", &slos, "--from", &old, "--format", "json", "-o", &new], &store);
    let table = ok(&["diff", &old, &new], &store);
    assert!(!table.contains("restarted"), "{table}");
    let changed = diff_json(&old, &new, &store)["totals"]["services_changed"].as_u64().unwrap();
    assert!(changed >= 1 && table.contains("with segments") && table.contains("added or removed"), "{table}");
}

#[test]
fn a_replan_takes_the_new_slo_files_images_and_keeps_the_others() {
    let Setup { dir, store, old, new } = setup();
    let services = tessera_core::synthetic::demo_services();
    let mut csv = "service,model,rate_rps,latency_ms,image,args\n".to_string();
    for (n, slo) in services.iter().enumerate() {
        let (image, args) = if n == 0 { ("reg.example/new:2", r#""[""--name"",""a b""]""#) } else { ("", "") };
        csv.push_str(&format!(
            "{},{},{},{},{image},{args}\n",
            slo.service, slo.model, slo.rate_rps, slo.latency_slo_ms
        ));
    }
    let first = &services[0];
    csv.push_str(&format!(
        "added,{},{},{},reg.example/added:1,--batch {{batch}}\n",
        first.model,
        first.rate_rps / 4.0,
        first.latency_slo_ms
    ));
    let slos = dir.path().join("images.csv");
    std::fs::write(&slos, csv).unwrap();
    let slos = slos.display().to_string();
    ok(
        &["plan", "--demo", "--slo", &slos, "--from", &old, "--max-extra-gpus", "4", "--format", "json", "-o", &new],
        &store,
    );
    let read = |path: &str| -> Value { serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap() };
    let (before, after) = (read(&old), read(&new));
    let images = &after["images"];
    assert_eq!(images[&first.service]["image"], "reg.example/new:2", "a changed image replaces the old");
    assert_eq!(images[&first.service]["args"], serde_json::json!(["--name", "a b"]), "an argument with a space");
    assert_eq!(images["added"]["image"], "reg.example/added:1", "a new service gets its own");
    for slo in &services[1..] {
        assert_eq!(images[&slo.service], before["images"][&slo.service], "{}: kept", slo.service);
    }
}

#[test]
fn a_gpu_of_another_model_at_the_same_position_is_one_removed_and_one_added_and_steps_refuse() {
    let Setup { dir: _dir, store, old, new } = setup();
    let mut plan: Value = serde_json::from_str(&std::fs::read_to_string(&old).unwrap()).unwrap();
    plan["gpus"][0]["gpu_model"] = "h100-80gb".into();
    let fleet = plan["fleet"][0].clone();
    let mut h100 = fleet.clone();
    h100["gpu_model"] = "h100-80gb".into();
    plan["fleet"] = serde_json::json!([fleet, h100]);
    std::fs::write(&new, plan.to_string()).unwrap();
    let diff = diff_json(&old, &new, &store);
    let first: Vec<(&str, &str)> = diff["gpus"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| g["node"] == 0 && g["index"] == 0)
        .map(|g| (g["change"].as_str().unwrap(), g["gpu_model"].as_str().unwrap()))
        .collect();
    assert_eq!(first, [("removed", "a100-80gb"), ("added", "h100-80gb")], "{diff}");
    let output = tessera(&["diff", &old, &new, "--steps"], &store);
    assert!(!output.status.success());
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        said.starts_with("error: --steps: node 0 gpu 0 is an a100-80gb in the old plan and an h100-80gb"),
        "{said}"
    );
}
