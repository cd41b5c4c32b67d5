//! `tessera autopilot run`: a traffic file replayed (decisions, journal,
//! plan file), bad input, and a real Prometheus scraping a test exporter
//! whose counters follow the same file — the same decisions; Prometheus
//! stopped mid-run makes the autopilot hold, and it resumes when
//! Prometheus is back. Applied to a fake cluster (`--apply k8s`, the
//! agents played in the test): every new plan runs, the last one recorded.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use tempfile::TempDir;
use tessera_core::{GpuModel, Plan};
use tessera_core::{TrafficCurve, TrafficPoint};
use tessera_gpu::FakeNvidiaSmi;
use tessera_k8s::{
    cluster_status, read_node_part, reconcile_node, running_plan, AgentOptions, Cluster, ClusterOptions, FakeApiServer,
    Outcome as AgentOutcome, PlanSource, SERVICE_LABEL,
};

use crate::util::{fails_with, stderr, stdout, store_in, tessera, usage_error};

/// Two of the demo's services.
const SLO: &str =
    "service,model,rate_rps,latency_ms\nphoto-tagging,resnet50,2500,80\nsearch-ranking,bert-base,600,120\n";

/// Seconds between decisions in these tests.
const INTERVAL_S: f64 = 3.0;

/// The traffic: low, high from 7.5 s, low again from 16.5 s; each change
/// halfway between two decisions (every 3 s, time enough for a debug
/// build's replan on a loaded machine), so a rate read over less than a
/// second before a decision sees one level only.
const TRAFFIC: &str = "time_s,service,rate_rps\n\
    0,photo-tagging,800\n0,search-ranking,150\n\
    7.5,photo-tagging,6000\n7.5,search-ranking,1200\n\
    16.5,photo-tagging,800\n16.5,search-ranking,150\n";

/// Decisions the traffic needs: the start, the scale-up, the scale-down
/// once the window of high rates has passed.
const DECISIONS: usize = 10;

/// The controller's options of these tests: instant reconfigurations (no
/// hold while one runs) and scale-downs taken as soon as confirmed.
const CONTROLLER: [&str; 14] = [
    "--stop-s",
    "0",
    "--destroy-s",
    "0",
    "--create-s",
    "0",
    "--start-s",
    "0",
    "--scale-down-after-min",
    "0",
    "--interval-s",
    "3",
    "--max-reconfigurations-per-hour",
    "100",
];

fn write(dir: &TempDir, name: &str, text: &str) -> String {
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// The JSON lines of a run's output.
fn decisions(text: &str) -> Vec<Value> {
    text.lines().map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"))).collect()
}

/// (action, GPUs after) of each decision.
fn actions(decisions: &[Value]) -> Vec<(String, u64)> {
    decisions.iter().map(|d| (d["action"].as_str().unwrap().to_string(), d["gpus_after"].as_u64().unwrap())).collect()
}

/// The file replayed at once, as a dry run: its decisions.
fn replay(dir: &TempDir, store: &Path, extra: &[&str]) -> Vec<Value> {
    let (slo, traffic) = (write(dir, "slo.csv", SLO), write(dir, "traffic.csv", TRAFFIC));
    let mut args = vec!["autopilot", "run", "--demo", "--slo", &slo, "--rates-file", &traffic, "--rates-window-s"];
    args.extend(["0.9", "--no-wait", "--max-decisions", "10", "--format", "json"]);
    args.extend(CONTROLLER);
    args.extend(extra);
    let output = tessera(&args, store);
    assert!(output.status.success(), "{}", stderr(&output));
    decisions(&stdout(&output))
}

#[test]
fn a_replayed_file_scales_up_early_and_down_late_and_journals_every_decision() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let made = replay(&dir, &store, &["--dry-run"]);
    assert_eq!(made.len(), DECISIONS);
    let kinds: Vec<(String, u64)> = actions(&made);
    assert_eq!(kinds[0].0, "start");
    let up = kinds.iter().position(|(action, _)| action == "scale up").expect("a scale-up");
    let down = kinds.iter().position(|(action, _)| action == "scale down").expect("a scale-down");
    // Up at the first decision after the rise (9 s), down only after the
    // fall (16.5 s), and back to the start's GPUs by the end.
    let time = |index: usize| made[index]["time_s"].as_f64().unwrap() - made[0]["time_s"].as_f64().unwrap();
    assert_eq!(time(up), 9.0, "{kinds:?}");
    assert!(time(down) > 16.5, "{kinds:?}");
    let most = kinds.iter().map(|(_, gpus)| *gpus).max().unwrap();
    assert!(most > kinds[0].1 && kinds[DECISIONS - 1].1 == kinds[0].1, "{kinds:?}");
    assert!(kinds[..up].iter().all(|(action, _)| action == "start" || action == "keep"), "{kinds:?}");
    assert!(made.iter().all(|d| d["outcome"] == "nothing to do" || d["outcome"] == "dry run: nothing done"));
    assert_eq!(made[3]["observed_rps"]["photo-tagging"], 6000.0);
    assert!(made[up]["reason"].as_str().unwrap().starts_with("scaling up: "), "{}", made[up]["reason"]);

    let journal = tessera(&["autopilot", "journal", "--format", "json"], &store);
    assert!(journal.status.success(), "{}", stderr(&journal));
    let journaled: Value = serde_json::from_slice(&journal.stdout).unwrap();
    assert_eq!(journaled.as_array().unwrap(), &made);
    let table = stdout(&tessera(&["autopilot", "journal", "--last", "2"], &store));
    assert_eq!(table.lines().count(), 2, "{table}");
    assert!(table.contains("GPUs") && table.contains("Z  "), "{table}");
}

