//! `tessera autopilot run` and `tessera autopilot journal`: the live loop's
//! rate source, how it acts, and the controller's options it shares with
//! `autopilot simulate`.

use std::path::PathBuf;

use clap::{ArgGroup, Args, ValueEnum};
use tessera_autopilot::{ControllerConfig, ReconfigurationTimes};
use tessera_k8s::DEFAULT_NAMESPACE;
use tessera_plan::PlanOptions;

use super::deploy::DEFAULT_MPS_DIR;
use super::{ClusterArgs, ObjectArgs};
use super::{InputArgs, ListFormat};

/// The default PromQL query of a service's rate, req/s (`{service}` is
/// replaced by the service's name).
pub const DEFAULT_QUERY_TEMPLATE: &str = r#"sum(rate(tessera_requests_total{service="{service}"}[1m]))"#;

/// The default PromQL query of a service's requests counted in each window
/// (`{service}` and `{step}`, the window, are replaced), for its
/// burstiness.
pub const DEFAULT_COUNTS_TEMPLATE: &str = r#"sum(increase(tessera_requests_total{service="{service}"}[{step}]))"#;

/// How the controller plans and decides (`autopilot simulate` and
/// `autopilot run`).
#[derive(Debug, Clone, Args)]
pub struct ControllerArgs {
    /// How every plan and replan is made (`tessera plan`'s options).
    #[command(flatten)]
    pub plan: PlanOptions,

    /// Plans are made for the forecast plus this share (0.15: +15%).
    #[arg(long, value_name = "SHARE", default_value_t = tessera_autopilot::DEFAULT_PLAN_HEADROOM, value_parser = parse_non_negative)]
    pub plan_headroom: f64,

    /// The plan is kept while predicted to meet every SLO at the forecast
    /// plus this share.
    #[arg(long, value_name = "SHARE", default_value_t = tessera_autopilot::DEFAULT_KEEP_HEADROOM, value_parser = parse_non_negative)]
    pub keep_headroom: f64,

    /// A scale-down must release at least this many GPUs.
    #[arg(long, value_name = "K", default_value_t = tessera_autopilot::DEFAULT_SCALE_DOWN_MIN_GPUS, value_parser = clap::value_parser!(u64).range(1..))]
    pub scale_down_gpus: u64,

    /// A scale-down must have been possible for this many minutes (at every
    /// decision where no service falls short) before it is taken, and
    /// leaves a service that fell short this recently its capacity; a
    /// service's spare capacity (above its forecast plus twice the plan
    /// headroom) must have lasted this long before a scale-up takes it
    /// back.
    #[arg(long, value_name = "MIN", default_value_t = tessera_autopilot::DEFAULT_SCALE_DOWN_HOLD_S / 60.0, value_parser = parse_non_negative)]
    pub scale_down_after_min: f64,

    /// Most reconfigurations that stop a running segment started in any
    /// hour; beyond, a scale-up only adds segments (in free slices or on new
    /// GPUs) and anything else holds.
    #[arg(long, value_name = "N", default_value_t = tessera_autopilot::DEFAULT_MAX_RECONFIGURATIONS_PER_HOUR as u64, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_reconfigurations_per_hour: u64,

    /// GPUs a scale-up may add to the running ones to avoid a dip (a
    /// service below its forecast while a step runs) or a long transition;
    /// a scale-down that dips tries draining each of the
    /// this-many-plus-one least used GPUs.
    #[arg(long, value_name = "N", default_value_t = tessera_autopilot::DEFAULT_DIP_EXTRA_GPUS)]
    pub dip_extra_gpus: u64,

    /// A replan whose transition would take longer than this many seconds
    /// gives way to a smaller one (no other decision acts while a
    /// transition runs): a scale-up keeps the running GPUs and adds, a
    /// scale-down releases half as many GPUs, then half again.
    #[arg(long, value_name = "S", default_value_t = tessera_autopilot::DEFAULT_MAX_TRANSITION_S, value_parser = parse_non_negative)]
    pub max_transition_s: f64,

