//! The one set of planning options: what `tessera plan`, the autopilot's
//! commands and the service's plan jobs take besides the services and
//! profiles. Declared once, here: the command-line flags (behind the
//! `clap` feature), the JSON fields (serde) and their OpenAPI schema
//! (behind `openapi`) are derived from these structs, every default is a
//! constant of this crate, and [`PlanRequest::from_options`] is the one
//! place options become a [`PlanRequest`](crate::PlanRequest).

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tessera_core::text::number;
use tessera_core::{GpuModel, GpuOffer, Sharing};
use tessera_serving::ArrivalModel;

use crate::error::PlanError;
use crate::latency::{LatencyRule, MAX_MARGIN};
use crate::optimal::DEFAULT_TIME_LIMIT;
use crate::problem::{DEFAULT_GPUS_PER_NODE, DEFAULT_MAX_GPUS, DEFAULT_MAX_PROCS, MAX_GPUS_LIMIT};
use crate::replan::GpuPosition;
use crate::strategy::Strategy;

/// The GPU model a fleet is made of when none is named.
pub const DEFAULT_GPU_MODEL: GpuModel = GpuModel::A100_80GB;

/// How to plan: the fleet, the search and the model a plan is proven
/// under. Every field has a default ([`PlanOptions::default`]); JSON
/// fields are named as the Rust fields, command-line flags too except
/// `--gpu` (repeated) and `--time-limit`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(default, deny_unknown_fields)]
pub struct PlanOptions {
    /// A GPU model of the fleet, with an optional cost per GPU and count
    /// limit (`MODEL[:cost=C][,count=N]`); several make a mixed fleet
    /// whose objective is total cost, e.g. `a100-80gb:cost=1.0` and
    /// `h100-80gb:cost=1.6,count=16`. GPU models without profiles of a
    /// model get estimated ones (said in the plan's notes).
    #[cfg_attr(
        feature = "clap",
        arg(long = "gpu", value_name = "MODEL[:cost=C][,count=N]",
            default_values_t = [GpuOffer::plain(DEFAULT_GPU_MODEL)])
    )]
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<String>, example = json!(["a100-80gb"])))]
    pub gpus: Vec<GpuOffer>,

    /// Most MPS processes per segment.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = DEFAULT_MAX_PROCS,
        value_parser = clap::value_parser!(u32).range(1..)))]
    pub max_procs: u32,

    /// Planning strategy: `optimal` (fewest GPUs or lowest cost, with a
    /// proven bound) or `parva` (ParvaGPU's heuristic).
    #[cfg_attr(feature = "clap", arg(long, value_enum, default_value_t = Strategy::default()))]
    #[cfg_attr(feature = "openapi", schema(value_type = String, example = "optimal"))]
    pub strategy: Strategy,

    /// Latency rule every segment must meet: `percentile`, `queueing` or
    /// `parva`. Default: the strategy's (percentile for optimal, parva for
    /// parva); for a replan, the running plan's.
    #[cfg_attr(feature = "clap", arg(long, value_enum))]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, example = "percentile"))]
    pub latency_rule: Option<LatencyRule>,

    /// How requests arrive, for the percentile rule's capacities: `poisson`
    /// (exact, the analytic model), `cv=X` or `onoff=burst:B,on:S,off:S`
    /// (each configuration's capacity searched for with the request
    /// simulator), or `trace=FILE` (command line only). Default: poisson;
    /// for a replan, the running plan's.
    #[cfg_attr(feature = "clap", arg(long, value_name = "MODEL"))]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, example = "cv=2"))]
    pub arrivals: Option<Arrivals>,

    /// Robustness margin of the percentile rule: every service meets its
    /// SLO with every batch this share slower than profiled (0.06: 6%
    /// slower; 0: at the profiled speed, on the knife edge). Default:
    /// 0.06 under the percentile rule, 0 under the others (which take
    /// none); for a replan, the running plan's.
    #[cfg_attr(feature = "clap", arg(long, value_name = "SHARE", value_parser = parse_margin))]
    pub margin: Option<f64>,

    /// Seconds the optimal strategy may search before returning its best
    /// plan with the gap to its lower bound (more than a duration holds,
    /// e.g. 1e20, means no limit).
    #[cfg_attr(feature = "clap", arg(long = "time-limit", value_name = "SECONDS",
        default_value_t = DEFAULT_TIME_LIMIT.as_secs_f64(), value_parser = parse_time_limit,
        allow_negative_numbers = true))]
    pub time_limit_s: f64,

    /// GPUs per node, for numbering nodes.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = DEFAULT_GPUS_PER_NODE,
        value_parser = clap::value_parser!(u32).range(1..)))]
    pub gpus_per_node: u32,

    /// Most GPUs a plan may use, all GPU models together: a service or SLO
    /// set that needs more is refused at once, naming the service.
    #[cfg_attr(feature = "clap", arg(long, value_name = "N", default_value_t = DEFAULT_MAX_GPUS,
        value_parser = clap::value_parser!(u64).range(1..=MAX_GPUS_LIMIT)))]
    pub max_gpus: u64,

    /// Spread services over GPUs: a service with several segments gets them
    /// on at least two GPUs (so one lost GPU never takes all of it), by
    /// trading segments between instances of the same profile; layouts,
    /// GPUs and every SLO stay as planned. Services that cannot be spread
    /// are named in the plan's notes.
    #[cfg_attr(feature = "clap", arg(long))]
    pub spread: bool,

    /// Let light services share MIG instances of the smallest size, several
    /// per instance, under this discipline (`serialized`: one batch at a
    /// time, oldest request first), where that saves GPUs; the rest keep
    /// segments of their own. Percentile rule, Poisson arrivals, one GPU
    /// model, fresh plans only.
    #[cfg_attr(feature = "clap", arg(long, value_name = "DISCIPLINE", value_parser = parse_sharing))]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, example = "serialized"))]
    pub share: Option<Sharing>,
}

