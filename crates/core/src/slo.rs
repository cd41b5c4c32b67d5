//! Service-level objectives. A service is not a model: many tenants can run
//! the same model, each with its own request rate and latency target.

use crate::error::CoreError;

/// The share of a service's requests (%) that must finish within its
/// latency SLO when nothing says otherwise.
pub const DEFAULT_PERCENTILE: f64 = 99.0;

/// One inference service and its objective: `percentile`% of its requests,
/// arriving at `rate_rps` on average, finish within `latency_slo_ms`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ServiceSlo {
    /// Unique service name.
    pub service: String,
    /// The model it runs; names a profile.
    pub model: String,
    /// Requests per second the service must sustain.
    pub rate_rps: f64,
    /// Latency objective per request, in milliseconds.
    pub latency_slo_ms: f64,
    /// The share of requests (%, above 0 and below 100) that must finish
    /// within the latency objective.
    #[serde(default = "default_percentile")]
    pub percentile: f64,
}

fn default_percentile() -> f64 {
    DEFAULT_PERCENTILE
}

/// What a service or model name may be: non-empty, and safe where names
/// become paths and URLs (`/v1/services/NAME`, a profile file per model):
/// no `/` or `\`, no control character, not `.` or `..`.
pub const NAME_RULE: &str = "a non-empty name without '/', '\\' or control characters, not '.' or '..'";

/// Checks `name` for `field` against [`NAME_RULE`].
pub fn check_name(field: &'static str, name: &str) -> Result<(), CoreError> {
    let unsafe_char = |c: char| c == '/' || c == '\\' || c.is_control();
    if name.trim().is_empty() || name.chars().any(unsafe_char) || name == "." || name == ".." {
        return Err(CoreError::invalid(field, NAME_RULE, format!("{name:?}")));
    }
    Ok(())
}

impl ServiceSlo {
    /// A validated objective: non-empty names, positive finite numbers.
    pub fn new(
        service: impl Into<String>,
        model: impl Into<String>,
        rate_rps: f64,
        latency_slo_ms: f64,
    ) -> Result<Self, CoreError> {
        let service = service.into();
        let model = model.into();
        check_name("service", &service)?;
        check_name("model", &model)?;
        if !(rate_rps.is_finite() && rate_rps > 0.0) {
            return Err(CoreError::invalid("rate_rps", "a positive number", rate_rps));
        }
        if !(latency_slo_ms.is_finite() && latency_slo_ms > 0.0) {
            return Err(CoreError::invalid("latency_ms", "a positive number", latency_slo_ms));
        }
        Ok(ServiceSlo { service, model, rate_rps, latency_slo_ms, percentile: DEFAULT_PERCENTILE })
    }

    /// The same objective for `percentile`% of requests (above 0 and below
    /// 100: no random arrival process lets every request finish within a
    /// bound).
    pub fn with_percentile(self, percentile: f64) -> Result<Self, CoreError> {
        if !(percentile.is_finite() && percentile > 0.0 && percentile < 100.0) {
            return Err(CoreError::invalid("percentile", "a share above 0 and below 100", percentile));
        }
        Ok(ServiceSlo { percentile, ..self })
    }
}

/// How a service runs in a container (in a Kubernetes cluster): its image
/// and arguments. Kept beside a plan (`Plan::images`), not in
/// [`ServiceSlo`], so the planners never see it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceImage {
    /// The container image, e.g. `registry.example/bert-serve:1.2`.
    pub image: String,
    /// The container's arguments; `{batch}` in any of them stands for the
    /// segment's batch size.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
}

impl ServiceImage {
    /// The arguments with `{batch}` replaced by `batch`.
    pub fn args_for(&self, batch: u32) -> Vec<String> {
        self.args.iter().map(|arg| arg.replace("{batch}", &batch.to_string())).collect()
    }
}

/// Checks that service names are unique; returns the first duplicate.
pub fn find_duplicate_service(services: &[ServiceSlo]) -> Option<&str> {
    let mut seen = std::collections::HashSet::new();
    services.iter().map(|s| s.service.as_str()).find(|name| !seen.insert(*name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_percentile_is_a_share_below_100() {
        let slo = ServiceSlo::new("a", "bert", 10.0, 100.0).unwrap();
        assert_eq!(slo.percentile, DEFAULT_PERCENTILE);
        assert_eq!(slo.clone().with_percentile(99.9).unwrap().percentile, 99.9);
        for bad in [0.0, 100.0, -1.0, f64::NAN] {
            assert!(slo.clone().with_percentile(bad).is_err(), "{bad}");
        }
        let read: ServiceSlo =
            serde_json::from_str(r#"{"service":"a","model":"m","rate_rps":1.0,"latency_slo_ms":5.0}"#).unwrap();
        assert_eq!(read.percentile, DEFAULT_PERCENTILE);
    }

    #[test]
    fn names_that_would_be_paths_are_refused() {
        for bad in ["a/b", "../../etc/m", "..", ".", "tab\there", "back\\slash", " "] {
            let error = ServiceSlo::new(bad, "bert", 1.0, 1.0).unwrap_err().to_string();
            assert!(error.starts_with("service must be a non-empty name without '/'"), "{bad}: {error}");
            assert!(ServiceSlo::new("a", bad, 1.0, 1.0).is_err(), "{bad}");
        }
        for good in ["chat, eu", "bert \"base\"", "svc.v2", "…unicode…", "a..b"] {
            assert!(ServiceSlo::new(good, good, 1.0, 1.0).is_ok(), "{good}");
        }
    }

    #[test]
    fn validates_fields() {
        assert!(ServiceSlo::new("a", "bert", 10.0, 100.0).is_ok());
        assert!(ServiceSlo::new("a", "bert", -1.0, 100.0).is_err());
        assert!(ServiceSlo::new("a", "bert", 1.0, 0.0).is_err());
        assert!(ServiceSlo::new("", "bert", 1.0, 1.0).is_err());
        let error = ServiceSlo::new("a", "bert", f64::INFINITY, 1.0).unwrap_err().to_string();
        assert!(error.contains("rate_rps"), "{error}");
    }

    #[test]
    fn image_arguments_carry_the_batch() {
        let image = ServiceImage { image: "serve:1".into(), args: vec!["--batch={batch}".into(), "x".into()] };
        assert_eq!(image.args_for(16), ["--batch=16", "x"]);
    }

    #[test]
    fn finds_duplicate_names() {
        let a = ServiceSlo::new("a", "bert", 1.0, 1.0).unwrap();
        let b = ServiceSlo::new("b", "bert", 1.0, 1.0).unwrap();
        assert_eq!(find_duplicate_service(&[a.clone(), b.clone()]), None);
        assert_eq!(find_duplicate_service(&[a.clone(), b, a]), Some("a"));
    }
}
