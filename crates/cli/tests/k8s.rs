//! `tessera k8s …`, `tessera plan --cluster` and `tessera agent` end to end,
//! against the fake API server on 127.0.0.1.

use serde_json::{json, Value};
use tempfile::TempDir;
use tessera_k8s::FakeApiServer;
use tessera_testkit::kubernetes_validate;

use crate::util::{fails_with, stderr, stdout, store_in, tessera};

fn a100_node(name: &str, count: u32) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
        "kubernetes.io/hostname": name, "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "nvidia.com/gpu.count": count.to_string(),
        "nvidia.com/gpu.memory": "81920", "nvidia.com/mig.capable": "true"}}})
}

/// The demo plan as JSON in `dir`.
fn demo_plan(dir: &TempDir, extra: &[&str]) -> String {
    let path = dir.path().join("plan.json").display().to_string();
    let mut args = vec!["plan", "--demo", "--format", "json", "-o", &path];
    args.extend_from_slice(extra);
    let output = tessera(&args, &store_in(dir));
    assert!(output.status.success(), "{}", stderr(&output));
    path
}

#[test]
fn the_demo_plan_exports_to_a_folder_of_valid_manifests_or_one_stream() {
    let dir = TempDir::new().unwrap();
    let plan = demo_plan(&dir, &[]);
    let out = dir.path().join("out");
    let output = tessera(&["k8s", "export", &plan, "-o", out.to_str().unwrap()], &store_in(&dir));
    assert!(output.status.success(), "{}", stderr(&output));
    let mut files: Vec<_> =
        std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().path()).filter(|path| path.is_file()).collect();
    files.sort();
    // One multi-document file per plan node, that node's objects inside,
    // and the Services and routes (of no one node) in cluster.yaml; the
    // SLO rules in monitoring/.
    assert!(out.join("monitoring/slo-rules.yml").is_file());
    let names: Vec<&str> = files.iter().map(|f| f.file_name().unwrap().to_str().unwrap()).collect();
    assert!(names.contains(&"cluster.yaml"), "{names:?}");
    let node_files: Vec<_> = files.iter().filter(|f| !f.ends_with("cluster.yaml")).cloned().collect();
    assert!(node_files.iter().all(|f| f.file_name().unwrap().to_str().unwrap().starts_with("node-n")), "{names:?}");
    let texts: Vec<String> = files.iter().map(|f| std::fs::read_to_string(f).unwrap()).collect();
    let documents: usize = texts.iter().map(|t| t.matches("---\n").count()).sum();
    let said =
        format!("wrote {documents} manifests in {} files to {}\nwrote the SLO rules of ", files.len(), out.display());
    assert!(stdout(&output).starts_with(&said), "{}", stdout(&output));
    let kinds = |kind: &str| texts.iter().map(|t| t.matches(&format!("\nkind: {kind}\n")).count()).sum::<usize>();
    let (claims, routes) = (kinds("ResourceClaim"), kinds("HTTPRoute"));
    assert!(claims > 0 && claims == kinds("Deployment") && routes > 0);
    // One Service per service and configuration.
    let planned: Value = serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    let configurations: std::collections::BTreeSet<String> = planned["gpus"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|gpu| {
            gpu["instances"].as_array().unwrap().iter().map(move |i| {
                format!("{} {} {} {} {}", i["service"], gpu["gpu_model"], i["profile"], i["batch"], i["procs"])
            })
        })
        .collect();
    assert_eq!(kinds("Service"), configurations.len());
    assert_eq!(kinds("ConfigMap"), node_files.len());
    assert_eq!(documents, node_files.len() + 2 * claims + configurations.len() + routes);
    // kubernetes-validate checks the core kinds (the Services of
    // cluster.yaml among them) and passes over the routes, which it has no
    // schema for (checked typed by tessera-k8s's tests).
    kubernetes_validate(&files);

    let output = tessera(&["k8s", "export", &plan, "-o", "-"], &store_in(&dir));
    assert_eq!(stdout(&output).matches("---\n").count(), documents);

    // Without the Gateway API: no routes, the Services stay; another
    // Gateway, port and requests are taken.
    let bare = dir.path().join("bare");
    let output = tessera(&["k8s", "export", &plan, "-o", bare.to_str().unwrap(), "--no-routes"], &store_in(&dir));
    assert!(output.status.success(), "{}", stderr(&output));
    let names: Vec<String> =
        std::fs::read_dir(&bare).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(names.len(), node_files.len() + 2, "{names:?} (the nodes', cluster.yaml, monitoring/)");
    let cluster = std::fs::read_to_string(bare.join("cluster.yaml")).unwrap();
    assert_eq!(cluster.matches("\nkind: Service\n").count(), configurations.len());
    assert!(!cluster.contains("HTTPRoute"), "{cluster}");
    let stream = stdout(&tessera(
        &[
            "k8s",
            "export",
            &plan,
            "-o",
            "-",
            "--gateway",
            "infra/edge:https",
            "--port",
            "9000",
            "--requests",
            "chat-assist=3,12Gi",
        ],
        &store_in(&dir),
    ));
    assert!(
        stream.contains("name: edge") && stream.contains("namespace: infra") && stream.contains("sectionName: https"),
        "{stream}"
    );
    assert!(stream.contains("containerPort: 9000") && stream.contains("memory: 12Gi"), "{stream}");
}

