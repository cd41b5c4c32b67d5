//! The colocation models on data: KACE's measured pairs and groups of four
//! (skipped when `../shared/data/kace` is absent) and groups of three
//! measured on a documented synthetic GPU.

mod kace_protocols;
mod synthetic_groups;
