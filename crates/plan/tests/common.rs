//! Helpers shared by the planner's integration tests.

use tessera_core::{GpuModel, ProfileCatalog};

/// ParvaGPU's measured A100 profiles beside the repository, or `None` (with
/// a line saying the test skips) when they are absent.
pub fn parvagpu_catalog() -> Option<ProfileCatalog> {
    let dir = tessera_testkit::shared_data("parvagpu/prof_data")?;
    Some(tessera_store::read_profile_dir(&dir, GpuModel::A100_80GB).unwrap().catalog())
}
