//! Bad input and faults: malformed JSON, the wrong content type, a huge
//! body, an unknown field, a plan for unknown services, a full disk, a
//! read-only store, a job cut by its time limit, a client that hangs up,
//! shutdown with jobs queued; bodies that are not objects, a service of a
//! model with no profile, and no store path in any answer.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;
use tessera_store::Store;
use tokio::io::AsyncWriteExt;

use crate::util::{
    error_of, example_profiles_csv, import_example_profiles, start_server, start_server_in, wait_job, TOKEN,
};

/// A body, its content type, and the status, code and words of its answer.
type BadBody = (Option<&'static str>, Vec<u8>, u16, &'static str, &'static str);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_bodies_get_their_status_and_a_one_line_message() {
    let mut server = start_server(|config| config.max_body_bytes = 64 * 1024).await;
    let mut client = server.client().await;
    let cases: [BadBody; 5] = [
        (Some("application/json"), b"{\"name\": \"a\",".to_vec(), 400, "malformed_json", "EOF while parsing"),
        (Some("text/plain"), b"{}".to_vec(), 415, "unsupported_media_type", "Content-Type: application/json"),
        (None, b"{}".to_vec(), 415, "unsupported_media_type", "application/json"),
        (
            Some("application/json"),
            br#"{"name":"a","model":"m","rate_rps":1,"latency_slo_ms":1,"colour":"red"}"#.to_vec(),
            422,
            "invalid_body",
            "unknown field `colour`",
        ),
        (
            Some("application/json"),
            br#"{"name":"a","model":"m","rate_rps":"fast","latency_slo_ms":1}"#.to_vec(),
            422,
            "invalid_body",
            "rate_rps",
        ),
    ];
    for (content_type, body, status, code, words) in cases {
        let answer = client.send_bytes("POST", "/v1/services", content_type, body, &[]).await.unwrap();
        let (found_code, message) = error_of(&answer);
        assert_eq!((answer.status, found_code.as_str()), (status, code), "{message}");
        assert!(message.contains(words) && !message.contains('\n'), "{message}");
    }
    let huge = format!(r#"{{"format":"tessera","files":{{"a.csv":"{}"}}}}"#, "x".repeat(100 * 1024));
    let answer =
        client.send_bytes("POST", "/v1/profiles", Some("application/json"), huge.into_bytes(), &[]).await.unwrap();
    let (code, message) = error_of(&answer);
    assert_eq!((answer.status, code.as_str()), (413, "body_too_large"), "{message}");
    assert_eq!(message, "the request body is larger than this server accepts (65536 bytes at most)");
    let bad_value = json!({"name": "a", "model": "m", "rate_rps": -1.0, "latency_slo_ms": 10.0});
    let answer = client.post("/v1/services", &bad_value).await.unwrap();
    assert_eq!(answer.status, 422);
    assert!(error_of(&answer).1.starts_with("service 'a': "), "{}", answer.text());
    // Names that would be paths: a service, a profile's model.
    let slashed = json!({"name": "a/b", "model": "m", "rate_rps": 1.0, "latency_slo_ms": 10.0});
    let answer = client.post("/v1/services", &slashed).await.unwrap();
    assert_eq!(answer.status, 422);
    assert!(error_of(&answer).1.contains("service must be a non-empty name without '/'"), "{}", answer.text());
    let header = "gpu_model,model,size_gpcs,batch,procs,throughput_rps,latency_ms";
    let traversal =
        json!({"format": "tessera", "files": {"up.csv": format!("{header}\na100-80gb,../../etc/m,1,1,1,10,5\n")}});
    let answer = client.post("/v1/profiles", &traversal).await.unwrap();
    assert_eq!(answer.status, 422);
    assert!(error_of(&answer).1.contains("model must be a non-empty name without '/'"), "{}", answer.text());
    let bad_csv = json!({"format": "tessera", "files": {"mine.csv": "gpu_model,model\na100-80gb,bert\n"}});
    let answer = client.post("/v1/profiles", &bad_csv).await.unwrap();
    assert_eq!(answer.status, 422);
    assert!(error_of(&answer).1.starts_with("mine.csv:1: missing column 'size_gpcs'"), "{}", answer.text());
    let answer = client.get("/v1/nowhere").await.unwrap();
    assert_eq!((answer.status, error_of(&answer).0.as_str()), (404, "not_found"));
    assert_eq!(client.get("/v1/plans/99").await.unwrap().status, 404);
    // Nothing was stored by any of them.
    assert_eq!(client.get("/v1/services").await.unwrap().json(), json!([]));
    assert_eq!(client.get("/v1/profiles").await.unwrap().json(), json!([]));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plans_for_unknown_services_and_plans_without_services_are_refused() {
    let mut server = start_server(|_| {}).await;
    let mut client = server.client().await;
    let answer = client.post("/v1/plans", &json!({})).await.unwrap();
    assert_eq!(answer.status, 422);
    assert!(error_of(&answer).1.starts_with("no services to plan"), "{}", answer.text());
    let answer = client.post("/v1/plans", &json!({"demo": true, "gpus": ["b300"]})).await.unwrap();
    assert_eq!(answer.status, 422);
    assert!(error_of(&answer).1.starts_with("field 'gpus': "), "{}", answer.text());

    let id = client.post("/v1/plans", &json!({"demo": true})).await.unwrap().json()["id"].as_u64().unwrap();
    let plan = wait_job(&mut client, id).await["plan"].clone();
    // The demo's plan names services this store does not hold.
    let answer = client.post("/v1/verify", &json!({"plan": plan})).await.unwrap();
    let (code, message) = error_of(&answer);
    assert_eq!((answer.status, code.as_str()), (422, "unknown_service"));
    assert!(message.starts_with("the plan serves 6 services that the store does not hold: "), "{message}");
    assert_eq!(client.post("/v1/verify", &json!({"plan": plan, "demo": true})).await.unwrap().json()["ok"], true);
    let answer = client.post("/v1/verify", &json!({"plan": {"version": 9}})).await.unwrap();
    assert_eq!(answer.status, 422);
    assert!(error_of(&answer).1.starts_with("field 'plan': plan version 9 is not supported"), "{}", answer.text());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_bodies_must_be_objects() {
    let mut server = start_server(|_| {}).await;
    let mut client = server.client().await;
    // serde would read an array as a struct's fields in order.
    for (route, body, kind) in [
        ("/v1/plans", "[true,\"parva\"]", "an array"),
        ("/v1/plans", "[]", "an array"),
        ("/v1/plans", "null", "null"),
        ("/v1/services", "[\"a\", \"gpt2\", 1, 100]", "an array"),
        ("/v1/verify", "42", "a number"),
        ("/v1/profiles", "\n  true", "a boolean"),
    ] {
        let answer =
            client.send_bytes("POST", route, Some("application/json"), body.as_bytes().to_vec(), &[]).await.unwrap();
        let (code, message) = error_of(&answer);
        assert_eq!((answer.status, code.as_str()), (422, "invalid_body"), "{route} {body}: {message}");
        assert_eq!(message, format!("the body must be a JSON object ({{\"field\": value, …}}), not {kind}"));
    }
    // Nothing was queued or stored.
    assert_eq!(client.get("/v1/plans").await.unwrap().json(), json!([]));
    assert_eq!(client.get("/v1/services").await.unwrap().json(), json!([]));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_of_an_unprofiled_model_is_refused_at_the_door() {
    let mut server = start_server(|_| {}).await;
    let mut client = server.client().await;
    let llama = json!({"name": "chat", "model": "llama-70b", "rate_rps": 5.0, "latency_slo_ms": 900.0});
    let answer = client.post("/v1/services", &llama).await.unwrap();
    let (code, message) = error_of(&answer);
    assert_eq!((answer.status, code.as_str()), (422, "unknown_model"), "{message}");
    assert_eq!(
        message,
        "service 'chat': no profile of model 'llama-70b' in the store (the store holds no profiles yet: import them \
         first (POST /v1/profiles))"
    );
    import_example_profiles(&mut client).await;
    let answer = client.post("/v1/services", &llama).await.unwrap();
    let (code, message) = error_of(&answer);
    assert_eq!((answer.status, code.as_str()), (422, "unknown_model"), "{message}");
    assert_eq!(
        message,
        "service 'chat': no profile of model 'llama-70b' in the store (profiled models: bert-base, gpt2, \
         mobilenetv2, resnet50, vit-b16)"
    );
    let gpt2 = json!({"name": "chat", "model": "gpt2", "rate_rps": 5.0, "latency_slo_ms": 900.0});
    assert_eq!(client.post("/v1/services", &gpt2).await.unwrap().status, 201);
    // An update to an unprofiled model is refused the same way and changes nothing.
    let update = json!({"model": "llama-70b", "rate_rps": 5.0, "latency_slo_ms": 900.0});
    let answer = client.send("PUT", "/v1/services/chat", Some(&update), &[("if-match", "\"1\"")]).await.unwrap();
    assert_eq!((answer.status, error_of(&answer).0.as_str()), (422, "unknown_model"), "{}", answer.text());
    let stored = client.get("/v1/services/chat").await.unwrap().json();
    assert_eq!((stored["model"].as_str(), stored["version"].as_u64()), (Some("gpt2"), Some(1)));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_answer_shows_the_store_path() {
    let mut server = start_server(|_| {}).await;
    let private = server.dir.path().display().to_string();
    let mut client = server.client().await;
    import_example_profiles(&mut client).await;
    let body = json!({"name": "chat", "model": "gpt2", "rate_rps": 5.0, "latency_slo_ms": 900.0});
    assert_eq!(client.post("/v1/services", &body).await.unwrap().status, 201);
    let taken = client.post("/v1/services", &body).await.unwrap();
    let (code, message) = error_of(&taken);
    assert_eq!((taken.status, code.as_str()), (409, "already_exists"));
    assert_eq!(message, "service 'chat' already exists (update it with its version instead)");
    let update = json!({"model": "gpt2", "rate_rps": 6.0, "latency_slo_ms": 900.0});
    let stale = client.send("PUT", "/v1/services/chat", Some(&update), &[("if-match", "\"7\"")]).await.unwrap();
    let (code, message) = error_of(&stale);
    assert_eq!((stale.status, code.as_str()), (409, "version_conflict"));
    assert!(message.starts_with("service 'chat' is at version 1, not 7"), "{message}");
    let gone = client.send("DELETE", "/v1/services/nobody", None, &[("if-match", "\"1\"")]).await.unwrap();
    let missing = client.get("/v1/profiles/a100-80gb/nothing").await.unwrap();
    for answer in [&taken, &stale, &gone, &missing] {
        assert!((400..500).contains(&answer.status), "{}", answer.text());
        assert!(!answer.text().contains(&private), "an answer shows the store's path: {}", answer.text());
        assert!(!answer.text().contains("store.sqlite"), "an answer names the store's file: {}", answer.text());
    }
    server.stop().await;
}

/// A small filesystem mounted for one test, unmounted when dropped.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    /// A 1 MiB tmpfs, or `None` (with a visible line) where this process
    /// may not mount.
    fn mount() -> Option<SmallDisk> {
        let dir = tempfile::tempdir().unwrap();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=1m", "tessera-test", dir.path().to_str().unwrap()])
            .status()
            .is_ok_and(|status| status.success());
        if !mounted {
            let _ = std::io::Write::write_all(
                &mut std::io::stderr(),
                b"skipping: cannot mount a small filesystem here (needs root)\n",
            );
            return None;
        }
        Some(SmallDisk { dir })
    }

    /// Writes a file that takes all the space left.
    fn fill(&self) {
        let path = self.dir.path().join("filler");
        let mut file = std::fs::File::create(path).unwrap();
        let block = vec![7u8; 4096];
        while std::io::Write::write_all(&mut file, &block).is_ok() {}
    }

    fn empty(&self) {
        std::fs::remove_file(self.dir.path().join("filler")).unwrap();
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_answers_503_with_the_reason_and_corrupts_nothing() {
    let Some(disk) = SmallDisk::mount() else { return };
    let store_dir = tempfile::tempdir_in(disk.dir.path()).unwrap();
    let mut server = start_server_in(store_dir, |_| {}).await;
    let mut client = server.client().await;
    crate::util::import_example_profiles(&mut client).await;
    let first = json!({"name": "before", "model": "gpt2", "rate_rps": 1.0, "latency_slo_ms": 100.0});
    assert_eq!(client.post("/v1/services", &first).await.unwrap().status, 201);
    disk.fill();
    let mut refused = None;
    // Until SQLite needs a new page of the write-ahead log.
    for index in 0..200 {
        let body = json!({"name": format!("s{index}"), "model": "gpt2", "rate_rps": 1.0, "latency_slo_ms": 100.0,
            "args": ["x".repeat(2000)]});
        let answer = client.post("/v1/services", &body).await.unwrap();
        if answer.status != 201 {
            refused = Some((index, answer));
            break;
        }
    }
    let (index, answer) = refused.expect("a full disk refused a write");
    let (code, message) = error_of(&answer);
    assert_eq!((answer.status, code.as_str()), (503, "store_unavailable"), "{message}");
    assert!(message.contains("database or disk is full"), "{message}");
    let ready = client.get("/readyz").await.unwrap();
    assert_eq!((ready.status, error_of(&ready).1), (503, message.clone()));
    // Reads go on; the refused service is not there.
    assert_eq!(client.get(&format!("/v1/services/s{index}")).await.unwrap().status, 404);
    assert_eq!(client.get("/v1/services/before").await.unwrap().status, 200);
    disk.empty();
    let again = json!({"name": "after", "model": "gpt2", "rate_rps": 1.0, "latency_slo_ms": 100.0});
    assert_eq!(client.post("/v1/services", &again).await.unwrap().status, 201);
    assert_eq!(client.get("/readyz").await.unwrap().status, 200);
    let path = server.store_path();
    server.stop().await;
    let store = Store::open_read_only(&path).unwrap();
    assert_eq!(store.integrity_check().unwrap(), "ok");
    assert_eq!(store.list_services().unwrap().len(), index + 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_on_a_read_only_disk_is_served_read_only() {
    let Some(disk) = SmallDisk::mount() else { return };
    {
        let mut store = Store::open(&disk.dir.path().join("store.sqlite")).unwrap();
        let catalog = tessera_core::synthetic::builtin_catalog();
        let profiles: Vec<_> = catalog.iter().filter(|profile| profile.model == "gpt2").cloned().collect();
        store.import_profiles(&profiles, "test", "tessera").unwrap();
        let slo = tessera_core::ServiceSlo::new("kept", "gpt2", 1.0, 100.0).unwrap();
        store.create_service(&slo, None, &[]).unwrap();
    }
    let remounted =
        Command::new("mount").args(["-o", "remount,ro", disk.dir.path().to_str().unwrap()]).status().unwrap();
    assert!(remounted.success());
    let token = tessera_server::ApiToken::new(TOKEN, "test").unwrap();
    let config =
        tessera_server::ServeConfig::new("127.0.0.1:0".parse().unwrap(), disk.dir.path().join("store.sqlite"), token);
    let server = tessera_server::start(config).await.unwrap();
    let mut client = tessera_server::Client::connect(server.address, Some(TOKEN)).await.unwrap();
    assert_eq!(client.get("/v1/services/kept").await.unwrap().status, 200);
    let ready = client.get("/readyz").await.unwrap();
    assert_eq!(ready.status, 503);
    assert!(
        error_of(&ready).1.starts_with("the store cannot be written, so it is served read-only: "),
        "{}",
        ready.text()
    );
    let body = json!({"name": "new", "model": "gpt2", "rate_rps": 1.0, "latency_slo_ms": 100.0});
    let answer = client.post("/v1/services", &body).await.unwrap();
    let (code, message) = error_of(&answer);
    assert_eq!((answer.status, code.as_str()), (503, "store_unavailable"), "{message}");
    assert!(message.contains("readonly database"), "{message}");
    let private = disk.dir.path().display().to_string();
    assert!(!ready.text().contains(&private) && !answer.text().contains(&private), "{}", ready.text());
    server.stop().await.unwrap();
}

/// Imports the example profiles and creates `count` services over them.
async fn create_tenants(client: &mut tessera_server::Client, count: u32) {
    let import = json!({"format": "tessera", "files": {"example.csv": example_profiles_csv()}});
    assert_eq!(client.post("/v1/profiles", &import).await.unwrap().status, 201);
    let models = ["bert-base", "gpt2", "mobilenetv2", "resnet50", "vit-b16"];
    for index in 0..count {
        let body = json!({"name": format!("tenant-{index}"), "model": models[index as usize % 5],
            "rate_rps": 40.0 + f64::from(index * 37 % 500), "latency_slo_ms": 150.0 + f64::from(index * 53 % 900)});
        assert_eq!(client.post("/v1/services", &body).await.unwrap().status, 201);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_past_its_time_limit_says_so_and_the_server_keeps_answering() {
    // No grace: a job must have its plan by its time limit.
    let mut server = start_server(|config| {
        config.planning_workers = 1;
        config.job_grace = Duration::ZERO;
    })
    .await;
    let mut client = server.client().await;
    create_tenants(&mut client, 400).await;
    let id = client.post("/v1/plans", &json!({"time_limit_s": 0.001})).await.unwrap().json()["id"].as_u64().unwrap();
    // The server answers while the job plans.
    let mut probe = server.client().await;
    let asked = Instant::now();
    assert_eq!(probe.get("/healthz").await.unwrap().status, 200);
    assert!(asked.elapsed() < Duration::from_secs(2), "healthz took {:?}", asked.elapsed());
    let job = wait_job(&mut client, id).await;
    assert_eq!(job["status"], "failed", "{job}");
    let error = job["error"].as_str().unwrap();
    assert!(error.starts_with("the job exceeded its time limit: no plan after 0.0 s"), "{error}");
    // The late planner is cancelled and frees the worker at once (its 400
    // tenants' capacities alone take seconds): the next job starts and plans.
    let next = client.post("/v1/plans", &json!({"time_limit_s": 60.0})).await.unwrap().json()["id"].as_u64().unwrap();
    let asked = Instant::now();
    while client.get(&format!("/v1/plans/{next}")).await.unwrap().json()["status"] == "queued" {
        assert!(asked.elapsed() < Duration::from_secs(2), "the next job waited {:?} for the worker", asked.elapsed());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(wait_job(&mut client, next).await["status"], "done");
    let metrics = client.get("/metrics").await.unwrap().text();
    assert!(metrics.contains(r#"tessera_planning_jobs_total{status="failed"} 1"#), "{metrics}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_hangs_up_mid_request_leaves_no_trace() {
    let mut server = start_server(|_| {}).await;
    let mut client = server.client().await;
    for index in 0..8 {
        let body = format!(r#"{{"name": "ghost-{index}", "model": "gpt2", "rate_rps": 1.0, "latency_slo_ms": 100.0}}"#);
        let head = format!(
            "POST /v1/services HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {TOKEN}\r\ncontent-type: application/json\r\n\
             content-length: {}\r\n\r\n",
            body.len()
        );
        let mut stream = tokio::net::TcpStream::connect(server.address).await.unwrap();
        stream.write_all(head.as_bytes()).await.unwrap();
        stream.write_all(&body.as_bytes()[..body.len() / 2]).await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        drop(stream);
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let metrics = client.get("/metrics").await.unwrap().text();
        // Only the scrape itself is in flight.
        if metrics.contains("tessera_http_requests_in_flight 1\n") {
            break;
        }
        assert!(Instant::now() < deadline, "requests left in flight:\n{metrics}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(client.get("/v1/services").await.unwrap().json(), json!([]));
    assert_eq!(client.get("/healthz").await.unwrap().status, 200);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_does_not_wait_past_its_wait_for_a_running_job() {
    let mut server = start_server(|config| {
        config.planning_workers = 1;
        config.job_grace = Duration::from_secs(120);
        config.shutdown_wait = Duration::ZERO;
    })
    .await;
    let mut client = server.client().await;
    create_tenants(&mut client, 400).await;
    let answer = client.post("/v1/plans", &json!({"time_limit_s": 60.0})).await.unwrap();
    let id = answer.json()["id"].as_u64().unwrap();
    // Running (400 tenants' capacities take seconds) when the server stops.
    while client.get(&format!("/v1/plans/{id}")).await.unwrap().json()["status"] == "queued" {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let path = server.store_path();
    server.stop().await;
    let store = Store::open_read_only(&path).unwrap();
    let job = store.job(id).unwrap().unwrap();
    assert_eq!(job.status, tessera_store::JobStatus::Failed, "{:?}", job.error);
    assert_eq!(
        job.error.as_deref(),
        Some("the server stopped while the job ran (it waits 0.0 s for running jobs at shutdown)")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_fails_queued_jobs_and_finishes_running_ones() {
    // A long grace: the running job must finish however loaded the machine
    // (400 tenants with as many SLOs take seconds of the serving model's
    // capacities before the search's time limit starts to count).
    let mut server = start_server(|config| {
        config.planning_workers = 1;
        config.job_grace = Duration::from_secs(120);
        config.shutdown_wait = Duration::from_secs(120);
    })
    .await;
    let mut client = server.client().await;
    create_tenants(&mut client, 400).await;
    let mut ids = Vec::new();
    for _ in 0..6 {
        let answer = client.post("/v1/plans", &json!({"time_limit_s": 2.0})).await.unwrap();
        ids.push(answer.json()["id"].as_u64().unwrap());
    }
    let path = server.store_path();
    server.stop().await;
    let store = Store::open_read_only(&path).unwrap();
    assert_eq!(store.integrity_check().unwrap(), "ok");
    let mut statuses = Vec::new();
    for id in ids {
        let job = store.job(id).unwrap().unwrap();
        match job.status {
            tessera_store::JobStatus::Done => assert!(job.plan.is_some()),
            tessera_store::JobStatus::Failed => {
                assert_eq!(job.error.as_deref(), Some("the server stopped before the job started"))
            }
            other => panic!("job {id} left {other:?}"),
        }
        statuses.push(job.status);
    }
    assert!(statuses.contains(&tessera_store::JobStatus::Failed), "{statuses:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_past_the_time_limit_is_answered_503_and_the_server_goes_on() {
    let mut server = start_server(|config| config.request_timeout = Duration::from_millis(1)).await;
    let mut client = server.client().await;
    let trace = tessera_sim::generate(&tessera_sim::GenerateParams {
        clients: 12,
        operations_per_client: 3,
        oversubscription: 2.0,
        transfer_ratio: 1.0,
        link: tessera_sim::Link::PcieGen4,
        seed: 3,
    })
    .unwrap();
    let body = json!({"trace": trace, "scheduler": "ga"});
    let answer = client.post("/v1/simulate", &body).await.unwrap();
    let (code, message) = error_of(&answer);
    assert_eq!((answer.status, code.as_str()), (503, "timeout"), "{message}");
    assert_eq!(answer.header("content-type"), Some("application/json"));
    assert_eq!(message, "the request took longer than the server's limit of 0.001 s");
    assert_eq!(client.get("/healthz").await.unwrap().status, 200);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_sends_its_headers_slowly_is_cut_off_and_others_are_served() {
    let mut server = start_server(|config| config.header_timeout = Duration::from_secs(1)).await;
    // A complete request on a kept-alive connection is served; its next
    // request, sent after twice the limit, too.
    let mut kept = tokio::net::TcpStream::connect(server.address).await.unwrap();
    kept.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n").await.unwrap();
    let mut answer = [0u8; 17];
    tokio::io::AsyncReadExt::read_exact(&mut kept, &mut answer).await.unwrap();
    assert_eq!(&answer, b"HTTP/1.1 200 OK\r\n");
    // A head that stops halfway.
    let mut stalled = tokio::net::TcpStream::connect(server.address).await.unwrap();
    stalled.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n").await.unwrap();
    let mut rest = Vec::new();
    let closed =
        tokio::time::timeout(Duration::from_secs(5), tokio::io::AsyncReadExt::read_to_end(&mut stalled, &mut rest));
    assert!(closed.await.is_ok(), "the stalled connection stayed open");
    // One header byte every 100 ms: the head is never complete.
    let mut slow = tokio::net::TcpStream::connect(server.address).await.unwrap();
    slow.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\nx-slow: ").await.unwrap();
    let started = Instant::now();
    let cut = loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if slow.write_all(b"z").await.is_err() || started.elapsed() > Duration::from_secs(10) {
            break started.elapsed();
        }
        // A closed connection reads end of file (or a reset).
        let mut byte = [0u8; 1];
        let read = tokio::io::AsyncReadExt::read(&mut slow, &mut byte);
        if let Ok(Ok(0) | Err(_)) = tokio::time::timeout(Duration::from_millis(1), read).await {
            break started.elapsed();
        }
    };
    assert!(cut < Duration::from_secs(5), "the slow client was still connected after {cut:?}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    kept.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").await.unwrap();
    let mut rest = Vec::new();
    tokio::io::AsyncReadExt::read_to_end(&mut kept, &mut rest).await.unwrap();
    let rest = String::from_utf8_lossy(&rest);
    assert!(rest.contains("HTTP/1.1 200 OK\r\n"), "{rest}");
    let mut client = server.client().await;
    assert_eq!(client.get("/healthz").await.unwrap().status, 200);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_over_its_gpu_ceiling_names_the_field_of_its_body() {
    let mut server = start_server(|_| {}).await;
    let mut client = server.client().await;
    create_tenants(&mut client, 40).await;
    let id = client.post("/v1/plans", &json!({"max_gpus": 1})).await.unwrap().json()["id"].as_u64().unwrap();
    let job = wait_job(&mut client, id).await;
    let error = job["error"].as_str().unwrap();
    assert!(error.contains("more than the ceiling of 1 GPU (max_gpus; --max-gpus on the command line)"), "{error}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_request_does_not_hold_the_shutdown_past_its_wait() {
    let mut server = start_server(|config| config.shutdown_wait = Duration::from_millis(500)).await;
    // A request whose body never comes (the body timeout is 30 s).
    let mut stalled = tokio::net::TcpStream::connect(server.address).await.unwrap();
    let head = format!(
        "POST /v1/services HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\n\
         Content-Length: 100\r\n\r\n{{\"name\":",
        crate::util::TOKEN
    );
    stalled.write_all(head.as_bytes()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    server.stop().await;
    let took = started.elapsed();
    assert!(took < Duration::from_secs(5), "the shutdown took {took:?}");
}
