//! Measuring a strategy's day with the request-level simulator, piece by
//! piece.
//!
//! The day is cut wherever the segments serving change, a service's rate
//! changes, or an hour ends; within a piece both are constant. Each piece
//! is measured by simulating a sampled window of traffic at its rates
//! (the arrival model plans are made under, Poisson by default; `warmup_s`
//! unmeasured then `window_s` measured) on
//! its segments, and each service's measured share within its SLO is
//! weighted by the requests the piece holds (its rate times its length).
//! A service with too few requests in the window for one to be measured
//! takes the serving model's prediction instead. Pieces that start at the
//! same time use the same seed, whatever the strategy (common random
//! numbers: differences between strategies are not sampling noise).
//!
//! **Measured once per state.** A group whose segments, shared instances
//! and rates are what they were when it was last measured keeps that
//! measure (segments' labels aside: a segment that moved to another GPU
//! serves as before). The day is cut wherever any service's rate changes,
//! so at fleet scale most pieces change one service's rate (a burst's
//! edge) or one transition step's services; the others' queues are as
//! they were, and a fresh window of them would only draw the same
//! stationary share again.
//!
//! **Shared instances.** The members of a shared executor wait behind
//! each other, so they are measured together, as one group (with every
//! other executor one of them is on); each service alone otherwise. Mid-
//! transition a member may be served by its old executor and its new
//! place at once, which the request simulator does not run: such a group
//! takes the serving model's shares (its routes mixed by their weights).
//!
//! **Steady services from the serving model.** Where the model is exact a
//! window only samples what it computes: with [`Sampling::model_steady`],
//! a group arriving as Poisson with every segment offered less than
//! [`MODEL_BELOW_LOAD`] of its full-batch throughput, and every executor
//! busy less than that share of the time (at the day's slowdown), takes
//! the serving model's stationary share within each SLO (to within
//! [`tessera_serving::analytic::ATTAINMENT_TOLERANCE`]: the model is
//! evaluated on a grid of rates shared by the strategies, and exactly only
//! where the grid does not bracket a rate that closely), and only
//! the others (other arrivals; a segment near, at or past its throughput,
//! where a queue settles slowly and a window's figure depends on its
//! length) are simulated request by request. A piece in a
//! transition is no exception: its segments are constant, and a window
//! starts as empty as the model's queue carries nothing from the piece
//! before.
//!
//! **Queues carried.** A service offered more than its segments serve
//! carries its backlog into the pieces after, which count the requests it
//! makes late; a piece whose every request it makes late is not measured
//! (see [`super::backlog`]).
//!
//! **Requests lost** are those a transition takes capacity from: while it
//! runs, a service whose serving segments' capacity is below its rate, the
//! capacity it had before the transition and the capacity it has after it
//! loses the difference (requests per second, times the piece's length):
//! make before break should never serve less than both plans. A rate above
//! the old capacity is the traffic's doing, and one above the new capacity
//! the new plan's: either shows in the share within the SLO, as everything
//! a piece serves late does. A service with no segment serving has none of
//! its requests within its SLO.

use std::collections::HashMap;
use std::sync::Arc;

use rayon::prelude::*;
use serde::Serialize;
use tessera_core::rng::SplitMix64;
use tessera_core::Plan;
use tessera_serving::analytic::AttainmentCache;
use tessera_serving::{
    simulate_attainment, ArrivalModel, ServedSegment, ServedService, ServingSystem, SimulationOptions,
};

use super::backlog::{drains, Backlogs, Drain};
use super::groups::{group_alone, groups};
use super::timeline::Timeline;
use crate::error::AutopilotError;
use crate::planner::Planner;
use tessera_core::TrafficCurve;

/// Default measured seconds of each sampled window.
pub const DEFAULT_WINDOW_S: f64 = 30.0;
/// Default unmeasured seconds at the start of each window.
pub const DEFAULT_WARMUP_S: f64 = 5.0;
/// Default most measured requests of a service in one window.
pub const DEFAULT_MAX_REQUESTS: u64 = 20_000;
/// A shortened window still holds this many of the service's slowest full
/// batches.
pub const MIN_WINDOW_BATCHES: f64 = 50.0;
/// A service with a segment offered this share of its throughput or more
/// keeps the whole window: a queue near or past its capacity settles
/// slowly or grows, and what a window measures of it depends on its
/// length.
pub const FULL_WINDOW_LOAD: f64 = 0.9;
/// A service whose segments are all offered less than this share of
/// their full-batch throughput is steady: with [`Sampling::model_steady`]
/// the serving model measures it where its requests arrive as Poisson.
pub const MODEL_BELOW_LOAD: f64 = 0.97;

