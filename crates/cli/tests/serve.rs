//! `tessera report` and `tessera serve` end to end: the report of a demo
//! plan, and the service started, asked, and stopped by SIGTERM.

use std::process::Command;
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::util::{ask, serve, stdout, store_in, tessera, SERVE_TOKEN};

#[test]
fn report_draws_every_instance_of_a_plan_as_html_or_svg() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let plan = dir.path().join("plan.json");
    let planned = tessera(&["plan", "--demo", "--format", "json", "-o", plan.to_str().unwrap()], &store);
    assert!(planned.status.success());
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&plan).unwrap()).unwrap();
    let instances: usize =
        json["gpus"].as_array().unwrap().iter().map(|gpu| gpu["instances"].as_array().unwrap().len()).sum();
    let html_path = dir.path().join("report.html");
    let written = tessera(&["report", plan.to_str().unwrap(), "-o", html_path.to_str().unwrap()], &store);
    assert!(written.status.success() && stdout(&written).is_empty());
    let html = std::fs::read_to_string(&html_path).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>") && html.contains("<title>Tessera plan — plan.json</title>"));
    // The markup, before the data and script that draw other pages (the
    // demo's GPUs fit on the first).
    let markup = &html[..html.find("<script type=\"application/json\"").unwrap()];
    assert_eq!(markup.matches("<g class=\"tile\"").count(), instances);
    let service_table = markup.split("<section class=\"service-list\">").nth(1).unwrap();
    assert_eq!(service_table.matches("<tr data-service=").count(), json["services"].as_array().unwrap().len());
    // The overview lists the five services closest to their edge.
    let edge = markup.split("<table class=\"edge\">").nth(1).unwrap().split("</table>").next().unwrap();
    assert_eq!(edge.matches("<tr data-service=").count(), 5, "{edge}");
    assert!(html.contains("proven optimal") && !html.contains("src="));
    let svg = stdout(&tessera(&["report", plan.to_str().unwrap(), "--format", "svg"], &store));
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert_eq!(svg.matches("<g class=\"tile\"").count(), instances);
}

#[test]
fn serve_answers_on_loopback_and_stops_gracefully_on_sigterm() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let (mut server, address, lines) = serve(&dir, &store);
    assert!(address.starts_with("127.0.0.1:"), "{address}");
    let health = ask(&address, "GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n");
    assert!(health.starts_with("HTTP/1.1 200 OK"), "{health}");
    let refused = ask(&address, "POST /v1/plans HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}");
    assert!(refused.starts_with("HTTP/1.1 401"), "{refused}");
    let accepted = ask(
        &address,
        "POST /v1/plans HTTP/1.1\r\nhost: x\r\nauthorization: Bearer a-token-of-twenty-chars\r\n\
         content-type: application/json\r\ncontent-length: 14\r\nconnection: close\r\n\r\n{\"demo\": true}",
    );
    assert!(accepted.starts_with("HTTP/1.1 202"), "{accepted}");
    let killed = Command::new("kill").args(["-TERM", &server.id().to_string()]).status().unwrap();
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = server.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the server did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status:?}");
    // The log never shows the token.
    let log: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(!log.iter().any(|line| line.contains("a-token-of-twenty-chars")), "{log:?}");
    assert!(log.iter().any(|line| line.contains("stopped")), "{log:?}");
    // One structured line per request, in a span that carries its id.
    let answered = |route: &str, status: u16| {
        log.iter().any(|line| {
            line.contains(" INFO request{id=r")
                && line.contains(&format!(" route={route}}}: answered status={status} "))
        })
    };
    assert!(answered("/healthz", 200) && answered("/v1/plans", 401) && answered("/v1/plans", 202), "{log:?}");
    // The job ran or was failed cleanly; nothing is left running.
    let info = stdout(&tessera(&["store", "info", "--format", "json"], &store));
    assert!(info.contains("\"schema_version\": 8"), "{info}");
}

