//! Request arrival traces: a CSV with a `TIMESTAMP` column (other columns
//! ignored), such as the Azure LLM inference traces. A timestamp is either
//! a number of seconds or a UTC date and time `YYYY-MM-DD HH:MM:SS[.f…]`
//! (a `T` between date and time, and a trailing `Z`, are accepted). The
//! arrivals come back as seconds from the first, sorted, with how many
//! rows came before the row above them (merged logs are rarely in order).

use std::path::Path;

use crate::error::StoreError;
use crate::formats::table::{Cell, Table};

/// The trace's column of arrival instants.
pub const TIMESTAMP_COLUMN: &str = "TIMESTAMP";

/// A trace's arrivals.
#[derive(Debug, Clone, PartialEq)]
pub struct ArrivalTrace {
    /// The arrival instants in seconds from the first, sorted.
    pub times_s: Vec<f64>,
    /// Rows whose timestamp came before the row above them in the file.
    pub out_of_order: usize,
}

/// The arrivals of the trace at `path`. At least two arrivals, at two
/// different instants.
pub fn read_arrival_trace(path: &Path) -> Result<ArrivalTrace, StoreError> {
    let table = Table::read(path)?;
    let column = table.require(TIMESTAMP_COLUMN)?;
    let mut times = Vec::with_capacity(table.rows.len());
    for record in &table.rows {
        let cell = Cell::of(path, record, column);
        times.push(instant_s(&cell)?);
    }
    let out_of_order = times.windows(2).filter(|pair| pair[1] < pair[0]).count();
    times.sort_by(f64::total_cmp);
    let first = times.first().copied().unwrap_or(0.0);
    if times.len() < 2 || times.last() == Some(&first) {
        return Err(StoreError::Parse {
            path: path.to_path_buf(),
            line: table.rows.first().map_or(1, |record| record.line),
            field: TIMESTAMP_COLUMN.to_string(),
            message: "a trace needs arrivals at two different instants at least".to_string(),
        });
    }
    Ok(ArrivalTrace { times_s: times.into_iter().map(|time| time - first).collect(), out_of_order })
}

/// One timestamp in seconds: a plain number, or a UTC date and time as
/// seconds since 1970.
fn instant_s(cell: &Cell<'_>) -> Result<f64, StoreError> {
    if let Ok(seconds) = cell.text.parse::<f64>() {
        return if seconds.is_finite() {
            Ok(seconds)
        } else {
            Err(cell.error(format!("expected a finite number of seconds, got '{}'", cell.text)))
        };
    }
    date_time_s(cell.text).ok_or_else(|| {
        cell.error(format!("expected seconds or a date and time like 2023-11-16 18:15:46.6805900, got '{}'", cell.text))
    })
}

/// `YYYY-MM-DD HH:MM:SS[.fraction]` (or with a `T`, and an optional `Z`)
/// as seconds since 1970-01-01 UTC.
fn date_time_s(text: &str) -> Option<f64> {
    let text = text.strip_suffix('Z').unwrap_or(text);
    let (date, time) = text.split_once([' ', 'T'])?;
    let mut date_parts = date.split('-');
    let year: i64 = date_parts.next()?.parse().ok()?;
    let month: u32 = date_parts.next()?.parse().ok()?;
    let day: u32 = date_parts.next()?.parse().ok()?;
    let mut time_parts = time.split(':');
    let hour: u32 = time_parts.next()?.parse().ok()?;
    let minute: u32 = time_parts.next()?.parse().ok()?;
    let second: f64 = time_parts.next()?.parse().ok()?;
    let valid = date_parts.next().is_none()
        && time_parts.next().is_none()
        && (1..=12).contains(&month)
        && (1..=days_in_month(year, month)).contains(&day)
        && hour < 24
        && minute < 60
        && (0.0..61.0).contains(&second);
    valid.then(|| {
        let days = days_from_civil(year, month, day);
        days as f64 * 86_400.0 + f64::from(hour * 3600 + minute * 60) + second
    })
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to the given date of the proleptic Gregorian
/// calendar (Howard Hinnant's civil-from-days inverse).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month = i64::from(month);
    let day_of_year = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<Vec<f64>, StoreError> {
        read_trace(text).map(|trace| trace.times_s)
    }

    fn read_trace(text: &str) -> Result<ArrivalTrace, StoreError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.csv");
        std::fs::write(&path, text).unwrap();
        read_arrival_trace(&path)
    }

    #[test]
    fn dates_and_seconds_become_seconds_from_the_first_arrival() {
        let times = read(
            "TIMESTAMP,ContextTokens\n2023-11-16 18:15:50.5,1\n2023-11-16 18:15:46.25,2\n2023-11-17T00:00:00Z,3\n",
        )
        .unwrap();
        assert_eq!(times, vec![0.0, 4.25, 20_653.75]);
        assert_eq!(read("id,TIMESTAMP\na,10\nb,12.5\n").unwrap(), vec![0.0, 2.5]);
        // Rows out of order are sorted and counted.
        let trace = read_trace("TIMESTAMP\n3\n1\n2\n0.5\n4\n").unwrap();
        assert_eq!((trace.times_s, trace.out_of_order), (vec![0.0, 0.5, 1.5, 2.5, 3.5], 2));
        assert_eq!(read_trace("TIMESTAMP\n1\n1\n2\n").unwrap().out_of_order, 0, "ties are in order");
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(date_time_s("2024-02-29 00:00:00"), Some(days_from_civil(2024, 2, 29) as f64 * 86_400.0));
    }

    #[test]
    fn bad_timestamps_name_the_line_and_what_was_expected() {
        let error = read("TIMESTAMP\n2023-11-16 18:15:46\n2023-02-30 00:00:00\n").unwrap_err().to_string();
        assert!(
            error.ends_with(
                "trace.csv:3: field 'TIMESTAMP': expected seconds or a date and time like \
                                 2023-11-16 18:15:46.6805900, got '2023-02-30 00:00:00'"
            ),
            "{error}"
        );
        let error = read("TIMESTAMP\n5\n5\n").unwrap_err().to_string();
        assert!(
            error
                .ends_with("trace.csv:2: field 'TIMESTAMP': a trace needs arrivals at two different instants at least"),
            "{error}"
        );
        let error = read("time\n5\n6\n").unwrap_err().to_string();
        assert!(error.contains("TIMESTAMP"), "{error}");
    }

    #[test]
    fn the_azure_trace_reads_whole() {
        let Some(path) = tessera_testkit::shared_data("traces/azure_llm_conv_2023.csv") else { return };
        let times = read_arrival_trace(&path).unwrap().times_s;
        assert_eq!(times.len(), 19_366);
        let span = times.last().unwrap();
        assert!((3_400.0..3_600.0).contains(span), "{span}");
    }
}
