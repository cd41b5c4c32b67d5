//! Measured colocations (KACE's K ≥ 2 workloads sharing a GPU under MPS):
//! the `colocations` table and its `colocation_members`, every measured
//! colocation with each member's metrics as measured in that row.

use std::collections::{BTreeSet, HashMap, HashSet};

use rusqlite::types::ToSql;
use rusqlite::{ffi, params, Connection};
use tessera_core::colocation::{Colocation, GroupMember};
use tessera_core::text::count;

use super::metric_columns::{bind, insert_workload_sql, metric_values, read_metrics, METRIC_COLUMNS};
use super::profiles::{known, names};
use super::Store;
use crate::error::StoreError;
use crate::formats::kace::{identity, identity_of, Identity};

/// The `imports.format` recorded by [`Store::import_colocations`].
const COLOCATIONS_FORMAT: &str = "kace";

/// A stored colocation with its id and the import that stored it.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredColocation {
    /// Its id in the store (for `remove_colocations`).
    pub id: i64,
    /// The source of its import, e.g. the file's path.
    pub source: String,
    /// When it was imported, UTC RFC 3339.
    pub imported_at: String,
    /// The colocation.
    pub colocation: Colocation,
}

/// A colocation being loaded: its stored row and the members read so far.
struct Pending {
    id: i64,
    size: i64,
    source: String,
    imported_at: String,
    members: Vec<GroupMember>,
}

/// What one colocation import did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColocationImportSummary {
    /// The id of the `imports` row recording it.
    pub import_id: i64,
    /// Colocations written.
    pub rows: usize,
    /// Members written, summed over the colocations.
    pub members: usize,
    /// Colocations of an earlier import of the same source that were
    /// removed.
    pub replaced_rows: usize,
    /// Workloads that were not stored yet and were added from the members'
    /// metrics.
    pub added_workloads: usize,
    /// Colocations not stored because an identical one (the same workloads
    /// with the same colocated throughputs) already was, from another
    /// source or earlier in this import.
    pub already_stored: usize,
}

impl Store {
    /// Stores measured colocations in one transaction, recording `source`
    /// (e.g. the KACE file imported) with format `kace`. The colocations of
    /// any earlier import of the same `source` are removed first, so
    /// importing a file again replaces its rows. A colocation identical to
    /// one stored from another source (the same workloads with the same
    /// colocated throughputs, in any member order), or given twice, is stored
    /// once and counted in [`ColocationImportSummary::already_stored`]: a
    /// file imported again under another name adds nothing. Every member's
    /// metrics are kept as measured in its row; a member whose workload is not stored
    /// yet is also added to the workloads (the first row naming it wins),
    /// while stored workloads are left as they are. Every colocation needs
    /// at least two members and valid (non-negative, exclusive throughput
    /// above zero, not NaN) values. On any failure nothing is changed.
    pub fn import_colocations(
        &mut self,
        rows: &[Colocation],
        source: &str,
    ) -> Result<ColocationImportSummary, StoreError> {
        let path = self.path.clone();
        let sqlite = |context: String| {
            let path = path.clone();
            move |error| StoreError::sqlite(&path, context, error)
        };
        let transaction = self.conn.transaction().map_err(sqlite(format!("starting the import of '{source}'")))?;
        let replaced_rows = transaction
            .execute(
                "DELETE FROM colocations WHERE import_id IN \
                 (SELECT id FROM imports WHERE source = ?1 AND format = ?2)",
                params![source, COLOCATIONS_FORMAT],
            )
            .map_err(sqlite(format!("removing the colocations of an earlier import of '{source}'")))?;
        let mut stored = stored_identities(&transaction)
            .map_err(sqlite(format!("reading the stored colocations before importing '{source}'")))?;
        let new_rows: Vec<&Colocation> = rows.iter().filter(|row| stored.insert(identity(row))).collect();
        let import_id = super::record_import(&transaction, source, COLOCATIONS_FORMAT, new_rows.len())
            .map_err(sqlite(format!("recording the import of '{source}'")))?;
        let (mut members, mut added_workloads) = (0, 0);
        {
            let preparing = || sqlite(format!("preparing the import of '{source}'"));
            let mut insert_colocation =
                transaction.prepare("INSERT INTO colocations (import_id, size) VALUES (?1, ?2)").map_err(preparing())?;
            let placeholders: Vec<String> = (1..=METRIC_COLUMNS.len() + 4).map(|i| format!("?{i}")).collect();
            let mut insert_member = transaction
                .prepare(&format!(
                    "INSERT INTO colocation_members (colocation_id, position, workload, colocated_rps, {}) \
                     VALUES ({})",
                    METRIC_COLUMNS.join(", "),
                    placeholders.join(", ")
                ))
                .map_err(preparing())?;
            let mut add_workload = transaction
                .prepare(&format!("{} ON CONFLICT (name) DO NOTHING", insert_workload_sql()))
                .map_err(preparing())?;
            for (n, row) in new_rows.iter().enumerate().map(|(n, row)| (n + 1, row)) {
                let colocation_id = insert_colocation
                    .insert(params![import_id, row.members.len() as i64])
                    .map_err(sqlite(format!("storing colocation {n} from '{source}'")))?;
                for (position, member) in row.members.iter().enumerate() {
                    let workload = &member.metrics.workload;
                    let about = |what: &str| {
                        format!("{what} member {} ('{workload}') of colocation {n} from '{source}'", position + 1)
                    };
                    let values = metric_values(&member.metrics);
                    let position = position as i64;
                    let mut bound: Vec<&dyn ToSql> = vec![&colocation_id, &position, workload, &member.colocated_rps];
                    bound.extend(values.iter().map(|value| value as &dyn ToSql));
                    insert_member.execute(bound.as_slice()).map_err(sqlite(about("storing")))?;
                    added_workloads += add_workload
                        .execute(bind(workload, &values, &import_id).as_slice())
                        .map_err(sqlite(about("adding the workload of")))?;
                }
                members += row.members.len();
            }
        }
        transaction.commit().map_err(sqlite(format!("committing the import of '{source}'")))?;
        Ok(ColocationImportSummary {
            import_id,
            rows: new_rows.len(),
            members,
            replaced_rows,
            added_workloads,
            already_stored: rows.len() - new_rows.len(),
        })
    }

