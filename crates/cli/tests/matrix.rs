//! The bad-input matrix: every way a user was seen to get a command wrong,
//! in one table — the command line, the exit status it must end with, and
//! a pattern for the whole first line of standard error. Status 1 errors
//! are one line; status 2 is a usage error (clap's whole message). No error
//! says the same thing twice (`missing.csv: No such file…: No such file…`).
//!
//! In the command lines `{d}` is a folder of fixtures made by [`fixtures`].

use std::path::Path;

use regex::Regex;
use tempfile::TempDir;

use crate::util::{fails_with, stderr, stdout, store_in, tessera, write_parvagpu_fixture};

/// One row of the matrix.
struct Case {
    /// The arguments, split at spaces; `{d}` is the fixture folder.
    args: &'static str,
    /// The exit status.
    status: i32,
    /// A regular expression the whole first line of stderr must match.
    line: &'static str,
}

const fn case(args: &'static str, status: i32, line: &'static str) -> Case {
    Case { args, status, line }
}

/// The fixtures the cases name.
fn fixtures(dir: &Path) {
    let header = "Mig instance,Batch size,Workload Number,Throughput,Latency\n";
    let files: &[(&str, String)] = &[
        ("misspelt/m.csv", "Mig instance,Batch,Workload Number,Throughput,Latency\n1,1,1,1,1\n".into()),
        ("numbers/m.csv", format!("{header}1,1,1,100,0.01\n1,2,1,fast,0.01\n")),
        ("neglat/m.csv", format!("{header}1,1,1,100,-0.01\n")),
        ("good.csv", "service,model,rate_rps,latency_ms\nshop,alpha,100,100\n".into()),
        ("negative.csv", "service,model,rate_rps,latency_ms\nshop,alpha,-5,100\n".into()),
        ("unknown.csv", "service,model,rate_rps,latency_ms\nshop,alexnet,100,100\n".into()),
        ("strict.csv", "service,model,rate_rps,latency_ms\nshop,alpha,100,5\n".into()),
        ("rates.csv", "100,200\n300,400".into()),
        ("latency.csv", "100,200\n300,400".into()),
        ("huge.csv", "service,model,rate_rps,latency_ms\nbig,resnet50,1e12,200\n".into()),
        ("absurd.csv", "service,model,rate_rps,latency_ms\nbig,resnet50,1e300,200\n".into()),
        (
            "onesize.csv",
            "gpu_model,model,size_gpcs,batch,procs,throughput_rps,latency_ms\na100-80gb,m,2,1,1,100,10\na100-80gb,m,2,8,1,400,20\n"
                .into(),
        ),
        (
            "oomonly.csv",
            "gpu_model,model,size_gpcs,batch,procs,throughput_rps,latency_ms,source\na100-80gb,m,1,256,5,,,out-of-memory\n"
                .into(),
        ),
        (
            "contradict.csv",
            "gpu_model,model,size_gpcs,batch,procs,throughput_rps,latency_ms,source\n\
             a100-80gb,m,1,8,1,100,80,measured\na100-80gb,m,7,8,1,600,13,measured\na100-80gb,m,1,8,1,,,out-of-memory\n"
                .into(),
        ),
        (
            "several.csv",
            "service,model,rate_rps,latency_ms\nshop,alpha,100,5\nads,alexnet,100,100\nok,alpha,100,100\n".into(),
        ),
        ("token", "0123456789abcdef-token\n".into()),
        ("short-token", "short\n".into()),
        (
            "dead-kubeconfig",
            "apiVersion: v1\nkind: Config\ncurrent-context: dead\nclusters:\n- name: dead\n  cluster:\n    server: http://127.0.0.1:1\n\
             contexts:\n- name: dead\n  context:\n    cluster: dead\n    user: dead\nusers:\n- name: dead\n  user:\n    token: t\n"
                .into(),
        ),
        ("chat.csv", "service,model,rate_rps,latency_ms\nchat,gpt2,40,800\n".into()),
        // `tessera plan --demo --slo chat.csv --format json`, on one line.
        ("chat-plan.json", r#"{"version":1,"gpu_count":1,"total_cost":1.0,"strategy":"optimal","latency_rule":"queueing","gpus_per_node":8,"fleet":[{"gpu_model":"a100-80gb","cost_per_gpu":1.0,"gpus":1}],"gpus":[{"node":0,"index":0,"gpu_model":"a100-80gb","instances":[{"profile":"1g.10gb","size":1,"start":6,"service":"chat","model":"gpt2","batch":1,"procs":4,"throughput_rps":41.59321947325404,"latency_ms":96.16952115409451}]}],"services":[{"service":"chat","model":"gpt2","rate_rps":40.0,"latency_slo_ms":800.0,"provisioned_rps":41.59321947325404,"worst_latency_ms":192.33904230818902,"segments":1,"met":true}]}"#.into()),
        // A plan the verifier's lattice or fleet checks refuse.
        ("bad-start.json", r#"{"version":1,"gpu_count":1,"total_cost":1.0,"strategy":"optimal","latency_rule":"queueing","gpus_per_node":8,"fleet":[{"gpu_model":"a100-80gb","cost_per_gpu":1.0,"gpus":1}],"gpus":[{"node":0,"index":0,"gpu_model":"a100-80gb","instances":[{"profile":"3g.40gb","size":3,"start":2,"service":"chat","model":"gpt2","batch":1,"procs":4,"throughput_rps":41.59321947325404,"latency_ms":96.16952115409451}]}],"services":[{"service":"chat","model":"gpt2","rate_rps":40.0,"latency_slo_ms":800.0,"provisioned_rps":41.59321947325404,"worst_latency_ms":192.33904230818902,"segments":1,"met":true}]}"#.into()),
        // A plan the verifier's lattice or fleet checks refuse.
        ("overlap.json", r#"{"version":1,"gpu_count":1,"total_cost":1.0,"strategy":"optimal","latency_rule":"queueing","gpus_per_node":8,"fleet":[{"gpu_model":"a100-80gb","cost_per_gpu":1.0,"gpus":1}],"gpus":[{"node":0,"index":0,"gpu_model":"a100-80gb","instances":[{"profile":"2g.20gb","size":2,"start":4,"service":"chat","model":"gpt2","batch":1,"procs":4,"throughput_rps":41.59321947325404,"latency_ms":96.16952115409451},{"profile":"1g.10gb","size":1,"start":5,"service":"chat","model":"gpt2","batch":1,"procs":4,"throughput_rps":41.59321947325404,"latency_ms":96.16952115409451}]}],"services":[{"service":"chat","model":"gpt2","rate_rps":40.0,"latency_slo_ms":800.0,"provisioned_rps":41.59321947325404,"worst_latency_ms":192.33904230818902,"segments":1,"met":true}]}"#.into()),
        // A plan the verifier's lattice or fleet checks refuse.
        ("outside.json", r#"{"version":1,"gpu_count":1,"total_cost":1.0,"strategy":"optimal","latency_rule":"queueing","gpus_per_node":8,"fleet":[{"gpu_model":"a100-80gb","cost_per_gpu":1.0,"gpus":1}],"gpus":[{"node":0,"index":0,"gpu_model":"h100-80gb","instances":[{"profile":"1g.10gb","size":1,"start":6,"service":"chat","model":"gpt2","batch":1,"procs":4,"throughput_rps":41.59321947325404,"latency_ms":96.16952115409451}]}],"services":[{"service":"chat","model":"gpt2","rate_rps":40.0,"latency_slo_ms":800.0,"provisioned_rps":41.59321947325404,"worst_latency_ms":192.33904230818902,"segments":1,"met":true}]}"#.into()),
        ("imageless.csv", "service,model,rate_rps,latency_ms,args\nshop,resnet50,100,100,--batch {batch}\n".into()),
        (
            "forever.json",
            r#"{"gpu": {"memory_bytes": 1000000000, "h2d_bytes_per_s": 1e10, "d2h_bytes_per_s": 1e10, "copy_latency_ns": 0},
                "clients": [{"name": "slow", "operations": [{"compute_ms": 2e13, "buffers": [], "ephemeral_bytes": 0}]}]}"#
                .into(),
        ),
    ];
    for (name, text) in files {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    std::fs::create_dir(dir.join("empty")).unwrap();
    write_parvagpu_fixture(dir);
}

#[rustfmt::skip]
const CASES: &[Case] = &[
    // Profiles: a misspelt column, a bad number, an empty folder.
    case("plan --profiles {d}/misspelt --slo {d}/good.csv", 1,
         r"^error: \S*misspelt/m\.csv:1: missing column 'Batch size' \(the header has: Mig instance,Batch,Workload Number,Throughput,Latency\)$"),
    case("plan --profiles {d}/numbers --slo {d}/good.csv", 1,
         r"^error: \S*numbers/m\.csv:3: field 'Throughput': expected a number, got 'fast'$"),
    case("plan --profiles {d}/neglat --slo {d}/good.csv", 1,
         r"^error: \S*neglat/m\.csv:2: field 'Latency': expected a non-negative number, got '-0\.01'$"),
    case("plan --profiles {d}/empty --slo {d}/good.csv", 1, r"^error: \S*empty: no \*\.csv profile file in this folder$"),
    // SLOs: a negative rate, an unknown model, an SLO nothing meets, a
    // scenario out of range, a file that is not there.
    case("plan --profiles {d}/prof_data --slo {d}/negative.csv", 1,
         r"^error: \S*negative\.csv:2: field 'rate_rps': expected a positive number, got '-5'$"),
    case("plan --profiles {d}/prof_data --slo {d}/unknown.csv", 1,
         r"^error: service 'shop': no profile for model 'alexnet' on a100-80gb \(profiled models: alpha, beta\)$"),
    case("plan --profiles {d}/prof_data --slo {d}/strict.csv", 1,
         r"^error: service 'shop' \(model 'alpha'\): no configuration meets the latency SLO of 5 ms under the percentile rule \(99% of requests \(queueing included, a queue per process\) within 5 ms\); the fastest is 7g batch 8 x 1 proc at 6\.00 ms$"),
    case("plan --profiles {d}/prof_data --slo {d}/strict.csv --latency-rule queueing", 1,
         r"^error: service 'shop' \(model 'alpha'\): no configuration meets the latency SLO of 5 ms under the queueing rule .*; the fastest is 7g batch 8 x 1 proc at 17\.25 ms$"),
    case("plan --profiles {d}/prof_data --slo {d}/strict.csv --latency-rule parva", 1,
         r"^error: service 'shop' \(model 'alpha'\): no configuration meets the latency SLO of 5 ms under the parva rule \(batch latency < 2\.25 ms\); the fastest is 7g batch 8 x 1 proc at 6\.00 ms$"),
    case("plan --profiles {d}/prof_data --slo {d}/several.csv --strategy parva", 1,
         r"^error: 2 services cannot be served: service 'shop' \(model 'alpha'\): no configuration meets .*; service 'ads': no profile for model 'alexnet' on a100-80gb \(profiled models: alpha, beta\)$"),
    case("plan --profiles {d}/prof_data --slo-rates {d}/rates.csv --slo-latency {d}/latency.csv --scenario 3", 1,
         r"^error: \S*rates\.csv: scenario 3 is out of range \(the file has scenarios 1 to 2\)$"),
    case("plan --profiles {d}/prof_data --slo {d}/missing.csv", 1,
         r"^error: \S*missing\.csv: .*No such file or directory \(os error 2\)$"),
    // Arguments clap refuses: status 2, clap's message.
    case("plan --demo --gpu v100-32gb", 2,
         r"^error: invalid value 'v100-32gb' for '--gpu <MODEL\[:cost=C\]\[,count=N\]>': unknown GPU model 'v100-32gb' \(known: a100-40gb, a100-80gb, h100-80gb, h100-94gb, h200-141gb, b200-180gb, a30-24gb\)$"),
    case("plan --demo --gpu a100-80gb:cost=0", 2, r"^error: invalid value 'a100-80gb:cost=0' for '--gpu .*': cost must be a positive number, got 0$"),
    case("plan --demo --format yaml", 2, r"^error: invalid value 'yaml' for '--format <FORMAT>'$"),
    case("plan --demo --fromat json", 2, r"^error: unexpected argument '--fromat' found$"),
    case("plan --slo {d}/good.csv --scenario 3", 2, r"^error: the argument '--slo <FILE>' cannot be used with '--scenario <K>'$"),
    case("plan --demo --profiles {d}/prof_data", 2, r"^error: the argument '--demo' cannot be used with '--profiles <DIR\|FILE>'$"),
    case("plan --demo --time-limit -1", 2, r"^error: invalid value '-1' for '--time-limit <SECONDS>': expected a positive number of seconds, got '-1'$"),
    case("deploy", 2, r"^error: the following required arguments were not provided:$"),
    // Kubernetes: an API server that does not answer, a plan file that is
    // not there, arguments without an image, conflicting agent options.
    case("k8s inventory --kubeconfig {d}/dead-kubeconfig", 1,
         r"^error: Kubernetes context 'dead' \(http://127\.0\.0\.1:1\): list nodes: cannot reach the API server: .*onnection refused.*$"),
    case("k8s apply {d}/absent.json --kubeconfig {d}/dead-kubeconfig", 1, r"^error: \S*absent\.json: No such file or directory \(os error 2\)$"),
    case("plan --demo --slo {d}/imageless.csv", 1, r"^error: \S*imageless\.csv:2: field 'args': arguments without an image$"),
    case("k8s export {d}/absent.json", 2, r"^error: the following required arguments were not provided:$"),
    case("agent --node a --dry-run --once", 2, r"^error: the argument '--dry-run' cannot be used with '--once'$"),
    // Replanning and diffs: a plan of another GPU model, a GPU the plan
    // lacks, a GPU not written NODE:GPU, options without --from, the parva
    // strategy, a file that is not a plan, a plan that is not there.
    case("plan --demo --slo {d}/chat.csv --gpu h100-80gb --from {d}/chat-plan.json", 1,
         r"^error: the current plan's GPU 0:0 is a100-80gb, which is not in the fleet \(h100-80gb\); name it with --gpu$"),
    case("plan --demo --slo {d}/chat.csv --from {d}/chat-plan.json --drain 3:1", 1,
         r"^error: GPU 3:1 is not in the current plan \(its GPUs: 0:0\)$"),
    case("plan --demo --slo {d}/chat.csv --from {d}/chat-plan.json --lost 0", 2,
         r"^error: invalid value '0' for '--lost <NODE:GPU>': expected NODE:GPU as whole numbers, e\.g\. 0:3, got '0'$"),
    case("plan --demo --max-extra-gpus 2", 2, r"^error: the following required arguments were not provided:$"),
    case("plan --demo --drain 0:1", 2,
         r"^error: the following required arguments were not provided:$"),
    case("plan --demo --slo {d}/chat.csv --from {d}/chat-plan.json --strategy parva", 1,
         r"^error: replanning from a running plan uses the optimal strategy; the parva strategy cannot$"),
    case("diff {d}/chat-plan.json {d}/good.csv", 1, r"^error: \S*good\.csv:1: unknown column 'rate_rps' \(expected: node, .*\)$"),
    case("diff {d}/chat-plan.json {d}/absent.json", 1, r"^error: \S*absent\.json: No such file or directory \(os error 2\)$"),
    // Planning beyond reason: a rate no ceiling allows, a fleet too small.
    // Absurd numbers print in scientific notation, never hundreds of digits.
    case("plan --demo --slo {d}/absurd.csv", 1,
         r"^error: service 'big' \(model 'resnet50'\) needs at least 1\.845e19 GPUs for 1e300 req/s, more than the ceiling of 100000 GPUs \(max_gpus; --max-gpus on the command line\)$"),
    case("plan --demo --slo {d}/huge.csv --time-limit 2", 1,
         r"^error: service 'big' \(model 'resnet50'\) needs at least \d+ GPUs for 1e12 req/s, more than the ceiling of 100000 GPUs \(max_gpus; --max-gpus on the command line\)$"),
    case("plan --demo --max-gpus 0", 2, r"^error: invalid value '0' for '--max-gpus <N>': 0 is not in 1\.\.=1000000$"),
    case("plan --demo --gpu a100-80gb:count=1", 1,
         r"^error: the fleet is too small: every plan needs at least 6 GPUs of a100-80gb, whose count limits allow 1$"),
    // Simulation: a time past the clock, a population with nothing to breed.
    case("simulate --trace {d}/forever.json", 1,
         r"^error: \S*forever\.json: client 'slow' operation 0: compute_ms must be a non-negative number below 2\^64 ns .*, got 20000000000000$"),
    case("simulate --trace {d}/forever.json --scheduler ga --population 5", 2,
         r"^error: invalid value '5' for '--population <POPULATION>': expected a whole number above 10 .*got '5'$"),
    // Running a schedule: a GPU index that is not one, a trace that is not there or bad.
    case("simulate run {d}/forever.json --gpu minus-one", 2,
         r"^error: invalid value 'minus-one' for '--gpu <INDEX>': invalid digit found in string$"),
    case("simulate run {d}/no-trace.json --gpu 0", 1, r"^error: cannot read \S*no-trace\.json: "),
    case("simulate run {d}/forever.json --gpu 0", 1, r"^error: \S*forever\.json: client 'slow' operation 0: compute_ms"),
    // Colocation: a memory that is not one.
    case("colocate recommend --target w --gpu-memory-gb NaN", 2,
         r"^error: invalid value 'NaN' for '--gpu-memory-gb <GB>': expected a positive number of GB, got 'NaN'$"),
    // The service: no token, a token too short, an address beyond this machine; a report of no plan.
    case("serve", 1, r"^error: no API token: pass --token-file FILE or set TESSERA_TOKEN \(at least 16 characters\)$"),
    case("serve --token-file {d}/short-token", 1, r"^error: \S*short-token: the token must be at least 16 characters \(found 5\)$"),
    case("serve --token-file {d}/token --listen 0.0.0.0:0", 1,
         r"^error: listen address 0\.0\.0\.0:0: not a loopback address; pass --allow-remote to listen beyond this machine$"),
    case("report {d}/missing.json", 1, r"^error: \S*missing\.json: No such file or directory \(os error 2\)$"),
    case("report {d}/good.csv", 1, r"^error: \S*good\.csv:1: unknown column 'rate_rps' \(expected: node, gpu_index, "),
    // Plans the verifier's structural checks refuse (a 3g at start 2, two
    // instances sharing memory slices, a GPU outside the fleet) are refused
    // by every command that would run them, without profiles.
    case("k8s export {d}/bad-start.json -o {d}/out", 1,
         r"^error: \S*bad-start\.json: the plan is invalid: node 0 gpu 0: 3g\.40gb cannot start at memory slice 2 on a100-80gb \(valid starts: \[0, 4\]\) \(`tessera verify` checks it in full\)$"),
    case("k8s apply {d}/overlap.json --kubeconfig {d}/dead-kubeconfig", 1,
         r"^error: \S*overlap\.json: the plan is invalid: node 0 gpu 0: .*1g\.10gb.* \(`tessera verify` checks it in full\)$"),
    case("report {d}/outside.json", 1,
         r"^error: \S*outside\.json: the plan is invalid: node 0 gpu 0 is a h100-80gb, which the plan's fleet does not offer \(`tessera verify` checks it in full\)$"),
    case("deploy {d}/bad-start.json --node 0 --dry-run", 1,
         r"^error: \S*bad-start\.json: the plan is invalid: node 0 gpu 0: 3g\.40gb cannot start at memory slice 2 on a100-80gb "),
    // Routing and pod options that are not ones.
    case("k8s export {d}/chat-plan.json -o {d}/out --gateway Infra/gw", 1,
         r"^error: gateway 'Infra/gw': the namespace 'Infra' is not a DNS-1123 label \(expected NAMESPACE/NAME\[:SECTION\] or NAME\[:SECTION\]\)$"),
    case("k8s export {d}/chat-plan.json -o {d}/out --requests chat=2", 1,
         r"^error: requests '2': no comma \(expected CPU,MEMORY, e\.g\. 2,8Gi\)$"),
    case("k8s export {d}/chat-plan.json -o {d}/out --memory 4GB", 1,
         r"^error: requests '1,4GB': the memory '4GB' is not a Kubernetes quantity \(expected CPU,MEMORY, e\.g\. 2,8Gi\)$"),
    case("k8s export {d}/chat-plan.json -o {d}/out --no-routes --gateway gw", 2,
         r"^error: the argument '--no-routes' cannot be used with '--gateway <NAMESPACE/NAME\[:SECTION\]>'$"),
    // Colocation: a risk, a budget, a protocol's data or a group size that is not one.
    case("colocate recommend --target w --risk high", 2, r"^error: invalid value 'high' for '--risk <RISK>'$"),
    case("colocate suggest --budget 0", 2, r"^error: invalid value '0' for '--budget <BUDGET>': 0 is not in 1\.\.=100000$"),
    case("colocate suggest --budget 3 --group-size 1", 2,
         r"^error: invalid value '1' for '--group-size <GROUP_SIZE>': 1 is not in 2\.\.=8$"),
    case("colocate evaluate --protocol lofo", 2, r"^error: the following required arguments were not provided:$"),
    case("colocate evaluate --protocol lowo --data {d}/good.csv --group-sizes 2,7", 2,
         r"^error: invalid value '7' for '--group-sizes <GROUP_SIZES>': 7 is not in 2\.\.=6$"),
    // Profile completion: too few points (saying what to measure), a
    // configuration both measured and out of memory, no profile of the GPU
    // model, a GPU model Tessera has no MIG lattice for, no budget.
    case("profiles complete --profiles {d}/onesize.csv --gpu a100-80gb", 1,
         r"^error: cannot complete the profile of 'm' on a100-80gb: its measured points are all in 2g instances, and completion needs two instance sizes; measure e\.g\. 7g batch 8 x 1 proc too$"),
    case("profiles complete --profiles {d}/oomonly.csv --gpu a100-80gb", 1,
         r"^error: cannot complete the profile of 'm' on a100-80gb: it has no measured point; measure configurations in at least two instance sizes first, e\.g\. 1g batch 1 x 1 proc and 7g batch 8 x 1 proc$"),
    case("profiles complete --profiles {d}/contradict.csv --gpu a100-80gb", 1,
         r"^error: \S*contradict\.csv:4: model 'm': configuration 1g batch 8 x 1 proc already listed on line 2$"),
    case("profiles complete --profiles {d}/onesize.csv --gpu h100-80gb", 1,
         r"^error: no profile measured on h100-80gb to complete \(the profiles are of: a100-80gb\)$"),
    case("profiles complete --profiles {d}/prof_data --gpu v100-32gb", 2,
         r"^error: invalid value 'v100-32gb' for '--gpu <GPU>': unknown GPU model 'v100-32gb' \(known: .*\)$"),
    case("profiles suggest --profiles {d}/prof_data --gpu a100-80gb --budget 0", 2,
         r"^error: invalid value '0' for '--budget <N>': 0 is not in 1\.\.18446744073709551615$"),
    // Nothing where something is needed.
    // A folder where the store file belongs (SQLite says only "disk I/O error").
    case("profiles list --store {d}", 1, r"^error: \S+: is a folder, not a store file \(name a file in it, e\.g\. profiles\.sqlite\)$"),
    case("store migrate --store {d}/no-store.sqlite", 1, r"^error: no store at \S*no-store\.sqlite$"),
    case("plan --slo {d}/good.csv --store {d}/no-store.sqlite", 1,
         r"^error: no profile store at \S*no-store\.sqlite; import profiles with `tessera profiles import`, or pass --profiles DIR or --demo$"),
    case("plan", 1, r"^error: no SLOs given: pass --slo FILE, or --slo-rates FILE --slo-latency FILE --scenario K, or --demo$"),
];

#[test]
fn every_bad_input_gets_its_one_clear_answer() {
    let dir = TempDir::new().unwrap();
    fixtures(dir.path());
    let store = dir.path().join("store.sqlite");
    let d = dir.path().display().to_string();
    let mut failures = Vec::new();
    for case in CASES {
        let args: Vec<String> = case.args.split(' ').map(|word| word.replace("{d}", &d)).collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let output = tessera(&args, &store);
        let message = stderr(&output);
        let first = message.lines().next().unwrap_or_default();
        let mut wrong = Vec::new();
        if output.status.code() != Some(case.status) {
            wrong.push(format!("status {:?}, not {}", output.status.code(), case.status));
        }
        if case.status == 1 && message.trim_end().lines().count() != 1 {
            wrong.push("more than one line".to_string());
        }
        if !Regex::new(case.line).unwrap().is_match(first) {
            wrong.push(format!("first line does not match {}", case.line));
        }
        if let Some(twice) = repeated_part(first) {
            wrong.push(format!("says '{twice}' twice"));
        }
        if !wrong.is_empty() {
            failures.push(format!("tessera {}: {}\n    {}", case.args, wrong.join("; "), message.trim_end()));
        }
    }
    assert!(!store.exists(), "no case may create the store");
    assert!(failures.is_empty(), "{} of {} cases failed:\n{}", failures.len(), CASES.len(), failures.join("\n"));
}

/// A part of a message (between `: `) of at least 10 characters that comes
/// twice: the cause printed by both an error and its context.
fn repeated_part(line: &str) -> Option<&str> {
    let parts: Vec<&str> = line.split(": ").map(str::trim).filter(|part| part.len() >= 10).collect();
    parts.iter().enumerate().find(|(i, part)| parts[..*i].contains(part)).map(|(_, part)| *part)
}

#[test]
fn a_repeated_cause_is_caught() {
    assert_eq!(
        repeated_part(
            "error: missing.csv: No such file or directory (os error 2): No such file or directory (os error 2)"
        ),
        Some("No such file or directory (os error 2)")
    );
    assert_eq!(repeated_part("error: missing.csv: No such file or directory (os error 2)"), None);
}

/// The fixtures are bad only where a case says so: the good files plan.
#[test]
fn the_good_fixtures_plan() {
    let dir = TempDir::new().unwrap();
    fixtures(dir.path());
    let d = dir.path();
    let (profiles, good, rates, latency) =
        (d.join("prof_data"), d.join("good.csv"), d.join("rates.csv"), d.join("latency.csv"));
    let store = d.join("store.sqlite");
    let from_csv =
        tessera(&["plan", "--profiles", profiles.to_str().unwrap(), "--slo", good.to_str().unwrap()], &store);
    assert!(from_csv.status.success(), "{}", stderr(&from_csv));
    let scenario = [
        "plan",
        "--profiles",
        profiles.to_str().unwrap(),
        "--slo-rates",
        rates.to_str().unwrap(),
        "--slo-latency",
        latency.to_str().unwrap(),
        "--scenario",
        "2",
    ];
    let from_scenario = tessera(&scenario, &store);
    assert!(from_scenario.status.success(), "{}", stderr(&from_scenario));
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
        format!(
            "error: {column}:1: unknown column 'latency' (expected: service, model, rate_rps, latency_ms, percentile, image, args)"
        )
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
    let newer = file("newer.json", json.replace("\"version\": 3,", "\"version\": 9,").as_bytes());
    let expected = format!("error: {newer}: plan version 9 is not supported (this build reads versions 1 to 3)");
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
    // A throughput claimed above the profile's (a leading 1).
    let one_off = file("one-off.json", json.replacen("\"throughput_rps\": ", "\"throughput_rps\": 1", 1).as_bytes());
    let output = tessera(&["verify", &one_off, "--demo"], &store);
    assert_eq!(output.status.code(), Some(1));
    // The violation, once, then every service as the check saw it.
    let printed = stdout(&output);
    assert_eq!(printed.lines().filter(|line| line.starts_with("violation: ")).count(), 1, "{printed}");
    assert!(printed.lines().nth(2).is_some_and(|header| header.starts_with("service ")), "{printed}");
    // A violation, a blank line, the header (on two lines at 80 columns)
    // and a row per service.
    assert_eq!(printed.lines().count(), 4 + 6, "{printed}");
    assert_eq!(
        stderr(&output),
        format!("error: {one_off}: 1 violation (under the percentile latency rule, poisson arrivals, margin 6%)\n")
    );
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
