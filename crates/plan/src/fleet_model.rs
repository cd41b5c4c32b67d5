//! The fleet's GPU models as the `optimal` strategy's searches see them
//! (the cost the objective counts, the MIG packer, the limit), and what
//! holding instances on them costs.

use tessera_core::{GpuOffer, Packer, SizeCounts};

/// One GPU model of the fleet, ready for planning.
pub(crate) struct FleetModel {
    /// The model, its cost and limit.
    pub offer: GpuOffer,
    /// The cost the search uses: 1 for a fleet of one model (GPUs are the
    /// objective), the offer's cost otherwise.
    pub cost: f64,
    /// Its packer.
    pub packer: Packer,
    /// Compute slices per GPU.
    pub slices: u64,
}

impl FleetModel {
    /// Every model of `fleet`, ready for planning.
    pub(crate) fn of_fleet(fleet: &[GpuOffer]) -> Vec<FleetModel> {
        let single = fleet.len() == 1;
        fleet
            .iter()
            .map(|offer| FleetModel {
                offer: *offer,
                cost: if single { 1.0 } else { offer.cost },
                packer: Packer::new(offer.model),
                slices: u64::from(offer.model.spec().compute_slices),
            })
            .collect()
    }

    /// `true` when `gpus` of this model are within its limit, or no more
    /// than `current` (a model already over its limit may shrink).
    pub(crate) fn allows(&self, gpus: u64, current: u64) -> bool {
        self.offer.limit.is_none_or(|limit| gpus <= limit.max(current))
    }
}

/// The cost of holding `counts` per model (each model's GPUs at its cost),
/// or `None` when a model's limit is exceeded.
pub(crate) fn packed_cost(models: &[FleetModel], counts: &[SizeCounts]) -> Option<f64> {
    let mut cost = 0.0;
    for (model, counts) in models.iter().zip(counts) {
        let gpus = model.packer.min_gpus(counts);
        if model.offer.limit.is_some_and(|limit| gpus > limit) {
            return None;
        }
        cost += model.cost * gpus as f64;
    }
    Some(cost)
}
