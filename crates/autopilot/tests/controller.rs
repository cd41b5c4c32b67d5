//! The controller on the demo services: its rules, one by one.

use tessera_autopilot::{Action, ActionKind, Controller, ControllerConfig, Observation, PlanSettings, RateSample};
use tessera_core::{GpuModel, Plan};
use tessera_plan::PlanInputs;
use tessera_serving::ArrivalModel;

fn inputs() -> PlanInputs {
    PlanInputs::demo(&[GpuModel::A100_80GB]).unwrap()
}

/// The demo services' SLO rates times `factor`.
fn rates(factor: f64) -> Vec<f64> {
    inputs().services().iter().map(|slo| slo.rate_rps * factor).collect()
}

fn observation(time_s: f64, rates_rps: &[f64]) -> Observation {
    let samples = rates_rps.iter().map(|&rate_rps| Some(RateSample { rate_rps, observed_at_s: time_s })).collect();
    Observation { time_s, samples }
}

fn controller(config: ControllerConfig) -> Controller {
    Controller::new(inputs(), PlanSettings::default(), config, None).unwrap()
}

/// A controller whose plans have no robustness margin: the demo's plans at
/// the profiled speed, whose layouts the swap scenarios below were drawn
/// on (the rules do not depend on the margin).
fn controller_without_margin(config: ControllerConfig) -> Controller {
    let options = tessera_plan::PlanOptions { margin: Some(0.0), ..tessera_plan::PlanOptions::default() };
    Controller::new(inputs(), PlanSettings { options, target: None }, config, None).unwrap()
}

/// Each service's capacity in `plan`, by service name order of the demo.
fn capacities(plan: &Plan) -> Vec<f64> {
    inputs()
        .services()
        .iter()
        .map(|slo| plan.services.iter().find(|r| r.service == slo.service).map_or(0.0, |r| r.provisioned_rps))
        .collect()
}

#[test]
fn missing_stale_and_invalid_metrics_hold_the_plan_and_say_so() {
    let mut controller = controller(ControllerConfig::default());
    let start = controller.observe(&observation(0.0, &rates(0.5)));
    assert!(matches!(start.action, Action::Start(_)), "{}", start.reason);
    let plan = controller.plan().cloned();
    let forecast = controller.forecast_rps();

    let mut missing = observation(60.0, &rates(2.0));
    missing.samples[1] = None;
    let held = controller.observe(&missing);
    assert_eq!(held.action, Action::Hold);
    assert!(held.reason.contains("no rate for fraud-check"), "{}", held.reason);

    let mut stale = observation(120.0, &rates(2.0));
    stale.samples[0] = Some(RateSample { rate_rps: 1000.0, observed_at_s: -1.0 });
    let held = controller.observe(&stale);
    assert_eq!(held.action, Action::Hold);
    assert!(held.reason.contains("stale rates (older than 120 s) for search-ranking (121 s old)"), "{}", held.reason);

    let mut invalid = observation(180.0, &rates(2.0));
    invalid.samples[2] = Some(RateSample { rate_rps: f64::NAN, observed_at_s: 180.0 });
    assert_eq!(controller.observe(&invalid).action, Action::Hold);
    let short = Observation { time_s: 190.0, samples: vec![None] };
    assert!(controller.observe(&short).reason.contains("1 rate sample for 6 services"));
    let early = controller.observe(&observation(10.0, &rates(2.0)));
    assert!(early.reason.contains("not after the previous one"), "{}", early.reason);

    // Nothing moved: no plan change, and the forecast never saw the rates.
    assert_eq!(controller.plan().cloned(), plan);
    assert_eq!(controller.forecast_rps(), forecast);
    let kinds: Vec<ActionKind> = controller.journal().iter().map(|entry| entry.action).collect();
    assert_eq!(
        kinds,
        [ActionKind::Start, ActionKind::Hold, ActionKind::Hold, ActionKind::Hold, ActionKind::Hold, ActionKind::Hold]
    );

    // Fresh metrics: the doubled rates are acted on at once.
    let acted = controller.observe(&observation(240.0, &rates(2.0)));
    assert!(matches!(acted.action, Action::ScaleUp(_)), "{}", acted.reason);
}