/// How each piece of the day is sampled.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Sampling {
    /// Measured seconds of each window.
    pub window_s: f64,
    /// Unmeasured seconds before them.
    pub warmup_s: f64,
    /// A service's window is shortened to hold about this many measured
    /// requests (see [`Sampling::service_window_s`]).
    pub max_requests: u64,
    /// The seed of the windows' arrivals.
    pub seed: u64,
    /// Every batch of the GPUs serving the day this share slower than
    /// profiled (0.05: 5% slower; 0: as profiled).
    pub slowdown: f64,
    /// Steady services (Poisson arrivals, every segment below
    /// [`MODEL_BELOW_LOAD`]) take the serving model's share within their
    /// SLO instead of a simulated window (see the module
    /// documentation); `false`: every service of every piece is simulated.
    pub model_steady: bool,
}

impl Default for Sampling {
    /// [`DEFAULT_WINDOW_S`] after [`DEFAULT_WARMUP_S`], at most
    /// [`DEFAULT_MAX_REQUESTS`] measured per service, seed 0, GPUs as fast
    /// as profiled, steady services from the serving model.
    fn default() -> Self {
        Sampling {
            window_s: DEFAULT_WINDOW_S,
            warmup_s: DEFAULT_WARMUP_S,
            max_requests: DEFAULT_MAX_REQUESTS,
            seed: 0,
            slowdown: 0.0,
            model_steady: true,
        }
    }
}

impl Sampling {
    /// Checks the sampling, naming the first field out of range.
    pub fn validate(&self) -> Result<(), AutopilotError> {
        if !(self.window_s.is_finite() && self.window_s > 0.0) {
            return Err(AutopilotError::invalid("window_s", format!("{} is not a positive duration", self.window_s)));
        }
        if !(self.warmup_s.is_finite() && self.warmup_s >= 0.0) {
            return Err(AutopilotError::invalid(
                "warmup_s",
                format!("{} is not a duration of 0 s or more", self.warmup_s),
            ));
        }
        if self.max_requests == 0 {
            return Err(AutopilotError::invalid("max_requests", "a window must measure at least one request"));
        }
        // The simulator's own check of the slowdown, before any is run.
        SimulationOptions { slowdown: self.slowdown, ..SimulationOptions::default() }.validate()?;
        Ok(())
    }

    /// The measured seconds of a service at `rate_rps` whose slowest full
    /// batch takes `batch_ms`: `window_s`, shortened to hold about
    /// `max_requests` requests but never below [`MIN_WINDOW_BATCHES`]
    /// batches. Its warm-up is `warmup_s` times this over `window_s`.
    pub fn service_window_s(&self, rate_rps: f64, batch_ms: f64) -> f64 {
        let floor_s = MIN_WINDOW_BATCHES * batch_ms / 1000.0;
        (self.max_requests as f64 / rate_rps).max(floor_s).min(self.window_s)
    }
}

/// How a day is measured: its sampling, each service's arrivals, and the
/// serving model's shares already computed (shared by the strategies
/// measured at once: what it answers does not depend on what it holds).
#[derive(Clone, Copy)]
pub(super) struct Measuring<'a> {
    pub sampling: &'a Sampling,
    /// Each service's arrival model (`None`, or none listed: as plans are
    /// made for).
    pub arrivals_by_service: &'a [Option<ArrivalModel>],
    pub model: &'a AttainmentCache,
}

/// What the pieces of one hour held.
#[derive(Debug, Clone, Default)]
pub(super) struct HourMeasures {
    /// GPU-seconds held.
    pub gpu_s: f64,
    /// Per service: requests that arrived.
    pub requests: Vec<f64>,
    /// Per service: requests within the SLO.
    pub within: Vec<f64>,
    /// Requests lost in transitions, all services.
    pub lost: f64,
    /// Most GPUs held at once.
    pub gpus_max: usize,
}

