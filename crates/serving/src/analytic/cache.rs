//! Memoised capacities and shares within an SLO, shared across threads.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use super::latency::Scratch;
use super::process::Process;
use super::search::{capacity_per_ms, miss_at};
use super::{check_percentile, check_rate, check_slo, per_process_per_ms};
use crate::error::ServingError;
use crate::shape::SegmentShape;

/// What decides one process's capacity, as exact bit patterns: each latency
/// level's top batch and latency, the percentile and the SLO. The process
/// count is not part of it (a segment's capacity is `procs` times its
/// process's), so segments of one model and size share entries.
type Key = (Vec<(u32, u64)>, u64, u64);

/// Capacities already computed, keyed by the exact numbers that decide
/// them. Cloning is cheap and clones share one table; it may be used from
/// many threads at once (two threads asking for the same new key may both
/// compute it; both get the same number).
#[derive(Debug, Clone, Default)]
pub struct CapacityCache {
    per_process_per_ms: Arc<RwLock<HashMap<Key, f64>>>,
}

impl CapacityCache {
    /// An empty cache.
    pub fn new() -> CapacityCache {
        CapacityCache::default()
    }

    /// [`super::capacity_rps`], computed once per distinct (process latencies,
    /// percentile, SLO).
    pub fn capacity_rps(
        &self,
        shape: &SegmentShape,
        percentile: f64,
        latency_slo_ms: f64,
    ) -> Result<f64, ServingError> {
        let late = check_percentile(percentile)?;
        check_slo(latency_slo_ms)?;
        let process = Process::of(shape);
        let key = (process.key(), percentile.to_bits(), latency_slo_ms.to_bits());
        let known = self.per_process_per_ms.read().unwrap_or_else(PoisonError::into_inner).get(&key).copied();
        let per_ms = match known {
            Some(per_ms) => per_ms,
            None => {
                let per_ms = capacity_per_ms(&process, late, latency_slo_ms);
                self.per_process_per_ms.write().unwrap_or_else(PoisonError::into_inner).insert(key, per_ms);
                per_ms
            }
        };
        Ok(per_ms * f64::from(shape.procs()) * 1000.0)
    }

