//! Helpers shared by the planner's integration tests.

use std::path::Path;

use tessera_core::{GpuModel, ProfileCatalog};

/// ParvaGPU's measured A100 profiles beside the repository, or `None` (with
/// a line saying the test skips) when they are absent.
pub fn parvagpu_catalog() -> Option<ProfileCatalog> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/parvagpu/prof_data");
    if !dir.is_dir() {
        eprintln!("skipping: {} is absent (ParvaGPU reference data)", dir.display());
        return None;
    }
    Some(tessera_store::read_profile_dir(&dir, GpuModel::A100_80GB).unwrap().profiles.into_iter().collect())
}
