//! Where the live loop's new plans go: a [`DeployTarget`]. A dry run acts
//! on nothing ([`DryRun`]); a plan file is replaced atomically for
//! `tessera deploy` on one node ([`PlanFile`]); a Kubernetes cluster gets
//! tessera-k8s's make-before-break apply, its status checked after, each
//! decision as an Event, and with leader election acts only while this
//! replica holds the Lease ([`KubernetesTarget`]). Another cluster manager
//! (Slurm, Nomad, a node list) is one more implementation of the trait and
//! one more arm where the binary picks the target.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tessera_autopilot::{ActionKind, Controller};
use tessera_core::text::count;
use tessera_core::Plan;
use tessera_k8s::{
    apply_plan, cluster_status, record_decision, running_plan, ApplyOptions, Change, Cluster, DecisionEvent,
    LeaderElector, Leadership, Progress,
};
use tessera_plan::Inventory;
use tessera_store::{plan_json, write_atomic};

use crate::error::LiveError;

/// What became of a new plan.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// It is in place, in words (what was done).
    Applied(String),
    /// Nothing was acted on (a dry run).
    DryRun,
    /// Acting failed: why, and the plan that runs instead, when known.
    Failed {
        /// Why, one line.
        error: String,
        /// What the cluster records as running after the failure.
        running: Option<Box<Plan>>,
    },
}

impl Outcome {
    /// Its name in `tessera_autopilot_transitions_total`.
    pub fn metric_name(&self) -> &'static str {
        match self {
            Outcome::Applied(_) => "applied",
            Outcome::DryRun => "dry-run",
            Outcome::Failed { .. } => "failed",
        }
    }

    /// In words, for the journal.
    pub fn words(&self) -> String {
        match self {
            Outcome::Applied(what) => format!("applied: {what}"),
            Outcome::DryRun => "dry run: nothing done".to_string(),
            Outcome::Failed { error, .. } => format!("failed: {error}"),
        }
    }
}

/// One decision, as a target that keeps decisions records it.
#[derive(Debug, Clone, Copy)]
pub struct DecisionNote<'a> {
    /// When it was made, seconds since the Unix epoch.
    pub time_s: f64,
    /// What it was.
    pub action: ActionKind,
    /// Its reason and what became of it, in words.
    pub note: &'a str,
    /// Whether acting on it failed.
    pub failed: bool,
}

/// Where new plans go, and what the loop needs to know of it.
pub trait DeployTarget {
    /// Where plans go, in words: `new plans written to plan.json`.
    fn describe(&self) -> String;

    /// The GPUs plans must be placed on (a cluster's nodes, as `tessera
    /// plan --cluster` places them); `None`: plans number their own nodes.
    ///
    /// # Errors
    /// The target cannot be read.
    fn placement(&self) -> Result<Option<Inventory>, LiveError> {
        Ok(None)
    }

    /// Whether every service needs a container image to run there.
    fn needs_images(&self) -> bool {
        false
    }

    /// The plan the target records as running; `None` when it records none.
    ///
    /// # Errors
    /// The target cannot be read, in one line.
    fn running(&self) -> Result<Option<Plan>, String> {
        Ok(None)
    }

    /// Puts `plan` in place, reporting each step to `step` as it begins.
    fn apply(&self, plan: &Plan, step: &mut dyn FnMut(&str)) -> Outcome;

    /// Records `decision` where the target keeps decisions (a cluster's
    /// Events); `Some(why)` when it could not.
    fn record(&self, decision: &DecisionNote<'_>) -> Option<String> {
        let _ = decision;
        None
    }

    /// Whether this replica may decide now: always, unless the target
    /// elects a leader. `leading` is what it was at the last decision time
    /// (`None` at the first); each change is said to `note`, and a replica
    /// taking over adopts the plan the target records.
    fn may_decide(&self, leading: &mut Option<bool>, controller: &mut Controller, note: &mut dyn FnMut(&str)) -> bool {
        let _ = (leading, controller, note);
        true
    }

    /// Waits `duration` (a replica under leader election keeps its claim
    /// on the lead meanwhile).
    fn wait(&self, duration: Duration) {
        std::thread::sleep(duration);
    }

    /// A standby replica's pause when no clock paces it (none without
    /// leader election).
    fn stand_by(&self) {}
}

/// Acting on nothing: `--dry-run`.
#[derive(Debug, Clone, Copy, Default)]
pub struct DryRun;

impl DeployTarget for DryRun {
    fn describe(&self) -> String {
        "dry run (acting on nothing)".to_string()
    }

    fn apply(&self, _plan: &Plan, _step: &mut dyn FnMut(&str)) -> Outcome {
        Outcome::DryRun
    }
}

/// A plan file, replaced atomically (for `tessera deploy` on one node).
#[derive(Debug, Clone)]
pub struct PlanFile {
    /// The file.
    pub path: PathBuf,
}

impl DeployTarget for PlanFile {
    fn describe(&self) -> String {
        format!("new plans written to {}", self.path.display())
    }

    fn apply(&self, plan: &Plan, _step: &mut dyn FnMut(&str)) -> Outcome {
        match write_atomic(&self.path, &plan_json(plan)) {
            Ok(()) => Outcome::Applied(format!("wrote {}", self.path.display())),
            Err(error) => Outcome::Failed { error: error.to_string(), running: None },
        }
    }
}

