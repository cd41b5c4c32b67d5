//! The stationary distribution of the queue at service starts.
//!
//! State `x >= 1`: requests waiting when a batch starts. Boundary states
//! `x <= B` take all `x` (latency level of `x`) and leave `A` behind
//! (`A ~ Poisson(lambda S_x)`, or 1 after an idle spell when `A = 0`);
//! states `x = B + c`, `c >= 1`, take a full batch and leave `c + A`,
//! `A ~ Poisson(mu)`, `mu = lambda S_B`: the random walk of
//! [`super::ladder`].
//!
//! * Boundary: the chain censored on `1..=B` jumps from `x` straight to
//!   `y <= B`, or above `B` and back down through ladder steps to its first
//!   state `<= B`. Its rows depend on `x` only through `x`'s latency level,
//!   so its stationary vector is `pi(y) = sum_g m_g r_g(y)`, with the level
//!   masses `m` the stationary vector of a level-to-level matrix (one row
//!   and column per level), solved by GTH elimination (no subtractions).
//! * Above: Ramaswami's recursion on the chain censored on `1..=y`,
//!   `pi(y) (1 - pbar(0)) = sum_g m_g b_g(y) + sum_{B < x < y} pi(x) pbar(y - x)`,
//!   where `f(i)`, the chance that the walk dropping from `i` above a level
//!   first lands exactly on it, is a renewal sequence of the ladder
//!   heights. Every term is positive: the recursion is stable.
//! * Mass above the boundary, in closed form from the mean drift:
//!   `sum_{x > B} pi(x) = sum_{x <= B} pi(x) (lambda S_x + e^(-lambda S_x) - x) / (B - mu)`.

use super::ladder::ladder_heights;
use super::poisson::Poisson;
use super::process::Process;

/// The stationary distribution of one process at one arrival rate, scaled
/// so that the boundary states (`x <= B`) hold mass 1.
#[derive(Debug, Clone)]
pub(crate) struct Stationary<'p> {
    process: &'p Process,
    /// Arrival rate, requests per ms.
    lambda: f64,
    /// `m[g]`: mass of the boundary states of latency level `g`.
    level_mass: Vec<f64>,
    /// `carry[c] = pi(B + c)` for `c >= 1` (`carry[0] = 0`), as far as computed.
    carry: Vec<f64>,
    /// `carried[c] = sum_{1 <= c' < c} carry[c']`.
    carried: Vec<f64>,
    /// `sum_{c >= 1} pi(B + c)`.
    above: f64,
    /// Mean time between service starts, per unit of mass (ms).
    cycle_ms: f64,
    /// Of that, the time the process sits idle (ms).
    idle_ms: f64,
    /// `feed[c] = sum_g m_g b_g(B + c)`, the boundary's direct share of `pi(B + c)`.
    feed: Vec<f64>,
    /// `pbar[d]`: from `x > B`, the chance that the chain censored on
    /// `1..=x + d` next visits `x + d`.
    pbar: Vec<f64>,
    /// The largest `carry` so far.
    largest: f64,
    /// Whether the recursion has reached values that no longer matter.
    negligible: bool,
}

/// The most states above the boundary tabulated (32 MB): beyond, arrivals
/// are counted as late (conservative; only absurd SLOs or loads within a
/// hair of full reach it).
pub(crate) const MAX_CARRIES: usize = 1 << 22;

