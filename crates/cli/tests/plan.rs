//! `tessera plan` and `tessera verify`: the demo, mixed fleets, output
//! formats, and ParvaGPU's six scenarios.

use std::path::{Path, PathBuf};

use tempfile::TempDir;

use crate::util::{fails_with, run_with_env, stderr, stdout, store_in, tessera, usage_error};

#[test]
fn demo_plans_with_no_files_and_verifies() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let output = tessera(&["plan", "--demo", "--wide"], &store);
    assert!(output.status.success(), "{}", stderr(&output));
    let table = stdout(&output);
    assert!(table.starts_with("6 GPUs (6 × a100-80gb), 42 compute slices used\n"), "{table}");
    assert!(table.contains("latency rule percentile, poisson arrivals, margin 6%"), "{table}");
    assert!(table.contains("[3g thumbnails b32×1]"), "{table}");
    assert!(
        table.contains("lower bound on gpus: 6: proven optimal") && table.contains("1×3g b32×1 + 3×1g b8×1"),
        "{table}"
    );
    assert!(!table.contains(" NO"), "every demo service is met: {table}");
    // By default the same table fits 80 columns, every tile still shown.
    let fitted = stdout(&tessera(&["plan", "--demo"], &store));
    assert!(fitted.lines().all(|line| line.chars().count() <= 80), "{fitted}");
    assert_eq!(fitted.matches("[1g ").count(), table.matches("[1g ").count(), "{fitted}");

    let plan = dir.path().join("plan.json");
    let output =
        tessera(&["plan", "--demo", "--gpu", "h100-80gb", "--format", "json", "-o", plan.to_str().unwrap()], &store);
    assert!(output.status.success(), "{}", stderr(&output));
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&plan).unwrap()).unwrap();
    assert_eq!(json["gpus"][0]["gpu_model"], "h100-80gb");
    for field in ["profile", "size", "start", "service", "model", "batch", "procs", "throughput_rps", "latency_ms"] {
        assert!(!json["gpus"][0]["instances"][0][field].is_null(), "{field}");
    }
    for field in ["service", "model", "rate_rps", "latency_slo_ms", "provisioned_rps", "worst_latency_ms", "met"] {
        assert!(!json["services"][0][field].is_null(), "{field}");
    }
    let output = tessera(&["verify", plan.to_str().unwrap(), "--demo", "--gpu", "h100-80gb"], &store);
    assert!(output.status.success(), "{}{}", stdout(&output), stderr(&output));
    assert!(!store.exists(), "planning the demo never creates a store");
}

#[test]
fn a_mixed_fleet_plans_by_cost_and_says_which_profiles_are_estimated() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let plan = dir.path().join("plan.json");
    let fleet = ["--gpu", "a100-80gb:cost=1", "--gpu", "h200-141gb:cost=1.5,count=2"];
    let mut args = vec!["plan", "--demo", "--format", "json", "-o", plan.to_str().unwrap()];
    args.extend(fleet);
    let output = tessera(&args, &store);
    assert!(output.status.success(), "{}", stderr(&output));
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&plan).unwrap()).unwrap();
    assert_eq!(json["optimality"]["objective"], "cost");
    let h200 = json["fleet"].as_array().unwrap().iter().find(|f| f["gpu_model"] == "h200-141gb").unwrap();
    assert!(h200["gpus"].as_u64().unwrap() <= 2, "{h200}");
    assert!(json["notes"].as_array().unwrap().iter().any(|n| n.as_str().unwrap().contains("synthetic")));
    let mut args = vec!["verify", plan.to_str().unwrap(), "--demo"];
    args.extend(fleet);
    assert!(tessera(&args, &store).status.success());
    usage_error(&["plan", "--demo", "--gpu", "a100-80gb:cost=0"], &store, &["cost", "positive"]);
    fails_with(&["plan", "--demo", "--gpu", "a100-80gb:count=1"], &store, &["too small", "a100-80gb"]);
    fails_with(
        &["plan", "--demo", "--strategy", "parva", "--gpu", "a100-80gb", "--gpu", "h100-80gb"],
        &store,
        &["one GPU model"],
    );
}

#[test]
fn verify_reports_every_violation_of_a_tampered_plan() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let plan_path = dir.path().join("plan.json");
    assert!(tessera(&["plan", "--demo", "--format", "json", "-o", plan_path.to_str().unwrap()], &store)
        .status
        .success());
    let mut plan: serde_json::Value = serde_json::from_slice(&std::fs::read(&plan_path).unwrap()).unwrap();
    // Move GPU 3's first instance (a 4g) onto a start its profile cannot
    // use, and drop its second instance.
    plan["gpus"][3]["instances"][0]["start"] = serde_json::json!(1);
    plan["gpus"][3]["instances"].as_array_mut().unwrap().remove(1);
    std::fs::write(&plan_path, serde_json::to_vec(&plan).unwrap()).unwrap();
    let output = tessera(&["verify", plan_path.to_str().unwrap(), "--demo"], &store);
    assert!(!output.status.success());
    let report = stdout(&output);
    assert!(report.contains("violation: node 0 gpu 3: ") && report.contains("provisioned"), "{report}");
}