#[test]
fn a_rise_scales_up_at_once_taking_capacity_from_no_service() {
    let mut controller = controller(ControllerConfig::default());
    controller.observe(&observation(0.0, &rates(0.4)));
    let before = controller.plan().cloned().unwrap();
    let mut rising = rates(0.4);
    rising[3] *= 2.5; // photo-tagging
    let decision = controller.observe(&observation(60.0, &rising));
    let Action::ScaleUp(change) = &decision.action else { panic!("expected a scale-up: {}", decision.reason) };
    assert!(decision.reason.contains("photo-tagging"), "{}", decision.reason);
    assert!(change.transition.duration_s() > 0.0);
    for (old, new) in capacities(&before).iter().zip(capacities(&change.plan)) {
        assert!(new >= old * (1.0 - 1e-9), "a service lost capacity: {old} → {new}");
    }
    assert!(capacities(&change.plan)[3] >= rising[3] * 1.15, "{:?}", capacities(&change.plan));
    // While the transition runs, nothing else happens.
    let during = controller.observe(&observation(61.0, &rising));
    assert_eq!(during.action, Action::Hold);
    assert!(during.reason.contains("a transition runs until"), "{}", during.reason);
    let entry = &controller.journal()[1];
    assert_eq!(entry.action, ActionKind::ScaleUp);
    assert_eq!(entry.gpus, change.plan.gpu_count);
    assert_eq!(entry.transition_s, change.transition.duration_s());
}

#[test]
fn a_fall_scales_down_only_after_the_hold() {
    let config = ControllerConfig { scale_down_hold_s: 600.0, ..ControllerConfig::default() };
    let mut controller = controller(config);
    controller.observe(&observation(0.0, &rates(1.0)));
    let peak_gpus = controller.plan().unwrap().gpu_count;
    let mut possible_since = None;
    let mut scaled_down_at = None;
    for minute in 1..=40 {
        let time_s = f64::from(minute) * 60.0;
        let decision = controller.observe(&observation(time_s, &rates(0.3)));
        match &decision.action {
            Action::Keep if decision.reason.contains("possible from now") => possible_since = Some(time_s),
            Action::ScaleDown(change) => {
                assert!(change.plan.gpu_count < peak_gpus, "{}", decision.reason);
                scaled_down_at = Some(time_s);
                break;
            }
            Action::Keep => {}
            other => panic!("unexpected {other:?}: {}", decision.reason),
        }
    }
    let since = possible_since.expect("a scale-down became possible");
    // The window of three observations holds the old rate for two more
    // minutes; then the hold runs its ten minutes, and the scale-down waits
    // beyond while its transition would leave a service without capacity.
    assert_eq!(since, 180.0);
    let scaled_down_at = scaled_down_at.expect("a scale-down");
    assert!(scaled_down_at >= since + 600.0, "{scaled_down_at}");
    for entry in controller.journal().iter().filter(|entry| entry.time_s > since && entry.time_s < scaled_down_at) {
        let waiting = entry.reason.contains(" of 10 min") || entry.reason.contains("waits: it dips");
        assert!(waiting, "{}", entry.reason);
    }
    assert!(controller.journal().iter().any(|entry| entry.reason.contains("possible for 5 of 10 min")));
}

