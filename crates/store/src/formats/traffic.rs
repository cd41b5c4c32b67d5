//! Traffic files: request rates over time, piecewise constant, one row per
//! step of a service's rate: `time_s,service,rate_rps` (seconds from the
//! start, the service, its mean rate from then on in requests per second).
//! Every service named must be known and have a row at 0 s; a service's
//! rows are in time order, one per time (rows of different services may
//! interleave). An optional `cv` column gives a service's burstiness: the
//! coefficient of variation of its inter-arrival times, in (0, 10], one
//! value per service (on any of its rows; the others may leave it empty).

use std::io::Write;
use std::path::Path;

use tessera_core::{CoreError, TrafficCurve, TrafficPoint};

use crate::error::StoreError;
use crate::formats::table::{Cell, Table};

/// The columns of a traffic file, in the order they are written.
pub const TRAFFIC_HEADER: [&str; 3] = ["time_s", "service", "rate_rps"];

/// The optional column of a service's inter-arrival coefficient of
/// variation.
pub const CV_COLUMN: &str = "cv";

/// The largest coefficient of variation a traffic file may give.
const MAX_CV: f64 = 10.0;

/// A traffic file: the rates, and each service's burstiness where given.
#[derive(Debug, Clone, PartialEq)]
pub struct Traffic {
    /// The rates over time.
    pub curve: TrafficCurve,
    /// Each service's inter-arrival coefficient of variation (in the
    /// services' order), `None` where the file gives none.
    pub cv: Vec<Option<f64>>,
}

/// Reads the traffic file at `path` for `services` (in that order): every
/// error names the file, its line and field.
pub fn read_traffic_csv(path: &Path, services: &[String]) -> Result<TrafficCurve, StoreError> {
    Ok(read_traffic(path, services)?.curve)
}

/// Reads the traffic file at `path` for `services` (in that order), its
/// `cv` column included: every error names the file, its line and field.
pub fn read_traffic(path: &Path, services: &[String]) -> Result<Traffic, StoreError> {
    let table = Table::read(path)?;
    let known: Vec<&str> = TRAFFIC_HEADER.iter().copied().chain([CV_COLUMN]).collect();
    table.reject_unknown_columns(&known)?;
    let [time, service, rate] = TRAFFIC_HEADER.map(|name| table.require(name));
    let (time, service, rate) = (time?, service?, rate?);
    let cv_column = table.optional(CV_COLUMN)?;
    let mut points = Vec::with_capacity(table.rows.len());
    let mut cv: Vec<Option<(f64, u64)>> = vec![None; services.len()];
    for record in &table.rows {
        let cell = |column| Cell::of(path, record, column);
        let point = TrafficPoint {
            time_s: cell(time).non_negative()?,
            service: cell(service).name()?.to_string(),
            rate_rps: cell(rate).non_negative()?,
        };
        if let Some(column) = cv_column.filter(|column| !cell(*column).text.is_empty()) {
            let cell = cell(column);
            let value = cell.positive()?;
            if value > MAX_CV {
                return Err(cell.error(format!("{value} is not in (0, {MAX_CV}]")));
            }
            // A service the curve does not know is named below, by the curve.
            if let Some(index) = services.iter().position(|name| *name == point.service) {
                match cv[index] {
                    Some((given, line)) if given != value => {
                        return Err(cell.error(format!(
                            "{value} for {} differs from its cv {given} on line {line}: one cv per service",
                            point.service
                        )))
                    }
                    _ => cv[index] = Some((value, record.line)),
                }
            }
        }
        points.push(point);
    }
    let curve = TrafficCurve::new(services, &points).map_err(|error| match error {
        CoreError::Traffic { index: Some(index), field, message } => StoreError::Parse {
            path: path.to_path_buf(),
            line: table.rows[index].line,
            field: field.to_string(),
            message,
        },
        // A service without rows: the file ends without it.
        other => StoreError::NoRows {
            path: path.to_path_buf(),
            line: table.rows.last().map_or(1, |record| record.line),
            reason: match other {
                CoreError::Traffic { message, .. } => message,
                other => other.to_string(),
            },
        },
    })?;
    Ok(Traffic { curve, cv: cv.into_iter().map(|given| given.map(|(value, _)| value)).collect() })
}

