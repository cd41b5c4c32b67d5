//! `tessera bench serve`: a server on a loopback port over a fresh store,
//! driven by concurrent clients for a bounded number of requests — reads,
//! verifications, planning jobs — then clients that hang up mid-request,
//! then the store checked. Every loop is bounded by a count and a time;
//! no address but 127.0.0.1 is ever contacted.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tessera_store::Store;
use tokio::io::AsyncWriteExt;

use crate::app::start;
use crate::client::Client;
use crate::config::{ApiToken, ServeConfig};
use crate::error::ServerError;

/// What to run.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// Concurrent clients (connections) for reads and verifications.
    pub clients: usize,
    /// Read requests in all (spread over the read routes).
    pub read_requests: usize,
    /// `POST /v1/verify` requests in all.
    pub verify_requests: usize,
    /// Demo planning jobs submitted at once.
    pub plan_jobs: usize,
    /// Each job's time limit, seconds.
    pub plan_time_limit_s: f64,
    /// Planning workers of the server.
    pub planning_workers: usize,
    /// Clients that hang up in the middle of a request.
    pub disconnects: usize,
    /// Longest the whole benchmark may run before it stops waiting.
    pub deadline: Duration,
}

impl Default for LoadOptions {
    fn default() -> LoadOptions {
        LoadOptions {
            clients: 32,
            read_requests: 50_000,
            verify_requests: 2_000,
            plan_jobs: 64,
            plan_time_limit_s: 10.0,
            planning_workers: 2,
            disconnects: 16,
            deadline: Duration::from_secs(900),
        }
    }
}

/// Figures of one route (or a group of routes).
#[derive(Debug, Clone, PartialEq)]
pub struct RouteFigures {
    /// The route, e.g. `GET /v1/services`.
    pub route: String,
    /// Requests answered.
    pub requests: usize,
    /// Answers that were not 2xx, or requests that failed.
    pub errors: usize,
    /// Requests per second over the phase it ran in.
    pub throughput_rps: f64,
    /// Median latency, ms.
    pub p50_ms: f64,
    /// 99th-percentile latency, ms.
    pub p99_ms: f64,
}

/// What the benchmark measured.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadReport {
    /// Per route, then `all reads`.
    pub routes: Vec<RouteFigures>,
    /// Planning jobs submitted.
    pub jobs_submitted: usize,
    /// Jobs that finished with a plan.
    pub jobs_done: usize,
    /// Jobs that failed (with their reasons, first few).
    pub jobs_failed: Vec<String>,
    /// Jobs neither done nor failed when the benchmark stopped waiting.
    pub jobs_lost: usize,
    /// Submission to seen finished, median, seconds (polled every 50 ms).
    pub job_p50_s: f64,
    /// Submission to seen finished, 99th percentile, seconds.
    pub job_p99_s: f64,
    /// From the first submission to the last job finished, seconds.
    pub jobs_seconds: f64,
    /// Clients that hung up mid-request.
    pub disconnects: usize,
    /// What those clients left behind (empty: nothing).
    pub disconnect_traces: Vec<String>,
    /// SQLite's integrity check of the store after the server stopped.
    pub store_integrity: String,
    /// Planning jobs the store holds after the server stopped, and how
    /// many of them are done.
    pub stored_jobs: (usize, usize),
}

/// Runs the benchmark (see the module documentation) on its own runtime.
pub fn bench_serve(options: &LoadOptions) -> Result<LoadReport, ServerError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| ServerError::Runtime(format!("cannot start the runtime: {e}")))?;
    let dir = tempfile::tempdir().map_err(|e| ServerError::Runtime(format!("cannot make a temporary folder: {e}")))?;
    let store_path = dir.path().join("bench.sqlite");
    let mut report = runtime.block_on(drive(options, &store_path))?;
    let store = Store::open_read_only(&store_path).map_err(|e| ServerError::Store(e.to_string()))?;
    report.store_integrity = store.integrity_check().map_err(|e| ServerError::Store(e.to_string()))?;
    let jobs = store.list_jobs(u64::MAX >> 1).map_err(|e| ServerError::Store(e.to_string()))?;
    let done = jobs.iter().filter(|job| job.plan.is_some()).count();
    report.stored_jobs = (jobs.len(), done);
    Ok(report)
}