#[test]
fn a_plan_of_services_without_images_is_refused_naming_them() {
    let dir = TempDir::new().unwrap();
    let slo = dir.path().join("slo.csv");
    std::fs::write(&slo, "service,model,rate_rps,latency_ms,image\nshop,resnet50,100,100,reg.example/resnet:1\nsearch,bert-base,50,200,\n").unwrap();
    let plan = demo_plan(&dir, &["--slo", slo.to_str().unwrap()]);
    fails_with(
        &["k8s", "export", &plan, "-o", "-"],
        &store_in(&dir),
        &["error: 1 service has no container image: search (add `image` and `args` columns to the SLO file and plan again)"],
    );
}

#[test]
fn inventory_plan_onto_the_cluster_and_a_dry_run_apply() {
    let dir = TempDir::new().unwrap();
    let server = FakeApiServer::start();
    for node in [a100_node("gpu-b", 4), a100_node("gpu-a", 4)] {
        server.put(node);
    }
    server.put(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-l4", "labels": {
        "nvidia.com/gpu.product": "NVIDIA-L4", "nvidia.com/gpu.count": "1", "nvidia.com/gpu.memory": "23034"}}}));
    let kubeconfig = server.kubeconfig(dir.path());
    let kubeconfig = kubeconfig.to_str().unwrap();
    let store = store_in(&dir);

    let output = tessera(&["k8s", "inventory", "--kubeconfig", kubeconfig], &store);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "gpu-a  4 × a100-80gb  MIG-capable  0 MIG devices\ngpu-b  4 × a100-80gb  MIG-capable  0 MIG devices\nfleet: a100-80gb:count=8\n");
    assert!(
        stderr(&output).starts_with("note: node 'gpu-l4' is left out: 'NVIDIA-L4' is no GPU Tessera knows"),
        "{}",
        stderr(&output)
    );

    let plan = demo_plan(&dir, &["--cluster", "--kubeconfig", kubeconfig]);
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    assert_eq!(json["node_names"], json!(["gpu-a", "gpu-b"]));
    assert!(json["images"]["photo-tagging"]["image"].as_str().unwrap().starts_with("example.invalid/"));

    let output = tessera(&["k8s", "apply", &plan, "--dry-run", "--kubeconfig", kubeconfig], &store);
    assert!(output.status.success(), "{}", stderr(&output));
    let lines = stdout(&output);
    assert!(lines.starts_with("(dry run) step 1 of 1: GPUs 0:0 "), "{lines}");
    assert!(lines.contains("\n(dry run) ConfigMap tessera-node-gpu-a created\n"), "{lines}");
    assert!(stderr(&output).contains(" changed (dry run: nothing written)"));
    assert!(server.requests().iter().all(|r| r.starts_with("GET")));

    // Not yet applied: status fails, naming what is missing.
    let message = fails_with(
        &["k8s", "status", &plan, "--kubeconfig", kubeconfig],
        &store,
        &["error: not as planned: node 'gpu-a': layout not reported"],
    );
    assert!(message.contains(": missing"), "{message}");
    fails_with(
        &["k8s", "status", "--kubeconfig", kubeconfig],
        &store,
        &["error: no plan applied in namespace tessera (no node's ConfigMap tessera-node-…); pass PLAN.json"],
    );
}

