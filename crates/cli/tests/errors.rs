//! Bad input: one-line errors that name the culprit, and a store left alone.

use tempfile::TempDir;

use crate::util::{fails_with, stderr, store_in, tessera, usage_error, write_parvagpu_fixture};

#[test]
fn bad_inputs_get_one_line_errors_naming_the_culprit() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let profiles = write_parvagpu_fixture(dir.path());
    let p = profiles.to_str().unwrap();
    let header = "Mig instance,Batch size,Workload Number,Throughput,Latency\n";
    let slo = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let good_slo = slo("good.csv", "service,model,rate_rps,latency_ms\nshop,alpha,100,100\n");
    let g = good_slo.to_str().unwrap();

    // A misspelt column.
    let misspelt = dir.path().join("misspelt");
    std::fs::create_dir(&misspelt).unwrap();
    std::fs::write(misspelt.join("m.csv"), "Mig instance,Batch,Workload Number,Throughput,Latency\n1,1,1,1,1\n")
        .unwrap();
    fails_with(&["plan", "--profiles", misspelt.to_str().unwrap(), "--slo", g], &store, &["m.csv", "Batch size"]);

    // Non-numeric and negative values.
    let numbers = dir.path().join("numbers");
    std::fs::create_dir(&numbers).unwrap();
    std::fs::write(numbers.join("m.csv"), format!("{header}1,1,1,100,0.01\n1,2,1,fast,0.01\n")).unwrap();
    fails_with(
        &["plan", "--profiles", numbers.to_str().unwrap(), "--slo", g],
        &store,
        &["m.csv:3", "Throughput", "fast"],
    );
    std::fs::write(numbers.join("m.csv"), format!("{header}1,1,1,100,-0.01\n")).unwrap();
    fails_with(&["plan", "--profiles", numbers.to_str().unwrap(), "--slo", g], &store, &["m.csv:2", "Latency"]);
    let negative_slo = slo("negative.csv", "service,model,rate_rps,latency_ms\nshop,alpha,-5,100\n");
    fails_with(
        &["plan", "--profiles", p, "--slo", negative_slo.to_str().unwrap()],
        &store,
        &["negative.csv:2", "rate_rps"],
    );

    // An unknown GPU model.
    usage_error(&["plan", "--demo", "--gpu", "v100-32gb"], &store, &["v100-32gb", "a100-80gb"]);

    // An SLO for a model with no profile, and one no configuration meets.
    let unknown = slo("unknown.csv", "service,model,rate_rps,latency_ms\nshop,alexnet,100,100\n");
    fails_with(
        &["plan", "--profiles", p, "--slo", unknown.to_str().unwrap()],
        &store,
        &["shop", "alexnet", "alpha, beta"],
    );
    let strict = slo("strict.csv", "service,model,rate_rps,latency_ms\nshop,alpha,100,5\n");
    // Under queueing the fastest worst case is 6 ms × (2 + 7/8) for the 7g
    // at batch 8; under parva it is that 7g's batch latency.
    fails_with(&["plan", "--profiles", p, "--slo", strict.to_str().unwrap()], &store, &["shop", "alpha", "17.25 ms"]);
    fails_with(
        &["plan", "--profiles", p, "--slo", strict.to_str().unwrap(), "--latency-rule", "parva"],
        &store,
        &["shop", "alpha", "fastest", "6.00 ms"],
    );

    // An empty profile folder.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    fails_with(&["plan", "--profiles", empty.to_str().unwrap(), "--slo", g], &store, &["empty"]);

    // A scenario index out of range.
    let rates = slo("rates.csv", "100,200\n300,400");
    let latency = slo("latency.csv", "100,200\n300,400");
    let (r, l) = (rates.to_str().unwrap(), latency.to_str().unwrap());
    fails_with(
        &["plan", "--profiles", p, "--slo-rates", r, "--slo-latency", l, "--scenario", "3"],
        &store,
        &["rates.csv", "3"],
    );
    let ok = tessera(&["plan", "--profiles", p, "--slo-rates", r, "--slo-latency", l, "--scenario", "2"], &store);
    assert!(ok.status.success(), "{}", stderr(&ok));

    assert!(!store.exists(), "no command above touched the store");
}

/// `tessera … | head -1`: a reader that closes the pipe early ends the
/// program quietly (status 0, nothing on stderr), whatever the command.
#[test]
fn a_closed_stdout_ends_every_command_quietly() {
    use std::process::{Command, Stdio};
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let trace = dir.path().join("trace.json");
    let generated = tessera(&["simulate", "generate", "--clients", "200", "--seed", "1"], &store);
    std::fs::write(&trace, &generated.stdout).unwrap();
    let trace = trace.to_str().unwrap();
    let commands: [&[&str]; 4] = [
        &["simulate", "generate", "--clients", "3000"],
        &["simulate", "--trace", trace, "--scheduler", "fifo", "--format", "json"],
        &["plan", "--demo", "--format", "json", "--gpus-per-node", "1"],
        &["profiles", "list"],
    ];
    for args in commands {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(args)
            .env("TESSERA_STORE", &store)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let output = child.wait_with_output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{args:?}: {}", stderr(&output));
        assert_eq!(stderr(&output), "", "{args:?}");
    }
}