/// A day measured, hour by hour.
#[derive(Debug, Clone)]
pub(super) struct Measured {
    pub hours: Vec<HourMeasures>,
    /// Pieces simulated.
    pub pieces: usize,
    /// Requests simulated in all windows.
    pub requests_simulated: u64,
    /// Services of pieces measured by the serving model, not simulated.
    pub services_modelled: u64,
    /// Services of pieces that kept the measure of the state they were
    /// last measured in (see the module documentation).
    pub services_reused: u64,
    /// Services of pieces some of whose requests a carried backlog made
    /// late (see [`super::backlog`]).
    pub services_backlogged: u64,
}

/// One piece: a span of constant segments and rates within an hour.
struct Piece {
    span: usize,
    start_s: f64,
    end_s: f64,
}

/// The pieces of `timeline` under `traffic`.
fn pieces(timeline: &Timeline, traffic: &TrafficCurve) -> Vec<Piece> {
    let mut pieces = Vec::new();
    for (span_index, span) in timeline.spans.iter().enumerate() {
        let mut cuts = traffic.change_times(span.start_s, span.end_s);
        let first_hour = (span.start_s / 3600.0).floor() as usize + 1;
        cuts.extend((first_hour..).map(|hour| hour as f64 * 3600.0).take_while(|&t| t < span.end_s));
        cuts.sort_by(f64::total_cmp);
        cuts.dedup();
        let bounds: Vec<f64> = std::iter::once(span.start_s).chain(cuts).chain(std::iter::once(span.end_s)).collect();
        for window in bounds.windows(2) {
            pieces.push(Piece { span: span_index, start_s: window[0], end_s: window[1] });
        }
    }
    pieces
}

/// The number of pieces [`measure`] will simulate.
pub(super) fn piece_count(timeline: &Timeline, traffic: &TrafficCurve) -> usize {
    pieces(timeline, traffic).len()
}

/// What one piece measured.
#[derive(Default)]
struct PieceMeasures {
    /// Per served service: its index among the planner's services and its
    /// share of requests within its SLO.
    attainment: Vec<(usize, f64)>,
    /// Requests simulated, warm-up included.
    requests_simulated: u64,
    /// Services measured by the serving model.
    services_modelled: u64,
    /// Services that kept their last measure.
    services_reused: u64,
}

impl PieceMeasures {
    /// Counts `services` as measured as they were last.
    fn keep(&mut self, services: &[ServiceMeasure]) {
        self.services_reused += services.len() as u64;
        self.attainment.extend(services.iter().map(|measured| (measured.index, measured.share)));
    }
}

/// A group's last measure.
struct LastMeasure {
    /// The planner's index of each of its services.
    members: Vec<usize>,
    /// The last span whose segments of it were found to be those it was
    /// measured on.
    span: usize,
    /// The system it was measured on (alone), at the rates it had then.
    system: ServingSystem,
    /// What it measured.
    services: Vec<ServiceMeasure>,
}

/// Each group's last measure, by the planner's index of its first
/// service.
type LastMeasured = HashMap<usize, LastMeasure>;

/// The fleet's serving system in one span, and its groups (see
/// [`groups`]); its services' rates are those of the piece it was built
/// at, and are replaced by each group's own when one is measured.
struct SpanSystem {
    /// The span.
    span: usize,
    /// The planner's index of each service with a segment in the span.
    served: Vec<usize>,
    /// The planner's index of each service of `system`: those of `served`
    /// with a rate above zero.
    indices: Vec<usize>,
    system: ServingSystem,
    /// Each group's services, by their indices in `system`.
    groups: Vec<Vec<usize>>,
    /// How each service's backlog drains, by the planner's index (`None`:
    /// not carried, see [`drains`]).
    drains: Vec<Option<Drain>>,
}