/// Writes `curve` as a traffic file (rows in time order, numbers in Rust's
/// shortest round-trip notation), with a `cv` column on every row of a
/// service `cv` gives one for (in the curve's services' order; none when
/// it gives none), so that [`read_traffic`] gives both back.
pub fn write_traffic_csv<W: Write>(out: W, curve: &TrafficCurve, cv: &[Option<f64>]) -> Result<(), StoreError> {
    let write_error = |cause: std::io::Error| StoreError::Write { what: "traffic CSV".to_string(), cause };
    let mut writer = csv::Writer::from_writer(out);
    let with_cv = cv.iter().any(Option::is_some);
    let header: Vec<&str> = TRAFFIC_HEADER.iter().copied().chain(with_cv.then_some(CV_COLUMN)).collect();
    writer.write_record(&header).map_err(|error| write_error(error.into()))?;
    for point in curve.points() {
        let mut record = vec![point.time_s.to_string(), point.service.clone(), point.rate_rps.to_string()];
        if with_cv {
            let index = curve.services().iter().position(|name| *name == point.service);
            record.push(
                index.and_then(|index| cv.get(index).copied().flatten()).map_or_else(String::new, |cv| cv.to_string()),
            );
        }
        writer.write_record(&record).map_err(|error| write_error(error.into()))?;
    }
    writer.flush().map_err(write_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn services() -> Vec<String> {
        vec!["a".into(), "b".into()]
    }

    fn read(text: &str) -> Result<TrafficCurve, String> {
        read_whole(text).map(|traffic| traffic.curve)
    }

    fn read_whole(text: &str) -> Result<Traffic, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("traffic.csv");
        std::fs::write(&path, text).unwrap();
        read_traffic(&path, &services()).map_err(|error| error.to_string())
    }

    #[test]
    fn a_cv_column_gives_each_service_its_burstiness_once() {
        let traffic = read_whole("time_s,service,rate_rps,cv\n0,a,10,2\n0,b,5,\n60,a,20,2\n").unwrap();
        assert_eq!(traffic.cv, vec![Some(2.0), None]);
        assert_eq!(read_whole("time_s,service,rate_rps\n0,a,10\n0,b,5\n").unwrap().cv, vec![None, None]);
        let message = read_whole("time_s,service,rate_rps,cv\n0,a,10,2\n0,b,5,\n60,a,20,3\n").unwrap_err();
        assert!(
            message.ends_with("traffic.csv:4: field 'cv': 3 for a differs from its cv 2 on line 2: one cv per service"),
            "{message}"
        );
        let message = read_whole("time_s,service,rate_rps,cv\n0,a,10,11\n0,b,5,\n").unwrap_err();
        assert!(message.ends_with("traffic.csv:2: field 'cv': 11 is not in (0, 10]"), "{message}");
        let message = read_whole("time_s,service,rate_rps,cv\n0,a,10,-1\n0,b,5,\n").unwrap_err();
        assert!(message.contains("field 'cv': expected a positive number, got '-1'"), "{message}");
    }

    #[test]
    fn a_written_curve_reads_back() {
        let curve = read("time_s,service,rate_rps\n0,a,10\n0,b,2.5\n60,a,12.25\n").unwrap();
        assert_eq!(curve.rates_rps(61.0), [12.25, 2.5]);
        let mut bytes = Vec::new();
        write_traffic_csv(&mut bytes, &curve, &[None, None]).unwrap();
        let text = String::from_utf8(bytes).unwrap();
        assert_eq!(text, "time_s,service,rate_rps\n0,a,10\n0,b,2.5\n60,a,12.25\n");
        assert_eq!(read(&text).unwrap(), curve);
        // With a service's burstiness: on each of its rows, read back.
        let mut bytes = Vec::new();
        write_traffic_csv(&mut bytes, &curve, &[Some(2.5), None]).unwrap();
        let text = String::from_utf8(bytes).unwrap();
        assert_eq!(text, "time_s,service,rate_rps,cv\n0,a,10,2.5\n0,b,2.5,\n60,a,12.25,2.5\n");
        assert_eq!(read_whole(&text).unwrap(), Traffic { curve, cv: vec![Some(2.5), None] });
    }

    #[test]
    fn each_error_names_the_file_line_and_field() {
        let error = read("time_s,service,rate_rps\n0,a,1\n0,b,1\n60,c,2\n").unwrap_err();
        assert!(error.ends_with("traffic.csv:4: field 'service': 'c' is not among the services (a, b)"), "{error}");
        let error = read("time_s,service,rate_rps\n0,a,1\n0,b,-1\n").unwrap_err();
        assert!(
            error.ends_with("traffic.csv:3: field 'rate_rps': expected a non-negative number, got '-1'"),
            "{error}"
        );
        let error = read("time_s,service,rate_rps\n0,a,1\n0,b,1\n60,a,1\n30,a,1\n").unwrap_err();
        assert!(error.contains("traffic.csv:5: field 'time_s': 30 s is not after the previous point"), "{error}");
        let error = read("time_s,service,rate_rps\n0,a,1\n").unwrap_err();
        assert!(error.ends_with("traffic.csv:2: service 'b' has no traffic points"), "{error}");
        let error = read("time_s,service,rate\n0,a,1\n").unwrap_err();
        assert!(error.contains("unknown column 'rate'"), "{error}");
        let error = read("time_s,service,rate_rps\nsoon,a,1\n").unwrap_err();
        assert!(error.ends_with("traffic.csv:2: field 'time_s': expected a number, got 'soon'"), "{error}");
    }
}