/// A plan the hardware could not hold (a 4g moved onto a start its profile
/// cannot use) is refused by every command that reads one, not only by
/// `verify`: `simulate serve` and `diff` reported on it as if it ran.
#[test]
fn commands_that_read_a_plan_refuse_one_the_hardware_cannot_hold() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let good = dir.path().join("good.json");
    assert!(tessera(&["plan", "--demo", "--format", "json", "-o", good.to_str().unwrap()], &store).status.success());
    let mut plan: serde_json::Value = serde_json::from_slice(&std::fs::read(&good).unwrap()).unwrap();
    let gpu = plan["gpus"].as_array().unwrap().iter().position(|gpu| gpu["instances"][0]["size"] == 4).unwrap();
    plan["gpus"][gpu]["instances"][0]["start"] = serde_json::json!(1);
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, serde_json::to_vec(&plan).unwrap()).unwrap();
    let (good, bad) = (good.to_str().unwrap(), bad.to_str().unwrap());
    for args in [
        vec!["simulate", "serve", bad, "--demo", "--seconds", "5"],
        vec!["diff", good, bad],
        vec!["diff", bad, good, "--steps"],
        vec!["report", bad, "-o", "-"],
    ] {
        fails_with(&args, &store, &["bad.json", "cannot start at memory slice 1"]);
    }
}

/// A plan with a GPU taken out by hand (its GPU count lowered to match)
/// still says every service is met in its reports: `report` withdraws the
/// claims its instances no longer back, says so on its first line, and
/// lists those services as not met.
#[test]
fn report_does_not_claim_met_what_the_plan_s_instances_no_longer_provide() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let path = dir.path().join("edited.json");
    assert!(tessera(&["plan", "--demo", "--format", "json", "-o", path.to_str().unwrap()], &store).status.success());
    let mut plan: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let removed = plan["gpus"].as_array_mut().unwrap().remove(0);
    plan["gpu_count"] = serde_json::json!(plan["gpu_count"].as_u64().unwrap() - 1);
    std::fs::write(&path, serde_json::to_vec(&plan).unwrap()).unwrap();
    let output = tessera(&["report", path.to_str().unwrap(), "-o", "-"], &store);
    assert!(output.status.success(), "{}", stderr(&output));
    let said = stderr(&output);
    let first = said.lines().next().unwrap_or_default();
    assert!(first.starts_with("note: ") && first.contains("claim") && first.contains("not claimed met"), "{said}");
    let service = removed["instances"][0]["service"].as_str().unwrap();
    assert!(first.contains(service), "{service}: {said}");
    let html = stdout(&output);
    assert!(!html.contains("None: all") && html.contains("Services not met"), "{html}");
    // The plan as made: nothing withdrawn.
    let whole = dir.path().join("whole.json");
    assert!(tessera(&["plan", "--demo", "--format", "json", "-o", whole.to_str().unwrap()], &store).status.success());
    let output = tessera(&["report", whole.to_str().unwrap(), "-o", "-"], &store);
    assert!(stderr(&output).is_empty(), "{}", stderr(&output));
}

#[test]
fn parvagpu_csv_output_uses_parvagpu_deployment_columns() {
    let dir = TempDir::new().unwrap();
    let output = tessera(&["plan", "--demo", "--format", "parvagpu-csv"], &store_in(&dir));
    let csv = stdout(&output);
    assert!(csv.starts_with("Num instance,Num GPU,Model,Placement,Instance size,Batch size,Num proc\n"), "{csv}");
    assert!(csv.lines().skip(1).all(|line| line.split(',').count() == 7));
}