#[test]
fn new_plans_go_to_the_plan_file_atomically() {
    let dir = TempDir::new().unwrap();
    let out = dir.path().join("running.json");
    let made = replay(&dir, &store_in(&dir), &["--apply", "plan-file", "--plan-out", out.to_str().unwrap()]);
    let last_change = made.iter().rev().find(|d| d["action"] != "keep" && d["action"] != "hold").unwrap();
    assert!(last_change["outcome"].as_str().unwrap().starts_with("applied: wrote "), "{last_change}");
    let plan: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(plan["gpus"].as_array().unwrap().len() as u64, last_change["gpus_after"].as_u64().unwrap());
}

#[test]
fn bad_sources_and_missing_choices_are_refused_in_one_line() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let slo = write(&dir, "slo.csv", SLO);
    let base = ["autopilot", "run", "--demo", "--slo", &slo, "--dry-run"];
    fn joined<'a>(base: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
        base.iter().chain(extra).copied().collect()
    }
    fails_with(&joined(&base, &["--prometheus", "https://prom:9090"]), &store, &["HTTPS is not supported"]);
    fails_with(&joined(&base, &["--prometheus", "http://p:9090", "--query-template", "up"]), &store, &["{service}"]);
    let traffic = write(&dir, "bad.csv", "time_s,service,rate_rps\n0,photo-tagging,1\n0,nobody,2\n");
    fails_with(&joined(&base, &["--rates-file", &traffic]), &store, &["bad.csv", "nobody"]);
    usage_error(
        &["autopilot", "run", "--demo", "--rates-file", &traffic],
        &store,
        &["required arguments were not provided"],
    );
    usage_error(&joined(&base, &[]), &store, &["required arguments were not provided"]);
    usage_error(&joined(&base, &["--prometheus", "http://p", "--no-wait", "--once"]), &store, &["cannot be used with"]);
    usage_error(&joined(&base, &["--rates-file", &traffic, "--observe-burstiness"]), &store, &["cannot be used with"]);
    let no_step = ["--prometheus", "http://p:9090", "--observe-burstiness", "--counts-template", "x{s=\"{service}\"}"];
    fails_with(&joined(&base, &no_step), &store, &["--counts-template", "does not contain {step}"]);
    let shared = ["--prometheus", "http://p:9090", "--observe-burstiness", "--share", "serialized"];
    fails_with(&joined(&base, &shared), &store, &["--observe-burstiness: shared instances are proven under Poisson"]);
}

#[test]
fn light_services_share_instances_in_the_plans_it_writes() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let services: String = (0..6).map(|k| format!("light-{k},resnet50,{},150\n", 3 + k)).collect();
    let slo = write(&dir, "slo.csv", &format!("service,model,rate_rps,latency_ms\n{services}"));
    let rates: String = (0..6).map(|k| format!("0,light-{k},{}\n", 3 + k)).collect();
    let traffic = write(&dir, "traffic.csv", &format!("time_s,service,rate_rps\n{rates}"));
    let out = dir.path().join("running.json");
    let mut args = vec!["autopilot", "run", "--demo", "--slo", &slo, "--rates-file", &traffic, "--rates-window-s"];
    args.extend(["0.9", "--no-wait", "--max-decisions", "2", "--format", "json", "--share", "serialized"]);
    args.extend(["--apply", "plan-file", "--plan-out", out.to_str().unwrap()]);
    args.extend(CONTROLLER);
    let output = tessera(&args, &store);
    assert!(output.status.success(), "{}", stderr(&output));
    let made = decisions(&stdout(&output));
    assert_eq!(actions(&made), [("start".to_string(), 1), ("keep".to_string(), 1)]);
    let plan = tessera_store::read_plan_file(&out, None).unwrap();
    let (_, executor) = plan.shared_instances().next().expect("the six share an instance");
    assert_eq!(executor.members.len(), 6);
    // Read back as the running plan, it is kept.
    let mut again = args.clone();
    again.extend(["--plan", out.to_str().unwrap()]);
    let output = tessera(&again, &store);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(actions(&decisions(&stdout(&output))).iter().all(|(action, _)| action == "keep"));
}

