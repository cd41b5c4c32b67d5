//! What a simulation reports, and how the runs of every service and
//! replication are summed into it.

use serde::Serialize;

use super::service::{SegmentTally, ServiceRun, Unit};
use super::stats::{interval_95, Interval};
use super::SimulationOptions;
use crate::histogram::Histogram;
use crate::system::{ServedService, ServingSystem};

/// The quantiles of a latency CDF: every percent, then the far tail.
const CDF_TAIL: [f64; 3] = [0.995, 0.999, 1.0];

/// What a simulation measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServingReport {
    /// Per service, in the system's order.
    pub services: Vec<ServiceOutcome>,
    /// Per segment, in the system's order.
    pub segments: Vec<SegmentOutcome>,
    /// Requests simulated, warm-up included, all replications.
    pub requests_simulated: u64,
    /// Requests measured (arrived after the warm-up), all replications.
    pub requests_measured: u64,
    /// Measured requests within their service's SLO over all measured
    /// requests; `None` when none was measured.
    pub attainment: Option<f64>,
    /// The service with the lowest attainment (ties: the first), among
    /// those with measured requests.
    pub worst: Option<WorstService>,
    /// Measured seconds per replication (`seconds − warmup_s`).
    pub measured_s: f64,
    /// Independent replications run.
    pub replications: u32,
}

/// The service that fared worst.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorstService {
    /// Its name.
    pub name: String,
    /// Its attainment.
    pub attainment: f64,
}

/// How one service fared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServiceOutcome {
    /// The service's name.
    pub name: String,
    /// Its mean request rate, req/s.
    pub rate_rps: f64,
    /// Its latency SLO, ms.
    pub latency_slo_ms: f64,
    /// The share of its requests (%) that must finish within the SLO.
    pub percentile: f64,
    /// Measured requests (all replications).
    pub requests: u64,
    /// Measured requests within the latency SLO.
    pub within_slo: u64,
    /// Requests within the SLO per measured second (mean over
    /// replications).
    pub goodput_rps: f64,
    /// Attainment and latency; `None` when no request was measured.
    pub measures: Option<ServiceMeasures>,
    /// Attainment over time (warm-up included), when asked for.
    pub timeline: Vec<TimelineBucket>,
    /// With windows asked for: how many of its windows (whole ones after
    /// the warm-up with requests, in every replication) kept the service's
    /// percentile within its SLO, as operators measure SLOs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub windows: Option<WindowsMet>,
}

/// How many of a service's measurement windows met its percentile, and
/// how low its windows' attainment went.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct WindowsMet {
    /// A window's length, seconds.
    pub window_s: f64,
    /// Windows counted: whole ones after the warm-up with requests.
    pub windows: u64,
    /// Those whose attainment reached the percentile.
    pub met: u64,
    /// The least attainment of a window; `None` without windows.
    pub worst_attainment: Option<f64>,
    /// The attainment that 95% of the windows reach or exceed (the
    /// windows' 5th percentile, the lower one where it falls between two);
    /// `None` without windows. "At least 98% in 95% of one-minute windows"
    /// is this at 0.98 or more.
    pub p5_attainment: Option<f64>,
}

impl WindowsMet {
    /// The windows of `window_s` seconds whose `[requests, within SLO]`
    /// are `counts` (windows without requests are left out), judged at
    /// `percentile` (%).
    pub(super) fn from_counts(window_s: f64, counts: &[[u64; 2]], percentile: f64) -> WindowsMet {
        let mut attainments: Vec<f64> = counts
            .iter()
            .filter(|[requests, _]| *requests > 0)
            .map(|[requests, within]| *within as f64 / *requests as f64)
            .collect();
        attainments.sort_by(f64::total_cmp);
        let met = counts
            .iter()
            .filter(|[requests, within]| *requests > 0 && *within as f64 >= *requests as f64 * percentile / 100.0)
            .count();
        // Windows from this index up are at least 95% of them.
        let fifth = (0.05 * attainments.len() as f64 + 1e-9).floor() as usize;
        WindowsMet {
            window_s,
            windows: attainments.len() as u64,
            met: met as u64,
            worst_attainment: attainments.first().copied(),
            p5_attainment: attainments.get(fifth).copied(),
        }
    }

