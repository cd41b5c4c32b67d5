//! The one way to check a plan: [`verify_plan`] resolves the rule, checks
//! the plan against its inputs with the independent verifier, and answers
//! a [`Verification`], whose JSON form is the CLI's and the service's.

use std::collections::BTreeSet;

use serde::Serialize;
use tessera_core::text::percent;
use tessera_core::{GpuModel, Plan};
use tessera_serving::ArrivalModel;

use crate::error::PlanError;
use crate::inputs::PlanInputs;
use crate::latency::{LatencyRule, DEFAULT_MARGIN};
use crate::planning::{recorded_arrivals, recorded_rule};
use crate::problem::DEFAULT_MAX_PROCS;
use crate::service_check::ServiceCheck;
use crate::verify::{verify_services, VerifyRequest, Violation};

/// What checking a plan found.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Verification {
    /// `true` when the plan is sound: every rate covered, every segment
    /// within the latency rule, a valid MIG layout on every GPU, the
    /// fleet's limits kept.
    pub ok: bool,
    /// The rule it was checked under.
    #[cfg_attr(feature = "openapi", schema(example = "queueing"))]
    pub latency_rule: String,
    /// The arrival model it was checked under (rules with capacities
    /// only), e.g. `poisson` or `cv=2`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(example = "poisson"))]
    pub arrivals: Option<String>,
    /// The robustness margin it was checked with (rules with capacities
    /// only): every batch this share slower than profiled.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(example = 0.05))]
    pub margin: Option<f64>,
    /// The plan's GPUs.
    pub gpus: usize,
    /// The services it was checked against.
    pub services: usize,
    /// Every violation, one line each.
    pub violations: Vec<Finding>,
    /// Every service as the check sees it, in the SLOs' order: what its
    /// segments provide and, under the percentile rule with Poisson
    /// arrivals, its predicted percentile latency and attainment.
    pub by_service: Vec<ServiceCheck>,
    /// How the check was made, when a reader should know (e.g. the rule
    /// of a plan that records none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// One violation, in words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Finding {
    /// The violation, one line.
    pub message: String,
}

/// How to check a plan: each `None` is what the plan records, else the
/// default ([`verify_plan`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CheckOptions<'a> {
    /// The latency rule.
    pub rule: Option<LatencyRule>,
    /// How requests arrive.
    pub arrivals: Option<&'a ArrivalModel>,
    /// The robustness margin (every batch this share slower than
    /// profiled).
    pub margin: Option<f64>,
    /// Most MPS processes per segment.
    pub max_procs: u32,
}

impl Default for CheckOptions<'_> {
    /// Everything as the plan records it, at most [`DEFAULT_MAX_PROCS`]
    /// processes.
    fn default() -> Self {
        CheckOptions { rule: None, arrivals: None, margin: None, max_procs: DEFAULT_MAX_PROCS }
    }
}

