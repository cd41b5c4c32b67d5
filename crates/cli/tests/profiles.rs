//! `tessera profiles import | list | export` and planning from the store.

use std::path::Path;

use tempfile::TempDir;

use crate::util::{stderr, stdout, store_in, tessera, write_parvagpu_fixture};

#[test]
fn profiles_import_list_export_and_plan_from_the_store() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let profiles = write_parvagpu_fixture(dir.path());
    let output = tessera(
        &["profiles", "import", profiles.to_str().unwrap(), "--format", "parvagpu", "--gpu", "a100-80gb"],
        &store,
    );
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("imported 2 profiles (9 points; 1 infeasible rows skipped"),
        "{}",
        stdout(&output)
    );

    let listing = stdout(&tessera(&["profiles", "list"], &store));
    assert!(listing.contains("alpha") && listing.contains("beta") && listing.contains("1g,2g,4g,7g"), "{listing}");

    let slo = dir.path().join("slo.csv");
    std::fs::write(
        &slo,
        "service,model,rate_rps,latency_ms\nshop,alpha,900,100\nads,alpha,150,60\nsearch,beta,500,200\n",
    )
    .unwrap();
    let from_store = tessera(&["plan", "--slo", slo.to_str().unwrap(), "--format", "json"], &store);
    assert!(from_store.status.success(), "{}", stderr(&from_store));
    let from_files = tessera(
        &["plan", "--profiles", profiles.to_str().unwrap(), "--slo", slo.to_str().unwrap(), "--format", "json"],
        &store,
    );
    assert_eq!(stdout(&from_store), stdout(&from_files));

    let exported = dir.path().join("profiles.csv");
    assert!(tessera(&["profiles", "export", "-o", exported.to_str().unwrap()], &store).status.success());
    let from_export = tessera(
        &["plan", "--profiles", exported.to_str().unwrap(), "--slo", slo.to_str().unwrap(), "--format", "json"],
        &store,
    );
    assert_eq!(stdout(&from_store), stdout(&from_export), "export round-trips the profiles");
}

#[test]
fn a_failed_import_leaves_the_store_unchanged() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let profiles = write_parvagpu_fixture(dir.path());
    let import = |path: &Path| tessera(&["profiles", "import", path.to_str().unwrap(), "--gpu", "a100-80gb"], &store);
    assert!(import(&profiles).status.success());
    let before = stdout(&tessera(&["profiles", "export"], &store));

    // A second folder: one good file (which would replace alpha) and one bad.
    let bad = dir.path().join("bad");
    std::fs::create_dir(&bad).unwrap();
    let header = "Mig instance,Batch size,Workload Number,Throughput,Latency\n";
    std::fs::write(bad.join("alpha.csv"), format!("{header}7,1,1,999.0,0.001\n")).unwrap();
    std::fs::write(bad.join("gamma.csv"), format!("{header}1,1,1,abc,0.010\n")).unwrap();
    let output = import(&bad);
    assert!(!output.status.success());
    assert!(stderr(&output).contains("gamma.csv:2"), "{}", stderr(&output));
    assert_eq!(stdout(&tessera(&["profiles", "export"], &store)), before);
}

/// The file's bytes and modification time.
fn snapshot(path: &Path) -> (Vec<u8>, std::time::SystemTime) {
    (std::fs::read(path).unwrap(), std::fs::metadata(path).unwrap().modified().unwrap())
}

/// Commands that only read open the store read-only: they leave its file
/// as it was, and work where it may not be written (enabling the
/// write-ahead log used to fail there before anything was read).
#[test]
fn read_only_commands_never_write_the_store() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new().unwrap();
    let folder = dir.path().join("store");
    std::fs::create_dir(&folder).unwrap();
    let store = folder.join("store.sqlite");
    let profiles = write_parvagpu_fixture(dir.path());
    let pairs = dir.path().join("pairs.csv");
    std::fs::write(&pairs, crate::colocate::pairs_fixture(5)).unwrap();
    let slo = dir.path().join("slo.csv");
    std::fs::write(&slo, "service,model,rate_rps,latency_ms\nshop,alpha,900,100\nsearch,beta,500,200\n").unwrap();
    let plan = dir.path().join("plan.json");
    let model = dir.path().join("model.json");
    let (slo, plan, model) = (slo.to_str().unwrap(), plan.to_str().unwrap(), model.to_str().unwrap());
    for setup in [
        vec!["profiles", "import", profiles.to_str().unwrap(), "--gpu", "a100-80gb"],
        vec!["colocate", "import", pairs.to_str().unwrap()],
        vec!["workload", "add", "w", "--family", "alpha", "--task", "inference", "--batch", "8", "--command", "true"],
    ] {
        let output = tessera(&setup, &store);
        assert!(output.status.success(), "{setup:?}: {}", stderr(&output));
    }
    assert!(tessera(&["plan", "--slo", slo, "--format", "json", "-o", plan], &store).status.success());
    let before = snapshot(&store);
    let reads: [&[&str]; 9] = [
        &["profiles", "list"],
        &["profiles", "list", "--format", "json"],
        &["profiles", "export"],
        &["plan", "--slo", slo],
        &["verify", plan, "--slo", slo],
        &["workload", "list"],
        &["colocate", "train", "--model", "kace", "-o", model],
        &["colocate", "recommend", "--target", "a1_batch1-inf"],
        &["deploy", plan, "--node", "0", "--dry-run"],
    ];
    let run_all = || {
        for args in reads {
            let output = tessera(args, &store);
            assert!(output.status.success(), "{args:?}: {}", stderr(&output));
        }
    };
    run_all();
    assert_eq!(snapshot(&store), before, "a read-only command changed the store");

    // SQLite cannot make the shared-memory file it reads a WAL database
    // with (a dangling link stands in its way, as a folder without write
    // permission does for a user other than root).
    let shm = folder.join("store.sqlite-shm");
    let _ = std::fs::remove_file(&shm);
    std::os::unix::fs::symlink(folder.join("no-such-folder").join("shm"), &shm).unwrap();
    run_all();
    std::fs::remove_file(&shm).unwrap();
    // A read-only file and folder (root, as tests may run, ignores these).
    std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o444)).unwrap();
    std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o555)).unwrap();
    run_all();
    std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(snapshot(&store), before, "a read-only command changed the store");
}
