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