/// Checks `plan` against `inputs` (completed here for the plan's GPU
/// models) with at most `options.max_procs` processes per segment, under
/// the rule asked, else the rule the plan records, else
/// [`LatencyRule::DEFAULT`] (said in a note: a ParvaGPU deployment map
/// records none); under the arrivals asked, else the arrival model the
/// plan records, else Poisson; and with the margin asked, else the one the
/// plan records, else none (said in a note under a capacity rule). A
/// recorded rule this build does not know, or a recorded trace (a plan
/// names it, it does not hold it), is an error.
pub fn verify_plan(plan: &Plan, inputs: &PlanInputs, options: CheckOptions<'_>) -> Result<Verification, PlanError> {
    let CheckOptions { rule, arrivals, margin, max_procs } = options;
    let mut notes = Vec::new();
    let recorded = if rule.is_none() { recorded_rule(plan)? } else { None };
    let rule = rule.or(recorded).unwrap_or_else(|| {
        notes.push(format!(
            "the plan records no latency rule (a ParvaGPU deployment map): checked under the {} rule, \
             `tessera plan`'s default; ask for the parva rule to check it under ParvaGPU's own",
            LatencyRule::DEFAULT
        ));
        LatencyRule::DEFAULT
    });
    let models: BTreeSet<GpuModel> = plan.gpus.iter().map(|gpu| gpu.gpu_model).collect();
    let missing: Vec<GpuModel> = models.into_iter().filter(|model| !inputs.gpu_models().contains(model)).collect();
    let completed = if missing.is_empty() { None } else { Some(inputs.completed_for_more(&missing)?) };
    let inputs = completed.as_ref().unwrap_or(inputs);
    let recorded = if arrivals.is_none() { recorded_arrivals(plan)? } else { None };
    let arrivals = arrivals.cloned().or(recorded).unwrap_or(ArrivalModel::Poisson);
    let margin = match (margin, plan.margin) {
        (Some(margin), _) | (None, Some(margin)) => margin,
        (None, None) => {
            if rule.uses_capacity() {
                notes.push(format!(
                    "the plan records no margin: checked at the profiled speed (margin 0); plans are made now with \
                     a margin of {}, and each service's tolerance says how much slower it may run",
                    percent(DEFAULT_MARGIN)
                ));
            }
            0.0
        }
    };
    let margin = if rule.uses_capacity() { margin } else { 0.0 };
    let request = VerifyRequest {
        catalog: inputs.catalog(),
        services: inputs.services(),
        rule,
        arrivals: &arrivals,
        max_procs,
        margin,
    };
    let (violations, by_service) = verify_services(plan, &request);
    let unknown_services = violations.iter().any(|violation| matches!(violation, Violation::UnknownService { .. }));
    if plan.latency_rule.is_empty() && unknown_services {
        notes.push(
            "a ParvaGPU deployment map names models, not services: each instance serves the service named after \
             its model, so the SLOs must name services after their models (ParvaGPU's scenario files do)"
                .to_string(),
        );
    }
    Ok(Verification {
        ok: violations.is_empty(),
        latency_rule: rule.name().to_string(),
        arrivals: rule.uses_capacity().then(|| arrivals.to_string()),
        margin: rule.uses_capacity().then_some(margin),
        gpus: plan.gpu_count,
        services: inputs.services().len(),
        violations: violations.iter().map(|violation| Finding { message: violation.to_string() }).collect(),
        by_service,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use tessera_core::GpuModel;

    use super::*;
    use crate::planning::{plan, PlanRequest};

    #[test]
    fn a_plan_is_checked_under_its_own_rule_and_one_without_a_rule_under_the_default_with_a_note() {
        let inputs = PlanInputs::demo(&[GpuModel::A100_80GB]).unwrap();
        let mut planned = plan(&PlanRequest::new(&inputs)).unwrap().plan;
        let checked = verify_plan(&planned, &inputs, CheckOptions::default()).unwrap();
        assert!(checked.ok && checked.notes.is_empty(), "{checked:?}");
        assert_eq!(checked.latency_rule, LatencyRule::DEFAULT.name());
        planned.latency_rule.clear();
        let unrecorded = verify_plan(&planned, &inputs, CheckOptions::default()).unwrap();
        assert!(unrecorded.notes[0].contains("records no latency rule"), "{:?}", unrecorded.notes);
        // Such a plan's services are its models': a mismatch says so.
        for instance in planned.gpus.iter_mut().flat_map(|gpu| gpu.instances.iter_mut()) {
            instance.service = instance.model.clone();
        }
        let by_model = verify_plan(&planned, &inputs, CheckOptions::default()).unwrap();
        assert!(by_model.notes.iter().any(|note| note.contains("names models, not services")), "{by_model:?}");
        planned.latency_rule = "fastest".to_string();
        let error = verify_plan(&planned, &inputs, CheckOptions::default()).unwrap_err().to_string();
        assert!(error.contains("unknown latency rule 'fastest'"), "{error}");
    }

    #[test]
    fn violations_have_one_json_form() {
        let inputs = PlanInputs::demo(&[GpuModel::A100_80GB]).unwrap();
        let mut planned = plan(&PlanRequest::new(&inputs)).unwrap().plan;
        planned.gpu_count += 1;
        let checked = verify_plan(&planned, &inputs, CheckOptions::default()).unwrap();
        let json = serde_json::to_value(&checked).unwrap();
        assert_eq!(json["ok"], false);
        let message = json["violations"][0]["message"].as_str().unwrap();
        assert!(message.starts_with("gpu_count is"), "{message}");
    }

    #[test]
    fn every_service_is_predicted_as_the_plan_reports_it() {
        let inputs = PlanInputs::demo(&[GpuModel::A100_80GB]).unwrap();
        let planned = plan(&PlanRequest::new(&inputs)).unwrap().plan;
        let checked = verify_plan(&planned, &inputs, CheckOptions::default()).unwrap();
        assert_eq!(checked.by_service.len(), inputs.services().len());
        for (check, slo) in checked.by_service.iter().zip(inputs.services()) {
            let report = planned.services.iter().find(|report| report.service == slo.service).unwrap();
            assert_eq!((check.service.as_str(), check.rate_rps), (slo.service.as_str(), slo.rate_rps));
            assert!(check.met && check.percentile == Some(slo.percentile), "{check:?}");
            // Recomputed from the profiles, the same serving model.
            let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs();
            assert!(close(check.provisioned_rps, report.provisioned_rps), "{check:?} vs {report:?}");
            assert!(close(check.worst_latency_ms.unwrap(), report.worst_latency_ms), "{check:?} vs {report:?}");
            let attainment = check.predicted_attainment.unwrap();
            assert!(close(attainment, report.predicted_attainment.unwrap()), "{check:?} vs {report:?}");
            assert!(attainment >= slo.percentile / 100.0 && check.worst_latency_ms.unwrap() <= slo.latency_slo_ms);
            // The plan records the tolerance and load the check finds, and
            // the tolerance covers the margin it was planned under.
            assert_eq!((report.tolerance, report.busiest_load), (check.tolerance, check.busiest_load));
            assert_eq!(report.bears(planned.margin.unwrap()), Some(true), "{report:?}");
            assert!((0.0..=1.0).contains(&report.busiest_load.unwrap()), "{report:?}");
        }
    }

    #[test]
    fn a_service_is_judged_by_the_rule_it_is_checked_under() {
        let inputs = PlanInputs::demo(&[GpuModel::A100_80GB]).unwrap();
        let request = PlanRequest { rule: Some(LatencyRule::Parva), ..PlanRequest::new(&inputs) };
        let parva = plan(&request).unwrap().plan;
        // Under its own rule: the rule's worst latency, nothing predicted.
        let checked = verify_plan(&parva, &inputs, CheckOptions::default()).unwrap();
        assert!(checked.ok);
        for check in &checked.by_service {
            assert!(check.met && check.percentile.is_none() && check.predicted_attainment.is_none(), "{check:?}");
            assert!(check.worst_latency_ms.unwrap() <= check.latency_slo_ms, "{check:?}");
        }
        // Under the percentile rule, ParvaGPU's rule claims more than the
        // serving model's capacities, and packs some services past their
        // percentile: each is named by a violation, and the predictions say
        // which fall short.
        let strict = verify_plan(
            &parva,
            &inputs,
            CheckOptions { rule: Some(LatencyRule::Percentile), ..CheckOptions::default() },
        )
        .unwrap();
        let missed: Vec<&ServiceCheck> = strict.by_service.iter().filter(|check| !check.met).collect();
        assert!(!strict.ok && !missed.is_empty(), "{strict:?}");
        for check in &missed {
            let quoted = format!("'{}'", check.service);
            assert!(strict.violations.iter().any(|finding| finding.message.contains(&quoted)), "{check:?}");
        }
        assert!(missed.iter().any(|check| check.predicted_attainment.is_some_and(|a| a < 0.99)), "{missed:?}");
    }
}