/// The read routes, in the order requests cycle through them.
fn read_routes(plan_id: u64) -> Vec<String> {
    vec![
        "/v1/services".to_string(),
        "/v1/services/bench-0".to_string(),
        format!("/v1/plans/{plan_id}"),
        "/v1/profiles".to_string(),
        "/healthz".to_string(),
    ]
}

async fn drive(options: &LoadOptions, store_path: &Path) -> Result<LoadReport, ServerError> {
    let token = ApiToken::random()?;
    let address: SocketAddr = "127.0.0.1:0".parse().unwrap_or_else(|_| unreachable!("a valid address"));
    let mut config = ServeConfig::new(address, store_path.to_path_buf(), token.clone());
    config.planning_workers = options.planning_workers;
    config.max_jobs = options.plan_jobs + 16;
    let server = start(config).await?;
    let address = server.address;
    let token = token.expose().to_string();
    let deadline = Instant::now() + options.deadline;
    let mut client = Client::connect(address, Some(&token)).await?;
    // The services' model must be profiled before they are created.
    let import = serde_json::json!({"format": "tessera", "files": {"bench.csv": bert_profile_csv()?}});
    expect(client.post("/v1/profiles", &import).await?, 201, "importing a profile")?;
    for index in 0..8 {
        let service = serde_json::json!({"name": format!("bench-{index}"), "model": "bert-base",
            "rate_rps": 50.0 + f64::from(index), "latency_slo_ms": 200.0});
        expect(client.post("/v1/services", &service).await?, 201, "creating a service")?;
    }
    let seed_job = submit(&mut client, options.plan_time_limit_s).await?;
    let seed_plan = wait_for(&mut client, &[seed_job], deadline).await?;
    let plan_document = seed_plan.get(&seed_job).and_then(|(_, body)| body.get("plan").cloned()).ok_or_else(|| {
        ServerError::Runtime(format!(
            "the seed planning job did not finish with a plan: {:?}",
            seed_plan.get(&seed_job)
        ))
    })?;

    let routes = read_routes(seed_job);
    let (read_figures, all_reads) = phase(address, &token, options.clients, options.read_requests, deadline, {
        let routes = routes.clone();
        move |index| {
            (format!("GET {}", routes[index % routes.len()]), "GET", routes[index % routes.len()].clone(), None)
        }
    })
    .await?;
    let verify_body = serde_json::json!({"demo": true, "plan": plan_document});
    let (verify_figures, _) = phase(address, &token, options.clients, options.verify_requests, deadline, move |_| {
        ("POST /v1/verify".to_string(), "POST", "/v1/verify".to_string(), Some(verify_body.clone()))
    })
    .await?;

    // Planning jobs, all submitted at once from their own connections.
    let jobs_started = Instant::now();
    let mut submissions = Vec::new();
    for _ in 0..options.plan_jobs {
        let token = token.clone();
        let time_limit_s = options.plan_time_limit_s;
        submissions.push(tokio::spawn(async move {
            let mut client = Client::connect(address, Some(&token)).await?;
            let started = Instant::now();
            let id = submit(&mut client, time_limit_s).await?;
            Ok::<_, ServerError>((id, started, started.elapsed()))
        }));
    }
    let mut submitted = Vec::new();
    let mut submit_ms = Vec::new();
    let mut submit_errors = 0;
    for submission in submissions {
        match submission.await {
            Ok(Ok((id, started, took))) => {
                submitted.push((id, started));
                submit_ms.push(took.as_secs_f64() * 1000.0);
            }
            _ => submit_errors += 1,
        }
    }
    let submit_seconds = jobs_started.elapsed().as_secs_f64();
    let ids: Vec<u64> = submitted.iter().map(|(id, _)| *id).collect();
    let finished = wait_for(&mut client, &ids, deadline).await?;
    let jobs_seconds = jobs_started.elapsed().as_secs_f64();
    let mut job_seconds = Vec::new();
    let (mut done, mut failed) = (0, Vec::new());
    for (id, started) in &submitted {
        if let Some((seen, body)) = finished.get(id) {
            job_seconds.push(seen.duration_since(*started).as_secs_f64());
            match body["status"].as_str() {
                Some("done") => done += 1,
                _ => failed.push(format!("job {id}: {}", body["error"].as_str().unwrap_or("no reason given"))),
            }
        }
    }
    let lost = submitted.len() - done - failed.len();

    let traces = hang_up(address, &token, options.disconnects, &mut client).await?;
    server.stop().await?;

    let mut routes_out = read_figures;
    routes_out.push(all_reads);
    routes_out.extend(verify_figures);
    routes_out.push(figures("POST /v1/plans (submit)".to_string(), submit_ms, submit_errors, submit_seconds));
    job_seconds.sort_by(f64::total_cmp);
    Ok(LoadReport {
        routes: routes_out,
        jobs_submitted: submitted.len(),
        jobs_done: done,
        jobs_failed: failed.into_iter().take(5).collect(),
        jobs_lost: lost,
        job_p50_s: percentile(&job_seconds, 0.50),
        job_p99_s: percentile(&job_seconds, 0.99),
        jobs_seconds,
        disconnects: options.disconnects,
        disconnect_traces: traces,
        store_integrity: String::new(),
        stored_jobs: (0, 0),
    })
}

