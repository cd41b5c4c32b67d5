//! The discrete-event engine. Time is integer nanoseconds; the event
//! queue is ordered by (time, kind, sequence) with kinds in the order
//! write-back done, compute done, copy-in done. All events of one instant
//! are applied before any decision is taken at that instant; decisions
//! then repeat (compute first, then the host-to-device engine, then the
//! device-to-host engine) until nothing more can start.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use crate::error::SimError;
use crate::memory::Memory;
use crate::policy::{Policies, Prefetch, Retention};
use crate::result::{EngineKind, Interval, SimResult};
use crate::schedule::Schedule;
use crate::trace::{Gpu, Trace};
use crate::workload::Workload;

/// Simulates `trace` run in the order of `schedule` under `policies`.
pub fn simulate(trace: &Trace, schedule: &Schedule, policies: Policies) -> Result<SimResult, SimError> {
    trace.validate()?;
    let ids: Vec<usize> = schedule.steps().iter().map(|&(client, _)| client).collect();
    let schedule = Schedule::new(trace, &ids)?;
    let workload = Workload::new(trace, &schedule);
    let mut sim = Sim::new(&trace.gpu, workload, policies, trace.clients.len());
    sim.run();
    match sim.overflow {
        Some(quantity) => Err(SimError::Overflow { quantity }),
        None => Ok(sim.result),
    }
}

/// What an event completes.
#[derive(Debug, Clone, Copy)]
enum Event {
    /// A write-back of the buffer ended.
    WriteBack(usize),
    /// The operation at the schedule position ended.
    Compute(usize),
    /// A copy of (buffer, bytes) arrived.
    CopyIn(usize, u64),
}

impl Event {
    fn rank(self) -> u8 {
        match self {
            Event::WriteBack(_) => 0,
            Event::Compute(_) => 1,
            Event::CopyIn(..) => 2,
        }
    }
}

struct Sim<'a> {
    gpu: &'a Gpu,
    work: Workload,
    policies: Policies,
    memory: Memory,
    queue: BinaryHeap<Reverse<(u64, u8, u64)>>,
    events: Vec<Event>,
    now_ns: u64,
    tick: u64,
    started: usize,
    computing: Option<usize>,
    h2d_busy: bool,
    d2h_busy: bool,
    write_backs: VecDeque<usize>,
    last_compute_end_ns: u64,
    result: SimResult,
    /// The first total that passed `u64::MAX`; the run stops there.
    overflow: Option<&'static str>,
}

