//! `tessera k8s …` and `tessera agent`: where the cluster is, how the
//! objects route traffic and what their pods get.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use tessera_k8s::pods::{DEFAULT_CPU, DEFAULT_MEMORY, DEFAULT_PORT, DEFAULT_PROBE_PATH};
use tessera_k8s::routing::DEFAULT_GATEWAY;
use tessera_k8s::{Cluster, ClusterOptions, GatewayRef, PodOptions, Requests, DEFAULT_NAMESPACE};

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
    /// routes in `cluster.yaml`, or one stream with `-o -`. In a folder
    /// also each service's SLO recording rules and burn-rate alerts, in
    /// `monitoring/`: `slo-rules.yml` for Prometheus' `rule_files` and
    /// `prometheus-rule.yaml` (a PrometheusRule, where the Prometheus
    /// Operator runs; `kubectl apply -f DIR` leaves the subfolder alone). A
    /// plan `tessera verify`'s lattice or fleet checks refuse is refused.
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