    /// Every stored colocation, in import order (oldest first) and then in
    /// the order imported, members in the order measured. A colocation
    /// whose stored members do not match its size is an error.
    pub fn load_colocations(&self) -> Result<Vec<Colocation>, StoreError> {
        Ok(self.stored_colocations()?.into_iter().map(|stored| stored.colocation).collect())
    }

    /// Every stored colocation with its id and import, in the order of
    /// [`Store::load_colocations`].
    pub fn stored_colocations(&self) -> Result<Vec<StoredColocation>, StoreError> {
        let context = "loading colocations";
        let member_columns: Vec<String> = METRIC_COLUMNS.iter().map(|column| format!("m.{column}")).collect();
        let mut statement = self
            .conn
            .prepare(&format!(
                "SELECT c.id, c.size, i.source, i.imported_at, m.position, m.workload, m.colocated_rps, {} \
                 FROM colocations c JOIN imports i ON i.id = c.import_id \
                 LEFT JOIN colocation_members m ON m.colocation_id = c.id \
                 ORDER BY c.import_id, c.id, m.position",
                member_columns.join(", ")
            ))
            .map_err(|error| self.sqlite(context, error))?;
        let rows = statement
            .query_map([], |row| {
                let member = match row.get::<_, Option<i64>>(4)? {
                    None => None,
                    Some(position) => Some((
                        position,
                        GroupMember { metrics: read_metrics(row, 7, row.get(5)?)?, colocated_rps: row.get(6)? },
                    )),
                };
                let pending = Pending {
                    id: row.get(0)?,
                    size: row.get(1)?,
                    source: row.get(2)?,
                    imported_at: row.get(3)?,
                    members: Vec::new(),
                };
                Ok((pending, member))
            })
            .map_err(|error| self.sqlite(context, error))?;

        let mut colocations = Vec::new();
        let mut current: Option<Pending> = None;
        for row in rows {
            let (pending, member) = row.map_err(|error| self.sqlite(context, error))?;
            if current.as_ref().is_some_and(|current| current.id != pending.id) {
                colocations.push(self.colocation(current.take().expect("checked above"))?);
            }
            let current = current.get_or_insert(pending);
            let Some((position, member)) = member else { continue };
            if position != current.members.len() as i64 {
                let detail = format!("member position {position} where {} was expected", current.members.len());
                return Err(self.corrupt_colocation(current.id, &detail));
            }
            current.members.push(member);
        }
        if let Some(done) = current {
            colocations.push(self.colocation(done)?);
        }
        Ok(colocations)
    }

