//! One service in one replication: its arrivals, routed to its segments
//! and their processes, each request's latency counted where it belongs.
//!
//! A service with segments of its own shares no queue or process with
//! another, so each is run on its own, start to end, in one pass over its
//! arrivals (the members of a shared instance run together: `shared`).

use std::collections::VecDeque;

use tessera_core::rng::SplitMix64;

use super::queue::{BatchQueue, Batching, Sink};
use super::SimulationOptions;
use crate::discipline::Discipline;
use crate::error::ServingError;
use crate::histogram::Histogram;
use crate::sampling::{index_below, stream_seed, Alias};
use crate::system::ServingSystem;

/// The most requests a service's queues may hold at once before the run
/// stops (8 bytes each: 80 MB).
pub const MAX_WAITING: usize = 10_000_000;

/// Labels that keep a run's streams apart: a replication's seed, a
/// service's routing draws and its queues' run-time draws (its arrivals
/// use `stream`'s own label).
pub(super) const REPLICATION_LABEL: u64 = 1;
const ROUTING_LABEL: u64 = 2;
const SPREAD_LABEL: u64 = 3;

/// What one service's run measured.
#[derive(Debug, Clone)]
pub(super) struct ServiceRun {
    /// Arrivals simulated, warm-up included.
    pub(super) simulated: u64,
    /// The measured requests by unit of the confidence intervals (batches
    /// of the measured time, or this whole replication).
    pub(super) units: Vec<Unit>,
    /// `[requests, within SLO]` per timeline bucket, warm-up included.
    pub(super) timeline: Vec<[u64; 2]>,
    /// `[requests, within SLO]` per whole measurement window after the
    /// warm-up (none unless windows are asked for).
    pub(super) windows: Vec<[u64; 2]>,
    /// Per segment of the service, in the system's order.
    pub(super) segments: Vec<(usize, SegmentTally)>,
    /// The measured requests and those within the SLO, all units.
    pub(super) counted: Counted,
}

/// Measured requests, and those within the SLO.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Counted {
    pub(super) requests: u64,
    pub(super) within_slo: u64,
}

/// The measured requests of one unit.
#[derive(Debug, Clone, Default)]
pub(super) struct Unit {
    pub(super) latencies: Histogram,
    pub(super) within_slo: u64,
}

/// What one segment did in the measured window.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct SegmentTally {
    /// Measured requests routed to it.
    pub(super) requests: u64,
    /// Process-seconds busy within the measured window.
    pub(super) busy_s: f64,
    /// Batches started after the warm-up, and the requests in them.
    pub(super) batches: u64,
    pub(super) batched: u64,
}

impl SegmentTally {
    /// Adds another replication's tally.
    pub(super) fn add(&mut self, other: &SegmentTally) {
        self.requests += other.requests;
        self.busy_s += other.busy_s;
        self.batches += other.batches;
        self.batched += other.batched;
    }
}

/// Counts each request into its unit and timeline bucket (or, counting
/// only, into [`Counted`] alone).
#[derive(Debug)]
pub(super) struct Recorder {
    /// Only counts: no latencies, units, timeline or windows.
    counting_only: bool,
    counted: Counted,
    warmup_s: f64,
    end_s: f64,
    slo_ms: f64,
    /// Units per second of measured time.
    unit_scale: f64,
    units: Vec<Unit>,
    buckets_per_s: f64,
    timeline: Vec<[u64; 2]>,
    windows_per_s: f64,
    windows: Vec<[u64; 2]>,
}

impl Recorder {
    /// An empty recorder for a service of `slo_ms` in a run of `options`
    /// with `units` units; `counting_only`: it only counts the measured
    /// requests and those within the SLO.
    pub(super) fn new(options: &SimulationOptions, slo_ms: f64, units: usize, counting_only: bool) -> Recorder {
        Recorder {
            counting_only,
            counted: Counted::default(),
            warmup_s: options.warmup_s,
            end_s: options.seconds,
            slo_ms,
            unit_scale: units as f64 / (options.seconds - options.warmup_s),
            units: vec![Unit::default(); units],
            buckets_per_s: options.timeline_bucket_s.map_or(0.0, |bucket_s| 1.0 / bucket_s),
            timeline: vec![[0, 0]; options.timeline_buckets()],
            windows_per_s: options.window_s.map_or(0.0, |window_s| 1.0 / window_s),
            windows: vec![[0, 0]; options.whole_windows()],
        }
    }