#[test]
fn beyond_the_rate_limit_only_segments_are_added_and_scale_downs_hold() {
    let config =
        ControllerConfig { max_reconfigurations_per_hour: 1, scale_down_hold_s: 0.0, ..ControllerConfig::default() };
    let mut controller = controller(config);
    controller.observe(&observation(0.0, &rates(1.0)));
    // A fall: the scale-down stops segments, and takes the hour's one
    // reconfiguration.
    let mut decisions = Vec::new();
    for minute in 1..=20 {
        decisions.push(controller.observe(&observation(f64::from(minute) * 60.0, &rates(0.5))));
    }
    let first = decisions.iter().find(|decision| matches!(decision.action, Action::ScaleDown(_)));
    let first_s = first.expect("a scale-down").time_s;
    // A further fall holds for the limit; a rise adds segments anyway.
    for minute in 21..=30 {
        decisions.push(controller.observe(&observation(f64::from(minute) * 60.0, &rates(0.2))));
    }
    let held = decisions.iter().find(|decision| decision.reason.starts_with("holding a scale-down"));
    let held = held.expect("a scale-down held by the rate limit");
    assert_eq!(held.action, Action::Hold);
    assert!(held.reason.contains("the rate limit of 1 reconfiguration per hour is reached"), "{}", held.reason);
    for minute in 31..=40 {
        decisions.push(controller.observe(&observation(f64::from(minute) * 60.0, &rates(1.0))));
    }
    let added = decisions.iter().find_map(|decision| match &decision.action {
        Action::ScaleUp(change) if decision.time_s < first_s + 3600.0 => Some((change, &decision.reason)),
        _ => None,
    });
    let (change, reason) = added.expect("a scale-up within the hour of the scale-down");
    assert!(change.transition.only_adds(), "{reason}");
    assert!(reason.contains("reached: segments added"), "{reason}");
    // Within the hour, no other reconfiguration stops anything but a swap
    // (no MIG layout changes).
    let disturbing = decisions.iter().filter(|decision| match &decision.action {
        Action::ScaleUp(change) | Action::ScaleDown(change) => {
            !change.transition.only_adds() && !change.transition.keeps_layouts()
        }
        _ => false,
    });
    assert_eq!(disturbing.map(|decision| decision.time_s).collect::<Vec<_>>(), [first_s]);
}

#[test]
fn a_burst_is_met_by_swapping_spare_instances_without_a_layout_change() {
    let mut controller = controller(ControllerConfig::default());
    controller.observe(&observation(0.0, &rates(1.0)));
    let start = controller.plan().cloned().unwrap();
    // Every service but the first falls to half its rate, not yet for
    // long enough to scale down.
    let mut fallen = rates(0.5);
    fallen[0] = rates(1.0)[0];
    for minute in 1..=10 {
        let kept = controller.observe(&observation(f64::from(minute) * 60.0, &fallen));
        assert!(matches!(kept.action, Action::Keep), "{}", kept.reason);
    }
    // The first bursts: their spare instances serve it, no GPU changes.
    fallen[0] = rates(1.4)[0];
    let burst = controller.observe(&observation(660.0, &fallen));
    let Action::ScaleUp(change) = &burst.action else { panic!("{}", burst.reason) };
    assert!(burst.reason.contains("instances swapped"), "{}", burst.reason);
    assert!(change.transition.keeps_layouts() && !change.transition.only_adds(), "{}", burst.reason);
    assert_eq!(change.plan.gpu_count, start.gpu_count);
    assert!(capacities(&change.plan)[0] > capacities(&start)[0], "{}", burst.reason);
    assert_eq!(controller.journal().last().unwrap().gpus_reconfigured, 0);
}

