//! `tessera k8s …` and `tessera agent`: a plan on a Kubernetes cluster.
//! The arguments are defined here (args.rs names them only); every
//! decision is tessera-k8s's.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use tessera_core::text::count;
use tessera_gpu::{plan_node_layouts, NodeDriver};
use tessera_k8s::pods::{DEFAULT_CPU, DEFAULT_MEMORY, DEFAULT_PORT, DEFAULT_PROBE_PATH};
use tessera_k8s::routing::DEFAULT_GATEWAY;
use tessera_k8s::{
    apply_plan, cluster_status, manifests_with, reconcile_node, run_agent, AgentOptions, ApplyOptions, Cluster,
    ClusterOptions, ExportOptions, GatewayRef, Kind, Outcome, PodOptions, Requests, DEFAULT_NAMESPACE, PLAN_CONFIG_MAP,
    PLAN_KEY,
};

use crate::output::{note, outln};

/// Where the cluster is.
#[derive(Debug, Clone, Args)]
pub struct ClusterArgs {
    /// The kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, else
    /// the pod's service account).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context (default: its current context).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
}

impl ClusterArgs {
    /// Connects.
    pub fn connect(&self) -> Result<Cluster> {
        Ok(Cluster::connect(&ClusterOptions { kubeconfig: self.kubeconfig.clone(), context: self.context.clone() })?)
    }
}

/// How the objects route traffic and what the pods get (`k8s export` and
/// `k8s apply`).
#[derive(Debug, Clone, Args)]
pub struct ObjectArgs {
    /// The Gateway every service's HTTPRoute attaches to:
    /// `NAMESPACE/NAME[:SECTION]`, or `NAME[:SECTION]` in the objects'
    /// namespace.
    #[arg(long, value_name = "NAMESPACE/NAME[:SECTION]", default_value = DEFAULT_GATEWAY)]
    pub gateway: String,
    /// No HTTPRoutes (a cluster without the Gateway API): each segment's
    /// Service is still made, and clients must weigh them by capacity.
    #[arg(long, conflicts_with = "gateway")]
    pub no_routes: bool,
    /// CPU each pod requests (a Kubernetes quantity).
    #[arg(long, value_name = "QUANTITY", default_value = DEFAULT_CPU)]
    pub cpu: String,
    /// Memory each pod requests, also its limit (a Kubernetes quantity).
    #[arg(long, value_name = "QUANTITY", default_value = DEFAULT_MEMORY)]
    pub memory: String,
    /// One service's requests instead (repeatable), by its name in the
    /// plan: SERVICE=CPU,MEMORY, e.g. `chat-assist=4,16Gi`.
    #[arg(long = "requests", value_name = "SERVICE=CPU,MEMORY")]
    pub service_requests: Vec<String>,
    /// The port the serving container listens on (the Service's target and
    /// the probes' port).
    #[arg(long, value_name = "PORT", default_value_t = DEFAULT_PORT)]
    pub port: i32,
    /// The HTTP path of the readiness, liveness and startup probes.
    #[arg(long, value_name = "PATH", default_value = DEFAULT_PROBE_PATH)]
    pub probe_path: String,
}

impl ObjectArgs {
    /// The routes' Gateway (`None`: no routes) and the pods' options.
    fn resolve(&self) -> Result<(Option<GatewayRef>, PodOptions)> {
        let routes = if self.no_routes { None } else { Some(self.gateway.parse::<GatewayRef>()?) };
        let requests = Requests::parse(&format!("{},{}", self.cpu, self.memory))?;
        let mut service_requests = BTreeMap::new();
        for entry in &self.service_requests {
            let Some((service, value)) = entry.split_once('=') else {
                bail!("--requests '{entry}': expected SERVICE=CPU,MEMORY");
            };
            service_requests.insert(service.to_string(), Requests::parse(value)?);
        }
        if !(1..=65535).contains(&self.port) {
            bail!("--port {}: a port is 1 to 65535", self.port);
        }
        if !self.probe_path.starts_with('/') {
            bail!("--probe-path '{}': a path starts with '/'", self.probe_path);
        }
        let pods = PodOptions { requests, service_requests, port: self.port, probe_path: self.probe_path.clone() };
        Ok((routes, pods))
    }
}