/// A fake Prometheus on 127.0.0.1 answering every rate query with `rates`
/// (by the service the query names) and every range query with 40 counts
/// alternating around 200 by `swing` (by service): the index of
/// dispersion `swing² / 200`. Its URL.
fn start_fake_prometheus(rates: &'static [(&'static str, f64)], swings: &'static [(&'static str, f64)]) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut head = [0u8; 4096];
            let read = stream.read(&mut head).unwrap_or(0);
            let request = String::from_utf8_lossy(&head[..read]).to_string();
            let named = |name: &str| request.contains(&format!("%22{name}%22"));
            let body = if request.starts_with("GET /api/v1/query_range") {
                let swing = swings.iter().find(|(name, _)| named(name)).map_or(0.0, |(_, swing)| *swing);
                let values: Vec<Value> =
                    (0..40).map(|i| json!([i, (200.0 + swing * (i % 2) as f64 - swing / 2.0).to_string()])).collect();
                json!({"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {}, "values": values}]}})
            } else {
                let rate = rates.iter().find(|(name, _)| named(name)).map_or(0.0, |(_, rate)| *rate);
                let value = json!([now_s(), rate.to_string()]);
                json!({"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, "value": value}]}})
            };
            let body = body.to_string();
            let _ = write!(
                stream,
                "HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
        }
    });
    url
}

#[test]
fn burstiness_read_from_prometheus_plans_the_fleet_under_the_burstiest_arrivals() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let slo = write(&dir, "slo.csv", SLO);
    // search-ranking's counts swing by 40 around 200: cv 2; photo-tagging's
    // by 20: cv 1.
    let url = start_fake_prometheus(
        &[("photo-tagging", 800.0), ("search-ranking", 150.0)],
        &[("photo-tagging", 20.0), ("search-ranking", 40.0)],
    );
    let out = dir.path().join("running.json");
    let mut args = vec!["autopilot", "run", "--demo", "--slo", &slo, "--prometheus", &url, "--observe-burstiness"];
    args.extend(["--interval-s", "1", "--max-decisions", "2", "--format", "json"]);
    args.extend(["--apply", "plan-file", "--plan-out", out.to_str().unwrap()]);
    let output = tessera(&args, &store);
    assert!(output.status.success(), "{}", stderr(&output));
    let made = decisions(&stdout(&output));
    let reason = made[0]["reason"].as_str().unwrap();
    assert_eq!(made[0]["action"], "start", "{reason}");
    assert!(
        reason.starts_with(
            "arrivals now cv=2 (were poisson): the burstiest service, search-ranking, arrives at cv 2.00; "
        ),
        "{reason}"
    );
    // The model holds: the second decision says nothing of arrivals.
    let second = made[1]["reason"].as_str().unwrap();
    assert!(!second.contains("arrivals now"), "{second}");
    assert_eq!(made[1]["action"], "keep", "{second}");
    let plan: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(plan["traffic"]["arrivals"], "cv=2", "the plan is proven under the arrivals observed");
}

#[test]
fn an_unreachable_prometheus_makes_it_hold_and_say_why() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let slo = write(&dir, "slo.csv", SLO);
    let url = format!("http://127.0.0.1:{}", free_port());
    let args = ["autopilot", "run", "--demo", "--slo", &slo, "--prometheus", &url, "--once", "--dry-run"];
    let output = tessera(&args, &store);
    assert!(output.status.success(), "{}", stderr(&output));
    let line = stdout(&output);
    assert!(line.contains("  hold  0 GPUs  holding the plan: no rate for photo-tagging, search-ranking"), "{line}");
    assert!(line.contains(&format!("photo-tagging, search-ranking: Prometheus at {url} unreachable: ")), "{line}");
}

/// A port nothing listens on (bound, then released).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Seconds since the Unix epoch.
fn now_s() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64()
}

/// A test exporter on 127.0.0.1: `tessera_requests_total{service=…}`
/// counters growing by `curve` from `epoch_s` (Unix seconds; its rate at
/// 0 s before). Its address.
fn start_exporter(curve: TrafficCurve, epoch_s: f64) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let started_s = now_s();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut head = [0u8; 2048];
            let _ = stream.read(&mut head);
            // The count at a whole millisecond, stamped with it: Prometheus
            // stores the exporter's time, not its own scrape's, so the
            // samples lie exactly on the traffic's line however late the
            // scrape ran.
            let now_ms = (now_s() * 1000.0).floor();
            let (from, to) = (started_s - epoch_s, now_ms / 1000.0 - epoch_s);
            let mut body = String::from("# TYPE tessera_requests_total counter\n");
            for (service, mean) in curve.services().iter().zip(curve.mean_rates_rps(from, to)) {
                let count = mean * (to - from);
                body.push_str(&format!("tessera_requests_total{{service=\"{service}\"}} {count} {now_ms}\n"));
            }
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    address
}

/// Prometheus scraping `target` every 250 ms, its data in `data`, its API
/// on 127.0.0.1:`port`; `None` (after saying why) when it is not
/// installed.
fn start_prometheus(dir: &Path, target: &str, port: u16) -> Option<Child> {
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 250ms\n  scrape_timeout: 200ms\nscrape_configs:\n  - job_name: exporter\n    \
             static_configs:\n      - targets: ['{target}']\n"
        ),
    )
    .unwrap();
    let spawned = Command::new("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::from(std::fs::File::create(dir.join("prometheus.log")).unwrap()))
        .spawn();
    let Ok(child) = spawned else {
        tessera_testkit::tool_missing(
            "TESSERA_REQUIRE_PROMETHEUS",
            "prometheus is not installed",
            "apt-get install prometheus",
        );
        return None;
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ready(port) {
        assert!(Instant::now() < deadline, "prometheus not ready in 30 s: {}", log(dir));
        std::thread::sleep(Duration::from_millis(100));
    }
    Some(child)
}

/// Prometheus' log so far.
fn log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default()
}

/// `true` when `GET /-/ready` answers 200.
fn ready(port: u16) -> bool {
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else { return false };
    let _ = write!(stream, "GET /-/ready HTTP/1.0\r\n\r\n");
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer.starts_with("HTTP/1.0 200") || answer.starts_with("HTTP/1.1 200")
}

/// The next decision the running autopilot prints (within 20 s).
fn next(lines: &Receiver<String>) -> Value {
    let line = lines.recv_timeout(Duration::from_secs(20)).expect("a decision within 20 s");
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
}