    /// The run of a service this recorder counted, with `simulated`
    /// arrivals and its `segments`' tallies.
    pub(super) fn into_run(self, simulated: u64, segments: Vec<(usize, SegmentTally)>) -> ServiceRun {
        let (units, timeline, windows, counted) = (self.units, self.timeline, self.windows, self.counted);
        ServiceRun { simulated, units, timeline, windows, segments, counted }
    }

    /// Counts the requests of `arrivals_s` measured, none within the SLO
    /// (requests surely late that were never run).
    fn late(&mut self, arrivals_s: &VecDeque<f64>) {
        self.counted.requests +=
            (arrivals_s.len() - arrivals_s.partition_point(|&arrival_s| arrival_s < self.warmup_s)) as u64;
    }
}

/// A queue's reports, into the service's recorder and its segment's tally.
pub(super) struct Report<'a> {
    pub(super) recorder: &'a mut Recorder,
    pub(super) tally: &'a mut SegmentTally,
}

impl Sink for Report<'_> {
    #[inline]
    fn request(&mut self, arrival_s: f64, wait_s: f64, run_ms: f64) {
        let recorder = &mut *self.recorder;
        // Wait plus run: a request that never waits has the run's latency exactly.
        let latency_ms = wait_s * 1000.0 + run_ms;
        let within = latency_ms <= recorder.slo_ms;
        if arrival_s >= recorder.warmup_s {
            recorder.counted.requests += 1;
            recorder.counted.within_slo += u64::from(within);
        }
        if recorder.counting_only {
            return;
        }
        if let Some(last) = recorder.timeline.len().checked_sub(1) {
            let bucket = ((arrival_s * recorder.buckets_per_s) as usize).min(last);
            recorder.timeline[bucket][0] += 1;
            recorder.timeline[bucket][1] += u64::from(within);
        }
        if arrival_s < recorder.warmup_s {
            return;
        }
        let window = ((arrival_s - recorder.warmup_s) * recorder.windows_per_s) as usize;
        if let Some(counts) = recorder.windows.get_mut(window) {
            counts[0] += 1;
            counts[1] += u64::from(within);
        }
        let unit = (((arrival_s - recorder.warmup_s) * recorder.unit_scale) as usize).min(recorder.units.len() - 1);
        let unit = &mut recorder.units[unit];
        unit.latencies.record(latency_ms);
        unit.within_slo += u64::from(within);
    }

    #[inline]
    fn batch(&mut self, start_s: f64, end_s: f64, requests: usize) {
        let (warmup_s, run_end_s) = (self.recorder.warmup_s, self.recorder.end_s);
        self.tally.busy_s += (end_s.min(run_end_s) - start_s.max(warmup_s)).max(0.0);
        if start_s >= warmup_s {
            self.tally.batches += 1;
            self.tally.batched += requests as u64;
        }
    }
}

/// One segment while it runs.
struct SegmentState {
    /// Its index in the system.
    index: usize,
    batching: Batching,
    /// One queue per process, or one shared by all.
    queues: Vec<BatchQueue>,
    next_in_turn: usize,
    tally: SegmentTally,
}

