//! One FIFO queue of requests in front of one or more identical processes
//! that run dynamic batches: the simulator's inner loop.
//!
//! The queue is fed arrivals in time order and runs *lazily*: a batch is
//! started only once every arrival before its start is known, so a queue
//! whose arrivals come from an independent stream (a process behind random
//! or round-robin routing) can be advanced on its own, arrival by arrival,
//! and a run costs a few operations per request whatever the number of
//! queues.

use std::collections::VecDeque;

use tessera_core::rng::SplitMix64;

use crate::sampling::Normal;
use crate::shape::SegmentShape;

/// The standard normal's 99th percentile.
const Z_99: f64 = 2.326_347_874_040_841;

/// How one segment's processes batch: latencies per batch size and the
/// batching delay. Shared by all the segment's queues.
#[derive(Debug, Clone)]
pub(super) struct Batching {
    /// `(batch, latency_ms, latency_s)`, sorted by batch, the last the
    /// largest batch.
    latencies: Vec<(u32, f64, f64)>,
    max_batch: usize,
    /// How long an idle process waits for its batch to fill, s.
    delay_s: f64,
    /// The log-normal spread of a batch's run time around its latency
    /// (the `sigma` of a factor of mean 1); 0: every batch runs exactly
    /// its latency.
    spread_sigma: f64,
    /// The most requests per second one process can start: the largest
    /// batch size over its latency.
    peak_rps: f64,
    /// The shortest batch latency, ms.
    shortest_ms: f64,
}

impl Batching {
    /// The batching of `shape` with a queueing delay of `delay_s` seconds.
    /// A shape whose batches spread ([`SegmentShape::p99_ratio`] `r > 1`)
    /// runs each batch its latency times a log-normal factor of mean 1
    /// whose 99th percentile is `r`.
    pub(super) fn new(shape: &SegmentShape, delay_s: f64) -> Batching {
        let latencies = shape.batch_latencies().iter().map(|&(batch, ms)| (batch, ms, ms / 1000.0)).collect::<Vec<_>>();
        // exp(Z_99 sigma - sigma^2 / 2) = r, the smaller root (at most Z_99).
        let discriminant = (Z_99 * Z_99 - 2.0 * shape.p99_ratio().ln()).max(0.0);
        let spread_sigma = Z_99 - discriminant.sqrt();
        let peak_rps = latencies.iter().map(|&(batch, _, s)| f64::from(batch) / s).fold(0.0, f64::max);
        let shortest_ms = latencies.iter().map(|&(_, ms, _)| ms).fold(f64::INFINITY, f64::min);
        Batching { latencies, max_batch: shape.max_batch() as usize, delay_s, spread_sigma, peak_rps, shortest_ms }
    }

    /// The latency (ms, s) of a batch of `k` requests: that of the smallest
    /// profiled batch holding them (as [`SegmentShape::latency_ms`]).
    #[inline]
    fn latency(&self, k: usize) -> (f64, f64) {
        let index = self.latencies.partition_point(|&(batch, _, _)| (batch as usize) < k);
        let (_, ms, s) = self.latencies[index.min(self.latencies.len() - 1)];
        (ms, s)
    }
}

/// Where a queue reports what it does: each request when its batch starts
/// and each batch.
pub(super) trait Sink {
    /// A request that arrived at `arrival_s`, waited `wait_s` and ran in a
    /// batch of `run_ms`.
    fn request(&mut self, arrival_s: f64, wait_s: f64, run_ms: f64);
    /// A batch of `requests` from `start_s` to `end_s`.
    fn batch(&mut self, start_s: f64, end_s: f64, requests: usize);
}

/// One process: when it is next free and how big its current (or last)
/// batch is.
#[derive(Debug, Clone, Copy)]
struct Process {
    free_at_s: f64,
    batch: usize,
}

