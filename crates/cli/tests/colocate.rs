//! `tessera colocate evaluate | import | train | recommend`.

use std::path::{Path, PathBuf};

use tempfile::TempDir;

use crate::util::{fails_with, stderr, stdout, store_in, tessera, usage_error};

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

    let evaluate = ["colocate", "evaluate", "--protocol", "p3", "--splits", splits.to_str().unwrap()];
    let output = tessera(&[&evaluate[..], &["--tuned-on-test", "--format", "json"]].concat(), &store);
    assert!(output.status.success(), "{}", stderr(&output));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!((&json["protocol"], &json["nested"]), (&serde_json::json!("p3"), &serde_json::json!(true)));
    let policies = json["policies"].as_array().unwrap();
    // The default model first, nested; the old way last, labelled so.
    assert_eq!((&policies[0]["name"], &policies[0]["tuned_on_test"]), (&"slowdown".into(), &false.into()));
    let nested = &policies[0]["scores"][0];
    assert_eq!(nested["per_fold"].as_array().unwrap().len(), 5);
    let tuned = policies.last().unwrap();
    assert_eq!((&tuned["name"], &tuned["tuned_on_test"]), (&"slowdown, tuned on the test data".into(), &true.into()));
    let kace = policies.iter().find(|p| p["name"] == "kace").unwrap();
    let mean = |p: &serde_json::Value| p["scores"][0]["mean"].as_f64().unwrap();
    assert!(mean(&policies[0]) > mean(kace), "{json}");
    assert!(mean(tuned) >= mean(&policies[0]), "tuning on the answers is optimistic: {json}");
    let coverage = policies[0]["coverage"][0]["measured"].as_f64().unwrap();
    assert!((0.85..=0.95).contains(&coverage), "{coverage}");

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

    // Ranked by the lower end of the interval, each group with its interval.
    let output = tessera(
        &["colocate", "recommend", "--target", target, "--risk", "lower", "--top", "4", "--format", "json"],
        &store,
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let ranked: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let lower = |r: &serde_json::Value| r["interval_rps"][0].as_f64().unwrap();
    let ranked = ranked.as_array().unwrap();
    assert!(ranked.windows(2).all(|w| lower(&w[0]) >= lower(&w[1])), "{ranked:?}");
    for r in ranked {
        let (predicted, upper) = (r["predicted_total_rps"].as_f64().unwrap(), r["interval_rps"][1].as_f64().unwrap());
        assert!(lower(r) <= predicted && predicted <= upper, "{r}");
        let turns = r["alone_total_rps"].as_f64().unwrap() / 2.0;
        assert_eq!(r["may_lose_to_time_sharing"], lower(r) < turns, "{r}");
    }

    // What to measure next: groups not measured yet.
    let output = tessera(&["colocate", "suggest", "--budget", "3", "--format", "json"], &store);
    assert!(output.status.success(), "{}", stderr(&output));
    let suggested: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let suggested = suggested.as_array().unwrap();
    assert_eq!(suggested.len(), 3);
    let measured = std::fs::read_to_string(&pairs).unwrap();
    for s in suggested {
        let names: Vec<&str> = s["workloads"].as_array().unwrap().iter().map(|w| w.as_str().unwrap()).collect();
        let listed = |a: &str, b: &str| measured.contains(&format!(",{a},{b},"));
        assert!(!listed(names[0], names[1]) && !listed(names[1], names[0]), "{names:?} was measured");
    }
    let output = tessera(&["colocate", "suggest", "--budget", "1"], &store);
    assert!(stdout(&output).starts_with("measure next, most useful first"), "{}", stdout(&output));

    fails_with(
        &["colocate", "recommend", "--target", "alexnet_batch1-inf"],
        &store,
        &["alexnet_batch1-inf", "unknown workload"],
    );
    let newer = dir.path().join("newer.json");
    std::fs::write(&newer, std::fs::read_to_string(&model).unwrap().replace("\"version\": 4", "\"version\": 9"))
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

#[test]
fn colocate_evaluates_leaving_whole_model_families_out() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    // Six workloads, each its own model family.
    let data = synthetic_pairs(dir.path(), "six.csv", 6, 6);
    let args = ["colocate", "evaluate", "--protocol", "lofo", "--data", data.to_str().unwrap(), "--group-sizes", "2,3"];
    let output = tessera(&[&args[..], &["--format", "json"]].concat(), &store);
    assert!(output.status.success(), "{}", stderr(&output));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["protocol"], "lofo");
    assert_eq!(json["folds"].as_array().unwrap().len(), 6);
    let policies = json["policies"].as_array().unwrap();
    assert_eq!(policies[0]["name"], "slowdown");
    assert!(policies.iter().all(|p| p["tuned_on_test"] == false), "the tuned figures only on request");
    let sizes: Vec<u64> =
        policies[0]["scores"].as_array().unwrap().iter().map(|s| s["group_size"].as_u64().unwrap()).collect();
    assert_eq!(sizes, [2, 3]);
    let output = tessera(&args, &store);
    let table = stdout(&output);
    assert!(table.contains("LOFO nested, measured pairs") && !table.contains("groups of 3"), "{table}");
    // The pairs form a ring: no three workloads were all measured together.
    let note = stderr(&output);
    assert!(note.contains("groups of 3 built from measured pairs") && note.contains("not scored"), "{note}");
}