/// Runs `service` of `system` in replication `replication`, with `units`
/// units for the confidence intervals.
///
/// `counting_only`: only the measured requests and those within the SLO
/// are counted, and a request that surely misses its SLO whatever
/// arrives next ([`BatchQueue::surely_late`]) joins its queue without
/// running it; when every request after it was surely late too, it is
/// counted late and never run. The counts are those of a full run; the
/// queues hold more requests at once (and [`MAX_WAITING`] counts them).
pub(super) fn run_service(
    system: &ServingSystem,
    options: &SimulationOptions,
    (service, replication): (usize, u32),
    units: usize,
    counting_only: bool,
) -> Result<ServiceRun, ServingError> {
    let served = &system.services()[service];
    let seed = stream_seed(options.seed, u64::from(replication), REPLICATION_LABEL);
    let mut arrivals = options.arrivals.stream(served.rate_rps, seed, service as u64)?;
    let mut rng = SplitMix64::new(stream_seed(seed, service as u64, ROUTING_LABEL));
    let delay_s = options.max_queue_delay_ms / 1000.0;
    let mut segments: Vec<SegmentState> = system
        .segments()
        .iter()
        .enumerate()
        .filter(|(_, segment)| segment.service == service)
        .map(|(index, segment)| {
            let procs = segment.shape.procs() as usize;
            let segment_seed = stream_seed(seed, index as u64, SPREAD_LABEL);
            let queue_seed = |queue: usize| stream_seed(segment_seed, queue as u64, SPREAD_LABEL);
            let queues = match options.discipline {
                Discipline::SharedQueue => vec![BatchQueue::new(procs, queue_seed(0))],
                _ => (0..procs).map(|queue| BatchQueue::new(1, queue_seed(queue))).collect(),
            };
            SegmentState {
                index,
                batching: Batching::new(&segment.shape, delay_s),
                queues,
                next_in_turn: 0,
                tally: SegmentTally::default(),
            }
        })
        .collect();
    let weights: Vec<f64> = segments.iter().map(|s| system.segments()[s.index].weight).collect();
    let router = Alias::new(&weights);
    let mut recorder = Recorder::new(options, served.latency_slo_ms, units, counting_only);
    // Join the shortest queue reads every queue's length: none is left behind.
    let skip_late = counting_only && options.discipline != Discipline::JoinShortestQueue;
    let (mut simulated, mut waiting) = (0u64, 0usize);
    loop {
        let arrival_s = arrivals.next_s();
        if arrival_s >= options.seconds {
            break;
        }
        simulated += 1;
        let segment = &mut segments[if router.len() == 1 { 0 } else { router.pick(&mut rng) }];
        if arrival_s >= options.warmup_s {
            segment.tally.requests += 1;
        }
        let mut report = Report { recorder: &mut recorder, tally: &mut segment.tally };
        let queues = segment.queues.len();
        let chosen = match options.discipline {
            Discipline::SharedQueue => 0,
            _ if queues == 1 => 0,
            Discipline::RandomPerProcess => index_below(&mut rng, queues),
            Discipline::RoundRobin => {
                let chosen = segment.next_in_turn;
                segment.next_in_turn = (chosen + 1) % queues;
                chosen
            }
            Discipline::JoinShortestQueue => {
                let mut best = (usize::MAX, 0);
                for (index, queue) in segment.queues.iter_mut().enumerate() {
                    waiting -= queue.advance(arrival_s, &segment.batching, &mut report);
                    best = best.min((queue.in_system(arrival_s), index));
                }
                best.1
            }
        };
        let queue = &mut segment.queues[chosen];
        if skip_late && queue.surely_late(arrival_s, served.latency_slo_ms, &segment.batching) {
            queue.push_late(arrival_s);
        } else {
            waiting -= queue.advance(arrival_s, &segment.batching, &mut report);
            queue.push(arrival_s);
        }
        waiting += 1;
        if waiting > MAX_WAITING {
            let label = &system.segments()[segment.index].label;
            return Err(ServingError::QueueLimit {
                segment: label.clone(),
                service: served.name.clone(),
                offered_load: system.offered_load(segment.index),
                at_s: arrival_s,
                limit: MAX_WAITING,
            });
        }
    }
    // No more arrivals: every request still waiting runs to completion,
    // but those surely late that no other followed.
    for segment in &mut segments {
        let mut report = Report { recorder: &mut recorder, tally: &mut segment.tally };
        for queue in &mut segment.queues {
            let unrun = queue.finish(&segment.batching, &mut report);
            report.recorder.late(unrun);
        }
    }
    Ok(recorder.into_run(simulated, segments.into_iter().map(|segment| (segment.index, segment.tally)).collect()))
}
