//! Registered workloads and the journal.
//!
//! A registered workload says how to run one workload (a command template
//! whose `{batch}` is replaced by the batch size) and how to read its
//! throughput from its output. The journal records, with UTC times, the
//! actions Tessera took on real hardware (e.g. `deploy --apply`).

use rusqlite::{params, OptionalExtension, Row};

use super::Store;
use crate::error::StoreError;

/// What a registered workload does; stored as its name (`inference`,
/// `training`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum WorkloadTask {
    /// Serving requests.
    Inference,
    /// Training.
    Training,
}

impl WorkloadTask {
    /// Every task, in the order a deployment prefers them.
    pub const ALL: [WorkloadTask; 2] = [WorkloadTask::Inference, WorkloadTask::Training];

    /// The name the store keeps: `inference` or `training`.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkloadTask::Inference => "inference",
            WorkloadTask::Training => "training",
        }
    }

    /// The task called `name`; `None` for any other text.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|task| task.as_str() == name)
    }
}

impl std::fmt::Display for WorkloadTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How to run and measure one workload.
#[derive(Debug, Clone, PartialEq)]
pub struct RegisteredWorkload {
    /// The workload's name, e.g. `bert-base-cased_batch8-inf`.
    pub name: String,
    /// The model family, e.g. `bert-base-cased`.
    pub family: String,
    /// What it does.
    pub task: WorkloadTask,
    /// The batch size (at least 1).
    pub batch: u32,
    /// The command template; `{batch}` is replaced by the batch size.
    pub command: String,
    /// A regular expression with one capture group, the throughput in
    /// samples/s; `None`: the line `tessera:throughput=<samples/s>`.
    pub throughput_regex: Option<String>,
}

impl RegisteredWorkload {
    /// The command with every `{batch}` replaced by the batch size.
    pub fn command_line(&self) -> String {
        self.command.replace("{batch}", &self.batch.to_string())
    }

    /// Why this workload cannot be registered, in one line naming the field;
    /// `None` when it can.
    fn problem(&self) -> Option<String> {
        if self.name.trim().is_empty() {
            return Some("field 'name': must not be empty".to_string());
        }
        if self.command.trim().is_empty() {
            return Some("field 'command': must not be empty".to_string());
        }
        if self.batch == 0 {
            return Some("field 'batch': must be at least 1".to_string());
        }
        if let Some(pattern) = &self.throughput_regex {
            match regex::Regex::new(pattern) {
                Err(error) => {
                    // The regex crate's messages span several lines.
                    let message = error.to_string().split_whitespace().collect::<Vec<_>>().join(" ");
                    return Some(format!("field 'throughput_regex': '{pattern}' does not compile: {message}"));
                }
                Ok(regex) if regex.captures_len() != 2 => {
                    return Some(format!(
                        "field 'throughput_regex': '{pattern}' has {} capture groups, expected exactly 1 (the samples/s)",
                        regex.captures_len() - 1
                    ));
                }
                Ok(_) => {}
            }
        }
        None
    }
}

/// One journal entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalEntry {
    /// When it was recorded (UTC, `YYYY-MM-DDTHH:MM:SSZ`).
    pub at: String,
    /// What was done, e.g. `deploy-apply`.
    pub action: String,
    /// The details, free text.
    pub detail: String,
}

const WORKLOAD_COLUMNS: &str = "name, family, task, batch, command, throughput_regex";

/// A row as stored, its task still text.
type StoredWorkload = (RegisteredWorkload, String);

fn read_workload(row: &Row<'_>) -> rusqlite::Result<StoredWorkload> {
    let workload = RegisteredWorkload {
        name: row.get(0)?,
        family: row.get(1)?,
        task: WorkloadTask::Inference,
        batch: row.get(3)?,
        command: row.get(4)?,
        throughput_regex: row.get(5)?,
    };
    Ok((workload, row.get(2)?))
}

