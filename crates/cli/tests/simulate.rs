//! `tessera simulate`, `tessera simulate generate`, and the request-level
//! `tessera simulate serve` and `tessera verify --simulate`.

use std::path::{Path, PathBuf};

use tempfile::TempDir;

use crate::util::{fails_with, stderr, stdout, store_in, tessera, usage_error};

/// Toy A of the oversubscription design as a trace file: jobs (GB, ms)
/// A (2, 500), B (4, 100), C (3, 400), D (1, 200) at 10 GB/s in `memory_gb`.
fn toy_a_trace(dir: &Path, memory_gb: u64) -> PathBuf {
    let client = |name: &str, gb: u64, ms: u64| serde_json::json!({"name": name, "operations": [{"compute_ms": ms, "buffers": [{"name": "data", "bytes": gb * 1_000_000_000, "dirty": false}], "ephemeral_bytes": 0}]});
    let trace = serde_json::json!({
        "gpu": {"memory_bytes": memory_gb * 1_000_000_000, "h2d_bytes_per_s": 1e10, "d2h_bytes_per_s": 1e10, "copy_latency_ns": 0},
        "clients": [client("A", 2, 500), client("B", 4, 100), client("C", 3, 400), client("D", 1, 200)],
    });
    let path = dir.join(format!("toy-a-{memory_gb}.json"));
    std::fs::write(&path, serde_json::to_vec(&trace).unwrap()).unwrap();
    path
}

#[test]
fn simulate_reproduces_toy_a_and_reports_bounds() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let run = |path: &Path, scheduler: &str, prefetch: &str| {
        let args = [
            "simulate",
            "--trace",
            path.to_str().unwrap(),
            "--scheduler",
            scheduler,
            "--prefetch",
            prefetch,
            "--format",
            "json",
        ];
        let output = tessera(&args, &store);
        assert!(output.status.success(), "{}", stderr(&output));
        serde_json::from_slice::<serde_json::Value>(&output.stdout).unwrap()
    };
    let small = toy_a_trace(dir.path(), 6);
    assert_eq!(run(&small, "fifo", "passive")["makespan_ms"], 1700.0);
    assert_eq!(run(&small, "exhaustive", "passive")["makespan_ms"], 1400.0);
    assert_eq!(run(&small, "ga", "passive")["makespan_ms"], 1400.0);
    let big = toy_a_trace(dir.path(), 1000);
    let johnson = run(&big, "johnson", "active");
    assert_eq!(johnson["makespan_ms"], 1300.0);
    assert_eq!(johnson["lower_bound_ms"], 1300.0);
    assert_eq!(johnson["johnson_unlimited_memory_ms"], 1300.0);
    assert_eq!(johnson["schedule"], serde_json::json!(["D", "A", "C", "B"]));
    assert_eq!(johnson["clients"].as_array().unwrap().len(), 4);

    let gantt = dir.path().join("gantt.svg");
    for (scheduler, name) in [("greedy", "greedy"), ("ga", "genetic algorithm"), ("fifo", "round-robin")] {
        let args = [
            "simulate",
            "--trace",
            small.to_str().unwrap(),
            "--scheduler",
            scheduler,
            "--gantt",
            gantt.to_str().unwrap(),
        ];
        assert!(tessera(&args, &store).status.success());
        let svg = std::fs::read_to_string(&gantt).unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains(&format!("toy-a-6.json — {name}</text>")), "title names the {name} scheduler: {svg}");
    }
}

