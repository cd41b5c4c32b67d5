//! Kubernetes Events for the autopilot's decisions (`events.k8s.io/v1`),
//! so `kubectl events -n NAMESPACE` shows why the fleet changed, or why it
//! did not, next to what it changed.
//!
//! Each event regards the namespace the fleet runs in, is reported by
//! [`AUTOPILOT_CONTROLLER`], and is named after its decision's time, so a
//! decision recorded twice is one event.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use crate::cluster::{Cluster, Kind};
use crate::error::K8sError;
use crate::labels::MANAGED_BY;

/// The controller the autopilot's events name as reporting them.
pub const AUTOPILOT_CONTROLLER: &str = "tessera.io/autopilot";

/// The longest note the API server keeps whole, bytes.
const MAX_NOTE_BYTES: usize = 1024;

/// One decision, as an event says it.
#[derive(Debug, Clone, PartialEq)]
pub struct DecisionEvent<'a> {
    /// When it was decided, seconds since the Unix epoch.
    pub time_s: f64,
    /// Why, machine-readable (`ScaleUp`, `Hold`, …).
    pub reason: &'a str,
    /// What was done about it, machine-readable (`Reconfigure`, `Hold`).
    pub action: &'a str,
    /// The decision in words, and what became of it (cut to 1 kB).
    pub note: &'a str,
    /// A warning (something holds or failed) rather than a normal event.
    pub warning: bool,
}

/// The event of `decision` in `namespace`: its name and the object.
pub fn decision_event(namespace: &str, decision: &DecisionEvent<'_>) -> Result<(String, Value), K8sError> {
    let micros = (decision.time_s * 1e6).round();
    let time = Timestamp::from_microsecond(micros as i64).ok().filter(|_| micros.is_finite()).ok_or_else(|| {
        K8sError::Event(format!("decision time {} s is not a time an event can carry", decision.time_s))
    })?;
    let name = format!("tessera-autopilot.{:x}", time.as_microsecond());
    let event = Event {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(namespace.to_string()),
            labels: Some([(MANAGED_BY.to_string(), "tessera".to_string())].into()),
            ..ObjectMeta::default()
        },
        event_time: Some(MicroTime(time)),
        reason: Some(decision.reason.to_string()),
        action: Some(decision.action.to_string()),
        note: Some(cut(decision.note, MAX_NOTE_BYTES)),
        type_: Some(if decision.warning { "Warning" } else { "Normal" }.to_string()),
        reporting_controller: Some(AUTOPILOT_CONTROLLER.to_string()),
        reporting_instance: Some(format!("{AUTOPILOT_CONTROLLER}/{namespace}")),
        regarding: Some(ObjectReference {
            api_version: Some("v1".to_string()),
            kind: Some("Namespace".to_string()),
            name: Some(namespace.to_string()),
            ..ObjectReference::default()
        }),
        ..Event::default()
    };
    let mut object = serde_json::to_value(&event).map_err(|error| K8sError::Event(error.to_string()))?;
    object["apiVersion"] = "events.k8s.io/v1".into();
    object["kind"] = "Event".into();
    Ok((name, object))
}

/// Records `decision` as an event in `namespace`.
pub fn record_decision(cluster: &Cluster, namespace: &str, decision: &DecisionEvent<'_>) -> Result<(), K8sError> {
    let (name, object) = decision_event(namespace, decision)?;
    cluster.apply(Kind::Event, namespace, &name, &object, false)
}

/// `text` cut to at most `max_bytes` bytes at a character boundary, `…`
/// ending a cut one.
fn cut(text: &str, max_bytes: usize) -> String {
    if text.len() <= max_bytes {
        return text.to_string();
    }
    let ellipsis = '…';
    let mut end = max_bytes - ellipsis.len_utf8();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{ellipsis}", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision(note: &str) -> DecisionEvent<'_> {
        DecisionEvent { time_s: 1_764_000_000.25, reason: "ScaleUp", action: "Reconfigure", note, warning: false }
    }

    #[test]
    fn an_event_carries_the_decision_at_its_time() {
        let (name, object) = decision_event("tessera", &decision("scaling up: photo-tagging")).unwrap();
        assert_eq!(name, format!("tessera-autopilot.{:x}", 1_764_000_000_250_000_i64));
        assert_eq!(object["metadata"]["name"], name.as_str());
        assert_eq!(object["eventTime"], "2025-11-24T16:00:00.250000Z");
        assert_eq!(object["type"], "Normal");
        assert_eq!(object["regarding"]["kind"], "Namespace");
        assert_eq!(object["note"], "scaling up: photo-tagging");
        let warning = DecisionEvent { warning: true, ..decision("holding") };
        assert_eq!(decision_event("tessera", &warning).unwrap().1["type"], "Warning");
    }

    #[test]
    fn a_long_note_is_cut_to_a_kilobyte_at_a_character_boundary() {
        let long = "é".repeat(800);
        let (_, object) = decision_event("tessera", &decision(&long)).unwrap();
        let note = object["note"].as_str().unwrap();
        assert!(note.len() <= MAX_NOTE_BYTES && note.ends_with('…'), "{} bytes", note.len());
        assert!(note.len() > MAX_NOTE_BYTES - 8);
    }

    #[test]
    fn a_time_no_event_can_carry_is_refused() {
        let bad = DecisionEvent { time_s: f64::NAN, ..decision("x") };
        assert!(decision_event("tessera", &bad).unwrap_err().to_string().contains("NaN s is not a time"));
    }
}
