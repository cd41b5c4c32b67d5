//! SLO alerting from the plan: per service, recording rules for its
//! attainment (the share of its requests within its latency SLO) over the
//! windows of the Google SRE workbook's multi-window, multi-burn-rate
//! alerts, its error budget (`1 - percentile / 100`), and two alerts over
//! every service: a page when the budget burns fast (14.4× over 1 h and
//! 5 min, or 6× over 6 h and 30 min) and a ticket when it burns slowly (3×
//! over 1 d and 2 h, or 1× over 3 d and 6 h). A window with no request has
//! no attainment, so a service without traffic never alerts.
//!
//! What the rules read: each serving pod's latency histogram
//! [`REQUEST_DURATION_METRIC`] (seconds, from a request's arrival to its
//! response) with the plan's service name in the label [`SERVICE_METRIC_LABEL`],
//! and one bucket whose upper bound `le` is the service's SLO in seconds
//! (as Prometheus' clients write it: `0.15` for 150 ms).
//!
//! The same groups come as a plain rules file ([`RuleFile`], for
//! Prometheus' `rule_files`) and as a Prometheus Operator
//! `PrometheusRule` ([`prometheus_rule`]).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use tessera_core::slo::DEFAULT_PERCENTILE;
use tessera_core::Plan;

/// The serving pods' latency histogram (seconds).
pub const REQUEST_DURATION_METRIC: &str = "tessera_request_duration_seconds";
/// The label of [`REQUEST_DURATION_METRIC`] naming the plan's service.
pub const SERVICE_METRIC_LABEL: &str = "service";
/// The recorded attainment over a window: `tessera:slo_attainment:ratio_rate5m` …
pub const ATTAINMENT_RECORD: &str = "tessera:slo_attainment:ratio_rate";
/// The recorded error budget of a service (`1 - percentile / 100`).
pub const BUDGET_RECORD: &str = "tessera:slo_error_budget:ratio";
/// The windows attainment is recorded over.
pub const WINDOWS: [&str; 7] = ["5m", "30m", "1h", "2h", "6h", "1d", "3d"];

/// One alert's conditions: (long window, short window, burn rate), any of
/// which fires it.
type BurnConditions = [(&'static str, &'static str, f64); 2];

/// The page: the budget of 30 days gone in about 2 days (14.4×) or 5 (6×).
const PAGE: BurnConditions = [("1h", "5m", 14.4), ("6h", "30m", 6.0)];
/// The ticket: gone in 10 days (3×) or 30 (1×).
const TICKET: BurnConditions = [("1d", "2h", 3.0), ("3d", "6h", 1.0)];

/// A Prometheus rules file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RuleFile {
    /// Its groups.
    pub groups: Vec<RuleGroup>,
}

/// A group of rules, evaluated together.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RuleGroup {
    /// Its name, unique in the file.
    pub name: String,
    /// Its rules, in order.
    pub rules: Vec<Rule>,
}

/// A recording rule or an alert.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rule {
    /// The series a recording rule writes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub record: Option<String>,
    /// The alert's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alert: Option<String>,
    /// The PromQL expression.
    pub expr: String,
    /// Labels added to what it records or fires.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// An alert's annotations.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// A PromQL string literal.
fn promql_string(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

/// The SLO in seconds as a bucket's `le` label reads (the shortest
/// decimal that is the number: `0.15`, `0.2165`, `1`).
fn le_of(latency_slo_ms: f64) -> String {
    format!("{}", latency_slo_ms / 1000.0)
}

/// One service's group: its budget and its attainment over every window.
fn service_group(service: &str, latency_slo_ms: f64, percentile: f64) -> RuleGroup {
    let selector = format!("{SERVICE_METRIC_LABEL}={}", promql_string(service));
    let le = promql_string(&le_of(latency_slo_ms));
    let labels = BTreeMap::from([(SERVICE_METRIC_LABEL.to_string(), service.to_string())]);
    let mut rules = vec![Rule {
        record: Some(BUDGET_RECORD.to_string()),
        alert: None,
        // Rounded to 1e-12 so that 99.9 reads 0.001, not 0.0009999999999999432.
        expr: format!("vector({})", ((100.0 - percentile) / 100.0 * 1e12).round() / 1e12),
        labels: labels.clone(),
        annotations: BTreeMap::new(),
    }];
    for window in WINDOWS {
        rules.push(Rule {
            record: Some(format!("{ATTAINMENT_RECORD}{window}")),
            alert: None,
            expr: format!(
                "sum by ({SERVICE_METRIC_LABEL}) (rate({REQUEST_DURATION_METRIC}_bucket{{{selector},le={le}}}[{window}]))\n\
                 / sum by ({SERVICE_METRIC_LABEL}) (rate({REQUEST_DURATION_METRIC}_count{{{selector}}}[{window}]))"
            ),
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
        });
    }
    RuleGroup { name: format!("tessera-slo-{service}"), rules }
}

/// An alert firing on any of `conditions`, each a long and a short window
/// both burning the budget at least that fast.
fn burn_alert(name: &str, severity: &str, conditions: BurnConditions, what: &str) -> Rule {
    let burning = |window: &str, rate: f64| format!("(1 - {ATTAINMENT_RECORD}{window}) > {rate} * {BUDGET_RECORD}");
    let any: Vec<String> = conditions
        .iter()
        .map(|(long, short, rate)| format!("({} and {})", burning(long, *rate), burning(short, *rate)))
        .collect();
    Rule {
        record: None,
        alert: Some(name.to_string()),
        expr: any.join("\nor\n"),
        labels: BTreeMap::from([("severity".to_string(), severity.to_string())]),
        annotations: BTreeMap::from([
            (
                "summary".to_string(),
                format!("{{{{ $labels.{SERVICE_METRIC_LABEL} }}}} burns its latency SLO's error budget {what}"),
            ),
            (
                "description".to_string(),
                format!(
                    "{{{{ $value | humanizePercentage }}}} of {{{{ $labels.{SERVICE_METRIC_LABEL} }}}}'s requests \
                     missed its latency SLO over the alert's long window (the plan promises each service its \
                     percentile; {BUDGET_RECORD} is its budget)"
                ),
            ),
        ]),
    }
}

/// The SLO rules of every service of `plan` (its service reports: the
/// latency SLO and percentile each is planned for), then the alerts.
pub fn slo_rules(plan: &Plan) -> RuleFile {
    let mut groups: Vec<RuleGroup> = plan
        .services
        .iter()
        .map(|report| {
            service_group(&report.service, report.latency_slo_ms, report.percentile.unwrap_or(DEFAULT_PERCENTILE))
        })
        .collect();
    groups.push(RuleGroup {
        name: "tessera-slo-alerts".to_string(),
        rules: vec![
            burn_alert("TesseraSLOBudgetBurnFast", "page", PAGE, "fast"),
            burn_alert("TesseraSLOBudgetBurnSlow", "ticket", TICKET, "slowly"),
        ],
    });
    RuleFile { groups }
}

/// A Prometheus Operator `PrometheusRule` (`monitoring.coreos.com/v1`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PrometheusRule {
    /// `monitoring.coreos.com/v1`.
    pub api_version: &'static str,
    /// `PrometheusRule`.
    pub kind: &'static str,
    /// Its name, namespace and labels.
    pub metadata: ObjectMeta,
    /// The rule groups.
    pub spec: RuleFile,
}

