//! The serving model against a real GPU: measurements made with
//! `examples/workloads/torch_serve.py` on a lent NVIDIA H200 (MIG off, the
//! whole GPU, one process; `fixtures/h200/*.json`, the script's own output,
//! one file per run) and the model's percentiles for the same profile and
//! arrival rate.
//!
//! The script profiles every batch size of the model (CUDA graphs, the
//! mean of 100 or 200 runs each), then serves Poisson arrivals at shares of
//! the full batch's throughput with the discipline the model assumes (one
//! FIFO queue, a free process takes up to its largest batch). The model
//! reads the profile as Tessera reads any profile
//! ([`MeasuredServing::shape`]) and is given the arrival rate the
//! script measured.
//!
//! What the runs showed: up to 0.9 of the full batch's throughput the
//! model holds (asserted below). At 0.95, over 100 s, the measured p99 was
//! 1.7 (resnet50) and 2.3 (bert) times the model's, beyond any of the
//! model's own runs of that length: there the queue amplifies what the
//! profile leaves out (about 10 µs of dispatch between batches, batches
//! 0.3–0.5% slower than profiled, occasional stalls). Folded into the
//! profile as a profile carries them (`BatchTiming`), the dispatch gap and
//! the serving slowdown those runs measured bring the model's p99 to 16.6
//! ms (bert, measured 31.4) and 7.75 ms (resnet50, measured 10.8): closer,
//! not there; the stalls remain. `tessera simulate
//! measured crates/serving/tests/fixtures/h200/*.json` prints every row;
//! docs/serving-model.md quotes them.

use tessera_serving::{MeasuredServing, MeasuredShared};

/// The highest share of the full batch's throughput at which the model is
/// held to the measurements.
const HELD_UP_TO_LOAD: f64 = 0.9;

/// Simulated runs per level, each as long as the GPU run, for the spread
/// of the p99 one run of that length shows under the model.
const RUNS: u64 = 20;

/// Allowance for the profile's own error (a batch served 0.3–0.5% slower
/// than profiled moves a p99 at 0.9 by a few per cent).
const PROFILE_ALLOWANCE: f64 = 0.05;

/// The runs (compiled in: this crate's tests read no files), by name.
const GPU_RUNS: [(&str, &str); 6] = [
    ("bert-0.9-60s", include_str!("fixtures/h200/bert-0.9-60s.json")),
    ("bert-0.95-100s", include_str!("fixtures/h200/bert-0.95-100s.json")),
    ("bert-25s", include_str!("fixtures/h200/bert-25s.json")),
    ("resnet50-0.9-60s", include_str!("fixtures/h200/resnet50-0.9-60s.json")),
    ("resnet50-0.95-100s", include_str!("fixtures/h200/resnet50-0.95-100s.json")),
    ("resnet50-25s", include_str!("fixtures/h200/resnet50-25s.json")),
];

fn parse(name: &str, json: &str) -> MeasuredServing {
    MeasuredServing::from_json(json).unwrap_or_else(|e| panic!("fixtures/h200/{name}.json: {e}"))
}

#[test]
fn the_model_predicts_the_latency_percentiles_measured_on_a_real_gpu() {
    let mut held = 0;
    for (name, json) in GPU_RUNS {
        let measured = parse(name, json);
        for compared in measured.compare_with_model(RUNS, 0.0).unwrap() {
            let level = &compared.measured;
            let (low, high) = compared.simulated_p99_range_ms;
            if level.utilisation > HELD_UP_TO_LOAD {
                continue;
            }
            held += 1;
            let what = format!("{} at {} of its throughput ({name})", measured.model, level.utilisation);
            let median_error = compared.model_p50_ms / level.p50_ms - 1.0;
            assert!(median_error.abs() <= PROFILE_ALLOWANCE, "{what}: p50 model / measured − 1 = {median_error:.3}");
            // One run's p99 is one draw: it must be one the model could
            // have drawn in a run of the same length.
            let (allowed_low, allowed_high) = (low * (1.0 - PROFILE_ALLOWANCE), high * (1.0 + PROFILE_ALLOWANCE));
            assert!(
                (allowed_low..=allowed_high).contains(&level.p99_ms),
                "{what}: measured p99 {:.3} ms outside the model's runs {low:.3}–{high:.3} ms ±5%",
                level.p99_ms
            );
        }
    }
    assert!(held >= 6, "two models at three loads up to {HELD_UP_TO_LOAD} were measured: {held} held");
}

