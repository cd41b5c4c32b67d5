//! Queues carried from piece to piece, as a fluid.
//!
//! A sampled window starts from an empty queue, which is right for a
//! service its segments keep up with: its queue forgets the piece before
//! within a few batches. A service offered more than its segments can
//! serve is another matter: its queue grows for as long as the overload
//! lasts, and a fresh window every minute would start each minute of an
//! hour-long overload as if the queue had just emptied.
//!
//! So each service alone on its segments (no shared instance) carries its
//! backlog, the requests queued beyond what its segments serve at once,
//! from one piece to the next: it grows at the rate offered beyond the
//! segments' full-batch throughput (at the day's slowdown) and drains at
//! the throughput left over, never below empty. A request that arrives
//! while the backlog would take longer to serve than its SLO leaves after
//! its own slowest full batch is late. The first piece of an overload,
//! from an empty queue, is measured as any other; the share of a later
//! piece's requests the backlog makes late is counted late, and the rest
//! are measured as the piece is. A piece wholly late is not measured at
//! all. The fluid sees a service whole: a service past one segment's
//! throughput but within its segments' together is measured by its
//! window, as before.

use tessera_serving::ServingSystem;

/// How a carried service's queue drains in one span.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Drain {
    /// The service's segments' full-batch throughput together, req/s.
    pub throughput_rps: f64,
    /// The backlog (requests) above which an arriving request misses its
    /// SLO: what the segments serve in the SLO less the slowest full batch.
    pub late_above: f64,
}

impl Drain {
    /// A service served at `throughput_rps` whose slowest full batch takes
    /// `batch_ms`, against a latency SLO of `latency_slo_ms`.
    pub fn new(throughput_rps: f64, batch_ms: f64, latency_slo_ms: f64) -> Drain {
        let slack_s = ((latency_slo_ms - batch_ms) / 1000.0).max(0.0);
        Drain { throughput_rps, late_above: throughput_rps * slack_s }
    }
}

/// Every service's carried backlog, requests.
#[derive(Debug, Clone)]
pub(super) struct Backlogs {
    queued: Vec<f64>,
}

impl Backlogs {
    /// No service with anything queued.
    pub fn new(services: usize) -> Backlogs {
        Backlogs { queued: vec![0.0; services] }
    }

    /// Carries `service`'s backlog over a piece of `length_s` at
    /// `rate_rps`, drained as `drain` says (`None`: not carried, and
    /// whatever was queued is dropped), and answers the share of the
    /// piece's requests its backlog makes late.
    pub fn advance(&mut self, service: usize, rate_rps: f64, length_s: f64, drain: Option<Drain>) -> f64 {
        let queued = &mut self.queued[service];
        let Some(Drain { throughput_rps, late_above }) = drain else {
            *queued = 0.0;
            return 0.0;
        };
        if length_s <= 0.0 {
            return 0.0;
        }
        let before = *queued;
        let growth_rps = rate_rps - throughput_rps;
        *queued = (before + growth_rps * length_s).max(0.0);
        // Seconds of the piece during which the backlog is above the line.
        let late_s = if before == 0.0 {
            // From empty: the piece's own window measures it.
            0.0
        } else if growth_rps > 0.0 {
            length_s - ((late_above - before) / growth_rps).clamp(0.0, length_s)
        } else if before > late_above {
            match growth_rps < 0.0 {
                true => ((before - late_above) / -growth_rps).min(length_s),
                false => length_s,
            }
        } else {
            0.0
        };
        late_s / length_s
    }
}

/// How each service of `system` drains its carried backlog, its GPUs
/// `slowdown` slower than profiled, by the planner's index (`indices`:
/// each of `system`'s services', of `services` in all): a service measured
/// alone (a group of one, on no shared instance) drains at its segments'
/// full-batch throughput together; any other is not carried.
pub(super) fn drains(
    system: &ServingSystem,
    (indices, services): (&[usize], usize),
    groups: &[Vec<usize>],
    slowdown: f64,
) -> Vec<Option<Drain>> {
    let factor = 1.0 + slowdown;
    let mut shared = vec![false; system.services().len()];
    for &segment in system.shared().iter().flatten() {
        shared[system.segments()[segment].service] = true;
    }
    let mut drains = vec![None; services];
    for group in groups {
        let [service] = group[..] else { continue };
        if shared[service] {
            continue;
        }
        let shapes = || system.segments_of(service).iter().map(|&k| &system.segments()[k].shape);
        let throughput_rps: f64 = shapes().map(|shape| shape.throughput_rps() / factor).sum();
        let batch_ms = shapes().map(|shape| shape.latency_ms(shape.max_batch()) * factor).fold(0.0, f64::max);
        let slo_ms = system.services()[service].latency_slo_ms;
        drains[indices[service]] = Some(Drain::new(throughput_rps, batch_ms, slo_ms));
    }
    drains
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_overload_grows_a_backlog_that_makes_later_pieces_late_until_it_drains() {
        // 100 req/s served, a second of slack: late above 100 queued.
        let drain = Drain::new(100.0, 50.0, 1050.0);
        assert_eq!(drain.late_above, 100.0);
        let mut backlogs = Backlogs::new(2);
        // Within throughput from empty: nothing carried.
        assert_eq!(backlogs.advance(0, 90.0, 60.0, Some(drain)), 0.0);
        // The first minute at 110 req/s is its window's to measure; it
        // leaves 600 queued.
        assert_eq!(backlogs.advance(0, 110.0, 60.0, Some(drain)), 0.0);
        // The next minute is late throughout.
        assert_eq!(backlogs.advance(0, 110.0, 60.0, Some(drain)), 1.0);
        // 1,200 queued drain at 50 req/s: above the line for 22 s, empty
        // after 24 s.
        let late = backlogs.advance(0, 50.0, 30.0, Some(drain));
        assert!((late - 22.0 / 30.0).abs() < 1e-12, "{late}");
        assert_eq!(backlogs.advance(0, 50.0, 60.0, Some(drain)), 0.0);
        // Drained to empty, the next overload starts afresh.
        assert_eq!(backlogs.advance(0, 200.0, 1.0, Some(drain)), 0.0);
        // 100 queued grow by 100 a second: late after 0 s.
        assert_eq!(backlogs.advance(0, 200.0, 2.0, Some(drain)), 1.0);
        // Partly: 50 queued, growing 10 a second, cross 100 after 5 s.
        let mut partly = Backlogs { queued: vec![50.0] };
        let late = partly.advance(0, 110.0, 20.0, Some(drain));
        assert!((late - 0.75).abs() < 1e-12, "{late}");
        // A service not carried drops what it had.
        assert_eq!(backlogs.advance(0, 200.0, 10.0, None), 0.0);
        assert_eq!(backlogs.advance(0, 100.0, 10.0, Some(drain)), 0.0);
        // Other services are untouched.
        assert_eq!(backlogs.queued[1], 0.0);
    }

    #[test]
    fn an_slo_shorter_than_a_batch_leaves_no_slack() {
        let drain = Drain::new(100.0, 80.0, 50.0);
        assert_eq!(drain.late_above, 0.0);
        let mut backlogs = Backlogs { queued: vec![1.0] };
        // At exactly the throughput a standing backlog stays late.
        assert_eq!(backlogs.advance(0, 100.0, 10.0, Some(drain)), 1.0);
    }
}