/// `--share`'s parser: a discipline's name.
#[cfg(feature = "clap")]
fn parse_sharing(text: &str) -> Result<Sharing, String> {
    text.parse()
}

impl Default for PlanOptions {
    /// One unlimited [`DEFAULT_GPU_MODEL`] at cost 1, [`DEFAULT_MAX_PROCS`]
    /// processes, the `optimal` strategy under its default rule and
    /// Poisson arrivals, a [`DEFAULT_TIME_LIMIT`], [`DEFAULT_GPUS_PER_NODE`]
    /// GPUs per node, at most [`DEFAULT_MAX_GPUS`] GPUs, no spread, no
    /// sharing.
    fn default() -> Self {
        PlanOptions {
            gpus: vec![GpuOffer::plain(DEFAULT_GPU_MODEL)],
            max_procs: DEFAULT_MAX_PROCS,
            strategy: Strategy::default(),
            latency_rule: None,
            arrivals: None,
            margin: None,
            time_limit_s: DEFAULT_TIME_LIMIT.as_secs_f64(),
            gpus_per_node: DEFAULT_GPUS_PER_NODE,
            max_gpus: DEFAULT_MAX_GPUS,
            spread: false,
            share: None,
        }
    }
}

impl PlanOptions {
    /// The GPU models of the fleet, in the order named.
    pub fn gpu_models(&self) -> Vec<GpuModel> {
        self.gpus.iter().map(|offer| offer.model).collect()
    }

    /// The search's time limit; `None` when more seconds are asked than a
    /// duration holds (no limit).
    pub fn time_limit(&self) -> Option<Duration> {
        Duration::try_from_secs_f64(self.time_limit_s).ok()
    }

    /// Refuses, naming the field, what the command line's parsers refuse
    /// (the JSON form has no parser of its own): an empty fleet, no
    /// processes, a time limit that is not a positive number of seconds,
    /// no GPUs per node, a GPU ceiling out of `1..=`[`MAX_GPUS_LIMIT`].
    pub fn check(&self) -> Result<(), PlanError> {
        let invalid = |field: &'static str, message: String| Err(PlanError::InvalidOption { field, message });
        if self.gpus.is_empty() {
            return invalid("gpus", "name at least one GPU model, e.g. \"a100-80gb\"".to_string());
        }
        if self.max_procs == 0 {
            return invalid("max_procs", "must be at least 1".to_string());
        }
        if let Err(message) = check_time_limit(self.time_limit_s, &number(self.time_limit_s, 3)) {
            return invalid("time_limit_s", message);
        }
        if let Some(margin) = self.margin.filter(|margin| !(0.0..=MAX_MARGIN).contains(margin)) {
            return invalid("margin", format!("{} is not a share in [0, {MAX_MARGIN}]", number(margin, 3)));
        }
        if self.gpus_per_node == 0 {
            return invalid("gpus_per_node", "must be at least 1".to_string());
        }
        if !(1..=MAX_GPUS_LIMIT).contains(&self.max_gpus) {
            return invalid("max_gpus", format!("{} is not in 1..={MAX_GPUS_LIMIT}", self.max_gpus));
        }
        Ok(())
    }
}