/// `plan --format csv` writes Tessera's own CSV, which `verify` reads back:
/// services and GPU models included, under the rule the plan was made with
/// (ParvaGPU's map, without them, gave 23 false violations).
#[test]
fn a_csv_plan_reads_back_and_verifies() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    for (strategy, rule) in [("optimal", "percentile"), ("parva", "parva")] {
        let csv = dir.path().join(format!("{strategy}.csv"));
        let csv = csv.to_str().unwrap();
        let fleet = if strategy == "parva" { "a100-80gb" } else { "h100-80gb" };
        let output =
            tessera(&["plan", "--demo", "--strategy", strategy, "--gpu", fleet, "--format", "csv", "-o", csv], &store);
        assert!(output.status.success(), "{}", stderr(&output));
        let text = std::fs::read_to_string(csv).unwrap();
        assert!(text.starts_with("node,gpu_index,gpu_model,profile,size_gpcs,start,service,model,batch,procs,"));
        let output = tessera(&["verify", csv, "--demo", "--gpu", fleet], &store);
        assert!(output.status.success(), "{}{}", stdout(&output), stderr(&output));
        // The verdict wraps to the width: read it as one line.
        let verdict = stdout(&output).split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(verdict.contains(&format!("every segment within the {rule} latency rule")), "{strategy}: {verdict}");
    }
    // ParvaGPU's map of the same plan still reads (by its header, whatever
    // the file's name), under the default (percentile) rule, said on stderr.
    let map = dir.path().join("map.txt");
    let map = map.to_str().unwrap();
    assert!(tessera(&["plan", "--demo", "--format", "parvagpu-csv", "-o", map], &store).status.success());
    let output = tessera(&["verify", map, "--demo"], &store);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).starts_with(&format!("note: {map}: the plan records no latency rule")),
        "{}",
        stderr(&output)
    );
    assert!(
        stderr(&output).ends_with("violations (under the percentile latency rule, poisson arrivals)\n"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn verify_reports_as_json_with_the_same_exit_status() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let plan = dir.path().join("plan.json");
    let plan = plan.to_str().unwrap();
    assert!(tessera(&["plan", "--demo", "--format", "json", "-o", plan], &store).status.success());
    let json = std::fs::read_to_string(plan).unwrap();
    assert!(json.starts_with("{\n  \"version\": 3,\n"), "{json}");
    let output = tessera(&["verify", plan, "--demo", "--format", "json"], &store);
    assert!(output.status.success(), "{}", stderr(&output));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!((report["ok"].as_bool(), report["latency_rule"].as_str()), (Some(true), Some("percentile")));
    assert_eq!(report["violations"], serde_json::json!([]));

    let slo = dir.path().join("slo.csv");
    std::fs::write(&slo, "service,model,rate_rps,latency_ms\nx,alexnet,1,100\ny,bert-base,100000,1\n").unwrap();
    let output = tessera(&["verify", plan, "--demo", "--slo", slo.to_str().unwrap(), "--format", "json"], &store);
    assert_eq!(output.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let messages: Vec<&str> =
        report["violations"].as_array().unwrap().iter().map(|v| v["message"].as_str().unwrap()).collect();
    assert!(messages.contains(&"service 'x': provisioned 0.000 req/s < rate 1 req/s"), "{messages:?}");
    assert!(messages.contains(&"service 'y': provisioned 0.000 req/s < rate 100000 req/s"), "{messages:?}");
    assert_eq!(report["ok"], false);
    assert_eq!(
        stderr(&output),
        format!(
            "error: {plan}: {} violations (under the percentile latency rule, poisson arrivals, margin 6%)\n",
            messages.len()
        )
    );
}

/// ParvaGPU's reference data beside the repository, if present.
fn parvagpu_data() -> Option<PathBuf> {
    tessera_testkit::shared_data("parvagpu")
}

/// The arguments that name ParvaGPU's profiles and scenario `k` on A100s.
fn scenario_inputs(data: &Path, k: usize) -> Vec<String> {
    let path = |relative: &str| data.join(relative).display().to_string();
    vec![
        "--profiles".into(),
        path("prof_data"),
        "--slo-rates".into(),
        path("slo/SLO_req_rate.csv"),
        "--slo-latency".into(),
        path("slo/SLO_latency.csv"),
        "--scenario".into(),
        k.to_string(),
        "--gpu".into(),
        "a100-80gb".into(),
    ]
}

/// Plans ParvaGPU scenario `k` with `extra` arguments, checks that the plan
/// passes `tessera verify` under the same rule, and returns its JSON.
fn plan_scenario(data: &Path, dir: &TempDir, k: usize, extra: &[&str]) -> serde_json::Value {
    let store = store_in(dir);
    let plan = dir.path().join(format!("plan{k}.json"));
    let inputs = scenario_inputs(data, k);
    let inputs: Vec<&str> = inputs.iter().map(String::as_str).collect();
    let mut args = vec!["plan"];
    args.extend(&inputs);
    args.extend(extra);
    args.extend(["--format", "json", "-o", plan.to_str().unwrap()]);
    let output = tessera(&args, &store);
    assert!(output.status.success(), "scenario {k}: {}", stderr(&output));
    let mut args = vec!["verify", plan.to_str().unwrap()];
    args.extend(&inputs);
    let output = tessera(&args, &store);
    assert!(output.status.success(), "scenario {k}: {}", stdout(&output));
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&plan).unwrap()).unwrap();
    assert!(json["services"].as_array().unwrap().iter().all(|s| s["met"] == true), "scenario {k}");
    json
}

/// `--spread`: on ParvaGPU's scenarios every service with several segments
/// ends on at least two GPUs (or is named), with as many GPUs and every SLO
/// met, as the verifier checks.
#[test]
fn spread_plans_keep_their_gpus_and_put_services_on_two_gpus() {
    let Some(data) = parvagpu_data() else { return };
    let dir = TempDir::new().unwrap();
    for k in 1..=6 {
        let plain = plan_scenario(&data, &dir, k, &["--time-limit", "2"]);
        let spread = plan_scenario(&data, &dir, k, &["--time-limit", "2", "--spread"]);
        assert_eq!(spread["gpu_count"], plain["gpu_count"], "scenario {k}");
        let note =
            spread["notes"].as_array().unwrap().iter().filter_map(|n| n.as_str()).find(|n| n.starts_with("spread:"));
        let note = note.expect("a spread note");
        let mut gpus_of: std::collections::BTreeMap<&str, std::collections::BTreeSet<u64>> = Default::default();
        let mut segments: std::collections::BTreeMap<&str, usize> = Default::default();
        for gpu in spread["gpus"].as_array().unwrap() {
            for instance in gpu["instances"].as_array().unwrap() {
                let service = instance["service"].as_str().unwrap();
                gpus_of
                    .entry(service)
                    .or_default()
                    .insert(gpu["node"].as_u64().unwrap() * 1000 + gpu["index"].as_u64().unwrap());
                *segments.entry(service).or_default() += 1;
            }
        }
        for (service, gpus) in &gpus_of {
            if segments[service] > 1 && gpus.len() == 1 {
                assert!(note.contains(service), "scenario {k}: {service} on one GPU and not named: {note}");
            }
        }
    }
}

/// The six ParvaGPU scenarios with ParvaGPU's strategy and rule use exactly
/// as many GPUs as ParvaGPU itself.
#[test]
fn parva_strategy_matches_parvagpu_gpu_counts() {
    let Some(data) = parvagpu_data() else { return };
    let dir = TempDir::new().unwrap();
    for (k, gpus) in [(1, 2), (2, 3), (3, 5), (4, 7), (5, 13), (6, 16)] {
        let plan = plan_scenario(&data, &dir, k, &["--strategy", "parva", "--latency-rule", "parva"]);
        assert_eq!(plan["gpu_count"], gpus, "scenario {k}");
    }
}

