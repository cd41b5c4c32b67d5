//! A shared instance under the serialized discipline: one executor runs
//! one batch at a time, taking it from the member queue whose oldest
//! request is oldest.
//!
//! With every member at batch 1 (what the planner makes) the executor
//! serves requests one at a time in arrival order across members: under
//! Poisson arrivals the instance is an M/G/1 first-come-first-served
//! queue whose service time is member `j`'s batch time with probability
//! `λⱼ / Λ`. A request's wait `W` is then the same for every member
//! (Pollaczek–Khinchine: `W` is a geometric sum, `P(N = n) = (1 − ρ) ρⁿ`,
//! of residual service times with density `(1 − G(x)) / E[S]`), and member
//! `i`'s latency is `W + Sᵢ`. [`SerializedQueue`] computes `W`'s
//! distribution on a grid with every residual time rounded up to the next
//! grid point, so its attainments are never above the exact ones and are
//! within one grid step of waiting per residual term of them.

use tessera_core::plan::{TOLERANCE_PRECISION, TOLERANCE_RANGE};

use crate::error::ServingError;

/// Grid points of a waiting-time table (its resolution: the horizon /
/// `GRID_POINTS`).
pub const GRID_POINTS: usize = 2048;

/// The horizon of an instance's waiting-time table, in multiples of its
/// members' longest SLO (percentile latencies beyond it are infinite).
pub const HORIZON_SLOS: f64 = 2.0;

/// One member of a serialized instance: its load and its objective.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Member {
    /// Its load on the executor.
    pub load: MemberLoad,
    /// Its latency SLO, ms.
    pub slo_ms: f64,
    /// The share of its requests (%, e.g. 99) that must finish within it.
    pub percentile: f64,
}

/// What the model says of one member of a serialized instance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemberFigures {
    /// Its share of requests within its SLO (0 to 1).
    pub attainment: f64,
    /// Its percentile latency, ms (infinite past [`HORIZON_SLOS`] times the
    /// longest SLO of its instance).
    pub latency_ms: f64,
    /// The largest uniform slowdown of every member's batches at which it
    /// still meets its percentile (within [`TOLERANCE_RANGE`], to
    /// [`TOLERANCE_PRECISION`] from below); below the range's low end when
    /// it misses even there.
    pub tolerance: f64,
}

/// Whether every one of `members` meets its percentile SLO with every
/// batch `slowdown` slower than profiled (an unstable instance meets none).
pub fn all_meet(members: &[Member], slowdown: f64) -> bool {
    let Ok(queue) = SerializedQueue::of(members, slowdown) else { return false };
    members.iter().all(|m| queue.meets(m, slowdown))
}

/// The figures of member `index` of `members` with every batch `slowdown`
/// slower than profiled (its attainment and percentile latency) and its
/// tolerance.
pub fn member_figures(members: &[Member], index: usize, slowdown: f64) -> Result<MemberFigures, ServingError> {
    let member = members.get(index).ok_or_else(|| ServingError::invalid("member", format!("no member {index}")))?;
    let busy_ms = member.load.busy_ms * (1.0 + slowdown);
    let queue = SerializedQueue::of(members, slowdown)?;
    let attainment = queue.waiting_within(member.slo_ms - busy_ms);
    let latency_ms = queue.waiting_quantile(member.percentile / 100.0).map_or(f64::INFINITY, |wait| wait + busy_ms);
    let meets = |slowdown: f64| SerializedQueue::of(members, slowdown).is_ok_and(|queue| queue.meets(member, slowdown));
    let (mut low, mut high) = TOLERANCE_RANGE;
    let tolerance = if meets(high) {
        high
    } else if !meets(low) {
        low - TOLERANCE_PRECISION
    } else {
        while high - low > TOLERANCE_PRECISION {
            let middle = 0.5 * (low + high);
            if meets(middle) {
                low = middle;
            } else {
                high = middle;
            }
        }
        low
    };
    Ok(MemberFigures { attainment, latency_ms, tolerance })
}

/// One member's load on a serialized instance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemberLoad {
    /// Requests per second routed to the member.
    pub rate_rps: f64,
    /// The time one of its batches (of one request) holds the executor, ms.
    pub busy_ms: f64,
}

impl MemberLoad {
    /// The share of time the executor is busy with this member.
    pub fn busy_share(&self) -> f64 {
        self.rate_rps * self.busy_ms / 1000.0
    }
}

/// The share of time an executor serving `members` is busy, as profiled
/// (1 or more: it cannot keep up).
pub fn busy_share(members: &[Member]) -> f64 {
    members.iter().map(|member| member.load.busy_share()).sum()
}

/// The waiting-time distribution of a serialized instance's requests
/// under Poisson arrivals, rounded up to a grid (see the module docs).
#[derive(Debug, Clone)]
pub struct SerializedQueue {
    step_ms: f64,
    /// `P(W ≤ k · step)` for `k` in `0..=points`.
    within: Vec<f64>,
}

