//! The simulator against queueing theory and against itself.

use tessera_serving::{
    simulate, simulate_attainment, ArrivalModel, Attained, Discipline, SegmentShape, ServingError, ServingReport,
    SimulationOptions,
};

use crate::support::{parva_scale, single};

fn options(seconds: f64, warmup_s: f64) -> SimulationOptions {
    SimulationOptions { seconds, warmup_s, seed: 42, ..SimulationOptions::default() }
}

#[test]
fn m_d_1_waits_match_pollaczek_khinchine() {
    // One process, batches of one, 1 ms each: M/D/1, mean wait ρ S / (2 (1 − ρ)).
    let shape = SegmentShape::full_batch_only(1, 1, 1.0).unwrap();
    for (load, seconds) in [(0.5, 4_000.0), (0.8, 10_000.0)] {
        let system = single(shape.clone(), load * 1000.0, 1000.0);
        let report = simulate(&system, &options(seconds, 10.0)).unwrap();
        let measures = report.services[0].measures.as_ref().unwrap();
        let wait_ms = measures.mean_ms - 1.0;
        let expected_ms = load * 1.0 / (2.0 * (1.0 - load));
        assert!((wait_ms / expected_ms - 1.0).abs() < 0.02, "ρ {load}: mean wait {wait_ms} ms, P-K {expected_ms} ms");
        let utilisation = report.segments[0].utilisation;
        assert!((utilisation / load - 1.0).abs() < 0.01, "ρ {load}: utilisation {utilisation}");
        assert_eq!(report.segments[0].mean_batch, Some(1.0));
    }
}

#[test]
fn at_a_tiny_load_every_batch_is_one_and_runs_at_its_profiled_latency() {
    let shape = SegmentShape::new(4, vec![(1, 10.0), (2, 14.0), (8, 40.0)]).unwrap();
    let system = single(shape, 0.1, 12.0);
    let report = simulate(&system, &options(20_000.0, 0.0)).unwrap();
    let measures = report.services[0].measures.as_ref().unwrap();
    assert!(report.services[0].requests > 1900, "{}", report.services[0].requests);
    assert_eq!(report.segments[0].mean_batch, Some(1.0));
    assert_eq!((measures.p50_ms, measures.p99_ms), (10.0, 10.0));
    assert_eq!(measures.attainment, 1.0);
    assert_eq!(measures.verdict, tessera_serving::SloVerdict::Met);
}

#[test]
fn an_idle_process_waits_out_the_queueing_delay() {
    // At 1 req/s a batch of 4 never fills: each request waits the 50 ms delay, then runs alone.
    let shape = SegmentShape::new(1, vec![(1, 10.0), (4, 30.0)]).unwrap();
    let system = single(shape, 1.0, 100.0);
    let report = simulate(&system, &SimulationOptions { max_queue_delay_ms: 50.0, ..options(2_000.0, 0.0) }).unwrap();
    let measures = report.services[0].measures.as_ref().unwrap();
    assert!((measures.p50_ms / 60.0 - 1.0).abs() < 0.003, "p50 {}", measures.p50_ms);
    // At 400 req/s the delay fills batches: far more than one request each.
    let shape = SegmentShape::new(1, vec![(1, 10.0), (4, 12.0)]).unwrap();
    let system = single(shape, 200.0, 100.0);
    let delayed = simulate(&system, &SimulationOptions { max_queue_delay_ms: 20.0, ..options(100.0, 5.0) }).unwrap();
    let eager = simulate(&system, &options(100.0, 5.0)).unwrap();
    let (delayed_batch, eager_batch) = (delayed.segments[0].mean_batch.unwrap(), eager.segments[0].mean_batch.unwrap());
    assert!(delayed_batch > 3.5 && delayed_batch > eager_batch, "{delayed_batch} vs {eager_batch}");
}