/// `rows` in KACE's form, written by tessera-store into `dir/name`.
fn kace_file(dir: &Path, name: &str, rows: &[tessera_core::Colocation]) -> PathBuf {
    let mut bytes = Vec::new();
    tessera_store::write_colocations(&mut bytes, rows).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Groups of `size` over eight synthetic workloads of four model families
/// (each measured alone at `50 + 10 i` samples/s), every member keeping
/// `keep(load)` of its throughput alone, `load` the group's summed SM
/// utilisation / 100.
fn synthetic_groups(size: usize, keep: fn(f64) -> f64) -> Vec<tessera_core::Colocation> {
    use tessera_core::colocation::{Colocation, GroupMember, WorkloadMetrics};
    let workload = |i: usize| {
        let f = i as f64;
        WorkloadMetrics {
            workload: format!("m{}_batch{}-inf", i / 2, 1 + i % 2),
            kernel: [1000.0 + 10.0 * f, 20.0 + 9.0 * f, 10.0 + f, 15.0 + f, 5000.0 + f, 100.0],
            exclusive_rps: 50.0 + 10.0 * f,
            sm_util_pct: 10.0 + 11.0 * f,
            mem_util_pct: 5.0 + 2.0 * f,
            memory_gb: 1.0 + f,
        }
    };
    let mut rows = Vec::new();
    let mut members = vec![0; size];
    loop {
        let load: f64 = members.iter().map(|&i| workload(i).sm_util_pct).sum::<f64>() / 100.0;
        rows.push(Colocation {
            members: members
                .iter()
                .map(|&i| GroupMember { metrics: workload(i), colocated_rps: workload(i).exclusive_rps * keep(load) })
                .collect(),
        });
        // The next non-decreasing list of workload indices.
        let Some(i) = (0..size).rev().find(|&i| members[i] < 7) else { return rows };
        members[i] += 1;
        let value = members[i];
        members[i + 1..].fill(value);
    }
}

#[test]
fn colocate_evaluates_measured_groups_at_their_own_size_and_says_so() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let quads = kace_file(dir.path(), "quads.csv", &synthetic_groups(4, |load| 1.0 / load.max(1.0)));
    let args = ["colocate", "evaluate", "--protocol", "lowo", "--data", quads.to_str().unwrap()];
    let output = tessera(&[&args[..], &["--format", "json"]].concat(), &store);
    assert!(output.status.success(), "{}", stderr(&output));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        (&json["measured_group_sizes"], &json["group_sizes"]),
        (&serde_json::json!([4]), &serde_json::json!([4]))
    );
    let scores = &json["policies"][0]["scores"][0];
    assert_eq!(
        (&scores["group_size"], &scores["source"]["kind"], &scores["basis"]),
        (&4.into(), &"measured".into(), &"measured".into())
    );
    assert!(scores["targets"].as_u64().unwrap() == 8 && scores["mean"].as_f64().unwrap() > 0.5, "{scores}");
    let table = stdout(&tessera(&args, &store));
    assert!(table.contains("LOWO nested, measured groups of 4 (8 targets scored)"), "{table}");
    // Whether a fallback rule chose or not, it is said.
    let said = ["slowdown: the model chose for every target (no fallback rule)", "slowdown: a fallback rule"];
    assert!(said.iter().any(|line| table.contains(line)), "{table}");
    // Pairs are not built from groups of four: said so, not scored.
    let output = tessera(&[&args[..], &["--group-sizes", "2,4"]].concat(), &store);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("no groups of 2: neither measured nor buildable from pairs"),
        "{}",
        stderr(&output)
    );
    assert!(stdout(&output).contains("measured groups of 4"), "{}", stdout(&output));
}