#[test]
fn the_agents_dry_run_prints_the_layout_steps_without_a_cluster() {
    let dir = TempDir::new().unwrap();
    let plan = demo_plan(&dir, &[]);
    // No nvidia-smi here: the dry run says so in one line.
    let output = tessera(&["agent", "--node", "0", "--plan", &plan, "--dry-run"], &store_in(&dir));
    let message = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{message}");
    assert!(message.contains("nvidia-smi") && message.trim_end().lines().count() == 1, "{message}");
}

/// Light services sharing instances (`--share serialized`, one image for
/// all): one claim and one single-pod Deployment per shared instance, its
/// members in `TESSERA_MEMBERS`, one Service over its pod, and per member a
/// route to it that names the member in `X-Tessera-Service`; the export
/// validates. Members of two images are refused naming the instance;
/// `k8s apply --dry-run` lists the executors it would start.
#[test]
fn shared_instances_export_as_one_multi_model_deployment_each_with_a_route_per_member() {
    let dir = TempDir::new().unwrap();
    let slo = dir.path().join("light.csv");
    let mut csv = String::from("service,model,rate_rps,latency_ms,image\n");
    for k in 0..12 {
        csv.push_str(&format!("light-{k},resnet50,{},150,reg.example/multi:1\n", 2 + k % 5));
    }
    std::fs::write(&slo, &csv).unwrap();
    let plan = demo_plan(&dir, &["--slo", slo.to_str().unwrap(), "--share", "serialized"]);
    let planned: Value = serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    let shared: Vec<&Value> = planned["gpus"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|gpu| gpu["instances"].as_array().unwrap())
        .filter(|i| i.get("members").is_some())
        .collect();
    assert!(!shared.is_empty(), "{planned}");
    let members: usize = shared.iter().map(|i| i["members"].as_array().unwrap().len()).sum();

    let out = dir.path().join("out");
    let output = tessera(&["k8s", "export", &plan, "-o", out.to_str().unwrap()], &store_in(&dir));
    assert!(output.status.success(), "{}", stderr(&output));
    let files: Vec<_> =
        std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().path()).filter(|path| path.is_file()).collect();
    let text: String = files.iter().map(|f| std::fs::read_to_string(f).unwrap()).collect();
    let kinds = |kind: &str| text.matches(&format!("\nkind: {kind}\n")).count();
    let dedicated: usize = planned["gpus"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|gpu| gpu["instances"].as_array().unwrap())
        .filter(|i| i.get("members").is_none())
        .count();
    assert_eq!((kinds("Deployment"), kinds("ResourceClaim")), (dedicated + shared.len(), dedicated + shared.len()));
    assert_eq!(text.matches("name: TESSERA_MEMBERS").count(), shared.len(), "{text}");
    assert_eq!(text.matches("value: serialized").count(), shared.len(), "{text}");
    assert!(text.contains(r#"{\"batch\":1,\"model\":\"resnet50\",\"service\":\"light-"#), "{text}");
    assert_eq!(text.matches("name: X-Tessera-Service").count(), members, "{text}");
    assert_eq!(text.matches("tessera.io/segment: shared-n0-g").count(), shared.len() * 3, "{text}");
    kubernetes_validate(&files);

    // Two images in one instance: refused, naming it.
    std::fs::write(&slo, csv.replacen("reg.example/multi:1", "reg.example/other:2", 1)).unwrap();
    let plan = demo_plan(&dir, &["--slo", slo.to_str().unwrap(), "--share", "serialized"]);
    let message = fails_with(&["k8s", "export", &plan, "-o", "-"], &store_in(&dir), &["error: node 0 gpu "]);
    assert!(message.contains("share the instance but not one container image"), "{message}");

    // `k8s apply` orders a shared plan's changes like any other: onto an
    // empty cluster, one step starts every instance (dedicated and shared).
    let server = FakeApiServer::start();
    server.put(a100_node("gpu-a", 4));
    let kubeconfig = server.kubeconfig(dir.path());
    let kubeconfig = kubeconfig.to_str().unwrap();
    std::fs::write(&slo, &csv).unwrap();
    let plan = demo_plan(
        &dir,
        &["--slo", slo.to_str().unwrap(), "--share", "serialized", "--cluster", "--kubeconfig", kubeconfig],
    );
    let output = tessera(&["k8s", "apply", &plan, "--dry-run", "--kubeconfig", kubeconfig], &store_in(&dir));
    assert!(output.status.success(), "{}", stderr(&output));
    let said = format!("{}{}", stdout(&output), stderr(&output));
    assert!(said.contains("step 1 of 1") && said.contains("the executor of light-"), "{said}");
}

/// `promtool` with `args`, or `None` (after a visible skip, or a failure
/// where CI requires it) when it is not installed.
fn promtool(args: &[&str]) -> Option<std::process::Output> {
    match std::process::Command::new("promtool").args(args).output() {
        Ok(output) => Some(output),
        Err(error) => {
            tessera_testkit::tool_missing(
                "TESSERA_REQUIRE_PROMTOOL",
                &format!("promtool cannot run ({error})"),
                "apt-get install prometheus",
            );
            None
        }
    }
}

/// The export's SLO rules: `promtool check rules` passes them, and
/// `promtool test rules` shows the page and the ticket firing for a
/// service missing its SLO on 10% of its requests (budget 1%) while one
/// missing it on 0.4% stays quiet, its attainment recorded as 90%.
#[test]
fn the_exported_slo_rules_pass_promtool_and_page_only_the_service_burning_its_budget() {
    let dir = TempDir::new().unwrap();
    let plan = demo_plan(&dir, &[]);
    let out = dir.path().join("out");
    let output = tessera(&["k8s", "export", &plan, "-o", out.to_str().unwrap()], &store_in(&dir));
    assert!(output.status.success(), "{}", stderr(&output));
    let planned: Value = serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    let services = planned["services"].as_array().unwrap();
    assert!(stdout(&output).contains(&format!("wrote the SLO rules of {} services (", services.len())));
    let monitoring = out.join("monitoring");
    let rule = std::fs::read_to_string(monitoring.join("prometheus-rule.yaml")).unwrap();
    assert!(rule.starts_with("apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\n"), "{rule}");
    let Some(checked) = promtool(&["check", "rules", monitoring.join("slo-rules.yml").to_str().unwrap()]) else {
        return;
    };
    assert!(checked.status.success(), "{}{}", stdout(&checked), stderr(&checked));

    let (burning, fine) = (&services[0], &services[1]);
    let le = |service: &Value| format!("{}", service["latency_slo_ms"].as_f64().unwrap() / 1000.0);
    let series = |service: &Value, within: u32, all: u32| {
        let name = service["service"].as_str().unwrap();
        format!(
            "  - series: 'tessera_request_duration_seconds_bucket{{service=\"{name}\",le=\"{}\"}}'\n    values: '0+{within}x180'\n\
             \x20 - series: 'tessera_request_duration_seconds_count{{service=\"{name}\"}}'\n    values: '0+{all}x180'\n",
            le(service)
        )
    };
    let name = burning["service"].as_str().unwrap();
    let test = format!(
        "rule_files: [slo-rules.yml]\nevaluation_interval: 1m\ntests:\n- interval: 1m\n  input_series:\n{}{}\
         \x20 promql_expr_test:\n  - expr: round(1000 * tessera:slo_attainment:ratio_rate5m{{service=\"{name}\"}})\n\
         \x20   eval_time: 1h\n    exp_samples:\n    - labels: '{{service=\"{name}\"}}'\n      value: 900\n\
         \x20 alert_rule_test:\n  - eval_time: 2h\n    alertname: TesseraSLOBudgetBurnFast\n    exp_alerts:\n\
         \x20   - exp_labels: {{severity: page, service: \"{name}\"}}\n\
         \x20     exp_annotations:\n        summary: \"{name} burns its latency SLO's error budget fast\"\n\
         \x20       description: \"10% of {name}'s requests missed its latency SLO over the alert's long window (the plan \
         promises each service its percentile; tessera:slo_error_budget:ratio is its budget)\"\n\
         \x20 - eval_time: 2h\n    alertname: TesseraSLOBudgetBurnSlow\n    exp_alerts:\n\
         \x20   - exp_labels: {{severity: ticket, service: \"{name}\"}}\n\
         \x20     exp_annotations:\n        summary: \"{name} burns its latency SLO's error budget slowly\"\n\
         \x20       description: \"10% of {name}'s requests missed its latency SLO over the alert's long window (the plan \
         promises each service its percentile; tessera:slo_error_budget:ratio is its budget)\"\n",
        series(burning, 90, 100),
        series(fine, 996, 1000),
    );
    let test_file = monitoring.join("slo-test.yml");
    std::fs::write(&test_file, &test).unwrap();
    let tested = promtool(&["test", "rules", test_file.to_str().unwrap()]).unwrap();
    assert!(tested.status.success(), "{}{}\n{test}", stdout(&tested), stderr(&tested));
}