impl<'a> Sim<'a> {
    fn new(gpu: &'a Gpu, work: Workload, policies: Policies, clients: usize) -> Sim<'a> {
        let memory = Memory::new(gpu.memory_bytes, work.buffers.len());
        Sim {
            gpu,
            work,
            policies,
            memory,
            queue: BinaryHeap::new(),
            events: Vec::new(),
            now_ns: 0,
            tick: 0,
            started: 0,
            computing: None,
            h2d_busy: false,
            d2h_busy: false,
            write_backs: VecDeque::new(),
            last_compute_end_ns: 0,
            result: SimResult { client_completion_ns: vec![0; clients], ..SimResult::default() },
            overflow: None,
        }
    }

    fn run(&mut self) {
        self.dispatch();
        while let Some(&Reverse((time_ns, _, _))) = self.queue.peek() {
            self.now_ns = time_ns;
            while let Some(&Reverse((t, _, seq))) = self.queue.peek() {
                if t != time_ns {
                    break;
                }
                self.queue.pop();
                self.apply(self.events[seq as usize]);
            }
            if self.overflow.is_some() {
                return;
            }
            self.dispatch();
        }
        assert_eq!(self.started, self.work.steps.len(), "simulation stopped with operations left");
        self.result.makespan_ns = self.now_ns;
        self.result.stall_ns = self.last_compute_end_ns - self.result.compute_busy_ns;
        self.result.events = self.events.len() as u64;
    }

    /// `total + more`, or `u64::MAX` with `quantity` recorded as the
    /// overflow that ends the run.
    fn add(&mut self, total: u64, more: u64, quantity: &'static str) -> u64 {
        total.checked_add(more).unwrap_or_else(|| {
            self.overflow.get_or_insert(quantity);
            u64::MAX
        })
    }

    fn schedule_event(&mut self, duration_ns: u64, event: Event) -> u64 {
        let seq = self.events.len() as u64;
        self.events.push(event);
        let end_ns = self.add(self.now_ns, duration_ns, "clock");
        self.queue.push(Reverse((end_ns, event.rank(), seq)));
        end_ns
    }

    fn record(&mut self, engine: EngineKind, end_ns: u64, label: String) {
        self.result.intervals.push(Interval { engine, start_ns: self.now_ns, end_ns, label });
    }

    fn next_tick(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }

    fn apply(&mut self, event: Event) {
        match event {
            Event::WriteBack(buffer) => {
                self.d2h_busy = false;
                self.memory.end_write_back(buffer);
            }
            Event::CopyIn(buffer, bytes) => {
                self.h2d_busy = false;
                let tick = self.next_tick();
                self.memory.end_fetch(buffer, bytes, tick);
            }
            Event::Compute(position) => self.end_compute(position),
        }
    }

    fn end_compute(&mut self, position: usize) {
        self.computing = None;
        self.last_compute_end_ns = self.now_ns;
        let tick = self.next_tick();
        let compute_ns = self.work.steps[position].compute_ns;
        self.result.compute_busy_ns = self.add(self.result.compute_busy_ns, compute_ns, "compute busy time");
        let step = &self.work.steps[position];
        self.result.client_completion_ns[step.client] = self.now_ns;
        self.memory.give(step.ephemeral_bytes);
        for &b in &step.buffers {
            self.memory.set_pinned(b, false, tick);
        }
        for &b in &step.writes {
            self.memory.mark_dirty(b);
        }
        if self.policies.retention == Retention::ReleaseAfterLastUse {
            for &b in &step.buffers {
                if self.work.is_last_use(b, position) && self.memory.evict(b) {
                    self.write_backs.push_back(b);
                }
            }
        }
    }

    fn dispatch(&mut self) {
        loop {
            let compute = self.try_compute();
            let h2d = self.try_h2d();
            let d2h = self.try_d2h();
            if !(compute || h2d || d2h) {
                break;
            }
        }
    }

    /// Evicts, by the eviction policy, buffers that `allowed` admits until
    /// `need_bytes` are free or on their way out; queues dirty victims.
    fn make_room(&mut self, need_bytes: u64, allowed: impl Fn(&Workload, usize) -> bool) -> bool {
        let work = &self.work;
        let from = self.started;
        let (dirty, changed) =
            self.memory.make_room(need_bytes, self.policies.eviction, |b| work.next_use(b, from), |b| allowed(work, b));
        self.write_backs.extend(dirty);
        changed
    }

    fn try_compute(&mut self) -> bool {
        if self.computing.is_some() || self.started == self.work.steps.len() {
            return false;
        }
        let position = self.started;
        let step = &self.work.steps[position];
        if !step.buffers.iter().all(|&b| self.memory.is_ready(&self.work, b)) {
            return false;
        }
        let ephemeral_bytes = step.ephemeral_bytes;
        if self.memory.free_bytes() < ephemeral_bytes {
            let changed = self.make_room(ephemeral_bytes, |w, b| !w.steps[position].buffers.contains(&b));
            if self.memory.free_bytes() < ephemeral_bytes {
                return changed;
            }
        }
        self.memory.take(ephemeral_bytes);
        let tick = self.next_tick();
        for &b in &self.work.steps[position].buffers {
            self.memory.set_pinned(b, true, tick);
        }
        self.computing = Some(position);
        self.started += 1;
        let end_ns = self.schedule_event(self.work.steps[position].compute_ns, Event::Compute(position));
        self.record(EngineKind::Compute, end_ns, self.work.steps[position].label.clone());
        true
    }

    fn try_h2d(&mut self) -> bool {
        if self.h2d_busy {
            return false;
        }
        let steps = self.work.steps.len();
        if self.computing.is_none() && self.started < steps {
            let p = self.started;
            if !self.work.steps[p].buffers.iter().all(|&b| self.memory.is_ready(&self.work, b)) {
                return self.demand(p);
            }
        }
        match self.policies.prefetch {
            Prefetch::None => false,
            Prefetch::Passive => self.passive(),
            Prefetch::Active => self.active(),
            Prefetch::Lookahead(k) => self.lookahead(k),
        }
    }

    /// The first buffer of the step at `position` with bytes to fetch.
    fn first_missing(&self, position: usize) -> Option<(usize, u64)> {
        self.work.steps[position]
            .buffers
            .iter()
            .map(|&b| (b, self.memory.missing_bytes(&self.work, b)))
            .find(|&(_, missing)| missing > 0)
    }

    fn any_writing_back(&self, position: usize) -> bool {
        self.work.steps[position].buffers.iter().any(|&b| self.memory.is_writing_back(b))
    }

    /// Fetches the next operation's data for an idle compute engine,
    /// evicting anything it does not need.
    fn demand(&mut self, position: usize) -> bool {
        let Some((buffer, need)) = self.first_missing(position) else { return false };
        if self.memory.free_bytes() < need {
            let changed = self.make_room(need, |w, b| !w.steps[position].buffers.contains(&b));
            if self.memory.free_bytes() < need {
                return changed;
            }
        }
        self.start_h2d(buffer, need);
        true
    }

    fn passive(&mut self) -> bool {
        for position in self.started..self.work.steps.len() {
            if self.any_writing_back(position) {
                return false;
            }
            let missing: u64 =
                self.work.steps[position].buffers.iter().map(|&b| self.memory.missing_bytes(&self.work, b)).sum();
            if missing == 0 {
                continue;
            }
            if missing > self.memory.free_bytes() {
                return false;
            }
            let Some((buffer, bytes)) = self.first_missing(position) else { return false };
            self.start_h2d(buffer, bytes);
            return true;
        }
        false
    }

    fn active(&mut self) -> bool {
        for position in self.started..self.work.steps.len() {
            if self.any_writing_back(position) {
                return false;
            }
            if let Some((buffer, missing)) = self.first_missing(position) {
                let chunk = missing.min(self.memory.free_bytes());
                if chunk == 0 {
                    return false;
                }
                self.start_h2d(buffer, chunk);
                return true;
            }
        }
        false
    }

    fn lookahead(&mut self, k: usize) -> bool {
        let from = self.started;
        for position in from..(from + k).min(self.work.steps.len()) {
            if self.any_writing_back(position) {
                return false;
            }
            let Some((buffer, need)) = self.first_missing(position) else { continue };
            if self.memory.free_bytes() < need {
                // Do no harm: only data next needed after this operation may go.
                let changed = self.make_room(need, |w, b| w.next_use(b, from).is_none_or(|u| u > position));
                if self.memory.free_bytes() < need {
                    return changed;
                }
            }
            self.start_h2d(buffer, need);
            return true;
        }
        false
    }

    fn start_h2d(&mut self, buffer: usize, bytes: u64) {
        self.memory.start_fetch(buffer, bytes);
        self.h2d_busy = true;
        let duration_ns = self.gpu.h2d_ns(bytes);
        self.result.h2d_bytes = self.add(self.result.h2d_bytes, bytes, "bytes copied to the GPU");
        self.result.h2d_busy_ns = self.add(self.result.h2d_busy_ns, duration_ns, "host-to-device busy time");
        let end_ns = self.schedule_event(duration_ns, Event::CopyIn(buffer, bytes));
        self.record(EngineKind::H2d, end_ns, self.work.buffers[buffer].label.clone());
    }

    fn try_d2h(&mut self) -> bool {
        if self.d2h_busy {
            return false;
        }
        let Some(buffer) = self.write_backs.pop_front() else { return false };
        let bytes = self.memory.resident_bytes(buffer);
        let duration_ns = self.gpu.d2h_ns(bytes);
        self.d2h_busy = true;
        self.result.d2h_bytes = self.add(self.result.d2h_bytes, bytes, "bytes copied back");
        self.result.d2h_busy_ns = self.add(self.result.d2h_busy_ns, duration_ns, "device-to-host busy time");
        let end_ns = self.schedule_event(duration_ns, Event::WriteBack(buffer));
        self.record(EngineKind::D2h, end_ns, self.work.buffers[buffer].label.clone());
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Eviction;
    use crate::trace::{Buffer, Client, Operation};

    const GB: u64 = 1_000_000_000;
    const MS: u64 = 1_000_000;

    fn op(gb: u64, dirty: bool, ephemeral_gb: u64) -> Operation {
        Operation {
            compute_ms: 100.0,
            buffers: vec![Buffer { name: "w".into(), bytes: gb * GB, dirty }],
            ephemeral_bytes: ephemeral_gb * GB,
        }
    }

    fn two_clients(memory_gb: u64, a: Operation, b: Operation) -> Trace {
        Trace {
            gpu: Gpu { memory_bytes: memory_gb * GB, h2d_bytes_per_s: 1e10, d2h_bytes_per_s: 1e10, copy_latency_ns: 1 },
            clients: vec![
                Client { name: "a".into(), operations: vec![a.clone(), a] },
                Client { name: "b".into(), operations: vec![b] },
            ],
        }
    }

    fn policies(retention: Retention) -> Policies {
        Policies { eviction: Eviction::Belady, prefetch: Prefetch::None, retention }
    }

    #[test]
    fn dirty_buffers_are_written_back_before_their_memory_is_reused() {
        let trace = two_clients(2, op(2, true, 0), op(2, false, 0));
        let schedule = Schedule::new(&trace, &[0, 1, 0]).unwrap();
        let r = simulate(&trace, &schedule, policies(Retention::KeepUntilEvicted)).unwrap();
        // a: in 200, compute 100; evicted dirty: out 200; b: in 200, compute 100;
        // b evicted clean; a: in 200, compute 100 (dirty again, kept as cache).
        assert_eq!(r.d2h_bytes, 2 * GB);
        assert_eq!(r.h2d_bytes, 6 * GB);
        assert_eq!(r.makespan_ns, 1100 * MS + 4);
        assert_eq!(r.client_completion_ns, vec![r.makespan_ns, 800 * MS + 3]);
        let r = simulate(&trace, &schedule, policies(Retention::ReleaseAfterLastUse)).unwrap();
        assert_eq!(r.d2h_bytes, 4 * GB, "released dirty data goes back to the host");
        assert_eq!(r.makespan_ns, 1300 * MS + 5);
        assert_eq!(r.stall_ns, r.makespan_ns - 200 * MS - 1 - r.compute_busy_ns);
    }

    #[test]
    fn ephemeral_bytes_are_held_only_while_computing() {
        let trace = two_clients(3, op(1, false, 2), op(1, false, 2));
        let schedule = Schedule::new(&trace, &[0, 1, 0]).unwrap();
        let r = simulate(&trace, &schedule, policies(Retention::KeepUntilEvicted)).unwrap();
        // 1 GB of a and 1 GB of b fit beside 2 GB of scratch only one at a time.
        assert_eq!(r.h2d_bytes, 3 * GB);
        assert_eq!(r.compute_busy_ns, 300 * MS);
        let computes: Vec<&str> =
            r.intervals.iter().filter(|i| i.engine == EngineKind::Compute).map(|i| i.label.as_str()).collect();
        assert_eq!(computes, ["a#0", "b#0", "a#1"]);
        assert_eq!(simulate(&trace, &schedule, policies(Retention::KeepUntilEvicted)).unwrap(), r);
    }

    #[test]
    fn a_clock_past_u64_stops_the_run_instead_of_wrapping() {
        // The validator refuses this trace (its total passes 2^64 ns); run
        // on it anyway, the engine itself must not wrap around.
        let mut trace = two_clients(3, op(1, false, 0), op(1, false, 0));
        trace.clients.iter_mut().flat_map(|c| &mut c.operations).for_each(|o| o.compute_ms = 1e13);
        assert!(matches!(trace.validate(), Err(SimError::TraceTime { .. })));
        let schedule = Schedule::new(&trace, &[0, 1, 0]).unwrap();
        let work = Workload::new(&trace, &schedule);
        let mut sim = Sim::new(&trace.gpu, work, policies(Retention::KeepUntilEvicted), 2);
        sim.run();
        assert_eq!(sim.overflow, Some("clock"));
        assert_eq!(
            SimError::Overflow { quantity: "clock" }.to_string(),
            "the simulation's clock passes 2^64; the trace is too long to simulate"
        );
    }

    #[test]
    fn rejects_a_schedule_of_another_trace() {
        let trace = two_clients(3, op(1, false, 0), op(1, false, 0));
        let other = Trace { clients: trace.clients[..1].to_vec(), ..trace.clone() };
        let schedule = Schedule::new(&other, &[0, 0]).unwrap();
        let err = simulate(&trace, &schedule, policies(Retention::KeepUntilEvicted)).unwrap_err();
        assert!(err.to_string().contains("'b' appears 0 times"), "{err}");
    }
}