    /// A service whose observed rate ran above its segments' full-batch
    /// throughput has requests queued: it is forecast at its rate plus
    /// what drains them within this many seconds (0: backlogs are not
    /// estimated).
    #[arg(long, value_name = "S", default_value_t = tessera_autopilot::DEFAULT_DRAIN_S, value_parser = parse_non_negative)]
    pub drain_s: f64,

    /// Seconds to stop a GPU's segments.
    #[arg(long, value_name = "S", default_value_t = tessera_autopilot::DEFAULT_STOP_S, value_parser = parse_non_negative)]
    pub stop_s: f64,

    /// Seconds to destroy one MIG instance.
    #[arg(long, value_name = "S", default_value_t = tessera_autopilot::DEFAULT_DESTROY_S, value_parser = parse_non_negative)]
    pub destroy_s: f64,

    /// Seconds to create one MIG instance.
    #[arg(long, value_name = "S", default_value_t = tessera_autopilot::DEFAULT_CREATE_S, value_parser = parse_non_negative)]
    pub create_s: f64,

    /// Seconds from starting a GPU's new segments to their serving (pod
    /// scheduled, container started, model loaded).
    #[arg(long, value_name = "S", default_value_t = tessera_autopilot::DEFAULT_START_S, value_parser = parse_non_negative)]
    pub start_s: f64,
}

impl ControllerArgs {
    /// The controller's configuration (the defaults for what is not an
    /// option).
    pub fn config(&self) -> ControllerConfig {
        ControllerConfig {
            plan_headroom: self.plan_headroom,
            keep_headroom: self.keep_headroom,
            scale_down_min_gpus: self.scale_down_gpus,
            scale_down_hold_s: self.scale_down_after_min * 60.0,
            dip_extra_gpus: self.dip_extra_gpus,
            max_transition_s: self.max_transition_s,
            drain_s: self.drain_s,
            max_reconfigurations_per_hour: usize::try_from(self.max_reconfigurations_per_hour).unwrap_or(usize::MAX),
            reconfiguration: ReconfigurationTimes {
                stop_s: self.stop_s,
                destroy_s: self.destroy_s,
                create_s: self.create_s,
                start_s: self.start_s,
            },
            ..ControllerConfig::default()
        }
    }
}

/// Where a new plan goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ApplyTarget {
    /// The Kubernetes cluster: `tessera k8s apply`'s make-before-break
    /// apply, then its status checked.
    K8s,
    /// A plan file (`--plan-out`), replaced atomically, for `tessera
    /// deploy` on a single node.
    PlanFile,
    /// This node's GPUs (`--node`), changed as `tessera deploy --apply`
    /// changes them; plans are placed on the GPUs the node has.
    Node,
}

/// `tessera autopilot run`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("source").required(true).args(["prometheus", "rates_file"])))]
#[command(group(ArgGroup::new("act").required(true).args(["dry_run", "apply"])))]
pub struct AutopilotRunArgs {
    #[command(flatten)]
    pub inputs: InputArgs,

    #[command(flatten)]
    pub controller: ControllerArgs,

    /// The plan that runs now (JSON). Default: with `--apply k8s` the plan
    /// the cluster records, else none (the first decision plans from
    /// scratch).
    #[arg(long, value_name = "FILE")]
    pub plan: Option<PathBuf>,

    /// Read each service's rate from Prometheus' HTTP API at URL
    /// (`http://HOST:PORT`, with a path prefix if Prometheus has one): one
    /// instant query per service and decision.
    #[arg(long, value_name = "URL")]
    pub prometheus: Option<String>,

    /// The PromQL query of a service's rate in req/s; `{service}` becomes
    /// the service's name. A service whose query answers no series, more
    /// than one, or no number has no rate: the autopilot holds.
    #[arg(long, value_name = "PROMQL", default_value = DEFAULT_QUERY_TEMPLATE, conflicts_with = "rates_file")]
    pub query_template: String,

    /// Seconds a Prometheus query may take before its service counts as
    /// without a rate.
    #[arg(long, value_name = "S", default_value_t = 10.0, value_parser = parse_positive, conflicts_with = "rates_file")]
    pub query_timeout_s: f64,

