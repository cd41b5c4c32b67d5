//! `tessera deploy`: a plan on this node's GPUs, and its status.

use std::path::PathBuf;

use clap::{Args, Subcommand};

/// `tessera deploy`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct DeployArgs {
    #[command(subcommand)]
    pub command: Option<DeployCommand>,

    /// The plan (JSON, as written by `tessera plan --format json`).
    #[arg(value_name = "PLAN.json", required = true)]
    pub plan: Option<PathBuf>,

    /// The node whose GPUs to change (the plan's `node` field).
    #[arg(long, required = true)]
    pub node: Option<u32>,

    /// Run the commands (default: only print them): change each GPU's MIG
    /// layout, then start one MPS control daemon per instance and the
    /// registered workload's processes there, detached (they keep running
    /// after tessera exits). Instances already running as planned are left
    /// alone; services of an earlier deployment on a GPU whose layout
    /// changes are stopped first. Every action is journaled in the store.
    #[arg(long)]
    pub apply: bool,

    /// Only print the commands (the default).
    #[arg(long, conflicts_with = "apply")]
    pub dry_run: bool,

    /// Change GPUs even when compute processes run on them (the driver
    /// still refuses to destroy an instance in use).
    #[arg(long, requires = "apply")]
    pub force: bool,

    /// Where each instance's MPS pipe and log directories, process logs
    /// and pids file go (`DIR/gpu<G>-<PROFILE>-<START>/`).
    #[arg(long, value_name = "DIR", default_value = DEFAULT_MPS_DIR)]
    pub mps_dir: PathBuf,

    /// The multi-model server every shared instance runs: one process per
    /// instance (under its MPS daemon), with `TESSERA_SHARING` (the
    /// discipline) and `TESSERA_MEMBERS` (JSON: each member's `service`,
    /// `model` and `batch`) in its environment. Needed by `--apply` when
    /// the plan has shared instances on the node.
    #[arg(long, value_name = "COMMAND")]
    pub shared_command: Option<String>,
}

/// Where deploy keeps the MPS state of instances unless told otherwise.
pub const DEFAULT_MPS_DIR: &str = "/tmp/tessera-mps";

/// `tessera deploy …` subcommands.
#[derive(Debug, Subcommand)]
pub enum DeployCommand {
    /// Compare the node's GPUs with the plan: the installed models, the
    /// live MIG layouts, and whether each instance's MPS daemon and
    /// processes (started by `deploy --apply`) run.
    Status {
        /// The plan (JSON).
        #[arg(value_name = "PLAN.json")]
        plan: PathBuf,
        /// The node.
        #[arg(long)]
        node: u32,
        /// Where `deploy --apply` kept the instances' MPS state.
        #[arg(long, value_name = "DIR", default_value = DEFAULT_MPS_DIR)]
        mps_dir: PathBuf,
        /// The multi-model server the shared instances were deployed with.
        #[arg(long, value_name = "COMMAND")]
        shared_command: Option<String>,
    },
}
