//! `tessera profile kernels` end to end, and its file read back by the
//! KACE workload-table reader.

use std::path::{Path, PathBuf};

use crate::util::{ncu_report, tessera};
use tessera_core::colocation::WorkloadMetrics;

/// Stores `name`'s metrics alone (as `tessera profile run` would), which
/// kernel metrics are stored with.
fn seed_alone(store: &Path, name: &str) -> WorkloadMetrics {
    let metrics = WorkloadMetrics {
        workload: name.to_string(),
        kernel: [0.0; 6],
        exclusive_rps: 120.5,
        sm_util_pct: 61.0,
        mem_util_pct: 40.0,
        memory_gb: 3.2,
    };
    tessera_store::Store::open(store).unwrap().import_workloads(std::slice::from_ref(&metrics), "seed").unwrap();
    metrics
}

/// The kernel metrics of the report [`fixture`] writes.
const KERNEL: [f64; 6] = [60399.95, 60.86, 51.18, 69.11, 2117970.12, 1052701.96];

/// An `ncu --csv` report of one launch whose metrics are [`KERNEL`], in `dir`.
fn fixture(dir: &Path) -> PathBuf {
    let path = dir.join("ncu_report.csv");
    std::fs::write(&path, ncu_report(&KERNEL)).unwrap();
    path
}

#[test]
fn kernels_import_writes_kaces_table_that_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store.sqlite");
    let kernels = dir.path().join("kernel_metrics");
    std::fs::create_dir(&kernels).unwrap();
    let alone = seed_alone(&store, "w");
    let report = fixture(dir.path());
    let output = tessera(
        &["profile", "kernels", "w", "--import", report.to_str().unwrap(), "--output", kernels.to_str().unwrap()],
        &store,
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    for needle in [
        "Threads",
        "60399.95",
        "Compute (SM) Throughput",
        "60.86",
        "Static Shared Memory",
        "output_w_ncu_total.csv",
        "stored the kernel metrics of w",
    ] {
        assert!(stdout.contains(needle), "{needle:?} not in:\n{stdout}");
    }

    let file = kernels.join("output_w_ncu_total.csv");
    let text = std::fs::read_to_string(&file).unwrap();
    let expected = tessera_gpu::aggregate_report(&std::fs::read_to_string(&report).unwrap(), "fixture").unwrap();
    assert_eq!(text, tessera_store::kernel_table_csv("w", &expected).unwrap());

    let system = dir.path().join("system_metrics.csv");
    std::fs::write(&system, "Type,Exclusive100,sm%,mem%,memcap,Exclusive50\nw,120.5,61,40,3.2,60\n").unwrap();
    let workloads = tessera_store::read_workload_tables(&system, &kernels).unwrap();
    assert_eq!(workloads.len(), 1);
    assert_eq!(workloads[0].workload, "w");
    assert_eq!(workloads[0].kernel, expected, "the six metrics round-trip exactly");
    assert_eq!(workloads[0].exclusive_rps, 120.5);

    // The store has them too, with the metrics alone kept.
    let stored = tessera_store::Store::open(&store).unwrap().load_workloads().unwrap();
    assert_eq!(stored, vec![WorkloadMetrics { kernel: expected, ..alone }]);
}

/// A stand-in `ncu` in `dir`: checks for the flags Tessera must pass, runs
/// the workload (its last argument, through `sh -c`) and prints the
/// fixture report.
fn stand_in_ncu(dir: &Path) -> PathBuf {
    let ncu = dir.join("ncu");
    let script = format!(
        "#!/bin/sh\ncase \"$*\" in *'--csv --metrics'*'--kill yes'*) ;; *) echo '==ERROR== bad flags' ; exit 3;; esac\n\
         for last; do :; done\nsh -c \"$last\" || exit 4\ncat '{}'\n",
        fixture(dir).display()
    );
    std::fs::write(&ncu, script).unwrap();
    std::fs::set_permissions(&ncu, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    ncu
}

#[test]
fn kernels_live_runs_the_registered_workload_under_ncu_and_stores_the_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store.sqlite");
    let add = ["workload", "add", "w", "--family", "f", "--task", "inference", "--batch", "4"];
    let added = tessera(&[&add[..], &["--command", "echo batch {batch}"]].concat(), &store);
    assert!(added.status.success(), "{}", String::from_utf8_lossy(&added.stderr));
    seed_alone(&store, "w");
    let ncu = stand_in_ncu(dir.path());
    let output = tessera(&["profile", "kernels", "w", "--ncu", ncu.to_str().unwrap(), "--launch-count", "3"], &store);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("60399.95") && stdout.contains("stored the kernel metrics of w"), "{stdout}");
    let report = std::fs::read_to_string(fixture(dir.path())).unwrap();
    let expected = tessera_gpu::aggregate_report(&report, "f").unwrap();
    let stored = tessera_store::Store::open(&store).unwrap().load_workloads().unwrap();
    assert_eq!(stored[0].kernel, expected);
}

