//! `tessera profile segments` end to end on a stand-in node: a fake
//! `nvidia-smi` reporting an H200 without MIG mode, a fake
//! `nvidia-cuda-mps-control` keeping one daemon per pipe directory (and
//! logging starts and quits), and workloads that are shell one-liners
//! printing a batch-dependent throughput.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Output;

use crate::util::{stderr, stdout};
use tempfile::TempDir;
use tessera_core::GpuModel;

fn script(dir: &Path, name: &str, text: &str) {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The stand-in node in `dir`; returns the MPS log (one line per start and quit).
fn node(dir: &TempDir) -> PathBuf {
    let log = dir.path().join("mps.log");
    script(
        dir.path(),
        "nvidia-smi",
        "#!/bin/sh\ncase \"$*\" in\n  \"--query-gpu=name,memory.total,mig.mode.current \"*) echo 'NVIDIA H200, 143771, Disabled' ;;\n  \
         *) echo 'ERROR: Invalid combination of input arguments.'; exit 2 ;;\nesac\n",
    );
    script(
        dir.path(),
        "nvidia-cuda-mps-control",
        &format!(
            "#!/bin/sh\nm=\"$CUDA_MPS_PIPE_DIRECTORY/fake-daemon\"\nif [ \"$1\" = -d ]; then\n  \
             [ -e \"$m\" ] && {{ echo 'An instance of this daemon is already running' >&2; exit 1; }}\n  \
             : > \"$m\"; echo start >> '{log}'; exit 0\nfi\nread command\ncase \"$command\" in\n  \
             quit) [ -e \"$m\" ] || {{ echo 'Cannot find MPS control daemon process' >&2; exit 1; }}; rm \"$m\"; echo quit >> '{log}' ;;\n  \
             get_server_list) [ -e \"$m\" ] || exit 1 ;;\nesac\n",
            log = log.display()
        ),
    );
    log
}

fn tessera(args: &[&str], dir: &TempDir) -> Output {
    let store = dir.path().join("store.sqlite");
    let path = PathBuf::from(format!("{}:/usr/bin:/bin", dir.path().display()));
    crate::util::run_with_env(args, &[("PATH", &path), ("TESSERA_STORE", &store)])
}

fn register(dir: &TempDir, command: &str) {
    let add = ["workload", "add", "w", "--family", "tiny-mlp", "--task", "inference", "--batch", "1"];
    let output = tessera(&[&add[..], &["--command", command]].concat(), dir);
    assert!(output.status.success(), "{}", stderr(&output));
}

fn stored_points(dir: &TempDir) -> Vec<(u8, u32, u32, f64, f64)> {
    let store = tessera_store::Store::open(&dir.path().join("store.sqlite")).unwrap();
    let catalog = store.load_catalog(Some(GpuModel::H200_141GB)).unwrap();
    let profile = catalog.get(GpuModel::H200_141GB, "tiny-mlp").expect("a stored profile");
    profile
        .points()
        .iter()
        .map(|p| (p.config.size_gpcs, p.config.batch, p.config.procs, p.throughput_rps, p.latency_ms))
        .collect()
}

#[test]
fn a_whole_gpu_sweep_stores_every_feasible_point_and_merges_later_runs() {
    let dir = TempDir::new().unwrap();
    let log = node(&dir);
    // 100 × batch samples/s per process; batch 8 runs out of memory.
    register(
        &dir,
        "if [ {batch} -ge 8 ]; then echo 'CUDA out of memory' >&2; exit 1; fi; echo tessera:throughput=$((100 * {batch}))",
    );
    let sweep = ["profile", "segments", "w", "--whole-gpu", "--duration", "0.3", "--procs", "1,2"];
    let output = tessera(&[&sweep[..], &["--batches", "1,4,8", "--wide"]].concat(), &dir);
    assert!(output.status.success(), "{}", stderr(&output));
    let out = stdout(&output);
    assert!(out.contains("infeasible: exited with status 1: CUDA out of memory"), "{out}");
    assert!(out.contains("stored 4 points of tiny-mlp on h200-141gb"), "{out}");
    // Size 7 (the H200's largest profile); latency = 1000 × batch / per-process throughput = 10 ms.
    let expected = vec![(7, 1, 1, 100.0, 10.0), (7, 1, 2, 200.0, 10.0), (7, 4, 1, 400.0, 10.0), (7, 4, 2, 800.0, 10.0)];
    assert_eq!(stored_points(&dir), expected);
    // One private daemon per configuration (6), each quit.
    let mps = std::fs::read_to_string(&log).unwrap();
    assert_eq!((mps.matches("start").count(), mps.matches("quit").count()), (6, 6), "{mps}");

    // A later run adds its points and keeps the others.
    let output = tessera(&[&sweep[..], &["--batches", "2"]].concat(), &dir);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains("stored 6 points of tiny-mlp on h200-141gb"), "{}", stdout(&output));
    assert!(stdout(&output).contains("(4 earlier points kept)"), "{}", stdout(&output));
    assert_eq!(stored_points(&dir).len(), 6);
}