    /// The share of windows met; `None` without windows.
    pub fn share(&self) -> Option<f64> {
        (self.windows > 0).then(|| self.met as f64 / self.windows as f64)
    }
}

/// What a run says of a service's SLO.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SloVerdict {
    /// The measured attainment reaches the percentile.
    Met,
    /// It falls short, but the top of its 95% interval reaches the
    /// percentile: the run is too short to tell.
    Unclear,
    /// It falls short, and so does the top of its 95% interval (or the run
    /// has no interval).
    Missed,
}

impl SloVerdict {
    /// The verdict on `attainment` (with its interval, if any) against
    /// `percentile` (%).
    pub fn judge(attainment: f64, interval: Option<Interval>, percentile: f64) -> SloVerdict {
        let target = percentile / 100.0;
        if attainment >= target {
            SloVerdict::Met
        } else if interval.is_some_and(|ci| ci.high >= target) {
            SloVerdict::Unclear
        } else {
            SloVerdict::Missed
        }
    }

    /// `yes`, `unclear` or `NO`, for tables.
    pub fn word(self) -> &'static str {
        match self {
            SloVerdict::Met => "yes",
            SloVerdict::Unclear => "unclear",
            SloVerdict::Missed => "NO",
        }
    }
}

/// Attainment and latency of a service with measured requests.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServiceMeasures {
    /// The share of measured requests within the latency SLO.
    pub attainment: f64,
    /// Its 95% confidence interval, centred on the attainment above:
    /// Student's t over independent replications, or over 10 batches of the
    /// measured time (by arrival) when there is one replication; `None`
    /// with fewer than two non-empty units. Batches of one run are
    /// correlated: under heavy load the interval is too narrow.
    pub attainment_ci: Option<Interval>,
    /// Whether the attainment reaches the service's percentile (e.g. 0.99
    /// of requests within the SLO for 99.0), as far as the run can tell.
    pub verdict: SloVerdict,
    /// Mean latency, ms (exact).
    pub mean_ms: f64,
    /// Median latency, ms.
    pub p50_ms: f64,
    /// 95th percentile latency, ms.
    pub p95_ms: f64,
    /// 99th percentile latency, ms.
    pub p99_ms: f64,
    /// 99.9th percentile latency, ms.
    pub p999_ms: f64,
    /// Largest latency, ms (exact).
    pub max_ms: f64,
    /// The 95% confidence interval of the 99th percentile, as for the
    /// attainment.
    pub p99_ci_ms: Option<Interval>,
    /// The latency CDF: the latency at every percent, at 99.5%, 99.9% and
    /// 100%.
    pub cdf: Vec<CdfPoint>,
}

/// One point of a latency CDF.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CdfPoint {
    /// A latency, ms.
    pub latency_ms: f64,
    /// The share of measured requests at or below it.
    pub share: f64,
}

/// Requests that arrived in one bucket of time (all replications).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TimelineBucket {
    /// The bucket's start, seconds from the run's start.
    pub start_s: f64,
    /// Requests that arrived in it.
    pub requests: u64,
    /// Those within the latency SLO.
    pub within_slo: u64,
}

impl TimelineBucket {
    /// The bucket's attainment; `None` without requests.
    pub fn attainment(&self) -> Option<f64> {
        (self.requests > 0).then(|| self.within_slo as f64 / self.requests as f64)
    }
}