    /// A loaded colocation, checked against its stored size.
    fn colocation(&self, pending: Pending) -> Result<StoredColocation, StoreError> {
        let Pending { id, size, source, imported_at, members } = pending;
        if members.len() as i64 != size || size < 2 {
            let detail = format!("{} stored member(s) but size {size}", members.len());
            return Err(self.corrupt_colocation(id, &detail));
        }
        Ok(StoredColocation { id, source, imported_at, colocation: Colocation { members } })
    }

    /// Removes the colocations with these ids in one transaction; returns
    /// how many were removed. An id not stored is an error, and then
    /// nothing is removed.
    pub fn remove_colocations(&mut self, ids: &[i64]) -> Result<usize, StoreError> {
        let path = self.path.clone();
        let sqlite = |error| StoreError::sqlite(&path, "removing colocations", error);
        let wanted: BTreeSet<i64> = ids.iter().copied().collect();
        let transaction = self.conn.transaction().map_err(sqlite)?;
        {
            let mut exists =
                transaction.prepare("SELECT EXISTS (SELECT 1 FROM colocations WHERE id = ?1)").map_err(sqlite)?;
            let mut missing = Vec::new();
            for id in &wanted {
                if !exists.query_row([id], |row| row.get::<_, bool>(0)).map_err(sqlite)? {
                    missing.push(id.to_string());
                }
            }
            if !missing.is_empty() {
                let stored: i64 =
                    transaction.query_row("SELECT COUNT(*) FROM colocations", [], |row| row.get(0)).map_err(sqlite)?;
                let noun = if missing.len() == 1 { "colocation" } else { "colocations" };
                return Err(StoreError::NotStored {
                    path: self.path.clone(),
                    what: format!("{noun} {}", missing.join(", ")),
                    known: match stored {
                        0 => "no colocations".to_string(),
                        n => format!("{}; see `tessera colocate list`", count(n, "colocation")),
                    },
                });
            }
            let mut delete = transaction.prepare("DELETE FROM colocations WHERE id = ?1").map_err(sqlite)?;
            for id in &wanted {
                delete.execute([id]).map_err(sqlite)?;
            }
        }
        transaction.commit().map_err(sqlite)?;
        Ok(wanted.len())
    }

    /// Removes, in one transaction, every colocation imported from
    /// `source` (as recorded, e.g. the file's path); returns how many. A
    /// source with no stored colocation is an error listing the sources
    /// that have some.
    pub fn remove_colocations_from(&mut self, source: &str) -> Result<usize, StoreError> {
        let path = self.path.clone();
        let sqlite = |error| StoreError::sqlite(&path, format!("removing the colocations from '{source}'"), error);
        let transaction = self.conn.transaction().map_err(sqlite)?;
        let removed = transaction
            .execute(
                "DELETE FROM colocations WHERE import_id IN (SELECT id FROM imports WHERE source = ?1 AND format = ?2)",
                params![source, COLOCATIONS_FORMAT],
            )
            .map_err(sqlite)?;
        if removed == 0 {
            let sources = names(
                &transaction,
                "SELECT DISTINCT i.source FROM colocations c JOIN imports i ON i.id = c.import_id ORDER BY i.source",
                [],
            )
            .map_err(sqlite)?;
            return Err(StoreError::NotStored {
                path: self.path.clone(),
                what: format!("colocation imported from '{source}'"),
                known: known(&sources, "colocations"),
            });
        }
        transaction.commit().map_err(sqlite)?;
        Ok(removed)
    }

    /// A stored colocation that breaks the schema's invariants (edited by
    /// hand?).
    fn corrupt_colocation(&self, id: i64, detail: &str) -> StoreError {
        let error = rusqlite::Error::SqliteFailure(
            ffi::Error::new(ffi::SQLITE_CORRUPT),
            Some(format!("stored colocation {id} is invalid: {detail}")),
        );
        self.sqlite("loading colocations", error)
    }
}