#[test]
fn what_serving_measured_moves_the_model_toward_the_gpu_near_full_load() {
    for (name, json) in GPU_RUNS.iter().filter(|(name, _)| name.ends_with("0.95-100s")) {
        for compared in parse(name, json).compare_with_model(1, 0.0).unwrap() {
            let served = compared.model_p99_served_ms.unwrap_or_else(|| panic!("{name} measured its dispatch gap"));
            let (model, measured) = (compared.model_p99_ms, compared.measured.p99_ms);
            assert!(
                model < served && served < measured,
                "{name}: model {model:.3} → {served:.3} ms, GPU {measured:.3} ms"
            );
        }
    }
    // Served faster than profiled, and no gap measured: the profile stays the model.
    for compared in parse("bert-25s", GPU_RUNS[2].1).compare_with_model(1, 0.0).unwrap() {
        assert!(compared.serving_slowdown.is_some_and(|slowdown| slowdown < 0.0));
        assert_eq!(compared.model_p99_served_ms, Some(compared.model_p99_ms));
    }
}

#[test]
fn a_run_the_model_cannot_read_is_refused_naming_the_field() {
    let mut measured = parse("resnet50-25s", GPU_RUNS[5].1);
    measured.profile.retain(|p| p.batch != measured.max_batch);
    let error = measured.compare_with_model(1, 0.0).unwrap_err().to_string();
    assert_eq!(error, "profile: the full batch (16) was not profiled");
    let mut measured = parse("resnet50-25s", GPU_RUNS[5].1);
    measured.levels[1].arrived_rps = 0.0;
    let error = measured.compare_with_model(1, 0.0).unwrap_err().to_string();
    assert!(error.starts_with("arrived_rps: 0 at load 0.8"), "{error}");
    measured.levels.clear();
    assert_eq!(measured.compare_with_model(1, 0.0).unwrap_err().to_string(), "levels: no load was measured");
    let error = MeasuredServing::from_json(&GPU_RUNS[5].1.replace("\"arrived_rps\"", "\"rate\"")).unwrap_err();
    assert!(error.to_string().starts_with("run: missing field `arrived_rps`"), "{error}");
}

/// A run in the shape `torch_serve.py --procs 2 --rate-rps R --slo-ms S`
/// writes, made by hand (`fixtures/synthetic/`): a plan's capacity served
/// by two processes, each request counted against the SLO.
const PLANNED_RUN: &str = include_str!("fixtures/synthetic/planned-resnet50-2procs.json");

#[test]
fn a_run_at_a_planned_capacity_is_read_with_its_slo_and_the_models_share_within_it() {
    let measured = parse("synthetic/planned-resnet50-2procs", PLANNED_RUN);
    assert_eq!((measured.procs, measured.planned_capacity_rps), (2, Some(17698.1)));
    let compared = measured.compare_with_model(1, 0.0).unwrap();
    let level = &compared[0];
    assert_eq!((level.measured.slo_ms, level.measured.within_slo), (Some(5.0), Some(0.9931)));
    // The model's share within an SLO at its own p99 is the percentile: the
    // share and the percentile come from one distribution, two processes'.
    let mut at_model_p99 = measured.clone();
    at_model_p99.levels[0].slo_ms = Some(level.model_p99_ms);
    let share = at_model_p99.compare_with_model(1, 0.0).unwrap()[0].model_within_slo.unwrap();
    assert!((share - 0.99).abs() < 2e-3, "within the model's own p99: {share}");
    // Requests routed at random split a Poisson stream: each of the two
    // processes serves what one process alone serves at half the rate.
    let mut one_process = at_model_p99.clone();
    one_process.procs = 1;
    one_process.levels[0].arrived_rps /= 2.0;
    let alone = one_process.compare_with_model(1, 0.0).unwrap()[0].model_within_slo.unwrap();
    assert!((alone - share).abs() < 1e-9, "one process at half the rate: {alone}, two: {share}");
}