/// The whole standard error of a command that must fail with status 1.
fn error_of(args: &[&str], store: &std::path::Path) -> String {
    fails_with(args, store, &[]).trim_end().to_string()
}

/// One exact line per class of error: the message carries its context and
/// the cause comes once (never `cause: cause`); CRLF files count lines as
/// written.
#[test]
fn every_error_class_prints_its_cause_once() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let file = |name: &str, text: &[u8]| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let missing = dir.path().join("missing.csv").display().to_string();
    assert_eq!(
        error_of(&["plan", "--demo", "--slo", &missing], &store),
        format!("error: {missing}: No such file or directory (os error 2)")
    );
    let cell = file("cell.csv", b"service,model,rate_rps,latency_ms\r\na,bert-base,1,100\r\nb,bert-base,fast,100\r\n");
    assert_eq!(
        error_of(&["plan", "--demo", "--slo", &cell], &store),
        format!("error: {cell}:3: field 'rate_rps': expected a number, got 'fast'")
    );
    let twice = file("twice.csv", b"service,model,rate_rps,latency_ms\r\na,bert-base,1,100\r\na,bert-base,2,100\r\n");
    assert_eq!(
        error_of(&["plan", "--demo", "--slo", &twice], &store),
        format!("error: {twice}:3: field 'service': service 'a' already listed on line 2")
    );
    let column = file("column.csv", b"service,rate_rps,latency\na,1,100\n");
    assert_eq!(
        error_of(&["plan", "--demo", "--slo", &column], &store),
        format!("error: {column}:1: unknown column 'latency' (expected: service, model, rate_rps, latency_ms)")
    );
    let utf8 = file("utf8.csv", b"service,model,rate_rps,latency_ms\r\na\xff,bert-base,1,100\r\n");
    assert_eq!(
        error_of(&["plan", "--demo", "--slo", &utf8], &store),
        format!("error: {utf8}:2: field 'column 1': invalid UTF-8")
    );
    let broken = file("broken.json", b"{ nope");
    assert_eq!(
        error_of(&["verify", &broken, "--demo"], &store),
        format!("error: {broken}: not a Tessera plan: key must be a string at line 1 column 3")
    );
    let plan = dir.path().join("plan.json").display().to_string();
    assert!(tessera(&["plan", "--demo", "--format", "json", "-o", &plan], &store).status.success());
    let json = std::fs::read_to_string(&plan).unwrap();
    let newer = file("newer.json", json.replace("\"version\": 1,", "\"version\": 9,").as_bytes());
    let expected = format!("error: {newer}: plan version 9 is not supported (this build reads version 1)");
    assert_eq!(error_of(&["verify", &newer, "--demo"], &store), expected);
    assert_eq!(error_of(&["deploy", &newer, "--node", "0"], &store), expected);
    let misspelt = file("misspelt.json", json.replacen("\"batch\"", "\"batch_size\"", 1).as_bytes());
    let message = error_of(&["verify", &misspelt, "--demo"], &store);
    assert!(
        message.starts_with(&format!(
            "error: {misspelt}: not a Tessera plan: unknown field `batch_size`, expected one of"
        )),
        "{message}"
    );
    let one_off = file("one-off.json", json.replacen("\"latency_ms\": ", "\"latency_ms\": 1", 1).as_bytes());
    let output = tessera(&["verify", &one_off, "--demo"], &store);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(crate::util::stdout(&output).lines().count(), 1, "{}", crate::util::stdout(&output));
    assert_eq!(stderr(&output), format!("error: {one_off}: 1 violation (under the queueing latency rule)\n"));
    let corrupt = file("corrupt.sqlite", b"this is not an SQLite database, it is text long enough to be read");
    assert_eq!(
        error_of(&["--store", &corrupt, "profiles", "list"], &store),
        format!("error: {corrupt}: reading the schema version: file is not a database")
    );
    assert_eq!(
        error_of(&["--store", &corrupt, "workload", "remove", "w"], &store),
        format!("error: {corrupt}: enabling write-ahead logging: file is not a database")
    );
    let no_splits = dir.path().display().to_string();
    assert_eq!(
        error_of(&["colocate", "evaluate", "--protocol", "p3", "--splits", &no_splits], &store),
        format!("error: {no_splits}: no subfolder holds training_set.csv and testing_set.csv")
    );
}
