//! `tessera autopilot journal`: the decisions `autopilot run` journaled in
//! the store, and the one line a decision is printed as.

use std::path::Path;

use anyhow::Result;
use tessera_store::AutopilotDecision;

use crate::args::{AutopilotJournalArgs, ListFormat};
use crate::inputs;
use crate::output::{out, outln};

/// Prints the journal, oldest decision first.
pub fn journal(args: &AutopilotJournalArgs, store: Option<&Path>) -> Result<()> {
    let path = inputs::store_path(store)?;
    let store = inputs::open_existing(&path, Some("`tessera autopilot run` journals its decisions there"))?;
    let decisions = store.autopilot_decisions(args.last)?;
    match args.format {
        ListFormat::Json => outln!("{}", serde_json::to_string_pretty(&decisions)?),
        ListFormat::Table if decisions.is_empty() => outln!("no autopilot decisions in {}", path.display()),
        ListFormat::Table => {
            let text: String = decisions.iter().map(|decision| format!("{}\n", decision_line(decision))).collect();
            out!("{text}")
        }
    }
}

/// A decision in one line: when (UTC), what, the GPUs before and after,
/// why, and what became of it.
pub fn decision_line(decision: &AutopilotDecision) -> String {
    let gpus = if decision.gpus_before == decision.gpus_after {
        format!("{} GPUs", decision.gpus_after)
    } else {
        format!("{} → {} GPUs", decision.gpus_before, decision.gpus_after)
    };
    format!("{}  {}  {gpus}  {}  [{}]", utc_text(decision.time_s), decision.action, decision.reason, decision.outcome)
}

/// Seconds since the Unix epoch as `YYYY-MM-DDTHH:MM:SSZ` (UTC; the
/// proleptic Gregorian calendar, from days since 1970-01-01).
fn utc_text(unix_s: f64) -> String {
    let seconds = unix_s.floor() as i64;
    let (days, second_of_day) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
    // Days to a civil date (H. Hinnant's algorithm: eras of 400 years
    // starting on 1 March).
    let shifted = days + 719_468;
    let era = shifted.div_euclid(146_097);
    let day_of_era = shifted - era * 146_097;
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 { month_index + 3 } else { month_index - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        second_of_day / 3600,
        second_of_day / 60 % 60,
        second_of_day % 60
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn utc_times_match_known_dates() {
        assert_eq!(utc_text(0.0), "1970-01-01T00:00:00Z");
        assert_eq!(utc_text(951_782_400.0), "2000-02-29T00:00:00Z");
        assert_eq!(utc_text(1_700_000_000.9), "2023-11-14T22:13:20Z");
        assert_eq!(utc_text(-1.0), "1969-12-31T23:59:59Z");
    }

    #[test]
    fn a_decision_is_one_line_with_the_gpu_change() {
        let decision = AutopilotDecision {
            time_s: 1_700_000_000.0,
            action: "scale up".into(),
            reason: "because".into(),
            gpus_before: 2,
            gpus_after: 3,
            observed_rps: BTreeMap::new(),
            forecast_rps: BTreeMap::new(),
            outcome: "dry run: nothing done".into(),
        };
        assert_eq!(
            decision_line(&decision),
            "2023-11-14T22:13:20Z  scale up  2 → 3 GPUs  because  [dry run: nothing done]"
        );
    }
}
