//! What a simulated day reports: per strategy, hour by hour and in total.

use serde::Serialize;

use super::measure::{HourMeasures, Measured, Sampling};
use super::timeline::Timeline;
use crate::controller::{ControllerConfig, JournalEntry};
use crate::forecast::ForecastAccuracy;

/// The figures of one strategy over an hour or the day.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Tally {
    /// GPU-hours held (during a transition, the old plan's GPUs and the
    /// new plan's).
    pub gpu_hours: f64,
    /// The most GPUs held at once.
    pub gpus_max: usize,
    /// Requests that arrived (rate times time).
    pub requests: f64,
    /// Of them, within their service's SLO (measured on sampled windows).
    pub requests_within_slo: f64,
    /// The share of requests within their SLO; `None` without requests.
    pub attainment: Option<f64>,
    /// The service with the lowest share within its SLO.
    pub worst_service: Option<String>,
    /// Its share.
    pub worst_service_attainment: Option<f64>,
    /// Reconfigurations started.
    pub reconfigurations: usize,
    /// GPUs whose MIG layout changed (created, changed or torn down),
    /// summed over the reconfigurations.
    pub gpus_reconfigured: usize,
    /// MPS processes started by the reconfigurations.
    pub processes_started: u64,
    /// Requests above the capacity of the segments serving while a
    /// transition ran.
    pub requests_lost: f64,
}

/// One hour of one strategy.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HourRow {
    /// The hour (0 for the first).
    pub hour: usize,
    /// Its figures.
    #[serde(flatten)]
    pub tally: Tally,
}

/// One service over the day under one strategy.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServiceDay {
    /// The service.
    pub service: String,
    /// Requests that arrived.
    pub requests: f64,
    /// Of them, within its SLO.
    pub requests_within_slo: f64,
    /// The share within its SLO; `None` without requests.
    pub attainment: Option<f64>,
}

/// GPUs held from a time on (to the next step, or the day's end).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct GpuStep {
    /// From when, seconds.
    pub time_s: f64,
    /// GPUs held.
    pub gpus: usize,
}

/// One strategy's day.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StrategyDay {
    /// The whole day.
    pub totals: Tally,
    /// Hour by hour.
    pub hours: Vec<HourRow>,
    /// Service by service, over the day.
    pub services: Vec<ServiceDay>,
    /// GPUs held over the day, a step each time the number changes.
    pub gpus_over_time: Vec<GpuStep>,
}

/// A simulated day: the autopilot and two baselines on the same traffic.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DayReport {
    /// Hours simulated.
    pub hours: f64,
    /// Seconds between decisions.
    pub interval_s: f64,
    /// How each piece of the day was sampled.
    pub sampling: Sampling,
    /// The controller's configuration.
    pub controller: ControllerConfig,
    /// The autopilot.
    pub autopilot: StrategyDay,
    /// One plan for the whole day, made for each service's peak rate.
    pub static_peak: StrategyDay,
    /// A fresh plan at every decision (for the same forecast and headroom
    /// as the autopilot), numbered and seated to change as little as
    /// possible.
    pub scratch: StrategyDay,
    /// Mean demand of each hour, all services, req/s.
    pub demand_rps: Vec<f64>,
    /// The autopilot's decisions.
    pub journal: Vec<JournalEntry>,
    /// How far the autopilot's forecasts were off.
    pub forecast: ForecastAccuracy,
    /// Pieces of the day measured, all strategies.
    pub pieces_simulated: usize,
    /// Requests simulated in all sampled windows.
    pub requests_simulated: u64,
    /// Services of pieces measured by the serving model (steady: see
    /// [`Sampling::model_steady`]), not simulated.
    pub services_modelled: u64,
    /// Times the serving model was evaluated for them (at rates of its
    /// grid, or exactly: see [`tessera_serving::analytic::AttainmentCache`]).
    pub model_evaluations: u64,
    /// Services of pieces that kept the measure of the state they were
    /// last measured in (nothing of them changed since).
    pub services_reused: u64,
    /// Services of pieces some of whose requests the backlog carried from
    /// the pieces before made late (all of them: not measured).
    pub services_backlogged: u64,
}

/// One strategy's day from its timeline and measures.
pub(super) fn strategy_day(names: &[String], timeline: &Timeline, measured: &Measured) -> StrategyDay {
    let hours: Vec<HourRow> = measured
        .hours
        .iter()
        .enumerate()
        .map(|(hour, measures)| {
            let start_s = hour as f64 * 3600.0;
            let reconfigured: Vec<_> = timeline
                .reconfigurations
                .iter()
                .filter(|r| r.time_s >= start_s && r.time_s < start_s + 3600.0)
                .copied()
                .collect();
            HourRow {
                hour,
                tally: tally(
                    names,
                    measures,
                    reconfigured.len(),
                    reconfigured.iter().map(|r| r.gpus).sum(),
                    reconfigured.iter().map(|r| r.processes).sum(),
                ),
            }
        })
        .collect();
    let services = names.len();
    let mut day = HourMeasures { requests: vec![0.0; services], within: vec![0.0; services], ..Default::default() };
    for hour in &measured.hours {
        day.gpu_s += hour.gpu_s;
        day.lost += hour.lost;
        day.gpus_max = day.gpus_max.max(hour.gpus_max);
        for service in 0..services {
            day.requests[service] += hour.requests[service];
            day.within[service] += hour.within[service];
        }
    }
    let reconfigurations = &timeline.reconfigurations;
    let totals = tally(
        names,
        &day,
        reconfigurations.len(),
        reconfigurations.iter().map(|r| r.gpus).sum(),
        reconfigurations.iter().map(|r| r.processes).sum(),
    );
    let services = names
        .iter()
        .enumerate()
        .map(|(index, name)| ServiceDay {
            service: name.clone(),
            requests: day.requests[index],
            requests_within_slo: day.within[index],
            attainment: share(day.within[index], day.requests[index]),
        })
        .collect();
    let mut gpus_over_time: Vec<GpuStep> = Vec::new();
    for span in &timeline.spans {
        if gpus_over_time.last().is_none_or(|last| last.gpus != span.gpus) {
            gpus_over_time.push(GpuStep { time_s: span.start_s, gpus: span.gpus });
        }
    }
    StrategyDay { totals, hours, services, gpus_over_time }
}

/// The tally of `measures` with the reconfigurations counted.
fn tally(
    names: &[String],
    measures: &HourMeasures,
    reconfigurations: usize,
    gpus_reconfigured: usize,
    processes_started: u64,
) -> Tally {
    let requests: f64 = measures.requests.iter().sum();
    let within: f64 = measures.within.iter().sum();
    let worst = (0..names.len())
        .filter_map(|index| share(measures.within[index], measures.requests[index]).map(|share| (index, share)))
        .min_by(|a, b| a.1.total_cmp(&b.1));
    Tally {
        gpu_hours: measures.gpu_s / 3600.0,
        gpus_max: measures.gpus_max,
        requests,
        requests_within_slo: within,
        attainment: share(within, requests),
        worst_service: worst.map(|(index, _)| names[index].clone()),
        worst_service_attainment: worst.map(|(_, share)| share),
        reconfigurations,
        gpus_reconfigured,
        processes_started,
        requests_lost: measures.lost,
    }
}

/// `part / whole`, `None` when `whole` is zero.
fn share(part: f64, whole: f64) -> Option<f64> {
    (whole > 0.0).then(|| part / whole)
}