/// `response` if its status is `status`, else an error naming `what`.
fn expect(
    response: crate::client::ClientResponse,
    status: u16,
    what: &str,
) -> Result<crate::client::ClientResponse, ServerError> {
    if response.status == status {
        Ok(response)
    } else {
        Err(ServerError::Runtime(format!("{what}: status {} ({})", response.status, response.text())))
    }
}

/// Submits a demo planning job; returns its id.
/// The built-in example's profile of `bert-base` on the A100-80GB, as
/// Tessera's profile CSV.
fn bert_profile_csv() -> Result<String, ServerError> {
    let catalog = tessera_core::synthetic::builtin_catalog();
    let profile = catalog
        .get(tessera_core::GpuModel::A100_80GB, "bert-base")
        .ok_or_else(|| ServerError::Runtime("the built-in example has no bert-base profile".to_string()))?;
    let mut csv = Vec::new();
    tessera_store::write_profiles_csv(&mut csv, [profile]).map_err(|e| ServerError::Runtime(e.to_string()))?;
    String::from_utf8(csv).map_err(|e| ServerError::Runtime(e.to_string()))
}

async fn submit(client: &mut Client, time_limit_s: f64) -> Result<u64, ServerError> {
    let body = serde_json::json!({"demo": true, "time_limit_s": time_limit_s});
    let response = expect(client.post("/v1/plans", &body).await?, 202, "submitting a planning job")?;
    response.json()["id"].as_u64().ok_or_else(|| ServerError::Runtime("a job without an id".to_string()))
}

