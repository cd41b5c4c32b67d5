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
use crate::policy::{Eviction, Policies, Prefetch, Retention};
use crate::result::{EngineKind, Free, Interval, SimResult};
use crate::schedule::Schedule;
use crate::trace::{Gpu, Trace};
use crate::workload::{Compiled, Workload};

/// Simulates `trace` run in the order of `schedule` under `policies`.
pub fn simulate(trace: &Trace, schedule: &Schedule, policies: Policies) -> Result<SimResult, SimError> {
    trace.validate()?;
    let ids: Vec<usize> = schedule.steps().iter().map(|&(client, _)| client).collect();
    Schedule::new(trace, &ids)?;
    let compiled = Compiled::new(trace);
    let workload = Workload::new(&compiled, &ids);
    let labels = Labels { trace, compiled: &compiled };
    let mut sim =
        Sim::new(Context { gpu: &trace.gpu, work: &workload, policies, labels: Some(labels) }, trace.clients.len());
    sim.run(None);
    sim.finish()
}

/// Where interval labels come from (only when intervals are recorded).
#[derive(Clone, Copy)]
struct Labels<'a> {
    trace: &'a Trace,
    compiled: &'a Compiled,
}

/// What one run looks at and never changes.
#[derive(Clone, Copy)]
struct Context<'a> {
    gpu: &'a Gpu,
    work: &'a Workload<'a>,
    policies: Policies,
    /// `None`: record no intervals (a search needs only the totals).
    labels: Option<Labels<'a>>,
}

/// What an event completes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
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

/// Everything a run changes: cloned to resume a run from a checkpoint.
#[derive(Clone)]
pub(crate) struct State {
    memory: Memory,
    /// (time, kind rank, sequence, event): earliest first, then by kind,
    /// then in the order scheduled.
    queue: BinaryHeap<Reverse<(u64, u8, u64, Event)>>,
    scheduled: u64,
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
    /// The furthest schedule position any decision so far depended on:
    /// a schedule that agrees with this one up to it would have made the
    /// same decisions.
    horizon: usize,
}

/// A run's state saved before the decisions at one instant, with the
/// furthest position the run had looked at by then.
#[derive(Clone)]
pub(crate) struct Checkpoint {
    state: State,
}

impl Checkpoint {
    /// Schedules that agree with the checkpointed one on every position
    /// up to and including this may resume from it.
    pub fn horizon(&self) -> usize {
        self.state.horizon
    }

    /// Operations started before the checkpoint (what resuming skips).
    pub fn started(&self) -> usize {
        self.state.started
    }
}

/// Makespan and bytes moved (both ways) of `ids` on a compiled trace, with
/// no intervals recorded. With `resume`, the run continues from that
/// checkpoint (taken on a schedule that agrees with `ids` up to its
/// horizon). With `checkpoints`, a checkpoint is saved every `every`
/// operations started.
pub(crate) fn simulate_compiled(
    gpu: &Gpu,
    work: &Workload<'_>,
    policies: Policies,
    resume: Option<&Checkpoint>,
    checkpoints: Option<(&mut Vec<Checkpoint>, usize)>,
) -> Result<(u64, u64), SimError> {
    let context = Context { gpu, work, policies, labels: None };
    let clients = work.compiled.ops.len();
    let mut sim = match resume {
        Some(checkpoint) => Sim { context, state: checkpoint.state.clone() },
        None => Sim::new(context, clients),
    };
    sim.run(checkpoints);
    let result = sim.finish()?;
    Ok((result.makespan_ns, result.h2d_bytes.saturating_add(result.d2h_bytes)))
}

struct Sim<'a> {
    context: Context<'a>,
    state: State,
}

