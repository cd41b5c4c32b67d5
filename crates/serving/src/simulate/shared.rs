//! One shared instance in one replication: its members' arrivals, each in
//! the member's own queue, served by one executor that runs one batch at a
//! time from the queue whose oldest request is oldest (the serialized
//! discipline).
//!
//! Each member's arrivals are the stream its service would have alone
//! (same seed and label), so a service's traffic does not depend on whom
//! it shares with.

use std::collections::VecDeque;

use super::queue::Sink;
use super::service::{Recorder, Report, SegmentTally, ServiceRun, MAX_WAITING, REPLICATION_LABEL};
use super::SimulationOptions;
use crate::error::ServingError;
use crate::sampling::stream_seed;
use crate::stream::ArrivalStream;
use crate::system::ServingSystem;

/// One member while the instance runs.
struct MemberState {
    /// Its segment in the system.
    segment: usize,
    arrivals: ArrivalStream,
    /// Its next arrival, s (infinite once past the run).
    next_s: f64,
    queue: VecDeque<f64>,
    max_batch: usize,
    recorder: Recorder,
    tally: SegmentTally,
    simulated: u64,
}

/// Runs the shared instance of `group` (segments of `system`, one per
/// member) in replication `replication` with `units` units: one
/// [`ServiceRun`] per member, in `group`'s order (`counting_only`: its
/// recorders only count).
pub(super) fn run_shared(
    system: &ServingSystem,
    options: &SimulationOptions,
    (group, replication): (&[usize], u32),
    units: usize,
    counting_only: bool,
) -> Result<Vec<ServiceRun>, ServingError> {
    let seed = stream_seed(options.seed, u64::from(replication), REPLICATION_LABEL);
    let mut members = group
        .iter()
        .map(|&segment| {
            let service = system.segments()[segment].service;
            let served = &system.services()[service];
            let mut arrivals = options.arrivals.stream(served.rate_rps, seed, service as u64)?;
            let next_s = arrivals.next_s();
            Ok(MemberState {
                segment,
                arrivals,
                next_s,
                queue: VecDeque::new(),
                max_batch: system.segments()[segment].shape.max_batch() as usize,
                recorder: Recorder::new(options, served.latency_slo_ms, units, counting_only),
                tally: SegmentTally::default(),
                simulated: 0,
            })
        })
        .collect::<Result<Vec<MemberState>, ServingError>>()?;
    let (mut free_at_s, mut waiting) = (0.0_f64, 0usize);
    loop {
        let (next, arrival_s) = members
            .iter()
            .enumerate()
            .map(|(k, member)| (k, member.next_s))
            .filter(|(_, at)| *at < options.seconds)
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .unwrap_or((usize::MAX, f64::INFINITY));
        // Every batch that starts before this arrival runs first.
        while let Some((k, head_s)) = oldest_head(&members) {
            let start_s = free_at_s.max(head_s);
            if start_s > arrival_s {
                break;
            }
            free_at_s = run_batch(system, &mut members[k], start_s, &mut waiting);
        }
        if next == usize::MAX {
            break;
        }
        let member = &mut members[next];
        if arrival_s >= options.warmup_s {
            member.tally.requests += 1;
        }
        member.simulated += 1;
        member.queue.push_back(arrival_s);
        member.next_s = member.arrivals.next_s();
        waiting += 1;
        if waiting > MAX_WAITING {
            let label = &system.segments()[member.segment].label;
            return Err(ServingError::QueueLimit {
                segment: label.clone(),
                service: system.services()[system.segments()[member.segment].service].name.clone(),
                offered_load: group.iter().map(|&segment| system.offered_load(segment)).sum(),
                at_s: arrival_s,
                limit: MAX_WAITING,
            });
        }
    }
    Ok(members
        .into_iter()
        .map(|member| member.recorder.into_run(member.simulated, vec![(member.segment, member.tally)]))
        .collect())
}

/// The member whose oldest waiting request is oldest, and that request's
/// arrival, s.
fn oldest_head(members: &[MemberState]) -> Option<(usize, f64)> {
    members
        .iter()
        .enumerate()
        .filter_map(|(k, member)| member.queue.front().map(|&head_s| (k, head_s)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
}

/// Runs one batch of `member` from `start_s` (up to its largest batch of
/// what waits), reporting its requests; when the executor is free again,
/// s.
fn run_batch(system: &ServingSystem, member: &mut MemberState, start_s: f64, waiting: &mut usize) -> f64 {
    let shape = &system.segments()[member.segment].shape;
    let requests = member.queue.len().min(member.max_batch);
    let run_ms = shape.latency_ms(requests as u32);
    let end_s = start_s + run_ms / 1000.0;
    let mut report = Report { recorder: &mut member.recorder, tally: &mut member.tally };
    for arrival_s in member.queue.drain(..requests) {
        report.request(arrival_s, start_s - arrival_s, run_ms);
    }
    report.batch(start_s, end_s, requests);
    *waiting -= requests;
    end_s
}

#[cfg(test)]
mod tests {
    use crate::serialized::{member_figures, Member, MemberLoad};
    use crate::system::{ServedSegment, ServedService, ServingSystem};
    use crate::{simulate, SegmentShape, SimulationOptions};

    /// Two members on one executor (densenet169 at 43 req/s and ResNet-50
    /// at 6, batch 1, as ParvaGPU profiles them on a 1g slice).
    fn pair() -> (ServingSystem, Vec<Member>) {
        let members = [(43.0, 17.0833, 216.5), (6.0, 5.0823, 204.5)];
        let services = members
            .iter()
            .enumerate()
            .map(|(k, &(rate_rps, _, slo_ms))| ServedService {
                name: format!("m{k}"),
                rate_rps,
                latency_slo_ms: slo_ms,
                percentile: 99.0,
            })
            .collect();
        let segments = members
            .iter()
            .enumerate()
            .map(|(k, &(rate_rps, busy_ms, _))| ServedSegment {
                service: k,
                shape: SegmentShape::full_batch_only(1, 1, busy_ms).unwrap(),
                weight: rate_rps,
                label: format!("shared m{k}"),
            })
            .collect();
        let system = ServingSystem::new(services, segments).unwrap().with_shared(vec![vec![0, 1]]).unwrap();
        let judged = members
            .iter()
            .map(|&(rate_rps, busy_ms, slo_ms)| Member {
                load: MemberLoad { rate_rps, busy_ms },
                slo_ms,
                percentile: 99.0,
            })
            .collect();
        (system, judged)
    }

    #[test]
    fn a_shared_instance_simulates_as_its_model_predicts() {
        let (system, judged) = pair();
        let options = SimulationOptions { seconds: 20_000.0, warmup_s: 100.0, slowdown: 0.05, ..Default::default() };
        let report = simulate(&system, &options).unwrap();
        for (k, outcome) in report.services.iter().enumerate() {
            let predicted = member_figures(&judged, k, 0.05).unwrap().attainment;
            let simulated = outcome.within_slo as f64 / outcome.requests as f64;
            assert!((simulated - predicted).abs() < 0.002, "member {k}: simulated {simulated}, predicted {predicted}");
        }
    }
}
