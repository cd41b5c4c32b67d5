//! The API from import to plan to report, services' versions, the token.

use serde_json::json;
use tessera_core::synthetic::demo_services;

use crate::util::{error_of, example_profiles_csv, start_server, start_server_in, store_with_colocations, wait_job};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn import_services_plan_verify_and_report_end_to_end() {
    let mut server = start_server(|_| {}).await;
    let mut client = server.client().await;
    let import = json!({"format": "tessera", "files": {"example.csv": example_profiles_csv()}});
    let imported = client.post("/v1/profiles", &import).await.unwrap();
    assert_eq!(imported.status, 201, "{}", imported.text());
    assert_eq!(imported.json()["models"], 5);
    let listed = client.get("/v1/profiles").await.unwrap().json();
    assert_eq!(listed.as_array().unwrap().len(), 5);
    let profile = client.get("/v1/profiles/a100-80gb/bert-base").await.unwrap();
    assert_eq!(profile.status, 200);
    assert!(!profile.json()["points"].as_array().unwrap().is_empty());

    for slo in demo_services() {
        let body = json!({"name": slo.service, "model": slo.model, "rate_rps": slo.rate_rps,
            "latency_slo_ms": slo.latency_slo_ms, "image": "registry.example/serve:1"});
        let created = client.post("/v1/services", &body).await.unwrap();
        assert_eq!((created.status, created.header("etag")), (201, Some("\"1\"")), "{}", created.text());
    }
    let started = client.post("/v1/plans", &json!({"time_limit_s": 20.0})).await.unwrap();
    assert_eq!(started.status, 202, "{}", started.text());
    let id = started.json()["id"].as_u64().unwrap();
    assert_eq!(started.header("location"), Some(format!("/v1/plans/{id}").as_str()));
    let job = wait_job(&mut client, id).await;
    assert_eq!(job["status"], "done", "{job}");
    let plan = &job["plan"];
    assert_eq!(plan["version"], 3);
    assert_eq!(plan["images"]["search-ranking"]["image"], "registry.example/serve:1", "{plan}");
    let instances: usize =
        plan["gpus"].as_array().unwrap().iter().map(|gpu| gpu["instances"].as_array().unwrap().len()).sum();
    assert!(plan["services"].as_array().unwrap().iter().all(|report| report["met"] == true));

    // Verified again from the inputs kept with it, even after the services change.
    let stale = client.get("/v1/services/search-ranking").await.unwrap();
    let update = json!({"model": "bert-base", "rate_rps": 5000.0, "latency_slo_ms": 120.0});
    let updated = client
        .send("PUT", "/v1/services/search-ranking", Some(&update), &[("if-match", stale.header("etag").unwrap())])
        .await
        .unwrap();
    assert_eq!(updated.status, 200, "{}", updated.text());
    let reverified = client.post(&format!("/v1/plans/{id}/verify"), &json!({})).await.unwrap().json();
    assert_eq!((reverified["ok"].as_bool(), reverified["services"].as_u64()), (Some(true), Some(6)), "{reverified}");
    // Against the current services the same plan falls short, and says where.
    let now = client.post("/v1/verify", &json!({"plan": plan})).await.unwrap().json();
    assert_eq!(now["ok"], false, "{now}");
    assert!(now["violations"][0]["message"].as_str().unwrap().contains("search-ranking"), "{now}");

    // The report: one tile per instance, and the page at / shows this plan.
    let page = client.get(&format!("/plans/{id}")).await.unwrap();
    assert_eq!(page.header("content-type"), Some("text/html; charset=utf-8"));
    let page = page.text();
    let markup = &page[..page.find("<script type=\"application/json\"").unwrap()];
    assert_eq!(markup.matches("<g class=\"tile\"").count(), instances);
    let index = client.get("/").await.unwrap().text();
    assert!(index.contains(&format!("Plan {id}")) && index.contains("proven optimal"), "{index}");
    let svg = client.get(&format!("/plans/{id}/tiles.svg")).await.unwrap();
    assert_eq!(svg.header("content-type"), Some("image/svg+xml"));
    assert_eq!(svg.text().matches("<g class=\"tile\"").count(), instances);

    let metrics = client.get("/metrics").await.unwrap().text();
    assert!(metrics.contains(&format!("tessera_plan_id {id}")), "{metrics}");
    assert!(metrics.contains(r#"tessera_planning_jobs_total{status="done"} 1"#));
    assert!(metrics.contains("GPU_I_PROFILE=\""));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_updates_of_a_service_give_one_winner_and_one_conflict() {
    let mut server = start_server(|_| {}).await;
    let mut client = server.client().await;
    crate::util::import_example_profiles(&mut client).await;
    let body = json!({"name": "chat", "model": "gpt2", "rate_rps": 10.0, "latency_slo_ms": 300.0});
    assert_eq!(client.post("/v1/services", &body).await.unwrap().status, 201);
    let again = client.post("/v1/services", &body).await.unwrap();
    assert_eq!((again.status, error_of(&again).0.as_str()), (409, "already_exists"));

    // Two writers read version 1 and update at the same time.
    let mut tasks = Vec::new();
    for rate in [20.0, 30.0] {
        let mut writer = server.client().await;
        tasks.push(tokio::spawn(async move {
            let update = json!({"model": "gpt2", "rate_rps": rate, "latency_slo_ms": 300.0});
            writer.send("PUT", "/v1/services/chat", Some(&update), &[("if-match", "\"1\"")]).await.unwrap()
        }));
    }
    let mut statuses = Vec::new();
    for task in tasks {
        let answer = task.await.unwrap();
        if answer.status == 409 {
            let (code, message) = error_of(&answer);
            assert_eq!(code, "version_conflict");
            assert!(message.contains("service 'chat' is at version 2, not 1"), "{message}");
        }
        statuses.push(answer.status);
    }
    statuses.sort_unstable();
    assert_eq!(statuses, vec![200, 409]);
    let stored = client.get("/v1/services/chat").await.unwrap();
    assert_eq!((stored.header("etag"), stored.json()["version"].as_u64()), (Some("\"2\""), Some(2)));

    let update = json!({"model": "gpt2", "rate_rps": 40.0, "latency_slo_ms": 300.0});
    let unconditional = client.send("PUT", "/v1/services/chat", Some(&update), &[]).await.unwrap();
    assert_eq!((unconditional.status, error_of(&unconditional).0.as_str()), (428, "precondition_required"));
    let stale_delete = client.send("DELETE", "/v1/services/chat", None, &[("if-match", "\"1\"")]).await.unwrap();
    assert_eq!(stale_delete.status, 409);
    let deleted = client.send("DELETE", "/v1/services/chat", None, &[("if-match", "\"2\"")]).await.unwrap();
    assert_eq!(deleted.status, 204);
    assert_eq!(client.get("/v1/services/chat").await.unwrap().status, 404);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_guards_changes_and_reads_unless_reads_are_opened() {
    let mut closed = start_server(|_| {}).await;
    let mut anonymous = closed.anonymous().await;
    for path in ["/v1/services", "/", "/metrics", "/openapi.json"] {
        let answer = anonymous.get(path).await.unwrap();
        assert_eq!((answer.status, answer.header("www-authenticate")), (401, Some("Bearer")), "{path}");
    }
    assert_eq!(anonymous.get("/healthz").await.unwrap().status, 200);
    assert_eq!(anonymous.get("/readyz").await.unwrap().status, 200);
    let mut wrong = tessera_server::Client::connect(closed.address, Some("test-token-0123456788")).await.unwrap();
    assert_eq!(wrong.get("/v1/services").await.unwrap().status, 401);
    let answer = closed.client().await.get("/v1/services").await.unwrap();
    assert_eq!(answer.status, 200);
    assert!(answer.header("x-request-id").is_some_and(|id| !id.is_empty()));
    closed.stop().await;

    let mut open = start_server(|config| config.public_reads = true).await;
    let mut anonymous = open.anonymous().await;
    assert_eq!(anonymous.get("/v1/services").await.unwrap().status, 200);
    assert_eq!(anonymous.get("/").await.unwrap().status, 200);
    let body = json!({"name": "x", "model": "gpt2", "rate_rps": 1.0, "latency_slo_ms": 100.0});
    let refused = anonymous.post("/v1/services", &body).await.unwrap();
    assert_eq!((refused.status, error_of(&refused).0.as_str()), (401, "unauthorized"));
    open.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_pass_promtool_when_it_is_installed() {
    let mut server = start_server(|_| {}).await;
    let mut client = server.client().await;
    let id = client.post("/v1/plans", &json!({"demo": true})).await.unwrap().json()["id"].as_u64().unwrap();
    wait_job(&mut client, id).await;
    let openmetrics = client
        .send("GET", "/metrics", None, &[("accept", "application/openmetrics-text; version=1.0.0")])
        .await
        .unwrap();
    assert!(openmetrics.header("content-type").unwrap().starts_with("application/openmetrics-text"));
    assert!(openmetrics.text().ends_with("# EOF\n"));
    let metrics = client.get("/metrics").await.unwrap();
    server.stop().await;
    assert!(metrics.header("content-type").unwrap().starts_with("text/plain; version=0.0.4"));
    let text = metrics.text();
    assert!(text.contains("tessera_service_provisioned_rps{") && text.contains("tessera_gpu_free_compute_slices{"));
    promtool_checks(&text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parvagpu_profile_files_import_with_their_gpu_model() {
    let mut server = start_server(|_| {}).await;
    let mut client = server.client().await;
    let file = "Mig instance,Batch size,Workload Number,Throughput,Latency\n1,4,2,10,0.05\n2,8,1,40,0.04\n7,8,1,0,0\n";
    let without_gpu =
        client.post("/v1/profiles", &json!({"format": "parvagpu", "files": {"bert.csv": file}})).await.unwrap();
    assert_eq!(without_gpu.status, 422);
    assert!(error_of(&without_gpu).1.starts_with("field 'gpu_model': "), "{}", without_gpu.text());
    let body = json!({"format": "parvagpu", "gpu_model": "a100-80gb", "files": {"bert.csv": file}});
    let imported = client.post("/v1/profiles", &body).await.unwrap();
    assert_eq!(imported.status, 201, "{}", imported.text());
    assert_eq!((imported.json()["points"].as_u64(), imported.json()["infeasible_rows"].as_u64()), (Some(2), Some(1)));
    let profile = client.get("/v1/profiles/a100-80gb/bert").await.unwrap().json();
    assert_eq!(profile["points"][0]["throughput_rps"], 20.0);
    let removed = client.send("DELETE", "/v1/profiles/a100-80gb/bert", None, &[]).await.unwrap();
    assert_eq!(removed.json()["removed_points"], 2);
    assert_eq!(client.get("/v1/profiles/a100-80gb/bert").await.unwrap().status, 404);
    assert_eq!(client.get("/v1/profiles/b200/bert").await.unwrap().status, 404);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_colocation_and_simulation_pages_show_what_the_api_answers() {
    let dir = tempfile::tempdir().unwrap();
    if !store_with_colocations(dir.path()) {
        return;
    }
    let mut server = start_server_in(dir, |_| {}).await;
    let mut client = server.client().await;
    let empty = client.get("/simulation").await.unwrap().text();
    assert!(empty.contains("No simulation yet"), "{empty}");

    // The page ranks the same groups, in the same order, as the API.
    let target = "bert-base-cased_batch8-inf";
    let request = json!({"target": target, "group_size": 2, "top": 4});
    let ranked = client.post("/v1/colocation/recommend", &request).await.unwrap();
    assert_eq!(ranked.status, 200, "{}", ranked.text());
    // An unknown target is refused (before any model is trained for it).
    let unknown = client.post("/v1/colocation/recommend", &json!({"target": "nope", "group_size": 2})).await.unwrap();
    assert_eq!(unknown.status, 422, "{}", unknown.text());
    assert!(unknown.text().contains("'nope'"), "{}", unknown.text());
    let groups: Vec<String> = ranked.json()["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|group| {
            let names: Vec<&str> =
                group["members"].as_array().unwrap().iter().map(|m| m["workload"].as_str().unwrap()).collect();
            format!("<tr><td>{}</td><td>{:.1}</td>", names.join(" + "), group["predicted_total_rps"].as_f64().unwrap())
        })
        .collect();
    assert_eq!(groups.len(), 4);
    let page = client.get(&format!("/colocation?target={target}&group_size=2&top=4")).await.unwrap().text();
    let positions: Vec<usize> =
        groups.iter().map(|row| page.find(row.as_str()).unwrap_or_else(|| panic!("{row} not in {page}"))).collect();
    assert!(positions.windows(2).all(|pair| pair[0] < pair[1]), "{positions:?}");
    assert_eq!(page.matches("<tr><td>").count(), 4);

    // The simulation's Gantt chart: one bar per busy interval, the makespan
    // the API gave.
    let trace = tessera_sim::generate(&tessera_sim::GenerateParams {
        clients: 3,
        operations_per_client: 2,
        oversubscription: 1.5,
        transfer_ratio: 1.0,
        link: tessera_sim::Link::PcieGen4,
        seed: 7,
    })
    .unwrap();
    let simulated = client.post("/v1/simulate", &json!({"trace": trace, "scheduler": "fifo"})).await.unwrap();
    assert_eq!(simulated.status, 200, "{}", simulated.text());
    let makespan_ms = simulated.json()["makespan_ms"].as_f64().unwrap();
    // Its defaults are the CLI's (tessera_sim's `Policies::default()`).
    let defaults = tessera_sim::Policies::default();
    let eviction = serde_json::to_value(defaults.eviction).unwrap().as_str().unwrap().to_lowercase();
    let explicit = json!({"trace": trace, "scheduler": "fifo", "eviction": eviction,
        "prefetch": defaults.prefetch.to_string(), "retention": "release"});
    let spelled = client.post("/v1/simulate", &explicit).await.unwrap();
    assert_eq!(spelled.json()["makespan_ms"].as_f64(), Some(makespan_ms), "{}", spelled.text());
    let page = client.get("/simulation").await.unwrap().text();
    assert!(page.contains(&format!("makespan {makespan_ms:.1} ms")), "{page}");
    let chart = &page[page.find("<div class=\"gantt\"><svg").expect("a chart")..];
    // Three clients of two operations: at least six compute bars.
    assert!(chart.matches("<rect ").count() >= 6, "{chart}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_replans_from_a_done_plan_with_the_fresh_optimum_in_its_notes() {
    let mut server = start_server(|_| {}).await;
    let mut client = server.client().await;
    let first = client.post("/v1/plans", &json!({"demo": true})).await.unwrap().json()["id"].as_u64().unwrap();
    let old = wait_job(&mut client, first).await;
    assert_eq!(old["status"], "done", "{old}");

    // The same services from the running plan: nothing moves.
    let again = client.post("/v1/plans", &json!({"demo": true, "from_plan": first})).await.unwrap();
    assert_eq!(again.status, 202, "{}", again.text());
    let replanned = wait_job(&mut client, again.json()["id"].as_u64().unwrap()).await;
    assert_eq!(replanned["status"], "done", "{replanned}");
    assert_eq!(replanned["plan"]["gpus"], old["plan"]["gpus"], "unchanged SLOs keep every GPU as it is");
    let notes = replanned["plan"]["notes"].as_array().unwrap();
    let gpus = old["plan"]["gpu_count"].as_u64().unwrap();
    let expected = format!("replanned from plan {first}: {gpus} of {gpus} layouts kept, 0 GPUs reconfigured");
    assert!(notes.iter().any(|note| note.as_str().unwrap().starts_with(&expected)), "{notes:?}");

    // Refusals: no such job, a job without a plan is not a plan, parva cannot replan.
    let missing = client.post("/v1/plans", &json!({"demo": true, "from_plan": 999})).await.unwrap();
    assert_eq!(missing.status, 404, "{}", missing.text());
    assert!(error_of(&missing).1.contains("no planning job 999"), "{}", missing.text());
    let too_few = client.post("/v1/plans", &json!({"demo": true, "max_gpus": 1})).await.unwrap().json();
    let failed = wait_job(&mut client, too_few["id"].as_u64().unwrap()).await;
    assert_eq!(failed["status"], "failed", "{failed}");
    let planless = json!({"demo": true, "from_plan": failed["id"]});
    let planless = client.post("/v1/plans", &planless).await.unwrap();
    assert_eq!(planless.status, 422, "{}", planless.text());
    assert!(error_of(&planless).1.contains("has no plan (it is failed)"), "{}", planless.text());
    let parva =
        client.post("/v1/plans", &json!({"demo": true, "from_plan": first, "strategy": "parva"})).await.unwrap();
    assert_eq!(parva.status, 422, "{}", parva.text());
    assert!(
        error_of(&parva).1.contains("replanning from a running plan uses the optimal strategy"),
        "{}",
        parva.text()
    );
    server.stop().await;
}

/// A job with `share: serialized` over light services: the plan puts them
/// in a shared instance, verifies stored and posted (members are services
/// the store holds), the page draws the shared tile, `/metrics` gives the
/// executor's and each member's busy share, and a replan after a member's
/// rate changes keeps the instance. Sharing outside its model is a 422.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn light_services_share_an_instance_in_a_job_and_its_replan() {
    let mut server = start_server(|_| {}).await;
    let mut client = server.client().await;
    let import = json!({"format": "tessera", "files": {"example.csv": example_profiles_csv()}});
    assert_eq!(client.post("/v1/profiles", &import).await.unwrap().status, 201);
    for k in 0..8 {
        let body = json!({"name": format!("light-{k}"), "model": "resnet50", "rate_rps": 2 + k % 4,
            "latency_slo_ms": 150.0});
        let created = client.post("/v1/services", &body).await.unwrap();
        assert_eq!(created.status, 201, "{}", created.text());
    }
    let started = client.post("/v1/plans", &json!({"share": "serialized", "time_limit_s": 20.0})).await.unwrap();
    assert_eq!(started.status, 202, "{}", started.text());
    let first = started.json()["id"].as_u64().unwrap();
    let job = wait_job(&mut client, first).await;
    assert_eq!(job["status"], "done", "{job}");
    let plan = &job["plan"];
    let instances: Vec<&serde_json::Value> =
        plan["gpus"].as_array().unwrap().iter().flat_map(|gpu| gpu["instances"].as_array().unwrap()).collect();
    let members: Vec<&str> = instances
        .iter()
        .filter_map(|instance| instance.get("members"))
        .flat_map(|members| members.as_array().unwrap().iter().map(|m| m["service"].as_str().unwrap()))
        .collect();
    assert!(members.len() >= 2, "light services share an instance: {plan}");
    assert!(plan["services"].as_array().unwrap().iter().all(|report| report["met"] == true), "{plan}");

    let stored = client.post(&format!("/v1/plans/{first}/verify"), &json!({})).await.unwrap().json();
    assert_eq!((stored["ok"].as_bool(), stored["services"].as_u64()), (Some(true), Some(8)), "{stored}");
    let posted = client.post("/v1/verify", &json!({"plan": plan})).await.unwrap();
    assert_eq!((posted.status, posted.json()["ok"].as_bool()), (200, Some(true)), "{}", posted.text());

    let page = client.get(&format!("/plans/{first}")).await.unwrap().text();
    let markup = &page[..page.find("<script type=\"application/json\"").unwrap()];
    assert_eq!(markup.matches("<g class=\"tile\"").count(), instances.len());
    assert!(markup.contains(&format!("data-members=\"{}", members[0])), "{markup}");
    let metrics = client.get("/metrics").await.unwrap().text();
    let member_series = format!(r#"service="{}",model="resnet50"}}"#, members[0]);
    let member_busy = metrics.lines().find(|line| {
        line.starts_with("tessera_mig_shared_member_busy_ratio{") && line.contains(member_series.as_str())
    });
    assert!(member_busy.is_some(), "{metrics}");
    assert!(metrics.contains("tessera_mig_shared_instance_busy_ratio{") && metrics.contains(r#"sharing="serialized""#));
    promtool_checks(&metrics);

    // light-0 doubles its rate; the replan keeps the shared instance.
    let stale = client.get("/v1/services/light-0").await.unwrap();
    let update = json!({"model": "resnet50", "rate_rps": 4.0, "latency_slo_ms": 150.0});
    let headers = [("if-match", stale.header("etag").unwrap())];
    let updated = client.send("PUT", "/v1/services/light-0", Some(&update), &headers).await.unwrap();
    assert_eq!(updated.status, 200, "{}", updated.text());
    let again = client.post("/v1/plans", &json!({"share": "serialized", "from_plan": first})).await.unwrap();
    assert_eq!(again.status, 202, "{}", again.text());
    let replanned = wait_job(&mut client, again.json()["id"].as_u64().unwrap()).await;
    assert_eq!(replanned["status"], "done", "{replanned}");
    let kept =
        replanned["plan"]["gpus"].as_array().unwrap().iter().flat_map(|gpu| gpu["instances"].as_array().unwrap());
    assert!(kept.filter(|instance| instance.get("members").is_some()).count() >= 1, "{replanned}");
    let notes = replanned["plan"]["notes"].as_array().unwrap();
    assert!(notes.iter().any(|note| note.as_str().unwrap().starts_with(&format!("replanned from plan {first}"))));

    let bursty = client.post("/v1/plans", &json!({"share": "serialized", "arrivals": "cv=2"})).await.unwrap();
    assert_eq!(bursty.status, 422, "{}", bursty.text());
    assert!(error_of(&bursty).1.contains("Poisson"), "{}", bursty.text());
    server.stop().await;
}

/// `promtool check metrics` passes on `text` (skipped, saying so, where
/// promtool is not installed and CI does not require it).
fn promtool_checks(text: &str) {
    let promtool = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let Ok(mut promtool) = promtool else {
        tessera_testkit::tool_missing(
            "TESSERA_REQUIRE_PROMTOOL",
            "promtool is not installed",
            "apt-get install prometheus",
        );
        return;
    };
    std::io::Write::write_all(promtool.stdin.as_mut().unwrap(), text.as_bytes()).unwrap();
    let output = promtool.wait_with_output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success() && said.trim().is_empty(), "promtool check metrics:\n{said}\non:\n{text}");
}