    /// How many distinct capacities it holds.
    pub fn len(&self) -> usize {
        self.per_process_per_ms.read().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// `true` when it holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The most [`AttainmentCache::attainment`] may differ from the model's
/// exact share within the SLO (0.001 percentage points).
pub const ATTAINMENT_TOLERANCE: f64 = 1e-5;

/// Grid rates per octave of the per-process rate at the coarsest level.
const OCTAVE_STEPS: f64 = 8.0;

/// Halvings of the coarsest grid step before a rate is evaluated exactly:
/// the finest step is a rate ratio of `2^(1 / (8 × 2^8))`, 1.00034.
const DEPTH: u32 = 8;

/// What decides one process's share within an SLO at a given rate, as
/// exact bit patterns: its latency levels (as [`Key`]'s) and the SLO.
type AttainmentKey = (Vec<(u32, u64)>, u64);

/// Shares within an SLO already computed, per process and SLO, at the
/// points of a fixed geometric grid of per-process rates.
///
/// A process's share within its SLO falls as its rate rises (the model's
/// `P(T > t)` rises with the rate, checked by its tests), so between two
/// grid rates whose shares differ by at most [`ATTAINMENT_TOLERANCE`] every
/// rate's share lies between them: [`AttainmentCache::attainment`] takes
/// it by linear interpolation there, and computes it exactly where no grid
/// step down to the finest brackets it that closely. What it answers
/// depends only on the shape, rate and SLO asked, never on what was asked
/// before or on which thread computed a grid point first: runs are
/// reproducible whatever the threads. Cloning is cheap and clones share
/// one table.
#[derive(Debug, Clone, Default)]
pub struct AttainmentCache {
    points: Arc<RwLock<HashMap<AttainmentKey, HashMap<i64, f64>>>>,
    /// Times the model was evaluated exactly, off the grid.
    exact_evaluations: Arc<AtomicU64>,
}

impl AttainmentCache {
    /// An empty cache.
    pub fn new() -> AttainmentCache {
        AttainmentCache::default()
    }

    /// [`super::attainment`] to within [`ATTAINMENT_TOLERANCE`], from the
    /// grid where it brackets the rate closely enough (see the type's
    /// documentation).
    ///
    /// # Errors
    /// A rate or SLO that is negative or not finite.
    pub fn attainment(&self, shape: &SegmentShape, rate_rps: f64, latency_slo_ms: f64) -> Result<f64, ServingError> {
        check_rate(rate_rps)?;
        check_slo(latency_slo_ms)?;
        let process = Process::of(shape);
        let lambda = per_process_per_ms(shape, rate_rps);
        let exact = |lambda: f64| 1.0 - miss_at(&process, lambda, latency_slo_ms, &mut Scratch::default());
        if lambda <= 0.0 {
            return Ok(exact(lambda));
        }
        let key = (process.key(), latency_slo_ms.to_bits());
        // Grid point `j` is the rate 2^(j / steps) at the finest level.
        let steps = OCTAVE_STEPS * f64::from(1u32 << DEPTH);
        let rate_of = |j: i64| (j as f64 / steps).exp2();
        let finest = (lambda.log2() * steps).floor() as i64;
        let share_at = |j: i64| -> f64 {
            let known =
                self.points.read().unwrap_or_else(PoisonError::into_inner).get(&key).and_then(|p| p.get(&j)).copied();
            known.unwrap_or_else(|| {
                let share = exact(rate_of(j));
                let mut points = self.points.write().unwrap_or_else(PoisonError::into_inner);
                points.entry(key.clone()).or_default().insert(j, share);
                share
            })
        };
        let mut level = 0;
        while level <= DEPTH {
            let step = 1i64 << (DEPTH - level);
            let low = finest.div_euclid(step) * step;
            let (low_share, high_share) = (share_at(low), share_at(low + step));
            let gap = low_share - high_share;
            if gap <= ATTAINMENT_TOLERANCE {
                let (low_rate, high_rate) = (rate_of(low), rate_of(low + step));
                let along = ((lambda - low_rate) / (high_rate - low_rate)).clamp(0.0, 1.0);
                return Ok(low_share + along * (high_share - low_share));
            }
            // Where the share is smooth each halving about halves the gap:
            // go straight to the level that should close it.
            level += ((gap / ATTAINMENT_TOLERANCE).log2().ceil() as u32).max(1);
        }
        self.exact_evaluations.fetch_add(1, Ordering::Relaxed);
        Ok(exact(lambda))
    }

    /// How many evaluations of the model its answers took: its grid
    /// points and the rates evaluated exactly. The same questions give
    /// the same count whatever the threads (a grid point two threads
    /// computed at once counts once).
    pub fn evaluations(&self) -> u64 {
        self.len() as u64 + self.exact_evaluations.load(Ordering::Relaxed)
    }

    /// How many grid points it holds, all processes and SLOs together.
    pub fn len(&self) -> usize {
        self.points.read().unwrap_or_else(PoisonError::into_inner).values().map(HashMap::len).sum()
    }

    /// `true` when it holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A segment of two processes batching up to 8, and rates from a tenth
    /// of its full-batch throughput to 98% of it.
    fn shape_and_rates() -> (SegmentShape, Vec<f64>) {
        let shape = SegmentShape::new(2, vec![(1, 4.0), (2, 5.0), (4, 7.0), (8, 12.0)]).unwrap();
        let throughput_rps = 2.0 * 8.0 / 12.0 * 1000.0;
        let rates = (0..200).map(|k| throughput_rps * (0.1 + 0.88 * f64::from(k) / 199.0)).collect();
        (shape, rates)
    }

    #[test]
    fn a_cached_share_is_within_the_tolerance_of_the_exact_one() {
        let (shape, rates) = shape_and_rates();
        let cache = AttainmentCache::new();
        for slo_ms in [15.0, 40.0] {
            for &rate_rps in &rates {
                let exact = super::super::attainment(&shape, rate_rps, slo_ms).unwrap();
                let cached = cache.attainment(&shape, rate_rps, slo_ms).unwrap();
                assert!(
                    (cached - exact).abs() <= ATTAINMENT_TOLERANCE,
                    "{rate_rps} req/s, {slo_ms} ms: {cached} vs {exact}"
                );
            }
        }
        // The shares fall from nearly all to few over the sweep, so both
        // flat and steep stretches were asked.
        let at = |rate_rps| super::super::attainment(&shape, rate_rps, 15.0).unwrap();
        assert!(at(rates[0]) > 0.999 && at(rates[199]) < 0.5);
        // Asked again and again as a day's rates move, within a band of
        // loads where the share changes slowly, the grid answers most.
        let first = cache.evaluations();
        let relaxed = |rate_rps| super::super::attainment(&shape, rate_rps, 40.0).unwrap();
        let band: Vec<f64> = rates.iter().filter(|&&rate_rps| relaxed(rate_rps) > 0.999).copied().collect();
        assert!(band.len() > 50, "{} rates in the band", band.len());
        for pass in 0..5 {
            for &rate_rps in &band {
                cache.attainment(&shape, rate_rps * (1.0 + 0.0007 * f64::from(pass)), 40.0).unwrap();
            }
        }
        let again = cache.evaluations() - first;
        let asked = 5 * band.len() as u64;
        assert!(again * 5 < asked, "{again} evaluations for {asked} rates asked");
    }

    #[test]
    fn a_cached_share_does_not_depend_on_what_was_asked_before() {
        let (shape, rates) = shape_and_rates();
        let (forwards, backwards) = (AttainmentCache::new(), AttainmentCache::new());
        let ask = |cache: &AttainmentCache, rate_rps: f64| cache.attainment(&shape, rate_rps, 15.0).unwrap().to_bits();
        let first: Vec<u64> = rates.iter().map(|&rate_rps| ask(&forwards, rate_rps)).collect();
        let second: Vec<u64> = rates.iter().rev().map(|&rate_rps| ask(&backwards, rate_rps)).collect();
        assert!(first.iter().eq(second.iter().rev()));
    }

    #[test]
    fn a_rate_or_slo_out_of_range_is_named() {
        let (cache, shape) = (AttainmentCache::new(), SegmentShape::full_batch_only(1, 4, 10.0).unwrap());
        assert!(cache.attainment(&shape, -1.0, 15.0).unwrap_err().to_string().contains("rate_rps"));
        assert!(cache.attainment(&shape, 1.0, f64::NAN).unwrap_err().to_string().contains("latency_slo_ms"));
        assert!(cache.is_empty() && cache.evaluations() == 0);
    }
}