    /// Estimate each service's burstiness from Prometheus at every decision
    /// and plan the fleet under the burstiest service's arrivals (a renewal
    /// process of that coefficient of variation, never below Poisson; up at
    /// once, down only when it calmed by more than 0.3); each change is said
    /// in the decision's reason. A service with too little data (fewer than
    /// 20 windows, or 20 requests per window) holds the model there is.
    #[arg(long, conflicts_with = "rates_file")]
    pub observe_burstiness: bool,

    /// The PromQL query of a service's requests counted in each window of
    /// --burstiness-step-s; `{service}` becomes the service's name and
    /// `{step}` the window (e.g. `15s`).
    #[arg(long, value_name = "PROMQL", default_value = DEFAULT_COUNTS_TEMPLATE, requires = "observe_burstiness")]
    pub counts_template: String,

    /// Seconds of history each burstiness estimate reads.
    #[arg(long, value_name = "S", default_value_t = 600.0, value_parser = parse_positive, requires = "observe_burstiness")]
    pub burstiness_window_s: f64,

    /// Seconds per counting window (at least Prometheus' scrape interval).
    #[arg(long, value_name = "S", default_value_t = 15.0, value_parser = parse_positive, requires = "observe_burstiness")]
    pub burstiness_step_s: f64,

    /// Replay a traffic CSV (`time_s,service,rate_rps`, as `autopilot
    /// simulate --traffic` reads) instead of Prometheus: at a decision t
    /// seconds after the first, each service's mean rate over the last
    /// --rates-window-s seconds of the file.
    #[arg(long, value_name = "FILE")]
    pub rates_file: Option<PathBuf>,

    /// Seconds of traffic each rate read from --rates-file averages (as a
    /// PromQL `rate(…[window])` does).
    #[arg(long, value_name = "S", default_value_t = 60.0, value_parser = parse_positive, conflicts_with = "prometheus")]
    pub rates_window_s: f64,

    /// With --rates-file: do not wait between decisions; the clock jumps
    /// --interval-s at each (a replay as fast as the controller decides).
    #[arg(long, conflicts_with = "prometheus")]
    pub no_wait: bool,

    /// Seconds between decisions; decisions fall on multiples of it of
    /// the wall clock (every minute on the minute by default). A decision
    /// that overruns skips the ticks it missed and says so.
    #[arg(long, value_name = "S", default_value_t = 60.0, value_parser = parse_positive)]
    pub interval_s: f64,

    /// A rate older than this many seconds is stale: the autopilot holds.
    #[arg(long, value_name = "S", default_value_t = tessera_autopilot::DEFAULT_MAX_SAMPLE_AGE_S, value_parser = parse_non_negative)]
    pub max_sample_age_s: f64,

    /// Stop after N decisions (default: run until interrupted).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_decisions: Option<u64>,

    /// One decision, then exit (--max-decisions 1).
    #[arg(long, conflicts_with = "max_decisions")]
    pub once: bool,

    /// Decide and print, journal the decisions as a dry run, act on
    /// nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// Act on each new plan: `k8s` applies it to the cluster make before
    /// break, step by step, and checks the cluster's status after; a
    /// failed apply or check makes the autopilot adopt what the cluster
    /// records and say so. `plan-file` writes it to --plan-out atomically
    /// (for `tessera deploy`). `node` deploys it on this node's GPUs
    /// (--node) as `tessera deploy --apply` does.
    #[arg(long, value_enum, value_name = "TARGET")]
    pub apply: Option<ApplyTarget>,

    /// The plan file `--apply plan-file` writes (JSON).
    #[arg(long, value_name = "FILE", required_if_eq("apply", "plan-file"))]
    pub plan_out: Option<PathBuf>,

    /// The node `--apply node` changes (the number its plans give it),
    /// its services run by the registered workloads (`tessera workload
    /// add`).
    #[arg(long, value_name = "N", required_if_eq("apply", "node"))]
    pub node: Option<u32>,