impl<'p> Stationary<'p> {
    /// The distribution at `lambda` requests per ms (`> 0`); `None` when
    /// the process cannot keep up (`lambda S_B >= B`).
    pub(crate) fn new(process: &'p Process, lambda: f64) -> Option<Stationary<'p>> {
        let batch = process.batch();
        let levels = process.levels();
        let mu = lambda * process.full_ms();
        if !(lambda > 0.0 && mu < batch as f64) {
            return None;
        }
        let arrivals: Vec<Poisson> = (0..levels).map(|g| Poisson::new(lambda * process.latency_ms(g))).collect();
        let full = &arrivals[levels - 1];
        let h = ladder_heights(batch, mu);
        let reach = h.iter().rposition(|&p| p > 0.0).unwrap_or(1).max(1);

        // f(i): dropping from i above a level, the walk first lands on it.
        let highest = arrivals.iter().map(Poisson::hi).max().unwrap_or(0);
        let heights = highest.saturating_sub(batch);
        let mut f = vec![0.0; heights + 1];
        f[0] = 1.0;
        for i in 1..=heights {
            f[i] = (1..=reach.min(i)).map(|s| h[s] * f[i - s]).sum();
        }

        // Rows of the chain censored on 1..=B, one per level: a jump to
        // y <= B, or above B and down by ladder steps to the first y <= B.
        let rows: Vec<Vec<f64>> = arrivals.iter().map(|a| censored_row(a, batch, &h, reach)).collect();
        let mut between = vec![vec![0.0; levels]; levels];
        for (g, row) in rows.iter().enumerate() {
            for (y, &p) in row.iter().enumerate().skip(1) {
                between[g][process.level_of(y)] += p;
            }
        }
        let level_mass = gth_stationary(between);

        let mut feed = vec![0.0; heights + 1];
        for (g, a) in arrivals.iter().enumerate() {
            for (c, slot) in feed.iter_mut().enumerate().skip(1) {
                let y = batch + c;
                let sum: f64 = (y..=a.hi()).map(|z| a.pmf(z as i64) * f[z - y]).sum();
                *slot += level_mass[g] * sum;
            }
        }
        let pbar: Vec<f64> = (0..=full.hi().saturating_sub(batch))
            .map(|d| (d + batch..=full.hi()).map(|z| full.pmf(z as i64) * f[z - d - batch]).sum())
            .collect();

        // The boundary's own distribution, for the drift identity.
        let mut drift = 0.0;
        let mut cycle_ms = 0.0;
        let mut idle_ms = 0.0;
        for (g, a) in arrivals.iter().enumerate() {
            let latency = process.latency_ms(g);
            let idle = a.pmf(0) / lambda;
            cycle_ms += level_mass[g] * (latency + idle);
            idle_ms += level_mass[g] * idle;
            let mean_left = lambda * latency + a.pmf(0);
            for (y, pi_y) in boundary_states(&rows, &level_mass, process, g) {
                drift += pi_y * (mean_left - y as f64);
            }
        }
        let above = (drift / (batch as f64 - mu)).max(0.0);
        cycle_ms += above * process.full_ms();
        Some(Stationary {
            process,
            lambda,
            level_mass,
            carry: vec![0.0],
            carried: vec![0.0, 0.0],
            above,
            cycle_ms,
            idle_ms,
            feed,
            pbar,
            largest: 0.0,
            negligible: false,
        })
    }

    /// The process.
    pub(crate) fn process(&self) -> &'p Process {
        self.process
    }

    /// Arrival rate, requests per ms.
    pub(crate) fn lambda(&self) -> f64 {
        self.lambda
    }

    /// `m[g]`: mass of the boundary states of latency level `g`.
    pub(crate) fn level_mass(&self) -> &[f64] {
        &self.level_mass
    }

    /// Computes `pi(B + c)` for `c < wanted` and returns how many it holds
    /// (index 0 counts): fewer than wanted when the values have become
    /// negligible (below `1e-30` of the largest, past the boundary's direct
    /// reach, where the tail only falls) or past [`MAX_CARRIES`].
    pub(crate) fn tabulate(&mut self, wanted: usize) -> usize {
        self.extend(wanted.min(MAX_CARRIES));
        wanted.min(self.carry.len()).max(1)
    }

    /// `pi(B + c)` for `c < carries` (index 0 holds 0), as tabulated.
    pub(crate) fn carry(&self, carries: usize) -> &[f64] {
        &self.carry[..carries.clamp(1, self.carry.len())]
    }

    /// `sum_{1 <= c < carries} pi(B + c)`, as tabulated.
    pub(crate) fn carried(&self, carries: usize) -> f64 {
        self.carried[carries.clamp(1, self.carry.len())]
    }

    /// `sum_{c >= 1} pi(B + c)`: the mass of the states above the boundary.
    pub(crate) fn above(&self) -> f64 {
        self.above
    }

    /// Mean time between service starts per unit of mass (ms): the time
    /// base of the time-stationary view.
    pub(crate) fn cycle_ms(&self) -> f64 {
        self.cycle_ms
    }

    /// The share of time the process sits idle: by PASTA, the share of
    /// arrivals that start a batch at once, alone, and so take exactly
    /// `S_1` (every other arrival waits first: `P(T > S_1)` is the rest).
    pub(crate) fn idle_share(&self) -> f64 {
        self.idle_ms / self.cycle_ms
    }