#[test]
fn a_burst_is_met_from_the_headroom_other_services_hold() {
    let mut controller = controller_without_margin(ControllerConfig::default());
    controller.observe(&observation(0.0, &rates(1.0)));
    let start = controller.plan().cloned().unwrap();
    // The others ease by 10%: what they hold over their forecast +15% is
    // too little for the burst below, what they hold over the keep test's
    // +5% is enough.
    let mut steady = rates(0.9);
    steady[0] = rates(1.0)[0];
    for minute in 1..=10 {
        let kept = controller.observe(&observation(f64::from(minute) * 60.0, &steady));
        assert!(matches!(kept.action, Action::Keep), "{}", kept.reason);
    }
    let mut burst = steady.clone();
    burst[0] *= 1.4;
    let decision = controller.observe(&observation(660.0, &burst));
    let Action::ScaleUp(change) = &decision.action else { panic!("{}", decision.reason) };
    assert!(decision.reason.contains("instances swapped"), "{}", decision.reason);
    assert_eq!(change.plan.gpu_count, start.gpu_count);
    assert_eq!(controller.journal().last().unwrap().gpus_reconfigured, 0);
    let after = capacities(&change.plan);
    assert!(after[0] >= burst[0] * 1.15 * (1.0 - 1e-9), "{after:?}");
    for (index, (&capacity, &rate)) in after.iter().zip(&steady).enumerate().skip(1) {
        assert!(capacity >= rate * 1.05 * (1.0 - 1e-9), "service {index}: {capacity} < {rate} + 5%");
    }
}

#[test]
fn a_scale_up_takes_back_spare_capacity_only_after_the_hold() {
    // Rule 5's scale-down is kept out of the way: only scale-ups act.
    let config =
        ControllerConfig { scale_down_hold_s: 600.0, scale_down_min_gpus: 1000, ..ControllerConfig::default() };
    let mut controller = controller(config);
    controller.observe(&observation(0.0, &rates(0.5)));
    // A burst on search-ranking (the first service), then back.
    let mut burst = rates(0.5);
    burst[0] *= 3.0;
    let mut capacity_after_burst = 0.0;
    for minute in 1..=4 {
        if let Action::ScaleUp(change) = &controller.observe(&observation(f64::from(minute) * 60.0, &burst)).action {
            capacity_after_burst = capacities(&change.plan)[0];
        }
    }
    assert!(capacity_after_burst >= burst[0] * 1.15, "the burst was met at +15%: {capacity_after_burst}");
    let mut quiet = rates(0.5);
    let scale_up_at = |controller: &mut Controller, from_minute: u32, rates_rps: &[f64]| {
        (from_minute..from_minute + 5).find_map(|minute| {
            match controller.observe(&observation(f64::from(minute) * 60.0, rates_rps)).action {
                Action::ScaleUp(change) => Some(capacities(&change.plan)),
                _ => None,
            }
        })
    };
    for minute in 5..=9 {
        controller.observe(&observation(f64::from(minute) * 60.0, &quiet));
    }
    // Another service rises before the spare has lasted ten minutes: it
    // is kept.
    quiet[3] *= 2.5;
    let early = scale_up_at(&mut controller, 10, &quiet).expect("a scale-up for photo-tagging");
    assert!(early[0] >= capacity_after_burst * (1.0 - 1e-9), "{} < {capacity_after_burst}", early[0]);
    // After the hold, the next scale-up gives it back.
    for minute in 15..=24 {
        controller.observe(&observation(f64::from(minute) * 60.0, &quiet));
    }
    quiet[1] *= 2.5;
    let late = scale_up_at(&mut controller, 25, &quiet).expect("a scale-up for fraud-check");
    assert!(late[0] < capacity_after_burst, "{} >= {capacity_after_burst}", late[0]);
    assert!(late[0] >= quiet[0] * 1.15, "{} < {}", late[0], quiet[0] * 1.15);
}