/// How one segment fared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SegmentOutcome {
    /// The segment's label.
    pub label: String,
    /// The service it serves.
    pub service: String,
    /// The rate routed to it over its throughput with full batches.
    pub offered_load: f64,
    /// Busy process-time over (processes × measured time).
    pub utilisation: f64,
    /// Measured requests routed to it (all replications).
    pub requests: u64,
    /// Mean requests per batch of the batches started after the warm-up;
    /// `None` when none started.
    pub mean_batch: Option<f64>,
}

/// One service's runs (every replication) summed: its outcome, its
/// segments' tallies and the requests simulated. Done as soon as the
/// service has run, so a run of many services holds one service's
/// histograms per thread.
pub(super) struct ServiceSummary {
    outcome: ServiceOutcome,
    segments: Vec<(usize, SegmentTally)>,
    simulated: u64,
}

/// Sums the replications of `service`.
pub(super) fn summarise_service(
    service: &ServedService,
    options: &SimulationOptions,
    runs: Vec<ServiceRun>,
) -> ServiceSummary {
    let bucket_s = options.timeline_bucket_s.unwrap_or(0.0);
    let mut timeline: Vec<TimelineBucket> = (0..options.timeline_buckets())
        .map(|i| TimelineBucket { start_s: i as f64 * bucket_s, requests: 0, within_slo: 0 })
        .collect();
    let mut segments: Vec<(usize, SegmentTally)> = Vec::new();
    let mut simulated = 0;
    let mut units = Vec::new();
    let mut window_counts: Vec<[u64; 2]> = Vec::new();
    for run in runs {
        simulated += run.simulated;
        window_counts.extend(&run.windows);
        for (bucket, [requests, within]) in timeline.iter_mut().zip(&run.timeline) {
            bucket.requests += requests;
            bucket.within_slo += within;
        }
        if segments.is_empty() {
            segments = run.segments;
        } else {
            for ((_, sum), (_, tally)) in segments.iter_mut().zip(&run.segments) {
                sum.add(tally);
            }
        }
        units.extend(run.units);
    }
    let mut all = Unit::default();
    for unit in &units {
        all.latencies.merge(&unit.latencies);
        all.within_slo += unit.within_slo;
    }
    let measured_s = (options.seconds - options.warmup_s) * f64::from(options.replications);
    let outcome = ServiceOutcome {
        name: service.name.clone(),
        rate_rps: service.rate_rps,
        latency_slo_ms: service.latency_slo_ms,
        percentile: service.percentile,
        requests: all.latencies.count(),
        within_slo: all.within_slo,
        goodput_rps: all.within_slo as f64 / measured_s,
        measures: measures(&all, &units, service.percentile),
        timeline,
        windows: options.window_s.map(|window_s| WindowsMet::from_counts(window_s, &window_counts, service.percentile)),
    };
    ServiceSummary { outcome, segments, simulated }
}

/// The report from every service's summary, in the system's order.
pub(super) fn assemble(
    system: &ServingSystem,
    options: &SimulationOptions,
    summaries: Vec<ServiceSummary>,
) -> ServingReport {
    let replications = options.replications;
    let measured_s = options.seconds - options.warmup_s;
    let mut tallies = vec![SegmentTally::default(); system.segments().len()];
    let mut requests_simulated = 0;
    let mut outcomes = Vec::with_capacity(summaries.len());
    for summary in summaries {
        requests_simulated += summary.simulated;
        for (segment, tally) in summary.segments {
            tallies[segment] = tally;
        }
        outcomes.push(summary.outcome);
    }
    let requests_measured = outcomes.iter().map(|o| o.requests).sum::<u64>();
    let within = outcomes.iter().map(|o| o.within_slo).sum::<u64>();
    let worst = outcomes
        .iter()
        .filter_map(|o| o.measures.as_ref().map(|m| (o, m.attainment)))
        .fold(None, |worst: Option<(&ServiceOutcome, f64)>, (o, a)| match worst {
            Some((_, least)) if least <= a => worst,
            _ => Some((o, a)),
        })
        .map(|(o, attainment)| WorstService { name: o.name.clone(), attainment });
    let segments = system
        .segments()
        .iter()
        .zip(tallies)
        .enumerate()
        .map(|(index, (segment, tally))| SegmentOutcome {
            label: segment.label.clone(),
            service: system.services()[segment.service].name.clone(),
            offered_load: system.offered_load(index),
            utilisation: tally.busy_s / (f64::from(segment.shape.procs()) * measured_s * f64::from(replications)),
            requests: tally.requests,
            mean_batch: (tally.batches > 0).then(|| tally.batched as f64 / tally.batches as f64),
        })
        .collect();
    ServingReport {
        services: outcomes,
        segments,
        requests_simulated,
        requests_measured,
        attainment: (requests_measured > 0).then(|| within as f64 / requests_measured as f64),
        worst,
        measured_s,
        replications,
    }
}

