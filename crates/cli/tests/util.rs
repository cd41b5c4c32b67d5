//! Helpers shared by the end-to-end tests of the `tessera` binary.

use std::io::{BufRead, BufReader, Lines, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, Command, Output, Stdio};
use std::time::Duration;

use tempfile::TempDir;

/// Runs the binary with `env` added to its environment (and no `COLUMNS`,
/// so tables fit the default 80 columns).
pub fn run_with_env(args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tessera"));
    command.args(args).env_remove("COLUMNS");
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().expect("the tessera binary runs")
}

/// Runs the binary with `store` as its store.
pub fn tessera(args: &[&str], store: &Path) -> Output {
    run_with_env(args, &[("TESSERA_STORE", store)])
}

/// The token [`serve`] starts the server with.
pub const SERVE_TOKEN: &str = "a-token-of-twenty-chars";

/// `tessera serve` on a free loopback port with `store` and the token
/// [`SERVE_TOKEN`] (its file in `dir`): the process, its address and the
/// rest of its log.
pub fn serve(dir: &TempDir, store: &Path) -> (Child, String, Lines<BufReader<ChildStderr>>) {
    let token = dir.path().join("token");
    std::fs::write(&token, format!("{SERVE_TOKEN}\n")).unwrap();
    let mut server = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["serve", "--listen", "127.0.0.1:0", "--token-file", token.to_str().unwrap()])
        .env("TESSERA_STORE", store)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(server.stderr.take().unwrap()).lines();
    let address = loop {
        let line = lines.next().expect("the server says where it listens").unwrap();
        if let Some(rest) = line.strip_prefix("note: serving ") {
            let url = rest.split(" on http://").nth(1).unwrap();
            break url.split('/').next().unwrap().to_string();
        }
    };
    (server, address, lines)
}

/// Sends one HTTP/1.1 request to `address` and returns the whole answer.
pub fn ask(address: &str, request: &str) -> String {
    let mut stream = TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

/// The command's standard output.
pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The command's standard error.
pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Runs and expects failure (status 1) with a one-line error containing
/// every needle.
pub fn fails_with(args: &[&str], store: &Path, needles: &[&str]) -> String {
    let output = tessera(args, store);
    let message = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "expected failure of {args:?}: {}{message}", stdout(&output));
    assert_eq!(message.trim_end().lines().count(), 1, "one-line error expected: {message}");
    for needle in needles {
        assert!(message.contains(needle), "{needle:?} not in: {message}");
    }
    message
}

/// Runs and expects a usage error (status 2): clap's whole message, whose
/// first line holds every needle, with the way to more help after it.
pub fn usage_error(args: &[&str], store: &Path, needles: &[&str]) -> String {
    let output = tessera(args, store);
    let message = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "expected a usage error of {args:?}: {message}");
    let first = message.lines().next().unwrap_or_default();
    for needle in needles {
        assert!(first.contains(needle), "{needle:?} not in the first line of: {message}");
    }
    assert!(message.contains("--help"), "no pointer to --help in: {message}");
    message
}

/// A small ParvaGPU-format folder of the project's own: two models with a
/// handful of configurations (per-process throughput, seconds).
pub fn write_parvagpu_fixture(dir: &Path) -> PathBuf {
    let profiles = dir.join("prof_data");
    std::fs::create_dir_all(&profiles).unwrap();
    let header = "Mig instance,Batch size,Workload Number,Throughput,Latency\n";
    std::fs::write(
        profiles.join("alpha.csv"),
        format!("{header}1,1,1,100.0,0.010\n1,8,1,200.0,0.040\n1,64,1,0,0\n2,8,2,200.0,0.040\n3,8,1,600.0,0.013\n7,8,1,1300.0,0.006\n"),
    )
    .unwrap();
    std::fs::write(
        profiles.join("beta.csv"),
        format!("{header}1,4,1,50.0,0.080\n2,4,1,120.0,0.033\n4,16,3,150.0,0.107\n7,16,1,800.0,0.020"),
    )
    .unwrap();
    profiles
}

pub fn store_in(dir: &TempDir) -> PathBuf {
    dir.path().join("store.sqlite")
}

/// An `ncu --csv` report of one kernel launch whose aggregate is `kernel`
/// (threads, SM %, DRAM %, memory %, registers, static shared memory):
/// blocks of 100 threads.
pub fn ncu_report(kernel: &[f64; 6]) -> String {
    let [threads, sm, dram, memory, registers, shared] = *kernel;
    let grid = threads / 100.0;
    let rows = [
        ("gpu__time_duration.sum", "nsecond", 1000.0),
        ("sm__throughput.avg.pct_of_peak_sustained_elapsed", "%", sm),
        ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "%", dram),
        ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", "%", memory),
        ("launch__grid_size", "", grid),
        ("launch__block_size", "", 100.0),
        ("launch__registers_per_thread", "register/thread", registers / threads),
        ("launch__shared_mem_per_block_static", "byte/block", shared / grid),
    ];
    let mut text = String::from(
        "==PROF== Connected to process 1\n\"ID\",\"Kernel Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n",
    );
    for (metric, unit, value) in rows {
        text.push_str(&format!("\"0\",\"k\",\"{metric}\",\"{unit}\",\"{value}\"\n"));
    }
    text
}