/// A Kubernetes cluster.
pub struct KubernetesTarget {
    /// The connection.
    pub cluster: Cluster,
    /// How to apply.
    pub options: ApplyOptions,
    /// With leader election: this replica's elector, which also fences
    /// the connection's writes.
    pub elector: Option<Arc<LeaderElector>>,
}

impl KubernetesTarget {
    /// This replica's elector, under leader election.
    fn elected(&self) -> Option<&LeaderElector> {
        self.elector.as_deref()
    }
}

impl DeployTarget for KubernetesTarget {
    fn describe(&self) -> String {
        format!("new plans applied to namespace {} of {}", self.options.namespace, self.cluster.context())
    }

    fn placement(&self) -> Result<Option<Inventory>, LiveError> {
        let inventory = self.cluster.inventory().map_err(|error| LiveError::Target(error.to_string()))?;
        Ok(Some(inventory.nodes))
    }

    fn needs_images(&self) -> bool {
        true
    }

    fn running(&self) -> Result<Option<Plan>, String> {
        let like = Plan::from_gpus(Vec::new(), "", "", 1);
        let plan = running_plan(&self.cluster, &self.options.namespace, &like).map_err(|error| error.to_string())?;
        Ok(Some(plan).filter(|plan| !plan.gpus.is_empty()))
    }

    fn apply(&self, plan: &Plan, step: &mut dyn FnMut(&str)) -> Outcome {
        apply(&self.cluster, &self.options, plan, step)
    }

    /// Every decision but a keep is an Event; holds and failed acts are
    /// warnings.
    fn record(&self, decision: &DecisionNote<'_>) -> Option<String> {
        let (reason, done) = match decision.action {
            ActionKind::Keep => return None,
            ActionKind::Hold => ("Hold", "Hold"),
            ActionKind::Start => ("Start", "Reconfigure"),
            ActionKind::ScaleUp => ("ScaleUp", "Reconfigure"),
            ActionKind::ScaleDown => ("ScaleDown", "Reconfigure"),
        };
        let warning = decision.failed || decision.action == ActionKind::Hold;
        let event = DecisionEvent { time_s: decision.time_s, reason, action: done, note: decision.note, warning };
        record_decision(&self.cluster, &self.options.namespace, &event).err().map(|error| error.to_string())
    }

    fn may_decide(&self, leading: &mut Option<bool>, controller: &mut Controller, note: &mut dyn FnMut(&str)) -> bool {
        let Some(elector) = self.elected() else { return true };
        let lease = &elector.options();
        let (now, holder) = match elector.try_lead(&self.cluster) {
            Ok(Leadership::Leading) => (true, String::new()),
            Ok(Leadership::Standby { holder }) => (false, holder),
            Err(error) => (elector.is_leading(), format!("unknown ({error})")),
        };
        if *leading != Some(now) {
            if now {
                note(&format!("leading: {} holds Lease {}/{}", lease.identity, lease.namespace, lease.name));
                // Taking over: from where the last leader left the cluster.
                if *leading == Some(false) {
                    match self.running() {
                        Ok(Some(plan)) => {
                            note(&format!(
                                "taking over from the plan the cluster records ({})",
                                count(plan.gpu_count, "GPU")
                            ));
                            controller.adopt(plan);
                        }
                        Ok(None) => {}
                        Err(error) => note(&format!("the plan the cluster records cannot be read: {error}")),
                    }
                }
            } else {
                note(&format!(
                    "standing by: Lease {}/{} is held by {}",
                    lease.namespace,
                    lease.name,
                    if holder.is_empty() { "another replica" } else { &holder }
                ));
            }
        }
        *leading = Some(now);
        now
    }

    fn wait(&self, duration: Duration) {
        let Some(elector) = self.elected() else { return std::thread::sleep(duration) };
        let until = Instant::now() + duration;
        while let Some(left) = until.checked_duration_since(Instant::now()).filter(|left| !left.is_zero()) {
            std::thread::sleep(left.min(elector.options().retry_period));
            // A failure shows at the next decision.
            let _ = elector.try_lead(&self.cluster);
        }
    }

    fn stand_by(&self) {
        if let Some(elector) = self.elected() {
            self.wait(elector.options().retry_period);
        }
    }
}

/// Applies `plan` to the cluster step by step, then checks that the
/// cluster runs it; on failure, reads back what it runs.
fn apply(cluster: &Cluster, options: &ApplyOptions, plan: &Plan, step: &mut dyn FnMut(&str)) -> Outcome {
    let mut on_progress = |progress: &Progress| {
        if let Progress::Step { number, of, summary } = progress {
            step(&format!("step {number} of {of}: {summary}"));
        }
    };
    let failed = |error: String| {
        let running =
            running_plan(cluster, &options.namespace, plan).ok().filter(|plan| !plan.gpus.is_empty()).map(Box::new);
        Outcome::Failed { error, running }
    };
    let actions = match apply_plan(cluster, plan, options, &mut on_progress) {
        Ok(actions) => actions,
        Err(error) => return failed(format!("the apply stopped: {error}")),
    };
    let changed = actions.iter().filter(|action| action.change != Change::Unchanged).count();
    match cluster_status(cluster, plan, &options.namespace) {
        Ok(status) if status.as_planned() => {
            Outcome::Applied(format!("{changed} of {} objects changed; the cluster runs it", actions.len()))
        }
        Ok(status) => failed(format!("applied, but not as planned: {}", status.differences().join("; "))),
        Err(error) => failed(format!("applied, but its status cannot be read: {error}")),
    }
}