#[test]
fn simulate_generates_traces_and_rejects_bad_ones() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let generated =
        tessera(&["simulate", "generate", "--clients", "6", "--oversubscription", "2", "--seed", "4"], &store);
    assert!(generated.status.success(), "{}", stderr(&generated));
    let path = dir.path().join("generated.json");
    std::fs::write(&path, &generated.stdout).unwrap();
    let output = tessera(&["simulate", "--trace", path.to_str().unwrap(), "--scheduler", "greedy"], &store);
    assert!(output.status.success() && stdout(&output).contains("lower bound"), "{}", stderr(&output));

    let too_big = toy_a_trace(dir.path(), 3);
    fails_with(&["simulate", "--trace", too_big.to_str().unwrap()], &store, &["toy-a-3.json", "B"]);
    let text = std::fs::read_to_string(toy_a_trace(dir.path(), 6)).unwrap().replace("1e10", "0");
    let zero = dir.path().join("zero.json");
    std::fs::write(&zero, text.replace("10000000000.0", "0.0")).unwrap();
    fails_with(&["simulate", "--trace", zero.to_str().unwrap()], &store, &["zero.json", "bytes_per_s"]);
    usage_error(&["simulate", "--trace", path.to_str().unwrap(), "--prefetch", "sometimes"], &store, &["sometimes"]);
    fails_with(
        &["simulate", "--trace", path.to_str().unwrap(), "--scheduler", "exhaustive"],
        &store,
        &["at most 10 operations"],
    );
    fails_with(&["simulate", "generate", "--oversubscription=-1"], &store, &["oversubscription"]);
    for population in ["5", "10", "0", "many"] {
        let args = ["simulate", "--trace", path.to_str().unwrap(), "--scheduler", "ga", "--population", population];
        usage_error(&args, &store, &["--population", population, "above 10"]);
    }
    let args = ["simulate", "--trace", path.to_str().unwrap(), "--scheduler", "ga", "--population", "11"];
    assert!(tessera(&args, &store).status.success());
}

#[test]
fn simulate_rejects_times_that_do_not_fit_its_clock() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let toy: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(toy_a_trace(dir.path(), 6)).unwrap()).unwrap();
    type Edit = fn(&mut serde_json::Value);
    let cases: [(&str, Edit, &[&str]); 5] = [
        // Used to run, with compute turned into a wrapped-around 0.
        (
            "compute",
            |t| t["clients"][1]["operations"][0]["compute_ms"] = 2e13.into(),
            &["client 'B' operation 0: compute_ms", "2^64 ns"],
        ),
        (
            "total",
            |t| {
                for client in 0..2 {
                    t["clients"][client]["operations"][0]["compute_ms"] = 1e13.into();
                }
            },
            &["client 'B' operation 0: the trace's total time", "2^64 ns"],
        ),
        (
            "h2d",
            |t| t["gpu"]["h2d_bytes_per_s"] = 1e-3.into(),
            &["client 'A' operation 0: buffer 'data'", "gpu.h2d_bytes_per_s = 0.001"],
        ),
        ("d2h", |t| t["gpu"]["d2h_bytes_per_s"] = 1e-3.into(), &["buffer 'data'", "gpu.d2h_bytes_per_s"]),
        (
            "latency",
            |t| t["gpu"]["copy_latency_ns"] = u64::MAX.into(),
            &["buffer 'data'", "gpu.copy_latency_ns = 18446744073709551615"],
        ),
    ];
    for (name, edit, needles) in cases {
        let mut trace = toy.clone();
        edit(&mut trace);
        let path = dir.path().join(format!("{name}.json"));
        std::fs::write(&path, serde_json::to_vec(&trace).unwrap()).unwrap();
        let mut expected = vec![path.file_name().unwrap().to_str().unwrap()];
        expected.extend_from_slice(needles);
        fails_with(&["simulate", "--trace", path.to_str().unwrap()], &store, &expected);
    }
}

#[test]
fn simulate_generate_hits_the_requested_oversubscription_and_pressure_rises_with_it() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let mut moved = Vec::new();
    // 4 and 5 used to give the same trace (3.998× of working sets, scratch included).
    for requested in [1.0, 2.0, 4.0, 5.0, 8.0] {
        let over = requested.to_string();
        let args = ["simulate", "generate", "--clients", "24", "--operations", "2", "--oversubscription", &over];
        let generated = tessera(&args, &store);
        assert!(generated.status.success(), "{}", stderr(&generated));
        let path = dir.path().join(format!("over-{requested}.json"));
        std::fs::write(&path, &generated.stdout).unwrap();
        let args = ["simulate", "--trace", path.to_str().unwrap(), "--scheduler", "fifo", "--format", "json"];
        let output = tessera(&args, &store);
        assert!(output.status.success(), "{}", stderr(&output));
        let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        let measured = json["oversubscription"].as_f64().unwrap();
        assert!((measured - requested).abs() / requested < 1e-6, "{measured} vs {requested}");
        moved.push(json["h2d_bytes"].as_u64().unwrap());
    }
    assert!(moved.windows(2).all(|w| w[0] < w[1]), "bytes moved to the GPU: {moved:?}");
    // Two clients cannot reach 1000×: said, with what the trace has.
    let args = ["simulate", "generate", "--clients", "2", "--oversubscription", "1000"];
    let generated = tessera(&args, &store);
    assert!(generated.status.success(), "{}", stderr(&generated));
    let note = stderr(&generated);
    assert!(
        note.starts_with("note: 1000× cannot be reached with 2 clients") && note.contains("the trace has"),
        "{note}"
    );
}

