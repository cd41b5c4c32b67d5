//! `tessera autopilot simulate`: the comparison as a table and as JSON, the
//! traffic written and read back, and bad input.

use serde_json::Value;
use tempfile::TempDir;

use crate::util::{fails_with, stderr, stdout, store_in, tessera, usage_error};

/// A short day of the demo: two hours, a decision every five minutes, one
/// second of simulated requests per piece.
const SHORT: [&str; 10] =
    ["autopilot", "simulate", "--demo", "--hours", "2", "--interval-min", "5", "--window-s", "1", "--warmup-s"];

fn short_day(extra: &[&str], store: &std::path::Path) -> std::process::Output {
    let args: Vec<&str> = SHORT.iter().copied().chain(["0.5"]).chain(extra.iter().copied()).collect();
    tessera(&args, store)
}

#[test]
fn the_json_has_the_issues_fields_and_every_hour_of_every_strategy() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let output = short_day(&["--diurnal", "--format", "json"], &store);
    assert!(output.status.success(), "{}", stderr(&output));
    let day: Value = serde_json::from_slice(&output.stdout).unwrap();
    for field in [
        "gpu_hours",
        "static_peak_gpu_hours",
        "scratch_gpu_hours",
        "attainment",
        "worst_service_attainment",
        "gpus_reconfigured",
        "scratch_gpus_reconfigured",
        "requests_lost",
    ] {
        assert!(day[field].is_number(), "{field}: {}", day[field]);
    }
    let hours = day["hours"].as_array().unwrap();
    assert_eq!(hours.len(), 2);
    let summed: f64 = hours.iter().map(|hour| hour["autopilot"]["gpu_hours"].as_f64().unwrap()).sum();
    assert!((summed - day["gpu_hours"].as_f64().unwrap()).abs() < 1e-9);
    let static_gpus = day["static_peak"]["totals"]["gpus_max"].as_f64().unwrap();
    assert_eq!(day["static_peak_gpu_hours"].as_f64().unwrap(), 2.0 * static_gpus);
    assert_eq!(day["journal"].as_array().unwrap().len(), 24, "a decision every 5 min for 2 h");
    assert_eq!(day["journal"][0]["action"], "start");
    assert!(day["attainment"].as_f64().unwrap() > 0.9);
}

#[test]
fn a_day_on_slower_gpus_decides_the_same_and_serves_worse() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let day = |slowdown: &str| -> Value {
        let output = short_day(&["--diurnal", "--format", "json", "--slowdown", slowdown], &store);
        assert!(output.status.success(), "{}", stderr(&output));
        serde_json::from_slice(&output.stdout).unwrap()
    };
    let (profiled, slower) = (day("0"), day("0.3"));
    assert_eq!(profiled["gpu_hours"], slower["gpu_hours"], "the autopilot decides with the profiles");
    let attainment = |day: &Value| day["attainment"].as_f64().unwrap();
    assert!(attainment(&slower) < attainment(&profiled), "{} vs {}", attainment(&slower), attainment(&profiled));
    fails_with(
        &[&SHORT[..], &["0.5", "--diurnal", "--slowdown", "-1"]].concat(),
        &store,
        &["slowdown: -1 is not a share in (-1, 10]"],
    );
}

#[test]
fn the_table_compares_the_strategies_and_judges_the_goals() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let output = short_day(&["--diurnal", "--seed", "3"], &store);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    for needle in ["autopilot", "static peak", "scratch", "GPU-hours", "demand", "goal: 25%", "forecasts:"] {
        assert!(text.contains(needle), "{needle:?} not in:\n{text}");
    }
    let row = |name: &str| -> Vec<f64> {
        let line = text.lines().find(|line| line.starts_with(name)).unwrap_or_else(|| panic!("no {name:?} row"));
        line[name.len()..].split_whitespace().map(|figure| figure.parse().unwrap()).collect()
    };
    let (most_held, gpu_hours) = (row("most GPUs held"), row("GPU-hours"));
    assert_eq!(most_held.len(), 3, "one figure per strategy: {most_held:?}");
    assert_eq!(most_held[1] * 2.0, gpu_hours[1], "static holds its GPUs both hours");
    assert!(gpu_hours[0] <= most_held[0] * 2.0 && gpu_hours[2] <= most_held[2] * 2.0, "{most_held:?}");
    assert!(text.contains("diurnal traffic") && text.contains("seed 3"), "{text}");
    assert!(text.lines().all(|line| line.chars().count() <= 80), "wider than 80 columns:\n{text}");
}

#[test]
fn generated_traffic_written_and_read_back_gives_the_same_day() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let traffic = dir.path().join("traffic.csv");
    let traffic = traffic.to_str().unwrap();
    let generated = short_day(&["--diurnal", "--seed", "7", "--write-traffic", traffic, "--format", "json"], &store);
    assert!(generated.status.success(), "{}", stderr(&generated));
    let written = std::fs::read_to_string(traffic).unwrap();
    assert!(written.starts_with("time_s,service,rate_rps\n0,search-ranking,"), "{}", &written[..80]);
    let replayed = short_day(&["--traffic", traffic, "--format", "json"], &store);
    assert!(replayed.status.success(), "{}", stderr(&replayed));
    let (a, b): (Value, Value) =
        (serde_json::from_slice(&generated.stdout).unwrap(), serde_json::from_slice(&replayed.stdout).unwrap());
    for field in ["gpu_hours", "static_peak_gpu_hours", "scratch_gpu_hours", "attainment", "gpus_reconfigured"] {
        assert_eq!(a[field], b[field], "{field}");
    }
}

