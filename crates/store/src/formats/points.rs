//! Collecting the rows of one model's profile into a [`SourcedProfile`]
//! (measured and predicted points, configurations measured out of memory),
//! with errors that name the line and the file's own column names.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use tessera_core::{
    BatchTiming, CoreError, GpuModel, PointSource, ProfilePoint, SegmentConfig, SourcedPoint, SourcedProfile,
};

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
    /// A prediction's lower throughput bound.
    pub throughput_low: &'static str,
    /// A prediction's upper latency bound.
    pub latency_high: &'static str,
}

impl PointColumns {
    /// The file's column name for a field name used by [`CoreError`] (the
    /// timing columns, which only Tessera's format has, by their own name).
    fn column_for(&self, core_field: &'static str) -> &'static str {
        match core_field {
            "size_gpcs" => self.size_gpcs,
            "batch" => self.batch,
            "procs" => self.procs,
            "throughput_rps" => self.throughput,
            "latency_ms" => self.latency,
            "memory_gb" => self.memory,
            "throughput_low_rps" => self.throughput_low,
            "latency_high_ms" => self.latency_high,
            timing @ ("latency_p50_ms" | "latency_p99_ms" | "dispatch_gap_ms" | "serving_slowdown") => timing,
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
    /// Measured, or predicted with its bounds.
    pub source: PointSource,
    /// What was measured of its batch times beside their mean.
    pub timing: BatchTiming,
}

/// The rows of one (GPU model, model) profile being read from one file.
#[derive(Debug)]
pub(crate) struct ProfileRows {
    path: PathBuf,
    columns: PointColumns,
    gpu: GpuModel,
    model: String,
    first_line: u64,
    points: Vec<SourcedPoint>,
    out_of_memory: Vec<SegmentConfig>,
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
            out_of_memory: Vec::new(),
            lines: HashMap::new(),
        }
    }

    fn domain(&self, line: u64, field: &str, source: CoreError) -> StoreError {
        StoreError::domain(&self.path, line, field, source)
    }

    /// The file's column for a field named in a [`CoreError`].
    fn column_of(&self, error: &CoreError) -> &'static str {
        match error {
            CoreError::InvalidValue { field, .. } => self.columns.column_for(field),
            _ => "row",
        }
    }

    /// Validates and adds one feasible row.
    pub fn push(&mut self, row: PointRow) -> Result<(), StoreError> {
        let point = ProfilePoint::new(row.config, row.throughput_rps, row.latency_ms, row.memory_gb)
            .and_then(|point| point.with_timing(row.timing))
            .and_then(|point| SourcedPoint::new(point, row.source))
            .map_err(|error| self.domain(row.line, self.column_of(&error), error))?;
        self.claim(row.line, row.config)?;
        self.points.push(point);
        Ok(())
    }

    /// Adds a configuration measured out of memory, on `line`.
    pub fn push_out_of_memory(&mut self, line: u64, config: SegmentConfig) -> Result<(), StoreError> {
        for (field, value, expected) in
            [("batch", u64::from(config.batch), "at least 1"), ("procs", u64::from(config.procs), "at least 1")]
        {
            if value == 0 {
                return Err(self.domain(
                    line,
                    self.columns.column_for(field),
                    CoreError::invalid(field, expected, value),
                ));
            }
        }
        self.claim(line, config)?;
        self.out_of_memory.push(config);
        Ok(())
    }

    /// Checks that `config` exists on the GPU model and was not listed
    /// before, and records it as listed on `line`.
    fn claim(&mut self, line: u64, config: SegmentConfig) -> Result<(), StoreError> {
        self.gpu
            .spec()
            .profile_for_size(config.size_gpcs)
            .map_err(|error| self.domain(line, self.columns.size_gpcs, error))?;
        if let Some(&first_line) = self.lines.get(&config) {
            return Err(StoreError::DuplicateConfig {
                path: self.path.clone(),
                line,
                model: self.model.clone(),
                config: config.to_string(),
                first_line,
            });
        }
        self.lines.insert(config, line);
        Ok(())
    }

    /// Number of points added so far.
    pub fn len(&self) -> usize {
        self.points.len()
    }

    /// The validated profile.
    pub fn finish(self) -> Result<SourcedProfile, StoreError> {
        let (path, line) = (self.path, self.first_line);
        SourcedProfile::new(self.gpu, self.model, self.points, self.out_of_memory)
            .map_err(|source| StoreError::domain(&path, line, "model", source))
    }
}