#[test]
fn simulate_reports_the_memory_aware_bound_and_run_needs_a_gpu() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let trace = toy_a_trace(dir.path(), 6);
    let args = ["simulate", "--trace", trace.to_str().unwrap(), "--scheduler", "fifo", "--format", "json"];
    let output = tessera(&args, &store);
    assert!(output.status.success(), "{}", stderr(&output));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let (plain, memory) = (json["lower_bound_ms"].as_f64().unwrap(), json["memory_lower_bound_ms"].as_f64().unwrap());
    assert!(plain <= memory && memory <= json["makespan_ms"].as_f64().unwrap(), "{json}");
    let report = dir.path().join("report.json");
    std::fs::write(&report, &output.stdout).unwrap();
    // This machine has no GPU (NVML is absent): said in one line, after the
    // schedule file was read and checked.
    let run = ["simulate", "run", trace.to_str().unwrap(), "--schedule", report.to_str().unwrap(), "--gpu", "0"];
    fails_with(&run, &store, &["no GPU to run the schedule on"]);
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, r#"["A", "B", "C", "X"]"#).unwrap();
    let run = ["simulate", "run", trace.to_str().unwrap(), "--schedule", bad.to_str().unwrap(), "--gpu", "0"];
    fails_with(&run, &store, &["bad.json", "entry 3: 'X' is not a client of the trace"]);
    std::fs::write(&bad, r#"["A", "B", "C"]"#).unwrap();
    fails_with(&run, &store, &["bad.json", "'D' appears 0 times"]);
}

/// The demo planned under the default rule, and under ParvaGPU's (which
/// packs segments to full utilisation), as JSON plans in `dir`.
fn demo_plans(dir: &TempDir, store: &Path) -> (PathBuf, PathBuf) {
    let planned = dir.path().join("plan.json");
    let packed = dir.path().join("parva.json");
    for (path, extra) in [(&planned, &[][..]), (&packed, &["--latency-rule", "parva"][..])] {
        let mut args = vec!["plan", "--demo", "--format", "json", "-o", path.to_str().unwrap()];
        args.extend_from_slice(extra);
        let output = tessera(&args, store);
        assert!(output.status.success(), "{}", stderr(&output));
    }
    (planned, packed)
}

