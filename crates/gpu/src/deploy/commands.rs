//! Which command serves each (model, batch) of a plan: resolved from the
//! registered workloads before a deployment is planned, and passed in as
//! data; and the multi-model server every shared instance runs.

use std::collections::BTreeMap;

use tessera_core::{Plan, SharedInstance};
use tessera_store::{RegisteredWorkload, WorkloadTask};

use crate::runner::shell_word;

/// The registered workload serving `model` at `batch`: of its family and
/// batch, an inference workload before a training one, else the first in
/// `registered`'s order (the store lists them by name).
pub fn workload_for<'a>(
    registered: &'a [RegisteredWorkload],
    model: &str,
    batch: u32,
) -> Option<&'a RegisteredWorkload> {
    registered
        .iter()
        .filter(|w| w.family == model && w.batch == batch)
        .min_by_key(|w| w.task != WorkloadTask::Inference)
}

/// The command line serving each (model, batch) a plan's node needs, and
/// the multi-model server its shared instances run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceCommands {
    commands: BTreeMap<(String, u32), String>,
    shared: Option<String>,
}

impl ServiceCommands {
    /// The commands of the registered workloads serving the instances of
    /// `plan` on `node` (see [`workload_for`]); pairs without one are left
    /// out.
    pub fn resolve(plan: &Plan, node: u32, registered: &[RegisteredWorkload]) -> Self {
        let commands = plan
            .gpus
            .iter()
            .filter(|gpu| gpu.node == node)
            .flat_map(|gpu| &gpu.instances)
            .filter_map(|i| {
                let workload = workload_for(registered, &i.model, i.batch)?;
                Some(((i.model.clone(), i.batch), workload.command_line()))
            })
            .collect();
        Self { commands, shared: None }
    }

    /// Commands given directly, by (model, batch).
    pub fn new(commands: impl IntoIterator<Item = ((String, u32), String)>) -> Self {
        Self { commands: commands.into_iter().collect(), shared: None }
    }

    /// The same commands, with `server` the command line of the
    /// multi-model server each shared instance runs (one process, told its
    /// members as [`SharedInstance::server_env`] says).
    pub fn with_shared_server(self, server: Option<String>) -> Self {
        Self { shared: server, ..self }
    }

    /// The multi-model server's command line, if one was given.
    pub fn shared_server(&self) -> Option<&str> {
        self.shared.as_deref()
    }

    /// The command line of `shared`'s one process: the multi-model server
    /// with the instance's members in its environment (so the recorded
    /// command changes when they do), or a placeholder saying that no
    /// server was given (shown by a dry run; an apply refuses it).
    pub(crate) fn shared_command_for(&self, shared: &SharedInstance) -> String {
        let server = self.shared.as_deref().unwrap_or("<command of a multi-model server for shared instances>");
        let env: Vec<String> =
            shared.server_env().iter().map(|(key, value)| format!("{key}={}", shell_word(value))).collect();
        format!("{} {server}", env.join(" "))
    }

    /// The command serving `model` at `batch`, if any.
    pub fn get(&self, model: &str, batch: u32) -> Option<&str> {
        self.commands.get(&(model.to_string(), batch)).map(String::as_str)
    }

    /// The command serving `model` at `batch`, or a placeholder saying that
    /// none is known (shown by a dry run; an apply refuses it).
    pub(crate) fn command_for(&self, model: &str, batch: u32) -> String {
        self.get(model, batch)
            .map_or_else(|| format!("<command of a workload for {model} batch {batch}>"), str::to_string)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deploy::test_plans::{gpu, plan};

    fn workload(name: &str, family: &str, task: WorkloadTask, batch: u32) -> RegisteredWorkload {
        RegisteredWorkload {
            name: name.to_string(),
            family: family.to_string(),
            task,
            batch,
            command: format!("run {name} --batch {{batch}}"),
            throughput_regex: None,
        }
    }

    #[test]
    fn the_workload_of_the_same_family_and_batch_serves_inference_first() {
        use WorkloadTask::{Inference, Training};
        let registered = [
            workload("a-train", "bert-base", Training, 8),
            workload("b-inf", "bert-base", Inference, 8),
            workload("c-inf", "bert-base", Inference, 8),
            workload("d-inf", "bert-base", Inference, 4),
            workload("e-train", "gpt2", Training, 1),
        ];
        let name = |model, batch| workload_for(&registered, model, batch).map(|w| w.name.as_str());
        assert_eq!(name("bert-base", 8), Some("b-inf"));
        assert_eq!(name("bert-base", 4), Some("d-inf"));
        assert_eq!(name("gpt2", 1), Some("e-train"));
        assert_eq!(name("gpt2", 2), None);
        assert_eq!(name("resnet50", 8), None);
    }

    #[test]
    fn commands_are_resolved_for_the_nodes_instances_only() {
        // Node 0 serves resnet50 batch 8; node 1 too, but is not asked for.
        let plan = plan(vec![gpu(0, 0, &[("3g.40gb", 4)]), gpu(1, 0, &[("7g.80gb", 0)])]);
        let registered = [
            workload("r-train", "resnet50", WorkloadTask::Training, 8),
            workload("r-inf", "resnet50", WorkloadTask::Inference, 8),
        ];
        let commands = ServiceCommands::resolve(&plan, 0, &registered);
        assert_eq!(commands.get("resnet50", 8), Some("run r-inf --batch 8"));
        assert_eq!(commands.get("resnet50", 4), None);
        assert_eq!(commands.command_for("gpt2", 1), "<command of a workload for gpt2 batch 1>");
        assert_eq!(ServiceCommands::resolve(&plan, 0, &[]), ServiceCommands::default());
    }

    #[test]
    fn a_shared_instance_runs_the_server_with_its_members_in_its_environment() {
        let shared = crate::deploy::test_plans::shared(0, &["a", "b"]);
        let commands = ServiceCommands::default();
        let members = r#"[{"batch":1,"model":"resnet50","service":"a"},{"batch":1,"model":"resnet50","service":"b"}]"#;
        let expected = format!("TESSERA_SHARING=serialized TESSERA_MEMBERS={} ", shell_word(members));
        let placeholder = commands.shared_command_for(&shared);
        assert_eq!(placeholder, format!("{expected}<command of a multi-model server for shared instances>"));
        let commands = commands.with_shared_server(Some("python3 serve.py".into()));
        assert_eq!(commands.shared_command_for(&shared), format!("{expected}python3 serve.py"));
        assert_eq!(commands.shared_server(), Some("python3 serve.py"));
    }
}