#[test]
fn a_long_scale_down_is_taken_in_smaller_steps() {
    // A deep fall, scaled down with no limit on a transition's time, then
    // with one below the single step's: the fleet comes down in steps,
    // each within the limit.
    let scale_downs = |max_transition_s: f64| {
        let config = ControllerConfig { scale_down_hold_s: 0.0, max_transition_s, ..ControllerConfig::default() };
        let mut controller = controller(config);
        controller.observe(&observation(0.0, &rates(1.0)));
        let steps: Vec<(usize, f64)> = (1..=60)
            .filter_map(|minute| match controller.observe(&observation(f64::from(minute) * 60.0, &rates(0.2))).action {
                Action::ScaleDown(change) => Some((change.plan.gpu_count, change.transition.duration_s())),
                _ => None,
            })
            .collect();
        steps
    };
    let unlimited = scale_downs(1e9);
    let (first_gpus, first_s) = unlimited[0];
    let limit_s = first_s - 1.0;
    let limited = scale_downs(limit_s);
    assert!(limited.len() > unlimited.len().min(1), "{limited:?} vs {unlimited:?}");
    assert!(limited[0].0 > first_gpus, "the first step releases fewer: {limited:?} vs {unlimited:?}");
    assert!(limited.iter().all(|&(_, duration_s)| duration_s <= limit_s), "{limited:?}");
    assert!(limited.last().unwrap().0 <= unlimited.last().unwrap().0 + 1, "{limited:?} vs {unlimited:?}");
}

#[test]
fn a_scale_down_leaves_a_service_that_just_rose_its_capacity() {
    let config = ControllerConfig { scale_down_hold_s: 600.0, ..ControllerConfig::default() };
    let mut controller = controller(config);
    controller.observe(&observation(0.0, &rates(1.0)));
    // Everything falls; photo-tagging (the fourth service) falls, then
    // rises back past its capacity while the scale-down's hold runs, as
    // the others fall further (the GPUs needed do not rise).
    let mut falling = rates(0.3);
    let mut risen_capacity = None;
    let mut last_up_s = 0.0;
    let mut scaled_down = None;
    for minute in 1..=40 {
        if minute == 8 {
            falling = rates(0.1);
            falling[3] = rates(1.3)[3];
        }
        let decision = controller.observe(&observation(f64::from(minute) * 60.0, &falling));
        match decision.action {
            Action::ScaleUp(change) => {
                risen_capacity = Some(capacities(&change.plan)[3]);
                last_up_s = decision.time_s;
            }
            Action::ScaleDown(change) if risen_capacity.is_some() => {
                scaled_down = Some((decision.time_s, capacities(&change.plan)[3]));
                break;
            }
            _ => {}
        }
    }
    let risen_capacity = risen_capacity.expect("a scale-up for photo-tagging");
    let (at_s, kept) = scaled_down.expect("a scale-down after the rise");
    assert!(at_s < last_up_s + 600.0, "a scale-up restarted the hold: down at {at_s} s, last up at {last_up_s} s");
    assert!(kept >= risen_capacity * (1.0 - 1e-9), "{kept} < {risen_capacity}");
}

#[test]
fn no_scale_down_while_demand_rises() {
    // Planned for the peak, then a trough; from minute 9 the rates climb
    // back. The hold is met at about minute 13, but the GPUs needed keep
    // rising: nothing is released. Flat, the same trough scales down.
    let day = |climbing: bool| {
        let config = ControllerConfig { scale_down_hold_s: 600.0, ..ControllerConfig::default() };
        let mut controller = controller(config);
        controller.observe(&observation(0.0, &rates(1.0)));
        let scale_downs = (1..=23)
            .filter(|&minute| {
                let factor = if climbing && minute > 8 { 0.2 + 0.05 * f64::from(minute - 8) } else { 0.2 };
                let decision = controller.observe(&observation(f64::from(minute) * 60.0, &rates(factor)));
                matches!(decision.action, Action::ScaleDown(_))
            })
            .count();
        let rising = controller.journal().iter().filter(|entry| entry.reason.contains("demand rises")).count();
        (scale_downs, rising)
    };
    let (scale_downs, rising) = day(true);
    assert_eq!(scale_downs, 0);
    assert!(rising > 0);
    let (scale_downs, rising) = day(false);
    assert!(scale_downs > 0);
    assert_eq!(rising, 0);
}

