//! What a plan is made from, completed for the fleet once.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use tessera_core::synthetic::{builtin_catalog, demo_images, demo_services};
use tessera_core::{GpuModel, ProfileCatalog, ServiceImage, ServiceSlo};
use tessera_serving::Capacities;

use crate::error::PlanError;
use crate::estimate::{complete_for_fleet, ProfileOrigin};
use crate::judge::PointsMemo;
use crate::replan::FreshMemo;

/// The services to plan, the profiles of their models on every GPU model
/// of a fleet (the missing ones estimated, see [`complete_for_fleet`]),
/// what a reader of the plan should know about them, and each service's
/// container. The CLI, the service and the benchmarks build one and hand
/// it to [`crate::plan`] or [`crate::verify_plan`].
#[derive(Debug, Clone)]
pub struct PlanInputs {
    services: Vec<ServiceSlo>,
    /// Shared: inputs for other services over the same profiles
    /// ([`PlanInputs::for_services`]) cost no copy.
    catalog: Arc<ProfileCatalog>,
    origin: ProfileOrigin,
    gpu_models: Vec<GpuModel>,
    notes: Vec<String>,
    images: BTreeMap<String, ServiceImage>,
    /// The serving model's capacities computed so far, shared by every plan
    /// and check of these inputs and of inputs for other services over the
    /// same profiles.
    capacities: Capacities,
    /// The points each service was planned with, shared as the capacities
    /// are (they do not depend on the rates).
    judged_points: PointsMemo,
    /// The last fresh optimum a replan planned over these profiles, shared
    /// by inputs for other services over them (not by inputs completed
    /// for more GPU models: their profiles differ).
    fresh_memo: FreshMemo,
}

impl PlanInputs {
    /// `services` over `catalog` (measured, or the built-in synthetic one as
    /// `origin` says), completed for every GPU model of `fleet`: one note
    /// per estimated profile. A GPU model of the fleet that ends up with no
    /// profile at all is an error naming the GPU models that have some.
    pub fn new(
        services: Vec<ServiceSlo>,
        catalog: ProfileCatalog,
        origin: ProfileOrigin,
        fleet: &[GpuModel],
    ) -> Result<PlanInputs, PlanError> {
        let (catalog, estimates) = complete_for_fleet(catalog, origin, fleet);
        if let Some(&gpu) = fleet.iter().find(|&&gpu| catalog.models(gpu).next().is_none()) {
            let have: BTreeSet<String> = catalog.iter().map(|p| p.gpu_model.to_string()).collect();
            return Err(PlanError::NoProfilesOnGpu {
                gpu: gpu.to_string(),
                have: if have.is_empty() {
                    "none".to_string()
                } else {
                    have.into_iter().collect::<Vec<_>>().join(", ")
                },
            });
        }
        Ok(PlanInputs {
            services,
            catalog: Arc::new(catalog),
            origin,
            gpu_models: fleet.to_vec(),
            notes: estimates.iter().map(ToString::to_string).collect(),
            images: BTreeMap::new(),
            capacities: Capacities::new(),
            judged_points: PointsMemo::default(),
            fresh_memo: FreshMemo::default(),
        })
    }

    /// The same inputs completed for `more` GPU models too (their
    /// estimates' notes added).
    pub(crate) fn completed_for_more(&self, more: &[GpuModel]) -> Result<PlanInputs, PlanError> {
        let gpu_models: Vec<GpuModel> = self.gpu_models.iter().chain(more).copied().collect();
        let catalog = ProfileCatalog::clone(&self.catalog);
        let completed = PlanInputs::new(self.services.clone(), catalog, self.origin, &gpu_models)?;
        Ok(PlanInputs {
            notes: self.notes.iter().chain(&completed.notes).cloned().collect(),
            images: self.images.clone(),
            capacities: self.capacities.clone(),
            judged_points: self.judged_points.clone(),
            ..completed
        })
    }

    /// Inputs for `services` over the same profiles (shared, not copied),
    /// notes and images.
    pub fn for_services(&self, services: Vec<ServiceSlo>) -> PlanInputs {
        PlanInputs { services, ..self.clone() }
    }

    /// The built-in example: the demo's services and their placeholder
    /// images on the synthetic profiles, completed for `fleet`.
    pub fn demo(fleet: &[GpuModel]) -> Result<PlanInputs, PlanError> {
        Ok(PlanInputs::new(demo_services(), builtin_catalog(), ProfileOrigin::Synthetic, fleet)?
            .with_images(demo_images()))
    }

    /// The same inputs with each service's container image and arguments
    /// (carried into the plan; the planners never read them).
    pub fn with_images(mut self, images: BTreeMap<String, ServiceImage>) -> PlanInputs {
        self.images = images;
        self
    }

    /// The same inputs with `notes` added after the estimates' (things a
    /// reader of the plan should know about where the inputs came from).
    pub fn with_notes(mut self, notes: impl IntoIterator<Item = String>) -> PlanInputs {
        self.notes.extend(notes);
        self
    }

    /// The services.
    pub fn services(&self) -> &[ServiceSlo] {
        &self.services
    }

    /// The profiles, completed for [`PlanInputs::gpu_models`].
    pub fn catalog(&self) -> &ProfileCatalog {
        &self.catalog
    }

    /// The GPU models the profiles were completed for.
    pub fn gpu_models(&self) -> &[GpuModel] {
        &self.gpu_models
    }

    /// Notes for the plan: estimated profiles, then what the caller added.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Each service's container, by service name.
    pub fn images(&self) -> &BTreeMap<String, ServiceImage> {
        &self.images
    }

    /// The serving model's memo of segment capacities.
    pub(crate) fn capacities(&self) -> &Capacities {
        &self.capacities
    }

    /// The memo of the points each service was planned with.
    pub(crate) fn judged_points(&self) -> &PointsMemo {
        &self.judged_points
    }

    /// The memo of the last fresh optimum a replan planned.
    pub(crate) fn fresh_memo(&self) -> &FreshMemo {
        &self.fresh_memo
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_demo_is_completed_for_its_fleet_and_carries_its_images() {
        let inputs = PlanInputs::demo(&[GpuModel::A100_80GB, GpuModel::H200_141GB]).unwrap();
        assert!(inputs.catalog().models(GpuModel::H200_141GB).next().is_some());
        assert!(inputs.notes().iter().all(|note| note.contains("h200-141gb")), "{:?}", inputs.notes());
        assert_eq!(inputs.images().len(), inputs.services().len());
    }

    #[test]
    fn a_gpu_model_left_without_profiles_is_named() {
        let measured = builtin_catalog();
        let error = PlanInputs::new(demo_services(), measured, ProfileOrigin::Measured, &[GpuModel::A30_24GB])
            .unwrap_err()
            .to_string();
        assert!(error.starts_with("no profiles for GPU model a30-24gb"), "{error}");
        assert!(error.contains("a100-80gb, h100-80gb"), "{error}");
    }
}