#[test]
fn kernels_without_import_or_with_a_bad_report_fail_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store.sqlite");
    let fails = |args: &[&str], needles: &[&str]| {
        let output = tessera(args, &store);
        let message = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(!output.status.success());
        assert_eq!(message.trim_end().lines().count(), 1, "one line: {message}");
        for needle in needles {
            assert!(message.contains(needle), "{needle:?} not in: {message}");
        }
    };
    // Live: no store, an unknown workload, no ncu.
    fails(&["profile", "kernels", "w"], &["no store at", "tessera workload add"]);
    let add = ["workload", "add", "w", "--family", "f", "--task", "inference", "--batch", "4", "--command", "true"];
    assert!(tessera(&add, &store).status.success());
    // No metrics alone is no reason to refuse: without ncu, it says so.
    fails(&["profile", "kernels", "w", "--ncu", "tessera-no-ncu"], &["tessera-no-ncu", "Nsight Compute"]);
    seed_alone(&store, "w");
    seed_alone(&store, "v");
    fails(&["profile", "kernels", "v"], &["'v'"]);
    let no_ncu = dir.path().join("no-ncu");
    fails(&["profile", "kernels", "w", "--ncu", no_ncu.to_str().unwrap()], &["no-ncu", "Nsight Compute", "--import"]);
    fails(&["profile", "kernels", "w", "--timeout", "0"], &["--timeout 0"]);

    let bad = dir.path().join("bad.csv");
    let text = ncu_report(&KERNEL).replacen("\"60.86\"", "\"n/a\"", 1);
    std::fs::write(&bad, text).unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let before = tessera_store::Store::open(&store).unwrap().load_workloads().unwrap();
    fails(
        &["profile", "kernels", "w", "--import", bad.to_str().unwrap(), "--output", out.to_str().unwrap()],
        &["bad.csv:4:", "sm__throughput.avg.pct_of_peak_sustained_elapsed", "'n/a'"],
    );
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 0, "nothing written on error");
    assert_eq!(tessera_store::Store::open(&store).unwrap().load_workloads().unwrap(), before, "nor stored");
    fails(&["profile", "kernels", "a/b", "--import", bad.to_str().unwrap()], &["workload", "'a/b'"]);
}

#[test]
fn kernels_with_a_missing_output_folder_fail_before_storing_anything() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store.sqlite");
    let alone = seed_alone(&store, "w");
    let report = fixture(dir.path());
    let missing = format!("{}/", dir.path().join("missing").display());
    let args = ["profile", "kernels", "w", "--import", report.to_str().unwrap(), "--output", &missing];
    crate::util::fails_with(&args, &store, &["--output", "missing/: no such folder", "nothing was measured or stored"]);
    let stored = tessera_store::Store::open(&store).unwrap();
    assert_eq!(stored.load_workloads().unwrap(), vec![alone], "the kernel metrics were not stored");
    assert!(!dir.path().join("missing").exists());
}

#[test]
fn kernels_of_a_workload_without_metrics_alone_are_stored_for_it() {
    // No store, no registered workload, no `profile run`: an imported
    // report on a machine without a GPU.
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store.sqlite");
    let report = fixture(dir.path());
    let output = tessera(&["profile", "kernels", "x", "--import", report.to_str().unwrap()], &store);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("stored the kernel metrics of x") && stdout.contains("x has no metrics alone yet"),
        "{stdout}"
    );
    let expected = tessera_gpu::aggregate_report(&std::fs::read_to_string(&report).unwrap(), "f").unwrap();
    let stored = tessera_store::Store::open(&store).unwrap();
    assert_eq!(stored.kernel_metrics_awaiting("x").unwrap(), Some(expected));
    assert!(stored.load_workloads().unwrap().is_empty(), "no metrics alone were made up");
}

/// The commands an error message suggests, in backquotes, that start with
/// `tessera `.
fn suggested_commands(message: &str) -> Vec<Vec<String>> {
    message
        .split('`')
        .skip(1)
        .step_by(2)
        .filter_map(|command| command.strip_prefix("tessera "))
        .map(|args| args.split_whitespace().map(str::to_string).collect())
        .collect()
}

#[test]
fn every_tessera_command_a_profile_error_suggests_runs_as_shown() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store.sqlite");
    let mut suggested = Vec::new();
    for args in [
        vec!["profile", "kernels", "w"],
        vec!["profile", "segments", "w", "--batches", "1"],
        vec!["profile", "run", "w"],
        vec!["profile", "colocate", "v", "w"],
    ] {
        let output = tessera(&args, &store);
        assert_eq!(output.status.code(), Some(1), "{args:?}");
        suggested.extend(suggested_commands(&String::from_utf8_lossy(&output.stderr)));
    }
    assert!(!suggested.is_empty(), "the errors suggest commands");
    for command in suggested {
        let args: Vec<&str> = command.iter().map(String::as_str).collect();
        let output = tessera(&args, &store);
        assert!(
            output.status.success(),
            "`tessera {}` fails: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

#[test]
fn without_a_driver_profile_commands_say_so_without_suggesting_deploy() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store.sqlite");
    let add = ["workload", "add", "w", "--family", "f", "--task", "inference", "--batch", "1", "--command", "true"];
    assert!(tessera(&add, &store).status.success());
    // An empty PATH: no nvidia-smi.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let output = crate::util::run_with_env(
        &["profile", "segments", "w", "--batches", "1", "--whole-gpu"],
        &[("PATH", &empty), ("TESSERA_STORE", &store)],
    );
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&output.stderr), "error: nvidia-smi not found: install the NVIDIA driver\n");
    // No NVML on this machine (a GPU node would measure instead).
    let output = tessera(&["profile", "run", "w", "--duration", "1"], &store);
    let message = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        assert!(!message.contains("deploy") && !message.contains("--dry-run"), "{message}");
    }
}

#[test]
fn an_unreadable_report_names_its_cause_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store.sqlite");
    let missing = dir.path().join("missing.csv");
    let output = tessera(&["profile", "kernels", "w", "--import", missing.to_str().unwrap()], &store);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        format!("error: cannot read {}: No such file or directory (os error 2)\n", missing.display())
    );
    assert!(!store.exists(), "nothing was stored");
}