#[test]
fn rates_read_through_prometheus_make_the_file_s_decisions_and_a_stopped_prometheus_holds() {
    let dir = TempDir::new().unwrap();
    let names = vec!["photo-tagging".to_string(), "search-ranking".to_string()];
    let points: Vec<TrafficPoint> = TRAFFIC
        .lines()
        .skip(1)
        .map(|line| {
            let fields: Vec<&str> = line.split(',').collect();
            TrafficPoint {
                time_s: fields[0].parse().unwrap(),
                service: fields[1].into(),
                rate_rps: fields[2].parse().unwrap(),
            }
        })
        .collect();
    let curve = TrafficCurve::new(&names, &points).unwrap();
    // The file's 0 s is a decision time at least 6 s away: Prometheus has
    // started and scraped by then.
    let epoch_s = ((now_s() + 6.0) / INTERVAL_S).ceil() * INTERVAL_S;
    let exporter = start_exporter(curve, epoch_s);
    let port = free_port();
    let Some(mut prometheus) = start_prometheus(dir.path(), &exporter, port) else { return };
    let slo = write(&dir, "slo.csv", SLO);
    let url = format!("http://127.0.0.1:{port}");
    // The slope of the last two samples (exact on the exporter's line),
    // as of the decision's time.
    let query = r#"sum(irate(tessera_requests_total{service="{service}"}[900ms]))"#;
    let store = dir.path().join("live.sqlite");
    let mut args = vec!["autopilot", "run", "--demo", "--slo", &slo, "--prometheus", &url, "--query-template", query];
    args.extend(["--dry-run", "--format", "json", "--max-decisions", "40"]);
    args.extend(CONTROLLER);
    let mut autopilot = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(&args)
        .env("TESSERA_STORE", &store)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (sender, lines) = channel();
    let output = autopilot.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(output).lines().map_while(Result::ok) {
            let _ = sender.send(line);
        }
    });
    // Decisions from the file's 0 s on, by their time in the file.
    let mut live = Vec::new();
    while live.len() < DECISIONS {
        let decision = next(&lines);
        if decision["time_s"].as_f64().unwrap() >= epoch_s {
            live.push(decision);
        }
    }
    prometheus.kill().unwrap();
    prometheus.wait().unwrap();
    let holds: Vec<Value> = (0..2).map(|_| next(&lines)).collect();
    let mut back = start_prometheus(dir.path(), &exporter, port).unwrap();
    let resumed = (0..6).map(|_| next(&lines)).find(|d| d["action"] != "hold");
    let _ = autopilot.kill();
    let _ = back.kill();
    let _ = back.wait();
    let _ = autopilot.wait();

    let replayed = replay(&dir, &dir.path().join("file.sqlite"), &["--dry-run"]);
    let times: Vec<f64> = live.iter().map(|d| d["time_s"].as_f64().unwrap() - epoch_s).collect();
    assert_eq!(times, (0..DECISIONS).map(|k| k as f64 * INTERVAL_S).collect::<Vec<_>>(), "no decision time missed");
    // The file's first decision starts the fleet; the live one started it
    // before the file's 0 s (on the same rates): the same plan runs.
    let (file, through_prometheus) = (actions(&replayed), actions(&live));
    assert_eq!(file[0].1, through_prometheus[0].1, "{file:?}\n{through_prometheus:?}");
    assert_eq!(file[1..], through_prometheus[1..], "file:\n{file:?}\nthrough Prometheus:\n{through_prometheus:?}");
    for (read, given) in live.iter().zip(&replayed) {
        for service in &names {
            let (read, given) =
                (read["observed_rps"][service].as_f64().unwrap(), given["observed_rps"][service].as_f64().unwrap());
            assert!((read - given).abs() <= 0.01 * given, "{service}: {read} req/s read, {given} given");
        }
    }
    for hold in &holds {
        assert_eq!(hold["action"], "hold", "{hold}");
        let reason = hold["reason"].as_str().unwrap();
        assert!(reason.contains(&format!("Prometheus at {url} unreachable")), "{reason}");
    }
    let resumed = resumed.expect("a decision other than hold within 6 after Prometheus is back");
    assert_eq!(resumed["action"], "keep", "{resumed}");
}

/// The GPU nodes of the fake cluster (4 A100-80GB each).
const NODES: [&str; 3] = ["gpu-a", "gpu-b", "gpu-c"];

/// A fake cluster of [`NODES`] (three 4-GPU nodes with the DRA driver's
/// plugin), a kubeconfig for it in `dir` and a client.
fn fake_gpu_cluster(dir: &TempDir) -> (FakeApiServer, PathBuf, Cluster) {
    let server = FakeApiServer::start();
    for name in NODES {
        server.put(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "nvidia.com/gpu.count": "4",
            "nvidia.com/gpu.memory": "81920", "nvidia.com/mig.capable": "true"}}}));
    }
    server.run_dra_plugin(DRA_NAMESPACE, DRA_LABEL.0, DRA_LABEL.1, &NODES);
    let kubeconfig = server.kubeconfig(dir.path());
    let cluster = Cluster::connect(&ClusterOptions { kubeconfig: Some(kubeconfig.clone()), context: None }).unwrap();
    (server, kubeconfig, cluster)
}

/// The DRA driver's namespace and its kubelet plugin's label in the fake
/// cluster.
const DRA_NAMESPACE: &str = "dra-driver-nvidia-gpu";
const DRA_LABEL: (&str, &str) = ("dra-driver-nvidia-gpu-component", "kubelet-plugin");