    /// Where `--apply node` keeps each instance's MPS pipe and log
    /// directories, process logs and pids file, as `tessera deploy`.
    #[arg(long, value_name = "DIR", default_value = DEFAULT_MPS_DIR)]
    pub mps_dir: PathBuf,

    /// The multi-model server `--apply node` runs on each shared instance
    /// (as `tessera deploy --shared-command`): needed when plans share.
    #[arg(long, value_name = "COMMAND")]
    pub shared_command: Option<String>,

    /// The namespace of the plan's objects (`--apply k8s`).
    #[arg(long, default_value = DEFAULT_NAMESPACE)]
    pub namespace: String,

    /// Seconds `--apply k8s` waits for the nodes' MIG layouts, and for a
    /// step's new segments to be ready.
    #[arg(long, value_name = "SECONDS", default_value_t = 600)]
    pub apply_timeout: u64,

    /// Seconds between `--apply k8s`'s looks at the cluster while it waits
    /// for the layouts and the new segments.
    #[arg(long, value_name = "S", default_value_t = 2.0, value_parser = parse_positive)]
    pub apply_poll_s: f64,

    #[command(flatten)]
    pub objects: ObjectArgs,

    #[command(flatten)]
    pub cluster: ClusterArgs,

    #[command(flatten)]
    pub election: ElectionArgs,

    /// Serve the autopilot's own metrics (Prometheus text) at
    /// http://ADDR/metrics: GPUs in use, observed and forecast rate per
    /// service, decisions by action, holds, the last decision's time,
    /// whether this replica leads; and `ok` at http://ADDR/healthz.
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<std::net::SocketAddr>,

    /// How decisions are printed: a line each, or a JSON object each (JSON
    /// Lines).
    #[arg(long, value_enum, default_value_t = ListFormat::Table)]
    pub format: ListFormat,
}

/// Leader election among replicas of `autopilot run --apply k8s`.
#[derive(Debug, Args)]
pub struct ElectionArgs {
    /// Run as one of several replicas: act only while holding the Lease
    /// --lease-name in --namespace (coordination.k8s.io/v1). The others
    /// stand by, and the first to see the Lease unrenewed for its whole
    /// duration takes over, from the plan the cluster records. Every write
    /// to the cluster is fenced: a replica that can no longer renew writes
    /// nothing more. Needs --apply k8s.
    #[arg(long)]
    pub leader_elect: bool,

    /// The Lease the replicas contend for.
    #[arg(long, value_name = "NAME", default_value = "tessera-autopilot", requires = "leader_elect")]
    pub lease_name: String,

    /// This replica's name in the Lease. Default: $POD_NAME (set it from
    /// the pod's metadata.name), else the host name and process id.
    #[arg(long, value_name = "NAME", requires = "leader_elect")]
    pub identity: Option<String>,

    /// Seconds a Lease not renewed stays with its holder; the holder acts
    /// for at most two thirds of it after each renewal, and renews every
    /// 2/15 of it (client-go's 15, 10 and 2 s).
    #[arg(long, value_name = "S", default_value_t = 15.0, value_parser = parse_positive, requires = "leader_elect")]
    pub lease_duration_s: f64,
}

/// `tessera autopilot journal`.
#[derive(Debug, Args)]
pub struct AutopilotJournalArgs {
    /// Only the last N decisions.
    #[arg(long, value_name = "N")]
    pub last: Option<usize>,

    /// Output format.
    #[arg(long, value_enum, default_value_t = ListFormat::Table)]
    pub format: ListFormat,
}

/// A finite number above 0.
pub(super) fn parse_positive(value: &str) -> Result<f64, String> {
    match value.parse::<f64>() {
        Ok(number) if number.is_finite() && number > 0.0 => Ok(number),
        _ => Err(format!("expected a positive number, got '{value}'")),
    }
}

/// A finite number of 0 or more.
pub(super) fn parse_non_negative(value: &str) -> Result<f64, String> {
    match value.parse::<f64>() {
        Ok(number) if number.is_finite() && number >= 0.0 => Ok(number),
        _ => Err(format!("expected a number of 0 or more, got '{value}'")),
    }
}
