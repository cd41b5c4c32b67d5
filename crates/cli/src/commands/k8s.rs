//! `tessera k8s …` and `tessera agent`: a plan on a Kubernetes cluster.
//! The arguments are defined here (args.rs names them only); every
//! decision is tessera-k8s's.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use rayon::prelude::*;
use tessera_core::text::count;
use tessera_gpu::{plan_node_layouts, NodeDriver};
use tessera_k8s::pods::{DEFAULT_CPU, DEFAULT_MEMORY, DEFAULT_PORT, DEFAULT_PROBE_PATH};
use tessera_k8s::routing::DEFAULT_GATEWAY;
use tessera_k8s::{
    apply_plan, cluster_status, manifests_with, merge_parts, node_file_name, reconcile_node, recorded_parts, run_agent,
    AgentOptions, ApplyOptions, Cluster, ClusterOptions, ExportOptions, GatewayRef, Manifest, Outcome, PlanObjects,
    PlanSource, PodOptions, Progress, Requests, DEFAULT_NAMESPACE,
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
    /// No HTTPRoutes (a cluster without the Gateway API): the Services (one
    /// per service and configuration) are still made, and clients must
    /// weigh them by capacity.
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
    pub fn resolve(&self) -> Result<(Option<GatewayRef>, PodOptions)> {
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
    /// Write a plan's objects: per node its part of the plan for its agent
    /// (a ConfigMap), per segment a ResourceClaim for its MIG device (MPS
    /// shared), a Deployment of `procs` pods and a Service over them; per
    /// service an HTTPRoute weighing its segments by capacity. One
    /// multi-document YAML file per node in DIR (`node-NAME.yaml`) and the
    /// routes in `cluster.yaml`, or one stream with `-o -`. A plan `tessera
    /// verify`'s lattice or fleet checks refuse is refused.
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
    /// Apply a plan by server-side apply (field manager `tessera`), make
    /// before break from the plan the cluster runs: each step starts new
    /// segments and waits until they are ready before the GPUs whose
    /// layout changes are drained (in groups that keep every service at
    /// its demand, or naming the one that must dip), reconfigured by their
    /// agents and restarted; objects of earlier plans are deleted last. A
    /// rerun resumes an interrupted apply.
    Apply {
        /// The plan (JSON).
        #[arg(value_name = "PLAN.json")]
        plan: PathBuf,
        /// Change nothing; print the steps and what would change.
        #[arg(long)]
        dry_run: bool,
        /// Requests in flight at a time when writing objects.
        #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=1024))]
        concurrency: u32,
        /// Take over fields that another field manager owns.
        #[arg(long)]
        force_conflicts: bool,
        /// Seconds to wait for the nodes' MIG layouts, and for a step's new
        /// segments to be ready.
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
        /// The plan (JSON); default: the one the cluster records (the nodes'
        /// parts).
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
    /// A plan file instead of this node's ConfigMap (`tessera-node-NAME`,
    /// or `tessera-node-nN` for a node labelled `tessera.io/node=N`), which
    /// the agent reads through the API.
    #[arg(long, value_name = "FILE")]
    pub plan: Option<PathBuf>,
    /// The namespace of the plan's objects (its node's ConfigMap).
    #[arg(long, default_value = DEFAULT_NAMESPACE)]
    pub namespace: String,
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
    /// cluster (the node is found by name among the plan's node names);
    /// needs --plan.
    #[arg(long, conflicts_with_all = ["once", "force"], requires = "plan")]
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
        K8sCommand::Apply { plan, dry_run, concurrency, force_conflicts, timeout, namespace, objects, cluster } => {
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
                concurrency: concurrency as usize,
            };
            let cluster = cluster.connect()?;
            let mut printed = Ok(());
            let prefix = if dry_run { "(dry run) " } else { "" };
            let actions = apply_plan(&cluster, &plan, &options, &mut |progress| {
                if printed.is_ok() {
                    printed = match progress {
                        Progress::Step { number, of, summary } => outln!("{prefix}step {number} of {of}: {summary}"),
                        Progress::Action(action) if action.change != tessera_k8s::Change::Unchanged => {
                            outln!("{prefix}{action}")
                        }
                        Progress::Action(_) => Ok(()),
                    };
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
    let no_devices = BTreeMap::new();
    let made = PlanObjects::new(&plan, options, &no_devices)?;
    for line in &made.notes {
        note(format_args!("{line}"));
    }
    if output == Path::new("-") {
        let exported = manifests_with(&plan, options, &no_devices)?;
        return crate::output::emit(exported.yaml_stream().as_bytes(), None);
    }
    std::fs::create_dir_all(output).with_context(|| format!("cannot create {}", output.display()))?;
    // Generated output, rewritten whole by the next export: one file per
    // node, made and written node by node on every core (a fleet's objects
    // are never all in memory), plainly (no sync per file).
    let numbers: Vec<u32> = made.nodes.keys().copied().collect();
    let written: Vec<usize> = numbers
        .par_iter()
        .map(|number| -> Result<usize> {
            let objects = made.node_objects(*number)?;
            let path = output.join(node_file_name(&made.nodes[number]));
            std::fs::write(&path, Manifest::yaml_documents(&objects))
                .with_context(|| format!("cannot write {}", path.display()))?;
            Ok(objects.len())
        })
        .collect::<Result<_>>()?;
    // The objects of no one node: the Services and the services' routes.
    let routing = made.routing_objects();
    if !routing.is_empty() {
        let path = output.join("cluster.yaml");
        std::fs::write(&path, Manifest::yaml_documents(&routing))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    let files = written.len() + usize::from(!routing.is_empty());
    outln!(
        "wrote {} in {} to {}",
        count(written.iter().sum::<usize>() + routing.len(), "manifest"),
        count(files, "file"),
        output.display()
    )
}

fn status(plan: Option<&Path>, namespace: &str, cluster: &Cluster) -> Result<()> {
    let plan = match plan {
        Some(path) => tessera_store::read_plan_file(path, None)?,
        None => match merge_parts(&recorded_parts(cluster, namespace)?) {
            Some(plan) => plan,
            None => {
                bail!("no plan applied in namespace {namespace} (no node's ConfigMap tessera-node-…); pass PLAN.json")
            }
        },
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
    if let (true, Some(path)) = (args.dry_run, &args.plan) {
        let plan = tessera_store::read_plan_file(path, None)?;
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
        plan: match args.plan {
            Some(path) => PlanSource::File(path),
            None => PlanSource::Cluster { namespace: args.namespace },
        },
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