    /// Ramaswami's recursion up to `carry[carries - 1]`.
    fn extend(&mut self, carries: usize) {
        let denominator = 1.0 - self.pbar.first().copied().unwrap_or(0.0);
        // pbar[1..] reversed, so that each step is a forward dot product.
        let reach = self.pbar.len().saturating_sub(1);
        let backwards: Vec<f64> = self.pbar.iter().skip(1).rev().copied().collect();
        let settled = self.feed.len() + self.pbar.len();
        while self.carry.len() < carries && !self.negligible {
            let c = self.carry.len();
            let mut sum = self.feed.get(c).copied().unwrap_or(0.0);
            // sum_{d=1}^{min(c-1, reach)} carry[c - d] pbar[d]
            let span = reach.min(c - 1);
            sum += self.carry[c - span..c].iter().zip(&backwards[reach - span..]).map(|(x, p)| x * p).sum::<f64>();
            let value = sum / denominator;
            self.largest = self.largest.max(value);
            if c > settled && value < 1e-30 * self.largest {
                self.negligible = true;
            }
            self.carry.push(value);
            let total = self.carried[c] + value;
            self.carried.push(total);
        }
    }
}

/// The boundary states of level `g` and their stationary masses.
fn boundary_states<'a>(
    rows: &'a [Vec<f64>],
    level_mass: &'a [f64],
    process: &'a Process,
    g: usize,
) -> impl Iterator<Item = (usize, f64)> + 'a {
    let first = if g == 0 { 1 } else { process.top(g - 1) + 1 };
    (first..=process.top(g)).map(move |y| (y, rows.iter().zip(level_mass).map(|(row, m)| m * row[y]).sum()))
}

/// From a boundary state whose batch leaves `Poisson` arrivals `a` behind:
/// the chance of each state `1..=B` being the chain's next visit to the
/// boundary (index 0 unused).
fn censored_row(a: &Poisson, batch: usize, h: &[f64], reach: usize) -> Vec<f64> {
    let mut row: Vec<f64> = (0..=batch).map(|y| if y == 0 { 0.0 } else { a.pmf(y as i64) }).collect();
    // No arrival: the server idles until one comes, then serves it alone.
    row[1] += a.pmf(0);
    if a.hi() > batch {
        // Heights above B push down by ladder steps until they land <= B.
        let mut mass: Vec<f64> = (batch..=a.hi()).map(|z| a.pmf(z as i64)).collect();
        mass[0] = 0.0;
        for i in (1..mass.len()).rev() {
            let m = mass[i];
            if m == 0.0 {
                continue;
            }
            for (s, &p) in h.iter().enumerate().take(reach + 1).skip(1) {
                if s < i {
                    mass[i - s] += m * p;
                } else {
                    row[batch + i - s] += m * p;
                }
            }
        }
    }
    row
}