impl<'a> Sim<'a> {
    fn new(context: Context<'a>, clients: usize) -> Sim<'a> {
        let work = context.work;
        let memory = Memory::new(context.gpu.memory_bytes, work.compiled.buffer_bytes.len());
        Sim {
            context,
            state: State {
                memory,
                queue: BinaryHeap::new(),
                scheduled: 0,
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
                horizon: 0,
            },
        }
    }

    fn finish(self) -> Result<SimResult, SimError> {
        match self.state.overflow {
            Some(quantity) => Err(SimError::Overflow { quantity }),
            None => Ok(self.state.result),
        }
    }

    fn run(&mut self, mut checkpoints: Option<(&mut Vec<Checkpoint>, usize)>) {
        let mut next_checkpoint = self.state.started;
        loop {
            if let Some((saved, every)) = checkpoints.as_mut() {
                if self.state.started >= next_checkpoint {
                    saved.push(Checkpoint { state: self.state.clone() });
                    next_checkpoint = self.state.started + (*every).max(1);
                }
            }
            self.dispatch();
            let Some(&Reverse((time_ns, ..))) = self.state.queue.peek() else { break };
            self.state.now_ns = time_ns;
            while let Some(&Reverse((t, _, _, event))) = self.state.queue.peek() {
                if t != time_ns {
                    break;
                }
                self.state.queue.pop();
                self.apply(event);
            }
            if self.state.overflow.is_some() {
                return;
            }
        }
        let state = &mut self.state;
        assert_eq!(state.started, self.context.work.steps.len(), "simulation stopped with operations left");
        state.result.makespan_ns = state.now_ns;
        state.result.stall_ns = state.last_compute_end_ns - state.result.compute_busy_ns;
        state.result.events = state.scheduled;
    }

    /// `total + more`, or `u64::MAX` with `quantity` recorded as the
    /// overflow that ends the run.
    fn add(&mut self, total: u64, more: u64, quantity: &'static str) -> u64 {
        total.checked_add(more).unwrap_or_else(|| {
            self.state.overflow.get_or_insert(quantity);
            u64::MAX
        })
    }

    fn schedule_event(&mut self, duration_ns: u64, event: Event) -> u64 {
        let sequence = self.state.scheduled;
        self.state.scheduled += 1;
        let end_ns = self.add(self.state.now_ns, duration_ns, "clock");
        self.state.queue.push(Reverse((end_ns, event.rank(), sequence, event)));
        end_ns
    }

    fn record(&mut self, engine: EngineKind, end_ns: u64, bytes: u64, label: impl FnOnce(Labels) -> String) {
        if let Some(labels) = self.context.labels {
            let interval = Interval { engine, start_ns: self.state.now_ns, end_ns, label: label(labels), bytes };
            self.state.result.intervals.push(interval);
        }
    }

    fn buffer_label(&self, buffer: usize) -> impl FnOnce(Labels) -> String {
        move |labels: Labels| {
            let (client, name) = &labels.compiled.buffer_names[buffer];
            format!("{}/{name}", labels.trace.clients[*client].name)
        }
    }

    fn next_tick(&mut self) -> u64 {
        self.state.tick += 1;
        self.state.tick
    }

    /// Notes that a decision looked at schedule position `position`.
    fn looked_at(&mut self, position: usize) {
        self.state.horizon = self.state.horizon.max(position);
    }

    fn apply(&mut self, event: Event) {
        match event {
            Event::WriteBack(buffer) => {
                self.state.d2h_busy = false;
                self.state.memory.end_write_back(buffer);
            }
            Event::CopyIn(buffer, bytes) => {
                self.state.h2d_busy = false;
                let tick = self.next_tick();
                self.state.memory.end_fetch(buffer, bytes, tick);
            }
            Event::Compute(position) => self.end_compute(position),
        }
    }

    fn end_compute(&mut self, position: usize) {
        let work = self.context.work;
        self.state.computing = None;
        self.state.last_compute_end_ns = self.state.now_ns;
        let tick = self.next_tick();
        let step = work.op(position);
        let client = work.steps[position].0;
        self.state.result.compute_busy_ns =
            self.add(self.state.result.compute_busy_ns, step.compute_ns, "compute busy time");
        let state = &mut self.state;
        state.result.client_completion_ns[client] = state.now_ns;
        state.memory.give(step.ephemeral_bytes);
        for &b in &step.buffers {
            state.memory.set_pinned(b, false, tick);
        }
        for &b in &step.writes {
            state.memory.mark_dirty(b);
        }
        // Whether a buffer is used again depends only on which operations
        // remain, not on their order: no position is looked at here.
        if self.context.policies.retention == Retention::ReleaseAfterLastUse {
            for &b in &step.buffers {
                if work.is_last_use(b, position) {
                    let dirty = self.state.memory.evict(b);
                    self.evicted(b, dirty);
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
    fn make_room(&mut self, need_bytes: u64, allowed: impl Fn(&Workload<'_>, usize) -> bool) -> bool {
        let work = self.context.work;
        let from = self.state.started;
        let eviction = self.context.policies.eviction;
        let mut furthest = None;
        let victims = self.state.memory.make_room(
            need_bytes,
            eviction,
            |b| {
                let next = work.next_use(b, from);
                if eviction == Eviction::Belady {
                    furthest = furthest.max(next);
                }
                next
            },
            |b| allowed(work, b),
            |b| work.rank[b],
        );
        // Belady ranks every candidate by its next use; a buffer never used
        // again is that in any order of the remaining operations.
        let changed = !victims.is_empty();
        if changed {
            if let Some(position) = furthest {
                self.looked_at(position);
            }
        }
        for (buffer, dirty) in victims {
            self.evicted(buffer, dirty);
        }
        changed
    }

    /// A dirty victim waits for its write-back; a clean one's memory is
    /// free now (recorded as a free when intervals are).
    fn evicted(&mut self, buffer: usize, dirty: bool) {
        if dirty {
            self.state.write_backs.push_back(buffer);
        } else if let Some(labels) = self.context.labels {
            let label = self.buffer_label(buffer)(labels);
            self.state.result.frees.push(Free { at_ns: self.state.now_ns, label });
        }
    }

    fn try_compute(&mut self) -> bool {
        let work = self.context.work;
        if self.state.computing.is_some() || self.state.started == work.steps.len() {
            return false;
        }
        let position = self.state.started;
        self.looked_at(position);
        let step = work.op(position);
        if !step.buffers.iter().all(|&b| self.state.memory.is_ready(work, b)) {
            return false;
        }
        let ephemeral_bytes = step.ephemeral_bytes;
        if self.state.memory.free_bytes() < ephemeral_bytes {
            let changed = self.make_room(ephemeral_bytes, |w, b| !w.op(position).buffers.contains(&b));
            if self.state.memory.free_bytes() < ephemeral_bytes {
                return changed;
            }
        }
        self.state.memory.take(ephemeral_bytes);
        let tick = self.next_tick();
        for &b in &step.buffers {
            self.state.memory.set_pinned(b, true, tick);
        }
        self.state.computing = Some(position);
        self.state.started += 1;
        let end_ns = self.schedule_event(step.compute_ns, Event::Compute(position));
        let (client, operation) = work.steps[position];
        self.record(EngineKind::Compute, end_ns, ephemeral_bytes, |labels| {
            format!("{}#{operation}", labels.trace.clients[client].name)
        });
        true
    }

    fn try_h2d(&mut self) -> bool {
        if self.state.h2d_busy {
            return false;
        }
        let work = self.context.work;
        let steps = work.steps.len();
        if self.state.computing.is_none() && self.state.started < steps {
            let p = self.state.started;
            if !work.op(p).buffers.iter().all(|&b| self.state.memory.is_ready(work, b)) {
                return self.demand(p);
            }
        }
        match self.context.policies.prefetch {
            Prefetch::None => false,
            Prefetch::Passive => self.passive(),
            Prefetch::Active => self.active(),
            Prefetch::Lookahead(k) => self.lookahead(k),
        }
    }

    /// The first buffer of the step at `position` with bytes to fetch.
    fn first_missing(&self, position: usize) -> Option<(usize, u64)> {
        let work = self.context.work;
        work.op(position)
            .buffers
            .iter()
            .map(|&b| (b, self.state.memory.missing_bytes(work, b)))
            .find(|&(_, missing)| missing > 0)
    }

    fn any_writing_back(&self, position: usize) -> bool {
        self.context.work.op(position).buffers.iter().any(|&b| self.state.memory.is_writing_back(b))
    }

    /// Fetches the next operation's data for an idle compute engine,
    /// evicting anything it does not need.
    fn demand(&mut self, position: usize) -> bool {
        let Some((buffer, need)) = self.first_missing(position) else { return false };
        if self.state.memory.free_bytes() < need {
            let changed = self.make_room(need, |w, b| !w.op(position).buffers.contains(&b));
            if self.state.memory.free_bytes() < need {
                return changed;
            }
        }
        self.start_h2d(buffer, need);
        true
    }

    fn passive(&mut self) -> bool {
        let work = self.context.work;
        for position in self.state.started..work.steps.len() {
            self.looked_at(position);
            if self.any_writing_back(position) {
                return false;
            }
            let missing: u64 =
                work.op(position).buffers.iter().map(|&b| self.state.memory.missing_bytes(work, b)).sum();
            if missing == 0 {
                continue;
            }
            if missing > self.state.memory.free_bytes() {
                return false;
            }
            let Some((buffer, bytes)) = self.first_missing(position) else { return false };
            self.start_h2d(buffer, bytes);
            return true;
        }
        false
    }

    fn active(&mut self) -> bool {
        for position in self.state.started..self.context.work.steps.len() {
            self.looked_at(position);
            if self.any_writing_back(position) {
                return false;
            }
            if let Some((buffer, missing)) = self.first_missing(position) {
                let chunk = missing.min(self.state.memory.free_bytes());
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
        let from = self.state.started;
        for position in from..(from + k).min(self.context.work.steps.len()) {
            self.looked_at(position);
            if self.any_writing_back(position) {
                return false;
            }
            let Some((buffer, need)) = self.first_missing(position) else { continue };
            if self.state.memory.free_bytes() < need {
                // Do no harm: only data next needed after this operation may go.
                let changed = self.make_room(need, |w, b| w.next_use(b, from).is_none_or(|u| u > position));
                if self.state.memory.free_bytes() < need {
                    return changed;
                }
            }
            self.start_h2d(buffer, need);
            return true;
        }
        false
    }

    fn start_h2d(&mut self, buffer: usize, bytes: u64) {
        self.state.memory.start_fetch(buffer, bytes);
        self.state.h2d_busy = true;
        let duration_ns = self.context.gpu.h2d_ns(bytes);
        self.state.result.h2d_bytes = self.add(self.state.result.h2d_bytes, bytes, "bytes copied to the GPU");
        self.state.result.h2d_busy_ns =
            self.add(self.state.result.h2d_busy_ns, duration_ns, "host-to-device busy time");
        let end_ns = self.schedule_event(duration_ns, Event::CopyIn(buffer, bytes));
        let label = self.buffer_label(buffer);
        self.record(EngineKind::H2d, end_ns, bytes, label);
    }

    fn try_d2h(&mut self) -> bool {
        if self.state.d2h_busy {
            return false;
        }
        let Some(buffer) = self.state.write_backs.pop_front() else { return false };
        let bytes = self.state.memory.resident_bytes(buffer);
        let duration_ns = self.context.gpu.d2h_ns(bytes);
        self.state.d2h_busy = true;
        self.state.result.d2h_bytes = self.add(self.state.result.d2h_bytes, bytes, "bytes copied back");
        self.state.result.d2h_busy_ns =
            self.add(self.state.result.d2h_busy_ns, duration_ns, "device-to-host busy time");
        let end_ns = self.schedule_event(duration_ns, Event::WriteBack(buffer));
        let label = self.buffer_label(buffer);
        self.record(EngineKind::D2h, end_ns, bytes, label);
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
        let compiled = Compiled::new(&trace);
        let work = Workload::new(&compiled, &[0, 1, 0]);
        let context =
            Context { gpu: &trace.gpu, work: &work, policies: policies(Retention::KeepUntilEvicted), labels: None };
        let mut sim = Sim::new(context, 2);
        sim.run(None);
        assert_eq!(sim.state.overflow, Some("clock"));
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

    /// A random trace of 2 to 5 clients, 1 to 4 operations each, tight memory.
    fn random_trace(rng: &mut tessera_core::rng::SplitMix64) -> Trace {
        let clients: Vec<Client> = (0..2 + rng.below(4))
            .map(|c| {
                let sizes: Vec<u64> = (0..3).map(|_| (1 + rng.below(4) as u64) * GB / 2).collect();
                let operations = (0..1 + rng.below(4))
                    .map(|_| Operation {
                        compute_ms: rng.uniform(10.0, 300.0).round(),
                        buffers: (0..3)
                            .filter_map(|b| {
                                let (used, dirty) = (rng.below(2) == 0, rng.below(3) == 0);
                                used.then(|| Buffer { name: format!("b{b}"), bytes: sizes[b], dirty })
                            })
                            .collect(),
                        ephemeral_bytes: rng.below(3) as u64 * GB / 2,
                    })
                    .collect();
                Client { name: format!("c{c}"), operations }
            })
            .collect();
        let largest = clients.iter().flat_map(|c| &c.operations).map(Operation::working_set_bytes).max().unwrap();
        let gpu = Gpu {
            memory_bytes: largest + rng.below(4) as u64 * GB / 2,
            h2d_bytes_per_s: 1e10,
            d2h_bytes_per_s: 8e9,
            copy_latency_ns: 1000,
        };
        Trace { gpu, clients }
    }

    #[test]
    fn resuming_from_a_checkpoint_gives_the_full_run() {
        let mut rng = tessera_core::rng::SplitMix64::new(99);
        let (mut resumed, mut runs) = (0, 0);
        for _ in 0..300 {
            let trace = random_trace(&mut rng);
            let compiled = Compiled::new(&trace);
            let mut ids: Vec<usize> =
                trace.clients.iter().enumerate().flat_map(|(c, cl)| vec![c; cl.operations.len()]).collect();
            crate::schedulers::shuffle(&mut ids, &mut rng);
            let policies = Policies {
                eviction: [Eviction::Lru, Eviction::Belady][rng.below(2)],
                prefetch: [Prefetch::None, Prefetch::Passive, Prefetch::Active, Prefetch::Lookahead(2)][rng.below(4)],
                retention: [Retention::ReleaseAfterLastUse, Retention::KeepUntilEvicted][rng.below(2)],
            };
            let work = Workload::new(&compiled, &ids);
            let mut checkpoints = Vec::new();
            let full = simulate_compiled(&trace.gpu, &work, policies, None, Some((&mut checkpoints, 1))).unwrap();
            assert_eq!(full, simulate_compiled(&trace.gpu, &work, policies, None, None).unwrap());
            for _ in 0..10 {
                let (p, q) = (rng.below(ids.len()), rng.below(ids.len()));
                let mut moved = ids.clone();
                moved.swap(p, q);
                let first = p.min(q);
                let moved_work = Workload::new(&compiled, &moved);
                let expected = simulate_compiled(&trace.gpu, &moved_work, policies, None, None).unwrap();
                for checkpoint in checkpoints.iter().filter(|c| c.horizon() < first) {
                    let got = simulate_compiled(&trace.gpu, &moved_work, policies, Some(checkpoint), None).unwrap();
                    assert_eq!(got, expected, "{policies:?} {ids:?} -> {moved:?} from {}", checkpoint.started());
                    resumed += usize::from(checkpoint.started() > 0);
                }
                runs += 1;
            }
        }
        assert!(runs == 3000 && resumed > 500, "{resumed} resumed runs");
    }
}