/// The demo's two services with images, as `--apply k8s` needs them.
fn slo_with_images(dir: &TempDir) -> String {
    let images = SLO.replacen("latency_ms\n", "latency_ms,image\n", 1).replace(",80\n", ",80,reg.example/resnet:1\n");
    write(dir, "slo.csv", &images.replace(",120\n", ",120,reg.example/bert:1\n"))
}

/// What a run of the live loop against a fake cluster left: its exit,
/// what it printed and noted, and each plan the cluster recorded (the
/// steps of the applies among them).
struct ClusterRun {
    status: std::process::ExitStatus,
    printed: String,
    noted: String,
    seen: Vec<Plan>,
}

/// A running `autopilot run`, its output read as it goes.
struct Replica {
    child: Child,
    printed: std::thread::JoinHandle<String>,
    noted: std::thread::JoinHandle<String>,
}

impl Replica {
    /// Starts `autopilot run` with `args` and the store `store`.
    fn start(store: &Path, args: &[&str]) -> Replica {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(args)
            .env("TESSERA_STORE", store)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
        let printed = std::thread::spawn(move || {
            let mut text = String::new();
            out.read_to_string(&mut text).unwrap();
            text
        });
        let noted = std::thread::spawn(move || {
            let mut text = String::new();
            err.read_to_string(&mut text).unwrap();
            text
        });
        Replica { child, printed, noted }
    }

    /// Its exit and what it printed and noted, once it has exited.
    fn finish(mut self) -> (std::process::ExitStatus, String, String) {
        let status = self.child.wait().unwrap();
        (status, self.printed.join().unwrap(), self.noted.join().unwrap())
    }
}

/// The fake cluster's nodes and controllers, played by the test: each
/// node's agent (reading its node's ConfigMap, laying out its fake GPUs,
/// the DRA plugin publishing them) and, when `deployments` says so, the
/// Deployment controller.
struct ClusterPlay {
    drivers: Vec<FakeNvidiaSmi>,
    seen: Vec<Plan>,
}

impl ClusterPlay {
    fn new() -> ClusterPlay {
        let drivers = NODES
            .iter()
            .map(|_| (0..4).fold(FakeNvidiaSmi::new(), |fake, index| fake.with_gpu(index, GpuModel::A100_80GB)))
            .collect();
        ClusterPlay { drivers, seen: Vec::new() }
    }

    /// One round; `true` when the cluster records a plan not seen before
    /// (kept in `seen`).
    fn round(&mut self, server: &FakeApiServer, cluster: &Cluster, deployments: bool) -> bool {
        for (number, node) in NODES.into_iter().enumerate() {
            let options = AgentOptions {
                node: node.into(),
                plan: PlanSource::Cluster { namespace: "tessera".into() },
                force: false,
                dra_namespace: DRA_NAMESPACE.into(),
                dra_plugin_selector: format!("{}={}", DRA_LABEL.0, DRA_LABEL.1),
                slices_timeout: Duration::from_secs(300),
            };
            let outcome = reconcile_node(cluster, &mut self.drivers[number], &options, &mut |_| {});
            if matches!(outcome, Ok(AgentOutcome::Pending(_))) && server.plugin_restarts().contains(&node.to_string()) {
                if let Some(map) = server.get("configmaps", "tessera", &format!("tessera-node-{node}")) {
                    let part = read_node_part(&map).unwrap();
                    server.publish_mig_slices(node, &mut self.drivers[number], &part.plan, part.number);
                }
            }
        }
        if deployments {
            server.run_deployments(0);
        }
        let recorded = running_plan(cluster, "tessera", &Plan::from_gpus(Vec::new(), "", "", 1)).unwrap();
        let new = self.seen.last() != Some(&recorded);
        if new {
            self.seen.push(recorded);
        }
        new
    }
}

/// Runs `autopilot run` with `args` against the fake cluster, playing its
/// nodes and Deployment controller until the loop is done.
fn run_on_cluster(
    server: &FakeApiServer,
    cluster: &Cluster,
    store: &Path,
    args: &[&str],
    on_record: &mut dyn FnMut(&FakeApiServer, &[Plan]),
) -> ClusterRun {
    let mut autopilot = Replica::start(store, args);
    let mut play = ClusterPlay::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if play.round(server, cluster, true) {
            on_record(server, &play.seen);
        }
        if autopilot.child.try_wait().unwrap().is_some() {
            break;
        }
        assert!(Instant::now() < deadline, "the autopilot did not finish in 120 s");
        std::thread::sleep(Duration::from_millis(10));
    }
    let (status, printed, noted) = autopilot.finish();
    ClusterRun { status, printed, noted, seen: play.seen }
}

/// The live loop's arguments for `--apply k8s` on the fake cluster.
fn cluster_args<'a>(slo: &'a str, traffic: &'a str, kubeconfig: &'a str) -> Vec<&'a str> {
    let mut args = vec!["autopilot", "run", "--demo", "--slo", slo, "--rates-file", traffic, "--rates-window-s"];
    args.extend(["0.9", "--no-wait", "--max-decisions", "10", "--format", "json", "--apply", "k8s"]);
    args.extend(["--apply-timeout", "60", "--apply-poll-s", "0.05", "--kubeconfig", kubeconfig]);
    args.extend(CONTROLLER);
    args
}