#[test]
fn a_bad_configuration_is_named() {
    let bad = |config| Controller::new(inputs(), PlanSettings::default(), config, None).unwrap_err().to_string();
    let message = bad(ControllerConfig { keep_headroom: 0.3, ..ControllerConfig::default() });
    assert!(message.starts_with("keep_headroom: 0.3 is not in [0, 0.15]"), "{message}");
    assert!(bad(ControllerConfig { scale_down_min_gpus: 0, ..ControllerConfig::default() })
        .starts_with("scale_down_min_gpus"));
}

/// Six light services (3 req/s each) that share one 1g instance, and the
/// plan sharing it.
fn light_shared() -> (PlanInputs, Plan) {
    let light: Vec<tessera_core::ServiceSlo> =
        (0..6).map(|k| tessera_core::ServiceSlo::new(format!("light-{k}"), "resnet50", 3.0, 150.0).unwrap()).collect();
    let light = inputs().for_services(light);
    let request = tessera_plan::PlanRequest {
        share: Some(tessera_core::Sharing::Serialized),
        ..tessera_plan::PlanRequest::new(&light)
    };
    let shared = tessera_plan::plan(&request).unwrap().plan;
    assert_eq!(shared.shared_instances().count(), 1, "one executor for the six");
    (light, shared)
}

#[test]
fn a_running_shared_instance_is_kept_while_it_holds_and_replanned_sharing_when_it_does_not() {
    let (light, shared) = light_shared();
    let mut controller =
        Controller::new(light.clone(), PlanSettings::default(), ControllerConfig::default(), Some(shared.clone()))
            .unwrap();
    // At the rates it was planned for the executor holds.
    let planned: Vec<f64> = light.services().iter().map(|slo| slo.rate_rps).collect();
    let kept = controller.observe(&observation(0.0, &planned));
    assert!(matches!(kept.action, Action::Keep), "{}", kept.reason);
    // One member rises to 90% of what the executor can serve of it alone:
    // its wait behind the others, and theirs behind it, break the SLO; the
    // replan keeps sharing what still can.
    let (_, executor) = shared.shared_instances().next().unwrap();
    let first = executor.members.iter().find(|m| m.service == "light-0").unwrap();
    let mut risen = planned.clone();
    risen[0] = 0.9 * 1000.0 / first.busy_ms();
    let decision = (1..=10)
        .map(|minute| controller.observe(&observation(60.0 * f64::from(minute), &risen)))
        .find(|decision| !matches!(decision.action, Action::Keep))
        .expect("the rise is answered within ten minutes");
    let Action::ScaleUp(change) = &decision.action else { panic!("expected a scale-up: {}", decision.reason) };
    assert!(decision.reason.contains("light-0"), "{}", decision.reason);
    let members: usize = change.plan.shared_instances().map(|(_, s)| s.members.len()).sum();
    assert!(members >= 2, "the replan still shares: {members} members");
    // The executor restarted with other members elsewhere before the old
    // one stopped: no member went unserved while the steps ran.
    assert!(change.transition.dips().next().is_none(), "{:?}", change.transition.steps);
    let capacity = change.plan.provided_rps();
    for (slo, &rate_rps) in light.services().iter().zip(&risen) {
        let provided = capacity.get(slo.service.as_str()).copied().unwrap_or(0.0);
        assert!(provided >= rate_rps * (1.0 - 1e-9), "{}: {provided} < {rate_rps}", slo.service);
    }
    let verified = tessera_plan::verify_plan(
        &change.plan,
        &light.for_services(
            light
                .services()
                .iter()
                .zip(&risen)
                .map(|(slo, &rate_rps)| tessera_core::ServiceSlo { rate_rps, ..slo.clone() })
                .collect(),
        ),
        tessera_plan::CheckOptions::default(),
    )
    .unwrap();
    assert!(verified.violations.is_empty(), "{:?}", verified.violations);
}

