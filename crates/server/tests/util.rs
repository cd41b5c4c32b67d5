//! What the server tests share: a server on 127.0.0.1 over a temporary
//! store, clients with and without the token, waiting for a job.

use std::time::{Duration, Instant};

use tessera_core::synthetic::builtin_catalog;
use tessera_core::GpuModel;
use tessera_server::{start, ApiToken, Client, RunningServer, ServeConfig};

/// The token of every test server.
pub const TOKEN: &str = "test-token-0123456789";

/// A running server and its store's folder.
pub struct TestServer {
    /// The server (taken by `stop`).
    pub server: Option<RunningServer>,
    /// Where it listens.
    pub address: std::net::SocketAddr,
    /// The store's folder.
    pub dir: tempfile::TempDir,
}

/// A server over a store in a fresh temporary folder; `configure` may
/// change the configuration first.
pub async fn start_server(configure: impl FnOnce(&mut ServeConfig)) -> TestServer {
    let dir = tempfile::tempdir().unwrap();
    start_server_in(dir, configure).await
}

/// A server over `dir/store.sqlite`.
pub async fn start_server_in(dir: tempfile::TempDir, configure: impl FnOnce(&mut ServeConfig)) -> TestServer {
    let token = ApiToken::new(TOKEN, "test").unwrap();
    let mut config = ServeConfig::new("127.0.0.1:0".parse().unwrap(), dir.path().join("store.sqlite"), token);
    configure(&mut config);
    let server = start(config).await.unwrap();
    TestServer { address: server.address, server: Some(server), dir }
}

impl TestServer {
    /// A client that sends the token.
    pub async fn client(&self) -> Client {
        Client::connect(self.address, Some(TOKEN)).await.unwrap()
    }

    /// A client that sends no token.
    pub async fn anonymous(&self) -> Client {
        Client::connect(self.address, None).await.unwrap()
    }

    /// Stops the server gracefully.
    pub async fn stop(&mut self) {
        if let Some(server) = self.server.take() {
            server.stop().await.unwrap();
        }
    }

    /// The store's path.
    pub fn store_path(&self) -> std::path::PathBuf {
        self.dir.path().join("store.sqlite")
    }
}

/// Polls planning job `id` until it is done or failed (at most 120 s).
pub async fn wait_job(client: &mut Client, id: u64) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let body = client.get(&format!("/v1/plans/{id}")).await.unwrap().json();
        if matches!(body["status"].as_str(), Some("done" | "failed")) {
            return body;
        }
        assert!(Instant::now() < deadline, "job {id} did not finish: {body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The built-in example's A100-80GB profiles as Tessera's profile CSV.
pub fn example_profiles_csv() -> String {
    let catalog = builtin_catalog();
    let profiles = catalog.iter().filter(|profile| profile.gpu_model == GpuModel::A100_80GB);
    let mut csv = Vec::new();
    tessera_store::write_profiles_csv(&mut csv, profiles).unwrap();
    String::from_utf8(csv).unwrap()
}

/// Imports the built-in example's A100-80GB profiles (bert-base, gpt2,
/// mobilenetv2, resnet50, vit-b16), so services of those models may be
/// created.
pub async fn import_example_profiles(client: &mut Client) {
    let import = serde_json::json!({"format": "tessera", "files": {"example.csv": example_profiles_csv()}});
    let answer = client.post("/v1/profiles", &import).await.unwrap();
    assert_eq!(answer.status, 201, "{}", answer.text());
}

/// The error code and message of an error answer.
pub fn error_of(response: &tessera_server::ClientResponse) -> (String, String) {
    let body = response.json();
    (
        body["error"]["code"].as_str().unwrap_or("").to_string(),
        body["error"]["message"].as_str().unwrap_or("").to_string(),
    )
}

/// A store with KACE's measured pairs (when the reference data is there)
/// so colocation requests have something to learn from; `false` when the
/// data is absent.
pub fn store_with_colocations(dir: &std::path::Path) -> bool {
    let Some(pairs) = tessera_testkit::shared_data("kace/pairs_mps100.csv") else { return false };
    let import = tessera_store::read_colocations(&pairs).unwrap();
    let mut pool: Vec<_> = import.rows.iter().flat_map(|row| row.members.iter().map(|m| m.metrics.clone())).collect();
    pool.sort_by(|a, b| a.workload.cmp(&b.workload));
    pool.dedup_by(|a, b| a.workload == b.workload);
    let mut store = tessera_store::Store::open(&dir.join("store.sqlite")).unwrap();
    store.import_colocations(&import.rows, "pairs_mps100.csv").unwrap();
    store.import_workloads(&pool, "pairs_mps100.csv").unwrap();
    true
}