#[test]
fn of_two_replicas_one_acts_and_the_other_takes_over_when_it_is_killed_mid_transition() {
    let dir = TempDir::new().unwrap();
    let (server, kubeconfig, cluster) = fake_gpu_cluster(&dir);
    let (slo, traffic) = (slo_with_images(&dir), write(&dir, "traffic.csv", TRAFFIC));
    let kubeconfig = kubeconfig.to_str().unwrap();
    let args = |identity: &'static str| {
        let mut args = cluster_args(&slo, &traffic, kubeconfig);
        args.extend(["--leader-elect", "--identity", identity, "--lease-duration-s", "1.5"]);
        args
    };
    // Each replica has its own store, as each pod would.
    let stores: Vec<PathBuf> = ["a", "b"].map(|name| dir.path().join(format!("{name}.sqlite"))).into();
    let first = Replica::start(&stores[0], &args("replica-a"));
    let holder = || server.get("leases", "tessera", "tessera-autopilot").map(|lease| lease["spec"].clone());
    let deadline = Instant::now() + Duration::from_secs(60);
    while holder().is_none_or(|spec| spec["holderIdentity"] != "replica-a") {
        assert!(Instant::now() < deadline, "replica a never took the Lease");
        std::thread::sleep(Duration::from_millis(10));
    }
    let second = Replica::start(&stores[1], &args("replica-b"));
    // Replica a's first plan is written, but its segments never become
    // ready: it is killed in the middle of that transition.
    let mut play = ClusterPlay::new();
    while server.list("deployments").is_empty() {
        play.round(&server, &cluster, false);
        assert!(Instant::now() < deadline, "replica a never applied a plan");
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut first = first;
    first.child.kill().unwrap();
    let (_, printed_a, noted_a) = first.finish();
    assert!(decisions(&printed_a).is_empty(), "a finished a decision before it was killed: {printed_a}");
    let mut second = second;
    while second.child.try_wait().unwrap().is_none() {
        play.round(&server, &cluster, true);
        assert!(Instant::now() < deadline + Duration::from_secs(60), "replica b did not finish");
        std::thread::sleep(Duration::from_millis(10));
    }
    let (status, printed, noted) = second.finish();
    assert!(status.success(), "{noted}");
    assert!(noted_a.contains("leading: replica-a holds Lease tessera/tessera-autopilot"), "{noted_a}");
    let order: Vec<usize> = [
        "standing by: Lease tessera/tessera-autopilot is held by replica-a",
        "leading: replica-b holds Lease tessera/tessera-autopilot",
        "taking over from the plan the cluster records",
    ]
    .iter()
    .map(|line| noted.find(line).unwrap_or_else(|| panic!("{line} not in:\n{noted}")))
    .collect();
    assert!(order.windows(2).all(|pair| pair[0] < pair[1]), "{noted}");
    let made = decisions(&printed);
    assert_eq!(made.len(), DECISIONS, "{noted}");
    // Replica b resumed from what a left: its first decision starts
    // nothing from scratch.
    assert_ne!(made[0]["action"], "start", "{}", made[0]);
    let spec = holder().unwrap();
    assert_eq!((spec["holderIdentity"].as_str(), spec["leaseTransitions"].as_i64()), (Some("replica-b"), Some(1)));
    let running = running_plan(&cluster, "tessera", &Plan::from_gpus(Vec::new(), "", "", 1)).unwrap();
    assert_eq!(running.gpus.len() as u64, made[DECISIONS - 1]["gpus_after"].as_u64().unwrap());
    assert!(cluster_status(&cluster, &running, "tessera").unwrap().as_planned());
}

/// The container arguments of `deploy/kubernetes/30-autopilot.yaml`.
fn manifest_args() -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/kubernetes/30-autopilot.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    let args = text.split("        args:\n").nth(1).unwrap();
    args.lines().map_while(|line| line.strip_prefix("        - ")).map(str::to_string).collect()
}

#[test]
fn the_in_cluster_manifest_runs_as_written() {
    let dir = TempDir::new().unwrap();
    let (server, kubeconfig, _) = fake_gpu_cluster(&dir);
    let store = store_in(&dir);
    let slo = slo_with_images(&dir);
    let mut args = manifest_args();
    assert!(
        args.starts_with(&["autopilot".into(), "run".into()]) && args.contains(&"--leader-elect".into()),
        "{args:?}"
    );
    // The demo's profiles, its SLO file and Prometheus here; the rest as
    // written (the metrics port on any free one).
    let profiles = args.iter().position(|arg| arg == "--profiles").unwrap();
    args.splice(profiles..profiles + 2, ["--demo".to_string()]);
    for arg in &mut args {
        *arg = match arg.as_str() {
            "/etc/tessera/slo/services.csv" => slo.clone(),
            "/var/lib/tessera/tessera.sqlite" => store.to_str().unwrap().to_string(),
            "http://prometheus.monitoring.svc:9090" => "http://127.0.0.1:9".to_string(),
            "0.0.0.0:9464" => "127.0.0.1:0".to_string(),
            _ => arg.clone(),
        };
    }
    args.extend(["--once", "--query-timeout-s", "1", "--interval-s", "1"].map(String::from));
    let output = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(&args)
        .env("KUBECONFIG", &kubeconfig)
        .env("POD_NAME", "tessera-autopilot-7d9f-x2k4")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let noted = stderr(&output);
    assert!(noted.contains("leading: tessera-autopilot-7d9f-x2k4 holds Lease tessera/tessera-autopilot"), "{noted}");
    let lease = server.get("leases", "tessera", "tessera-autopilot").unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], "tessera-autopilot-7d9f-x2k4");
}

