//! This node's GPUs as a deploy target: each new plan's GPUs of the node
//! laid out and started as `tessera deploy --apply` does it (tessera-gpu's
//! node operations: MIG instances at their planned places, an MPS daemon
//! per instance, the registered workloads' processes), over whatever
//! drives the node ([`NodeDriver`] on a real one, the fakes in tests).

use std::cell::RefCell;

use tessera_core::Plan;
use tessera_gpu::{
    apply_node, installed_gpu, plan_node, CommandRunner, DetachedLauncher, Event, GpuError, MigDevices, NodeDriver,
    NodeOptions, ServiceCommands, ServiceLauncher,
};
use tessera_plan::{Inventory, TargetNode};
use tessera_store::RegisteredWorkload;

use crate::error::LiveError;
use crate::target::{DeployTarget, Outcome};

/// The most GPUs a node is asked about.
const MAX_GPUS_PER_NODE: u32 = 64;

/// One node's GPUs, changed in place.
pub struct NodeTarget<N = NodeDriver, L = DetachedLauncher> {
    options: NodeOptions,
    registered: Vec<RegisteredWorkload>,
    shared_command: Option<String>,
    force: bool,
    /// The driver and the launcher: each apply needs them mutably.
    parts: RefCell<(N, L)>,
}

impl NodeTarget {
    /// Node `options.node` of the real machine, its services' commands
    /// from `registered`, its shared instances' server `shared_command`;
    /// with `force`, GPUs are changed even while compute processes run.
    pub fn on_this_machine(
        options: NodeOptions,
        registered: Vec<RegisteredWorkload>,
        shared_command: Option<String>,
        force: bool,
    ) -> NodeTarget {
        NodeTarget::with(options, registered, shared_command, force, NodeDriver::default(), DetachedLauncher::default())
    }
}

impl<N: CommandRunner + MigDevices, L: ServiceLauncher> NodeTarget<N, L> {
    /// As [`NodeTarget::on_this_machine`], over `driver` and `launcher`.
    pub fn with(
        options: NodeOptions,
        registered: Vec<RegisteredWorkload>,
        shared_command: Option<String>,
        force: bool,
        driver: N,
        launcher: L,
    ) -> NodeTarget<N, L> {
        NodeTarget { options, registered, shared_command, force, parts: RefCell::new((driver, launcher)) }
    }

    /// The driver and the launcher, e.g. to see what they ran.
    pub fn into_parts(self) -> (N, L) {
        self.parts.into_inner()
    }
}

impl<N: CommandRunner + MigDevices, L: ServiceLauncher> DeployTarget for NodeTarget<N, L> {
    fn describe(&self) -> String {
        format!(
            "new plans deployed on node {} (MPS state under {})",
            self.options.node,
            self.options.mps_root.display()
        )
    }

    /// The node's GPUs of the model of its GPU 0 (as `nvidia-smi` names
    /// them), numbered as the node: plans fit the node and all of them is
    /// deployed.
    fn placement(&self) -> Result<Option<Inventory>, LiveError> {
        let driver = &mut self.parts.borrow_mut().0;
        let mut gpus = Vec::new();
        for index in 0..MAX_GPUS_PER_NODE {
            match installed_gpu(driver, index) {
                Ok(gpu) => gpus.push(gpu),
                Err(GpuError::PlanGpu { .. }) if index > 0 => break,
                Err(error) => return Err(LiveError::Target(format!("node {}: {error}", self.options.node))),
            }
        }
        let first = &gpus[0];
        let same: Vec<_> = gpus.iter().filter(|gpu| gpu.gpu_model == first.gpu_model).collect();
        let node = TargetNode {
            name: format!("node-{}", self.options.node),
            product: first.name.clone(),
            gpu_model: first.gpu_model,
            gpu_count: same.len() as u32,
            mig_capable: same.iter().all(|gpu| gpu.mig_enabled),
            node_number: Some(self.options.node),
        };
        Ok(Some(Inventory { nodes: vec![node], left_out: Vec::new() }))
    }