#[test]
fn simulate_serve_measures_every_service_of_a_plan_the_same_way_for_a_seed() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let (planned, _) = demo_plans(&dir, &store);
    let picture = dir.path().join("serving.html");
    let plan = planned.to_str().unwrap();
    // `simulate serve PLAN --demo --seconds 40 --format json` and `extra`.
    let serve = |extra: &[&str]| -> serde_json::Value {
        let mut args = vec!["simulate", "serve", plan, "--demo", "--seconds", "40", "--format", "json"];
        args.extend_from_slice(extra);
        let output = tessera(&args, &store);
        assert!(output.status.success(), "{}", stderr(&output));
        serde_json::from_slice(&output.stdout).unwrap()
    };
    let with_picture = ["--seed", "7", "--picture", picture.to_str().unwrap()];
    let report = serve(&with_picture);
    let services = report["services"].as_array().unwrap();
    assert_eq!(services.len(), 6);
    for service in services {
        let measures = &service["measures"];
        assert!(service["requests"].as_u64().unwrap() > 0, "{service}");
        assert!(measures["p50_ms"].as_f64().unwrap() <= measures["p99_ms"].as_f64().unwrap(), "{service}");
        assert!(["met", "unclear"].contains(&measures["verdict"].as_str().unwrap()), "{service}");
    }
    // The plan keeps 99% of each service's requests within its SLO, so
    // of all of them too.
    assert!(report["attainment"].as_f64().unwrap() >= 0.99, "{}", report["attainment"]);
    assert_eq!((report["arrivals"].as_str(), report["seed"].as_u64()), (Some("poisson"), Some(7)));
    // The same seed gives the same figures (the timing line aside).
    assert_eq!(serve(&with_picture)["services"], report["services"]);
    let page = std::fs::read_to_string(&picture).unwrap();
    assert_eq!(page.matches("<figure class=\"service\"").count(), 6, "one figure per service");
    assert!(page.contains("class=\"cdf\"") && page.contains("class=\"slo\""));

    // Judged in 10-s windows: the three whole ones after the 10-s warm-up.
    for service in serve(&["--window-s", "10"])["services"].as_array().unwrap() {
        let windows = &service["windows"];
        assert_eq!((windows["window_s"].as_f64(), windows["windows"].as_u64()), (Some(10.0), Some(3)), "{service}");
        assert!(windows["met"].as_u64().unwrap() <= 3, "{service}");
        let (worst, p5) = (windows["worst_attainment"].as_f64().unwrap(), windows["p5_attainment"].as_f64().unwrap());
        assert!(worst <= p5 && p5 <= 1.0, "{service}");
    }
    let table = tessera(&["simulate", "serve", plan, "--demo", "--seconds", "40", "--window-s", "10"], &store);
    assert!(stdout(&table).contains("win95") && stdout(&table).contains("3/3"), "{}", stdout(&table));
    assert!(page.contains("<th>windows met</th>"), "the picture's table counts windows");

    // Burstier arrivals than Poisson at the same rates: fewer requests within the SLO.
    let bursty = serve(&["--arrivals", "cv=4"]);
    assert!(
        bursty["attainment"].as_f64().unwrap() < report["attainment"].as_f64().unwrap(),
        "{}",
        bursty["attainment"]
    );
}

/// A plan the static checks refuse under the arrivals asked for still gets
/// its simulation: `verify --simulate` prints it and names the services
/// that miss in it after the violations.
#[test]
fn verify_simulate_simulates_a_plan_the_static_checks_refuse() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let (planned, _) = demo_plans(&dir, &store);
    let args = [
        "verify",
        planned.to_str().unwrap(),
        "--demo",
        "--simulate",
        "--seconds",
        "30",
        "--arrivals",
        "onoff=burst:3,on:5,off:30",
    ];
    let output = tessera(&args, &store);
    assert!(!output.status.success());
    assert!(stdout(&output).contains("all requests: "), "the simulation is printed: {}", stdout(&output));
    let said = stderr(&output);
    assert!(said.contains(" violations (under the percentile latency rule, onoff="), "{said}");
    assert!(said.contains("in simulation (onoff=burst:3,on:5,off:30 arrivals"), "{said}");
}

#[test]
fn verify_simulate_fails_naming_the_services_a_packed_plan_leaves_behind() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let (planned, packed) = demo_plans(&dir, &store);
    // ParvaGPU's rule passes its own check, but its segments run at full
    // load: under random arrivals queues build, and the simulation says so.
    let message = fails_with(
        &["verify", packed.to_str().unwrap(), "--demo", "--simulate", "--seconds", "30"],
        &store,
        &["parva.json: ", "miss their SLO in simulation (poisson arrivals, random routing", "search-ranking"],
    );
    assert!(message.starts_with("error: "), "{message}");
    // The default rule's plan passes, and --format json is one document.
    let output = tessera(
        &["verify", planned.to_str().unwrap(), "--demo", "--simulate", "--seconds", "60", "--format", "json"],
        &store,
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let document: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(document["ok"], true);
    assert_eq!(document["simulation"]["services"].as_array().unwrap().len(), 6);
}