impl Store {
    /// Registers `workload`, replacing a workload of the same name, in one
    /// transaction; the workload replaced, if any. Refuses (one-line error)
    /// an empty name or command, a task other than `inference` or
    /// `training`, batch 0, and a throughput regex that does not compile or
    /// lacks exactly one capture group.
    pub fn register_workload(
        &mut self,
        workload: &RegisteredWorkload,
    ) -> Result<Option<RegisteredWorkload>, StoreError> {
        if let Some(detail) = workload.problem() {
            return Err(StoreError::InvalidWorkload { path: self.path.clone(), name: workload.name.clone(), detail });
        }
        let path = self.path.clone();
        let context = format!("registering workload '{}'", workload.name);
        let sqlite = |error| StoreError::sqlite(&path, context.clone(), error);
        let transaction = self.conn.transaction().map_err(sqlite)?;
        let replaced = transaction
            .query_row(
                &format!("SELECT {WORKLOAD_COLUMNS} FROM registered_workloads WHERE name = ?1"),
                [&workload.name],
                read_workload,
            )
            .optional()
            .map_err(sqlite)?;
        transaction
            .execute(
                &format!(
                    "INSERT INTO registered_workloads ({WORKLOAD_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6) \
                     ON CONFLICT (name) DO UPDATE SET family = excluded.family, task = excluded.task, \
                     batch = excluded.batch, command = excluded.command, throughput_regex = excluded.throughput_regex"
                ),
                params![
                    workload.name,
                    workload.family,
                    workload.task.as_str(),
                    workload.batch,
                    workload.command,
                    workload.throughput_regex
                ],
            )
            .map_err(sqlite)?;
        transaction.commit().map_err(sqlite)?;
        replaced.map(|stored| self.checked_task(stored)).transpose()
    }

    /// The registered workload called `name`; an unknown name is an error
    /// listing the registered names.
    pub fn registered_workload(&self, name: &str) -> Result<RegisteredWorkload, StoreError> {
        let found = self
            .conn
            .query_row(
                &format!("SELECT {WORKLOAD_COLUMNS} FROM registered_workloads WHERE name = ?1"),
                [name],
                read_workload,
            )
            .optional()
            .map_err(|error| self.sqlite(&format!("reading registered workload '{name}'"), error))?;
        match found {
            Some(stored) => self.checked_task(stored),
            None => Err(self.unknown_workload(name)?),
        }
    }

    /// The error for a workload name that is not registered, listing the
    /// registered names.
    fn unknown_workload(&self, name: &str) -> Result<StoreError, StoreError> {
        let names: Vec<String> = self.registered_workloads()?.into_iter().map(|w| w.name).collect();
        let known = if names.is_empty() { "none".to_string() } else { names.join(", ") };
        let measured = self.load_workloads()?.iter().any(|workload| workload.workload == name);
        Ok(StoreError::UnknownWorkload { path: self.path.clone(), name: name.to_string(), known, measured })
    }

    /// Every registered workload, by name.
    pub fn registered_workloads(&self) -> Result<Vec<RegisteredWorkload>, StoreError> {
        let sqlite = |error| self.sqlite("reading the registered workloads", error);
        let mut statement = self
            .conn
            .prepare(&format!("SELECT {WORKLOAD_COLUMNS} FROM registered_workloads ORDER BY name"))
            .map_err(sqlite)?;
        let rows = statement.query_map([], read_workload).map_err(sqlite)?;
        let stored = rows.collect::<rusqlite::Result<Vec<_>>>().map_err(sqlite)?;
        stored.into_iter().map(|stored| self.checked_task(stored)).collect()
    }

    /// The workload with its stored task read; an unknown task (a store
    /// edited by hand) is an error naming the workload.
    fn checked_task(&self, (workload, task): StoredWorkload) -> Result<RegisteredWorkload, StoreError> {
        match WorkloadTask::from_name(&task) {
            Some(task) => Ok(RegisteredWorkload { task, ..workload }),
            None => {
                let known: Vec<&str> = WorkloadTask::ALL.iter().map(|task| task.as_str()).collect();
                Err(StoreError::InvalidWorkload {
                    path: self.path.clone(),
                    name: workload.name,
                    detail: format!("stored task '{task}' is not one of {}", known.join(", ")),
                })
            }
        }
    }

    /// Removes the registered workload called `name` in one transaction
    /// (its measured metrics and colocations stay); an unknown name is an
    /// error listing the registered names.
    pub fn remove_registered_workload(&mut self, name: &str) -> Result<(), StoreError> {
        let path = self.path.clone();
        let sqlite = |error| StoreError::sqlite(&path, format!("removing registered workload '{name}'"), error);
        let transaction = self.conn.transaction().map_err(sqlite)?;
        if transaction.execute("DELETE FROM registered_workloads WHERE name = ?1", [name]).map_err(sqlite)? == 0 {
            drop(transaction);
            return Err(self.unknown_workload(name)?);
        }
        transaction.commit().map_err(sqlite)
    }