#[test]
fn overload_collapses_attainment_without_hanging() {
    // Two processes of 8 per 40 ms: 400 req/s; offered 800 req/s.
    let shape = SegmentShape::new(2, vec![(1, 10.0), (8, 40.0)]).unwrap();
    let system = single(shape, 800.0, 200.0);
    let report = simulate(&system, &SimulationOptions { timeline_bucket_s: Some(0.1), ..options(60.0, 10.0) }).unwrap();
    let outcome = &report.services[0];
    let measures = outcome.measures.as_ref().unwrap();
    assert!(measures.attainment < 0.05, "attainment {}", measures.attainment);
    assert_eq!(measures.verdict, tessera_serving::SloVerdict::Missed);
    assert!((report.segments[0].offered_load - 2.0).abs() < 1e-12);
    assert!(report.segments[0].utilisation > 0.99, "utilisation {}", report.segments[0].utilisation);
    // Latency grows through the run: the backlog reaches about 400 req/s × 60 s.
    assert!(measures.max_ms > 25_000.0, "max {} ms", measures.max_ms);
    let first = outcome.timeline[0].attainment().unwrap();
    let last = outcome.timeline.last().unwrap().attainment().unwrap();
    // The first tenth of a second meets its SLO; the backlog soon passes 200 ms for good.
    assert!(first > 0.9 && last == 0.0, "first bucket {first}, last {last}");
    assert_eq!(report.worst.as_ref().unwrap().name, "svc");
}

#[test]
fn counting_only_gives_the_full_runs_counts() {
    // Every discipline, batching delay, spread and slowdown, from light
    // load to three times the throughput, and ParvaGPU-scale systems.
    let shape = SegmentShape::new(3, vec![(1, 10.0), (4, 18.0), (8, 40.0)]).unwrap();
    let throughput_rps = 3.0 * 8.0 / 0.040;
    let mut cases: Vec<(tessera_serving::ServingSystem, SimulationOptions)> = Vec::new();
    for load in [0.5, 0.98, 1.02, 1.3, 3.0] {
        for discipline in Discipline::ALL {
            for (max_queue_delay_ms, slowdown) in [(0.0, 0.0), (2.0, 0.05)] {
                let options = SimulationOptions { discipline, max_queue_delay_ms, slowdown, ..options(20.0, 4.0) };
                cases.push((single(shape.clone(), load * throughput_rps, 150.0), options));
            }
        }
        let spread = shape.clone().with_p99_ratio(1.2).unwrap();
        cases.push((single(spread, load * throughput_rps, 150.0), options(20.0, 4.0)));
    }
    for load in [0.9, 1.05, 1.5] {
        cases.push((parva_scale(load), SimulationOptions { replications: 2, ..options(10.0, 2.0) }));
    }
    for (system, options) in &cases {
        let report = simulate(system, options).unwrap();
        let counted = simulate_attainment(system, options).unwrap();
        let full: Vec<Attained> = report
            .services
            .iter()
            .map(|outcome| Attained { requests: outcome.requests, within_slo: outcome.within_slo, simulated: 0 })
            .collect();
        let without_simulated: Vec<Attained> = counted.iter().map(|a| Attained { simulated: 0, ..*a }).collect();
        assert_eq!(without_simulated, full, "{:?}", options.discipline);
        assert_eq!(counted.iter().map(|a| a.simulated).sum::<u64>(), report.requests_simulated);
    }
}

#[test]
fn a_queue_past_its_limit_stops_the_run_naming_the_segment() {
    // 20,000 req/s on 1,000 req/s: 19,000 more waiting every second.
    let system = single(SegmentShape::full_batch_only(1, 1, 1.0).unwrap(), 20_000.0, 10.0);
    let error = simulate(&system, &options(2_000.0, 0.0)).unwrap_err();
    let ServingError::QueueLimit { ref segment, offered_load, at_s, .. } = error else { panic!("{error}") };
    assert_eq!(segment, "seg");
    assert!((offered_load - 20.0).abs() < 1e-9);
    assert!(at_s > 500.0 && at_s < 560.0, "{at_s}");
    let text = error.to_string();
    assert!(text.contains("offered load: 20.00") && !text.contains('\n'), "{text}");
}

#[test]
fn pooling_the_processes_shortens_the_tail() {
    // Four processes of one request per 10 ms at 70% load.
    let shape = SegmentShape::full_batch_only(4, 1, 10.0).unwrap();
    let system = single(shape, 280.0, 50.0);
    let p99 = |discipline| {
        let report = simulate(&system, &SimulationOptions { discipline, ..options(2_000.0, 10.0) }).unwrap();
        report.services[0].measures.as_ref().unwrap().p99_ms
    };
    let random = p99(Discipline::RandomPerProcess);
    let (round_robin, shortest, shared) =
        (p99(Discipline::RoundRobin), p99(Discipline::JoinShortestQueue), p99(Discipline::SharedQueue));
    assert!(shared < 0.6 * random, "shared {shared} vs random {random}");
    assert!(shortest < 0.6 * random && round_robin < random, "jsq {shortest}, round-robin {round_robin}");
    assert!(shared <= shortest * 1.01, "shared {shared} vs jsq {shortest}");
}

