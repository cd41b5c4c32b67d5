//! The `workloads` table: each workload's metrics alone, one row per
//! name.

use std::collections::HashSet;

use tessera_core::colocation::WorkloadMetrics;

use super::metric_columns::{bind, insert_workload_sql, metric_values, read_metrics, METRIC_COLUMNS};
use super::Store;
use crate::error::StoreError;

/// The `imports.format` recorded by [`Store::import_workloads`].
const WORKLOADS_FORMAT: &str = "kace-workloads";

impl Store {
    /// Stores the metrics of `workloads` in one transaction, recording
    /// `source` (e.g. the workload tables imported) with format
    /// `kace-workloads`. A workload already stored under the same name is
    /// replaced; a name given twice keeps its last metrics. Returns the
    /// number of distinct workloads written. On any failure nothing is
    /// changed.
    pub fn import_workloads(&mut self, workloads: &[WorkloadMetrics], source: &str) -> Result<usize, StoreError> {
        let path = self.path.clone();
        let sqlite = |context: String| {
            let path = path.clone();
            move |error| StoreError::sqlite(&path, context, error)
        };
        let written = workloads.iter().map(|w| w.workload.as_str()).collect::<HashSet<_>>().len();
        let transaction = self.conn.transaction().map_err(sqlite(format!("starting the import of '{source}'")))?;
        let import_id = super::record_import(&transaction, source, WORKLOADS_FORMAT, written)
            .map_err(sqlite(format!("recording the import of '{source}'")))?;
        {
            let updates: Vec<String> = METRIC_COLUMNS
                .iter()
                .chain(&["import_id"])
                .map(|column| format!("{column} = excluded.{column}"))
                .collect();
            let mut upsert = transaction
                .prepare(&format!("{} ON CONFLICT (name) DO UPDATE SET {}", insert_workload_sql(), updates.join(", ")))
                .map_err(sqlite(format!("preparing the import of '{source}'")))?;
            let mut taken_over = transaction
                .prepare("DELETE FROM kernel_metrics WHERE name = ?1")
                .map_err(sqlite(format!("preparing the import of '{source}'")))?;
            for workload in workloads {
                let values = metric_values(workload);
                upsert
                    .execute(bind(&workload.workload, &values, &import_id).as_slice())
                    .map_err(sqlite(format!("storing workload '{}' from '{source}'", workload.workload)))?;
                taken_over
                    .execute([&workload.workload])
                    .map_err(sqlite(format!("storing workload '{}' from '{source}'", workload.workload)))?;
            }
        }
        transaction.commit().map_err(sqlite(format!("committing the import of '{source}'")))?;
        Ok(written)
    }

    /// Every stored workload's metrics, sorted by name.
    pub fn load_workloads(&self) -> Result<Vec<WorkloadMetrics>, StoreError> {
        let context = "loading workloads";
        let mut statement = self
            .conn
            .prepare(&format!("SELECT name, {} FROM workloads ORDER BY name", METRIC_COLUMNS.join(", ")))
            .map_err(|error| self.sqlite(context, error))?;
        let workloads = statement
            .query_map([], |row| read_metrics(row, 1, row.get(0)?))
            .map_err(|error| self.sqlite(context, error))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|error| self.sqlite(context, error))?;
        Ok(workloads)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::fixtures::{count, metrics};

    #[test]
    fn workloads_round_trip_sorted_by_name_and_upsert() {
        let mut store = Store::open_in_memory().unwrap();
        let (b, a, c) = (metrics("b_batch8-inf", 1.0), metrics("a_batch2-train", 2.0), metrics("c", 3.0));
        let written = store.import_workloads(&[b.clone(), a.clone(), c.clone()], "system_metrics.csv").unwrap();
        assert_eq!(written, 3);
        assert_eq!(store.load_workloads().unwrap(), vec![a.clone(), b.clone(), c.clone()]);

        let newer_b = metrics("b_batch8-inf", 9.0);
        let written = store.import_workloads(std::slice::from_ref(&newer_b), "again.csv").unwrap();
        assert_eq!(written, 1);
        assert_eq!(store.load_workloads().unwrap(), vec![a, newer_b, c]);
        let format: String = store
            .conn
            .query_row("SELECT format FROM imports WHERE source = 'again.csv'", [], |row| row.get(0))
            .unwrap();
        assert_eq!(format, "kace-workloads");
        assert_eq!(count(&store, "imports"), 2);
    }

    #[test]
    fn a_name_given_twice_keeps_its_last_metrics() {
        let mut store = Store::open_in_memory().unwrap();
        let last = metrics("a", 2.0);
        assert_eq!(store.import_workloads(&[metrics("a", 1.0), last.clone()], "s").unwrap(), 1);
        assert_eq!(store.load_workloads().unwrap(), vec![last]);
    }
}