    /// Appends an entry to the journal, stamped with the current UTC time.
    pub fn journal(&mut self, action: &str, detail: &str) -> Result<(), StoreError> {
        self.conn
            .execute("INSERT INTO journal (action, detail) VALUES (?1, ?2)", params![action, detail])
            .map(|_| ())
            .map_err(|error| self.sqlite(&format!("journaling '{action}'"), error))
    }

    /// Every journal entry, oldest first.
    pub fn journal_entries(&self) -> Result<Vec<JournalEntry>, StoreError> {
        let sqlite = |error| self.sqlite("reading the journal", error);
        let mut statement = self.conn.prepare("SELECT at, action, detail FROM journal ORDER BY id").map_err(sqlite)?;
        let rows = statement
            .query_map([], |row| Ok(JournalEntry { at: row.get(0)?, action: row.get(1)?, detail: row.get(2)? }))
            .map_err(sqlite)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(sqlite)
    }
}

#[cfg(test)]
mod tests {
    use rusqlite::Connection;

    use super::super::migrations;
    use super::*;

    fn bert(batch: u32) -> RegisteredWorkload {
        RegisteredWorkload {
            name: format!("bert-base-cased_batch{batch}-inf"),
            family: "bert-base-cased".to_string(),
            task: WorkloadTask::Inference,
            batch,
            command: "python serve.py --batch {batch} --warmup {batch}".to_string(),
            throughput_regex: Some(r"throughput: ([0-9.]+) samples/s".to_string()),
        }
    }

    #[test]
    fn round_trips_in_name_order_and_fills_the_batch() {
        let mut store = Store::open_in_memory().unwrap();
        let mut plain = bert(16);
        plain.name = "a-first".to_string();
        plain.task = WorkloadTask::Training;
        plain.throughput_regex = None;
        store.register_workload(&bert(8)).unwrap();
        store.register_workload(&plain).unwrap();
        assert_eq!(store.registered_workloads().unwrap(), vec![plain.clone(), bert(8)]);
        assert_eq!(store.registered_workload("bert-base-cased_batch8-inf").unwrap(), bert(8));
        assert_eq!(bert(8).command_line(), "python serve.py --batch 8 --warmup 8");
    }

    #[test]
    fn registering_again_replaces() {
        let mut store = Store::open_in_memory().unwrap();
        assert_eq!(store.register_workload(&bert(8)).unwrap(), None);
        let mut changed = bert(8);
        changed.command = "python other.py {batch}".to_string();
        changed.throughput_regex = None;
        assert_eq!(store.register_workload(&changed).unwrap(), Some(bert(8)), "the workload replaced");
        assert_eq!(store.registered_workloads().unwrap(), vec![changed]);
    }

    #[test]
    fn an_unknown_name_lists_the_known_ones() {
        let mut store = Store::open_in_memory().unwrap();
        let message = store.registered_workload("nope").unwrap_err().to_string();
        assert!(message.contains("'nope'") && message.contains("known: none"), "{message}");
        store.register_workload(&bert(8)).unwrap();
        store.register_workload(&bert(4)).unwrap();
        let error = store.registered_workload("nope").unwrap_err();
        assert!(matches!(error, StoreError::UnknownWorkload { .. }));
        let message = error.to_string();
        assert!(
            message.contains("known: bert-base-cased_batch4-inf, bert-base-cased_batch8-inf")
                && !message.contains('\n'),
            "{message}"
        );
    }

    #[test]
    fn refuses_invalid_workloads_with_one_line() {
        let mut store = Store::open_in_memory().unwrap();
        type Edit = fn(&mut RegisteredWorkload);
        let cases: Vec<(Edit, &str)> = vec![
            (|w| w.name = " ".to_string(), "'name'"),
            (|w| w.command = String::new(), "'command'"),
            (|w| w.batch = 0, "'batch'"),
            (|w| w.throughput_regex = Some("([0-9".to_string()), "does not compile"),
            (|w| w.throughput_regex = Some("[0-9]+".to_string()), "has 0 capture groups"),
            (|w| w.throughput_regex = Some("(a)(b)".to_string()), "has 2 capture groups"),
        ];
        for (edit, expected) in cases {
            let mut workload = bert(8);
            edit(&mut workload);
            let error = store.register_workload(&workload).unwrap_err();
            assert!(matches!(error, StoreError::InvalidWorkload { .. }), "{error}");
            let message = error.to_string();
            assert!(message.contains(expected) && !message.contains('\n'), "{message}");
        }
        assert!(store.registered_workloads().unwrap().is_empty());
    }