impl SpanSystem {
    /// The span system of `span` (serving `serving`) at `rates_rps`, its
    /// GPUs `slowdown` slower than profiled: `kept` when it is that span's
    /// and serves the same services, else built anew; `None` when no
    /// service is served.
    fn at(
        kept: Option<SpanSystem>,
        planner: &Planner,
        (span, serving): (usize, &Plan),
        rates_rps: &[f64],
        slowdown: f64,
    ) -> Result<Option<SpanSystem>, AutopilotError> {
        if let Some(kept) = kept {
            let with_rates = kept.served.iter().copied().filter(|&index| rates_rps[index] > 0.0);
            if kept.span == span && with_rates.eq(kept.indices.iter().copied()) {
                return Ok(Some(kept));
            }
        }
        let Some((system, indices)) = planner.system_at(serving, rates_rps)? else {
            return Ok(None);
        };
        let provided = serving.provided_rps();
        let served = (0..planner.services().len())
            .filter(|&index| provided.contains_key(planner.services()[index].service.as_str()))
            .collect();
        let groups = groups(&system);
        let drains = drains(&system, (&indices, planner.services().len()), &groups, slowdown);
        Ok(Some(SpanSystem { span, served, indices, system, groups, drains }))
    }
}

/// Measures `timeline` (see the module documentation) as `measuring`
/// says; `step` is called after each piece and answers whether to go on
/// (`None`: it said stop).
pub(super) fn measure(
    planner: &Planner,
    timeline: &Timeline,
    traffic: &TrafficCurve,
    measuring: Measuring<'_>,
    hours: usize,
    step: &mut dyn FnMut() -> bool,
) -> Result<Option<Measured>, AutopilotError> {
    let services = planner.services().len();
    let empty = HourMeasures { requests: vec![0.0; services], within: vec![0.0; services], ..Default::default() };
    let mut measured = Measured {
        hours: vec![empty; hours],
        pieces: 0,
        requests_simulated: 0,
        services_modelled: 0,
        services_reused: 0,
        services_backlogged: 0,
    };
    let mut last_measured = LastMeasured::default();
    let mut backlogs = Backlogs::new(services);
    let mut span_system: Option<SpanSystem> = None;
    // Each span's segments, built once as its first piece comes.
    let mut serving_plans = timeline.serving_plans();
    let mut serving: Option<(usize, Arc<Plan>)> = None;
    // A transition span's capacities before, after and in it.
    let mut transition_capacities: Option<(usize, [Vec<f64>; 3])> = None;
    for piece in pieces(timeline, traffic) {
        let rates_rps = traffic.rates_rps(piece.start_s);
        let span = &timeline.spans[piece.span];
        let serving_plan = match &serving {
            Some((at, plan)) if *at == piece.span => plan.clone(),
            _ => {
                // Every span has a piece, and pieces come in span order.
                let plan = serving_plans.next().expect("a plan for every span, in order");
                serving = Some((piece.span, plan.clone()));
                plan
            }
        };
        let slowdown = measuring.sampling.slowdown;
        span_system = SpanSystem::at(span_system.take(), planner, (piece.span, &serving_plan), &rates_rps, slowdown)?;
        let length_s = piece.end_s - piece.start_s;
        let drain = |service: usize| span_system.as_ref().and_then(|serving| serving.drains[service]);
        let late: Vec<f64> = (0..services).map(|s| backlogs.advance(s, rates_rps[s], length_s, drain(s))).collect();
        let simulated = match &span_system {
            Some(serving) => {
                simulate_piece(planner, serving, (&rates_rps, &late, piece.start_s), measuring, &mut last_measured)?
            }
            None => PieceMeasures::default(),
        };
        let hour = ((piece.start_s / 3600.0) as usize).min(hours - 1);
        let tally = &mut measured.hours[hour];
        tally.gpu_s += span.gpus as f64 * length_s;
        tally.gpus_max = tally.gpus_max.max(span.gpus);
        for (service, &rate_rps) in rates_rps.iter().enumerate() {
            tally.requests[service] += rate_rps * length_s;
        }
        for (index, share) in simulated.attainment {
            tally.within[index] += share * (1.0 - late[index]) * rates_rps[index] * length_s;
        }
        if let Some((before, after)) = span.serving.between() {
            let [before_rps, after_rps, now_rps] = match &transition_capacities {
                Some((at, capacities)) if *at == piece.span => capacities,
                _ => {
                    let plans = [before, after, &*serving_plan];
                    &transition_capacities.insert((piece.span, plans.map(|plan| capacities(planner, plan)))).1
                }
            };
            let lost_rps: f64 =
                (0..services).map(|s| lost(rates_rps[s], before_rps[s], after_rps[s], now_rps[s])).sum();
            tally.lost += lost_rps * length_s;
        }
        measured.requests_simulated += simulated.requests_simulated;
        measured.services_modelled += simulated.services_modelled;
        measured.services_reused += simulated.services_reused;
        measured.services_backlogged += late.iter().filter(|&&share| share > 0.0).count() as u64;
        measured.pieces += 1;
        if !step() {
            return Ok(None);
        }
    }
    Ok(Some(measured))
}

