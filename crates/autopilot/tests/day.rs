//! Simulated days on the demo services.

use tessera_autopilot::{
    simulate_day, ControllerConfig, DayProgress, DayReport, DayRequest, PlanSettings, Sampling, Tally,
};
use tessera_core::GpuModel;
use tessera_core::{TrafficCurve, TrafficPoint};
use tessera_plan::PlanInputs;
use tessera_serving::ArrivalModel;

fn inputs() -> PlanInputs {
    PlanInputs::demo(&[GpuModel::A100_80GB]).unwrap()
}

/// The demo services rising in a straight line from a third of their SLO
/// rates at 0 h to their SLO rates at `hours`, and falling back as long, a
/// step a minute.
fn ramp(inputs: &PlanInputs, hours: f64) -> TrafficCurve {
    let names: Vec<String> = inputs.services().iter().map(|slo| slo.service.clone()).collect();
    let minutes = (2.0 * hours * 60.0) as usize;
    let mut points = Vec::new();
    for minute in 0..minutes {
        let time_s = minute as f64 * 60.0;
        let height = (time_s / 3600.0).min(2.0 * hours - time_s / 3600.0) / hours;
        for slo in inputs.services() {
            let rate_rps = slo.rate_rps * (1.0 + 2.0 * height) / 3.0;
            points.push(TrafficPoint { time_s, service: slo.service.clone(), rate_rps });
        }
    }
    TrafficCurve::new(&names, &points).unwrap()
}

fn day(inputs: &PlanInputs, traffic: &TrafficCurve, hours: f64) -> DayReport {
    simulate_day(&request(inputs, traffic, hours), &mut |_| {}).unwrap()
}

fn request<'a>(inputs: &'a PlanInputs, traffic: &'a TrafficCurve, hours: f64) -> DayRequest<'a> {
    DayRequest {
        inputs,
        settings: PlanSettings::default(),
        controller: ControllerConfig { scale_down_hold_s: 900.0, ..ControllerConfig::default() },
        traffic,
        hours,
        interval_s: 60.0,
        sampling: Sampling { window_s: 5.0, warmup_s: 1.0, ..Sampling::default() },
        arrivals_by_service: Vec::new(),
    }
}

/// The sum over the hours of `figure`.
fn hourly_sum(hours: &[tessera_autopilot::HourRow], figure: fn(&Tally) -> f64) -> f64 {
    hours.iter().map(|row| figure(&row.tally)).sum()
}

#[test]
fn up_and_down_the_autopilot_follows_demand_within_slo_and_without_loss() {
    let inputs = inputs();
    let traffic = ramp(&inputs, 3.0);
    let report = day(&inputs, &traffic, 6.0);
    let (autopilot, fixed, scratch) = (&report.autopilot.totals, &report.static_peak.totals, &report.scratch.totals);
    // The keep test holds the plan's margin as the static plan does: 32.6
    // GPU-hours against 36 when this was written (30.4 when it judged at
    // the profiled speed only).
    assert!(autopilot.gpu_hours < 0.92 * fixed.gpu_hours, "{} vs {}", autopilot.gpu_hours, fixed.gpu_hours);
    assert!(autopilot.worst_service_attainment.unwrap() >= 0.99, "{autopilot:?}");
    assert_eq!(autopilot.requests_lost, 0.0);
    assert!(autopilot.gpus_reconfigured < scratch.gpus_reconfigured, "{autopilot:?} {scratch:?}");
    // Up, then down: GPUs are added in the first half and released in the
    // second.
    let gpus = |hour: usize| report.autopilot.hours[hour].tally.gpu_hours;
    assert!(gpus(2) > gpus(0) && gpus(5) < gpus(3), "{:?}", report.autopilot.hours);
    let kinds: Vec<_> = report.journal.iter().map(|entry| entry.action.name()).collect();
    assert!(kinds.contains(&"scale up") && kinds.contains(&"scale down"), "{kinds:?}");
    assert_eq!(report.journal.len(), 6 * 60);
    assert!(report.forecast.checked > 0);
}