    #[test]
    fn tasks_are_stored_as_their_names_and_an_unknown_one_names_the_workload() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.sqlite");
        let mut store = Store::open(&path).unwrap();
        store.register_workload(&bert(8)).unwrap();
        let task: String = store.conn.query_row("SELECT task FROM registered_workloads", [], |row| row.get(0)).unwrap();
        assert_eq!(task, "inference");
        // A store edited by hand, without the CHECK of version 3.
        store
            .conn
            .execute_batch("PRAGMA ignore_check_constraints = ON; UPDATE registered_workloads SET task = 'serving'")
            .unwrap();
        let message = store.registered_workloads().unwrap_err().to_string();
        assert!(
            message.ends_with(
                "workload 'bert-base-cased_batch8-inf': stored task 'serving' is not one of inference, training"
            ),
            "{message}"
        );
        let message = store.registered_workload("bert-base-cased_batch8-inf").unwrap_err().to_string();
        assert!(message.contains("'serving'"), "{message}");
    }

    #[test]
    fn removes_a_registered_workload_by_name() {
        let mut store = Store::open_in_memory().unwrap();
        store.register_workload(&bert(8)).unwrap();
        store.register_workload(&bert(4)).unwrap();
        store.remove_registered_workload("bert-base-cased_batch8-inf").unwrap();
        assert_eq!(store.registered_workloads().unwrap(), vec![bert(4)]);
        let error = store.remove_registered_workload("bert-base-cased_batch8-inf").unwrap_err();
        assert_eq!(
            error.to_string(),
            ":memory:: no registered workload 'bert-base-cased_batch8-inf' (known: bert-base-cased_batch4-inf)"
        );
    }

    #[test]
    fn journal_keeps_the_order_with_utc_times() {
        let mut store = Store::open_in_memory().unwrap();
        for i in 0..5 {
            store.journal("deploy-apply", &format!("step {i}")).unwrap();
        }
        store.journal("other", "").unwrap();
        let entries = store.journal_entries().unwrap();
        let details: Vec<&str> = entries.iter().map(|e| e.detail.as_str()).collect();
        assert_eq!(details, ["step 0", "step 1", "step 2", "step 3", "step 4", ""]);
        assert_eq!(entries[5].action, "other");
        let at = &entries[0].at;
        assert!(at.len() == 20 && at.ends_with('Z') && at.as_bytes()[10] == b'T', "{at}");
    }

    #[test]
    fn migrates_a_version_2_database_keeping_its_data() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("profiles.sqlite");
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(migrations::MIGRATIONS[0]).unwrap();
            conn.execute_batch(migrations::MIGRATIONS[1]).unwrap();
            conn.pragma_update(None, "user_version", 2).unwrap();
            conn.execute_batch(
                r#"INSERT INTO imports (source, format, "rows") VALUES ('old.csv', 'native', 2);
                INSERT INTO profiles VALUES ('a100-80gb', 'bert', 1, 4, 1, 10.5, 5.5, 1.25, 1);
                INSERT INTO workloads VALUES ('w', 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 1);"#,
            )
            .unwrap();
        }
        let mut store = Store::open(&path).unwrap();
        assert_eq!(store.schema_version().unwrap(), migrations::SUPPORTED_VERSION);
        assert_eq!(store.list_profiles().unwrap().len(), 1);
        let workloads = store.load_workloads().unwrap();
        assert_eq!((workloads.len(), workloads[0].workload.as_str(), workloads[0].exclusive_rps), (1, "w", 7.0));
        // The new tables are there and usable, and survive a reopen.
        assert!(store.registered_workloads().unwrap().is_empty() && store.journal_entries().unwrap().is_empty());
        store.register_workload(&bert(8)).unwrap();
        store.journal("deploy-apply", "x").unwrap();
        drop(store);
        let store = Store::open(&path).unwrap();
        assert_eq!(store.registered_workloads().unwrap(), vec![bert(8)]);
        assert_eq!(store.journal_entries().unwrap().len(), 1);
        assert_eq!(store.list_profiles().unwrap().len(), 1);
        assert_eq!(store.load_workloads().unwrap().len(), 1);
    }
}