/// How to replan from the plan that runs: the options of `tessera plan
/// --from` and of a plan job's `from_plan` besides the running plan
/// itself.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(default, deny_unknown_fields)]
pub struct ReplanOptions {
    /// GPUs the replan may use beyond the fresh optimum.
    #[cfg_attr(feature = "clap", arg(long, value_name = "K", default_value_t = 0))]
    pub max_extra_gpus: u64,

    /// A GPU of the running plan to drain (`NODE:GPU`, e.g. `0:3`): its
    /// services move to the rest of the fleet before it is emptied.
    #[cfg_attr(feature = "clap", arg(long, value_name = "NODE:GPU"))]
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<String>, example = json!(["0:3"])))]
    pub drain: Vec<GpuPosition>,

    /// A GPU of the running plan that failed (`NODE:GPU`): its services are
    /// replanned onto the rest.
    #[cfg_attr(feature = "clap", arg(long, value_name = "NODE:GPU"))]
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<String>, example = json!(["1:0"])))]
    pub lost: Vec<GpuPosition>,
}

impl ReplanOptions {
    /// Whether any option asks for something (they need a running plan).
    pub fn is_set(&self) -> bool {
        self != &ReplanOptions::default()
    }
}

/// How requests arrive, as an option names it.
#[derive(Debug, Clone, PartialEq)]
pub enum Arrivals {
    /// An arrival model, ready to plan under.
    Model(ArrivalModel),
    /// `trace=FILE`: a trace of arrival instants that the edge (the command
    /// line) reads and replaces by [`Arrivals::Model`] before planning.
    TraceFile(PathBuf),
}

impl Arrivals {
    /// The trace file to read, if the option names one.
    pub fn trace_file(&self) -> Option<&Path> {
        match self {
            Arrivals::TraceFile(path) => Some(path),
            Arrivals::Model(_) => None,
        }
    }
}

impl FromStr for Arrivals {
    type Err = String;

    /// `trace=FILE`, or the arrival-model syntax of
    /// [`ArrivalModel::parse`].
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim().strip_prefix("trace=") {
            Some("") => Err("trace= names no file".to_string()),
            Some(path) => Ok(Arrivals::TraceFile(PathBuf::from(path))),
            None => ArrivalModel::parse(text).map(Arrivals::Model).map_err(|error| error.to_string()),
        }
    }
}

impl fmt::Display for Arrivals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Arrivals::Model(model) => write!(f, "{model}"),
            Arrivals::TraceFile(path) => write!(f, "trace={}", path.display()),
        }
    }
}

// The option travels as its text, as on the command line.
tessera_core::serde_as_text!(Arrivals);

/// A time limit: a positive number of seconds (more than a duration holds
/// means none); the error quotes `text`, what was given.
fn check_time_limit(seconds: f64, text: &str) -> Result<(), String> {
    if seconds > 0.0 {
        Ok(())
    } else {
        Err(format!("expected a positive number of seconds, got '{text}'"))
    }
}

/// `--margin`'s parser: a share in `[0, MAX_MARGIN]`.
#[cfg(feature = "clap")]
pub fn parse_margin(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(margin) if (0.0..=MAX_MARGIN).contains(&margin) => Ok(margin),
        _ => Err(format!("expected a share in [0, {MAX_MARGIN}] (0.05: every batch 5% slower), got '{text}'")),
    }
}