/// `tessera k8s …`.
#[derive(Debug, Subcommand)]
pub enum K8sCommand {
    /// The cluster's GPU nodes (GPU Feature Discovery's labels) and the
    /// MIG devices the DRA driver publishes.
    Inventory {
        #[command(flatten)]
        cluster: ClusterArgs,
    },
    /// Write a plan's objects: the plan for the node agents (ConfigMap),
    /// per segment a ResourceClaim for its MIG device (MPS shared), a
    /// Deployment of `procs` pods and a Service over them, per service an
    /// HTTPRoute weighing its segments by capacity; one YAML file per
    /// object in DIR, or one stream with `-o -`. A plan `tessera verify`'s
    /// lattice or fleet checks refuse is refused.
    Export {
        /// The plan (JSON).
        #[arg(value_name = "PLAN.json")]
        plan: PathBuf,
        /// A folder (created if needed), or `-` for standard output.
        #[arg(long, short, value_name = "DIR|-")]
        output: PathBuf,
        /// The namespace of the objects.
        #[arg(long, default_value = DEFAULT_NAMESPACE)]
        namespace: String,
        #[command(flatten)]
        objects: ObjectArgs,
    },
    /// Apply a plan by server-side apply (field manager `tessera`): the
    /// plan for the agents, then (once every node reports its layout) the
    /// claims and Deployments; objects of earlier plans are deleted.
    Apply {
        /// The plan (JSON).
        #[arg(value_name = "PLAN.json")]
        plan: PathBuf,
        /// Change nothing; print what would change.
        #[arg(long)]
        dry_run: bool,
        /// Take over fields that another field manager owns.
        #[arg(long)]
        force_conflicts: bool,
        /// Seconds to wait for the nodes' MIG layouts.
        #[arg(long, value_name = "SECONDS", default_value_t = 600)]
        timeout: u64,
        /// The namespace of the objects.
        #[arg(long, default_value = DEFAULT_NAMESPACE)]
        namespace: String,
        #[command(flatten)]
        objects: ObjectArgs,
        #[command(flatten)]
        cluster: ClusterArgs,
    },
    /// Per node and per service, planned against running: layout state,
    /// pods ready, restarts (exit status 1 when not as planned).
    Status {
        /// The plan (JSON); default: the one applied (its ConfigMap).
        #[arg(value_name = "PLAN.json")]
        plan: Option<PathBuf>,
        /// The namespace of the objects.
        #[arg(long, default_value = DEFAULT_NAMESPACE)]
        namespace: String,
        #[command(flatten)]
        cluster: ClusterArgs,
    },
}