#[test]
fn burstier_arrivals_lengthen_the_tail() {
    let shape = SegmentShape::new(2, vec![(1, 5.0), (4, 10.0), (8, 16.0)]).unwrap();
    let system = single(shape, 600.0, 50.0);
    let p99 = |arrivals: ArrivalModel| {
        let report = simulate(&system, &SimulationOptions { arrivals, ..options(500.0, 10.0) }).unwrap();
        report.services[0].measures.as_ref().unwrap().p99_ms
    };
    let (poisson, bursty, smooth) =
        (p99(ArrivalModel::Poisson), p99(ArrivalModel::Renewal { cv: 4.0 }), p99(ArrivalModel::Renewal { cv: 0.3 }));
    assert!(smooth < poisson && poisson < bursty, "cv 0.3: {smooth}, Poisson: {poisson}, cv 4: {bursty}");
}

#[test]
fn a_seed_gives_the_same_report_bit_for_bit_on_any_number_of_threads() {
    let system = parva_scale(0.8);
    let base = SimulationOptions { timeline_bucket_s: Some(1.0), ..options(5.0, 1.0) };
    let on = |threads: usize, options: &SimulationOptions| -> ServingReport {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        pool.install(|| simulate(&system, options)).unwrap()
    };
    let one = on(1, &base);
    assert_eq!(one, on(2, &base));
    assert_eq!(one, simulate(&system, &base).unwrap());
    assert_ne!(one, on(2, &SimulationOptions { seed: 43, ..base.clone() }));
    let replicated = SimulationOptions { replications: 3, ..base.clone() };
    assert_eq!(on(1, &replicated), on(2, &replicated));
    assert_eq!(
        one.requests_simulated,
        one.services.iter().map(|s| s.timeline.iter().map(|b| b.requests).sum::<u64>()).sum::<u64>()
    );
}

#[test]
fn the_warm_up_is_simulated_but_not_measured() {
    let system = single(SegmentShape::new(2, vec![(1, 2.0), (4, 4.0)]).unwrap(), 1000.0, 10.0);
    let report = simulate(&system, &SimulationOptions { timeline_bucket_s: Some(1.0), ..options(10.0, 4.0) }).unwrap();
    let timeline = &report.services[0].timeline;
    assert_eq!(timeline.len(), 10);
    let all: u64 = timeline.iter().map(|b| b.requests).sum();
    let after: u64 = timeline[4..].iter().map(|b| b.requests).sum();
    let within_after: u64 = timeline[4..].iter().map(|b| b.within_slo).sum();
    assert_eq!(report.requests_simulated, all);
    assert_eq!(report.requests_measured, after);
    assert_eq!(report.services[0].within_slo, within_after);
    assert!((report.requests_measured as f64 / 6000.0 - 1.0).abs() < 0.05, "{}", report.requests_measured);
    assert_eq!(report.segments[0].requests, report.requests_measured);
    assert!((report.services[0].goodput_rps - within_after as f64 / 6.0).abs() < 1e-9);
}

#[test]
fn confidence_intervals_cover_a_long_run() {
    // Attainment of a 4 ms SLO on M/D/1 at 80% load with 1 ms service.
    let system = single(SegmentShape::full_batch_only(1, 1, 1.0).unwrap(), 800.0, 4.0);
    let truth = simulate(&system, &SimulationOptions { seed: 7, ..options(5_000.0, 10.0) }).unwrap();
    let truth = truth.services[0].measures.as_ref().unwrap().clone();
    let batched = simulate(&system, &options(100.0, 5.0)).unwrap();
    let replicated = simulate(&system, &SimulationOptions { replications: 5, ..options(40.0, 5.0) }).unwrap();
    for report in [&batched, &replicated] {
        let measures = report.services[0].measures.as_ref().unwrap();
        let attainment = measures.attainment_ci.unwrap();
        assert!(attainment.low <= measures.attainment && measures.attainment <= attainment.high);
        assert!(
            attainment.low <= truth.attainment && truth.attainment <= attainment.high,
            "{attainment:?} vs {}",
            truth.attainment
        );
        assert!(attainment.high - attainment.low < 0.05, "{attainment:?}");
        let p99 = measures.p99_ci_ms.unwrap();
        assert!(p99.low <= truth.p99_ms && truth.p99_ms <= p99.high, "{p99:?} vs {}", truth.p99_ms);
    }
    assert_eq!(replicated.replications, 5);
    assert!((replicated.requests_measured as f64 / (5.0 * 35.0 * 800.0) - 1.0).abs() < 0.02);
}

