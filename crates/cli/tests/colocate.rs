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