#[test]
fn the_figures_add_up_and_the_baselines_are_what_they_say() {
    let inputs = inputs();
    let traffic = ramp(&inputs, 1.0);
    let report = day(&inputs, &traffic, 2.0);
    for strategy in [&report.autopilot, &report.static_peak, &report.scratch] {
        let totals = &strategy.totals;
        assert!((hourly_sum(&strategy.hours, |t| t.gpu_hours) - totals.gpu_hours).abs() < 1e-9);
        assert!((hourly_sum(&strategy.hours, |t| t.requests) - totals.requests).abs() < 1e-6 * totals.requests);
        assert!((hourly_sum(&strategy.hours, |t| t.requests_within_slo) - totals.requests_within_slo).abs() < 1.0);
        let per_service: f64 = strategy.services.iter().map(|s| s.requests).sum();
        assert!((per_service - totals.requests).abs() < 1e-6 * totals.requests);
        assert_eq!(strategy.hours.len(), 2);
    }
    // Every strategy served the same requests.
    assert!(
        (report.autopilot.totals.requests - report.scratch.totals.requests).abs()
            < 1e-6 * report.scratch.totals.requests
    );
    // The static plan holds the same GPUs all day and never changes.
    let fixed = &report.static_peak;
    assert_eq!(fixed.totals.reconfigurations, 0);
    assert_eq!(fixed.totals.gpu_hours, 2.0 * fixed.totals.gpus_max as f64);
    // The demand is the traffic's.
    let expected: f64 = traffic.mean_rates_rps(0.0, 3600.0).iter().sum();
    assert!((report.demand_rps[0] - expected).abs() < 1e-9);
    // The same request gives the same day.
    assert_eq!(day(&inputs, &traffic, 2.0), report);
}

#[test]
fn steady_services_from_the_serving_model_agree_with_simulating_every_request() {
    let inputs = inputs();
    let traffic = ramp(&inputs, 1.0);
    let modelled = day(&inputs, &traffic, 2.0);
    let simulated = simulate_day(
        &DayRequest {
            sampling: Sampling { window_s: 5.0, warmup_s: 1.0, model_steady: false, ..Sampling::default() },
            ..request(&inputs, &traffic, 2.0)
        },
        &mut |_| {},
    )
    .unwrap();
    assert!(modelled.services_modelled > 0 && simulated.services_modelled == 0);
    assert!(modelled.requests_simulated < simulated.requests_simulated);
    // The same decisions, so the same GPUs; and within a tenth of a point
    // of every request simulated, for every strategy.
    for (modelled, simulated) in [
        (&modelled.autopilot, &simulated.autopilot),
        (&modelled.static_peak, &simulated.static_peak),
        (&modelled.scratch, &simulated.scratch),
    ] {
        let (modelled, simulated) = (&modelled.totals, &simulated.totals);
        assert_eq!(modelled.gpu_hours, simulated.gpu_hours);
        let gap = modelled.attainment.unwrap() - simulated.attainment.unwrap();
        assert!(gap.abs() <= 0.001, "{modelled:?} against {simulated:?}");
    }
}

#[test]
fn traffic_for_other_services_is_refused() {
    let inputs = inputs();
    let traffic =
        TrafficCurve::new(&["x".to_string()], &[TrafficPoint { time_s: 0.0, service: "x".into(), rate_rps: 1.0 }])
            .unwrap();
    let request = DayRequest {
        inputs: &inputs,
        settings: PlanSettings::default(),
        controller: ControllerConfig::default(),
        traffic: &traffic,
        hours: 1.0,
        interval_s: 60.0,
        sampling: Sampling::default(),
        arrivals_by_service: Vec::new(),
    };
    let message = simulate_day(&request, &mut |_| {}).unwrap_err().to_string();
    assert!(message.starts_with("service: the traffic is for x but the services are search-ranking"), "{message}");
    let short = DayRequest { interval_s: 0.5, ..request };
    assert!(simulate_day(&short, &mut |_| {}).unwrap_err().to_string().starts_with("interval_s:"));
}

#[test]
fn a_service_burstier_than_planned_for_is_measured_as_it_arrives() {
    let inputs = inputs();
    let traffic = ramp(&inputs, 0.5);
    let bursty = |arrivals_by_service| {
        let request = DayRequest { arrivals_by_service, ..request(&inputs, &traffic, 1.0) };
        simulate_day(&request, &mut |_| {}).unwrap()
    };
    // photo-tagging (the fourth service) arriving at cv 4 on plans made
    // for Poisson arrivals.
    let mut arrivals = vec![None; inputs.services().len()];
    arrivals[3] = Some(ArrivalModel::Renewal { cv: 4.0 });
    let as_planned = bursty(Vec::new());
    let burstier = bursty(arrivals);
    let within = |report: &DayReport| report.autopilot.services[3].attainment.unwrap();
    assert!(within(&burstier) < within(&as_planned) - 0.01, "{} vs {}", within(&burstier), within(&as_planned));
    // The plans are the same: only how requests arrive differs.
    assert_eq!(burstier.autopilot.totals.gpu_hours, as_planned.autopilot.totals.gpu_hours);
    let wrong = DayRequest { arrivals_by_service: vec![None], ..request(&inputs, &traffic, 1.0) };
    let message = simulate_day(&wrong, &mut |_| {}).unwrap_err().to_string();
    assert!(message.starts_with("arrivals_by_service: 1 models for 6 services"), "{message}");
}

