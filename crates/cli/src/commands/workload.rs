//! `tessera workload add | list`: the registered workloads in the store.

use std::path::Path;

use anyhow::Result;
use tessera_store::{RegisteredWorkload, Store};

use crate::args::{ListFormat, WorkloadCommand};
use crate::inputs::{open_existing, store_path};
use crate::output::{note, out, outln};
use crate::table::TextTable;

/// What `throughput_regex = None` means, as shown in listings.
const DEFAULT_THROUGHPUT: &str = "tessera:throughput=N";

pub fn run(command: WorkloadCommand, store: Option<&Path>) -> Result<()> {
    let path = store_path(store)?;
    match command {
        WorkloadCommand::Add { name, family, task, batch, command, throughput_regex } => {
            let workload = RegisteredWorkload { name, family, task, batch, command, throughput_regex };
            let replaced = Store::open(&path)?.register_workload(&workload)?;
            if !workload.command.contains("{batch}") {
                note(format_args!(
                    "--command has no {{batch}}: it runs as given at every batch size; batch {} is what the \
                     workload records",
                    workload.batch
                ));
            }
            match replaced {
                Some(old) => outln!(
                    "replaced workload {} ({}; was {}) in {}",
                    workload.name,
                    workload.command_line(),
                    old.command_line(),
                    path.display()
                )?,
                None => {
                    outln!("registered workload {} ({}) in {}", workload.name, workload.command_line(), path.display())?
                }
            }
        }
        WorkloadCommand::List { format } => {
            let workloads =
                if path.exists() { Store::open_read_only(&path)?.registered_workloads()? } else { Vec::new() };
            match format {
                ListFormat::Json => {
                    let rows: Vec<serde_json::Value> = workloads
                        .iter()
                        .map(|w| {
                            serde_json::json!({
                                "name": w.name, "family": w.family, "task": w.task.as_str(), "batch": w.batch,
                                "command": w.command, "command_line": w.command_line(),
                                "throughput_regex": w.throughput_regex,
                            })
                        })
                        .collect();
                    outln!("{}", serde_json::to_string_pretty(&rows)?)?;
                }
                ListFormat::Table if workloads.is_empty() => {
                    outln!("no registered workloads in {}; add one with `tessera workload add`", path.display())?;
                }
                ListFormat::Table => {
                    let mut table = TextTable::new(&["name", "family", "task", "batch", "command", "throughput"]);
                    for w in &workloads {
                        table.row(vec![
                            w.name.clone(),
                            w.family.clone(),
                            w.task.to_string(),
                            w.batch.to_string(),
                            w.command_line(),
                            w.throughput_regex.clone().unwrap_or_else(|| DEFAULT_THROUGHPUT.to_string()),
                        ]);
                    }
                    out!("{}", table.render())?;
                }
            }
        }
        WorkloadCommand::Remove { name } => remove(&path, &name)?,
    }
    Ok(())
}

/// `workload remove NAME`: the registration only.
fn remove(path: &Path, name: &str) -> Result<()> {
    open_existing(path, None)?.remove_registered_workload(name)?;
    outln!("removed registered workload {name} from {}", path.display())
}
