//! `tessera profiles import | list | export` and planning from the store.

use std::path::Path;

use tempfile::TempDir;

use crate::util::{fails_with, stderr, stdout, store_in, tessera, write_parvagpu_fixture};

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
    // Within the terminal the source is its file name, one row a profile;
    // --wide shows the whole path.
    assert_eq!(listing.lines().count(), 3, "{listing}");
    assert!(listing.lines().nth(1).unwrap().ends_with("  prof_data"), "{listing}");
    let wide = stdout(&tessera(&["profiles", "list", "--wide"], &store));
    assert!(wide.contains(&profiles.display().to_string()), "{wide}");

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

/// `store info` shows where the store is and what it holds; profiles,
/// registered workloads and colocations are removed one transaction each,
/// with a clear error for what is not there.
#[test]
fn the_store_shows_and_removes_what_it_holds() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let s = store.display().to_string();
    assert_eq!(
        stdout(&tessera(&["store", "info"], &store)),
        format!("no store at {s} yet; a command that writes to the store creates it\n")
    );
    fails_with(&["profiles", "remove", "alpha", "--gpu", "a100-80gb"], &store, &[&format!("no store at {s}")]);
    assert!(!store.exists());

    let profiles = write_parvagpu_fixture(dir.path());
    let pairs = dir.path().join("pairs.csv");
    std::fs::write(&pairs, crate::colocate::pairs_fixture(3)).unwrap();
    for setup in [
        vec!["profiles", "import", profiles.to_str().unwrap(), "--gpu", "a100-80gb"],
        vec!["colocate", "import", pairs.to_str().unwrap()],
        vec!["workload", "add", "w", "--family", "alpha", "--task", "inference", "--batch", "8", "--command", "true"],
    ] {
        assert!(tessera(&setup, &store).status.success(), "{setup:?}");
    }
    let info = stdout(&tessera(&["store", "info"], &store));
    let expected = format!(
        "store                 {s}\nschema version        8\nprofiles              2\nprofile points        9\n\
         workloads measured    4\nworkloads registered  1\ncolocations           3\nimports               2\n\
         journal entries       0\n"
    );
    assert_eq!(info, expected);
    let json: serde_json::Value =
        serde_json::from_slice(&tessera(&["store", "info", "--format", "json"], &store).stdout).unwrap();
    assert_eq!(
        (json["path"].as_str(), json["colocations"].as_u64(), json["exists"].as_bool()),
        (Some(s.as_str()), Some(3), Some(true))
    );

    let output = tessera(&["profiles", "remove", "alpha", "--gpu", "a100-80gb"], &store);
    assert_eq!(stdout(&output), format!("removed the profile of alpha on a100-80gb (5 points) from {s}\n"));
    fails_with(
        &["profiles", "remove", "alpha", "--gpu", "a100-80gb"],
        &store,
        &[&format!("{s}: no profile of model 'alpha' on a100-80gb in the store (it holds: beta)")],
    );
    assert!(!stdout(&tessera(&["profiles", "list"], &store)).contains("alpha"));

    assert_eq!(
        stdout(&tessera(&["workload", "remove", "w"], &store)),
        format!("removed registered workload w from {s}\n")
    );
    fails_with(&["workload", "remove", "w"], &store, &[&format!("{s}: no registered workload 'w' (known: none)")]);

    let listing = stdout(&tessera(&["colocate", "list", "--wide"], &store));
    assert!(listing.starts_with("id  workloads "), "{listing}");
    assert!(listing.contains("\n 2  a1_batch1-inf + b_batch8-inf  41.0 / 41.5 "), "{listing}");
    let rows: serde_json::Value =
        serde_json::from_slice(&tessera(&["colocate", "list", "--format", "json"], &store).stdout).unwrap();
    assert_eq!(rows[2]["members"][1]["colocated_rps"], 42.5);
    fails_with(&["colocate", "remove", "2", "7"], &store, &["no colocation 7 in the store (it holds: 3 colocations"]);
    assert_eq!(stdout(&tessera(&["colocate", "remove", "2"], &store)), format!("removed 1 colocation from {s}\n"));
    // The source as imported (the file's canonical path) or the file itself.
    let output = tessera(&["colocate", "remove", "--source", pairs.to_str().unwrap()], &store);
    assert_eq!(stdout(&output), format!("removed 2 colocations from {s}\n"), "{}", stderr(&output));
    assert!(stdout(&tessera(&["colocate", "list"], &store)).starts_with("no colocations in"));
    fails_with(
        &["colocate", "remove", "--source", "elsewhere.csv"],
        &store,
        &["'elsewhere.csv'", "(it holds: no colocations)"],
    );
    crate::util::usage_error(&["colocate", "remove"], &store, &["required"]);
    assert_eq!(
        stdout(&tessera(&["store", "migrate"], &store)),
        format!("{s}: already at schema version 8, the latest this program knows\n")
    );
}