/// One service of a piece, measured.
#[derive(Debug, Clone, Copy)]
struct ServiceMeasure {
    /// Its index among the planner's services.
    index: usize,
    /// Its share of requests within its SLO.
    share: f64,
}

/// One group of a piece measured: its services, and the requests
/// simulated for them (warm-up included; `None`: measured by the serving
/// model).
struct GroupMeasure {
    services: Vec<ServiceMeasure>,
    requests_simulated: Option<u64>,
}

/// Measures the segments of `serving` at `rates_rps` from `start_s`: each
/// group of served services (one service, or the members of a shared
/// instance, which wait behind each other) not at all where a carried
/// backlog makes all its requests late (`late`: each service's share of
/// requests made late, by the planner's index), as it was last measured where
/// nothing of it changed since, else from the serving model where it is
/// steady and `sampling` asks (see the module documentation), else
/// simulated on its own window (see [`Sampling::service_window_s`]).
fn simulate_piece(
    planner: &Planner,
    serving: &SpanSystem,
    (rates_rps, late, start_s): (&[f64], &[f64], f64),
    measuring: Measuring<'_>,
    last_measured: &mut LastMeasured,
) -> Result<PieceMeasures, AutopilotError> {
    let mut measures = PieceMeasures::default();
    let members_of =
        |served: &[usize]| -> Vec<usize> { served.iter().map(|&service| serving.indices[service]).collect() };
    // A group measured in this span keeps its segments: its rates alone
    // tell whether it changed, and a new rate is set on the system it was
    // measured on. Any other is set up anew and compared.
    let mut fresh: Vec<Fresh> = Vec::new();
    let mut check: Vec<&[usize]> = Vec::new();
    for served in &serving.groups {
        let members = members_of(served);
        // A carried backlog makes every request late: nothing to measure.
        if let [service] = members[..] {
            if late[service] >= 1.0 {
                measures.attainment.push((service, 0.0));
                continue;
            }
        }
        let at_rates = |system: &ServingSystem| {
            (system.services().iter().zip(&members)).all(|(service, &index)| service.rate_rps == rates_rps[index])
        };
        match last_measured.get(&members[0]) {
            Some(last) if last.members == members && last.span == serving.span => match at_rates(&last.system) {
                true => measures.keep(&last.services),
                false => {
                    let last = last_measured.remove(&members[0]).expect("the group's last measure, just found");
                    let system = last.system.with_rates(|member| rates_rps[members[member]])?;
                    fresh.push(Fresh::Rerated(Group { members, system }));
                }
            },
            Some(last) if last.members == members => check.push(served),
            _ => fresh.push(Fresh::Anew(served)),
        }
    }
    let alone = |served: &[usize]| -> Result<Group, AutopilotError> {
        let members = members_of(served);
        let system = group_alone(&serving.system, served, |member| rates_rps[members[member]])?;
        Ok(Group { members, system })
    };
    let checked: Vec<Group> = check.par_iter().map(|served| alone(served)).collect::<Result<_, _>>()?;
    let mut changed: Vec<Group> = (fresh.into_par_iter())
        .map(|fresh| match fresh {
            Fresh::Rerated(group) => Ok(group),
            Fresh::Anew(served) => alone(served),
        })
        .collect::<Result<_, _>>()?;
    for group in checked {
        match last_measured.get_mut(&group.members[0]) {
            Some(last) if same_state(&last.system, &group.system) => {
                last.span = serving.span;
                measures.keep(&last.services);
            }
            _ => changed.push(group),
        }
    }
    let piece_seed = measuring.sampling.seed ^ (start_s * 1000.0).round() as u64;
    let outcomes: Vec<Result<GroupMeasure, AutopilotError>> =
        changed.par_iter().map(|group| measure_group(planner, group, piece_seed, measuring)).collect();
    for (group, outcome) in changed.into_iter().zip(outcomes) {
        let GroupMeasure { services, requests_simulated } = outcome?;
        match requests_simulated {
            Some(requests) => measures.requests_simulated += requests,
            None => measures.services_modelled += services.len() as u64,
        }
        measures.attainment.extend(services.iter().map(|measured| (measured.index, measured.share)));
        let Group { members, system } = group;
        last_measured.insert(members[0], LastMeasure { members, span: serving.span, system, services });
    }
    Ok(measures)
}