#[test]
fn simulate_serve_refuses_bad_traffic_in_one_line() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let (planned, _) = demo_plans(&dir, &store);
    let plan = planned.to_str().unwrap();
    let bad_trace = dir.path().join("bad-trace.csv");
    std::fs::write(&bad_trace, "TIMESTAMP\n1\nnoon\n").unwrap();
    let trace = format!("trace={}", bad_trace.display());
    for (args, needles) in [
        (vec!["--arrivals", "cv=-1"], vec!["--arrivals cv=-1", "cv: -1 is not in (0, 10]"]),
        (vec!["--arrivals", "onoff=burst:2"], vec!["--arrivals onoff=burst:2", "on is missing"]),
        (vec!["--arrivals", &trace], vec!["bad-trace.csv:3: field 'TIMESTAMP'", "'noon'"]),
        (vec!["--seconds", "0"], vec!["seconds: 0 is not a positive duration"]),
        (vec!["--seconds", "5", "--warmup", "10"], vec!["warmup_s: 10 s is not in [0, 5)"]),
        (vec!["--slowdown", "-1"], vec!["slowdown: -1 is not a share in (-1, 10]"]),
    ] {
        let mut command = vec!["simulate", "serve", plan, "--demo"];
        command.extend(args);
        fails_with(&command, &store, &needles);
    }
    // A short run without a warm-up asked for gets a sixth of it, not 10 s.
    let short = tessera(&["simulate", "serve", plan, "--demo", "--seconds", "5", "--format", "json"], &store);
    assert!(short.status.success(), "{}", stderr(&short));
    let document: serde_json::Value = serde_json::from_str(&stdout(&short)).unwrap();
    assert!((document["warmup_s"].as_f64().unwrap() - 5.0 / 6.0).abs() < 1e-9, "{}", document["warmup_s"]);
    usage_error(&["simulate", "serve", plan, "--discipline", "fastest"], &store, &["fastest"]);
    // A trace out of order is read in time order, and said so.
    let shuffled = dir.path().join("shuffled.csv");
    std::fs::write(&shuffled, "TIMESTAMP\n0\n0.5\n0.2\n1\n0.9\n2\n").unwrap();
    let trace = format!("trace={}", shuffled.display());
    let output = tessera(&["simulate", "serve", plan, "--demo", "--seconds", "5", "--arrivals", &trace], &store);
    assert!(output.status.success(), "{}", stderr(&output));
    let said = stderr(&output);
    assert!(
        said.contains(
            "shuffled.csv: 2 timestamps come before the row above them; the arrivals are taken in time order"
        ),
        "{said}"
    );
}

#[test]
fn a_plan_for_bursty_arrivals_holds_under_them_where_the_poisson_plan_does_not() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let (poisson, _) = demo_plans(&dir, &store);
    let bursty = dir.path().join("bursty.json");
    let output =
        tessera(&["plan", "--demo", "--arrivals", "cv=2", "--format", "json", "-o", bursty.to_str().unwrap()], &store);
    assert!(output.status.success(), "{}", stderr(&output));
    let read = |path: &Path| -> serde_json::Value { serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap() };
    let (bursty_plan, poisson_plan) = (read(&bursty), read(&poisson));
    // The plan says what it was proven under, and bursts cost GPUs.
    assert_eq!(bursty_plan["traffic"]["arrivals"], "cv=2");
    assert!(bursty_plan["gpu_count"].as_u64() > poisson_plan["gpu_count"].as_u64(), "{}", bursty_plan["gpu_count"]);
    // Checked and simulated under the arrivals it records: every service met.
    let output = tessera(
        &["verify", bursty.to_str().unwrap(), "--demo", "--simulate", "--seconds", "60", "--format", "json"],
        &store,
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let document: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        (document["arrivals"].as_str(), document["simulation"]["arrivals"].as_str()),
        (Some("cv=2"), Some("cv=2"))
    );
    // The Poisson plan, checked under the same bursts, is refused segment by segment.
    fails_with(
        &["verify", poisson.to_str().unwrap(), "--demo", "--arrivals", "cv=2"],
        &store,
        &["plan.json: ", "under the percentile latency rule", "violation"],
    );
    let output = tessera(&["verify", poisson.to_str().unwrap(), "--demo", "--arrivals", "cv=2"], &store);
    assert!(stdout(&output).contains("capacity of"), "{}", stdout(&output));
    // Rules that assume evenly spaced arrivals take no other model.
    fails_with(
        &["plan", "--demo", "--latency-rule", "queueing", "--arrivals", "cv=2"],
        &store,
        &["the queueing rule assumes evenly spaced arrivals; cv=2 arrivals need the percentile rule"],
    );
}

/// A serving run measured on a lent H200 (the serving tests' fixture).
fn measured_run() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../serving/tests/fixtures/h200/resnet50-25s.json")
}

