//! Loading profiles and SLOs from the places the command line names.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use tessera_core::synthetic::{builtin_catalog, demo_images, demo_services};
use tessera_core::text::count;
use tessera_core::{GpuModel, GpuOffer, ProfileCatalog, ServiceSlo, SourcedProfile};
use tessera_plan::{PlanInputs, ProfileOrigin, DEFAULT_GPU_MODEL};
use tessera_store::{
    read_profile_dir, read_service_images, read_slo_csv, read_slo_scenario, read_sourced_profiles_csv, Store,
};

use crate::args::{InputArgs, ProfileSource, SloSource};

/// Resolves the store path: `--store`/`TESSERA_STORE`, else the default.
pub fn store_path(explicit: Option<&Path>) -> Result<PathBuf> {
    match explicit {
        Some(path) => Ok(path.to_path_buf()),
        None => tessera_store::default_path()
            .context("cannot find the user's data directory; pass --store PATH or set TESSERA_STORE"),
    }
}

/// What to do first when a command needs a store that does not exist yet.
pub const REGISTER_FIRST: &str = "register the workload first (see `tessera workload add --help`)";

/// Opens the store at `path` to change what it holds; a store that does not
/// exist is an error (there is nothing to change), not created. `first`, if
/// any, says what would create it: `no store at PATH; FIRST`.
pub fn open_existing(path: &Path, first: Option<&str>) -> Result<Store> {
    if !path.exists() {
        match first {
            Some(first) => bail!("no store at {}; {first}", path.display()),
            None => bail!("no store at {}", path.display()),
        }
    }
    Ok(Store::open(path)?)
}

/// The profiles and services that `args` name, completed for the GPU
/// models of `fleet`.
pub fn load(args: &InputArgs, fleet: &[GpuOffer], store: Option<&Path>) -> Result<PlanInputs> {
    let slos = &args.slos;
    if !slos_given(args) {
        bail!("no SLOs given: pass --slo FILE, or --slo-rates FILE --slo-latency FILE --scenario K, or --demo");
    }
    let (catalog, origin, predicted) = load_catalog(&args.profiles, first_gpu(fleet), args.demo, store)?;
    let gpu_models: Vec<GpuModel> = fleet.iter().map(|offer| offer.model).collect();
    let mut services = load_services(slos, &catalog, first_gpu(fleet))?;
    if let Some(percentile) = slos.slo_percentile {
        services = services.into_iter().map(|slo| slo.with_percentile(percentile)).collect::<Result<_, _>>()?;
    }
    let images = match &slos.slo {
        Some(path) => read_service_images(path)?,
        None if slos.slo_rates.is_none() => demo_images(),
        None => BTreeMap::new(),
    };
    let predicted_note = (predicted > 0).then(|| {
        format!(
            "{} of the profiles are predicted, not measured: they are planned at the conservative ends of their \
             intervals",
            count(predicted, "point")
        )
    });
    Ok(PlanInputs::new(services, catalog, origin, &gpu_models)?.with_notes(predicted_note).with_images(images))
}

/// Whether `args` name any SLOs (a file, ParvaGPU's scenario files, or the
/// built-in example's).
pub fn slos_given(args: &InputArgs) -> bool {
    args.slos.slo.is_some() || args.slos.slo_rates.is_some() || args.demo
}

/// The profiles `args` name (as [`load`] reads them) with `services` in
/// place of SLOs, completed for the GPU models of `fleet`.
pub fn load_with_services(
    args: &InputArgs,
    fleet: &[GpuOffer],
    store: Option<&Path>,
    services: impl FnOnce(&ProfileCatalog) -> Result<Vec<ServiceSlo>>,
) -> Result<PlanInputs> {
    let (catalog, origin, _) = load_catalog(&args.profiles, first_gpu(fleet), args.demo, store)?;
    let gpu_models: Vec<GpuModel> = fleet.iter().map(|offer| offer.model).collect();
    let services = services(&catalog)?;
    Ok(PlanInputs::new(services, catalog, origin, &gpu_models)?)
}

