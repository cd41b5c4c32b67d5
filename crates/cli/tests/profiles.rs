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
