//! Traffic files: request rates over time, piecewise constant, one row per
//! step of a service's rate: `time_s,service,rate_rps` (seconds from the
//! start, the service, its mean rate from then on in requests per second).
//! Every service named must be known and have a row at 0 s; a service's
//! rows are in time order, one per time (rows of different services may
//! interleave).

use std::io::Write;
use std::path::Path;

use tessera_core::{CoreError, TrafficCurve, TrafficPoint};

use crate::error::StoreError;
use crate::formats::table::{Cell, Table};

/// The columns of a traffic file, in the order they are written.
pub const TRAFFIC_HEADER: [&str; 3] = ["time_s", "service", "rate_rps"];

/// Reads the traffic file at `path` for `services` (in that order): every
/// error names the file, its line and field.
pub fn read_traffic_csv(path: &Path, services: &[String]) -> Result<TrafficCurve, StoreError> {
    let table = Table::read(path)?;
    table.reject_unknown_columns(&TRAFFIC_HEADER)?;
    let [time, service, rate] = TRAFFIC_HEADER.map(|name| table.require(name));
    let (time, service, rate) = (time?, service?, rate?);
    let mut points = Vec::with_capacity(table.rows.len());
    for record in &table.rows {
        let cell = |column| Cell::of(path, record, column);
        points.push(TrafficPoint {
            time_s: cell(time).non_negative()?,
            service: cell(service).name()?.to_string(),
            rate_rps: cell(rate).non_negative()?,
        });
    }
    TrafficCurve::new(services, &points).map_err(|error| match error {
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
    })
}

/// Writes `curve` as a traffic file (rows in time order, numbers in Rust's
/// shortest round-trip notation), so that [`read_traffic_csv`] gives it
/// back.
pub fn write_traffic_csv<W: Write>(out: W, curve: &TrafficCurve) -> Result<(), StoreError> {
    let write_error = |cause: std::io::Error| StoreError::Write { what: "traffic CSV".to_string(), cause };
    let mut writer = csv::Writer::from_writer(out);
    writer.write_record(TRAFFIC_HEADER).map_err(|error| write_error(error.into()))?;
    for point in curve.points() {
        writer
            .write_record([point.time_s.to_string(), point.service, point.rate_rps.to_string()])
            .map_err(|error| write_error(error.into()))?;
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
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("traffic.csv");
        std::fs::write(&path, text).unwrap();
        read_traffic_csv(&path, &services()).map_err(|error| error.to_string())
    }

    #[test]
    fn a_written_curve_reads_back() {
        let curve = read("time_s,service,rate_rps\n0,a,10\n0,b,2.5\n60,a,12.25\n").unwrap();
        assert_eq!(curve.rates_rps(61.0), [12.25, 2.5]);
        let mut bytes = Vec::new();
        write_traffic_csv(&mut bytes, &curve).unwrap();
        let text = String::from_utf8(bytes).unwrap();
        assert_eq!(text, "time_s,service,rate_rps\n0,a,10\n0,b,2.5\n60,a,12.25\n");
        assert_eq!(read(&text).unwrap(), curve);
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
