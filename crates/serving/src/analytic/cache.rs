//! Memoised capacities, shared across threads.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use super::process::Process;
use super::search::capacity_per_ms;
use super::{check_percentile, check_slo};
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
