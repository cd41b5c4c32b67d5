//! How the live loop acts on a new plan: not at all (a dry run), a plan
//! file replaced atomically (for `tessera deploy` on one node), or the
//! Kubernetes cluster through tessera-k8s's make-before-break apply, its
//! status checked after; with leader election, only while this replica
//! holds the Lease.

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
use tessera_store::{plan_json, write_atomic};

use crate::output::note;

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

/// Where new plans go.
pub enum Actuator {
    /// Nowhere: `--dry-run`.
    DryRun,
    /// A plan file, replaced atomically.
    PlanFile(PathBuf),
    /// The cluster.
    Kubernetes {
        /// The connection.
        cluster: Box<Cluster>,
        /// How to apply.
        options: Box<ApplyOptions>,
        /// With leader election: this replica's elector, which also
        /// fences the connection's writes.
        elector: Option<Arc<LeaderElector>>,
    },
}

impl Actuator {
    /// Puts `plan` in place, reporting each step of an apply to `step` as
    /// it begins.
    pub fn act(&self, plan: &Plan, step: &mut dyn FnMut(&str)) -> Outcome {
        match self {
            Actuator::DryRun => Outcome::DryRun,
            Actuator::PlanFile(path) => match write_atomic(path, &plan_json(plan)) {
                Ok(()) => Outcome::Applied(format!("wrote {}", path.display())),
                Err(error) => Outcome::Failed { error: error.to_string(), running: None },
            },
            Actuator::Kubernetes { cluster, options, .. } => apply(cluster, options, plan, step),
        }
    }

    /// Records a decision as a Kubernetes Event (`--apply k8s`; nothing
    /// otherwise): every decision but a keep, holds and failed acts as
    /// warnings. `Some(why)` when it could not be recorded.
    pub fn record(&self, time_s: f64, action: ActionKind, note: &str, failed: bool) -> Option<String> {
        let Actuator::Kubernetes { cluster, options, .. } = self else { return None };
        let (reason, done) = match action {
            ActionKind::Keep => return None,
            ActionKind::Hold => ("Hold", "Hold"),
            ActionKind::Start => ("Start", "Reconfigure"),
            ActionKind::ScaleUp => ("ScaleUp", "Reconfigure"),
            ActionKind::ScaleDown => ("ScaleDown", "Reconfigure"),
        };
        let warning = failed || action == ActionKind::Hold;
        let event = DecisionEvent { time_s, reason, action: done, note, warning };
        record_decision(cluster, &options.namespace, &event).err().map(|error| error.to_string())
    }

    /// The cluster and this replica's elector, under leader election.
    fn elected(&self) -> Option<(&Cluster, &LeaderElector)> {
        match self {
            Actuator::Kubernetes { cluster, elector: Some(elector), .. } => Some((cluster, elector)),
            _ => None,
        }
    }

    /// Waits `duration`; a replica under leader election keeps trying to
    /// take or renew the Lease every retry period meanwhile.
    pub fn wait(&self, duration: Duration) {
        let Some((cluster, elector)) = self.elected() else { return std::thread::sleep(duration) };
        let until = Instant::now() + duration;
        while let Some(left) = until.checked_duration_since(Instant::now()).filter(|left| !left.is_zero()) {
            std::thread::sleep(left.min(elector.options().retry_period));
            // A failure shows at the next decision.
            let _ = elector.try_lead(cluster);
        }
    }

    /// Waits one retry period of the Lease (none without leader
    /// election), trying to take it meanwhile: a standby replica's pause
    /// when no clock paces it.
    pub fn stand_by(&self) {
        if let Some((_, elector)) = self.elected() {
            self.wait(elector.options().retry_period);
        }
    }

    /// Whether this replica may decide now: always, without leader
    /// election; else when it holds the Lease. `leading` is what it was at
    /// the last decision time (`None` at the first): taking the lead after
    /// standing by, it adopts the plan the cluster records (where another
    /// replica left it); each change is noted.
    pub fn may_decide(&self, leading: &mut Option<bool>, controller: &mut Controller) -> bool {
        let Some((cluster, elector)) = self.elected() else { return true };
        let lease = &elector.options();
        let (now, holder) = match elector.try_lead(cluster) {
            Ok(Leadership::Leading) => (true, String::new()),
            Ok(Leadership::Standby { holder }) => (false, holder),
            Err(error) => (elector.is_leading(), format!("unknown ({error})")),
        };
        if *leading != Some(now) {
            if now {
                note(format_args!("leading: {} holds Lease {}/{}", lease.identity, lease.namespace, lease.name));
                // Taking over: from where the last leader left the cluster.
                if *leading == Some(false) {
                    match self.running() {
                        Ok(Some(plan)) => {
                            note(format_args!(
                                "taking over from the plan the cluster records ({})",
                                count(plan.gpu_count, "GPU")
                            ));
                            controller.adopt(plan);
                        }
                        Ok(None) => {}
                        Err(error) => note(format_args!("the plan the cluster records cannot be read: {error}")),
                    }
                }
            } else {
                note(format_args!(
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

    /// The plan the cluster records (`--apply k8s`), `None` when it
    /// records none or this is not a cluster.
    pub fn running(&self) -> Result<Option<Plan>, String> {
        let Actuator::Kubernetes { cluster, options, .. } = self else { return Ok(None) };
        let like = Plan::from_gpus(Vec::new(), "", "", 1);
        let plan = running_plan(cluster, &options.namespace, &like).map_err(|error| error.to_string())?;
        Ok(Some(plan).filter(|plan| !plan.gpus.is_empty()))
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