#[test]
fn sharing_under_bursty_arrivals_is_refused_at_once() {
    let (light, _) = light_shared();
    let options = tessera_plan::PlanOptions {
        share: Some(tessera_core::Sharing::Serialized),
        arrivals: Some(tessera_plan::Arrivals::Model(ArrivalModel::Renewal { cv: 2.0 })),
        ..tessera_plan::PlanOptions::default()
    };
    let refused = Controller::new(light, PlanSettings { options, target: None }, ControllerConfig::default(), None);
    let message = refused.err().unwrap().to_string();
    assert!(message.contains("share: shared instances are proven under Poisson arrivals only"), "{message}");
}

#[test]
fn burstier_arrivals_observed_replan_a_plan_proven_under_calmer_ones() {
    let mut controller = controller(ControllerConfig::default());
    controller.observe(&observation(0.0, &rates(0.5)));
    let poisson = controller.plan().cloned().unwrap();
    assert_eq!(poisson.traffic.as_ref().unwrap().arrivals, "poisson");
    let bursty = ArrivalModel::Renewal { cv: 2.0 };
    controller.set_arrivals(bursty.clone());
    assert_eq!(controller.arrivals(), bursty);
    let decision = controller.observe(&observation(60.0, &rates(0.5)));
    let Action::ScaleUp(change) = &decision.action else { panic!("expected a replan: {}", decision.reason) };
    assert!(decision.reason.contains("planned under poisson arrivals, not cv=2"), "{}", decision.reason);
    assert_eq!(change.plan.traffic.as_ref().unwrap().arrivals, "cv=2");
    assert!(change.plan.gpu_count >= poisson.gpu_count, "{} < {}", change.plan.gpu_count, poisson.gpu_count);
    // Calmer arrivals again: the burstier plan holds under them, and stays.
    controller.set_arrivals(ArrivalModel::Poisson);
    let later = controller.observe(&observation(3600.0, &rates(0.5)));
    assert!(!matches!(later.action, Action::ScaleUp(_)), "{}", later.reason);
}

/// `service`'s segments' full-batch throughput together in `plan`, req/s.
fn throughput_rps(plan: &Plan, service: &str) -> f64 {
    let instances = plan.gpus.iter().flat_map(|gpu| &gpu.instances);
    instances.filter(|instance| instance.service == service).map(|instance| instance.throughput_rps).sum()
}

#[test]
fn a_rate_past_the_throughput_queues_requests_and_the_scale_up_drains_them() {
    let scaled_up = |drain_s: f64| {
        let mut controller = controller(ControllerConfig { drain_s, ..ControllerConfig::default() });
        controller.observe(&observation(0.0, &rates(0.4)));
        let throughput = throughput_rps(controller.plan().unwrap(), "photo-tagging");
        // A minute at twice photo-tagging's throughput: a minute of its
        // throughput queued, the others well within theirs.
        let mut burst = rates(0.4);
        burst[3] = 2.0 * throughput;
        let decision = controller.observe(&observation(60.0, &burst));
        let Action::ScaleUp(change) = decision.action else { panic!("expected a scale-up: {}", decision.reason) };
        (throughput, capacities(&change.plan)[3], decision.reason)
    };
    let (throughput, drained, reason) = scaled_up(120.0);
    assert!(reason.contains("requests queued beyond throughput, each drained within 120 s: photo-tagging"), "{reason}");
    // Met at its rate plus half its throughput a second (60 s of it over
    // 120 s), with the keep test's headroom at least.
    assert!(drained >= 1.05 * 2.5 * throughput * (1.0 - 1e-9), "{drained} for a throughput of {throughput}");
    let (_, kept_up, reason) = scaled_up(0.0);
    assert!(!reason.contains("queued"), "{reason}");
    assert!(kept_up < drained, "{kept_up} without draining, {drained} with");
}