#[test]
fn bad_traffic_and_options_are_refused_in_one_line() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let traffic = dir.path().join("traffic.csv");
    std::fs::write(&traffic, "time_s,service,rate_rps\n0,search-ranking,10\n0,nobody,5\n").unwrap();
    let path = traffic.to_str().unwrap();
    fails_with(
        &["autopilot", "simulate", "--demo", "--traffic", path],
        &store,
        &["traffic.csv:3: field 'service': 'nobody' is not among the services"],
    );
    std::fs::write(&traffic, "time_s,service,rate_rps\n0,search-ranking,10\n").unwrap();
    fails_with(
        &["autopilot", "simulate", "--demo", "--traffic", path],
        &store,
        &["traffic.csv:2: service 'fraud-check' has no traffic points"],
    );
    usage_error(&["autopilot", "simulate", "--demo"], &store, &["required arguments were not provided"]);
    usage_error(
        &["autopilot", "simulate", "--demo", "--traffic", path, "--bursts", "2"],
        &store,
        &["cannot be used with"],
    );
    usage_error(&["autopilot", "simulate", "--demo", "--diurnal", "--interval-min", "0"], &store, &["positive"]);
    fails_with(
        &["autopilot", "simulate", "--demo", "--diurnal", "--keep-headroom", "0.5"],
        &store,
        &["keep_headroom: 0.5 is not in [0, 0.15]"],
    );
    fails_with(
        &["autopilot", "simulate", "--demo", "--diurnal", "--share", "serialized", "--arrivals", "cv=2"],
        &store,
        &["share: shared instances are proven under Poisson arrivals only"],
    );
}

#[test]
fn html_writes_the_days_picture_beside_the_table() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let page = dir.path().join("day.html");
    let output = short_day(&["--diurnal", "--html", page.to_str().unwrap()], &store);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains("GPU-hours"), "the table is still printed");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>") && html.contains("<svg class=\"day-gpus\""));
    for strategy in ["autopilot", "static peak", "scratch"] {
        assert!(html.contains(&format!("<path class=\"gpus\" data-strategy=\"{strategy}\"")), "{strategy}");
        assert!(html.contains(&format!("<tr data-strategy=\"{strategy}\">")), "{strategy}");
    }
    // Two hours: each strategy's worst service drawn for each.
    assert_eq!(html.matches("<circle class=\"hour\"").count(), 6);
}

#[test]
fn parvagpu_s_scenario_6_over_a_day_keeps_the_issue_s_goals() {
    // ParvaGPU's eleven models at scenario 6's SLOs (18 GPUs at the peak),
    // a full day of diurnal traffic with bursts: the goals of the
    // autopilot, on measured profiles.
    let Some(parvagpu) = tessera_testkit::shared_data("parvagpu") else { return };
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let (profiles, slo) = (parvagpu.join("prof_data"), parvagpu.join("slo"));
    let (rates, latency) = (slo.join("SLO_req_rate.csv"), slo.join("SLO_latency.csv"));
    let args = [
        "autopilot",
        "simulate",
        "--profiles",
        profiles.to_str().unwrap(),
        "--slo-rates",
        rates.to_str().unwrap(),
        "--slo-latency",
        latency.to_str().unwrap(),
        "--scenario",
        "6",
        "--diurnal",
        "--format",
        "json",
    ];
    let output = tessera(&args, &store);
    assert!(output.status.success(), "{}", stderr(&output));
    let day: Value = serde_json::from_slice(&output.stdout).unwrap();
    let figure = |field: &str| day[field].as_f64().unwrap();
    assert!(figure("gpu_hours") <= 0.75 * figure("static_peak_gpu_hours"), "{}", day["autopilot"]["totals"]);
    assert!(figure("worst_service_attainment") >= 0.99, "{}", day["autopilot"]["totals"]);
    assert_eq!(figure("requests_lost"), 0.0);
    assert!(figure("gpus_reconfigured") < figure("scratch_gpus_reconfigured"), "{}", day["autopilot"]["totals"]);
}

#[test]
fn a_traffic_file_s_burstiness_plans_the_fleet_and_shapes_the_arrivals() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let traffic = dir.path().join("bursty.csv");
    let mut text = String::from("time_s,service,rate_rps,cv\n");
    for (service, rate_rps) in [
        ("search-ranking", 300),
        ("fraud-check", 150),
        ("chat-assist", 20),
        ("photo-tagging", 1200),
        ("thumbnails", 1500),
        ("moderation", 170),
    ] {
        let cv = if service == "photo-tagging" { "2" } else { "" };
        text.push_str(&format!("0,{service},{rate_rps},{cv}\n"));
    }
    std::fs::write(&traffic, text).unwrap();
    let written = dir.path().join("written.csv");
    let args =
        ["--traffic", traffic.to_str().unwrap(), "--write-traffic", written.to_str().unwrap(), "--format", "json"];
    let output = short_day(&args, &store);
    assert!(output.status.success(), "{}", stderr(&output));
    // The traffic written back keeps each service's burstiness.
    let written = std::fs::read_to_string(&written).unwrap();
    assert!(
        written.starts_with("time_s,service,rate_rps,cv\n") && written.contains("0,photo-tagging,1200,2\n"),
        "{written}"
    );
    let said = stderr(&output);
    assert!(
        said.contains(
            "note: arrivals now cv=2 (were poisson): the burstiest service, photo-tagging, arrives at cv 2.00 (the \
             traffic file's cv column)"
        ),
        "{said}"
    );
    let day: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(day["worst_service_attainment"].as_f64().unwrap() >= 0.99, "{}", day["worst_service_attainment"]);
}