#[test]
fn a_long_tail_day_shares_instances_on_fewer_gpu_hours_within_slo() {
    // Twenty-four light services (10 to 45 req/s) and a heavy one.
    let mut services: Vec<tessera_core::ServiceSlo> = (0..24)
        .map(|k| {
            let model = if k % 2 == 0 { "resnet50" } else { "mobilenetv2" };
            tessera_core::ServiceSlo::new(format!("light-{k}"), model, f64::from(10 + 5 * (k % 8)), 150.0).unwrap()
        })
        .collect();
    services.push(tessera_core::ServiceSlo::new("heavy", "resnet50", 600.0, 80.0).unwrap());
    let inputs = inputs().for_services(services);
    let traffic = ramp(&inputs, 1.0);
    let dedicated = day(&inputs, &traffic, 2.0);
    let options = tessera_plan::PlanOptions { share: Some(tessera_core::Sharing::Serialized), ..Default::default() };
    let shared = simulate_day(
        &DayRequest { settings: PlanSettings { options, target: None }, ..request(&inputs, &traffic, 2.0) },
        &mut |_| {},
    )
    .unwrap();
    let (dedicated, sharing) = (&dedicated.autopilot.totals, &shared.autopilot.totals);
    assert!(sharing.gpu_hours < 0.75 * dedicated.gpu_hours, "{} vs {}", sharing.gpu_hours, dedicated.gpu_hours);
    assert!(sharing.worst_service_attainment.unwrap() >= 0.99, "{sharing:?}");
    assert_eq!(sharing.requests_lost, 0.0);
    // The executors were replanned as their members rose (3.05 against 8
    // GPU-hours, three reconfigurations, when this was written), and every
    // service was served.
    let rose = shared.journal.iter().filter(|entry| entry.reason.contains("light-")).count();
    assert!(rose >= 1 && sharing.reconfigurations >= 2, "{sharing:?}");
    assert_eq!(shared.autopilot.services.len(), 25);
}

#[test]
fn sharing_with_a_service_measured_under_other_arrivals_is_refused_before_the_day() {
    let inputs = inputs();
    let traffic = ramp(&inputs, 0.5);
    let mut arrivals = vec![None; inputs.services().len()];
    arrivals[3] = Some(ArrivalModel::Renewal { cv: 4.0 });
    let options = tessera_plan::PlanOptions { share: Some(tessera_core::Sharing::Serialized), ..Default::default() };
    let request = DayRequest {
        settings: PlanSettings { options, target: None },
        arrivals_by_service: arrivals,
        ..request(&inputs, &traffic, 1.0)
    };
    let message = simulate_day(&request, &mut |_| {}).unwrap_err().to_string();
    assert_eq!(
        message,
        "arrivals_by_service: photo-tagging arrives as cv=4: shared instances are measured under Poisson arrivals only"
    );
}

#[test]
fn progress_comes_in_two_phases_each_counting_up_to_its_total() {
    let inputs = inputs();
    let traffic = ramp(&inputs, 1.0);
    let mut heard = Vec::new();
    let report = simulate_day(&request(&inputs, &traffic, 2.0), &mut |progress| heard.push(progress)).unwrap();
    // Deciding first (the autopilot and scratch side by side), then
    // measuring (the three days at once).
    let first_measuring = heard.iter().position(|p| matches!(p, DayProgress::Measuring { .. })).unwrap();
    let (deciding, measuring) = heard.split_at(first_measuring);
    let mut last = (0, 0);
    for progress in deciding {
        let DayProgress::Deciding { autopilot, scratch, each } = *progress else {
            panic!("{progress:?} while deciding")
        };
        assert_eq!(each, 120);
        assert!(autopilot + scratch == last.0 + last.1 + 1 && autopilot >= last.0 && scratch >= last.1);
        last = (autopilot, scratch);
    }
    assert_eq!(last, (120, 120));
    let mut done_before = 0;
    for progress in measuring {
        let DayProgress::Measuring { done, total } = *progress else { panic!("{progress:?} while measuring") };
        assert_eq!(total, report.pieces_simulated);
        assert!(done >= done_before && done <= total);
        done_before = done;
    }
    assert_eq!(done_before, report.pieces_simulated);
}
