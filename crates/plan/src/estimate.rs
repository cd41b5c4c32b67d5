//! Profiles for the GPU models of a fleet that have none: estimated, and
//! said so.
//!
//! A fleet may name GPU models the catalogue has no profile of for some
//! model. Measured data always wins: a model measured on a GPU model of the
//! same MIG shape (and no more memory per instance than the target) is
//! transferred from that measurement, scaled by the synthetic speed model
//! ([`transfer_profile`]); of several such measurements, the one on the GPU
//! model closest in speed. The synthetic profile model
//! ([`synthetic_profile`]) fills in only for a catalogue that is itself
//! synthetic (the built-in example), where no measurement of the model
//! exists. A measured model that cannot be transferred gets no estimate,
//! and its [`Estimate`] says why.

use std::collections::BTreeSet;
use std::fmt;

use tessera_core::synthetic::{relative_speed, synthetic_profile, transfer_profile, MODELS};
use tessera_core::{GpuModel, ProfileCatalog};

/// Where the profiles of a catalogue come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProfileOrigin {
    /// Measurements (files, the store).
    Measured,
    /// The built-in synthetic profile model.
    Synthetic,
}

/// How a GPU model got (or did not get) the profile of a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EstimateSource {
    /// Transferred from measurements on this GPU model.
    Measured(GpuModel),
    /// Computed by the synthetic profile model.
    Synthetic,
    /// Not estimated: the model is measured only on GPU models of another
    /// MIG shape or with less memory per instance.
    Untransferable,
}

/// A profile the catalogue did not hold for a GPU model of the fleet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Estimate {
    /// The GPU model of the fleet.
    pub gpu_model: GpuModel,
    /// The model (workload).
    pub model: String,
    /// Where its profile comes from, if anywhere.
    pub source: EstimateSource,
}

impl fmt::Display for Estimate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (model, gpu) = (&self.model, self.gpu_model);
        match self.source {
            EstimateSource::Measured(from) => write!(
                f,
                "profiles of {model} on {gpu} are estimated from {from} measurements scaled by the synthetic speed model"
            ),
            EstimateSource::Synthetic => {
                write!(f, "profiles of {model} on {gpu} come from the synthetic profile model (not measurements)")
            }
            EstimateSource::Untransferable => write!(
                f,
                "no profile of {model} on {gpu}: it is measured only on GPU models of another MIG shape or with less \
                 memory per instance"
            ),
        }
    }
}

/// Adds to `catalog`, for every GPU model of `fleet`, the profiles of the
/// catalogue's models it lacks (see the module docs); returns the catalogue
/// and one [`Estimate`] per profile that was missing, in (GPU model, model)
/// order.
pub fn complete_for_fleet(
    mut catalog: ProfileCatalog,
    origin: ProfileOrigin,
    fleet: &[GpuModel],
) -> (ProfileCatalog, Vec<Estimate>) {
    let models: BTreeSet<String> = catalog.iter().map(|p| p.model.clone()).collect();
    let mut estimates = Vec::new();
    for &gpu in fleet {
        for model in &models {
            if catalog.get(gpu, model).is_some() {
                continue;
            }
            let synthetic = MODELS.iter().find(|m| m.name == model).filter(|_| origin == ProfileOrigin::Synthetic);
            let (profile, source) = match synthetic {
                Some(params) => (synthetic_profile(gpu, params).ok(), EstimateSource::Synthetic),
                None => {
                    let closest = catalog
                        .iter()
                        .filter(|p| &p.model == model)
                        .filter_map(|p| transfer_profile(p, gpu).map(|t| (p.gpu_model, t)))
                        .min_by(|(a, _), (b, _)| speed_distance(*a, gpu).total_cmp(&speed_distance(*b, gpu)));
                    match closest {
                        Some((from, profile)) => (Some(profile), EstimateSource::Measured(from)),
                        None => (None, EstimateSource::Untransferable),
                    }
                }
            };
            if let Some(profile) = profile {
                catalog.insert(profile);
            }
            estimates.push(Estimate { gpu_model: gpu, model: model.clone(), source });
        }
    }
    (catalog, estimates)
}