/// A group of a piece to measure afresh.
enum Fresh<'a> {
    /// Measured before in the span, at other rates: its system at the
    /// piece's rates.
    Rerated(Group),
    /// Its services in the span system (their indices there), to set up
    /// alone.
    Anew(&'a [usize]),
}

/// Services measured together, alone with their segments.
struct Group {
    /// The planner's index of each service, in the order of `system`'s.
    members: Vec<usize>,
    /// The services with their segments and shared instances.
    system: ServingSystem,
}

/// Whether `a` and `b` serve the same services at the same rates on the
/// same segments and shared instances (their labels aside: where a
/// segment is does not change how it serves).
fn same_state(a: &ServingSystem, b: &ServingSystem) -> bool {
    let same_segment =
        |x: &ServedSegment, y: &ServedSegment| x.service == y.service && x.shape == y.shape && x.weight == y.weight;
    a.services() == b.services()
        && a.shared() == b.shared()
        && a.segments().len() == b.segments().len()
        && a.segments().iter().zip(b.segments()).all(|(x, y)| same_segment(x, y))
}

/// Measures one group of a piece whose windows are seeded from
/// `piece_seed`: from the serving model where it is steady and `sampling`
/// asks, else simulated on its own window.
fn measure_group(
    planner: &Planner,
    group: &Group,
    piece_seed: u64,
    Measuring { sampling, arrivals_by_service, model }: Measuring<'_>,
) -> Result<GroupMeasure, AutopilotError> {
    let alone = &group.system;
    let index_of = |member: usize| group.members[member];
    // Those who share arrive as Poisson (`DayRequest::validate`).
    let arrivals = arrivals_by_service.get(index_of(0)).cloned().flatten().unwrap_or_else(|| planner.arrivals());
    let slowed_system;
    let slowed = match sampling.slowdown {
        0.0 => alone,
        slowdown => {
            slowed_system = alone.slowed_by(slowdown);
            &slowed_system
        }
    };
    let modelled = || -> Result<Vec<ServiceMeasure>, AutopilotError> {
        (0..group.members.len())
            .map(|member| {
                let share = slowed.predicted_attainment_cached(member, model)?;
                Ok(ServiceMeasure { index: index_of(member), share })
            })
            .collect()
    };
    let steady = sampling.model_steady && below(slowed, MODEL_BELOW_LOAD) && arrivals == ArrivalModel::Poisson;
    // Mid-transition a member may serve beside its new place, which the
    // simulator does not run: the model measures it.
    if steady || alone.member_served_elsewhere().is_some() {
        return Ok(GroupMeasure { services: modelled()?, requests_simulated: None });
    }
    // A shortened window holds enough of the rarest service's requests.
    let window_s = if below(alone, FULL_WINDOW_LOAD) {
        let batch_ms = alone
            .segments()
            .iter()
            .map(|segment| segment.shape.latency_ms(segment.shape.max_batch()))
            .fold(0.0, f64::max);
        let window = |service: &ServedService| sampling.service_window_s(service.rate_rps, batch_ms);
        alone.services().iter().map(window).fold(0.0, f64::max)
    } else {
        sampling.window_s
    };
    let warmup_s = sampling.warmup_s * window_s / sampling.window_s;
    let options = SimulationOptions {
        arrivals,
        seconds: warmup_s + window_s,
        warmup_s,
        seed: SplitMix64::new(piece_seed ^ SplitMix64::new(index_of(0) as u64).next_u64()).next_u64(),
        slowdown: sampling.slowdown,
        ..SimulationOptions::default()
    };
    let counted = simulate_attainment(alone, &options)?;
    let mut services = Vec::with_capacity(group.members.len());
    for (member, attained) in counted.iter().enumerate() {
        let share = match attained.requests {
            0 => slowed.predicted_attainment(member)?,
            requests => attained.within_slo as f64 / requests as f64,
        };
        services.push(ServiceMeasure { index: index_of(member), share });
    }
    let requests_simulated = counted.iter().map(|attained| attained.simulated).sum();
    Ok(GroupMeasure { services, requests_simulated: Some(requests_simulated) })
}

