//! Loading profiles and SLOs from the places the command line names.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use tessera_core::synthetic::{builtin_catalog, demo_services};
use tessera_core::{GpuModel, ProfileCatalog, ServiceSlo};
use tessera_store::{read_profile_dir, read_profiles_csv, read_slo_csv, read_slo_scenario, Store};

use crate::args::{PlanInputs, ProfileSource, SloSource};

/// Resolves the store path: `--store`/`TESSERA_STORE`, else the default.
pub fn store_path(explicit: Option<&Path>) -> Result<PathBuf> {
    match explicit {
        Some(path) => Ok(path.to_path_buf()),
        None => tessera_store::default_path()
            .context("cannot find the user's data directory; pass --store PATH or set TESSERA_STORE"),
    }
}

/// The profiles and services that `inputs` name.
pub fn load(inputs: &PlanInputs, store: Option<&Path>) -> Result<(ProfileCatalog, Vec<ServiceSlo>)> {
    let catalog = load_catalog(&inputs.profiles, inputs.demo, store)?;
    let services = load_services(&inputs.slos, inputs.demo, &catalog, inputs.profiles.gpu)?;
    Ok((catalog, services))
}

/// Profiles from `--profiles`, the built-in example (`--demo`), or the store.
fn load_catalog(source: &ProfileSource, demo: bool, store: Option<&Path>) -> Result<ProfileCatalog> {
    let catalog = if let Some(path) = &source.profiles {
        read_profiles(path, source.gpu)?
    } else if demo {
        builtin_catalog()
    } else {
        let path = store_path(store)?;
        if !path.exists() {
            bail!(
                "no profile store at {}; import profiles with `tessera profiles import`, or pass --profiles DIR or --demo",
                path.display()
            );
        }
        Store::open(&path)?.load_catalog(Some(source.gpu))?
    };
    if catalog.models(source.gpu).next().is_none() {
        let have: Vec<String> =
            catalog.iter().map(|p| p.gpu.to_string()).collect::<std::collections::BTreeSet<_>>().into_iter().collect();
        bail!(
            "no profiles for GPU model {} (profiles exist for: {}); pick one with --gpu",
            source.gpu,
            if have.is_empty() { "none".to_string() } else { have.join(", ") }
        );
    }
    Ok(catalog)
}

/// A ParvaGPU folder (measured on `gpu`) or a Tessera profile CSV.
pub fn read_profiles(path: &Path, gpu: GpuModel) -> Result<ProfileCatalog> {
    if path.is_dir() {
        Ok(read_profile_dir(path, gpu)?.profiles.into_iter().collect())
    } else {
        Ok(read_profiles_csv(path)?.into_iter().collect())
    }
}

/// SLOs from `--slo`, the ParvaGPU scenario files, or the built-in example.
fn load_services(source: &SloSource, demo: bool, catalog: &ProfileCatalog, gpu: GpuModel) -> Result<Vec<ServiceSlo>> {
    if let Some(path) = &source.slo {
        return Ok(read_slo_csv(path)?);
    }
    if let (Some(rates), Some(latency), Some(scenario)) = (&source.slo_rates, &source.slo_latency, source.scenario) {
        // Column j of ParvaGPU's files is the j-th profiled model in
        // alphabetical order.
        let models: Vec<String> = catalog.models(gpu).map(str::to_string).collect();
        return Ok(read_slo_scenario(rates, latency, scenario, &models)?);
    }
    if demo {
        return Ok(demo_services());
    }
    bail!("no SLOs given: pass --slo FILE, or --slo-rates FILE --slo-latency FILE --scenario K, or --demo")
}