impl SerializedQueue {
    /// The queue of `members`, each batch `slowdown` slower than profiled,
    /// tabulated to `horizon_ms`. An instance busy all the time or more
    /// (ρ ≥ 1) is an error naming its load.
    pub fn new(members: &[MemberLoad], slowdown: f64, horizon_ms: f64) -> Result<SerializedQueue, ServingError> {
        if members.is_empty() {
            return Err(ServingError::invalid("members", "a shared instance needs at least one member"));
        }
        if let Some(bad) = members
            .iter()
            .find(|m| !(m.rate_rps.is_finite() && m.rate_rps > 0.0 && m.busy_ms.is_finite() && m.busy_ms > 0.0))
        {
            return Err(ServingError::invalid(
                "members",
                format!("rate {} req/s, batch time {} ms is not positive", bad.rate_rps, bad.busy_ms),
            ));
        }
        if !(horizon_ms.is_finite() && horizon_ms > 0.0 && slowdown.is_finite() && slowdown > -1.0) {
            return Err(ServingError::invalid("horizon_ms", format!("horizon {horizon_ms} ms, slowdown {slowdown}")));
        }
        let scale = 1.0 + slowdown;
        let total_rps: f64 = members.iter().map(|m| m.rate_rps).sum();
        let load = members.iter().map(MemberLoad::busy_share).sum::<f64>() * scale;
        if load >= 1.0 {
            return Err(ServingError::invalid(
                "members",
                format!("the executor would be busy {:.1}% of the time", 100.0 * load),
            ));
        }
        let step_ms = horizon_ms / GRID_POINTS as f64;
        let mean_ms: f64 = members.iter().map(|m| m.rate_rps / total_rps * m.busy_ms * scale).sum();
        // The residual time's CDF at x: ∫₀ˣ P(S > u) du / E[S], piecewise
        // linear between the service times.
        let residual_cdf = |x: f64| -> f64 {
            let integral: f64 = members.iter().map(|m| m.rate_rps / total_rps * x.min(m.busy_ms * scale)).sum();
            (integral / mean_ms).min(1.0)
        };
        let longest_ms = members.iter().map(|m| m.busy_ms * scale).fold(0.0, f64::max);
        let residual_points = ((longest_ms / step_ms).ceil() as usize).clamp(1, GRID_POINTS);
        // Mass of ((k − 1)·step, k·step] placed at k·step: rounded up.
        let residual: Vec<f64> = (1..=residual_points)
            .map(|k| residual_cdf(k as f64 * step_ms) - residual_cdf((k - 1) as f64 * step_ms))
            .collect();
        let mut mass = vec![0.0; GRID_POINTS + 1];
        mass[0] = 1.0 - load;
        for k in 1..=GRID_POINTS {
            let reach = k.min(residual_points);
            let sum: f64 = (1..=reach).map(|j| residual[j - 1] * mass[k - j]).sum();
            mass[k] = load * sum;
        }
        let mut within = Vec::with_capacity(mass.len());
        let mut total = 0.0;
        for m in mass {
            total += m;
            within.push(total.min(1.0));
        }
        Ok(SerializedQueue { step_ms, within })
    }

    /// The queue of `members` (see [`SerializedQueue::new`]), tabulated to
    /// [`HORIZON_SLOS`] times their longest SLO: every figure of one
    /// instance is read off the same grid.
    pub fn of(members: &[Member], slowdown: f64) -> Result<SerializedQueue, ServingError> {
        let loads: Vec<MemberLoad> = members.iter().map(|m| m.load).collect();
        let horizon_ms = HORIZON_SLOS * members.iter().map(|m| m.slo_ms).fold(0.0, f64::max);
        SerializedQueue::new(&loads, slowdown, horizon_ms)
    }

    /// Whether `member` meets its percentile on this queue, its batches
    /// `slowdown` slower than profiled (as the queue's are).
    pub fn meets(&self, member: &Member, slowdown: f64) -> bool {
        self.waiting_within(member.slo_ms - member.load.busy_ms * (1.0 + slowdown)) >= member.percentile / 100.0
    }

    /// `P(W ≤ t)`: the share of requests that wait at most `t_ms` for the
    /// executor (never above the exact share); 0 below 0, and beyond the
    /// horizon the share at the horizon.
    pub fn waiting_within(&self, t_ms: f64) -> f64 {
        if t_ms < 0.0 {
            return 0.0;
        }
        let k = ((t_ms / self.step_ms + 1e-9).floor() as usize).min(self.within.len() - 1);
        self.within[k]
    }