/// The arguments of a small grid for the fixture's few points.
const SMALL_GRID: [&str; 4] = ["--batches", "1,4,8,16", "--procs", "1,2"];

#[test]
fn profiles_complete_predicts_the_rest_and_plans_on_the_conservative_ends() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let profiles = write_parvagpu_fixture(dir.path());
    let completed = dir.path().join("completed.csv");
    let complete = |input: &Path, output: &Path| {
        let args = ["profiles", "complete", "--profiles", input.to_str().unwrap(), "--gpu", "a100-80gb"];
        tessera(&[&args[..], &SMALL_GRID, &["-o", output.to_str().unwrap()]].concat(), &store)
    };
    let output = complete(&profiles, &completed);
    assert!(output.status.success(), "{}", stderr(&output));
    let notes = stderr(&output);
    assert!(notes.starts_with("note: completed 2 models on a100-80gb: 9 points measured, "), "{notes}");
    assert!(notes.contains("1 configuration measured out of memory"), "{notes}");

    let sourced = tessera_store::read_sourced_profiles_csv(&completed).unwrap();
    let measured = tessera_store::read_profile_dir(&profiles, tessera_core::GpuModel::A100_80GB).unwrap().profiles;
    for (completed, measured) in sourced.iter().zip(&measured) {
        assert_eq!(completed.model, measured.model);
        assert_eq!(completed.measured_profile(), measured.measured_profile(), "measured points are kept as they were");
        assert_eq!(completed.out_of_memory(), measured.out_of_memory());
        let predicted: Vec<_> = completed.points().iter().filter(|p| !p.is_measured()).collect();
        assert!(!predicted.is_empty(), "{}: nothing predicted", completed.model);
        for point in predicted {
            let planning = point.planning_point();
            assert!(planning.throughput_rps <= point.point.throughput_rps, "{point:?}");
            assert!(planning.latency_ms >= point.point.latency_ms, "{point:?}");
        }
    }

    let slo = dir.path().join("slo.csv");
    std::fs::write(&slo, "service,model,rate_rps,latency_ms\nshop,alpha,900,100\nsearch,beta,500,200\n").unwrap();
    let plan = dir.path().join("plan.json");
    let planned = tessera(
        &[
            "plan",
            "--profiles",
            completed.to_str().unwrap(),
            "--slo",
            slo.to_str().unwrap(),
            "--format",
            "json",
            "-o",
            plan.to_str().unwrap(),
        ],
        &store,
    );
    assert!(planned.status.success(), "{}", stderr(&planned));
    let json = std::fs::read_to_string(&plan).unwrap();
    assert!(json.contains("predicted, not measured: they are planned at the conservative ends"), "{json}");
    let verified = tessera(
        &["verify", plan.to_str().unwrap(), "--profiles", completed.to_str().unwrap(), "--slo", slo.to_str().unwrap()],
        &store,
    );
    assert!(verified.status.success(), "{}{}", stdout(&verified), stderr(&verified));

    // Completing a completed file predicts the same points again.
    let again = dir.path().join("again.csv");
    assert!(complete(&completed, &again).status.success());
    assert_eq!(std::fs::read(&completed).unwrap(), std::fs::read(&again).unwrap());
}