/// [`slo_rules`] of `plan` as a `PrometheusRule` named `tessera-slo` in
/// `namespace`, labelled as Tessera's.
pub fn prometheus_rule(plan: &Plan, namespace: &str) -> PrometheusRule {
    PrometheusRule {
        api_version: "monitoring.coreos.com/v1",
        kind: "PrometheusRule",
        metadata: ObjectMeta {
            name: Some("tessera-slo".to_string()),
            namespace: Some(namespace.to_string()),
            labels: Some(BTreeMap::from([(crate::labels::MANAGED_BY.to_string(), "tessera".to_string())])),
            ..Default::default()
        },
        spec: slo_rules(plan),
    }
}

/// `value` as YAML.
pub fn to_yaml<T: Serialize>(value: &T) -> String {
    serde_saphyr::to_string(value).expect("rules always serialize as YAML")
}

#[cfg(test)]
mod tests {
    use tessera_core::{GpuAssignment, ServiceReport};

    use super::*;

    fn plan() -> Plan {
        let report = |service: &str, latency_slo_ms: f64, percentile: Option<f64>| ServiceReport {
            service: service.to_string(),
            model: "resnet50".to_string(),
            rate_rps: 10.0,
            latency_slo_ms,
            provisioned_rps: 20.0,
            worst_latency_ms: 50.0,
            segments: 1,
            met: true,
            percentile,
            predicted_attainment: None,
            tolerance: None,
            busiest_load: None,
        };
        Plan {
            services: vec![report("shop \"eu\"", 216.5, Some(99.9)), report("search", 150.0, None)],
            ..Plan::from_gpus(Vec::<GpuAssignment>::new(), "optimal", "percentile", 8)
        }
    }

    #[test]
    fn each_service_records_its_budget_and_attainment_over_every_window() {
        let rules = slo_rules(&plan());
        assert_eq!(rules.groups.len(), 3);
        let shop = &rules.groups[0];
        assert_eq!(shop.name, "tessera-slo-shop \"eu\"");
        assert_eq!(shop.rules.len(), 1 + WINDOWS.len());
        assert_eq!(shop.rules[0].record.as_deref(), Some(BUDGET_RECORD));
        assert_eq!(shop.rules[0].expr, "vector(0.001)");
        assert_eq!(shop.rules[0].labels["service"], "shop \"eu\"");
        let five_minutes = &shop.rules[1];
        assert_eq!(five_minutes.record.as_deref(), Some("tessera:slo_attainment:ratio_rate5m"));
        assert!(
            five_minutes
                .expr
                .contains(r#"tessera_request_duration_seconds_bucket{service="shop \"eu\"",le="0.2165"}[5m]"#),
            "{}",
            five_minutes.expr
        );
        // Without a percentile in its report, the default's budget.
        assert_eq!(rules.groups[1].rules[0].expr, "vector(0.01)");
        assert!(rules.groups[1].rules[7].expr.contains(r#"le="0.15"}[3d]"#));
    }

    #[test]
    fn the_alerts_pair_a_long_and_a_short_window_at_the_workbook_s_burn_rates() {
        let rules = slo_rules(&plan());
        let alerts = &rules.groups[2].rules;
        let fast = &alerts[0];
        assert_eq!(
            (fast.alert.as_deref(), fast.labels["severity"].as_str()),
            (Some("TesseraSLOBudgetBurnFast"), "page")
        );
        assert!(fast.expr.starts_with(
            "((1 - tessera:slo_attainment:ratio_rate1h) > 14.4 * tessera:slo_error_budget:ratio and (1 - \
             tessera:slo_attainment:ratio_rate5m) > 14.4 * tessera:slo_error_budget:ratio)\nor\n"
        ));
        assert!(alerts[1].expr.contains("ratio_rate3d) > 1 * ") && alerts[1].labels["severity"] == "ticket");
        let yaml = to_yaml(&prometheus_rule(&plan(), "tessera"));
        assert!(yaml.starts_with("apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\n"), "{yaml}");
    }
}