#[test]
fn a_share_within_the_slo_the_run_cannot_have_counted_is_refused() {
    let mut measured = parse("synthetic/planned-resnet50-2procs", PLANNED_RUN);
    measured.levels[0].within_slo = Some(1.5);
    let error = measured.compare_with_model(1, 0.0).unwrap_err().to_string();
    assert_eq!(error, "within_slo: 1.5 at load 0.85 is not a share in 0–1");
    measured.levels[0].within_slo = Some(0.99);
    measured.levels[0].slo_ms = None;
    let error = measured.compare_with_model(1, 0.0).unwrap_err().to_string();
    assert_eq!(error, "within_slo: 0.99 at load 0.85 is not counted against an slo_ms");
    measured.levels[0].slo_ms = Some(-1.0);
    let error = measured.compare_with_model(1, 0.0).unwrap_err().to_string();
    assert_eq!(error, "slo_ms: -1 at load 0.85 is not a positive latency");
}

/// A shared instance in the shape `torch_serve.py --members` writes, made
/// by hand (`fixtures/synthetic/`): four light models, one executor.
const SHARED_RUN: &str = include_str!("fixtures/synthetic/shared-four-members.json");

#[test]
fn a_shared_run_is_read_and_each_member_put_beside_the_serialized_model() {
    let run = MeasuredShared::from_json(SHARED_RUN).unwrap();
    let compared = run.compare_with_model().unwrap();
    // The executor's busy share the rates and batch times give.
    let busy: f64 = run.members.iter().map(|m| m.rate_rps * m.profile.latency_ms / 1000.0).sum();
    assert!((compared.model_busy_share - busy).abs() < 1e-12 && (0.6..0.7).contains(&busy), "{busy}");
    for member in &compared.members {
        assert!(member.model_within_slo > 0.99, "{}: {}", member.measured.model, member.model_within_slo);
        assert!(
            member.model_p99_ms > member.measured.profile.latency_ms && member.model_p99_ms < member.measured.slo_ms
        );
    }
    // At an SLO equal to its own p99, a member's share is its percentile.
    let mut at_p99 = run.clone();
    at_p99.members[2].slo_ms = compared.members[2].model_p99_ms;
    let share = at_p99.compare_with_model().unwrap().members[2].model_within_slo;
    assert!((share - 0.99).abs() < 5e-3, "{share}");
}

#[test]
fn a_shared_run_the_model_cannot_judge_is_refused_naming_the_member() {
    let mut run = MeasuredShared::from_json(SHARED_RUN).unwrap();
    run.members[1].batch = 4;
    let error = run.compare_with_model().unwrap_err().to_string();
    assert_eq!(error, "batch: member mobilenetv2: 4: the serialized model judges members at batch 1");
    let mut run = MeasuredShared::from_json(SHARED_RUN).unwrap();
    run.members[0].rate_rps = 0.0;
    assert_eq!(run.compare_with_model().unwrap_err().to_string(), "rate_rps: member resnet50: 0 is not positive");
    run.members.truncate(1);
    let error = run.compare_with_model().unwrap_err().to_string();
    assert_eq!(error, "members: a shared run has at least two members");
}

/// `scripts/gpu_campaign.sh` on a lent H200 on 2026-11-30
/// (`fixtures/h200-2026-11-30/`: MIG off, driver 580.159.04, torch
/// 2.11.0+cu130, the processes under an MPS daemon of the script's own).
/// resnet50 (fp16) was profiled with 1, 2 and 3 processes at once, one
/// service (p99 SLO) planned on those profiles by `tessera plan`, and the
/// plan's busiest segment (batch 16, two processes) served at the capacity
/// the plan gave it for 60 s; then two and three processes at 0.8 and 0.9
/// of their full batch's throughput, 20 s each.
const CAMPAIGN_PLANNED: &str = include_str!("fixtures/h200-2026-11-30/planned.json");
const CAMPAIGN_PROCS: [(&str, &str); 2] = [
    ("procs-p2", include_str!("fixtures/h200-2026-11-30/procs-p2.json")),
    ("procs-p3", include_str!("fixtures/h200-2026-11-30/procs-p3.json")),
];