/// Whether every segment of `system` is offered less than `load` of its
/// full-batch throughput, and every shared executor is busy less than
/// `load` of the time.
fn below(system: &ServingSystem, load: f64) -> bool {
    let segments = (0..system.segments().len()).all(|segment| system.offered_load(segment) < load);
    let executors = system
        .shared()
        .iter()
        .all(|group| group.iter().map(|&segment| system.offered_load(segment)).sum::<f64>() < load);
    segments && executors
}

/// Requests per second a service at `rate_rps` loses while a transition
/// from `before_rps` of capacity to `after_rps` leaves it `now_rps`: what
/// it lacks below all three (see the module documentation), none when the
/// difference is only the rounding of capacities summed in another order
/// (a relative 1e-9).
fn lost(rate_rps: f64, before_rps: f64, after_rps: f64, now_rps: f64) -> f64 {
    let shortfall_rps = rate_rps.min(before_rps).min(after_rps) - now_rps;
    if shortfall_rps > 1e-9 * before_rps.max(f64::MIN_POSITIVE) {
        shortfall_rps
    } else {
        0.0
    }
}

/// Each service's capacity in `plan` (its segments' and its shares of
/// shared instances), req/s, in the planner's order.
fn capacities(planner: &Planner, plan: &Plan) -> Vec<f64> {
    let provided = plan.provided_rps();
    planner.services().iter().map(|slo| provided.get(slo.service.as_str()).copied().unwrap_or(0.0)).collect()
}

#[cfg(test)]
mod tests {
    use tessera_core::{GpuModel, TrafficPoint};
    use tessera_plan::PlanInputs;

    use super::*;
    use crate::planner::PlanSettings;

    /// The demo's services at their SLO rates for an hour, service 0 at
    /// each `(time_s, factor)` times its rate from that time on.
    fn hour_with(inputs: &PlanInputs, changes: &[(f64, f64)]) -> TrafficCurve {
        let names: Vec<String> = inputs.services().iter().map(|slo| slo.service.clone()).collect();
        let mut points: Vec<TrafficPoint> = inputs
            .services()
            .iter()
            .map(|slo| TrafficPoint { time_s: 0.0, service: slo.service.clone(), rate_rps: slo.rate_rps })
            .collect();
        let first = &inputs.services()[0];
        for &(time_s, factor) in changes {
            points.push(TrafficPoint { time_s, service: first.service.clone(), rate_rps: first.rate_rps * factor });
        }
        TrafficCurve::new(&names, &points).unwrap()
    }

    /// The demo's hour of `hour_with(changes)` on a plan for the SLO
    /// rates, measured with every service simulated (a fresh window would
    /// draw a new sample) on 5-s windows.
    fn measured_hour(changes: &[(f64, f64)]) -> Measured {
        let inputs = PlanInputs::demo(&[GpuModel::A100_80GB]).unwrap();
        let rates_rps: Vec<f64> = inputs.services().iter().map(|slo| slo.rate_rps).collect();
        let planner = Planner::new(inputs.clone(), PlanSettings::default());
        let timeline = Timeline::new(&planner.fresh(&rates_rps).unwrap(), 3600.0);
        let sampling = Sampling { window_s: 5.0, warmup_s: 1.0, model_steady: false, ..Sampling::default() };
        let measuring = Measuring { sampling: &sampling, arrivals_by_service: &[], model: &AttainmentCache::new() };
        measure(&planner, &timeline, &hour_with(&inputs, changes), measuring, 1, &mut || true).unwrap().unwrap()
    }

    /// The demo's SLO rates, in its services' order.
    fn demo_rates_rps() -> Vec<f64> {
        PlanInputs::demo(&[GpuModel::A100_80GB]).unwrap().services().iter().map(|slo| slo.rate_rps).collect()
    }