/// A FIFO queue of waiting requests (their arrival instants: a ring
/// buffer) and the processes that take batches from it, with its own
/// stream of draws for batches whose run time spreads.
#[derive(Debug, Clone)]
pub(super) struct BatchQueue {
    waiting: VecDeque<f64>,
    processes: Vec<Process>,
    rng: SplitMix64,
    normal: Normal,
    /// The arrival of the first of the requests last added by
    /// [`BatchQueue::push_late`], one after another (infinite when the
    /// last request was added by [`BatchQueue::push`]).
    late_from_s: f64,
    /// Requests arriving before this are surely late as the queue stands
    /// (see [`BatchQueue::surely_late`]); minus infinity once it advances.
    late_before_s: f64,
}

impl BatchQueue {
    /// An empty queue served by `processes` processes, all free at 0,
    /// drawing spread run times from `seed`.
    pub(super) fn new(processes: usize, seed: u64) -> BatchQueue {
        BatchQueue {
            waiting: VecDeque::with_capacity(64),
            processes: vec![Process { free_at_s: 0.0, batch: 0 }; processes],
            rng: SplitMix64::new(seed),
            normal: Normal::default(),
            late_from_s: f64::INFINITY,
            late_before_s: f64::NEG_INFINITY,
        }
    }

    /// Whether a request arriving at `arrival_s`, behind every request
    /// waiting, surely finishes later than `slo_ms` after it, whatever
    /// arrives next and however the queue was advanced (lazily) so far.
    ///
    /// From the state last advanced to, a process free at `f` starts at
    /// most `B + peak (s - f)` requests by time `s` (every batch before its
    /// last has ended by then, and none carries more than `peak` requests
    /// per second of its run), so the request, `n` waiting ahead of it on
    /// `p` processes, starts no earlier than `f_min + (n + 1 - p B) / (p
    /// peak)` and runs at least the shortest batch. Batches whose run time
    /// spreads have no shortest run: never surely late.
    ///
    /// The bound is kept until the queue advances: more requests waiting
    /// only start later, so a request arriving before the last bound's
    /// latest late arrival is late too, with no new bound to take.
    pub(super) fn surely_late(&mut self, arrival_s: f64, slo_ms: f64, batching: &Batching) -> bool {
        if arrival_s < self.late_before_s {
            return true;
        }
        if batching.spread_sigma > 0.0 {
            return false;
        }
        let processes = self.processes.len() as f64;
        let startable = self.waiting.len() as f64 + 1.0 - processes * batching.max_batch as f64;
        if startable <= 0.0 {
            return false;
        }
        let free_s = self.processes.iter().map(|process| process.free_at_s).fold(f64::INFINITY, f64::min);
        let start_s = free_s + startable / (processes * batching.peak_rps);
        // Late when (start - arrival) + shortest > slo, with a microsecond
        // spare for rounding in the simulated starts.
        self.late_before_s = start_s + (batching.shortest_ms - slo_ms - 1e-3) / 1000.0;
        arrival_s < self.late_before_s
    }

    /// Adds a request arriving at `arrival_s` that [`BatchQueue::surely_late`]
    /// found late, without advancing the queue: it is run when a later
    /// request that is not surely late advances the queue, and not at all
    /// when every request after it was surely late too (see
    /// [`BatchQueue::finish`]).
    #[inline]
    pub(super) fn push_late(&mut self, arrival_s: f64) {
        self.late_from_s = self.late_from_s.min(arrival_s);
        self.waiting.push_back(arrival_s);
    }

    /// Runs every waiting request but the last run added by
    /// [`BatchQueue::push_late`], which are surely late: returns those, the
    /// requests that were never run (their arrivals, in order).
    pub(super) fn finish(&mut self, batching: &Batching, sink: &mut impl Sink) -> &VecDeque<f64> {
        while self.waiting.front().is_some_and(|&oldest_s| oldest_s < self.late_from_s) {
            self.start_batch(f64::INFINITY, batching, sink);
        }
        &self.waiting
    }

    /// Requests waiting or running at `now_s`, after
    /// [`BatchQueue::advance`] to `now_s` (only batches that began before
    /// it have started, so a process runs at most its last batch).
    pub(super) fn in_system(&self, now_s: f64) -> usize {
        let running: usize =
            self.processes.iter().filter(|process| process.free_at_s > now_s).map(|process| process.batch).sum();
        self.waiting.len() + running
    }