#[test]
fn simulate_measured_puts_a_gpu_run_beside_the_model() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let run = measured_run();
    let args = ["simulate", "measured", run.to_str().unwrap(), "--simulated-runs", "3"];
    let output = tessera(&args, &store);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    let rows: Vec<&str> = text.lines().filter(|line| line.starts_with("resnet50")).collect();
    assert_eq!(rows.len(), 3, "{text}");
    // The 0.5 load: measured 1.663 ms median and 2.413 ms p99 on the GPU.
    assert!(rows[0].contains(" 0.50 ") && rows[0].contains("1.663") && rows[0].contains("2.413"), "{text}");
    let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(words.contains("p99 of 3 simulated runs as long as the measured one"), "{text}");
    // Served 0.6% slower than profiled: the model's p99 with that, 2.430 ms against 2.410 ms.
    assert!(rows[0].contains("2.430"), "{text}");

    let json =
        tessera(&["simulate", "measured", run.to_str().unwrap(), "--simulated-runs", "2", "--format", "json"], &store);
    assert!(json.status.success(), "{}", stderr(&json));
    let runs: serde_json::Value = serde_json::from_str(&stdout(&json)).unwrap();
    let level = &runs[0]["levels"][1];
    assert_eq!(level["measured"]["utilisation"], 0.8);
    let (model, measured) = (level["model_p99_ms"].as_f64().unwrap(), level["measured"]["p99_ms"].as_f64().unwrap());
    assert!((model / measured - 1.0).abs() < 0.05, "model p99 {model} against measured {measured}");
    let range = level["simulated_p99_range_ms"].as_array().unwrap();
    assert!(range[0].as_f64().unwrap() <= range[1].as_f64().unwrap(), "{level}");
}

/// A plan's capacity served and counted against its SLO (the serving
/// tests' synthetic fixture in `torch_serve.py --rate-rps --slo-ms`'s
/// shape): a table of the share within the SLO, measured and the model's.
#[test]
fn simulate_measured_says_whether_a_planned_capacity_kept_its_slo() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let run = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../serving/tests/fixtures/synthetic/planned-resnet50-2procs.json");
    let output = tessera(&["simulate", "measured", run.to_str().unwrap(), "--simulated-runs", "1"], &store);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    let row = text.lines().find(|line| line.contains("17698")).unwrap_or_else(|| panic!("{text}"));
    assert!(row.contains("99.310%") && row.ends_with("kept"), "{row}");
    let json =
        tessera(&["simulate", "measured", run.to_str().unwrap(), "--simulated-runs", "1", "--format", "json"], &store);
    let runs: serde_json::Value = serde_json::from_str(&stdout(&json)).unwrap();
    assert_eq!(runs[0]["planned_capacity_rps"], 17698.1);
    let model = runs[0]["levels"][0]["model_within_slo"].as_f64().unwrap();
    assert!(row.contains(&format!("{:.3}%", model * 100.0)), "{row} against the model's {model}");
    // Without an SLO counted, no such table.
    let plain = tessera(&["simulate", "measured", measured_run().to_str().unwrap(), "--simulated-runs", "1"], &store);
    assert!(!stdout(&plain).contains("requests counted against an SLO"), "{}", stdout(&plain));
}

/// A shared instance served on a GPU (the serving tests' synthetic fixture
/// in `torch_serve.py --members`'s shape): each member beside the
/// serialized model, in a table and in JSON, after a segment's run.
#[test]
fn simulate_measured_puts_each_member_of_a_shared_run_beside_the_model() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let shared =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../serving/tests/fixtures/synthetic/shared-four-members.json");
    let (shared, segment) = (shared.to_str().unwrap(), measured_run());
    let args = ["simulate", "measured", segment.to_str().unwrap(), shared, "--simulated-runs", "1"];
    let output = tessera(&args, &store);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    let members: Vec<&str> = text.lines().filter(|line| line.trim_start().starts_with("1 ")).collect();
    assert_eq!(members.len(), 4, "{text}");
    // Measured 58.0% busy; the rates and batch times give 63.95%.
    assert!(members[0].contains("58.0%") && members[0].contains("63.9%") && members[0].contains("99.800%"), "{text}");
    let json = tessera(&[&args[..], &["--format", "json"]].concat(), &store);
    let runs: serde_json::Value = serde_json::from_str(&stdout(&json)).unwrap();
    assert_eq!(runs[0]["model"], "resnet50");
    let member = &runs[1]["members"][3];
    assert_eq!(member["measured"]["model"], "vgg16");
    assert!(member["model_within_slo"].as_f64().unwrap() > 0.99, "{member}");
    fails_with(&["simulate", "measured", shared.replace("shared-four", "nothing").as_str()], &store, &["cannot read"]);
}

