//! What a replan works on: GPUs with their MIG instances and the segment
//! each runs (the current plan's, kept at their position, or new), and per
//! service what it is provisioned against its rate.

use tessera_core::{GpuModel, Placement, ServiceSlo};

use super::position::GpuPosition;
use crate::allocate::Segment;
use crate::report::covers;

/// A MIG instance and what it runs, if anything.
#[derive(Debug, Clone, Copy)]
pub(super) struct Slot {
    pub placement: Placement,
    pub segment: Option<Segment>,
}

/// A GPU being replanned: the current plan's (with its position) or new.
#[derive(Debug, Clone)]
pub(super) struct WorkGpu {
    pub model: GpuModel,
    pub position: Option<GpuPosition>,
    pub slots: Vec<Slot>,
}

impl WorkGpu {
    pub(super) fn used_gpcs(&self) -> u32 {
        self.slots.iter().map(|s| u32::from(s.placement.profile.compute_slices)).sum()
    }

    /// Its compute slices no instance takes.
    pub(super) fn unused_gpcs(&self) -> u32 {
        u32::from(self.model.spec().compute_slices).saturating_sub(self.used_gpcs())
    }

    /// Whether `gpcs` more compute slices fit beside its instances (by
    /// count only: where they go is the layout's question).
    pub(super) fn has_room_for(&self, gpcs: u32) -> bool {
        self.used_gpcs() + gpcs <= u32::from(self.model.spec().compute_slices)
    }

    pub(super) fn placements(&self) -> Vec<Placement> {
        self.slots.iter().map(|s| s.placement).collect()
    }
}

/// Per service: what it has and needs.
#[derive(Debug, Clone)]
pub(super) struct Ledger {
    pub rate_rps: Vec<f64>,
    pub provisioned_rps: Vec<f64>,
}

impl Ledger {
    pub(super) fn of(services: &[ServiceSlo], gpus: &[WorkGpu]) -> Self {
        let mut provisioned_rps = vec![0.0; services.len()];
        for segment in gpus.iter().flat_map(|g| &g.slots).filter_map(|s| s.segment) {
            provisioned_rps[segment.service] += segment.point.throughput_rps;
        }
        Ledger { rate_rps: services.iter().map(|s| s.rate_rps).collect(), provisioned_rps }
    }

    pub(super) fn deficit(&self, service: usize) -> f64 {
        if covers(self.provisioned_rps[service], self.rate_rps[service]) {
            0.0
        } else {
            self.rate_rps[service] - self.provisioned_rps[service]
        }
    }

    /// `true` when `service` stays covered without `throughput_rps`.
    pub(super) fn can_spare(&self, service: usize, throughput_rps: f64) -> bool {
        covers(self.provisioned_rps[service] - throughput_rps, self.rate_rps[service])
    }

    /// The provisioning ratio of `service` with `extra_rps` more.
    pub(super) fn ratio_with(&self, service: usize, extra_rps: f64) -> f64 {
        (self.provisioned_rps[service] + extra_rps) / self.rate_rps[service]
    }
}