/// The stationary vector of a small stochastic matrix by the
/// Grassmann–Taksar–Heyman elimination (only additions of positive terms).
fn gth_stationary(mut p: Vec<Vec<f64>>) -> Vec<f64> {
    let n = p.len();
    for k in (1..n).rev() {
        let (above, rest) = p.split_at_mut(k);
        let row_k = &rest[0];
        let out: f64 = row_k[..k].iter().sum::<f64>().max(f64::MIN_POSITIVE);
        for row in above.iter_mut() {
            row[k] /= out;
            let pik = row[k];
            if pik == 0.0 {
                continue;
            }
            for (pij, pkj) in row[..k].iter_mut().zip(&row_k[..k]) {
                *pij += pik * pkj;
            }
        }
    }
    let mut x = vec![0.0; n];
    x[0] = 1.0;
    for j in 1..n {
        x[j] = (0..j).map(|i| x[i] * p[i][j]).sum();
    }
    let total: f64 = x.iter().sum();
    x.iter().map(|v| v / total).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shape::SegmentShape;

    /// The stationary distribution by power iteration on the chain cut at
    /// `top` states, with the boundary scaled to mass 1.
    fn by_iteration(process: &Process, lambda: f64, top: usize) -> Vec<f64> {
        let batch = process.batch();
        let full = Poisson::new(lambda * process.full_ms());
        let arrivals: Vec<Poisson> =
            (0..process.levels()).map(|g| Poisson::new(lambda * process.latency_ms(g))).collect();
        let mut pi = vec![0.0; top + 1];
        pi[1] = 1.0;
        for _ in 0..400_000 {
            let mut next = vec![0.0; top + 1];
            for x in 1..=top {
                if pi[x] == 0.0 {
                    continue;
                }
                let (a, carry) = if x <= batch { (&arrivals[process.level_of(x)], 0) } else { (&full, x - batch) };
                for (i, &p) in a.pmf_window().iter().enumerate() {
                    let y = (carry + a.lo() + i).max(1).min(top);
                    next[y] += pi[x] * p;
                }
            }
            let change: f64 = next.iter().zip(&pi).map(|(a, b)| (a - b).abs()).sum();
            pi = next;
            if change < 1e-14 {
                break;
            }
        }
        let boundary: f64 = pi[1..=batch].iter().sum();
        pi.iter().map(|p| p / boundary).collect()
    }

    #[test]
    fn recursion_and_drift_identity_match_power_iteration() {
        let shapes = [
            SegmentShape::new(1, vec![(1, 10.0)]).unwrap(),
            SegmentShape::new(1, vec![(1, 10.0), (2, 14.0), (4, 20.0)]).unwrap(),
            SegmentShape::new(1, vec![(1, 5.0), (2, 6.0), (4, 9.0), (8, 15.0), (16, 27.0)]).unwrap(),
        ];
        for shape in &shapes {
            let process = Process::of(shape);
            for rho in [0.2, 0.7, 0.95] {
                let lambda = rho * process.full_rate_per_ms();
                let mut fast = Stationary::new(&process, lambda).unwrap();
                let top = 1500;
                let slow = by_iteration(&process, lambda, top);
                let batch = process.batch();
                let carries = fast.tabulate(top - batch);
                let carry = fast.carry(carries).to_vec();
                // Past the tabulated (negligible) tail the recursion stopped.
                for c in 1..top - batch {
                    let (a, b) = (carry.get(c).copied().unwrap_or(0.0), slow[batch + c]);
                    assert!((a - b).abs() < 1e-9 * b.max(1e-3), "rho {rho} c {c}: {a} vs {b}");
                }
                let above: f64 = slow[batch + 1..].iter().sum();
                assert!((fast.above() - above).abs() < 1e-8 * above.max(1e-3), "{} vs {above}", fast.above());
                for g in 0..process.levels() {
                    let first = if g == 0 { 1 } else { process.top(g - 1) + 1 };
                    let mass: f64 = slow[first..=process.top(g)].iter().sum();
                    assert!((fast.level_mass()[g] - mass).abs() < 1e-9, "level {g}");
                }
            }
        }
    }

    /// pi by dense GTH elimination on states 1..=top (jumps above top land
    /// on top), the boundary scaled to mass 1 (index 0 unused).
    fn by_elimination(process: &Process, lambda: f64, top: usize) -> Vec<f64> {
        let batch = process.batch();
        let full = Poisson::new(lambda * process.full_ms());
        let arrivals: Vec<Poisson> =
            (0..process.levels()).map(|g| Poisson::new(lambda * process.latency_ms(g))).collect();
        let mut p = vec![vec![0.0; top]; top];
        for (x, row) in (1..=top).zip(p.iter_mut()) {
            let (a, carry) = if x <= batch { (&arrivals[process.level_of(x)], 0) } else { (&full, x - batch) };
            for (i, &q) in a.pmf_window().iter().enumerate() {
                row[(carry + a.lo() + i).clamp(1, top) - 1] += q;
            }
        }
        let pi = gth_stationary(p);
        let boundary: f64 = pi[..batch].iter().sum();
        std::iter::once(0.0).chain(pi.iter().map(|v| v / boundary)).collect()
    }

    #[test]
    fn large_batches_and_near_full_loads_match_elimination() {
        // A profile whose batch-size levels each sustain themselves (the
        // queue switches between them rarely), and one at 99.2% load.
        let cases = [
            (
                SegmentShape::new(1, vec![(1, 9.0), (8, 12.0), (16, 21.0), (32, 38.0), (64, 74.0), (128, 142.0)])
                    .unwrap(),
                0.58,
                600,
            ),
            (SegmentShape::new(3, vec![(1, 25.0), (2, 45.0), (4, 90.0)]).unwrap(), 0.992, 1400),
        ];
        for (shape, rho, top) in cases {
            let process = Process::of(&shape);
            let lambda = rho * process.full_rate_per_ms();
            let mut fast = Stationary::new(&process, lambda).unwrap();
            let slow = by_elimination(&process, lambda, top);
            let batch = process.batch();
            for g in 0..process.levels() {
                let first = if g == 0 { 1 } else { process.top(g - 1) + 1 };
                let mass: f64 = slow[first..=process.top(g)].iter().sum();
                assert!((fast.level_mass()[g] - mass).abs() < 1e-9 * mass.max(1e-6), "level {g}");
            }
            let above: f64 = slow[batch + 1..].iter().sum();
            assert!((fast.above() - above).abs() < 1e-8 * above.max(1e-6), "{} vs {above}", fast.above());
            // Away from the cut, where the elimination's chain is exact.
            let carries = fast.tabulate(top - batch);
            let carry = fast.carry(carries).to_vec();
            for c in (1..top - batch - 400).step_by(7) {
                let a = carry.get(c).copied().unwrap_or(0.0);
                assert!((a - slow[batch + c]).abs() < 1e-8 * slow[batch + c].max(1e-12), "c {c}");
            }
        }
    }
}
