//! Tessera's own CSV formats. Headers carry units, columns are found by
//! name and may come in any order.
//!
//! - Profiles: `gpu_model,model,size_gpcs,batch,procs,throughput_rps,latency_ms,memory_gb`
//!   (`memory_gb` optional, an empty cell means unknown; `throughput_rps` and
//!   `memory_gb` are the whole segment's, all processes together: a point
//!   needing more memory than its MIG instance has is never planned).
//!   A completed profile (`tessera profiles complete`) has three more:
//!   `source` (`measured`, `predicted`, or `out-of-memory` for a
//!   configuration measured not to fit, whose numbers are empty) and, on
//!   predicted rows only, `throughput_low_rps` and `latency_high_ms`, the
//!   conservative ends of the prediction's interval, which planning uses.
//!   A profile that measured more than the mean batch time has any of four
//!   optional columns (empty cells: not measured): `latency_p50_ms` and
//!   `latency_p99_ms` (the spread of one batch's run time),
//!   `dispatch_gap_ms` (a busy process's time between batches) and
//!   `serving_slowdown` (how much slower batches ran while serving than
//!   profiled, 0.004 for 0.4%); the serving model uses each one present.
//! - SLOs: `service,model,rate_rps,latency_ms` (`model` optional: absent
//!   means the service runs the model of its own name), and optionally
//!   `image,args`: the container that runs the service in a cluster
//!   (`args` split at spaces, `{batch}` standing for the batch size).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use tessera_core::slo::DEFAULT_PERCENTILE;
use tessera_core::{
    BatchTiming, GpuModel, ModelProfile, PointSource, SegmentConfig, ServiceImage, ServiceSlo, SourcedProfile,
};

use crate::error::StoreError;
use crate::formats::container_args::parse_container_args;
use crate::formats::points::{PointColumns, PointRow, ProfileRows};
use crate::formats::table::{Cell, Column, Record, Table};

/// Tessera's profile columns, in the order they are written.
const PROFILE_HEADER: [&str; 8] =
    ["gpu_model", "model", "size_gpcs", "batch", "procs", "throughput_rps", "latency_ms", "memory_gb"];

/// The columns a completed profile adds, in the order they are written.
const SOURCE_COLUMNS: [&str; 3] = ["source", "throughput_low_rps", "latency_high_ms"];

/// The optional columns of what was measured of the batch times beside
/// their mean ([`BatchTiming`]'s fields), in the order they are written.
const TIMING_COLUMNS: [&str; 4] = ["latency_p50_ms", "latency_p99_ms", "dispatch_gap_ms", "serving_slowdown"];

/// The `source` of a measured point.
const MEASURED: &str = "measured";
/// The `source` of a predicted point.
const PREDICTED: &str = "predicted";
/// The `source` of a configuration measured not to fit in memory.
const OUT_OF_MEMORY: &str = "out-of-memory";

/// The profile point columns (identical to the domain's field names).
const COLUMNS: PointColumns = PointColumns {
    size_gpcs: "size_gpcs",
    batch: "batch",
    procs: "procs",
    throughput: "throughput_rps",
    latency: "latency_ms",
    memory: "memory_gb",
    throughput_low: "throughput_low_rps",
    latency_high: "latency_high_ms",
};

/// Reads a profile CSV as planners use it: rows are grouped by
/// (`gpu_model`, `model`), predicted points take their conservative bounds
/// and out-of-memory rows are left out; the profiles come ordered by GPU
/// model (as in [`GpuModel::ALL`]), then model name, like a
/// [`tessera_core::ProfileCatalog`].
pub fn read_profiles_csv(path: &Path) -> Result<Vec<ModelProfile>, StoreError> {
    Ok(read_sourced_profiles_csv(path)?.iter().map(SourcedProfile::planning_profile).collect())
}

/// Parses `bytes` as a profile CSV (see [`read_profiles_csv`]); `source`
/// (a file name or a description such as `request body`) starts every error
/// message.
pub fn parse_profiles_csv(source: &str, bytes: &[u8]) -> Result<Vec<ModelProfile>, StoreError> {
    let profiles = sourced_profiles_from_table(&Table::parse(Path::new(source), bytes)?)?;
    Ok(profiles.iter().map(SourcedProfile::planning_profile).collect())
}

/// Reads a profile CSV with the origin of every point (a file without a
/// `source` column is all measured) and the configurations measured out of
/// memory, ordered like [`read_profiles_csv`].
pub fn read_sourced_profiles_csv(path: &Path) -> Result<Vec<SourcedProfile>, StoreError> {
    sourced_profiles_from_table(&Table::read(path)?)
}

