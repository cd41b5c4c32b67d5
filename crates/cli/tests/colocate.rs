//! `tessera colocate evaluate | import | train | recommend`.

use std::path::PathBuf;

use tempfile::TempDir;

use crate::util::{fails_with, stderr, stdout, store_in, tessera};

/// KACE's reference data beside the repository, if present.
fn kace_data() -> Option<PathBuf> {
    tessera_testkit::shared_data("kace")
}

#[test]
fn colocate_evaluates_imports_trains_and_recommends() {
    let Some(data) = kace_data() else { return };
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let pairs = data.join("pairs_mps100.csv");
    let splits = data.join("splits/n_occur_3");

    let output = tessera(
        &["colocate", "evaluate", "--protocol", "p3", "--splits", splits.to_str().unwrap(), "--format", "json"],
        &store,
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["protocol"], "p3");
    let policies = json["policies"].as_array().unwrap();
    assert_eq!(policies[0]["name"], "slowdown");
    assert_eq!(policies[0]["per_seed"].as_array().unwrap().len(), 5);
    assert!(policies[0]["mean"].as_f64().unwrap() >= 0.95);

    let system = data.join("system_metrics.csv");
    let kernels = data.join("kernel_metrics");
    let import = &[
        "colocate",
        "import",
        pairs.to_str().unwrap(),
        "--system-metrics",
        system.to_str().unwrap(),
        "--kernel-metrics",
        kernels.to_str().unwrap(),
    ];
    let output = tessera(import, &store);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains("imported 181 colocations"), "{}", stdout(&output));

    let model = dir.path().join("model.json");
    let output = tessera(&["colocate", "train", "--model", "kace", "-o", model.to_str().unwrap()], &store);
    assert!(output.status.success(), "{}", stderr(&output));
    let target = "bert-base-cased_batch8-inf";
    let output = tessera(
        &["colocate", "recommend", "--target", target, "--group-size", "3", "--top", "2", "--format", "json"],
        &store,
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let ranked: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(ranked.as_array().unwrap().len(), 2);
    assert_eq!(ranked[0]["members"].as_array().unwrap().len(), 3);
    assert_eq!(ranked[0]["members"][0]["workload"], target);
    assert!(ranked[0]["predicted_total_rps"].as_f64().unwrap() >= ranked[1]["predicted_total_rps"].as_f64().unwrap());
    let output = tessera(&["colocate", "recommend", "--target", target, "--model", model.to_str().unwrap()], &store);
    assert!(output.status.success() && stdout(&output).contains("model kace"), "{}", stderr(&output));

    fails_with(
        &["colocate", "recommend", "--target", "alexnet_batch1-inf"],
        &store,
        &["alexnet_batch1-inf", "unknown workload"],
    );
    let newer = dir.path().join("newer.json");
    std::fs::write(&newer, std::fs::read_to_string(&model).unwrap().replace("\"version\": 1", "\"version\": 9"))
        .unwrap();
    fails_with(
        &["colocate", "recommend", "--target", target, "--model", newer.to_str().unwrap()],
        &store,
        &["newer.json", "version 9"],
    );
}

#[test]
fn colocate_rejects_bad_kace_files_with_one_line_errors() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let bad = dir.path().join("pairs.csv");
    std::fs::write(&bad, "w1_Threads,workload1\n1,a\n").unwrap();
    fails_with(
        &["colocate", "evaluate", "--protocol", "lowo", "--data", bad.to_str().unwrap()],
        &store,
        &["pairs.csv"],
    );
    fails_with(&["colocate", "import", bad.to_str().unwrap()], &store, &["pairs.csv"]);
}

/// Pairs of KACE's form, written by tessera-store: `n` distinct
/// measurements of two workloads.
pub fn pairs_fixture(n: usize) -> String {
    use tessera_core::colocation::{Colocation, GroupMember, WorkloadMetrics};
    let member = |name: &str, seed: f64| GroupMember {
        metrics: WorkloadMetrics {
            workload: name.to_string(),
            kernel: [1000.0 * seed, 50.0, 20.0 + seed, 60.0, 1e6, 7000.0],
            exclusive_rps: 100.0 + seed,
            sm_util_pct: 90.0,
            mem_util_pct: 10.0 + seed,
            memory_gb: 1.5,
        },
        colocated_rps: 40.0 + seed,
    };
    let rows: Vec<Colocation> = (0..n)
        .map(|i| {
            let seed = i as f64;
            Colocation { members: vec![member(&format!("a{i}_batch1-inf"), seed), member("b_batch8-inf", seed + 0.5)] }
        })
        .collect();
    let mut bytes = Vec::new();
    tessera_store::write_colocations(&mut bytes, &rows).unwrap();
    String::from_utf8(bytes).unwrap()
}

/// One file imported twice under two spellings of its path is stored once
/// (it was twice: 362 rows trained on instead of 181), and a row listed
/// twice in one file is an error naming both lines.
#[test]
fn a_colocation_is_stored_once_however_its_file_is_named() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let pairs = dir.path().join("pairs.csv");
    std::fs::write(&pairs, pairs_fixture(5)).unwrap();
    let retyped = dir.path().join("sub").join("..").join("pairs.csv");
    let output = tessera(&["colocate", "import", pairs.to_str().unwrap()], &store);
    assert!(stdout(&output).starts_with("imported 5 colocations (10 members; 0 replaced) from"), "{}", stderr(&output));
    let output = tessera(&["colocate", "import", retyped.to_str().unwrap()], &store);
    assert!(stdout(&output).starts_with("imported 5 colocations (10 members; 5 replaced) from"), "{}", stdout(&output));
    let copy = dir.path().join("copy.csv");
    std::fs::copy(&pairs, &copy).unwrap();
    let output = tessera(&["colocate", "import", copy.to_str().unwrap()], &store);
    let expected = "imported 0 colocations (0 members; 0 replaced; 5 already stored from another source, skipped)";
    assert!(stdout(&output).starts_with(expected), "{}", stdout(&output));
    let model = dir.path().join("model.json");
    let output = tessera(&["colocate", "train", "--model", "kace", "-o", model.to_str().unwrap()], &store);
    assert!(stdout(&output).starts_with("trained kace on 5 colocations"), "{}{}", stdout(&output), stderr(&output));

    let text = pairs_fixture(5);
    let mut lines: Vec<&str> = text.lines().collect();
    lines.push(lines[2]);
    let twice = dir.path().join("twice.csv");
    std::fs::write(&twice, lines.join("\r\n")).unwrap();
    let message = fails_with(&["colocate", "import", twice.to_str().unwrap()], &store, &[]);
    assert!(
        message.starts_with(&format!(
            "error: {}:7: colocation a1_batch1-inf + b_batch8-inf (41, 41.5 samples/s) already listed on line 3",
            twice.display()
        )),
        "{message}"
    );
    fails_with(
        &["colocate", "evaluate", "--protocol", "lowo", "--data", twice.to_str().unwrap()],
        &store,
        &["twice.csv:7:", "already listed on line 3"],
    );
}