    #[test]
    fn a_rate_change_of_one_service_remeasures_that_service_alone() {
        let rates_rps = demo_rates_rps();
        // Service 0 at `blip` times its rate in [1800, 1860) s.
        let measure_with = |blip: f64| measured_hour(&[(1800.0, blip), (1860.0, 1.0)]);
        let (calm, blipped) = (measure_with(1.0), measure_with(0.9));
        let services = rates_rps.len() as u64;
        // Both are cut at 1800 s and 1860 s, where service 0 has a point.
        assert_eq!((calm.pieces, blipped.pieces), (3, 3));
        // Calm, every service keeps its first window's measure; with the
        // blip, service 0 is measured at each of its rates.
        assert_eq!(calm.services_reused, 2 * services);
        assert_eq!(blipped.services_reused, 2 * (services - 1));
        for service in 1..rates_rps.len() {
            let share = |measured: &Measured| measured.hours[0].within[service] / measured.hours[0].requests[service];
            assert!((share(&calm) - share(&blipped)).abs() < 1e-12, "service {service}");
        }
    }

    #[test]
    fn an_overload_carries_its_backlog_into_the_pieces_after_and_those_are_not_simulated() {
        let rates_rps = demo_rates_rps();
        // Service 0 at twice its planned rate for ten minutes (a point every
        // minute, so ten pieces), then as planned.
        let mut changes: Vec<(f64, f64)> = (0..10).map(|minute| (1800.0 + 60.0 * minute as f64, 2.0)).collect();
        changes.push((2400.0, 1.0));
        let (overloaded, calm) = (measured_hour(&changes), measured_hour(&[]));
        let share = |measured: &Measured, service: usize| {
            measured.hours[0].within[service] / measured.hours[0].requests[service]
        };
        // Late from the second minute of the overload on (and after it,
        // while the backlog drains): the last nine minutes at twice the
        // rate are none of them within.
        let within_at_most = 1.0 - 2.0 * 540.0 / (1800.0 + 2.0 * 600.0 + 1200.0);
        assert!(share(&overloaded, 0) < within_at_most, "{}", share(&overloaded, 0));
        assert!(share(&calm, 0) > 0.99, "{}", share(&calm, 0));
        // Nine of the overload's pieces, and the draining pieces after, are
        // late by the backlog; the other services are not touched.
        assert!(overloaded.services_backlogged >= 9, "{}", overloaded.services_backlogged);
        assert_eq!(calm.services_backlogged, 0);
        // Only the overload's first minute, and the first after it, are
        // simulated (a window of 6 s each, the first at twice the rate),
        // not ten windows at twice the rate.
        let window_requests = 2.0 * rates_rps[0] * 6.0;
        let extra = overloaded.requests_simulated - calm.requests_simulated;
        assert!((extra as f64) < 3.0 * window_requests, "{extra} requests beyond the calm hour's");
        for service in 1..rates_rps.len() {
            assert!((share(&overloaded, service) - share(&calm, service)).abs() < 1e-12, "service {service}");
        }
    }

    #[test]
    fn a_transition_loses_what_it_takes_below_both_plans_and_the_rate_and_no_rounding() {
        // Capacity summed in another order: not a loss.
        let before_rps = 0.1 + 0.2 + 0.3;
        let now_rps = 0.3 + 0.2 + 0.1;
        assert_ne!(before_rps, now_rps);
        assert_eq!(lost(1.0, before_rps, before_rps, now_rps), 0.0);
        // Below the rate and both plans: the difference.
        assert_eq!(lost(100.0, 80.0, 90.0, 50.0), 30.0);
        assert_eq!(lost(60.0, 80.0, 90.0, 50.0), 10.0);
        // A rate above the old capacity is the traffic's doing.
        assert_eq!(lost(100.0, 50.0, 90.0, 50.0), 0.0);
        // A scale-down's step at the new plan's capacity takes nothing the
        // new plan would serve: a rate above it is the new plan's shortfall.
        assert_eq!(lost(100.0, 90.0, 60.0, 60.0), 0.0);
        assert_eq!(lost(100.0, 90.0, 60.0, 55.0), 5.0);
    }
}