#[test]
fn leader_election_needs_the_cluster() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let (slo, traffic) = (write(&dir, "slo.csv", SLO), write(&dir, "traffic.csv", TRAFFIC));
    let args = ["autopilot", "run", "--demo", "--slo", &slo, "--rates-file", &traffic, "--once", "--dry-run"];
    fails_with(
        &[&args[..], &["--leader-elect"]].concat(),
        &store,
        &["error: --leader-elect needs --apply k8s: the Lease and the plan the replicas share live in the cluster"],
    );
}

#[test]
fn new_plans_are_applied_to_the_cluster_and_the_cluster_runs_the_last() {
    let dir = TempDir::new().unwrap();
    let (server, kubeconfig, cluster) = fake_gpu_cluster(&dir);
    let store = store_in(&dir);
    let (slo, traffic) = (write(&dir, "slo.csv", SLO), write(&dir, "traffic.csv", TRAFFIC));
    let mut args = vec!["autopilot", "run", "--demo", "--slo", &slo, "--rates-file", &traffic, "--rates-window-s"];
    args.extend(["0.9", "--no-wait", "--max-decisions", "10", "--format", "json", "--apply", "k8s"]);
    // Without images nothing could run: refused before any decision.
    args.extend(["--kubeconfig", kubeconfig.to_str().unwrap()]);
    fails_with(
        &args,
        &store,
        &["error: --apply k8s needs a container image for every service; none for photo-tagging, search-ranking"],
    );
    let slo = slo_with_images(&dir);
    let ClusterRun { status, printed, noted, seen } = run_on_cluster(
        &server,
        &cluster,
        &store,
        &cluster_args(&slo, &traffic, kubeconfig.to_str().unwrap()),
        &mut |_, _| {},
    );
    assert!(status.success(), "{noted}");
    let made = decisions(&printed);
    assert_eq!(made.len(), DECISIONS, "{noted}");
    let kinds = actions(&made);
    assert!(kinds.iter().any(|(action, _)| action == "scale up"), "{kinds:?}");
    assert!(kinds.iter().any(|(action, _)| action == "scale down"), "{kinds:?}");
    for decision in &made {
        let outcome = decision["outcome"].as_str().unwrap();
        match decision["action"].as_str().unwrap() {
            "keep" | "hold" => assert_eq!(outcome, "nothing to do"),
            _ => assert!(
                outcome.starts_with("applied: ") && outcome.ends_with("; the cluster runs it"),
                "{decision}\n{noted}"
            ),
        }
    }
    // The cluster records the last plan, runs it as planned, and routes
    // every service.
    let like = Plan::from_gpus(Vec::new(), "", "", 1);
    let running = running_plan(&cluster, "tessera", &like).unwrap();
    assert_eq!(running.gpus.len() as u64, made[DECISIONS - 1]["gpus_after"].as_u64().unwrap());
    assert!(cluster_status(&cluster, &running, "tessera").unwrap().as_planned());
    let output = tessera(&["k8s", "status", "--kubeconfig", kubeconfig.to_str().unwrap()], &store);
    assert!(output.status.success(), "{}", stderr(&output));
    for service in ["photo-tagging", "search-ranking"] {
        let of_service = |plural: &str| {
            server.list(plural).into_iter().filter(|o| o["metadata"]["labels"][SERVICE_LABEL] == service).count()
        };
        let segments = running.gpus.iter().flat_map(|g| &g.instances).filter(|i| i.service == service).count();
        assert!(segments > 0 && of_service("deployments") == segments, "{service}: {segments} segments");
        assert_eq!(of_service("httproutes"), 1, "{service}");
    }
    // A GPU kept as it is from one recorded plan to the next stays on its
    // node and index (one whose instances no other GPU of either plan has).
    let at = |plan: &Plan, gpu: &tessera_core::GpuAssignment| (plan.node_names[gpu.node as usize].clone(), gpu.index);
    let mut kept = 0;
    for pair in seen.windows(2) {
        let unique = |plan: &Plan, gpu: &tessera_core::GpuAssignment| {
            plan.gpus.iter().filter(|other| other.instances == gpu.instances).count() == 1
        };
        for gpu in pair[1].gpus.iter().filter(|gpu| !gpu.instances.is_empty() && unique(&pair[1], gpu)) {
            if let Some(old) = pair[0].gpus.iter().find(|old| old.instances == gpu.instances && unique(&pair[0], old)) {
                assert_eq!(at(&pair[1], gpu), at(&pair[0], old), "a kept GPU moved");
                kept += 1;
            }
        }
    }
    assert!(seen.len() > 3 && kept > 0, "{} plans recorded, {kept} GPUs kept", seen.len());
    // The journal has what was printed, outcomes included.
    let journal = tessera(&["autopilot", "journal", "--format", "json"], &store);
    assert!(journal.status.success(), "{}", stderr(&journal));
    let journaled: Value = serde_json::from_slice(&journal.stdout).unwrap();
    assert_eq!(journaled.as_array().unwrap(), &made);
    // Every decision but a keep is an event in the namespace, in order,
    // saying what the journal says; holds are warnings.
    let mut events = server.list("events");
    events.sort_by(|a, b| a["eventTime"].as_str().cmp(&b["eventTime"].as_str()));
    let told: Vec<&Value> = made.iter().filter(|decision| decision["action"] != "keep").collect();
    assert_eq!(events.len(), told.len(), "{events:#?}");
    for (event, decision) in events.iter().zip(told) {
        let reason = match decision["action"].as_str().unwrap() {
            "start" => "Start",
            "scale up" => "ScaleUp",
            "scale down" => "ScaleDown",
            _ => "Hold",
        };
        assert_eq!(event["reason"], reason, "{event}");
        assert_eq!(event["type"], if reason == "Hold" { "Warning" } else { "Normal" }, "{event}");
        assert_eq!(event["metadata"]["namespace"], "tessera");
        assert_eq!(event["reportingController"], "tessera.io/autopilot");
        let note = event["note"].as_str().unwrap();
        assert!(note.starts_with(decision["reason"].as_str().unwrap()), "{note}");
        assert!(note.ends_with(&format!("({})", decision["outcome"].as_str().unwrap())), "{note}");
    }
}