#[test]
fn colocate_recommend_says_how_a_group_is_predicted_and_flags_a_clipped_member() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    // Light partners are measured keeping more than alone (noise).
    let pairs = kace_file(dir.path(), "pairs.csv", &synthetic_groups(2, |load| 1.3 / load.max(0.5)));
    let target = "m0_batch1-inf";
    let (table, note) = recommended(&pairs, target, &["--top", "8"], &store);
    assert!(!note.contains("were not measured"), "pairs were measured: {note}");
    assert!(table.contains("(clipped from 1."), "{table}");
    assert!(table.contains("clipped: the model predicted the member keeps more than alone"), "{table}");
    let (json, _) = recommended(&pairs, target, &["--top", "8", "--format", "json"], &store);
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    let members: Vec<&serde_json::Value> =
        json.as_array().unwrap().iter().flat_map(|g| g["members"].as_array().unwrap()).collect();
    assert!(members.iter().all(|m| m["retained"].as_f64().unwrap() <= 1.0), "{json}");
    assert!(members.iter().any(|m| m["clipped_from"].as_f64().is_some_and(|raw| raw > 1.0)), "{json}");
    // Groups of three were not measured: predicted from pairs, said so.
    let (_, note) = recommended(&pairs, target, &["--group-size", "3"], &store);
    assert!(
        note.contains("groups of 3 were not measured: predicted from pairs") && note.contains("assumption"),
        "{note}"
    );
}

/// A KACE-format file of `pairs` measured pairs over `workloads`
/// synthetic workloads (`w<i>_batch1-inf`): pair `p` is workloads `p` and
/// `p + 1` (mod `workloads`), each keeping less the busier its partner.
fn synthetic_pairs(dir: &Path, name: &str, workloads: usize, pairs: usize) -> PathBuf {
    let metrics = |i: usize| {
        let f = i as f64;
        // Kernel metrics, exclusive throughput, SM %, memory %, memory GB.
        (
            [1000.0 + 10.0 * f, 20.0 + 3.0 * f, 10.0 + f, 15.0 + f, 5000.0 + f, 100.0],
            50.0 + 7.0 * f,
            10.0 + 4.0 * f,
            5.0 + 2.0 * f,
            1.0 + f,
        )
    };
    let mut text = String::new();
    for w in ["w1", "w2"] {
        for metric in [
            "Threads",
            "Compute (SM) Throughput",
            "DRAM Throughput",
            "Memory Throughput",
            "Registers",
            "Static Shared Memory",
        ] {
            text.push_str(&format!("{w}_{metric},"));
        }
    }
    text.push_str("workload1,workload2,idx1,idx2,w1throughput,w2throughput,w1exclusive_throughput,w2exclusive_throughput,w1sm%,w2sm%,w1mem%,w2mem%,w1memcap,w2memcap\n");
    for p in 0..pairs {
        let (a, b) = (p % workloads, (p + 1) % workloads);
        let (ka, ea, sa, ma, ga) = metrics(a);
        let (kb, eb, sb, mb, gb) = metrics(b);
        let kernel: Vec<String> = ka.iter().chain(&kb).map(f64::to_string).collect();
        let (ra, rb) = (ea * (1.0 - sb / 200.0), eb * (1.0 - sa / 200.0));
        text.push_str(&format!(
            "{},w{a}_batch1-inf,w{b}_batch1-inf,{a},{b},{ra},{rb},{ea},{eb},{sa},{sb},{ma},{mb},{ga},{gb}\n",
            kernel.join(",")
        ));
    }
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn colocate_rejects_bad_recommend_and_bench_input() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let six = synthetic_pairs(dir.path(), "six.csv", 6, 6);
    let data = six.to_str().unwrap();
    let recommend = |extra: &[&'static str]| {
        let mut args = vec!["colocate", "recommend", "--data", data, "--target", "w0_batch1-inf"];
        args.extend_from_slice(extra);
        args
    };
    // The target and 6 candidates (itself once more) make at most 7.
    recommended(&six, "w0_batch1-inf", &["--group-size", "7"], &store);
    fails_with(
        &recommend(&["--group-size", "8"]),
        &store,
        &["group size 8", "7 partners", "only 6 candidate workloads"],
    );
    let two = synthetic_pairs(dir.path(), "two.csv", 3, 2);
    fails_with(
        &["colocate", "recommend", "--data", two.to_str().unwrap(), "--target", "w0_batch1-inf"],
        &store,
        &["at least 3", "got 2"],
    );
    fails_with(&["bench", "colocate", "--data", two.to_str().unwrap()], &store, &["two.csv", "at least 3", "got 2"]);
    for bad in ["NaN", "0", "-4", "inf", "lots"] {
        let option = format!("--gpu-memory-gb={bad}");
        let mut args = recommend(&[]);
        args.push(&option);
        usage_error(&args, &store, &["--gpu-memory-gb", bad, "positive number of GB"]);
    }
    usage_error(&recommend(&["--top", "0"]), &store, &["--top", "0"]);
}