#[test]
fn bad_options_are_refused_naming_the_option() {
    let system = single(SegmentShape::full_batch_only(1, 1, 1.0).unwrap(), 10.0, 10.0);
    let error = |options: SimulationOptions| simulate(&system, &options).unwrap_err().to_string();
    assert!(error(options(10.0, 10.0)).starts_with("warmup_s:"));
    assert!(error(options(-1.0, 0.0)).starts_with("seconds:"));
    assert!(error(SimulationOptions { replications: 0, ..options(10.0, 1.0) }).starts_with("replications:"));
    assert!(error(SimulationOptions { max_queue_delay_ms: f64::NAN, ..options(10.0, 1.0) })
        .starts_with("max_queue_delay_ms:"));
    assert!(error(SimulationOptions { timeline_bucket_s: Some(1e-6), ..options(10.0, 1.0) })
        .starts_with("timeline_bucket_s:"));
    // 100,000 buckets are allowed for one service, not for each of twelve.
    let fine = SimulationOptions { timeline_bucket_s: Some(1e-4), ..options(10.0, 1.0) };
    assert!(simulate(&system, &fine).is_ok());
    let many = simulate(&parva_scale(0.5), &fine).unwrap_err().to_string();
    assert!(many.starts_with("timeline_bucket_s:") && many.contains("each of 12 services"), "{many}");
    let onoff = ArrivalModel::OnOff { burst: 9.0, mean_on_s: 1.0, mean_off_s: 1.0 };
    assert!(error(SimulationOptions { arrivals: onoff, ..options(10.0, 1.0) }).starts_with("burst:"));
}

#[test]
fn the_cdf_rises_to_the_largest_latency() {
    let report = simulate(&parva_scale(0.7), &options(3.0, 0.5)).unwrap();
    for outcome in &report.services {
        let measures = outcome.measures.as_ref().unwrap();
        assert_eq!(measures.cdf.len(), 102);
        assert!(measures.cdf.windows(2).all(|p| p[0].latency_ms <= p[1].latency_ms && p[0].share < p[1].share));
        assert_eq!(measures.cdf.last().unwrap().latency_ms, measures.max_ms);
        assert!(measures.p50_ms <= measures.p95_ms && measures.p95_ms <= measures.p99_ms);
        assert!(measures.p99_ms <= measures.p999_ms && measures.p999_ms <= measures.max_ms);
    }
    let worst = report.worst.unwrap();
    let least = report.services.iter().filter_map(|s| s.measures.as_ref()).map(|m| m.attainment).fold(1.0, f64::min);
    assert_eq!(worst.attainment, least);
}

#[test]
fn spread_batch_times_meet_what_the_model_promises_with_its_allowance() {
    // Batches whose p99 runs 8% above their mean (log-normal): served at the
    // analytic capacity, which charges every request that 8% of a full
    // batch, they still keep 99% within the SLO (99.18% on the run this test
    // was written with; 98.99% at the capacity of batches that do not spread).
    let plain = SegmentShape::new(1, vec![(1, 4.0), (2, 5.0), (4, 7.0), (8, 12.0)]).unwrap();
    let spread = plain.clone().with_p99_ratio(1.08).unwrap();
    let slo_ms = 40.0;
    let capacity = tessera_serving::analytic::capacity_rps(&spread, 99.0, slo_ms).unwrap();
    let naive = tessera_serving::analytic::capacity_rps(&plain, 99.0, slo_ms).unwrap();
    assert!(capacity < naive, "{capacity} vs {naive}");
    let report = simulate(&single(spread.clone(), capacity, slo_ms), &options(3_000.0, 10.0)).unwrap();
    let measures = report.services[0].measures.as_ref().unwrap();
    assert!(measures.attainment >= 0.99, "at the spread's capacity {capacity:.1} req/s: {}", measures.attainment);
    // The draws have the mean latency: the segment is as busy as without spread.
    let deterministic = simulate(&single(plain, capacity, slo_ms), &options(3_000.0, 10.0)).unwrap();
    let (busy, busy_plain) = (report.segments[0].utilisation, deterministic.segments[0].utilisation);
    assert!((busy / busy_plain - 1.0).abs() < 0.01, "utilisation {busy} vs {busy_plain}");
    let lone = simulate(&single(spread, 0.1, slo_ms), &options(20_000.0, 0.0)).unwrap();
    let p99_ms = lone.services[0].measures.as_ref().unwrap().p99_ms;
    assert!((p99_ms / (4.0 * 1.08) - 1.0).abs() < 0.02, "a lone request's p99 {p99_ms} ms");
}