#[test]
fn profiles_suggest_names_unmeasured_configurations_per_model() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let profiles = write_parvagpu_fixture(dir.path());
    let args = ["profiles", "suggest", "--profiles", profiles.to_str().unwrap(), "--gpu", "a100-80gb", "--budget", "3"];
    let output = tessera(&[&args[..], &SMALL_GRID, &["--format", "json"]].concat(), &store);
    assert!(output.status.success(), "{}", stderr(&output));
    let rows: Vec<serde_json::Value> = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(rows.len(), 6, "3 per model: {rows:?}");
    let measured = tessera_store::read_profile_dir(&profiles, tessera_core::GpuModel::A100_80GB).unwrap().profiles;
    for row in &rows {
        let config = tessera_core::SegmentConfig {
            size_gpcs: row["size_gpcs"].as_u64().unwrap() as u8,
            batch: row["batch"].as_u64().unwrap() as u32,
            procs: row["procs"].as_u64().unwrap() as u32,
        };
        let profile = measured.iter().find(|p| p.model == row["model"]).unwrap();
        assert!(profile.points().iter().all(|p| p.point.config != config), "{row} is measured");
        assert!(!profile.out_of_memory().contains(&config), "{row} is out of memory");
    }
    let table = tessera(&[&args[..], &SMALL_GRID].concat(), &store);
    assert!(stdout(&table).contains("6 configurations to measure on a100-80gb"), "{}", stdout(&table));
}

/// A slice of `tessera bench profiles` on ParvaGPU's data: a fifth of each
/// model's grid, one random subset and `suggest`'s, plans without a single
/// SLO violation on the full measured profiles.
#[test]
fn completed_profiles_from_a_fifth_of_the_grid_plan_without_violations() {
    let Some(parvagpu) = tessera_testkit::shared_data("parvagpu") else { return };
    let dir = TempDir::new().unwrap();
    let args =
        ["bench", "profiles", "--parvagpu", parvagpu.to_str().unwrap(), "--budgets", "20", "--seeds", "1", "--wide"];
    let output = tessera(&args, &store_in(&dir));
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    // The planning table's rows: budget, subset, GPUs of scenarios 1-6,
    // most extra, runs on the goal, SLO misses.
    let rows: Vec<Vec<&str>> = text
        .lines()
        .filter(|line| line.starts_with("20%"))
        .map(|line| line.split_whitespace().collect::<Vec<_>>())
        .filter(|words| words.len() == 11)
        .collect();
    assert_eq!(rows.len(), 2, "a random subset and suggest's: {text}");
    for words in &rows {
        assert_eq!(words[10], "0", "SLO misses in: {words:?}");
        assert_eq!(
            &words[2..6],
            ["2", "3", "5", "7"],
            "the first four scenarios need what the full grid does: {words:?}"
        );
    }
}

#[test]
fn store_migrate_says_from_which_version_to_which() {
    let dir = TempDir::new().unwrap();
    // An empty file is an SQLite database at schema version 0.
    let store = dir.path().join("old.sqlite");
    std::fs::write(&store, b"").unwrap();
    let first = tessera(&["store", "migrate"], &store);
    assert!(first.status.success(), "{}", stderr(&first));
    let line = stdout(&first);
    assert!(line.ends_with("old.sqlite: migrated from schema version 0 to 8\n"), "{line}");
    let again = stdout(&tessera(&["store", "migrate"], &store));
    assert!(again.ends_with("old.sqlite: already at schema version 8, the latest this program knows\n"), "{again}");
}

#[test]
fn profiles_import_tells_a_folder_from_a_file_and_calls_the_csv_format_tessera() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let csv = dir.path().join("t.csv");
    std::fs::write(&csv, "gpu_model,model,size_gpcs,batch,procs,throughput_rps,latency_ms\na100-80gb,m,2,1,1,100,10\n")
        .unwrap();
    let csv = csv.to_str().unwrap();
    for args in [vec!["profiles", "import", csv], vec!["profiles", "import", csv, "--format", "tessera"]] {
        let output = tessera(&args, &store);
        assert!(output.status.success(), "{args:?}: {}", stderr(&output));
        assert!(stdout(&output).starts_with("imported 1 profiles (1 points;"), "{}", stdout(&output));
    }
    // A folder is ParvaGPU's format, which needs the GPU it was measured on.
    let folder = write_parvagpu_fixture(dir.path());
    fails_with(&["profiles", "import", folder.to_str().unwrap()], &store, &["--gpu is required for ParvaGPU folders"]);
}