/// `--time-limit`'s parser.
#[cfg(feature = "clap")]
fn parse_time_limit(text: &str) -> Result<f64, String> {
    let seconds: f64 = text.parse().map_err(|_| format!("expected a positive number of seconds, got '{text}'"))?;
    check_time_limit(seconds, text).map(|()| seconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_travel_as_json_and_back() {
        let options = PlanOptions::default();
        let json = serde_json::to_value(&options).unwrap();
        assert_eq!(json["gpus"], serde_json::json!(["a100-80gb"]));
        assert_eq!(json["strategy"], "optimal");
        assert_eq!(serde_json::from_value::<PlanOptions>(json).unwrap(), options);
        let empty: PlanOptions = serde_json::from_str("{}").unwrap();
        assert_eq!(empty, options, "every field has its default");
    }

    #[test]
    fn typed_fields_are_read_from_their_text() {
        let options: PlanOptions = serde_json::from_value(serde_json::json!({
            "gpus": ["h100-80gb:cost=1.6,count=3"], "strategy": "parva", "latency_rule": "parva",
            "arrivals": "cv=2", "spread": true
        }))
        .unwrap();
        assert_eq!(options.gpus[0].limit, Some(3));
        assert_eq!((options.strategy, options.latency_rule), (Strategy::Parva, Some(LatencyRule::Parva)));
        assert_eq!(options.arrivals, Some(Arrivals::Model(ArrivalModel::Renewal { cv: 2.0 })));
        for (body, expected) in [
            (serde_json::json!({"strategy": "best"}), "unknown strategy 'best'"),
            (serde_json::json!({"latency_rule": "fast"}), "unknown latency rule 'fast'"),
            (serde_json::json!({"arrivals": "cv=0"}), "cv"),
            (serde_json::json!({"gpus": ["v100"]}), "v100"),
            (serde_json::json!({"colour": 1}), "unknown field `colour`"),
        ] {
            let error = serde_json::from_value::<PlanOptions>(body.clone()).unwrap_err().to_string();
            assert!(error.contains(expected), "{body}: {error}");
        }
    }

    #[test]
    fn checks_name_the_field() {
        for (options, field) in [
            (PlanOptions { gpus: Vec::new(), ..PlanOptions::default() }, "gpus"),
            (PlanOptions { max_procs: 0, ..PlanOptions::default() }, "max_procs"),
            (PlanOptions { time_limit_s: 0.0, ..PlanOptions::default() }, "time_limit_s"),
            (PlanOptions { time_limit_s: f64::NAN, ..PlanOptions::default() }, "time_limit_s"),
            (PlanOptions { gpus_per_node: 0, ..PlanOptions::default() }, "gpus_per_node"),
            (PlanOptions { max_gpus: 0, ..PlanOptions::default() }, "max_gpus"),
            (PlanOptions { margin: Some(-0.1), ..PlanOptions::default() }, "margin"),
            (PlanOptions { margin: Some(f64::NAN), ..PlanOptions::default() }, "margin"),
        ] {
            match options.check() {
                Err(PlanError::InvalidOption { field: named, .. }) => assert_eq!(named, field),
                other => panic!("{field}: {other:?}"),
            }
        }
        assert_eq!(PlanOptions { time_limit_s: 1e300, ..PlanOptions::default() }.time_limit(), None);
    }

    #[test]
    fn a_trace_is_read_by_the_edge_before_planning() {
        let arrivals: Arrivals = "trace=day.csv".parse().unwrap();
        assert_eq!(arrivals.trace_file(), Some(Path::new("day.csv")));
        assert_eq!(arrivals.to_string(), "trace=day.csv");
        assert!("trace=".parse::<Arrivals>().is_err());
    }

    #[test]
    fn replan_options_travel_as_text() {
        let options: ReplanOptions =
            serde_json::from_value(serde_json::json!({"drain": ["0:3"], "lost": ["1:0"]})).unwrap();
        assert_eq!(options.drain, vec![GpuPosition { node: 0, index: 3 }]);
        assert!(options.is_set() && !ReplanOptions::default().is_set());
        assert_eq!(serde_json::to_value(&options).unwrap()["lost"], serde_json::json!(["1:0"]));
        assert!(serde_json::from_value::<ReplanOptions>(serde_json::json!({"drain": ["3"]})).is_err());
    }
}