/// On every run measured on a GPU up to 0.95 of full-batch throughput, the
/// rate the planner would route (its default margin) for a p99 SLO equal
/// to the measured p99 is at most the rate the GPU was measured at: the
/// planner never promises a latency at a rate where the GPU did not
/// deliver it.
#[test]
fn the_planner_never_routes_more_than_the_gpu_served_at_the_latency_it_measured() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../serving/tests/fixtures/h200");
    let mut runs: Vec<String> = std::fs::read_dir(&fixtures)
        .unwrap()
        .map(|entry| entry.unwrap().path().to_str().unwrap().to_string())
        .filter(|path| path.ends_with(".json"))
        .collect();
    runs.sort();
    assert_eq!(runs.len(), 6, "{runs:?}");
    let mut args = vec!["simulate", "measured", "--simulated-runs", "1", "--format", "json"];
    args.extend(runs.iter().map(String::as_str));
    let output = tessera(&args, &store);
    assert!(output.status.success(), "{}", stderr(&output));
    let compared: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    let mut levels = 0;
    for run in compared.as_array().unwrap() {
        for level in
            run["levels"].as_array().unwrap().iter().filter(|l| l["measured"]["utilisation"].as_f64() <= Some(0.95))
        {
            let capacity = level["capacity_rps_at_measured_p99"].as_f64().unwrap();
            let arrived = level["measured"]["arrived_rps"].as_f64().unwrap();
            assert!(capacity <= arrived, "{}: {capacity} req/s routed for a measured {arrived} req/s", run["file"]);
            assert_eq!(level["margin"].as_f64(), Some(tessera_plan::DEFAULT_MARGIN));
            levels += 1;
        }
    }
    assert!(levels >= 10, "{levels} levels");
}

#[test]
fn simulate_measured_refuses_a_file_that_is_not_a_run() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let plan = dir.path().join("plan.json");
    std::fs::write(&plan, r#"{"version": 3, "gpus": []}"#).unwrap();
    fails_with(
        &["simulate", "measured", plan.to_str().unwrap()],
        &store,
        &["not a measured serving run", "missing field `model`"],
    );
    usage_error(
        &["simulate", "measured", measured_run().to_str().unwrap(), "--simulated-runs", "0"],
        &store,
        &["--simulated-runs"],
    );
}

/// `simulate runs`: the made-up campaign of tessera-sim's fixtures, each
/// run's error and the gains, as a table and as JSON; a run given twice is
/// refused naming it, a file that is no run naming the file.
#[test]
fn simulate_runs_compares_gpu_runs_with_their_simulations() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sim/tests/fixtures/runs/synthetic");
    let mut runs: Vec<String> =
        std::fs::read_dir(&folder).unwrap().map(|e| e.unwrap().path().display().to_string()).collect();
    runs.sort();
    let args = |extra: &[&str]| -> Vec<String> {
        let mut args = vec!["simulate".to_string(), "runs".to_string()];
        args.extend(runs.iter().cloned());
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    };
    let output = tessera(&args(&[]).iter().map(String::as_str).collect::<Vec<_>>(), &store);
    assert!(output.status.success(), "{}", stderr(&output));
    let table = stdout(&output);
    assert!(table.contains("worst makespan error: 5.4%"), "{table}");
    assert!(table.contains("ga over fifo (prefetch active)"), "{table}");
    let output = tessera(&args(&["--format", "json"]).iter().map(String::as_str).collect::<Vec<_>>(), &store);
    let json: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(json["runs"].as_array().unwrap().len(), 5);
    assert_eq!(json["gains"].as_array().unwrap().len(), 5);

    let first = runs[0].clone();
    fails_with(
        &["simulate", "runs", &first, &first],
        &store,
        &["measured run: fifo with prefetch active is given twice"],
    );
    let trace = toy_a_trace(dir.path(), 4);
    fails_with(&["simulate", "runs", trace.to_str().unwrap()], &store, &["not a `simulate run --format json` run"]);
}