/// Under ParvaGPU's own rule the optimal strategy (the default) reaches the
/// exact optimum, 12 and 15 GPUs where ParvaGPU uses 13 and 16, and proves it.
#[test]
fn optimal_strategy_proves_the_optimum_of_parvagpu_scenarios() {
    let Some(data) = parvagpu_data() else { return };
    let dir = TempDir::new().unwrap();
    for (k, gpus) in [(1, 2), (2, 3), (3, 5), (4, 7), (5, 12), (6, 15)] {
        let plan = plan_scenario(&data, &dir, k, &["--latency-rule", "parva"]);
        assert_eq!(plan["gpu_count"], gpus, "scenario {k}");
        assert_eq!(plan["optimality"]["proven_optimal"], true, "scenario {k}");
        assert_eq!(plan["optimality"]["lower_bound"], gpus as f64, "scenario {k}");
        assert_eq!(plan["optimality"]["objective"], "gpus", "scenario {k}");
    }
}

/// Under the queueing rule every service's predicted worst-case latency,
/// batch filling included, stays within its SLO.
#[test]
fn queueing_plans_keep_worst_case_latency_within_the_slo() {
    let Some(data) = parvagpu_data() else { return };
    let dir = TempDir::new().unwrap();
    for k in 1..=6 {
        let plan = plan_scenario(&data, &dir, k, &["--latency-rule", "queueing"]);
        assert_eq!(plan["latency_rule"], "queueing");
        for service in plan["services"].as_array().unwrap() {
            let (worst, slo) =
                (service["worst_latency_ms"].as_f64().unwrap(), service["latency_slo_ms"].as_f64().unwrap());
            assert!(worst <= slo, "scenario {k}: {service}");
        }
    }
}

/// ParvaGPU's own plan for scenario 1 runs bert at batch 128 × 3 processes
/// on a 1g for 19 req/s: filling a batch takes ~20 s against a 6.4 s SLO.
/// The queueing rule catches it (and three more services that ParvaGPU
/// over-provisions with large batches); Tessera's own plan for the same
/// scenario passes it.
#[test]
fn parvagpu_scenario_1_plan_breaks_the_queueing_rule_for_bert() {
    let Some(data) = parvagpu_data() else { return };
    let dir = TempDir::new().unwrap();
    let reference = data.join("reference_deployments/SLO1_ParvaGPU_deploy.csv");
    let inputs = scenario_inputs(&data, 1);
    let mut args = vec!["verify", reference.to_str().unwrap(), "--latency-rule", "queueing"];
    args.extend(inputs.iter().map(String::as_str));
    let output = tessera(&args, &store_in(&dir));
    assert!(!output.status.success());
    let report = stdout(&output);
    let bert: Vec<&str> = report.lines().filter(|l| l.contains("service 'bert' misses its 6434 ms SLO")).collect();
    assert!(!bert.is_empty(), "{report}");

    let ours = plan_scenario(&data, &dir, 1, &[]);
    let bert = ours["services"].as_array().unwrap().iter().find(|s| s["service"] == "bert").unwrap();
    assert!(bert["worst_latency_ms"].as_f64().unwrap() <= 6434.0, "{bert}");
}

#[test]
fn a_misspelt_optional_column_is_an_error_not_ignored() {
    let dir = TempDir::new().unwrap();
    let slo = dir.path().join("slo.csv");
    std::fs::write(&slo, "service,modle,rate_rps,latency_ms\nshop,alpha,100,100\n").unwrap();
    fails_with(&["plan", "--demo", "--slo", slo.to_str().unwrap()], &store_in(&dir), &["slo.csv:1", "modle", "model"]);
}

/// A profile that carries the spread of its batch times, its dispatch gap
/// and its serving slowdown plans smaller capacities than the same profile
/// without them, and `verify` judges the plan with them.
#[test]
fn a_profile_with_batch_timing_plans_with_it() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let header = "gpu_model,model,size_gpcs,batch,procs,throughput_rps,latency_ms";
    let rows = [(1, 1, 4.0), (1, 2, 5.0), (1, 4, 7.0), (1, 8, 12.0), (7, 1, 1.0), (7, 4, 1.5), (7, 8, 2.0)];
    let plain: String = rows
        .iter()
        .map(|(size, batch, ms)| format!("a100-80gb,m,{size},{batch},1,{},{ms}\n", f64::from(*batch) * 1000.0 / ms))
        .collect();
    let timed: String = plain
        .lines()
        .map(|row| {
            let ms: f64 = row.rsplit(',').next().unwrap().parse().unwrap();
            format!("{row},{},{},0.01,0.004\n", ms, ms * 1.05)
        })
        .collect();
    let slo = dir.path().join("slo.csv");
    std::fs::write(&slo, "service,model,rate_rps,latency_ms\nshop,m,3000,40\n").unwrap();
    let plan_with = |name: &str, text: &str| {
        let profiles = dir.path().join(name);
        std::fs::write(&profiles, text).unwrap();
        let plan = dir.path().join(format!("{name}.json"));
        let args = ["plan", "--profiles", profiles.to_str().unwrap(), "--slo", slo.to_str().unwrap()];
        let output = tessera(&[&args[..], &["--format", "json", "-o", plan.to_str().unwrap()]].concat(), &store);
        assert!(output.status.success(), "{}", stderr(&output));
        let verified = tessera(&["verify", plan.to_str().unwrap(), "--profiles", profiles.to_str().unwrap()], &store);
        assert!(verified.status.success(), "{}{}", stdout(&verified), stderr(&verified));
        let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&plan).unwrap()).unwrap();
        let instances: Vec<serde_json::Value> = json["gpus"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|gpu| gpu["instances"].as_array().unwrap().clone())
            .collect();
        let capacities: std::collections::BTreeMap<(u64, u64), f64> = instances
            .iter()
            .map(|i| ((i["size"].as_u64().unwrap(), i["batch"].as_u64().unwrap()), i["capacity_rps"].as_f64().unwrap()))
            .collect();
        (capacities, plan)
    };
    let (plain, plain_plan) = plan_with("plain.csv", &format!("{header}\n{plain}"));
    let (timed, timed_plan) = plan_with(
        "timed.csv",
        &format!("{header},latency_p50_ms,latency_p99_ms,dispatch_gap_ms,serving_slowdown\n{timed}"),
    );
    let common: Vec<_> = plain.keys().filter(|key| timed.contains_key(key)).collect();
    assert!(!common.is_empty(), "{plain:?} {timed:?}");
    for key in common {
        assert!(timed[key] < plain[key], "{key:?}: {} against {} req/s", timed[key], plain[key]);
    }
    // Judged without its timing, the timed plan still holds (its capacities are smaller).
    let plain_profiles = dir.path().join("plain.csv");
    let output =
        tessera(&["verify", timed_plan.to_str().unwrap(), "--profiles", plain_profiles.to_str().unwrap()], &store);
    assert!(output.status.success(), "{}", stderr(&output));
    // The plan made without timing claims more than the timed profile allows.
    let timed_profiles = dir.path().join("timed.csv");
    let output =
        tessera(&["verify", plain_plan.to_str().unwrap(), "--profiles", timed_profiles.to_str().unwrap()], &store);
    assert!(!output.status.success(), "{}", stdout(&output));
}

