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