fn sourced_profiles_from_table(table: &Table) -> Result<Vec<SourcedProfile>, StoreError> {
    let path = table.path.as_path();
    let known: Vec<&str> = PROFILE_HEADER.iter().chain(&SOURCE_COLUMNS).chain(&TIMING_COLUMNS).copied().collect();
    table.reject_unknown_columns(&known)?;
    let columns = ProfileColumns {
        gpu: table.require("gpu_model")?,
        model: table.require("model")?,
        size: table.require(COLUMNS.size_gpcs)?,
        batch: table.require(COLUMNS.batch)?,
        procs: table.require(COLUMNS.procs)?,
        throughput: table.require(COLUMNS.throughput)?,
        latency: table.require(COLUMNS.latency)?,
        memory: table.optional(COLUMNS.memory)?,
        source: table.optional("source")?,
        throughput_low: table.optional(COLUMNS.throughput_low)?,
        latency_high: table.optional(COLUMNS.latency_high)?,
        timing: [
            table.optional(TIMING_COLUMNS[0])?,
            table.optional(TIMING_COLUMNS[1])?,
            table.optional(TIMING_COLUMNS[2])?,
            table.optional(TIMING_COLUMNS[3])?,
        ],
    };
    let mut groups: BTreeMap<(GpuModel, String), ProfileRows> = BTreeMap::new();
    for record in &table.rows {
        let cell = |column| Cell::of(path, record, column);
        let gpu_cell = cell(columns.gpu);
        let gpu: GpuModel = gpu_cell.text.parse().map_err(|error| gpu_cell.domain(error))?;
        let model = cell(columns.model).name()?;
        let rows = groups
            .entry((gpu, model.to_string()))
            .or_insert_with(|| ProfileRows::new(path, COLUMNS, gpu, model, record.line));
        columns.add_row(path, record, rows)?;
    }
    groups.into_values().map(ProfileRows::finish).collect()
}

/// The columns of a profile CSV.
struct ProfileColumns<'a> {
    gpu: Column<'a>,
    model: Column<'a>,
    size: Column<'a>,
    batch: Column<'a>,
    procs: Column<'a>,
    throughput: Column<'a>,
    latency: Column<'a>,
    memory: Option<Column<'a>>,
    source: Option<Column<'a>>,
    throughput_low: Option<Column<'a>>,
    latency_high: Option<Column<'a>>,
    /// [`TIMING_COLUMNS`], each where the file has it.
    timing: [Option<Column<'a>>; 4],
}

impl<'a> ProfileColumns<'a> {
    /// The row's [`BatchTiming`]: each timing column's number, or nothing
    /// where the column is absent or the cell empty.
    fn timing(&self, path: &'a Path, record: &'a Record) -> Result<BatchTiming, StoreError> {
        let number = |column: Option<Column<'a>>| -> Result<Option<f64>, StoreError> {
            match column.map(|column| Cell::of(path, record, column)) {
                Some(cell) if !cell.text.is_empty() => cell.number().map(Some),
                _ => Ok(None),
            }
        };
        let [p50, p99, gap, slowdown] = self.timing;
        Ok(BatchTiming {
            latency_p50_ms: number(p50)?,
            latency_p99_ms: number(p99)?,
            dispatch_gap_ms: number(gap)?,
            serving_slowdown: number(slowdown)?,
        })
    }

    /// Reads one row into `rows`, checking that the cells its `source`
    /// leaves empty are empty.
    fn add_row(&self, path: &'a Path, record: &'a Record, rows: &mut ProfileRows) -> Result<(), StoreError> {
        let cell = |column: Column<'a>| Cell::of(path, record, column);
        let config = SegmentConfig {
            size_gpcs: cell(self.size).whole()?,
            batch: cell(self.batch).whole()?,
            procs: cell(self.procs).whole()?,
        };
        let source = match self.source.map(cell) {
            None => MEASURED,
            Some(source) => match source.text {
                MEASURED | PREDICTED | OUT_OF_MEMORY => source.text,
                other => {
                    return Err(
                        source.error(format!("expected {MEASURED}, {PREDICTED} or {OUT_OF_MEMORY}, got '{other}'"))
                    )
                }
            },
        };
        let must_be_empty = |columns: &[Option<Column<'a>>]| -> Result<(), StoreError> {
            match columns.iter().flatten().map(|&column| cell(column)).find(|cell| !cell.text.is_empty()) {
                Some(filled) => Err(filled.error(format!("a {source} row leaves it empty, got '{}'", filled.text))),
                None => Ok(()),
            }
        };
        if source == OUT_OF_MEMORY {
            let [p50, p99, gap, slowdown] = self.timing;
            must_be_empty(&[
                Some(self.throughput),
                Some(self.latency),
                self.memory,
                self.throughput_low,
                self.latency_high,
                p50,
                p99,
                gap,
                slowdown,
            ])?;
            return rows.push_out_of_memory(record.line, config);
        }
        let source = if source == PREDICTED {
            let required = |column: Option<Column<'a>>, name: &str| match column {
                Some(column) => cell(column).positive(),
                None => Err(StoreError::Parse {
                    path: path.to_path_buf(),
                    line: record.line,
                    field: name.to_string(),
                    message: "a predicted row needs this column".to_string(),
                }),
            };
            PointSource::Predicted {
                throughput_low_rps: required(self.throughput_low, COLUMNS.throughput_low)?,
                latency_high_ms: required(self.latency_high, COLUMNS.latency_high)?,
            }
        } else {
            must_be_empty(&[self.throughput_low, self.latency_high])?;
            PointSource::Measured
        };
        rows.push(PointRow {
            line: record.line,
            config,
            throughput_rps: cell(self.throughput).positive()?,
            latency_ms: cell(self.latency).positive()?,
            memory_gb: match self.memory.map(cell) {
                Some(memory) if !memory.text.is_empty() => Some(memory.non_negative()?),
                _ => None,
            },
            source,
            timing: self.timing(path, record)?,
        })
    }
}

