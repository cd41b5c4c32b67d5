//! File formats: ParvaGPU's files and Tessera's own CSV formats.

pub mod container_args;
pub mod kace;
pub mod native;
pub mod parvagpu;
pub mod plan;
pub mod plan_file;
mod points;
mod table;
pub mod trace;
pub mod traffic;