/// The README's own example (`plan --demo --slo examples/services.csv`): the
/// built-in profiles with the services of
/// `examples/services.csv`.
#[test]
fn the_example_services_plan_on_the_demo_profiles_and_verify() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let services = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/services.csv");
    let services = services.to_str().unwrap();
    let plan = dir.path().join("plan.json");
    let output =
        tessera(&["plan", "--demo", "--slo", services, "--format", "json", "-o", plan.to_str().unwrap()], &store);
    assert!(output.status.success(), "{}", stderr(&output));
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&plan).unwrap()).unwrap();
    assert_eq!(json["services"].as_array().unwrap().len(), 7);
    assert!(json["services"].as_array().unwrap().iter().all(|s| s["met"] == true), "{json}");
    let output = tessera(&["verify", plan.to_str().unwrap(), "--demo", "--slo", services], &store);
    assert!(output.status.success(), "{}{}", stdout(&output), stderr(&output));
}

/// The parva strategy keeps count limits, and verify checks a plan against
/// the fleet it records (both used to accept 4 GPUs "of 1").
#[test]
fn count_limits_hold_for_parva_and_in_verify() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    fails_with(
        &["plan", "--demo", "--strategy", "parva", "--gpu", "a100-80gb:count=1"],
        &store,
        &["no plan within the fleet's count limits was found", "a100-80gb", "count=1"],
    );
    let plan_path = dir.path().join("plan.json");
    let fleet = ["--strategy", "parva", "--gpu", "a100-80gb:count=50"];
    let output = tessera(
        &[&["plan", "--demo", "--format", "json", "-o", plan_path.to_str().unwrap()], &fleet[..]].concat(),
        &store,
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let mut plan: serde_json::Value = serde_json::from_slice(&std::fs::read(&plan_path).unwrap()).unwrap();
    plan["fleet"][0]["limit"] = serde_json::json!(1);
    std::fs::write(&plan_path, serde_json::to_vec(&plan).unwrap()).unwrap();
    let output = tessera(&["verify", plan_path.to_str().unwrap(), "--demo"], &store);
    assert!(!output.status.success());
    let report = stdout(&output);
    let gpus = plan["gpu_count"].as_u64().unwrap();
    assert!(
        report.contains(&format!("violation: the plan uses {gpus} a100-80gb GPUs, its fleet allows 1")),
        "{report}"
    );
}

/// A time limit longer than a `Duration` holds means no limit (it used to
/// panic converting the seconds, in `plan` and in the plans `bench scale` runs).
#[test]
fn a_huge_time_limit_means_no_limit() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let output = tessera(&["plan", "--demo", "--time-limit", "1e20"], &store);
    assert!(output.status.success(), "{}", stderr(&output));
    let absent = dir.path().join("no-parvagpu");
    let args = ["bench", "scale", "--parvagpu", absent.to_str().unwrap(), "--sizes", "6", "--time-limit", "1e20"];
    let output = tessera(&args, &store);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains("synthetic"), "{}", stdout(&output));
}

