//! `tessera colocate evaluate`.

use std::path::Path;

use anyhow::{bail, Context, Result};
use tessera_colocate::evaluate::{lowo, p3, Policy, PolicyScores, Split};
use tessera_colocate::DEFAULT_SLOWDOWN;
use tessera_core::Colocation;
use tessera_store::read_colocations;

use crate::args::{ColocateCommand, ListFormat, Protocol};
use crate::table::TextTable;

pub fn run(command: ColocateCommand) -> Result<()> {
    let ColocateCommand::Evaluate { protocol, splits, data, seed, format } = command;
    let policies = Policy::all(tessera_colocate::gbm::GbmParams { seed, ..DEFAULT_SLOWDOWN });
    let (results, columns) = match protocol {
        Protocol::P3 => {
            let dir = splits.context("--splits DIR is required with --protocol p3")?;
            let splits = read_splits(&dir)?;
            let names: Vec<String> = splits.iter().map(|s| s.name.clone()).collect();
            (p3(&splits, &policies), names)
        }
        Protocol::Lowo => {
            let path = data.context("--data FILE is required with --protocol lowo")?;
            (lowo(&read_rows(&path)?, &policies), vec!["all".to_string()])
        }
    };
    let protocol_name = match protocol {
        Protocol::P3 => "p3",
        Protocol::Lowo => "lowo",
    };
    match format {
        ListFormat::Json => {
            let json = serde_json::json!({ "protocol": protocol_name, "policies": results });
            println!("{}", serde_json::to_string_pretty(&json)?);
        }
        ListFormat::Table => print!("{}", scores_table(&results, &columns)),
    }
    Ok(())
}

fn read_rows(path: &Path) -> Result<Vec<Colocation>> {
    let import = read_colocations(path)?;
    if import.skipped_unmeasured > 0 {
        eprintln!("note: {}: skipped {} unmeasured rows", path.display(), import.skipped_unmeasured);
    }
    Ok(import.rows)
}

/// Every subfolder of `dir` with `training_set.csv` and `testing_set.csv`,
/// in name order.
fn read_splits(dir: &Path) -> Result<Vec<Split>> {
    let mut folders: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.join("training_set.csv").is_file() && path.join("testing_set.csv").is_file())
        .collect();
    folders.sort();
    if folders.is_empty() {
        bail!("{}: no subfolder holds training_set.csv and testing_set.csv", dir.display());
    }
    folders
        .iter()
        .map(|folder| {
            Ok(Split {
                name: folder.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
                train: read_rows(&folder.join("training_set.csv"))?,
                test: read_rows(&folder.join("testing_set.csv"))?,
            })
        })
        .collect()
}

fn scores_table(results: &[PolicyScores], columns: &[String]) -> String {
    let mut header: Vec<&str> = vec!["policy"];
    header.extend(columns.iter().map(String::as_str));
    header.push("mean");
    let mut table = TextTable::new(&header);
    for result in results {
        let mut row = vec![result.name.clone()];
        row.extend(result.per_seed.iter().map(|v| format!("{v:.4}")));
        row.push(format!("{:.4}", result.mean));
        table.row(row);
    }
    table.render()
}