    /// The smallest grid wait `t` with `P(W ≤ t) ≥ share`, ms; `None` past
    /// the horizon.
    pub fn waiting_quantile(&self, share: f64) -> Option<f64> {
        let k = self.within.partition_point(|&within| within < share);
        (k < self.within.len()).then_some(k as f64 * self.step_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::rng::SplitMix64;

    /// M/G/1 FCFS by simulation: the share of waits at most `t_ms`.
    fn simulated_waits(members: &[MemberLoad], requests: usize, seed: u64) -> Vec<f64> {
        let mut rng = SplitMix64::new(seed);
        let total: f64 = members.iter().map(|m| m.rate_rps).sum();
        let (mut now_ms, mut free_at_ms) = (0.0_f64, 0.0_f64);
        let mut waits = Vec::with_capacity(requests);
        for _ in 0..requests {
            now_ms += -(1.0 - rng.uniform(0.0, 1.0)).ln() / total * 1000.0;
            let mut pick = rng.uniform(0.0, 1.0) * total;
            let member = members.iter().find(|m| {
                pick -= m.rate_rps;
                pick < 0.0
            });
            let busy = member.unwrap_or(&members[members.len() - 1]).busy_ms;
            let start = now_ms.max(free_at_ms);
            waits.push(start - now_ms);
            free_at_ms = start + busy;
        }
        waits
    }

    #[test]
    fn an_md1_queue_waits_as_its_exact_distribution_says() {
        // M/D/1 at ρ = 0.5, D = 10 ms: P(W = 0) = 1 − ρ, and
        // P(W ≤ D) = (1 − ρ) e^{λD} (Erlang's formula for t ≤ D).
        let members = [MemberLoad { rate_rps: 50.0, busy_ms: 10.0 }];
        let queue = SerializedQueue::new(&members, 0.0, 100.0).unwrap();
        assert!((queue.waiting_within(0.0) - 0.5).abs() < 1e-12);
        let exact = 0.5 * (0.5_f64).exp();
        let grid = queue.waiting_within(10.0);
        assert!(grid <= exact + 1e-9 && grid > exact - 0.01, "{grid} vs {exact}");
    }

    #[test]
    fn mixed_members_match_a_simulation_and_never_exceed_it_by_more_than_noise() {
        let members = [
            MemberLoad { rate_rps: 20.0, busy_ms: 5.1 },
            MemberLoad { rate_rps: 8.0, busy_ms: 20.6 },
            MemberLoad { rate_rps: 12.0, busy_ms: 11.2 },
        ];
        let queue = SerializedQueue::new(&members, 0.0, 200.0).unwrap();
        let waits = simulated_waits(&members, 400_000, 7);
        for t in [0.0, 5.0, 10.0, 20.0, 40.0, 80.0] {
            let simulated = waits.iter().filter(|&&w| w <= t).count() as f64 / waits.len() as f64;
            let model = queue.waiting_within(t);
            assert!(model <= simulated + 0.005, "t {t}: model {model} above simulated {simulated}");
            assert!(model >= simulated - 0.02, "t {t}: model {model} far below simulated {simulated}");
        }
    }

    #[test]
    fn slower_batches_and_more_members_lower_attainment() {
        let member =
            |rate_rps, slo_ms| Member { load: MemberLoad { rate_rps, busy_ms: 8.0 }, slo_ms, percentile: 99.0 };
        let attainment = |members: &[Member], slowdown| member_figures(members, 0, slowdown).unwrap().attainment;
        let one = [member(20.0, 20.0)];
        let two = [one[0], member(40.0, 20.0)];
        let alone = attainment(&one, 0.0);
        let shared = attainment(&two, 0.0);
        let slower = attainment(&two, 0.3);
        assert!(alone > shared && shared > slower, "{alone} {shared} {slower}");
        let short = [member(20.0, 5.0), member(40.0, 5.0)];
        assert_eq!(attainment(&short, 0.0), 0.0, "a batch longer than the SLO never meets it");
    }

    #[test]
    fn a_member_is_tolerant_up_to_where_it_stops_meeting_its_percentile() {
        let member =
            |rate_rps, busy_ms| Member { load: MemberLoad { rate_rps, busy_ms }, slo_ms: 60.0, percentile: 99.0 };
        let members = [member(20.0, 8.0), member(30.0, 12.0)];
        let figures = member_figures(&members, 0, 0.0).unwrap();
        assert!(figures.latency_ms <= 60.0 && figures.attainment >= 0.99, "{figures:?}");
        let tolerance = figures.tolerance;
        assert!(tolerance > 0.0 && tolerance < TOLERANCE_RANGE.1, "{tolerance}");
        let at = |slowdown: f64| member_figures(&members, 0, slowdown).unwrap().attainment;
        assert!(at(tolerance) >= 0.99 && at(tolerance + 2.0 * TOLERANCE_PRECISION) < 0.99);
        assert!(all_meet(&members, 0.0) && !all_meet(&members, tolerance + 0.05));
        let latency = member_figures(&members, 1, 0.0).unwrap().latency_ms;
        assert!((latency - (figures.latency_ms - 8.0 + 12.0)).abs() < 1e-9, "the members wait alike");
    }

    #[test]
    fn an_instance_busy_all_the_time_is_refused_with_its_load() {
        let members = [MemberLoad { rate_rps: 100.0, busy_ms: 10.0 }];
        let error = SerializedQueue::new(&members, 0.0, 50.0).unwrap_err().to_string();
        assert!(error.contains("100.0%"), "{error}");
        assert!(SerializedQueue::new(&[], 0.0, 50.0).is_err());
    }
}