/// The identity (see [`identity`]) of every stored colocation.
fn stored_identities(conn: &Connection) -> rusqlite::Result<HashSet<Identity>> {
    let mut statement = conn.prepare("SELECT colocation_id, workload, colocated_rps FROM colocation_members")?;
    let mut groups: HashMap<i64, Vec<(String, f64)>> = HashMap::new();
    for row in statement.query_map([], |row| Ok((row.get::<_, i64>(0)?, row.get(1)?, row.get(2)?)))? {
        let (id, workload, colocated_rps) = row?;
        groups.entry(id).or_default().push((workload, colocated_rps));
    }
    Ok(groups.into_values().map(identity_of).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::fixtures::{assert_one_line, colocation, count, metrics};

    #[test]
    fn colocations_of_two_and_three_round_trip() {
        let mut store = Store::open_in_memory().unwrap();
        let known = metrics("a", 100.0);
        store.import_workloads(std::slice::from_ref(&known), "tables").unwrap();
        let rows = vec![
            colocation(&[("a", 1.0), ("b", 2.0)]),
            colocation(&[("c", 3.0), ("a", 4.0), ("b", 5.0)]),
            colocation(&[("b", 6.0), ("b", 7.0)]),
        ];
        let summary = store.import_colocations(&rows, "pairs.csv").unwrap();
        assert_eq!((summary.rows, summary.members, summary.replaced_rows, summary.added_workloads), (3, 7, 0, 2));
        assert_eq!(store.load_colocations().unwrap(), rows);

        // Stored workloads are kept; new ones come from their first row.
        let workloads = store.load_workloads().unwrap();
        assert_eq!(workloads, vec![known, metrics("b", 2.0), metrics("c", 3.0)]);
        let (format, recorded): (String, i64) = store
            .conn
            .query_row(r#"SELECT format, "rows" FROM imports WHERE id = ?1"#, [summary.import_id], |row| {
                Ok((row.get(0)?, row.get(1)?))
            })
            .unwrap();
        assert_eq!((format.as_str(), recorded), ("kace", 3));
    }

    #[test]
    fn importing_a_source_again_replaces_its_colocations() {
        let mut store = Store::open_in_memory().unwrap();
        let first = vec![colocation(&[("a", 1.0), ("b", 2.0)]), colocation(&[("a", 3.0), ("c", 4.0), ("d", 5.0)])];
        let other = vec![colocation(&[("x", 1.0), ("y", 2.0)])];
        store.import_colocations(&first, "pairs.csv").unwrap();
        store.import_colocations(&other, "other.csv").unwrap();
        let again = vec![colocation(&[("e", 6.0), ("f", 7.0)])];
        let summary = store.import_colocations(&again, "pairs.csv").unwrap();
        assert_eq!((summary.rows, summary.members, summary.replaced_rows), (1, 2, 2));
        // Import order: other.csv, then the new pairs.csv.
        assert_eq!(store.load_colocations().unwrap(), [other, again].concat());
        assert_eq!(count(&store, "colocation_members"), 4);
        assert_eq!(count(&store, "workloads"), 8);

        // An empty re-import clears the source.
        let summary = store.import_colocations(&[], "pairs.csv").unwrap();
        assert_eq!((summary.rows, summary.replaced_rows), (0, 1));
        assert_eq!(store.load_colocations().unwrap().len(), 1);
    }

    #[test]
    fn a_colocation_stored_from_another_source_is_not_stored_again() {
        let mut store = Store::open_in_memory().unwrap();
        let rows = vec![colocation(&[("a", 1.0), ("b", 2.0)]), colocation(&[("a", 3.0), ("c", 4.0), ("d", 5.0)])];
        store.import_colocations(&rows, "pairs.csv").unwrap();
        // The same file under another name, its members in another order.
        let mut swapped = rows[0].clone();
        swapped.members.reverse();
        let summary = store.import_colocations(&[swapped, rows[1].clone()], "./pairs.csv").unwrap();
        assert_eq!((summary.rows, summary.members, summary.already_stored, summary.replaced_rows), (0, 0, 2, 0));
        assert_eq!(store.load_colocations().unwrap(), rows);

        // New measurements are stored, a repeated one once.
        let other = colocation(&[("a", 1.5), ("b", 2.0)]);
        let summary = store.import_colocations(&[other.clone(), rows[0].clone(), other.clone()], "more.csv").unwrap();
        assert_eq!((summary.rows, summary.already_stored), (1, 2));
        assert_eq!(store.load_colocations().unwrap(), [rows.clone(), vec![other]].concat());
        let recorded: i64 = store
            .conn
            .query_row(r#"SELECT "rows" FROM imports WHERE id = ?1"#, [summary.import_id], |row| row.get(0))
            .unwrap();
        assert_eq!(recorded, 1, "the import records what it stored");

        // Importing a source again replaces its own rows rather than skipping them.
        let summary = store.import_colocations(&rows, "pairs.csv").unwrap();
        assert_eq!((summary.rows, summary.replaced_rows, summary.already_stored), (2, 2, 0));
        assert_eq!(count(&store, "colocations"), 3);
    }

    #[test]
    fn colocations_are_listed_and_removed_by_id_or_source() {
        let mut store = Store::open_in_memory().unwrap();
        let pairs = vec![colocation(&[("a", 1.0), ("b", 2.0)]), colocation(&[("a", 3.0), ("c", 4.0), ("d", 5.0)])];
        let other = vec![colocation(&[("x", 1.0), ("y", 2.0)])];
        store.import_colocations(&pairs, "pairs.csv").unwrap();
        store.import_colocations(&other, "other.csv").unwrap();
        let stored = store.stored_colocations().unwrap();
        let listed: Vec<(i64, &str)> = stored.iter().map(|s| (s.id, s.source.as_str())).collect();
        assert_eq!(listed, [(1, "pairs.csv"), (2, "pairs.csv"), (3, "other.csv")]);
        assert_eq!(stored[1].colocation, pairs[1]);

        let message = store.remove_colocations(&[3, 9]).unwrap_err().to_string();
        assert_eq!(
            message,
            ":memory:: no colocation 9 in the store (it holds: 3 colocations; see `tessera colocate list`)"
        );
        let message = store.remove_colocations(&[8, 9]).unwrap_err().to_string();
        assert!(message.contains("no colocations 8, 9 in the store"), "{message}");
        assert_eq!(store.load_colocations().unwrap().len(), 3, "nothing removed");
        assert_eq!(store.remove_colocations(&[3, 1, 3]).unwrap(), 2);
        assert_eq!(store.load_colocations().unwrap(), vec![pairs[1].clone()]);
        assert_eq!(count(&store, "colocation_members"), 3);

        let message = store.remove_colocations_from("other.csv").unwrap_err().to_string();
        assert_eq!(message, ":memory:: no colocation imported from 'other.csv' in the store (it holds: pairs.csv)");
        assert_eq!(store.remove_colocations_from("pairs.csv").unwrap(), 1);
        assert!(store.load_colocations().unwrap().is_empty());
        let message = store.remove_colocations_from("pairs.csv").unwrap_err().to_string();
        assert!(message.ends_with("(it holds: no colocations)"), "{message}");
        assert_eq!(count(&store, "workloads"), 6, "the workloads' metrics stay");
    }

    #[test]
    fn a_failed_import_changes_nothing() {
        let mut store = Store::open_in_memory().unwrap();
        let original = vec![colocation(&[("a", 1.0), ("b", 2.0)])];
        store.import_colocations(&original, "pairs.csv").unwrap();
        store
            .conn
            .execute_batch(
                "CREATE TRIGGER fail_member BEFORE INSERT ON colocation_members WHEN NEW.workload = 'boom' \
                 BEGIN SELECT RAISE(ABORT, 'injected failure'); END; \
                 CREATE TRIGGER fail_workload BEFORE INSERT ON workloads WHEN NEW.name = 'bang' \
                 BEGIN SELECT RAISE(ABORT, 'injected failure'); END;",
            )
            .unwrap();
        let workloads = store.load_workloads().unwrap();
        let imports = count(&store, "imports");

        // Same source: the old rows would be replaced, had it succeeded.
        let failing = vec![colocation(&[("c", 3.0), ("d", 4.0)]), colocation(&[("e", 5.0), ("boom", 6.0), ("f", 7.0)])];
        let message = store.import_colocations(&failing, "pairs.csv").unwrap_err().to_string();
        assert_one_line(&message, &[":memory:", "member 2 ('boom') of colocation 2", "pairs.csv", "injected failure"]);
        let failing = vec![colocation(&[("c", 3.0), ("bang", 4.0)])];
        let message = store.import_colocations(&failing, "new.csv").unwrap_err().to_string();
        assert_one_line(&message, &["'bang'", "colocation 1", "new.csv"]);
        let message = store.import_workloads(&[metrics("c", 1.0), metrics("bang", 2.0)], "t").unwrap_err().to_string();
        assert_one_line(&message, &[":memory:", "workload 'bang'", "injected failure"]);

        assert_eq!(store.load_colocations().unwrap(), original);
        assert_eq!(store.load_workloads().unwrap(), workloads);
        assert_eq!(count(&store, "colocation_members"), 2);
        assert_eq!(count(&store, "imports"), imports);
    }

    #[test]
    fn the_schema_checks_values() {
        let mut store = Store::open_in_memory().unwrap();
        let single = vec![colocation(&[("a", 1.0), ("b", 2.0)]), colocation(&[("a", 1.0)])];
        let message = store.import_colocations(&single, "s.csv").unwrap_err().to_string();
        assert_one_line(&message, &["colocation 2", "s.csv", "size >= 2"]);

        let mut bad = colocation(&[("a", 1.0), ("b", 2.0)]);
        bad.members[1].metrics.exclusive_rps = 0.0;
        let message = store.import_colocations(&[bad], "s.csv").unwrap_err().to_string();
        assert_one_line(&message, &["('b')", "exclusive_rps > 0"]);

        let mut bad = colocation(&[("a", 1.0), ("b", 2.0)]);
        bad.members[0].colocated_rps = -1.0;
        assert!(store.import_colocations(&[bad], "s.csv").is_err());

        let mut nan = metrics("a", 1.0);
        nan.kernel[2] = f64::NAN;
        let message = store.import_workloads(&[nan], "t").unwrap_err().to_string();
        assert_one_line(&message, &["workload 'a'", "NOT NULL"]);
        let message = store.import_workloads(&[metrics("", 1.0)], "t").unwrap_err().to_string();
        assert_one_line(&message, &["workload ''", "length(name) > 0"]);

        assert_eq!(count(&store, "colocations") + count(&store, "workloads") + count(&store, "imports"), 0);
        let orphan = store.conn.execute("INSERT INTO colocations (import_id, size) VALUES (42, 2)", []);
        assert!(orphan.is_err(), "foreign key not enforced");
    }

    #[test]
    fn refuses_colocations_whose_members_were_removed() {
        let mut store = Store::open_in_memory().unwrap();
        store.import_colocations(&[colocation(&[("a", 1.0), ("b", 2.0), ("c", 3.0)])], "s").unwrap();
        store.conn.execute("DELETE FROM colocation_members WHERE position = 1", []).unwrap();
        let message = store.load_colocations().unwrap_err().to_string();
        assert_one_line(&message, &["loading colocations", "colocation 1", "position 2 where 1 was expected"]);
        store.conn.execute("DELETE FROM colocation_members WHERE position = 2", []).unwrap();
        let message = store.load_colocations().unwrap_err().to_string();
        assert_one_line(&message, &["colocation 1", "1 stored member(s) but size 3"]);
        store.conn.execute("DELETE FROM colocation_members", []).unwrap();
        let message = store.load_colocations().unwrap_err().to_string();
        assert_one_line(&message, &["colocation 1", "0 stored member(s) but size 3"]);
    }

    #[test]
    fn deleting_a_colocation_removes_its_members() {
        let mut store = Store::open_in_memory().unwrap();
        store.import_colocations(&[colocation(&[("a", 1.0), ("b", 2.0)])], "s").unwrap();
        store.conn.execute("DELETE FROM colocations", []).unwrap();
        assert_eq!(count(&store, "colocation_members"), 0);
    }

    #[test]
    fn stores_the_real_kace_data() {
        let Some(dir) = tessera_testkit::shared_data("kace") else { return };
        let tables =
            crate::formats::kace::read_workload_tables(&dir.join("system_metrics.csv"), &dir.join("kernel_metrics"))
                .unwrap();
        let pairs = crate::formats::kace::read_colocations(&dir.join("pairs_mps100.csv")).unwrap();
        let mut store = Store::open_in_memory().unwrap();
        assert_eq!(store.import_workloads(&tables, "system_metrics.csv").unwrap(), tables.len());
        let summary = store.import_colocations(&pairs.rows, "pairs_mps100.csv").unwrap();
        assert_eq!((summary.rows, summary.members), (pairs.rows.len(), 2 * pairs.rows.len()));
        assert_eq!(store.load_colocations().unwrap(), pairs.rows);
        let workloads = store.load_workloads().unwrap();
        assert_eq!(workloads.len(), tables.len() + summary.added_workloads);
        assert!(tables.iter().all(|table| workloads.contains(table)));
        let measured: HashSet<&str> =
            pairs.rows.iter().flat_map(|row| &row.members).map(|m| m.metrics.workload.as_str()).collect();
        assert!(measured.iter().all(|name| workloads.iter().any(|w| w.workload == *name)));
    }
}