    fn apply(&self, plan: &Plan, step: &mut dyn FnMut(&str)) -> Outcome {
        let commands = ServiceCommands::resolve(plan, self.options.node, &self.registered)
            .with_shared_server(self.shared_command.clone());
        let parts = &mut *self.parts.borrow_mut();
        let (driver, launcher) = (&mut parts.0, &mut parts.1);
        let failed = |error: GpuError| Outcome::Failed { error: error.to_string(), running: None };
        let node_plan = match plan_node(driver, launcher, plan, &commands, &self.options) {
            Ok(node_plan) => node_plan,
            Err(error) => return failed(error),
        };
        let mut steps = 0usize;
        let applied = apply_node(driver, launcher, &node_plan, self.force, &mut |event: Event| {
            steps += 1;
            step(&event.to_string());
        });
        match applied {
            Ok(()) => Outcome::Applied(format!(
                "node {}: {} as planned in {steps} steps",
                self.options.node,
                tessera_core::text::count(node_plan.gpus.len(), "GPU")
            )),
            Err(error) => failed(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use tessera_core::GpuModel;
    use tessera_gpu::{FakeNvidiaSmi, FakeServiceLauncher};
    use tessera_store::WorkloadTask;

    use super::*;

    /// Node 0's GPU 0, an A100-80GB: `3g.40gb@4` (bert-base, batch 8, two
    /// processes) and `1g.10gb@0` (gpt2, batch 1, one process).
    fn plan() -> Plan {
        serde_json::from_str(include_str!("../tests/fixtures/two-instances.json")).unwrap()
    }

    fn workload(family: &str, batch: u32) -> RegisteredWorkload {
        RegisteredWorkload {
            name: format!("{family}-b{batch}"),
            family: family.to_string(),
            task: WorkloadTask::Inference,
            batch,
            command: "python serve.py --batch {batch}".to_string(),
            throughput_regex: None,
        }
    }

    fn target(registered: Vec<RegisteredWorkload>) -> NodeTarget<FakeNvidiaSmi, FakeServiceLauncher> {
        let options = NodeOptions { node: 0, mps_root: PathBuf::from("/tmp/mps"), assume_empty_without_driver: false };
        let driver = FakeNvidiaSmi::new().with_gpu(0, GpuModel::A100_80GB);
        NodeTarget::with(options, registered, None, false, driver, FakeServiceLauncher::new())
    }

    #[test]
    fn a_new_plan_is_laid_out_and_started_on_the_node() {
        let target = target(vec![workload("bert-base", 8), workload("gpt2", 1)]);
        let mut steps = Vec::new();
        let outcome = target.apply(&plan(), &mut |step| steps.push(step.to_string()));
        assert!(
            matches!(&outcome, Outcome::Applied(words) if words.starts_with("node 0: 1 GPU as planned")),
            "{outcome:?}"
        );
        let (driver, launcher) = target.into_parts();
        // Two instances at their planned places, and the three processes.
        let created: Vec<&String> = driver.log.iter().filter(|line| line.contains("-cgi")).collect();
        assert_eq!(created.len(), 2, "{:?}", driver.log);
        assert_eq!(launcher.running().len(), 3, "{steps:?}");
        assert!(!steps.is_empty());
    }

    #[test]
    fn plans_are_placed_on_the_nodes_gpus() {
        let options = NodeOptions { node: 3, mps_root: PathBuf::from("/tmp/mps"), assume_empty_without_driver: false };
        let driver = FakeNvidiaSmi::new().with_gpu(0, GpuModel::H100_80GB).with_gpu(1, GpuModel::H100_80GB);
        let target = NodeTarget::with(options, Vec::new(), None, false, driver, FakeServiceLauncher::new());
        let inventory = target.placement().unwrap().unwrap();
        let node = &inventory.nodes[0];
        assert_eq!((node.gpu_model, node.gpu_count, node.node_number), (GpuModel::H100_80GB, 2, Some(3)));
        assert!(node.mig_capable);
        let no_gpu = target_without_gpus().placement().unwrap_err().to_string();
        assert!(no_gpu.starts_with("the deploy target: node 0: "), "{no_gpu}");
    }

    fn target_without_gpus() -> NodeTarget<FakeNvidiaSmi, FakeServiceLauncher> {
        let options = NodeOptions { node: 0, mps_root: PathBuf::from("/tmp/mps"), assume_empty_without_driver: false };
        NodeTarget::with(options, Vec::new(), None, false, FakeNvidiaSmi::new(), FakeServiceLauncher::new())
    }

    #[test]
    fn a_plan_whose_model_has_no_workload_fails_naming_it_and_changes_nothing() {
        let target = target(vec![workload("bert-base", 8)]);
        let outcome = target.apply(&plan(), &mut |_| {});
        let Outcome::Failed { error, running: None } = &outcome else { panic!("{outcome:?}") };
        assert!(error.contains("gpt2"), "{error}");
        let (driver, launcher) = target.into_parts();
        assert!(!driver.log.iter().any(|line| line.contains("-cgi")), "{:?}", driver.log);
        assert!(launcher.running().is_empty());
    }
}