/// A count limit on the cheaper model of a mixed fleet constrains the
/// search: scenarios 5 and 6 with 1 to 6 H100s (cheaper per unit of work)
/// beside unlimited A100s are planned within the limit and verified
/// (scenario 5 with one H100 used to fail with "the fleet is too small:
/// the best plan found needs 5 h100-80gb GPUs").
#[test]
fn a_limited_model_in_a_mixed_fleet_constrains_the_search() {
    let Some(data) = parvagpu_data() else { return };
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let plan = dir.path().join("mixed.json");
    for k in [5, 6] {
        let mut inputs = scenario_inputs(&data, k);
        inputs.truncate(inputs.len() - 2); // its --gpu a100-80gb
        for count in 1..=6 {
            let h100 = format!("h100-80gb:cost=1.6,count={count}");
            let mut inputs: Vec<&str> = inputs.iter().map(String::as_str).collect();
            inputs.extend(["--gpu", "a100-80gb:cost=1", "--gpu", &h100]);
            // The limits must hold whether or not the search proves its plan
            // optimal in time (scenario 5's is not proven in 10 s).
            let mut args = vec!["plan", "--time-limit", "1", "--format", "json", "-o", plan.to_str().unwrap()];
            args.extend(&inputs);
            let output = tessera(&args, &store);
            assert!(output.status.success(), "scenario {k}, {count} H100: {}", stderr(&output));
            let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&plan).unwrap()).unwrap();
            let fleet = json["fleet"].as_array().unwrap();
            let used = fleet.iter().find(|f| f["gpu_model"] == "h100-80gb").unwrap()["gpus"].as_u64().unwrap();
            assert!(used <= count, "scenario {k}: {used} H100 of {count}");
            let mut args = vec!["verify", plan.to_str().unwrap()];
            args.extend(&inputs);
            let output = tessera(&args, &store);
            assert!(output.status.success(), "scenario {k}, {count} H100: {}", stdout(&output));
        }
    }
}

/// Measured data wins over the synthetic model of the same name: with H100s
/// beside the A100s ParvaGPU measured on, its measurements of mobilenetv2
/// and resnet50 are transferred to the H100 (the synthetic model used to
/// replace them), and the plan's notes say which profiles are estimates and
/// from what.
#[test]
fn measured_profiles_win_over_synthetic_ones_on_another_gpu() {
    let Some(data) = parvagpu_data() else { return };
    let dir = TempDir::new().unwrap();
    // The first --gpu (a100-80gb, last of the scenario's inputs) is the one
    // the ParvaGPU folder was measured on.
    let mut args: Vec<&str> = vec!["plan", "--format", "json"];
    let inputs = scenario_inputs(&data, 6);
    args.extend(inputs.iter().map(String::as_str));
    args.extend(["--gpu", "h100-80gb:cost=1.6"]);
    let output = tessera(&args, &store_in(&dir));
    assert!(output.status.success(), "{}", stderr(&output));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let notes: Vec<&str> = json["notes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
    assert!(!notes.iter().any(|n| n.contains("synthetic profile model")), "{notes:?}");
    for model in ["mobilenetv2", "resnet50", "bert"] {
        let expected = format!("profiles of {model} on h100-80gb are estimated from a100-80gb measurements");
        assert!(notes.iter().any(|n| n.starts_with(&expected)), "{model}: {notes:?}");
    }
}

/// Runs the binary and kills it after `seconds` (a guard against hangs,
/// not a speed assertion).
fn tessera_within(args: &[&str], store: &Path, seconds: u64) -> std::process::Output {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(args)
        .env("TESSERA_STORE", store)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > std::time::Duration::from_secs(seconds) {
            child.kill().unwrap();
            panic!("{args:?} still ran after {seconds} s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// A service at 1e3 to 1e15 req/s gets a plan or a one-line error naming it
/// and the GPU ceiling, quickly and in bounded memory (1e10 used to run for
/// minutes, 3e10 to exhaust memory and 1e12 to blame the latency SLO).
/// An SLO of billions of full batches, or a profiled latency of 1e-300 ms,
/// plans at once (these searches ran without end, past `--time-limit`).
#[test]
fn absurd_slos_and_latencies_plan_at_once() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    for slo_ms in ["1e8", "1e20", "1e300"] {
        let slo = dir.path().join("far.csv");
        std::fs::write(&slo, format!("service,model,rate_rps,latency_ms\nsearch,bert-base,100,{slo_ms}\n")).unwrap();
        let output =
            tessera_within(&["plan", "--demo", "--slo", slo.to_str().unwrap(), "--time-limit", "1"], &store, 60);
        assert!(output.status.success(), "{slo_ms}: {}", stderr(&output));
        assert!(stdout(&output).contains("1 GPU"), "{slo_ms}: {}", stdout(&output));
    }
    let profiles = dir.path().join("tiny.csv");
    std::fs::write(
        &profiles,
        "gpu_model,model,size_gpcs,batch,procs,throughput_rps,latency_ms\na100-80gb,m,1,8,1,666,1e-300\n",
    )
    .unwrap();
    let slo = dir.path().join("slo.csv");
    std::fs::write(&slo, "service,model,rate_rps,latency_ms\nshop,m,300,40\n").unwrap();
    let args = ["plan", "--profiles", profiles.to_str().unwrap(), "--slo", slo.to_str().unwrap(), "--time-limit", "1"];
    let output = tessera_within(&args, &store, 60);
    assert!(output.status.success(), "{}", stderr(&output));
}

#[test]
fn huge_rates_get_a_plan_or_the_ceiling_error() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let mut sources = vec![(vec!["--demo".to_string()], "resnet50")];
    if let Some(data) = parvagpu_data() {
        sources.push((vec!["--profiles".to_string(), data.join("prof_data").display().to_string()], "resnet50"));
    }
    for (profiles, model) in &sources {
        for exponent in 3..=15 {
            let slo = dir.path().join(format!("huge-1e{exponent}.csv"));
            std::fs::write(&slo, format!("service,model,rate_rps,latency_ms\nbig,{model},1e{exponent},200\n")).unwrap();
            let plan = dir.path().join("huge.json");
            let mut args: Vec<&str> = profiles.iter().map(String::as_str).collect();
            args.splice(0..0, ["plan"]);
            args.extend(["--slo", slo.to_str().unwrap(), "--time-limit", "2", "--format", "json"]);
            args.extend(["-o", plan.to_str().unwrap()]);
            let output = tessera_within(&args, &store, 30);
            if output.status.success() {
                let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&plan).unwrap()).unwrap();
                assert!(json["gpu_count"].as_u64().unwrap() <= 100_000, "1e{exponent}");
                assert_eq!(json["services"][0]["met"], true, "1e{exponent}");
            } else {
                let message = stderr(&output);
                assert_eq!(message.trim_end().lines().count(), 1, "{message}");
                assert!(message.contains("'big'") && message.contains("ceiling of 100000 GPUs"), "{message}");
                assert!(exponent >= 8, "1e{exponent} fits under the ceiling: {message}");
            }
        }
    }
}