/// How far apart two GPU models are in the synthetic speed model.
fn speed_distance(a: GpuModel, b: GpuModel) -> f64 {
    (relative_speed(a) / relative_speed(b)).ln().abs()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::synthetic::builtin_catalog;
    use tessera_core::{ModelProfile, ProfilePoint, SegmentConfig};

    /// A "measured" resnet50 whose numbers differ from the synthetic model's.
    fn measured(gpu: GpuModel, throughput_rps: f64) -> ModelProfile {
        let config = SegmentConfig { size_gpcs: 1, batch: 4, procs: 1 };
        ModelProfile::new(gpu, "resnet50", vec![ProfilePoint::new(config, throughput_rps, 40.0, None).unwrap()])
            .unwrap()
    }

    #[test]
    fn measured_data_wins_over_the_synthetic_model_of_the_same_name() {
        let catalog: ProfileCatalog = [measured(GpuModel::A100_80GB, 100.0)].into_iter().collect();
        let (completed, estimates) =
            complete_for_fleet(catalog, ProfileOrigin::Measured, &[GpuModel::A100_80GB, GpuModel::H100_80GB]);
        let h100 = completed.get(GpuModel::H100_80GB, "resnet50").unwrap();
        assert_eq!(h100.points().len(), 1);
        assert!((h100.points()[0].throughput_rps - 180.0).abs() < 1e-9, "{:?}", h100.points());
        assert_eq!(
            estimates,
            vec![Estimate {
                gpu_model: GpuModel::H100_80GB,
                model: "resnet50".into(),
                source: EstimateSource::Measured(GpuModel::A100_80GB)
            }]
        );
        assert!(estimates[0].to_string().contains("estimated from a100-80gb measurements"), "{}", estimates[0]);
    }

    #[test]
    fn the_closest_measured_gpu_in_speed_is_the_source() {
        let catalog: ProfileCatalog =
            [measured(GpuModel::A100_80GB, 100.0), measured(GpuModel::H100_80GB, 200.0)].into_iter().collect();
        let (completed, estimates) = complete_for_fleet(catalog, ProfileOrigin::Measured, &[GpuModel::H200_141GB]);
        assert_eq!(estimates[0].source, EstimateSource::Measured(GpuModel::H100_80GB));
        let h200 = completed.get(GpuModel::H200_141GB, "resnet50").unwrap();
        assert!((h200.points()[0].throughput_rps - 200.0 * 2.0 / 1.8).abs() < 1e-9);
    }

    #[test]
    fn a_measurement_that_cannot_be_transferred_gets_no_synthetic_stand_in() {
        let catalog: ProfileCatalog = [measured(GpuModel::A100_80GB, 100.0)].into_iter().collect();
        let (completed, estimates) =
            complete_for_fleet(catalog, ProfileOrigin::Measured, &[GpuModel::A100_40GB, GpuModel::A30_24GB]);
        assert!(completed.get(GpuModel::A100_40GB, "resnet50").is_none());
        assert!(completed.get(GpuModel::A30_24GB, "resnet50").is_none());
        assert!(estimates.iter().all(|e| e.source == EstimateSource::Untransferable), "{estimates:?}");
        assert!(estimates[0].to_string().starts_with("no profile of resnet50 on a100-40gb"), "{}", estimates[0]);
    }

    #[test]
    fn a_synthetic_catalogue_is_completed_by_the_synthetic_model() {
        let (completed, estimates) =
            complete_for_fleet(builtin_catalog(), ProfileOrigin::Synthetic, &[GpuModel::H200_141GB]);
        assert_eq!(estimates.len(), MODELS.len());
        assert!(estimates.iter().all(|e| e.source == EstimateSource::Synthetic && e.gpu_model == GpuModel::H200_141GB));
        let expected = synthetic_profile(GpuModel::H200_141GB, &MODELS[0]).unwrap();
        assert_eq!(completed.get(GpuModel::H200_141GB, MODELS[0].name), Some(&expected));
        assert!(estimates[0].to_string().contains("synthetic profile model"), "{}", estimates[0]);
    }

    #[test]
    fn existing_profiles_are_kept() {
        let catalog = builtin_catalog();
        let (completed, estimates) =
            complete_for_fleet(catalog.clone(), ProfileOrigin::Synthetic, &[GpuModel::A100_80GB, GpuModel::H100_80GB]);
        assert_eq!(completed, catalog);
        assert!(estimates.is_empty());
    }
}
