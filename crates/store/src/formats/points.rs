//! Collecting the rows of one model's profile into a [`ModelProfile`], with
//! errors that name the line and the file's own column names.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use tessera_core::{CoreError, GpuModel, ModelProfile, ProfilePoint, SegmentConfig};

use crate::error::StoreError;

/// The column names a file format uses for the fields of a profile point.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PointColumns {
    /// Instance size in GPCs.
    pub size_gpcs: &'static str,
    /// Batch size.
    pub batch: &'static str,
    /// MPS processes.
    pub procs: &'static str,
    /// Throughput.
    pub throughput: &'static str,
    /// Latency.
    pub latency: &'static str,
    /// Memory.
    pub memory: &'static str,
}

impl PointColumns {
    /// The file's column name for a field name used by [`CoreError`].
    fn column_for(&self, core_field: &str) -> &'static str {
        match core_field {
            "size_gpcs" => self.size_gpcs,
            "batch" => self.batch,
            "procs" => self.procs,
            "throughput_rps" => self.throughput,
            "latency_ms" => self.latency,
            "memory_gb" => self.memory,
            _ => "row",
        }
    }
}

/// The values of one profile row, already converted to Tessera's units.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PointRow {
    /// 1-based line number.
    pub line: u64,
    /// The configuration.
    pub config: SegmentConfig,
    /// Whole-segment throughput.
    pub throughput_rps: f64,
    /// Batch latency.
    pub latency_ms: f64,
    /// Memory, when known.
    pub memory_gb: Option<f64>,
}

/// The rows of one (GPU model, model) profile being read from one file.
#[derive(Debug)]
pub(crate) struct ProfileRows {
    path: PathBuf,
    columns: PointColumns,
    gpu: GpuModel,
    model: String,
    first_line: u64,
    points: Vec<ProfilePoint>,
    lines: HashMap<SegmentConfig, u64>,
}

impl ProfileRows {
    /// Starts the profile of `model` on `gpu`, first seen on `first_line`.
    pub fn new(path: &Path, columns: PointColumns, gpu: GpuModel, model: &str, first_line: u64) -> ProfileRows {
        ProfileRows {
            path: path.to_path_buf(),
            columns,
            gpu,
            model: model.to_string(),
            first_line,
            points: Vec::new(),
            lines: HashMap::new(),
        }
    }

    fn domain(&self, line: u64, field: &str, source: CoreError) -> StoreError {
        StoreError::domain(&self.path, line, field, source)
    }

    /// Validates and adds one row.
    pub fn push(&mut self, row: PointRow) -> Result<(), StoreError> {
        let point =
            ProfilePoint::new(row.config, row.throughput_rps, row.latency_ms, row.memory_gb).map_err(|error| {
                let field = match &error {
                    CoreError::InvalidValue { field, .. } => self.columns.column_for(field),
                    _ => "row",
                };
                self.domain(row.line, field, error)
            })?;
        self.gpu
            .spec()
            .profile_for_size(row.config.size_gpcs)
            .map_err(|error| self.domain(row.line, self.columns.size_gpcs, error))?;
        if let Some(&first_line) = self.lines.get(&row.config) {
            return Err(StoreError::DuplicateConfig {
                path: self.path.clone(),
                line: row.line,
                model: self.model.clone(),
                config: row.config.to_string(),
                first_line,
            });
        }
        self.lines.insert(row.config, row.line);
        self.points.push(point);
        Ok(())
    }

    /// Number of points added so far.
    pub fn len(&self) -> usize {
        self.points.len()
    }

    /// The validated profile.
    pub fn finish(self) -> Result<ModelProfile, StoreError> {
        let (path, line) = (self.path, self.first_line);
        ModelProfile::new(self.gpu, self.model, self.points)
            .map_err(|source| StoreError::domain(&path, line, "model", source))
    }
}