/// Runs `colocate recommend --data DATA --target TARGET` with `extra`,
/// expecting success: (stdout, stderr).
fn recommended(data: &Path, target: &str, extra: &[&str], store: &Path) -> (String, String) {
    let mut args = vec!["colocate", "recommend", "--data", data.to_str().unwrap(), "--target", target];
    args.extend_from_slice(extra);
    let output = tessera(&args, store);
    assert!(output.status.success(), "{}", stderr(&output));
    (stdout(&output), stderr(&output))
}

#[test]
fn colocate_recommend_says_what_kace_does_not_predict() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let data = synthetic_pairs(dir.path(), "six.csv", 6, 6);
    let model = dir.path().join("kace.json");
    let train =
        ["colocate", "train", "--model", "kace", "--data", data.to_str().unwrap(), "-o", model.to_str().unwrap()];
    assert!(tessera(&train, &store).status.success());
    let ask = |format: &str| {
        recommended(&data, "w0_batch1-inf", &["--model", model.to_str().unwrap(), "--format", format], &store).0
    };
    let table = ask("table");
    assert!(table.contains("retained —") && table.contains("kace model predicts only a group's total"), "{table}");
    let json: serde_json::Value = serde_json::from_str(&ask("json")).unwrap();
    let member = &json[0]["members"][0];
    assert!(member["retained"].is_null() && member["predicted_rps"].is_null(), "{member}");
    assert!(json[0]["predicted_total_rps"].as_f64().unwrap() > 0.0);
    // The slowdown model predicts every member.
    let (table, _) = recommended(&data, "w0_batch1-inf", &[], &store);
    assert!(!table.contains('—'), "{table}");
}

#[test]
fn colocate_recommend_searches_large_group_spaces_by_a_beam_and_says_so() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    // 30 workloads: C(30, 5) = 142506 groups of 6, more than are all scored.
    let data = synthetic_pairs(dir.path(), "thirty.csv", 30, 30);
    let run = |group_size: &str| {
        let extra = ["--group-size", group_size, "--top", "3", "--format", "json"];
        let (json, note) = recommended(&data, "w3_batch1-inf", &extra, &store);
        (serde_json::from_str::<serde_json::Value>(&json).unwrap(), note)
    };
    let (exact, note) = run("5");
    assert_eq!(exact.as_array().unwrap().len(), 3);
    assert!(!note.contains("beam search"), "27405 groups are all scored: {note}");
    assert!(note.contains("groups of 5 were not measured: predicted from pairs"), "{note}");
    let (beam, note) = run("6");
    assert_eq!(beam.as_array().unwrap().len(), 3);
    assert_eq!(beam[0]["members"].as_array().unwrap().len(), 6);
    assert!(
        note.contains("142506 candidate groups")
            && note.contains("beam search")
            && note.contains("may not be the best"),
        "{note}"
    );
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
