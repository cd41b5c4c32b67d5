//! Rates from Prometheus' HTTP API: one instant query per service
//! (`/api/v1/query`, evaluated at the decision's time), its template's
//! `{service}` replaced by the service's name, answered by one sample. Whatever else comes back (no series,
//! several, a value that is not a finite rate, an error status, no answer
//! in time, Prometheus unreachable) is that service's missing sample with
//! the cause in words.

use std::time::Duration;

use serde_json::Value;
use tessera_autopilot::RateSample;

use crate::error::LiveError;
use crate::http::{query_escape, BaseUrl};
use crate::rates::{RateSource, Rates};

/// The Prometheus source.
#[derive(Debug, Clone)]
pub struct PrometheusRates {
    url: BaseUrl,
    template: String,
    timeout: Duration,
    services: Vec<String>,
}

impl PrometheusRates {
    /// Queries `url` for each of `services` with `template`, each query
    /// within `timeout`. An error when the URL cannot be used or the
    /// template does not name `{service}`.
    pub fn new(
        url: &str,
        template: &str,
        timeout: Duration,
        services: Vec<String>,
    ) -> Result<PrometheusRates, LiveError> {
        let url = BaseUrl::parse(url).map_err(|error| LiveError::Setting(format!("--prometheus {error}")))?;
        if !template.contains("{service}") {
            return Err(LiveError::Setting(format!(
                "--query-template '{template}' does not contain {{service}}: every service would read the same rate"
            )));
        }
        Ok(PrometheusRates { url, template: template.to_string(), timeout, services })
    }

    /// The query of `service`.
    fn query(&self, service: &str) -> String {
        self.template.replace("{service}", service)
    }

    /// One service's sample as of `at_s` (seconds since the Unix epoch:
    /// the decision's time, so that an answer that comes late still reads
    /// the rates the decision is about), or why there is none. `Err(Ok(cause))` is a
    /// fault of this query; `Err(Err(cause))` one of Prometheus itself (no
    /// other query is tried).
    fn sample(&self, service: &str, at_s: f64) -> Result<RateSample, Result<String, String>> {
        let path = format!("/api/v1/query?query={}&time={at_s:.3}", query_escape(&self.query(service)));
        let (status, body) = self
            .url
            .get(&path, self.timeout)
            .map_err(|cause| Err(format!("Prometheus at {} unreachable: {cause}", self.url.text())))?;
        parse_answer(status, &body).map_err(Ok)
    }
}

impl RateSource for PrometheusRates {
    fn describe(&self) -> String {
        format!("Prometheus at {} ({})", self.url.text(), self.template)
    }

    fn rates(&mut self, now_s: f64) -> Rates {
        let mut results = Vec::with_capacity(self.services.len());
        let mut down: Option<String> = None;
        for service in &self.services {
            let result = match &down {
                Some(cause) => Err(cause.clone()),
                None => match self.sample(service, now_s) {
                    Ok(sample) => Ok(sample),
                    Err(Ok(cause)) => Err(cause),
                    Err(Err(cause)) => {
                        down = Some(cause.clone());
                        Err(cause)
                    }
                },
            };
            results.push(result);
        }
        Rates::from_results(&self.services, results)
    }
}

/// The `data` of a successful answer of Prometheus' HTTP API, or what is
/// wrong with the answer.
pub(crate) fn answer_data(status: u16, body: &[u8]) -> Result<Value, String> {
    let mut answer: Value = serde_json::from_slice(body).map_err(|_| {
        let start: String = String::from_utf8_lossy(body).chars().take(80).collect();
        format!("Prometheus answered status {status} without JSON: '{start}'")
    })?;
    if answer["status"] != "success" {
        let error = answer["error"].as_str().unwrap_or("no error given");
        return Err(format!("Prometheus answered status {status}: {error}"));
    }
    Ok(answer["data"].take())
}