#[test]
fn a_failed_apply_is_said_warned_of_and_the_next_decisions_act_again() {
    let dir = TempDir::new().unwrap();
    let (server, kubeconfig, cluster) = fake_gpu_cluster(&dir);
    let store = store_in(&dir);
    let (slo, traffic) = (slo_with_images(&dir), write(&dir, "traffic.csv", TRAFFIC));
    // Once the first plan runs, the next Deployment written fails.
    let mut armed = false;
    let mut fail_once = |server: &FakeApiServer, seen: &[Plan]| {
        if !armed && seen.last().is_some_and(|plan| !plan.gpus.is_empty()) {
            server.fail("PATCH", "deployments", 1, 500);
            armed = true;
        }
    };
    let args = cluster_args(&slo, &traffic, kubeconfig.to_str().unwrap());
    let ClusterRun { status, printed, noted, .. } = run_on_cluster(&server, &cluster, &store, &args, &mut fail_once);
    assert!(status.success(), "{noted}");
    let made = decisions(&printed);
    assert_eq!(made.len(), DECISIONS, "{noted}");
    let failed: Vec<usize> = (0..made.len())
        .filter(|&index| made[index]["outcome"].as_str().unwrap().starts_with("failed: the apply stopped: "))
        .collect();
    assert_eq!(failed.len(), 1, "{made:#?}");
    let failed = failed[0];
    assert!(made[failed]["outcome"].as_str().unwrap().contains("(500 InternalError)"), "{}", made[failed]);
    // Later decisions act again, and the cluster ends running the last
    // plan as planned.
    assert!(
        made[failed + 1..].iter().any(|decision| decision["outcome"].as_str().unwrap().starts_with("applied: ")),
        "{made:#?}"
    );
    let running = running_plan(&cluster, "tessera", &Plan::from_gpus(Vec::new(), "", "", 1)).unwrap();
    assert_eq!(running.gpus.len() as u64, made[DECISIONS - 1]["gpus_after"].as_u64().unwrap());
    assert!(cluster_status(&cluster, &running, "tessera").unwrap().as_planned());
    // Its event is a warning saying so.
    let events = server.list("events");
    let warned: Vec<&Value> = events.iter().filter(|event| event["type"] == "Warning").collect();
    let note_of_failed =
        warned.iter().find(|event| event["note"].as_str().unwrap().contains("failed: the apply stopped"));
    assert!(note_of_failed.is_some(), "{events:#?}");
}

/// `--apply node`: plans are placed on the GPUs `nvidia-smi` lists on the
/// node (a stand-in on `PATH`, shell built-ins only: eight A100-80GB in MIG
/// mode without instances, refusing any change), and each new plan goes to
/// the node as `tessera deploy --apply` would send it; with no workload
/// registered for the demo's models, the apply fails before changing
/// anything, and the decision says so.
#[test]
fn new_plans_go_to_this_node_placed_on_its_gpus() {
    let dir = TempDir::new().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let fake = bin.join("nvidia-smi");
    std::fs::write(
        &fake,
        r#"#!/bin/sh
case "$*" in
  "--query-gpu=name,memory.total,mig.mode.current --format=csv,noheader,nounits -i "[0-7]) echo "NVIDIA A100-SXM4-80GB, 81920, Enabled" ;;
  "--query-gpu="*) echo "No devices were found"; exit 6 ;;
  "mig -i "*" -lgi") echo "No GPU instances found: Not Found"; exit 6 ;;
  "mig -i "*" -lci") echo "No compute instances found: Not Found"; exit 6 ;;
  *) echo "ERROR: Invalid combination of input arguments."; exit 2 ;;
esac
"#,
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let store = store_in(&dir);
    let (slo, traffic) = (write(&dir, "slo.csv", SLO), write(&dir, "traffic.csv", TRAFFIC));
    let mps = dir.path().join("mps");
    let args = [
        "autopilot",
        "run",
        "--demo",
        "--slo",
        &slo,
        "--rates-file",
        &traffic,
        "--no-wait",
        "--once",
        "--format",
        "json",
        "--apply",
        "node",
        "--node",
        "0",
        "--mps-dir",
        mps.to_str().unwrap(),
    ];
    let output = crate::util::run_with_env(&args, &[("PATH", &bin), ("TESSERA_STORE", &store)]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stderr(&output).contains("new plans deployed on node 0"), "{}", stderr(&output));
    let made = decisions(&stdout(&output));
    assert_eq!(made[0]["action"], "start");
    assert!(made[0]["gpus_after"].as_u64().unwrap() <= 8, "{}", made[0]);
    let outcome = made[0]["outcome"].as_str().unwrap();
    assert!(outcome.starts_with("failed: ") && outcome.contains("workload"), "{outcome}");
    let without_node = crate::util::tessera(&args[..args.len() - 4], &store);
    assert_eq!(without_node.status.code(), Some(2));
    assert!(stderr(&without_node).contains("required arguments were not provided:\n  --node <N>"));
}