/// `tessera agent`.
#[derive(Debug, Args)]
pub struct AgentArgs {
    /// This node's name (the DaemonSet passes the pod's spec.nodeName).
    #[arg(long)]
    pub node: String,
    /// The plan (the tessera-plan ConfigMap, mounted).
    #[arg(long, value_name = "FILE", default_value = "/etc/tessera/plan.json")]
    pub plan: PathBuf,
    /// Change the layout of GPUs that run processes.
    #[arg(long)]
    pub force: bool,
    /// The DRA driver's namespace.
    #[arg(long, default_value = "dra-driver-nvidia-gpu")]
    pub dra_namespace: String,
    /// The label selector of the DRA driver's kubelet plugin pods.
    #[arg(long, default_value = "dra-driver-nvidia-gpu-component=kubelet-plugin")]
    pub dra_plugin_selector: String,
    /// Seconds to wait for the DRA driver's ResourceSlices after restarting
    /// its plugin.
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    pub slices_timeout: u64,
    /// Seconds between passes.
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    pub interval: u64,
    /// One pass, then exit (status 1 unless the node is as planned).
    #[arg(long)]
    pub once: bool,
    /// Print the MIG layout steps this node needs and exit: no change, no
    /// cluster (the node is found by name among the plan's node names).
    #[arg(long, conflicts_with_all = ["once", "force"])]
    pub dry_run: bool,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

/// Runs `tessera k8s …`.
pub fn run(command: K8sCommand) -> Result<()> {
    match command {
        K8sCommand::Inventory { cluster } => inventory(&cluster.connect()?),
        K8sCommand::Export { plan, output, namespace, objects } => {
            let (routes, pods) = objects.resolve()?;
            export(&plan, &output, &ExportOptions { namespace, routes, pods })
        }
        K8sCommand::Apply { plan, dry_run, force_conflicts, timeout, namespace, objects, cluster } => {
            let plan = crate::inputs::read_sound_plan(&plan)?;
            let (routes, pods) = objects.resolve()?;
            let options = ApplyOptions {
                routes,
                pods,
                namespace,
                dry_run,
                force_conflicts,
                layout_timeout: Duration::from_secs(timeout),
                poll: Duration::from_secs(2),
            };
            let cluster = cluster.connect()?;
            let mut printed = Ok(());
            let actions = apply_plan(&cluster, &plan, &options, &mut |action| {
                if printed.is_ok() {
                    printed = outln!("{}{action}", if dry_run { "(dry run) " } else { "" });
                }
            })?;
            printed?;
            let changed = actions.iter().filter(|a| a.change != tessera_k8s::Change::Unchanged).count();
            note(format_args!(
                "{} of {} changed{}",
                changed,
                count(actions.len(), "object"),
                if dry_run { " (dry run: nothing written)" } else { "" }
            ));
            Ok(())
        }
        K8sCommand::Status { plan, namespace, cluster } => status(plan.as_deref(), &namespace, &cluster.connect()?),
    }
}

fn inventory(cluster: &Cluster) -> Result<()> {
    let found = cluster.inventory()?;
    for line in &found.nodes.left_out {
        note(format_args!("{line}"));
    }
    if found.nodes.nodes.is_empty() {
        bail!("no GPU node with a GPU model Tessera knows in the cluster ({})", cluster.context());
    }
    for node in &found.nodes.nodes {
        let devices = found.mig_devices.get(&node.name).map_or(0, Vec::len);
        outln!(
            "{}  {} × {}  {}  {}",
            node.name,
            node.gpu_count,
            node.gpu_model,
            if node.mig_capable { "MIG-capable" } else { "no MIG" },
            count(devices, "MIG device")
        )?;
    }
    let fleet: Vec<String> = found.nodes.fleet().iter().map(|(model, n)| format!("{model}:count={n}")).collect();
    outln!("fleet: {}", if fleet.is_empty() { "none".to_string() } else { fleet.join(" ") })
}

fn export(plan: &Path, output: &Path, options: &ExportOptions) -> Result<()> {
    let plan = crate::inputs::read_sound_plan(plan)?;
    let exported = manifests_with(&plan, options, &BTreeMap::new())?;
    for line in &exported.notes {
        note(format_args!("{line}"));
    }
    if output == Path::new("-") {
        return crate::output::emit(exported.yaml_stream().as_bytes(), None);
    }
    std::fs::create_dir_all(output).with_context(|| format!("cannot create {}", output.display()))?;
    for (name, yaml) in exported.files() {
        tessera_store::write_atomic(&output.join(name), yaml.as_bytes())?;
    }
    outln!("wrote {} to {}", count(exported.objects.len(), "manifest"), output.display())
}

fn status(plan: Option<&Path>, namespace: &str, cluster: &Cluster) -> Result<()> {
    let plan = match plan {
        Some(path) => tessera_store::read_plan_file(path, None)?,
        None => {
            let config_map = cluster.get(Kind::ConfigMap, Some(namespace), PLAN_CONFIG_MAP)?;
            let Some(json) = config_map.as_ref().and_then(|c| c["data"][PLAN_KEY].as_str()) else {
                bail!("no plan applied in namespace {namespace} (no ConfigMap {PLAN_CONFIG_MAP}); pass PLAN.json");
            };
            let source = format!("ConfigMap {namespace}/{PLAN_CONFIG_MAP}");
            tessera_store::parse_plan(&source, json.as_bytes())?
        }
    };
    let status = cluster_status(cluster, &plan, namespace)?;
    outln!("plan {}", status.plan_id)?;
    for node in &status.nodes {
        let state = match (node.current, node.state.as_deref()) {
            (_, None) => "not reported",
            (false, Some(_)) => "of another plan",
            (true, Some(state)) => state,
        };
        let reason = node.reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default();
        outln!("{}  layout {state}{reason}", node.node)?;
    }
    for segment in &status.segments {
        outln!(
            "{}  {}  {}/{} ready  {}",
            segment.service,
            segment.deployment,
            segment.ready,
            segment.planned,
            count(segment.restarts as usize, "restart")
        )?;
    }
    let differences = status.differences();
    if !differences.is_empty() {
        bail!("not as planned: {}", differences.join("; "));
    }
    outln!("everything runs as planned")
}

/// Runs `tessera agent`.
pub fn agent(args: AgentArgs) -> Result<()> {
    let mut driver = NodeDriver::default();
    if args.dry_run {
        let plan = tessera_store::read_plan_file(&args.plan, None)?;
        let given = args.node.parse().ok();
        let Some(number) = tessera_plan::node_number(&plan, &args.node, given) else {
            bail!("node '{}' is not among the plan's node names, nor a node number", args.node);
        };
        let layouts = plan_node_layouts(&mut driver, &plan, number)?;
        for gpu in &layouts.gpus {
            let lines = gpu.lines();
            outln!(
                "# GPU {}: {}",
                gpu.gpu(),
                if lines.is_empty() { "MIG layout as planned".to_string() } else { count(lines.len(), "step") }
            )?;
            for line in lines {
                outln!("{line}")?;
            }
        }
        return Ok(());
    }
    let cluster = args.cluster.connect()?;
    let options = AgentOptions {
        node: args.node,
        plan_path: args.plan,
        force: args.force,
        dra_namespace: args.dra_namespace,
        dra_plugin_selector: args.dra_plugin_selector,
        slices_timeout: Duration::from_secs(args.slices_timeout),
    };
    let mut print = |line: String| {
        let _ = outln!("{line}");
    };
    if args.once {
        return match reconcile_node(&cluster, &mut driver, &options, &mut print)? {
            Outcome::Success => outln!("success"),
            Outcome::Idle(why) => outln!("idle: {why}"),
            Outcome::Pending(why) => bail!("pending: {why}"),
            Outcome::Failed(why) => bail!("failed: {why}"),
        };
    }
    run_agent(&cluster, &mut driver, &options, Duration::from_secs(args.interval), &mut print)
}
