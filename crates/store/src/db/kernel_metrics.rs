//! The `kernel_metrics` table: a workload's kernel metrics (Nsight
//! Compute), kept apart until its metrics alone are stored.

use rusqlite::types::ToSql;
use rusqlite::OptionalExtension;

use super::metric_columns::METRIC_COLUMNS;
use super::Store;
use crate::error::StoreError;

/// The `imports.format` recorded by [`Store::store_kernel_metrics`].
const KERNEL_FORMAT: &str = "ncu-kernel-metrics";

/// Where [`Store::store_kernel_metrics`] put a workload's kernel metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelMetricsStored {
    /// With its stored metrics alone (replacing their kernel metrics).
    WithMetricsAlone,
    /// Kept for it until its metrics alone are stored (`tessera profile
    /// run`), which takes them over.
    AwaitingMetricsAlone,
}

impl Store {
    /// Stores `workload`'s six kernel metrics in one transaction, recording
    /// `source`: with its metrics alone when they are stored, else kept
    /// apart until they are (see [`Store::kernel_metrics_awaiting`]), so a
    /// report can be imported on a machine without a GPU, for a workload
    /// registered or not. Negative or NaN values are refused.
    pub fn store_kernel_metrics(
        &mut self,
        workload: &str,
        kernel: &[f64; 6],
        source: &str,
    ) -> Result<KernelMetricsStored, StoreError> {
        let path = self.path.clone();
        let sqlite = |context: String| {
            let path = path.clone();
            move |error| StoreError::sqlite(&path, context, error)
        };
        let about = |what: &str| format!("{what} the kernel metrics of '{workload}' from '{source}'");
        let transaction = self.conn.transaction().map_err(sqlite(about("starting to store")))?;
        let import_id =
            super::record_import(&transaction, source, KERNEL_FORMAT, 1).map_err(sqlite(about("recording")))?;
        let kernel_columns = &METRIC_COLUMNS[..6];
        let set: Vec<String> =
            kernel_columns.iter().enumerate().map(|(i, column)| format!("{column} = ?{}", i + 2)).collect();
        let mut bound: Vec<&dyn ToSql> = vec![&workload];
        bound.extend(kernel.iter().map(|value| value as &dyn ToSql));
        bound.push(&import_id);
        let updated = transaction
            .execute(
                &format!("UPDATE workloads SET {}, import_id = ?8 WHERE name = ?1", set.join(", ")),
                bound.as_slice(),
            )
            .map_err(sqlite(about("storing")))?;
        let stored = if updated == 1 {
            KernelMetricsStored::WithMetricsAlone
        } else {
            let updates: Vec<String> = kernel_columns
                .iter()
                .chain(&["import_id"])
                .map(|column| format!("{column} = excluded.{column}"))
                .collect();
            transaction
                .execute(
                    &format!(
                        "INSERT INTO kernel_metrics (name, {}, import_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) \
                         ON CONFLICT (name) DO UPDATE SET {}",
                        kernel_columns.join(", "),
                        updates.join(", ")
                    ),
                    bound.as_slice(),
                )
                .map_err(sqlite(about("storing")))?;
            KernelMetricsStored::AwaitingMetricsAlone
        };
        transaction.commit().map_err(sqlite(about("committing")))?;
        Ok(stored)
    }

    /// The kernel metrics stored for `workload` while it has no metrics
    /// alone (see [`Store::store_kernel_metrics`]).
    pub fn kernel_metrics_awaiting(&self, workload: &str) -> Result<Option<[f64; 6]>, StoreError> {
        let context = format!("reading the kernel metrics of '{workload}'");
        self.conn
            .query_row(
                &format!("SELECT {} FROM kernel_metrics WHERE name = ?1", METRIC_COLUMNS[..6].join(", ")),
                [workload],
                |row| {
                    let mut kernel = [0.0; 6];
                    for (i, value) in kernel.iter_mut().enumerate() {
                        *value = row.get(i)?;
                    }
                    Ok(kernel)
                },
            )
            .optional()
            .map_err(|error| self.sqlite(&context, error))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::fixtures::{count, metrics};
    use tessera_core::colocation::WorkloadMetrics;

    #[test]
    fn kernel_metrics_wait_for_the_metrics_alone_and_join_them() {
        let mut store = Store::open_in_memory().unwrap();
        let kernel = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        // No metrics alone yet: kept apart, not a workload.
        let stored = store.store_kernel_metrics("w", &kernel, "report.csv").unwrap();
        assert_eq!(stored, KernelMetricsStored::AwaitingMetricsAlone);
        assert_eq!(store.kernel_metrics_awaiting("w").unwrap(), Some(kernel));
        assert!(store.load_workloads().unwrap().is_empty());
        let again = [7.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        store.store_kernel_metrics("w", &again, "report2.csv").unwrap();
        assert_eq!(store.kernel_metrics_awaiting("w").unwrap(), Some(again));
        // The metrics alone take them over.
        store.import_workloads(&[WorkloadMetrics { kernel: again, ..metrics("w", 1.0) }], "run").unwrap();
        assert_eq!(store.kernel_metrics_awaiting("w").unwrap(), None);
        assert_eq!(count(&store, "kernel_metrics"), 0);
        // With metrics alone stored, the kernel metrics replace theirs.
        let stored = store.store_kernel_metrics("w", &kernel, "report3.csv").unwrap();
        assert_eq!(stored, KernelMetricsStored::WithMetricsAlone);
        let workloads = store.load_workloads().unwrap();
        assert_eq!(workloads, vec![WorkloadMetrics { kernel, ..metrics("w", 1.0) }]);
        assert!(store.store_kernel_metrics("v", &[-1.0, 0.0, 0.0, 0.0, 0.0, 0.0], "bad").is_err());
        assert_eq!(store.kernel_metrics_awaiting("v").unwrap(), None);
    }
}