/// The sample in a `/api/v1/query` answer, or what is wrong with it.
fn parse_answer(status: u16, body: &[u8]) -> Result<RateSample, String> {
    let data = &answer_data(status, body)?;
    let pair = match (data["resultType"].as_str(), &data["result"]) {
        (Some("scalar"), pair) => pair,
        (Some("vector"), Value::Array(series)) => match series.as_slice() {
            [] => return Err("no series (no requests counted yet, or the query matches nothing)".to_string()),
            [one] => &one["value"],
            many => return Err(format!("{} series where one is expected (sum them in --query-template)", many.len())),
        },
        (kind, _) => return Err(format!("a {} result where a vector is expected", kind.unwrap_or("missing"))),
    };
    let observed_at_s = pair[0].as_f64().ok_or("a sample without a time")?;
    let text = pair[1].as_str().ok_or("a sample without a value")?;
    let rate_rps = text.parse::<f64>().map_err(|_| format!("the value '{text}' is not a number"))?;
    if !(rate_rps.is_finite() && rate_rps >= 0.0) {
        return Err(format!("the value {text} is not a rate (finite, 0 or more)"));
    }
    Ok(RateSample { rate_rps, observed_at_s })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vector(values: &[&str]) -> String {
        let series: Vec<String> =
            values.iter().map(|v| format!(r#"{{"metric":{{}},"value":[1700000000.5,"{v}"]}}"#)).collect();
        format!(r#"{{"status":"success","data":{{"resultType":"vector","result":[{}]}}}}"#, series.join(","))
    }

    #[test]
    fn one_series_is_the_sample_and_everything_else_says_why_not() {
        let sample = parse_answer(200, vector(&["12.5"]).as_bytes()).unwrap();
        assert_eq!(sample, RateSample { rate_rps: 12.5, observed_at_s: 1_700_000_000.5 });
        let scalar = r#"{"status":"success","data":{"resultType":"scalar","result":[3.0,"2"]}}"#;
        assert_eq!(parse_answer(200, scalar.as_bytes()).unwrap().rate_rps, 2.0);
        let fault = |status, body: &str| parse_answer(status, body.as_bytes()).unwrap_err();
        assert!(fault(200, &vector(&[])).contains("no series"));
        assert!(fault(200, &vector(&["1", "2"])).contains("2 series where one is expected"));
        assert!(fault(200, &vector(&["NaN"])).contains("NaN is not a rate"));
        assert!(fault(200, &vector(&["+Inf"])).contains("not a rate"));
        assert!(fault(200, &vector(&["-1"])).contains("not a rate"));
        assert!(fault(200, &vector(&["x"])).contains("'x' is not a number"));
        let bad = r#"{"status":"error","errorType":"bad_data","error":"parse error at char 4"}"#;
        assert_eq!(fault(400, bad), "Prometheus answered status 400: parse error at char 4");
        assert!(fault(502, "<html>Bad Gateway</html>").contains("status 502 without JSON: '<html>"));
        let matrix = r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#;
        assert!(fault(200, matrix).contains("a matrix result"));
    }

    #[test]
    fn the_template_must_name_the_service_and_the_url_must_be_http() {
        let services = vec!["a".to_string()];
        let timeout = Duration::from_secs(1);
        assert!(PrometheusRates::new("http://p:9090", "up", timeout, services.clone())
            .unwrap_err()
            .to_string()
            .contains("does not contain {service}"));
        assert!(PrometheusRates::new("https://p", "{service}", timeout, services.clone())
            .unwrap_err()
            .to_string()
            .starts_with("--prometheus 'https://p': HTTPS"));
        let source = PrometheusRates::new("http://p:9090", r#"rate(x{s="{service}"}[1m])"#, timeout, services).unwrap();
        assert_eq!(source.query("a"), r#"rate(x{s="a"}[1m])"#);
    }

    #[test]
    fn an_unreachable_prometheus_strikes_every_service_with_one_cause() {
        // A port nothing listens on: bound, then released.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let services = vec!["a".to_string(), "b".to_string()];
        let mut source =
            PrometheusRates::new(&format!("http://127.0.0.1:{port}"), "{service}", Duration::from_secs(2), services)
                .unwrap();
        let rates = source.rates(0.0);
        assert_eq!(rates.samples, vec![None, None]);
        assert_eq!(rates.faults.len(), 1, "{:?}", rates.faults);
        assert!(rates.faults[0].starts_with(&format!("a, b: Prometheus at http://127.0.0.1:{port} unreachable: ")));
    }
}