/// A service's measures from all its requests and its units.
fn measures(all: &Unit, units: &[Unit], percentile: f64) -> Option<ServiceMeasures> {
    let requests = all.latencies.count();
    let mean_ms = all.latencies.mean_ms()?;
    let attainment = all.within_slo as f64 / requests as f64;
    let p99 = |latencies: &Histogram| latencies.quantile_ms(0.99);
    let filled: Vec<&Unit> = units.iter().filter(|unit| unit.latencies.count() > 0).collect();
    let unit_attainments: Vec<f64> =
        filled.iter().map(|unit| unit.within_slo as f64 / unit.latencies.count() as f64).collect();
    let unit_p99s: Vec<f64> = filled.iter().filter_map(|unit| p99(&unit.latencies)).collect();
    let shares: Vec<f64> = (1..100).map(|i| f64::from(i) / 100.0).chain(CDF_TAIL).collect();
    let cdf = shares
        .iter()
        .zip(all.latencies.quantiles_ms(&shares))
        .map(|(&share, latency_ms)| CdfPoint { latency_ms, share })
        .collect();
    let &[p50_ms, p95_ms, p99_ms, p999_ms] = all.latencies.quantiles_ms(&[0.5, 0.95, 0.99, 0.999]).as_slice() else {
        return None;
    };
    let attainment_ci = interval_95(attainment, &unit_attainments, 0.0, 1.0);
    Some(ServiceMeasures {
        attainment,
        attainment_ci,
        verdict: SloVerdict::judge(attainment, attainment_ci, percentile),
        mean_ms,
        p50_ms,
        p95_ms,
        p99_ms,
        p999_ms,
        max_ms: all.latencies.max_ms()?,
        p99_ci_ms: interval_95(p99_ms, &unit_p99s, 0.0, f64::INFINITY),
        cdf,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_count_those_met_and_the_attainment_95_percent_of_them_reach() {
        // Twenty windows with requests: 17 at 100%, one at 99%, one at
        // 98.5%, one at 90%; and one without requests, left out.
        let mut counts = vec![[100, 100]; 17];
        counts.extend([[100, 99], [200, 197], [0, 0], [10, 9]]);
        let windows = WindowsMet::from_counts(60.0, &counts, 99.0);
        assert_eq!((windows.windows, windows.met), (20, 18));
        assert_eq!(windows.worst_attainment, Some(0.9));
        // The fifth percentile of 20 windows is the second lowest: 19 of
        // them (95%) reach it.
        assert_eq!(windows.p5_attainment, Some(0.985));
        assert_eq!(windows.share(), Some(0.9));
        let few = WindowsMet::from_counts(60.0, &counts[17..], 99.0);
        assert_eq!((few.windows, few.p5_attainment), (3, Some(0.9)), "under 20 windows the worst one counts");
        let none = WindowsMet::from_counts(60.0, &[[0, 0]], 99.0);
        assert_eq!((none.windows, none.worst_attainment, none.p5_attainment, none.share()), (0, None, None, None));
    }
}