/// The long-tail catalogue (300 services, `long_tail_catalogue.py`) with
/// `--share serialized`: at most 12 GPUs (the issue's goal), under 40% of
/// the dedicated plan's, `verify` passing, every service met; and every
/// shared instance, read from the plan's `members` form, holding its
/// members' memory within the memory its profile's name gives, simulated here apart
/// from Tessera (one executor, one request at a time in arrival order,
/// Poisson arrivals, every batch 5% slower than the plan says) keeps each
/// member at least 99% within its SLO.
#[test]
fn the_long_tail_shares_slices_and_every_member_keeps_its_slo() {
    let dir = TempDir::new().unwrap();
    let Some(services) = tessera_testkit::long_tail_catalogue(300, dir.path()) else { return };
    let profiles = parvagpu_data().unwrap().join("prof_data");
    let (profiles, services) = (profiles.to_str().unwrap(), services.to_str().unwrap());
    let store = store_in(&dir);
    let plan_path = dir.path().join("shared.json");
    let plan_args = ["plan", "--profiles", profiles, "--slo", services, "--format", "json"];
    let dedicated = tessera(&plan_args, &store);
    assert!(dedicated.status.success(), "{}", stderr(&dedicated));
    let dedicated: serde_json::Value = serde_json::from_slice(&dedicated.stdout).unwrap();
    let mut shared_args = plan_args.to_vec();
    shared_args.extend(["--share", "serialized", "-o", plan_path.to_str().unwrap()]);
    let output = tessera(&shared_args, &store);
    assert!(output.status.success(), "{}", stderr(&output));
    let output = tessera(&["verify", plan_path.to_str().unwrap(), "--profiles", profiles, "--slo", services], &store);
    assert!(output.status.success(), "{}", stdout(&output));
    let plan: serde_json::Value = serde_json::from_slice(&std::fs::read(&plan_path).unwrap()).unwrap();
    let (gpus, without) = (plan["gpu_count"].as_u64().unwrap(), dedicated["gpu_count"].as_u64().unwrap());
    assert!(gpus <= 12 && (gpus as f64) < 0.4 * without as f64, "{gpus} GPUs shared, {without} dedicated");
    assert!(plan["services"].as_array().unwrap().iter().all(|s| s["met"] == true));
    let slos: std::collections::HashMap<String, f64> = plan["services"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["service"].as_str().unwrap().to_string(), s["latency_slo_ms"].as_f64().unwrap()))
        .collect();
    let mut members_seen = 0;
    for (k, instance) in
        plan["gpus"].as_array().unwrap().iter().flat_map(|g| g["instances"].as_array().unwrap()).enumerate()
    {
        let Some(members) = instance["members"].as_array() else { continue };
        assert_eq!(instance["sharing"], "serialized");
        let profile = instance["profile"].as_str().unwrap();
        let instance_gb: f64 = profile.split_once('.').unwrap().1.trim_end_matches("gb").parse().unwrap();
        let members_gb: f64 = members.iter().map(|m| m["memory_gb"].as_f64().unwrap()).sum();
        assert!(members_gb <= instance_gb, "instance {k} ({profile}): its members need {members_gb} GB");
        let members: Vec<(f64, f64, f64)> = members
            .iter()
            .map(|m| {
                let busy_ms = m["latency_ms"].as_f64().unwrap().max(1000.0 / m["throughput_rps"].as_f64().unwrap());
                (m["capacity_rps"].as_f64().unwrap(), 1.05 * busy_ms, slos[m["service"].as_str().unwrap()])
            })
            .collect();
        members_seen += members.len();
        for (member, (within, requests)) in simulate_serialized(&members, 400_000, k as u64 + 1).iter().enumerate() {
            // Not statistically below 99%: three standard errors of the
            // member's own sample.
            let noise = 3.0 * (0.99 * 0.01 / *requests as f64).sqrt();
            assert!(*within >= 0.99 - noise, "instance {k} member {member}: {within} of {requests} within its SLO");
        }
    }
    assert!(members_seen >= 250, "{members_seen} services share");
}

