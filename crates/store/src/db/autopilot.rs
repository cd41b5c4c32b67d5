//! The autopilot's journal: every decision of `tessera autopilot run`, with
//! its reason, the GPUs before and after, the rates it saw and forecast,
//! and what became of it (acted on, dry run, failed).

use std::collections::BTreeMap;

use rusqlite::{params, Row};
use serde::Serialize;

use super::Store;
use crate::error::StoreError;

/// One decision of the autopilot as the store keeps it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AutopilotDecision {
    /// When it was made: seconds since the Unix epoch (UTC).
    pub time_s: f64,
    /// What was decided: `start`, `keep`, `hold`, `scale up` or `scale down`.
    pub action: String,
    /// Why, in words (a hold names the services and the cause).
    pub reason: String,
    /// GPUs of the plan running before it (0 before the first plan).
    pub gpus_before: usize,
    /// GPUs of the plan running after it.
    pub gpus_after: usize,
    /// Each service's observed rate, req/s; `None` where none could be read.
    pub observed_rps: BTreeMap<String, Option<f64>>,
    /// Each service's forecast rate after the observation, req/s.
    pub forecast_rps: BTreeMap<String, f64>,
    /// What became of it: `nothing to do`, `dry run`, `applied`, `failed:
    /// …`, in words.
    pub outcome: String,
}

const COLUMNS: &str = "time_s, action, reason, gpus_before, gpus_after, observed_rps, forecast_rps, outcome";

/// A row as stored: the decision with its rates still JSON text.
type StoredDecision = (AutopilotDecision, String, String);

fn read_decision(row: &Row<'_>) -> rusqlite::Result<StoredDecision> {
    let gpus = |index| row.get::<_, i64>(index).map(|n| usize::try_from(n).unwrap_or(0));
    let decision = AutopilotDecision {
        time_s: row.get(0)?,
        action: row.get(1)?,
        reason: row.get(2)?,
        gpus_before: gpus(3)?,
        gpus_after: gpus(4)?,
        observed_rps: BTreeMap::new(),
        forecast_rps: BTreeMap::new(),
        outcome: row.get(7)?,
    };
    Ok((decision, row.get(5)?, row.get(6)?))
}

impl Store {
    /// Appends `decision` to the autopilot's journal.
    pub fn record_autopilot_decision(&mut self, decision: &AutopilotDecision) -> Result<(), StoreError> {
        let gpus = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        self.conn
            .execute(
                &format!("INSERT INTO autopilot_decisions ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"),
                params![
                    decision.time_s,
                    decision.action,
                    decision.reason,
                    gpus(decision.gpus_before),
                    gpus(decision.gpus_after),
                    json_text(&decision.observed_rps),
                    json_text(&decision.forecast_rps),
                    decision.outcome,
                ],
            )
            .map(drop)
            .map_err(|error| self.sqlite("journaling an autopilot decision", error))
    }

    /// The autopilot's decisions, oldest first; the last `limit` when given.
    pub fn autopilot_decisions(&self, limit: Option<usize>) -> Result<Vec<AutopilotDecision>, StoreError> {
        let sqlite = |error| self.sqlite("reading the autopilot's journal", error);
        let limit = limit.map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX));
        let sql = format!(
            "SELECT {COLUMNS} FROM (SELECT id, {COLUMNS} FROM autopilot_decisions ORDER BY id DESC LIMIT ?1) ORDER BY id"
        );
        let mut statement = self.conn.prepare(&sql).map_err(sqlite)?;
        let rows = statement.query_map([limit], read_decision).map_err(sqlite)?;
        let stored = rows.collect::<rusqlite::Result<Vec<_>>>().map_err(sqlite)?;
        stored
            .into_iter()
            .map(|(mut decision, observed, forecast)| {
                let bad = |column: &str, error: serde_json::Error| StoreError::CorruptRow {
                    path: self.path.clone(),
                    what: format!("autopilot decision at {} s", decision.time_s),
                    detail: format!("field '{column}': {error}"),
                };
                decision.observed_rps = serde_json::from_str(&observed).map_err(|e| bad("observed_rps", e))?;
                decision.forecast_rps = serde_json::from_str(&forecast).map_err(|e| bad("forecast_rps", e))?;
                Ok(decision)
            })
            .collect()
    }
}

/// A map of rates as JSON text (a map of names to numbers or nulls always
/// serializes).
fn json_text<V: Serialize>(map: &BTreeMap<String, V>) -> String {
    serde_json::to_string(map).unwrap_or_else(|_| "{}".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision(time_s: f64, action: &str, observed: Option<f64>) -> AutopilotDecision {
        AutopilotDecision {
            time_s,
            action: action.to_string(),
            reason: format!("because {time_s}"),
            gpus_before: 2,
            gpus_after: 3,
            observed_rps: BTreeMap::from([("a".to_string(), observed), ("b".to_string(), Some(1.5))]),
            forecast_rps: BTreeMap::from([("a".to_string(), 10.25), ("b".to_string(), 1.5)]),
            outcome: "dry run".to_string(),
        }
    }

    #[test]
    fn decisions_round_trip_in_order_and_the_limit_keeps_the_last() {
        let mut store = Store::open_in_memory().unwrap();
        assert!(store.autopilot_decisions(None).unwrap().is_empty());
        let all =
            [decision(1.0, "start", Some(10.0)), decision(2.5, "hold", None), decision(4.0, "scale up", Some(12.0))];
        for one in &all {
            store.record_autopilot_decision(one).unwrap();
        }
        assert_eq!(store.autopilot_decisions(None).unwrap(), all);
        assert_eq!(store.autopilot_decisions(Some(2)).unwrap(), all[1..]);
        assert_eq!(store.autopilot_decisions(Some(0)).unwrap(), Vec::new());
    }

    #[test]
    fn a_corrupt_rate_column_is_named() {
        let mut store = Store::open_in_memory().unwrap();
        store.record_autopilot_decision(&decision(1.0, "keep", Some(1.0))).unwrap();
        store.conn.execute("UPDATE autopilot_decisions SET forecast_rps = 'nope'", []).unwrap();
        let message = store.autopilot_decisions(None).unwrap_err().to_string();
        assert!(message.contains("field 'forecast_rps'") && message.contains("at 1 s"), "{message}");
    }
}