    /// Adds a request arriving at `arrival_s`, no earlier than every
    /// arrival before it; call [`BatchQueue::advance`] to `arrival_s` first.
    #[inline]
    pub(super) fn push(&mut self, arrival_s: f64) {
        self.late_from_s = f64::INFINITY;
        self.late_before_s = f64::NEG_INFINITY;
        self.waiting.push_back(arrival_s);
    }

    /// Starts every batch that begins before `limit_s`: its content is then
    /// known, because every arrival before `limit_s` is in the queue.
    /// `f64::INFINITY` drains the queue. Returns the requests started.
    ///
    /// The earliest free process starts the next batch at
    /// `max(free, min(oldest + delay, arrival of the max_batch-th waiting))`
    /// with the waiting requests that arrived by then, at most `max_batch`.
    #[inline]
    pub(super) fn advance(&mut self, limit_s: f64, batching: &Batching, sink: &mut impl Sink) -> usize {
        self.late_before_s = f64::NEG_INFINITY;
        let mut started = 0;
        while let Some(requests) = self.start_batch(limit_s, batching, sink) {
            started += requests;
        }
        started
    }

    /// Starts the next batch if it begins before `limit_s` (see
    /// [`BatchQueue::advance`]): the requests it takes, `None` when none
    /// waits or it begins later.
    #[inline]
    fn start_batch(&mut self, limit_s: f64, batching: &Batching, sink: &mut impl Sink) -> Option<usize> {
        let max_batch = batching.max_batch;
        let &oldest_s = self.waiting.front()?;
        let mut process = 0;
        for (index, candidate) in self.processes.iter().enumerate().skip(1) {
            if candidate.free_at_s < self.processes[process].free_at_s {
                process = index;
            }
        }
        let free_s = self.processes[process].free_at_s;
        let waiting = self.waiting.len();
        let full = waiting >= max_batch;
        let mut start_s = oldest_s + batching.delay_s;
        if full {
            start_s = start_s.min(self.waiting[max_batch - 1]);
        }
        start_s = start_s.max(free_s);
        if start_s >= limit_s {
            // Later arrivals may still join (or, for a full batch, it has
            // not begun yet: it stays waiting, so `in_system` holds).
            return None;
        }
        // The oldest is in (start >= oldest); then those arrived by the start.
        let take = waiting.min(max_batch);
        let mut k = 1;
        while k < take && self.waiting[k] <= start_s {
            k += 1;
        }
        let (mut run_ms, mut run_s) = batching.latency(k);
        if batching.spread_sigma > 0.0 {
            let sigma = batching.spread_sigma;
            let factor = (sigma * self.normal.sample(&mut self.rng) - 0.5 * sigma * sigma).exp();
            (run_ms, run_s) = (run_ms * factor, run_s * factor);
        }
        let end_s = start_s + run_s;
        self.processes[process] = Process { free_at_s: end_s, batch: k };
        for arrival_s in self.waiting.drain(..k) {
            sink.request(arrival_s, start_s - arrival_s, run_ms);
        }
        sink.batch(start_s, end_s, k);
        Some(k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records what a queue reports.
    #[derive(Default)]
    struct Log {
        latencies_ms: Vec<f64>,
        batches: Vec<(f64, usize)>,
    }

    impl Sink for Log {
        fn request(&mut self, _arrival_s: f64, wait_s: f64, run_ms: f64) {
            self.latencies_ms.push(wait_s * 1000.0 + run_ms);
        }
        fn batch(&mut self, start_s: f64, _end_s: f64, requests: usize) {
            self.batches.push((start_s, requests));
        }
    }

    fn run(processes: usize, shape: &SegmentShape, delay_s: f64, arrivals: &[f64]) -> Log {
        let batching = Batching::new(shape, delay_s);
        let (mut queue, mut log) = (BatchQueue::new(processes, 0), Log::default());
        for &arrival in arrivals {
            queue.advance(arrival, &batching, &mut log);
            queue.push(arrival);
        }
        queue.advance(f64::INFINITY, &batching, &mut log);
        log
    }

    #[test]
    fn a_busy_process_batches_what_waited_and_partial_batches_run_faster() {
        let shape = SegmentShape::new(1, vec![(1, 10.0), (4, 20.0)]).unwrap();
        // 0: alone (10 ms); 0.001..0.004 wait for it, then run as one batch of 4 (20 ms);
        // 0.005 waits for that batch: alone at 0.030.
        let log = run(1, &shape, 0.0, &[0.0, 0.001, 0.002, 0.003, 0.004, 0.005]);
        assert_eq!(log.batches, vec![(0.0, 1), (0.010, 4), (0.030, 1)]);
        let expected = [10.0, 29.0, 28.0, 27.0, 26.0, 35.0];
        for (got, want) in log.latencies_ms.iter().zip(expected) {
            assert!((got - want).abs() < 1e-9, "{:?}", log.latencies_ms);
        }
    }

    #[test]
    fn an_idle_process_waits_for_a_full_batch_or_the_delay() {
        let shape = SegmentShape::new(1, vec![(1, 10.0), (2, 12.0), (3, 15.0)]).unwrap();
        // Delay 5 ms: 0 and 0.002 leave at 0.005 (batch of 2); 0.1, 0.101, 0.102 fill
        // a batch of 3 at 0.102, before their delay ends.
        let log = run(1, &shape, 0.005, &[0.0, 0.002, 0.1, 0.101, 0.102]);
        assert_eq!(log.batches, vec![(0.005, 2), (0.102, 3)]);
        assert!((log.latencies_ms[0] - 17.0).abs() < 1e-9 && (log.latencies_ms[4] - 15.0).abs() < 1e-9);
    }

    /// Latencies (ms, by arrival) from a plain event-by-event simulation:
    /// at every arrival, completion or delay expiry, free processes start
    /// batches while a full batch waits or the oldest has waited the delay.
    fn reference(processes: usize, shape: &SegmentShape, delay_s: f64, arrivals: &[f64]) -> Vec<f64> {
        let max_batch = shape.max_batch() as usize;
        let mut free_at = vec![0.0f64; processes];
        let mut waiting: VecDeque<usize> = VecDeque::new();
        let mut latencies = vec![f64::NAN; arrivals.len()];
        let (mut next, mut now) = (0, 0.0f64);
        loop {
            while next < arrivals.len() && arrivals[next] <= now {
                waiting.push_back(next);
                next += 1;
            }
            while let Some(&oldest) = waiting.front() {
                let ready = waiting.len() >= max_batch || now >= arrivals[oldest] + delay_s;
                let Some(process) = (0..processes).find(|&p| free_at[p] <= now) else { break };
                if !ready {
                    break;
                }
                let k = waiting.len().min(max_batch);
                let run_ms = shape.latency_ms(k as u32);
                free_at[process] = now + run_ms / 1000.0;
                for request in waiting.drain(..k) {
                    latencies[request] = (now - arrivals[request]) * 1000.0 + run_ms;
                }
            }
            let mut candidates = vec![];
            candidates.extend(arrivals.get(next));
            candidates.extend(free_at.iter().filter(|&&t| t > now));
            candidates.extend(waiting.front().map(|&oldest| arrivals[oldest] + delay_s).filter(|&t| t > now));
            match candidates.into_iter().reduce(f64::min) {
                Some(t) => now = t,
                None => return latencies,
            }
        }
    }

    #[test]
    fn the_lazy_queue_agrees_with_an_event_by_event_simulation() {
        use crate::sampling::exponential;
        use tessera_core::rng::SplitMix64;
        let shape = SegmentShape::new(3, vec![(1, 4.0), (2, 5.0), (4, 7.0), (6, 9.0)]).unwrap();
        let mut rng = SplitMix64::new(17);
        // Bursts and lulls: 2,000 arrivals at 500 req/s with every tenth gap 50 times longer.
        let mut t = 0.0;
        let arrivals: Vec<f64> = (0..2000)
            .map(|i| {
                t += exponential(&mut rng) * if i % 10 == 9 { 0.1 } else { 0.002 };
                t
            })
            .collect();
        for processes in [1, 3] {
            for delay_s in [0.0, 0.003] {
                let log = run(processes, &shape, delay_s, &arrivals);
                let want = reference(processes, &shape, delay_s, &arrivals);
                assert_eq!(log.latencies_ms.len(), want.len());
                // The queue reports in start order, which is arrival order (FIFO).
                for (i, (got, want)) in log.latencies_ms.iter().zip(&want).enumerate() {
                    assert!(
                        (got - want).abs() < 1e-9,
                        "{processes} processes, delay {delay_s}: request {i}: {got} vs {want}"
                    );
                }
                assert!(log.batches.iter().any(|&(_, k)| k > 1) && log.batches.iter().any(|&(_, k)| k == 1));
            }
        }
    }

    #[test]
    fn a_request_found_surely_late_is_late() {
        use crate::sampling::exponential;
        use tessera_core::rng::SplitMix64;
        let shape = SegmentShape::new(2, vec![(1, 4.0), (2, 5.0), (4, 7.0), (8, 12.0)]).unwrap();
        let slo_ms = 40.0;
        for (processes, load) in [(1, 1.02), (1, 1.5), (2, 1.1), (2, 0.9)] {
            // Full batches of 8 every 12 ms per process, offered `load` of that.
            let rate_per_s = load * processes as f64 * 8.0 / 0.012;
            let mut rng = SplitMix64::new(5);
            let mut t = 0.0;
            let arrivals: Vec<f64> = (0..20_000)
                .map(|_| {
                    t += exponential(&mut rng) / rate_per_s;
                    t
                })
                .collect();
            let latencies = reference(processes, &shape, 0.001, &arrivals);
            let batching = Batching::new(&shape, 0.001);
            let (mut queue, mut log) = (BatchQueue::new(processes, 0), Log::default());
            let mut found = 0;
            for (i, &arrival) in arrivals.iter().enumerate() {
                if queue.surely_late(arrival, slo_ms, &batching) {
                    assert!(latencies[i] > slo_ms, "{processes} at {load}: request {i} took {} ms", latencies[i]);
                    found += 1;
                    // Left unrun: a later request finds the queue as lazy.
                    queue.push_late(arrival);
                } else {
                    queue.advance(arrival, &batching, &mut log);
                    queue.push(arrival);
                }
            }
            let late = latencies.iter().filter(|&&ms| ms > slo_ms).count();
            match load > 1.0 {
                // Past its throughput most of the late are found.
                true => assert!(found * 10 > late * 8, "{processes} at {load}: {found} of {late} late found"),
                false => assert!(late == 0 || found < late),
            }
            // What finish leaves unrun is the last run of surely late
            // requests; the rest ran at their reference latencies.
            let unrun = queue.finish(&batching, &mut log).len();
            assert_eq!(log.latencies_ms.len() + unrun, arrivals.len());
            for (got, want) in log.latencies_ms.iter().zip(&latencies) {
                assert!((got - want).abs() < 1e-9);
            }
            assert!(latencies[arrivals.len() - unrun..].iter().all(|&ms| ms > slo_ms));
        }
    }

    #[test]
    fn a_shared_queue_feeds_every_free_process() {
        let shape = SegmentShape::full_batch_only(2, 1, 10.0).unwrap();
        let log = run(2, &shape, 0.0, &[0.0, 0.001, 0.002]);
        // Two run at once; the third waits for the first to finish.
        assert_eq!(log.batches, vec![(0.0, 1), (0.001, 1), (0.010, 1)]);
        let mut queue = BatchQueue::new(2, 0);
        let batching = Batching::new(&shape, 0.0);
        let mut sink = Log::default();
        for arrival in [0.0, 0.001, 0.002] {
            queue.advance(arrival, &batching, &mut sink);
            queue.push(arrival);
        }
        queue.advance(0.0025, &batching, &mut sink);
        assert_eq!(queue.in_system(0.0025), 3);
        assert_eq!(queue.in_system(1.0), 1, "one waiting once both processes are free");
    }
}
