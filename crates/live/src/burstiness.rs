//! Each service's burstiness read from Prometheus: one range query per
//! service and decision (`/api/v1/query_range` over the last window, one
//! point per counting window), its template's `{service}` and `{step}`
//! replaced, answered by one series of request counts; the estimate is
//! tessera-autopilot's ([`estimate_cv`]). A service whose counts cannot be
//! read, or are too few, has no estimate and the reason in words.

use std::time::Duration;

use serde_json::Value;
use tessera_autopilot::{estimate_cv, ObservedCv};

use crate::error::LiveError;
use crate::http::{query_escape, BaseUrl};
use crate::prometheus::answer_data;

/// The burstiness reader.
#[derive(Debug, Clone)]
pub struct PrometheusCounts {
    url: BaseUrl,
    template: String,
    timeout: Duration,
    services: Vec<String>,
    window_s: f64,
    step_s: f64,
}

/// What one reading found: each service's estimate, and why the others
/// have none (one line per service).
#[derive(Debug, Clone, PartialEq)]
pub struct Burstiness {
    /// The services with an estimate.
    pub observed: Vec<ObservedCv>,
    /// `service: why`, for the services without one.
    pub missing: Vec<String>,
}

impl PrometheusCounts {
    /// Reads the counts of `services` from `url` with `template` over the
    /// last `window_s` seconds in windows of `step_s`, each query within
    /// `timeout`. An error when the URL cannot be used, the template does
    /// not name `{service}` and `{step}`, or the window holds fewer than
    /// two steps.
    pub fn new(
        url: &str,
        template: &str,
        timeout: Duration,
        services: Vec<String>,
        window_s: f64,
        step_s: f64,
    ) -> Result<PrometheusCounts, LiveError> {
        let url = BaseUrl::parse(url).map_err(|error| LiveError::Setting(format!("--prometheus {error}")))?;
        for placeholder in ["{service}", "{step}"] {
            if !template.contains(placeholder) {
                return Err(LiveError::Setting(format!(
                    "--counts-template '{template}' does not contain {placeholder}"
                )));
            }
        }
        if window_s < 2.0 * step_s {
            return Err(LiveError::Setting(format!(
                "--burstiness-window-s {window_s} holds fewer than two windows of --burstiness-step-s {step_s}"
            )));
        }
        Ok(PrometheusCounts { url, template: template.to_string(), timeout, services, window_s, step_s })
    }

    /// The query of `service`.
    fn query(&self, service: &str) -> String {
        let step = format!("{}ms", (self.step_s * 1000.0).round() as u64);
        self.template.replace("{service}", service).replace("{step}", &step)
    }

    /// One service's counts per window over the window ending at `now_s`.
    /// `Err(Ok(cause))` is a fault of this query; `Err(Err(cause))` one of
    /// Prometheus itself (no other query is tried).
    fn counts(&self, service: &str, now_s: f64) -> Result<Vec<f64>, Result<String, String>> {
        let path = format!(
            "/api/v1/query_range?query={}&start={:.3}&end={now_s:.3}&step={:.3}",
            query_escape(&self.query(service)),
            now_s - self.window_s,
            self.step_s
        );
        let (status, body) = self
            .url
            .get(&path, self.timeout)
            .map_err(|cause| Err(format!("Prometheus at {} unreachable: {cause}", self.url.text())))?;
        answer_data(status, &body).and_then(|data| parse_counts(&data)).map_err(Ok)
    }

    /// Every service's estimate as of `now_s` (seconds since the Unix
    /// epoch), or why there is none; Prometheus unreachable strikes every
    /// service left with one cause.
    pub fn read(&self, now_s: f64) -> Burstiness {
        let mut reading = Burstiness { observed: Vec::new(), missing: Vec::new() };
        let mut down: Option<String> = None;
        for service in &self.services {
            let estimate = match &down {
                Some(cause) => Err(cause.clone()),
                None => match self.counts(service, now_s) {
                    Ok(counts) => estimate_cv(&counts),
                    Err(Ok(cause)) => Err(cause),
                    Err(Err(cause)) => {
                        down = Some(cause.clone());
                        Err(cause)
                    }
                },
            };
            match estimate {
                Ok(cv) => reading.observed.push(ObservedCv { service: service.clone(), cv }),
                Err(why) => reading.missing.push(format!("{service}: {why}")),
            }
        }
        reading
    }
}