/// Writes profiles in Tessera's profile CSV format, one row per point, with
/// numbers in Rust's shortest round-trip notation (reading the file back
/// gives the same values).
pub fn write_profiles_csv<'a, W: Write>(
    out: W,
    profiles: impl IntoIterator<Item = &'a ModelProfile>,
) -> Result<(), StoreError> {
    let what = "profile CSV";
    let measured = profiles
        .into_iter()
        .map(|profile| {
            SourcedProfile::measured(profile, Vec::new()).map_err(|error| StoreError::Unwritable {
                what: what.to_string(),
                detail: format!("model '{}': {error}", profile.model),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    write_rows(out, what, &measured, false)
}

/// Writes completed profiles: Tessera's profile CSV with the `source`,
/// `throughput_low_rps` and `latency_high_ms` columns, one row per point
/// or out-of-memory configuration in configuration order, numbers in
/// Rust's shortest round-trip notation ([`read_sourced_profiles_csv`]
/// gives back the same profiles).
pub fn write_sourced_profiles_csv<W: Write>(out: W, profiles: &[SourcedProfile]) -> Result<(), StoreError> {
    write_rows(out, "completed profile CSV", profiles, true)
}

/// The cells of one profile row after its configuration.
struct RowCells {
    /// Throughput, latency, memory.
    numbers: [String; 3],
    /// [`TIMING_COLUMNS`].
    timing: [String; 4],
    /// [`SOURCE_COLUMNS`].
    source: [String; 3],
}

/// Writes `profiles`, with the source columns when `with_sources` and the
/// timing columns when a point carries any timing.
fn write_rows<W: Write>(out: W, what: &str, profiles: &[SourcedProfile], with_sources: bool) -> Result<(), StoreError> {
    let write_error = |cause: std::io::Error| StoreError::Write { what: what.to_string(), cause };
    let with_timing = profiles.iter().flat_map(SourcedProfile::points).any(|sourced| !sourced.point.timing.is_empty());
    let mut writer = csv::Writer::from_writer(out);
    let header = PROFILE_HEADER
        .iter()
        .chain(if with_timing { &TIMING_COLUMNS[..] } else { &[] })
        .chain(if with_sources { &SOURCE_COLUMNS[..] } else { &[] });
    writer.write_record(header).map_err(|error| write_error(error.into()))?;
    let text = |value: Option<f64>| value.map_or(String::new(), |value| value.to_string());
    for profile in profiles {
        let mut rows: Vec<(SegmentConfig, RowCells)> = profile
            .points()
            .iter()
            .map(|sourced| {
                let point = sourced.point;
                let (source, low, high) = match sourced.source {
                    PointSource::Measured => (MEASURED, None, None),
                    PointSource::Predicted { throughput_low_rps, latency_high_ms } => {
                        (PREDICTED, Some(throughput_low_rps), Some(latency_high_ms))
                    }
                };
                let timing = point.timing;
                let cells = RowCells {
                    numbers: [text(Some(point.throughput_rps)), text(Some(point.latency_ms)), text(point.memory_gb)],
                    timing: [
                        text(timing.latency_p50_ms),
                        text(timing.latency_p99_ms),
                        text(timing.dispatch_gap_ms),
                        text(timing.serving_slowdown),
                    ],
                    source: [source.to_string(), text(low), text(high)],
                };
                (point.config, cells)
            })
            .collect();
        rows.extend(profile.out_of_memory().iter().map(|&config| {
            let source = [OUT_OF_MEMORY.to_string(), String::new(), String::new()];
            (config, RowCells { numbers: Default::default(), timing: Default::default(), source })
        }));
        rows.sort_by_key(|(config, _)| *config);
        for (config, RowCells { numbers, timing, source }) in rows {
            let record = [
                profile.gpu_model.id().to_string(),
                profile.model.clone(),
                config.size_gpcs.to_string(),
                config.batch.to_string(),
                config.procs.to_string(),
            ]
            .into_iter()
            .chain(numbers)
            .chain(timing.into_iter().filter(|_| with_timing))
            .chain(source.into_iter().filter(|_| with_sources));
            writer.write_record(record).map_err(|error| write_error(error.into()))?;
        }
    }
    writer.flush().map_err(write_error)
}

/// The SLO columns, in the order they are written.
const SLO_HEADER: [&str; 4] = ["service", "model", "rate_rps", "latency_ms"];

/// Writes services in Tessera's SLO CSV format, numbers in Rust's shortest
/// round-trip notation, quoted where a name needs it (a comma, a quote), so
/// that [`read_slo_csv`] gives back the same services. A service that could
/// not be read back (an empty name or one with surrounding spaces, which
/// the reader trims; a rate or SLO that is not a positive number) is
/// refused, and nothing is written.
pub fn write_slo_csv<W: Write>(out: W, services: &[ServiceSlo]) -> Result<(), StoreError> {
    let what = "SLO CSV";
    for (n, slo) in services.iter().enumerate().map(|(n, slo)| (n + 1, slo)) {
        let unwritable = |detail: String| StoreError::Unwritable {
            what: what.to_string(),
            detail: format!("service {n} ('{}'), {detail}", slo.service),
        };
        for (field, name) in [("service", &slo.service), ("model", &slo.model)] {
            if name.trim() != name {
                return Err(unwritable(format!("field '{field}': '{name}' has surrounding spaces")));
            }
        }
        ServiceSlo::new(slo.service.as_str(), slo.model.as_str(), slo.rate_rps, slo.latency_slo_ms)
            .and_then(|checked| checked.with_percentile(slo.percentile))
            .map_err(|error| unwritable(error.to_string()))?;
    }
    let write_error = |cause: std::io::Error| StoreError::Write { what: what.to_string(), cause };
    let mut writer = csv::Writer::from_writer(out);
    // The percentile column only when a service asks for another than the
    // default, so files of the default read as they always did.
    let percentiles = services.iter().any(|slo| slo.percentile != DEFAULT_PERCENTILE);
    let mut header: Vec<&str> = SLO_HEADER.to_vec();
    if percentiles {
        header.push(PERCENTILE_COLUMN);
    }
    writer.write_record(&header).map_err(|error| write_error(error.into()))?;
    for slo in services {
        let mut record =
            vec![slo.service.clone(), slo.model.clone(), slo.rate_rps.to_string(), slo.latency_slo_ms.to_string()];
        if percentiles {
            record.push(slo.percentile.to_string());
        }
        writer.write_record(&record).map_err(|error| write_error(error.into()))?;
    }
    writer.flush().map_err(write_error)
}

/// The optional column of an SLO CSV with the share of requests (%) that
/// must finish within the latency SLO (default
/// [`DEFAULT_PERCENTILE`](tessera_core::slo::DEFAULT_PERCENTILE)).
const PERCENTILE_COLUMN: &str = "percentile";

/// The optional columns of an SLO CSV that say how a service runs in a
/// container; [`read_service_images`] reads them.
const IMAGE_COLUMNS: [&str; 2] = ["image", "args"];

/// Reads an SLO CSV. Service names must be unique; a file without rows is
/// an error. An optional `percentile` column gives the share of requests
/// (%) that must finish within the SLO (an empty cell: the default). The
/// `image` and `args` columns are allowed and left to
/// [`read_service_images`].
pub fn read_slo_csv(path: &Path) -> Result<Vec<ServiceSlo>, StoreError> {
    let table = Table::read(path)?;
    table.reject_unknown_columns(&[&SLO_HEADER[..], &[PERCENTILE_COLUMN], &IMAGE_COLUMNS[..]].concat())?;
    let service_column = table.require("service")?;
    let model_column = table.optional("model")?;
    let rate = table.require("rate_rps")?;
    let latency = table.require("latency_ms")?;
    let percentile = table.optional(PERCENTILE_COLUMN)?;

    let mut services = Vec::with_capacity(table.rows.len());
    for record in &table.rows {
        let cell = |column| Cell::of(path, record, column);
        let service = cell(service_column).name()?;
        let model = match model_column {
            Some(column) => cell(column).name()?,
            None => service,
        };
        let slo = ServiceSlo::new(service, model, cell(rate).positive()?, cell(latency).positive()?)
            .map_err(|error| cell(service_column).domain(error))?;
        let slo = match percentile.filter(|&column| !cell(column).text.is_empty()) {
            Some(column) => {
                let share = cell(column).positive()?;
                slo.with_percentile(share).map_err(|error| cell(column).domain(error))?
            }
            None => slo,
        };
        services.push(slo);
    }
    if let Some(duplicate) = tessera_core::slo::find_duplicate_service(&services) {
        let mut lines =
            table.rows.iter().zip(&services).filter(|(_, slo)| slo.service == duplicate).map(|(record, _)| record.line);
        let first_line = lines.next().unwrap_or(0);
        return Err(StoreError::DuplicateService {
            path: path.to_path_buf(),
            line: lines.next().unwrap_or(0),
            service: duplicate.to_string(),
            first_line,
        });
    }
    Ok(services)
}

/// Reads the container of each service from an SLO CSV's `image` and
/// `args` columns (`args` split at spaces, or a JSON list of strings for
/// arguments with spaces: [`parse_container_args`]): services with an empty `image`
/// cell, or a file without the column, have none. `args` without `image`
/// is an error naming the line.
pub fn read_service_images(path: &Path) -> Result<BTreeMap<String, ServiceImage>, StoreError> {
    let table = Table::read(path)?;
    let service_column = table.require("service")?;
    let image_column = table.optional("image")?;
    let args_column = table.optional("args")?;
    let mut images = BTreeMap::new();
    for record in &table.rows {
        let cell = |column| Cell::of(path, record, column);
        let args: Vec<String> = match args_column {
            Some(column) => parse_container_args(cell(column).text).map_err(|why| cell(column).error(why))?,
            None => Vec::new(),
        };
        let image = image_column.map_or("", |column| cell(column).text);
        if image.is_empty() {
            if let (Some(column), false) = (args_column, args.is_empty()) {
                return Err(cell(column).error("arguments without an image"));
            }
            continue;
        }
        if image.chars().any(char::is_whitespace) {
            let column = image_column.expect("an image was read from it");
            return Err(cell(column).error(format!("'{image}' is not an image name (it has spaces)")));
        }
        images.insert(cell(service_column).name()?.to_string(), ServiceImage { image: image.to_string(), args });
    }
    Ok(images)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use tessera_core::ProfilePoint;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    fn error_of<T: std::fmt::Debug>(read: fn(&Path) -> Result<T, StoreError>, name: &str, text: &str) -> String {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), name, text);
        read(&path).unwrap_err().to_string()
    }

    fn assert_names(message: &str, parts: &[&str]) {
        assert!(!message.contains('\n'), "{message}");
        for part in parts {
            assert!(message.contains(part), "'{part}' missing from: {message}");
        }
    }

    /// A point of two processes at `rps`, its latency 12.3… ms or, where
    /// that could not finish `rps`, the most that can.
    fn point(size_gpcs: u8, batch: u32, rps: f64, memory_gb: Option<f64>) -> ProfilePoint {
        let config = SegmentConfig { size_gpcs, batch, procs: 2 };
        let latency_ms = 12.345678901234567_f64.min(2.0 * f64::from(batch) * 1000.0 / rps);
        ProfilePoint::new(config, rps, latency_ms, memory_gb).unwrap()
    }

    #[test]
    fn profiles_round_trip_exactly() {
        let profiles = vec![
            ModelProfile::new(
                GpuModel::A100_80GB,
                "bert",
                vec![point(1, 1, 0.1 + 0.2, None), point(7, 64, 1e-7, Some(3.5))],
            )
            .unwrap(),
            ModelProfile::new(GpuModel::A100_80GB, "resnet50", vec![point(2, 8, 1234.5, Some(0.0))]).unwrap(),
            ModelProfile::new(GpuModel::A30_24GB, "bert", vec![point(4, 2, 1e21, None)]).unwrap(),
        ];
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("profiles.csv");
        let mut bytes = Vec::new();
        write_profiles_csv(&mut bytes, &profiles).unwrap();
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(read_profiles_csv(&path).unwrap(), profiles);
    }

    #[test]
    fn batch_timing_round_trips_in_optional_columns() {
        let timed = |batch, timing| point(1, batch, 80.0, None).with_timing(timing).unwrap();
        let spread = BatchTiming {
            latency_p50_ms: Some(12.3),
            latency_p99_ms: Some(12.9),
            dispatch_gap_ms: Some(0.011),
            serving_slowdown: Some(0.004),
        };
        let gap_only = BatchTiming { dispatch_gap_ms: Some(0.02), ..BatchTiming::default() };
        let profile = ModelProfile::new(
            GpuModel::H200_141GB,
            "bert",
            vec![timed(1, spread), timed(2, gap_only), point(1, 4, 90.0, None)],
        )
        .unwrap();
        let mut bytes = Vec::new();
        write_profiles_csv(&mut bytes, [&profile]).unwrap();
        let text = String::from_utf8(bytes.clone()).unwrap();
        let header = "gpu_model,model,size_gpcs,batch,procs,throughput_rps,latency_ms,memory_gb,\
            latency_p50_ms,latency_p99_ms,dispatch_gap_ms,serving_slowdown\n";
        assert!(text.starts_with(header), "{text}");
        assert!(text.lines().any(|line| line.ends_with(",,,0.02,")), "{text}");
        assert_eq!(parse_profiles_csv("p.csv", &bytes).unwrap(), vec![profile]);
        // Without timing the columns are not written: older readers read the file.
        let mut plain = Vec::new();
        write_profiles_csv(
            &mut plain,
            [&ModelProfile::new(GpuModel::A100_80GB, "m", vec![point(1, 1, 5.0, None)]).unwrap()],
        )
        .unwrap();
        assert!(!String::from_utf8(plain).unwrap().contains("dispatch_gap_ms"));
        let bad = |row: &str| {
            let text = format!("gpu_model,model,size_gpcs,batch,procs,throughput_rps,latency_ms,latency_p50_ms,latency_p99_ms,dispatch_gap_ms\n{row}\n");
            parse_profiles_csv("t.csv", text.as_bytes()).unwrap_err().to_string()
        };
        assert_names(
            &bad("a100-80gb,m,1,1,1,5,5,2,1,"),
            &["t.csv:2:", "'latency_p99_ms'", "no smaller than latency_p50_ms"],
        );
        assert_names(&bad("a100-80gb,m,1,1,1,5,5,,,-0.1"), &["t.csv:2:", "'dispatch_gap_ms'", "non-negative"]);
        assert_names(
            &bad("a100-80gb,m,1,1,1,5,5,,fast,"),
            &["t.csv:2:", "'latency_p99_ms'", "expected a number, got 'fast'"],
        );
    }

    #[test]
    fn reads_profiles_in_any_column_order_with_optional_memory() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(
            dir.path(),
            "p.csv",
            "\u{feff}latency_ms,throughput_rps,procs,batch,size_gpcs,model,gpu_model\r\n\
             10,100,1,4,3,bert,A100-80GB\n20,50,1,4,1,bert,a100-80gb",
        );
        let profiles = read_profiles_csv(&path).unwrap();
        assert_eq!(profiles.len(), 1);
        assert_eq!(profiles[0].points().len(), 2);
        assert_eq!(profiles[0].points()[0].memory_gb, None);
    }

    #[test]
    fn rejects_bad_profile_rows_naming_file_line_and_field() {
        let header = "gpu_model,model,size_gpcs,batch,procs,throughput_rps,latency_ms,memory_gb\n";
        let read = read_profiles_csv;
        let message = error_of(read, "p.csv", &format!("{header}v100,bert,1,1,1,5,5,\n"));
        assert_names(&message, &["p.csv:2:", "'gpu_model'", "v100"]);
        let message =
            error_of(read, "p.csv", &format!("{header}a100-80gb,bert,1,1,1,5,5,\na100-80gb,bert,1,2,1,x,5,\n"));
        assert_names(&message, &["p.csv:3:", "'throughput_rps'", "'x'"]);
        let message = error_of(read, "p.csv", &format!("{header}a100-80gb,bert,1,1,1,5,5,-1\n"));
        assert_names(&message, &["p.csv:2:", "'memory_gb'", "'-1'"]);
        let message = error_of(read, "p.csv", &format!("{header}a30-24gb,bert,3,1,1,5,5,\n"));
        assert_names(&message, &["p.csv:2:", "'size_gpcs'", "3g"]);
        let message = error_of(read, "p.csv", &format!("{header}a100-80gb,,1,1,1,5,5,\n"));
        assert_names(&message, &["p.csv:2:", "'model'", "empty"]);
        let message = error_of(read, "p.csv", &format!("{header}a100-80gb,bert,1,1,1,0,5,\n"));
        assert_names(&message, &["p.csv:2:", "'throughput_rps'", "positive"]);
        let message =
            error_of(read, "p.csv", &format!("{header}a100-80gb,bert,1,1,1,5,5,\na100-80gb,bert,1,1,1,6,6,\n"));
        assert_names(&message, &["p.csv:3:", "bert", "line 2"]);
        let message = error_of(read, "p.csv", "gpu_model,model,size_gpcs\na,b,c\n");
        assert_names(&message, &["p.csv:1:", "'batch'"]);
    }

    fn completed() -> Vec<SourcedProfile> {
        use tessera_core::SourcedPoint;
        let config = |size_gpcs, batch, procs| SegmentConfig { size_gpcs, batch, procs };
        let measured = ProfilePoint::new(config(1, 1, 1), 74.408, 13.0, None).unwrap();
        let predicted = ProfilePoint::new(config(7, 8, 2), 0.1 + 0.2, 12.345678901234567, None).unwrap();
        let bounds = PointSource::Predicted { throughput_low_rps: 0.25, latency_high_ms: 15.5 };
        vec![SourcedProfile::new(
            GpuModel::A100_80GB,
            "bert",
            vec![
                SourcedPoint::new(predicted, bounds).unwrap(),
                SourcedPoint::new(measured, PointSource::Measured).unwrap(),
            ],
            vec![config(1, 256, 5), config(1, 1, 5)],
        )
        .unwrap()]
    }

    #[test]
    fn completed_profiles_round_trip_and_plan_on_their_bounds() {
        let profiles = completed();
        let mut bytes = Vec::new();
        write_sourced_profiles_csv(&mut bytes, &profiles).unwrap();
        let text = String::from_utf8(bytes.clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "gpu_model,model,size_gpcs,batch,procs,throughput_rps,latency_ms,memory_gb,source,throughput_low_rps,latency_high_ms",
                "a100-80gb,bert,1,1,1,74.408,13,,measured,,",
                "a100-80gb,bert,1,1,5,,,,out-of-memory,,",
                "a100-80gb,bert,1,256,5,,,,out-of-memory,,",
                "a100-80gb,bert,7,8,2,0.30000000000000004,12.345678901234567,,predicted,0.25,15.5",
            ]
        );
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "completed.csv", &text);
        assert_eq!(read_sourced_profiles_csv(&path).unwrap(), profiles);
        let planning = read_profiles_csv(&path).unwrap();
        assert_eq!(planning.len(), 1);
        let conservative = planning[0].points()[1];
        assert_eq!((conservative.throughput_rps, conservative.latency_ms), (0.25, 15.5));
        // A plain profile CSV reads as all measured, without out-of-memory rows.
        let mut plain = Vec::new();
        write_profiles_csv(&mut plain, &planning).unwrap();
        let path = write(dir.path(), "plain.csv", &String::from_utf8(plain).unwrap());
        let sourced = read_sourced_profiles_csv(&path).unwrap();
        assert!(sourced[0].points().iter().all(|p| p.is_measured()) && sourced[0].out_of_memory().is_empty());
    }

    #[test]
    fn rejects_bad_completed_rows_naming_file_line_and_field() {
        let header = "gpu_model,model,size_gpcs,batch,procs,throughput_rps,latency_ms,memory_gb,source,throughput_low_rps,latency_high_ms\n";
        let read = read_sourced_profiles_csv;
        let message = error_of(read, "c.csv", &format!("{header}a100-80gb,bert,1,1,1,5,5,,guessed,,\n"));
        assert_names(&message, &["c.csv:2:", "'source'", "measured, predicted or out-of-memory", "'guessed'"]);
        let message = error_of(read, "c.csv", &format!("{header}a100-80gb,bert,1,1,1,5,5,,out-of-memory,,\n"));
        assert_names(&message, &["c.csv:2:", "'throughput_rps'", "out-of-memory row leaves it empty", "'5'"]);
        let message = error_of(read, "c.csv", &format!("{header}a100-80gb,bert,1,1,1,5,5,,measured,4,\n"));
        assert_names(&message, &["c.csv:2:", "'throughput_low_rps'", "measured row leaves it empty"]);
        let message = error_of(read, "c.csv", &format!("{header}a100-80gb,bert,1,1,1,5,5,,predicted,,6\n"));
        assert_names(&message, &["c.csv:2:", "'throughput_low_rps'", "expected a number, got ''"]);
        let message = error_of(read, "c.csv", &format!("{header}a100-80gb,bert,1,1,1,5,5,,predicted,6,6\n"));
        assert_names(&message, &["c.csv:2:", "'throughput_low_rps'", "no larger than throughput_rps"]);
        let message = error_of(read, "c.csv", &format!("{header}a100-80gb,bert,1,1,1,5,5,,predicted,4,4\n"));
        assert_names(&message, &["c.csv:2:", "'latency_high_ms'", "no smaller than latency_ms"]);
        let message = error_of(
            read,
            "c.csv",
            &format!("{header}a100-80gb,bert,1,8,1,5,5,,measured,,\na100-80gb,bert,1,8,1,,,,out-of-memory,,\n"),
        );
        assert_names(&message, &["c.csv:3:", "bert", "1g batch 8 x 1 proc", "line 2"]);
        let message = error_of(
            read,
            "c.csv",
            "gpu_model,model,size_gpcs,batch,procs,throughput_rps,latency_ms,source\na100-80gb,bert,1,1,1,5,5,predicted\n",
        );
        assert_names(&message, &["c.csv:2:", "'throughput_low_rps'", "a predicted row needs this column"]);
        let message = error_of(
            read,
            "c.csv",
            "gpu_model,model,size_gpcs,batch,procs,throughput_rps,latency_ms,source,throughput_low\na,b,1,1,1,1,1,measured,\n",
        );
        assert_names(&message, &["c.csv:1:", "'throughput_low'", "throughput_low_rps"]);
    }

    #[test]
    fn crlf_files_name_the_lines_as_written() {
        let text = "service,model,rate_rps,latency_ms\r\na,bert,1,1\r\na,bert,2,2";
        let message = error_of(read_slo_csv, "s.csv", text);
        assert!(message.ends_with("s.csv:3: field 'service': service 'a' already listed on line 2"), "{message}");
        let text = "gpu_model,model,size_gpcs,batch,procs,throughput_rps,latency_ms\r\n\
                    a100-80gb,bert,1,1,1,5,5\r\na100-80gb,bert,1,1,1,x,5\r\n";
        let message = error_of(read_profiles_csv, "p.csv", text);
        assert!(message.ends_with("p.csv:3: field 'throughput_rps': expected a number, got 'x'"), "{message}");
    }

    #[test]
    fn reads_service_images_beside_the_slos() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.csv");
        let text = "service,model,rate_rps,latency_ms,image,args\n\
                    a,bert,10,100,reg.example/bert:1,--batch {batch}  --fp16\n\
                    b,bert,10,100,,\n";
        std::fs::write(&path, text).unwrap();
        assert_eq!(read_slo_csv(&path).unwrap().len(), 2);
        let images = read_service_images(&path).unwrap();
        assert_eq!(images.len(), 1, "b has no image");
        assert_eq!(images["a"].image, "reg.example/bert:1");
        assert_eq!(images["a"].args_for(8), ["--batch", "8", "--fp16"]);

        // A JSON list keeps an argument with spaces (CSV doubles the quotes).
        std::fs::write(&path, "service,rate_rps,latency_ms,image,args\na,1,1,i,\"[\"\"--name\"\",\"\"a b\"\"]\"\n")
            .unwrap();
        assert_eq!(read_service_images(&path).unwrap()["a"].args, ["--name", "a b"]);
        std::fs::write(&path, "service,rate_rps,latency_ms\na,1,1\n").unwrap();
        assert!(read_service_images(&path).unwrap().is_empty());
        for (text, message) in [
            ("service,rate_rps,latency_ms,args\na,1,1,--x\n", "s.csv:2: field 'args': arguments without an image"),
            ("service,rate_rps,latency_ms,image\na,1,1,my image\n", "field 'image': 'my image' is not an image name"),
            (
                "service,rate_rps,latency_ms,image,args\na,1,1,i,\"[\"\"--n\"\", 3]\"\n",
                "s.csv:2: field 'args': '[\"--n\", 3]' is not a JSON list of strings",
            ),
        ] {
            std::fs::write(&path, text).unwrap();
            let error = read_service_images(&path).unwrap_err().to_string();
            assert!(error.contains(message), "{error}");
        }
    }

    #[test]
    fn reads_slos_with_and_without_model_column() {
        let dir = tempfile::tempdir().unwrap();
        let path =
            write(dir.path(), "s.csv", "service,model,rate_rps,latency_ms\nchat-a,bert,10.5,100\nchat-b,bert,3,200\n");
        let services = read_slo_csv(&path).unwrap();
        assert_eq!(services[1].service, "chat-b");
        assert_eq!(services[1].model, "bert");
        assert_eq!(services[0].rate_rps, 10.5);
        let path = write(dir.path(), "t.csv", "latency_ms,rate_rps,service\n100,10,bert\n");
        let services = read_slo_csv(&path).unwrap();
        assert_eq!(services[0].model, "bert");
        assert_eq!(services[0].latency_slo_ms, 100.0);
    }

    #[test]
    fn slos_round_trip_exactly_with_commas_and_quotes_in_names() {
        let services = vec![
            ServiceSlo::new("chat, eu", "bert \"base\"", 0.1 + 0.2, 100.0).unwrap(),
            ServiceSlo::new("a\"b", "m,n", 1e-7, 12.345678901234567).unwrap(),
            ServiceSlo::new("plain", "plain", 3e21, 1.0).unwrap(),
        ];
        let mut bytes = Vec::new();
        write_slo_csv(&mut bytes, &services).unwrap();
        assert!(String::from_utf8_lossy(&bytes).starts_with("service,model,rate_rps,latency_ms\n\"chat, eu\","));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.csv");
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(read_slo_csv(&path).unwrap(), services);
    }

    #[test]
    fn a_percentile_column_round_trips_and_is_checked() {
        let services = vec![
            ServiceSlo::new("a", "bert", 10.0, 50.0).unwrap().with_percentile(99.9).unwrap(),
            ServiceSlo::new("b", "bert", 20.0, 80.0).unwrap(),
        ];
        let mut bytes = Vec::new();
        write_slo_csv(&mut bytes, &services).unwrap();
        assert!(String::from_utf8_lossy(&bytes).starts_with("service,model,rate_rps,latency_ms,percentile\n"));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.csv");
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(read_slo_csv(&path).unwrap(), services);
        std::fs::write(&path, "service,model,rate_rps,latency_ms,percentile\na,bert,1,1,\nb,bert,1,1,100\n").unwrap();
        let message = read_slo_csv(&path).unwrap_err().to_string();
        assert_names(&message, &["s.csv:3:", "'percentile'", "below 100", "100"]);
    }

    #[test]
    fn unreadable_slos_are_not_written() {
        let good = ServiceSlo::new("a", "bert", 1.0, 1.0).unwrap();
        let mut spaced = good.clone();
        spaced.model = " bert".to_string();
        let mut negative = good.clone();
        negative.rate_rps = -1.0;
        for (bad, expected) in [
            (spaced, "writing SLO CSV: service 2 ('a'), field 'model': ' bert' has surrounding spaces"),
            (negative, "writing SLO CSV: service 2 ('a'), rate_rps must be a positive number, got -1"),
        ] {
            let mut bytes = Vec::new();
            let message = write_slo_csv(&mut bytes, &[good.clone(), bad]).unwrap_err().to_string();
            assert_eq!(message, expected);
            assert!(bytes.is_empty(), "nothing is written on error");
        }
    }

    #[test]
    fn rejects_bad_slos_naming_file_line_and_field() {
        let header = "service,model,rate_rps,latency_ms\n";
        let read = read_slo_csv;
        let message = error_of(read, "s.csv", &format!("{header}a,bert,1,1\nb,bert,1,1\na,vgg,2,2\n"));
        assert_names(&message, &["s.csv:4:", "'service'", "'a'", "line 2"]);
        let message = error_of(read, "s.csv", header);
        assert_names(&message, &["s.csv:1:", "no data rows"]);
        let message = error_of(read, "s.csv", "");
        assert_names(&message, &["s.csv:1:", "empty"]);
        let message = error_of(read, "s.csv", &format!("{header}a,bert,-3,1\n"));
        assert_names(&message, &["s.csv:2:", "'rate_rps'", "positive", "'-3'"]);
        let message = error_of(read, "s.csv", &format!("{header}a,bert,3,fast\n"));
        assert_names(&message, &["s.csv:2:", "'latency_ms'", "'fast'"]);
        let message = error_of(read, "s.csv", "service,rate,latency_ms\na,1,1\n");
        assert_names(&message, &["s.csv:1:", "'rate'", "rate_rps"]);
        let message = error_of(read, "s.csv", "service,latency_ms\na,1\n");
        assert_names(&message, &["s.csv:1:", "'rate_rps'", "service,latency_ms"]);
        let message = error_of(read, "s.csv", &format!("{header}a,,3,1\n"));
        assert_names(&message, &["s.csv:2:", "'model'"]);
    }

    #[test]
    fn parses_profiles_from_bytes_naming_the_source_in_errors() {
        let csv = "gpu_model,model,size_gpcs,batch,procs,throughput_rps,latency_ms\na100-80gb,bert,1,4,1,10,5\n";
        let profiles = parse_profiles_csv("request body", csv.as_bytes()).unwrap();
        assert_eq!((profiles.len(), profiles[0].model.as_str()), (1, "bert"));
        let message = parse_profiles_csv("request body", b"gpu_model,model\na100-80gb,bert\n").unwrap_err().to_string();
        assert!(message.starts_with("request body:1: missing column 'size_gpcs'"), "{message}");
    }
}