#[test]
fn bad_sweeps_fail_in_one_line_and_store_nothing() {
    let dir = TempDir::new().unwrap();
    node(&dir);
    let fails = |args: &[&str], needles: &[&str]| {
        let output = tessera(args, &dir);
        let message = stderr(&output);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {message}");
        assert_eq!(message.trim_end().lines().count(), 1, "one line: {message}");
        for needle in needles {
            assert!(message.contains(needle), "{needle:?} not in: {message}");
        }
    };
    fails(&["profile", "segments", "w", "--batches", "1"], &["no store", "tessera workload add"]);
    register(&dir, "echo 'CUDA error: no kernel image' >&2; exit 1");
    fails(&["profile", "segments", "v", "--batches", "1"], &["'v'"]);
    // The GPU is not in MIG mode: no instances to measure in, and MIG is never turned on.
    fails(
        &["profile", "segments", "w", "--batches", "1"],
        &["not in MIG mode", "--whole-gpu", "never changes MIG mode"],
    );
    fails(&["profile", "segments", "w", "--batches", "1,2", "--whole-gpu"], &["no {batch}", "[1, 2]"]);
    fails(
        &["profile", "segments", "w", "--batches", "1", "--procs", "1,3", "--whole-gpu", "--duration", "0.2"],
        &["no configuration of w could be measured", "no kernel image"],
    );
    let store = tessera_store::Store::open(&dir.path().join("store.sqlite")).unwrap();
    assert!(store.load_catalog(None).unwrap().is_empty());
}

#[test]
fn a_budget_measures_only_the_configurations_ranked_first_and_then_the_next() {
    let dir = TempDir::new().unwrap();
    let log = node(&dir);
    register(&dir, "echo tessera:throughput=$((100 * {batch}))");
    let sweep =
        ["profile", "segments", "w", "--whole-gpu", "--duration", "0.2", "--procs", "1,2", "--batches", "1,2,4"];
    let output = tessera(&[&sweep[..], &["--budget", "2"]].concat(), &dir);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains("stored 2 points of tiny-mlp on h200-141gb"), "{}", stdout(&output));
    let first = stored_points(&dir);
    let mps = std::fs::read_to_string(&log).unwrap();
    assert_eq!((mps.matches("start").count(), mps.matches("quit").count()), (2, 2), "{mps}");
    // The next budget measures other configurations of the grid.
    let output = tessera(&[&sweep[..], &["--budget", "3"]].concat(), &dir);
    assert!(output.status.success(), "{}", stderr(&output));
    let out = stdout(&output);
    assert!(
        out.contains("stored 5 points of tiny-mlp on h200-141gb") && out.contains("(2 earlier points kept)"),
        "{out}"
    );
    let all = stored_points(&dir);
    assert!(first.iter().all(|point| all.contains(point)));
    assert!(all.iter().all(|p| p.0 == 7 && [1, 2, 4].contains(&p.1) && [1, 2].contains(&p.2)), "{all:?}");
}