/// The counts of a range query's one series, oldest first.
fn parse_counts(data: &Value) -> Result<Vec<f64>, String> {
    let series = match (data["resultType"].as_str(), &data["result"]) {
        (Some("matrix"), Value::Array(series)) => series,
        (kind, _) => return Err(format!("a {} result where a matrix is expected", kind.unwrap_or("missing"))),
    };
    let values = match series.as_slice() {
        [] => return Err("no series (no requests counted yet, or the query matches nothing)".to_string()),
        [one] => one["values"].as_array().ok_or("a series without values")?,
        many => return Err(format!("{} series where one is expected (sum them in --counts-template)", many.len())),
    };
    values
        .iter()
        .map(|pair| {
            let text = pair[1].as_str().ok_or("a point without a value")?;
            text.parse::<f64>().map_err(|_| format!("the value '{text}' is not a number"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matrix(series: &[&[f64]]) -> Value {
        let series: Vec<Value> = series
            .iter()
            .map(|values| {
                let points: Vec<Value> =
                    values.iter().enumerate().map(|(i, v)| serde_json::json!([i as f64, v.to_string()])).collect();
                serde_json::json!({"metric": {}, "values": points})
            })
            .collect();
        serde_json::json!({"resultType": "matrix", "result": series})
    }

    #[test]
    fn one_series_is_the_counts_and_everything_else_says_why_not() {
        assert_eq!(parse_counts(&matrix(&[&[3.0, 4.5]])).unwrap(), vec![3.0, 4.5]);
        assert!(parse_counts(&matrix(&[])).unwrap_err().contains("no series"));
        assert!(parse_counts(&matrix(&[&[1.0], &[2.0]])).unwrap_err().contains("2 series where one is expected"));
        let vector = serde_json::json!({"resultType": "vector", "result": []});
        assert!(parse_counts(&vector).unwrap_err().contains("a vector result where a matrix is expected"));
    }

    #[test]
    fn an_unreachable_prometheus_strikes_every_service_with_one_cause() {
        // A port nothing listens on: bound, then released.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let services = vec!["a".to_string(), "b".to_string()];
        let url = format!("http://127.0.0.1:{port}");
        let reader =
            PrometheusCounts::new(&url, "{service}[{step}]", Duration::from_secs(2), services, 600.0, 15.0).unwrap();
        let reading = reader.read(0.0);
        assert!(reading.observed.is_empty());
        let cause = format!("Prometheus at {url} unreachable: ");
        assert!(reading.missing.iter().all(|line| line.contains(&cause)), "{:?}", reading.missing);
        let (a, b) = (&reading.missing[0], &reading.missing[1]);
        assert_eq!(a.strip_prefix("a: "), b.strip_prefix("b: "), "one cause");
    }

    #[test]
    fn the_template_names_the_service_and_the_step_and_the_window_holds_two_steps() {
        let services = vec!["a".to_string()];
        let timeout = Duration::from_secs(1);
        let made = |template: &str, window_s| {
            PrometheusCounts::new("http://p:9090", template, timeout, services.clone(), window_s, 15.0)
        };
        assert!(made("x{s=\"{service}\"}", 600.0).unwrap_err().to_string().contains("does not contain {step}"));
        assert!(made("x[{step}]", 600.0).unwrap_err().to_string().contains("does not contain {service}"));
        assert!(made("x{s=\"{service}\"}[{step}]", 20.0).unwrap_err().to_string().contains("fewer than two windows"));
        let reader = made(r#"increase(x{s="{service}"}[{step}])"#, 600.0).unwrap();
        assert_eq!(reader.query("a"), r#"increase(x{s="a"}[15000ms])"#);
    }
}