/// Each member's share of requests within its SLO, and its requests, on
/// one executor serving requests one at a time in arrival order: `members`
/// are (rate req/s, batch time ms, SLO ms); `requests` Poisson arrivals in
/// all, each a member's in proportion to its rate (uniforms from a 64-bit
/// LCG, nothing of Tessera's).
fn simulate_serialized(members: &[(f64, f64, f64)], requests: usize, seed: u64) -> Vec<(f64, usize)> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut uniform = move || {
        state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        ((state >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    };
    let total_rps: f64 = members.iter().map(|m| m.0).sum();
    let (mut now_ms, mut free_at_ms) = (0.0_f64, 0.0_f64);
    let mut counts = vec![(0usize, 0usize); members.len()];
    for _ in 0..requests {
        now_ms -= uniform().ln() / total_rps * 1000.0;
        let mut pick = uniform() * total_rps;
        let member = members.iter().position(|m| {
            pick -= m.0;
            pick < 0.0
        });
        let member = member.unwrap_or(members.len() - 1);
        let finish_ms = now_ms.max(free_at_ms) + members[member].1;
        free_at_ms = finish_ms;
        counts[member].0 += 1;
        counts[member].1 += usize::from(finish_ms - now_ms <= members[member].2);
    }
    counts.iter().map(|&(all, within)| (if all == 0 { 1.0 } else { within as f64 / all as f64 }, all.max(1))).collect()
}

/// Light services on the built-in profiles with `--share serialized`: the
/// table shows shared tiles, `simulate serve` runs the shared instances,
/// `report` draws them, `diff` (and its steps) restarts only the executor
/// a member leaves, the plan CSV holds a row per member and verifies, and
/// sharing outside its model is refused at once.
#[test]
fn a_shared_plan_simulates_and_the_commands_that_cannot_run_it_say_so() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let slo = dir.path().join("light.csv");
    let mut csv = String::from("service,model,rate_rps,latency_ms\n");
    for k in 0..12 {
        csv.push_str(&format!("light-{k},resnet50,{},150\n", 2 + k % 5));
    }
    std::fs::write(&slo, csv).unwrap();
    let (slo, plan) = (slo.to_str().unwrap(), dir.path().join("shared.json"));
    let output = tessera(&["plan", "--demo", "--slo", slo, "--share", "serialized"], &store);
    assert!(output.status.success(), "{}", stderr(&output));
    let table = stdout(&output);
    assert!(table.contains("shared by") && table.contains("1g serialized with"), "{table}");
    let output = tessera(
        &["plan", "--demo", "--slo", slo, "--share", "serialized", "--format", "json", "-o", plan.to_str().unwrap()],
        &store,
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let output = tessera(&["simulate", "serve", plan.to_str().unwrap(), "--demo", "--seconds", "30"], &store);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains("light-11"), "{}", stdout(&output));
    let output = tessera(&["report", plan.to_str().unwrap(), "--format", "svg"], &store);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains(r#"<g class="tile" data-members="light-"#), "{}", stdout(&output));
    // One member leaves its shared instance: the diff restarts that
    // instance's executor, one process, and keeps every other member.
    let mut document: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    let instances = document["gpus"][0]["instances"].as_array_mut().unwrap();
    let shared = instances.iter_mut().find(|i| i.get("members").is_some()).unwrap();
    let left = shared["members"].as_array_mut().unwrap().pop().unwrap();
    let without = dir.path().join("without.json");
    std::fs::write(&without, document.to_string()).unwrap();
    let output = tessera(&["diff", plan.to_str().unwrap(), without.to_str().unwrap(), "--format", "json"], &store);
    assert!(output.status.success(), "{}", stderr(&output));
    let diff: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(diff["totals"]["processes_restarted"], 1, "{diff}");
    assert_eq!(diff["totals"]["services_changed"], 1, "{diff}");
    assert_eq!(diff["services"][0]["service"], left["service"], "{diff}");
    // Its steps stop that executor and start it again without the member.
    let output = tessera(&["diff", plan.to_str().unwrap(), without.to_str().unwrap(), "--steps"], &store);
    assert!(output.status.success(), "{}", stderr(&output));
    let steps = stdout(&output).split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(steps.contains("stop the executor of") && steps.contains("start a serialized executor of"), "{steps}");
    // A replan of it shares too, and keeps its shared instances.
    let output =
        tessera(&["plan", "--demo", "--slo", slo, "--from", plan.to_str().unwrap(), "--format", "json"], &store);
    assert!(output.status.success(), "{}", stderr(&output));
    let replanned: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    let notes = replanned["notes"].to_string();
    assert!(notes.contains("replanned with shared instances: ") && notes.contains(" kept where they run"), "{notes}");
    // As CSV: one row per member, which `verify` reads back.
    let csv_plan = dir.path().join("shared.csv");
    let output = tessera(
        &["plan", "--demo", "--slo", slo, "--share", "serialized", "--format", "csv", "-o", csv_plan.to_str().unwrap()],
        &store,
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let rows = std::fs::read_to_string(&csv_plan).unwrap();
    assert_eq!(rows.matches(",serialized,").count(), 12, "{rows}");
    let output = tessera(&["verify", csv_plan.to_str().unwrap(), "--demo", "--slo", slo], &store);
    assert!(output.status.success(), "{}{}", stdout(&output), stderr(&output));
    let output = tessera(&["plan", "--demo", "--slo", slo, "--share", "serialized", "--latency-rule", "parva"], &store);
    assert!(stderr(&output).contains("percentile rule"), "{}", stderr(&output));
    let output = tessera(&["plan", "--demo", "--slo", slo, "--share", "mps"], &store);
    assert!(stderr(&output).contains("unknown sharing 'mps'"), "{}", stderr(&output));
}

#[test]
fn off_a_terminal_a_plan_says_now_and_then_that_it_runs() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let every = Path::new("0.001");
    let output =
        run_with_env(&["plan", "--demo"], &[("TESSERA_STORE", store.as_path()), ("TESSERA_PROGRESS_EVERY_S", every)]);
    assert!(output.status.success(), "{}", stderr(&output));
    let logged = stderr(&output);
    let line =
        "progress: planning 6 services (optimal strategy, the segments' capacities, then a search of up to 10 s) (";
    assert!(logged.lines().any(|l| l.starts_with(line) && l.ends_with(" s)")), "{logged}");
}