#[test]
fn bench_serve_runs_a_small_load_on_loopback_and_loses_nothing() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let args = [
        "bench",
        "serve",
        "--clients",
        "4",
        "--reads",
        "200",
        "--verifies",
        "20",
        "--jobs",
        "6",
        "--time-limit",
        "5",
        "--wide",
    ];
    let ran = tessera(&args, &store);
    let text = stdout(&ran);
    assert!(ran.status.success(), "{text}{}", String::from_utf8_lossy(&ran.stderr));
    let requests_and_errors = |route: &str| -> (u64, u64) {
        let line = text.lines().find(|line| line.starts_with(route)).unwrap_or_else(|| panic!("no {route}: {text}"));
        let cells: Vec<&str> = line[route.len()..].split_whitespace().collect();
        (cells[0].parse().unwrap(), cells[1].parse().unwrap())
    };
    assert_eq!(requests_and_errors("all of the above"), (200, 0), "{text}");
    assert_eq!(requests_and_errors("POST /v1/verify"), (20, 0), "{text}");
    assert_eq!(requests_and_errors("POST /v1/plans (submit)"), (6, 0), "{text}");
    assert!(text.contains("planning jobs: 6 submitted, 6 done, 0 failed, 0 lost;"), "{text}");
    assert!(text.contains("16 clients hung up mid-request: no trace left"), "{text}");
    // The seed job and the six, each with its plan.
    assert!(text.contains("store after shutdown: integrity ok, 7 planning jobs stored, 7 with a plan"), "{text}");
    // The benchmark's own store is temporary: the user's store is untouched.
    assert!(!store.exists(), "bench serve wrote {}", store.display());
}

/// The JSON body of `method path` (with `body`) on `address`, bearer
/// `token`, and its status.
fn call(address: &str, token: &str, method: &str, path: &str, body: &str) -> (u16, serde_json::Value) {
    let answer = ask(
        address,
        &format!(
            "{method} {path} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {token}\r\ncontent-type: application/json\r\n\
             content-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        ),
    );
    let status: u16 = answer[9..12].parse().unwrap();
    let (_, json) = answer.split_once("\r\n\r\n").unwrap();
    (status, serde_json::from_str(json).unwrap_or(serde_json::Value::Null))
}

#[test]
fn the_cli_and_the_service_make_the_same_plan_and_verify_it_in_the_same_form() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let token = SERVE_TOKEN;
    let (mut server, address, lines) = serve(&dir, &store);
    // Keep draining the log so the server never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    for (strategy, gpu) in [("optimal", "a100-80gb"), ("parva", "a100-80gb"), ("optimal", "h100-80gb")] {
        let cli = tessera(&["plan", "--demo", "--strategy", strategy, "--gpu", gpu, "--format", "json"], &store);
        assert!(cli.status.success(), "{}", String::from_utf8_lossy(&cli.stderr));
        let body = format!(r#"{{"demo": true, "strategy": "{strategy}", "gpus": ["{gpu}"]}}"#);
        let (status, created) = call(&address, token, "POST", "/v1/plans", &body);
        assert_eq!(status, 202, "{created}");
        let url = created["url"].as_str().unwrap().to_string();
        let deadline = Instant::now() + Duration::from_secs(60);
        let job = loop {
            let (_, job) = call(&address, token, "GET", &url, "");
            if job["status"] == "done" || job["status"] == "failed" {
                break job;
            }
            assert!(Instant::now() < deadline, "job {url} did not finish: {job}");
            std::thread::sleep(Duration::from_millis(50));
        };
        assert_eq!(job["status"], "done", "{job}");
        // The service's plan, written as the CLI writes plans: the same bytes.
        let served: tessera_core::Plan = tessera_store::parse_plan("job", job["plan"].to_string().as_bytes()).unwrap();
        assert_eq!(
            String::from_utf8(tessera_store::plan_json(&served)).unwrap(),
            stdout(&cli),
            "{strategy} on {gpu}: the service planned otherwise"
        );
        // Verifying it: the CLI's JSON and the service's answer are one form.
        let plan_file = dir.path().join("plan.json");
        std::fs::write(&plan_file, stdout(&cli)).unwrap();
        let checked = tessera(&["verify", plan_file.to_str().unwrap(), "--demo", "--format", "json"], &store);
        assert!(checked.status.success(), "{}", String::from_utf8_lossy(&checked.stderr));
        let cli_check: serde_json::Value = serde_json::from_str(&stdout(&checked)).unwrap();
        let (status, service_check) =
            call(&address, token, "POST", "/v1/verify", &format!(r#"{{"demo": true, "plan": {}}}"#, stdout(&cli)));
        assert_eq!(status, 200, "{service_check}");
        assert_eq!(cli_check, service_check);
        assert_eq!(cli_check["ok"], true);
    }
    server.kill().unwrap();
    server.wait().unwrap();
}
