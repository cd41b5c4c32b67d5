//! `tessera store info | migrate`.

use std::path::Path;

use anyhow::Result;
use tessera_store::{SchemaMigration, Store};

use crate::args::{ListFormat, StoreCommand};
use crate::inputs::store_path;
use crate::output::outln;

pub fn run(command: StoreCommand, store: Option<&Path>) -> Result<()> {
    let path = store_path(store)?;
    match command {
        StoreCommand::Info { format } => {
            let counts = if path.exists() { Some(Store::open_read_only(&path)?.counts()?) } else { None };
            match (format, counts) {
                (ListFormat::Json, None) => {
                    let info = serde_json::json!({ "path": path, "exists": false });
                    outln!("{}", serde_json::to_string_pretty(&info)?)?;
                }
                (ListFormat::Json, Some(c)) => {
                    let info = serde_json::json!({
                        "path": path, "exists": true, "schema_version": c.schema_version,
                        "profiles": c.profiles, "profile_points": c.profile_points, "workloads": c.workloads,
                        "registered_workloads": c.registered_workloads, "colocations": c.colocations,
                        "imports": c.imports, "journal_entries": c.journal_entries,
                    });
                    outln!("{}", serde_json::to_string_pretty(&info)?)?;
                }
                (ListFormat::Table, None) => {
                    outln!("no store at {} yet; a command that writes to the store creates it", path.display())?;
                }
                (ListFormat::Table, Some(c)) => {
                    outln!("store                 {}", path.display())?;
                    for (what, count) in [
                        ("schema version", c.schema_version.into()),
                        ("profiles", c.profiles),
                        ("profile points", c.profile_points),
                        ("workloads measured", c.workloads),
                        ("workloads registered", c.registered_workloads),
                        ("colocations", c.colocations),
                        ("imports", c.imports),
                        ("journal entries", c.journal_entries),
                    ] {
                        outln!("{what:<22}{count}")?;
                    }
                }
            }
        }
        StoreCommand::Migrate => {
            if !path.exists() {
                anyhow::bail!("no store at {}", path.display());
            }
            let SchemaMigration { from, to } = Store::migrate(&path)?;
            match from == to {
                true => outln!("{}: already at schema version {to}, the latest this program knows", path.display())?,
                false => outln!("{}: migrated from schema version {from} to {to}", path.display())?,
            }
        }
    }
    Ok(())
}