#[test]
fn a_segment_served_at_its_planned_capacity_on_the_h200_kept_its_p99_slo() {
    let run = parse("h200-2026-11-30/planned", CAMPAIGN_PLANNED);
    let compared = run.compare_with_model(1, 0.0).unwrap();
    let level = &compared[0].measured;
    let planned_rps = run.planned_capacity_rps.unwrap();
    assert!((level.arrived_rps / planned_rps - 1.0).abs() < 0.005, "served {} of {planned_rps}", level.arrived_rps);
    // Measured: 99.976% within the SLO; the model said 99.835%: both keep
    // a p99 SLO, the model on the safe side of the GPU.
    let (measured, model) = (level.within_slo.unwrap(), compared[0].model_within_slo.unwrap());
    assert!(measured >= 0.99 && (0.99..measured).contains(&model), "measured {measured}, model {model}");
}

#[test]
fn with_two_or_three_processes_the_model_overstates_the_h200s_latency() {
    // The profile of P processes is measured with all P running a batch at
    // once; served at random, they seldom are, so batches run faster than
    // the profile says. Measured: p50 6–11% and p99 15–31% under the
    // model's, more so with three processes than with two.
    let mut p99_ratio_by_procs: Vec<(u32, f64, f64)> = Vec::new();
    let runs = [("planned", CAMPAIGN_PLANNED)].into_iter().chain(CAMPAIGN_PROCS);
    for (name, json) in runs {
        let run = parse(name, json);
        for compared in run.compare_with_model(1, 0.0).unwrap() {
            let level = &compared.measured;
            let (p50, p99) = (compared.model_p50_ms / level.p50_ms, compared.model_p99_ms / level.p99_ms);
            assert!((1.03..1.15).contains(&p50) && (1.10..1.35).contains(&p99), "{name}: p50 ×{p50:.3}, p99 ×{p99:.3}");
            p99_ratio_by_procs.push((run.procs, level.utilisation, p99));
        }
    }
    for (procs, load, ratio) in &p99_ratio_by_procs {
        for (more_procs, same_load, more_ratio) in &p99_ratio_by_procs {
            if more_procs > procs && (same_load - load).abs() < 0.01 {
                assert!(more_ratio > ratio, "{procs} vs {more_procs} processes at {load}");
            }
        }
    }
}

/// Four light models sharing the H200 under one serialized executor, 60 s
/// (`torch_serve.py --members`, the same campaign).
const CAMPAIGN_SHARED: &str = include_str!("fixtures/h200-2026-11-30/shared.json");

#[test]
fn four_models_sharing_the_h200_kept_their_slos_and_the_serialized_model_understates_their_p99() {
    let run = MeasuredShared::from_json(CAMPAIGN_SHARED).unwrap();
    let compared = run.compare_with_model().unwrap();
    // Busy 52.6% measured against 49.1% from the rates and the batch times
    // profiled alone: served in turn, batches ran about 7% slower.
    let busy_ratio = compared.busy_share / compared.model_busy_share;
    assert!((1.03..1.12).contains(&busy_ratio), "{busy_ratio}");
    for member in &compared.members {
        let name = &member.measured.model;
        assert!(member.measured.within_slo == 1.0 && member.model_within_slo > 0.9999, "{name}");
        // The model's p99 was 17–19% under the GPU's (about 1.1 ms).
        let ratio = member.model_p99_ms / member.measured.p99_ms;
        assert!((0.75..0.9).contains(&ratio), "{name}: model p99 ×{ratio:.3} of measured");
    }
}