/// Polls jobs `ids` every 50 ms until each is done or failed, or until
/// `deadline`; returns, per finished job, when it was first seen finished
/// and its body.
async fn wait_for(
    client: &mut Client,
    ids: &[u64],
    deadline: Instant,
) -> Result<HashMap<u64, (Instant, serde_json::Value)>, ServerError> {
    let mut finished = HashMap::new();
    while finished.len() < ids.len() && Instant::now() < deadline {
        let pending: Vec<u64> = ids.iter().copied().filter(|id| !finished.contains_key(id)).collect();
        for id in pending {
            let body = client.get(&format!("/v1/plans/{id}")).await?.json();
            if matches!(body["status"].as_str(), Some("done" | "failed")) {
                finished.insert(id, (Instant::now(), body));
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(finished)
}

/// What one request of a phase is: its label, method, path and body.
type RequestOf = (String, &'static str, String, Option<serde_json::Value>);

/// Runs `total` requests (`request(i)` is the i-th) over `clients`
/// connections; returns figures per label and for the whole phase.
async fn phase(
    address: SocketAddr,
    token: &str,
    clients: usize,
    total: usize,
    deadline: Instant,
    request: impl Fn(usize) -> RequestOf + Send + Sync + 'static,
) -> Result<(Vec<RouteFigures>, RouteFigures), ServerError> {
    let next = Arc::new(AtomicUsize::new(0));
    let request = Arc::new(request);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..clients.max(1) {
        let (next, request, token) = (Arc::clone(&next), Arc::clone(&request), token.to_string());
        tasks.push(tokio::spawn(async move {
            let mut client = Client::connect(address, Some(&token)).await?;
            let mut samples: Vec<(String, f64, bool)> = Vec::new();
            loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                if index >= total || Instant::now() >= deadline {
                    break;
                }
                let (label, method, path, body) = request(index);
                let sent = Instant::now();
                let answer = client.send(method, &path, body.as_ref(), &[]).await;
                let ok = matches!(&answer, Ok(response) if (200..300).contains(&response.status));
                samples.push((label, sent.elapsed().as_secs_f64() * 1000.0, ok));
                if answer.is_err() {
                    client = Client::connect(address, Some(&token)).await?;
                }
            }
            Ok::<_, ServerError>(samples)
        }));
    }
    let mut by_label: HashMap<String, (Vec<f64>, usize)> = HashMap::new();
    let mut all = (Vec::new(), 0);
    for task in tasks {
        let samples = task.await.map_err(|e| ServerError::Runtime(e.to_string()))??;
        for (label, ms, ok) in samples {
            let entry = by_label.entry(label).or_default();
            entry.0.push(ms);
            all.0.push(ms);
            if !ok {
                entry.1 += 1;
                all.1 += 1;
            }
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let mut labels: Vec<String> = by_label.keys().cloned().collect();
    labels.sort();
    let per_label = labels
        .into_iter()
        .map(|label| {
            let (samples, errors) = by_label.remove(&label).unwrap_or_default();
            figures(label, samples, errors, seconds)
        })
        .collect();
    Ok((per_label, figures("all of the above".to_string(), all.0, all.1, seconds)))
}

/// Figures of `samples` (ms) over `seconds`.
fn figures(route: String, mut samples: Vec<f64>, errors: usize, seconds: f64) -> RouteFigures {
    samples.sort_by(f64::total_cmp);
    RouteFigures {
        route,
        requests: samples.len(),
        errors,
        throughput_rps: samples.len() as f64 / seconds.max(1e-9),
        p50_ms: percentile(&samples, 0.50),
        p99_ms: percentile(&samples, 0.99),
    }
}

/// The `q`-quantile of sorted `values` (nearest rank); NaN when empty.
fn percentile(values: &[f64], q: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let rank = (q * values.len() as f64).ceil() as usize;
    values[rank.clamp(1, values.len()) - 1]
}

/// `count` clients each send the headers and part of the body of a request
/// that would create a service, then hang up. Returns what they left: a
/// service stored, a request still counted in flight.
async fn hang_up(
    address: SocketAddr,
    token: &str,
    count: usize,
    client: &mut Client,
) -> Result<Vec<String>, ServerError> {
    let services_before = client.get("/v1/services").await?.json().as_array().map_or(0, Vec::len);
    for index in 0..count {
        let body =
            format!(r#"{{"name": "ghost-{index}", "model": "bert-base", "rate_rps": 1.0, "latency_slo_ms": 100.0}}"#);
        let head = format!(
            "POST /v1/services HTTP/1.1\r\nhost: {address}\r\nauthorization: Bearer {token}\r\n\
             content-type: application/json\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        let mut stream = tokio::net::TcpStream::connect(address)
            .await
            .map_err(|e| ServerError::Runtime(format!("connecting to {address}: {e}")))?;
        let partial = &body.as_bytes()[..body.len() / 2];
        let _ = stream.write_all(head.as_bytes()).await;
        let _ = stream.write_all(partial).await;
        let _ = stream.flush().await;
        tokio::time::sleep(Duration::from_millis(5)).await;
        drop(stream);
    }
    let mut traces = Vec::new();
    // The scrape itself is in flight while the metrics are rendered.
    let mut in_flight = String::new();
    for _ in 0..40 {
        let text = client.get("/metrics").await?.text();
        in_flight =
            text.lines().find(|line| line.starts_with("tessera_http_requests_in_flight ")).unwrap_or("").to_string();
        if in_flight == "tessera_http_requests_in_flight 1" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    if in_flight != "tessera_http_requests_in_flight 1" {
        traces.push(format!("requests still in flight after the clients left: {in_flight}"));
    }
    let services = client.get("/v1/services").await?.json();
    let after = services.as_array().map_or(0, Vec::len);
    if after != services_before {
        traces.push(format!("{} services before the clients came, {after} after", services_before));
    }
    Ok(traces)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_take_the_nearest_rank() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(
            (percentile(&values, 0.5), percentile(&values, 0.99), percentile(&values, 1.0)),
            (50.0, 99.0, 100.0)
        );
        assert_eq!(percentile(&[7.0], 0.99), 7.0);
        assert!(percentile(&[], 0.5).is_nan());
    }
}