/// The first GPU model of `fleet` (the one a ParvaGPU profile folder or
/// deployment map is on), or the default.
pub fn first_gpu(fleet: &[GpuOffer]) -> GpuModel {
    fleet.first().map_or(DEFAULT_GPU_MODEL, |offer| offer.model)
}

/// Profiles from `--profiles` (a ParvaGPU folder measured on `gpu`), the
/// built-in example (`--demo`), or the store, whether they are measured,
/// and how many of their points are predicted (a completed profile CSV).
fn load_catalog(
    source: &ProfileSource,
    gpu: GpuModel,
    demo: bool,
    store: Option<&Path>,
) -> Result<(ProfileCatalog, ProfileOrigin, usize)> {
    if let Some(path) = &source.profiles {
        let profiles = read_sourced_profiles(path, gpu)?;
        let predicted = profiles.iter().flat_map(|p| p.points()).filter(|p| !p.is_measured()).count();
        let catalog = profiles.iter().map(SourcedProfile::planning_profile).collect();
        return Ok((catalog, ProfileOrigin::Measured, predicted));
    }
    if demo {
        return Ok((builtin_catalog(), ProfileOrigin::Synthetic, 0));
    }
    let path = store_path(store)?;
    if !path.exists() {
        bail!(
            "no profile store at {}; import profiles with `tessera profiles import`, or pass --profiles DIR or --demo",
            path.display()
        );
    }
    Ok((Store::open_read_only(&path)?.load_catalog(None)?, ProfileOrigin::Measured, 0))
}

/// A ParvaGPU folder (measured on `gpu`, `0,0` rows out of memory) or a
/// Tessera profile CSV, with the origin of every point.
pub fn read_sourced_profiles(path: &Path, gpu: GpuModel) -> Result<Vec<SourcedProfile>> {
    if path.is_dir() {
        Ok(read_profile_dir(path, gpu)?.profiles)
    } else {
        Ok(read_sourced_profiles_csv(path)?)
    }
}

/// SLOs from `--slo`, the ParvaGPU scenario files, or (otherwise) the
/// built-in example.
fn load_services(source: &SloSource, catalog: &ProfileCatalog, gpu: GpuModel) -> Result<Vec<ServiceSlo>> {
    if let Some(path) = &source.slo {
        return Ok(read_slo_csv(path)?);
    }
    if let (Some(rates), Some(latency), Some(scenario)) = (&source.slo_rates, &source.slo_latency, source.scenario) {
        // Column j of ParvaGPU's files is the j-th profiled model in
        // alphabetical order.
        let models: Vec<String> = catalog.models(gpu).map(str::to_string).collect();
        return Ok(read_slo_scenario(rates, latency, scenario, &models)?);
    }
    Ok(demo_services())
}

/// The profiles that give a plan's partial batches their latencies, for
/// simulating it: `--profiles`, the built-in example with `--demo`, else
/// the store when there is one; `None` when there is none.
pub fn partial_batch_profiles(
    profiles: Option<&Path>,
    demo: bool,
    gpu: GpuModel,
    store: Option<&Path>,
) -> Result<Option<ProfileCatalog>> {
    if let Some(path) = profiles {
        let sourced = read_sourced_profiles(path, gpu)?;
        return Ok(Some(sourced.iter().map(SourcedProfile::planning_profile).collect()));
    }
    if demo {
        return Ok(Some(builtin_catalog()));
    }
    let path = store_path(store)?;
    if !path.exists() {
        return Ok(None);
    }
    Ok(Some(Store::open_read_only(&path)?.load_catalog(None)?))
}

/// Reads a plan file and refuses it when the verifier's structural checks
/// (the MIG lattice, the fleet) find fault with it, with their reasons on
/// one line; no profiles are needed. What `simulate serve` reads.
pub fn read_sound_plan(path: &Path) -> Result<tessera_core::Plan> {
    let plan = tessera_store::read_plan_file(path, None)?;
    tessera_plan::check_structure(&plan).with_context(|| path.display().to_string())?;
    Ok(plan)
}
