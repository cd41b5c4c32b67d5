//! Reading any plan file, told apart by its content rather than its name:
//! the one reader every command uses.

use std::path::Path;

use tessera_core::{GpuModel, Plan, ProfileCatalog};

use crate::error::StoreError;
use crate::formats::parvagpu::{deployment_from_table, DEPLOYMENT_HEADER};
use crate::formats::plan::{parse_plan_json, plan_from_table};
use crate::formats::table::Table;

/// What a ParvaGPU deployment map is read with: it names models only, so
/// it is read as plans of one GPU model with a catalogue's numbers.
#[derive(Debug, Clone, Copy)]
pub struct MapProfiles<'a> {
    /// The GPU model its GPUs are.
    pub gpu: GpuModel,
    /// The profiles its segments' numbers come from.
    pub catalog: &'a ProfileCatalog,
}

/// Reads the plan file at `path`: plan JSON (the first character is `{`
/// or `[`),
/// ParvaGPU's deployment map (a header with `Num instance`; read with
/// `map_profiles`, and refused without them), or else Tessera's plan CSV.
pub fn read_plan_file(path: &Path, map_profiles: Option<MapProfiles<'_>>) -> Result<Plan, StoreError> {
    let bytes = std::fs::read(path).map_err(|cause| StoreError::io(path, cause))?;
    let text_start = bytes.strip_prefix("\u{feff}".as_bytes()).unwrap_or(&bytes);
    if text_start.iter().all(u8::is_ascii_whitespace) {
        return Err(StoreError::PlanFormat {
            path: path.to_path_buf(),
            detail: "the file is empty (expected a plan: JSON from `tessera plan --format json`, or its CSV)".into(),
        });
    }
    if matches!(text_start.iter().find(|byte| !byte.is_ascii_whitespace()), Some(b'{' | b'[')) {
        return parse_plan_json(path, &bytes);
    }
    let table = Table::read(path)?;
    if table.optional(DEPLOYMENT_HEADER[0])?.is_none() {
        return plan_from_table(&table);
    }
    match map_profiles {
        Some(MapProfiles { gpu, catalog }) => deployment_from_table(&table, gpu, catalog),
        None => Err(StoreError::PlanFormat {
            path: path.to_path_buf(),
            detail: "it is ParvaGPU's deployment map, which names models only and no numbers; read it where \
                     profiles are given (`tessera verify`, `tessera plan --from`)"
                .to_string(),
        }),
    }
}
