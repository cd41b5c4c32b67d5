//! Importing, loading and listing profiles in the store.

use std::collections::HashSet;

use rusqlite::{params, Connection, OptionalExtension, Params};
use tessera_core::{BatchTiming, GpuModel, ModelProfile, ProfileCatalog, ProfilePoint, SegmentConfig};

use super::Store;
use crate::error::StoreError;

/// What one import did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportSummary {
    /// The id of the `imports` row recording it.
    pub import_id: i64,
    /// (GPU model, model) profiles written.
    pub models: usize,
    /// Profile points written.
    pub points: usize,
    /// Profiles that already existed and whose old points were replaced.
    pub replaced_models: usize,
}

/// One stored profile, summarised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileSummary {
    /// The GPU model it was measured on.
    pub gpu_model: GpuModel,
    /// The model name.
    pub model: String,
    /// Number of feasible points stored.
    pub points: usize,
    /// The instance sizes (GPCs) present, smallest first.
    pub sizes_gpcs: Vec<u8>,
    /// The source (file or folder) of the import that wrote it.
    pub source: String,
    /// When that import ran, UTC RFC 3339 (e.g. `2025-01-31T12:00:00Z`).
    pub imported_at: String,
}

impl Store {
    /// Stores `profiles` in one transaction, recording `source` (e.g. the
    /// file imported) and `format` (e.g. `parvagpu`). A profile whose
    /// (GPU model, model) is already stored replaces all its old points. On
    /// any failure nothing is changed.
    pub fn import_profiles(
        &mut self,
        profiles: &[ModelProfile],
        source: &str,
        format: &str,
    ) -> Result<ImportSummary, StoreError> {
        let mut seen = HashSet::new();
        if let Some(twice) = profiles.iter().find(|p| !seen.insert((p.gpu_model, p.model.as_str()))) {
            return Err(StoreError::DuplicateProfile {
                path: self.path.clone(),
                source_name: source.to_string(),
                gpu: twice.gpu_model.id().to_string(),
                model: twice.model.clone(),
            });
        }
        let path = self.path.clone();
        let sqlite = |context: String| {
            let path = path.clone();
            move |error| StoreError::sqlite(&path, context, error)
        };
        let about = |what: &str, profile: &ModelProfile| {
            format!("{what} of model '{}' on {}", profile.model, profile.gpu_model)
        };
        let points: usize = profiles.iter().map(|p| p.points().len()).sum();
        let transaction = self.conn.transaction().map_err(sqlite(format!("starting the import of '{source}'")))?;
        let import_id = super::record_import(&transaction, source, format, points)
            .map_err(sqlite(format!("recording the import of '{source}'")))?;
        let mut replaced_models = 0;
        {
            let preparing = || sqlite(format!("preparing the import of '{source}'"));
            let mut delete =
                transaction.prepare("DELETE FROM profiles WHERE gpu_model = ?1 AND model = ?2").map_err(preparing())?;
            let mut insert = transaction
                .prepare(
                    "INSERT INTO profiles (gpu_model, model, size_gpcs, batch, procs, \
                     throughput_rps, latency_ms, memory_gb, import_id, \
                     latency_p50_ms, latency_p99_ms, dispatch_gap_ms, serving_slowdown) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
                )
                .map_err(preparing())?;
            for profile in profiles {
                let removed = delete
                    .execute(params![profile.gpu_model.id(), profile.model])
                    .map_err(sqlite(about("removing the old points", profile)))?;
                if removed > 0 {
                    replaced_models += 1;
                }
                for point in profile.points() {
                    insert
                        .execute(params![
                            profile.gpu_model.id(),
                            profile.model,
                            point.config.size_gpcs,
                            point.config.batch,
                            point.config.procs,
                            point.throughput_rps,
                            point.latency_ms,
                            point.memory_gb,
                            import_id,
                            point.timing.latency_p50_ms,
                            point.timing.latency_p99_ms,
                            point.timing.dispatch_gap_ms,
                            point.timing.serving_slowdown,
                        ])
                        .map_err(sqlite(about(&format!("inserting point {}", point.config), profile)))?;
                }
            }
        }
        transaction.commit().map_err(sqlite(format!("committing the import of '{source}'")))?;
        Ok(ImportSummary { import_id, models: profiles.len(), points, replaced_models })
    }

    /// Every stored profile, or only those measured on `gpu`.
    pub fn load_catalog(&self, gpu: Option<GpuModel>) -> Result<ProfileCatalog, StoreError> {
        let context = "loading profiles";
        let mut statement = self
            .conn
            .prepare(
                "SELECT gpu_model, model, size_gpcs, batch, procs, throughput_rps, \
                 latency_ms, memory_gb, latency_p50_ms, latency_p99_ms, dispatch_gap_ms, \
                 serving_slowdown FROM profiles \
                 WHERE ?1 IS NULL OR gpu_model = ?1 \
                 ORDER BY gpu_model, model, size_gpcs, batch, procs",
            )
            .map_err(|error| self.sqlite(context, error))?;
        let rows = statement
            .query_map([gpu.map(GpuModel::id)], |row| {
                Ok(StoredPoint {
                    gpu: row.get(0)?,
                    model: row.get(1)?,
                    config: SegmentConfig { size_gpcs: row.get(2)?, batch: row.get(3)?, procs: row.get(4)? },
                    throughput_rps: row.get(5)?,
                    latency_ms: row.get(6)?,
                    memory_gb: row.get(7)?,
                    timing: BatchTiming {
                        latency_p50_ms: row.get(8)?,
                        latency_p99_ms: row.get(9)?,
                        dispatch_gap_ms: row.get(10)?,
                        serving_slowdown: row.get(11)?,
                    },
                })
            })
            .map_err(|error| self.sqlite(context, error))?;

        let mut catalog = ProfileCatalog::new();
        let mut current: Option<(String, String, Vec<ProfilePoint>)> = None;
        for row in rows {
            let row = row.map_err(|error| self.sqlite(context, error))?;
            let point = ProfilePoint::new(row.config, row.throughput_rps, row.latency_ms, row.memory_gb)
                .and_then(|point| point.with_timing(row.timing))
                .map_err(|error| self.corrupt(&row.gpu, &row.model, error))?;
            match &mut current {
                Some((gpu, model, points)) if *gpu == row.gpu && *model == row.model => {
                    points.push(point);
                }
                _ => {
                    if let Some(done) = current.take() {
                        catalog.insert(self.profile(done)?);
                    }
                    current = Some((row.gpu, row.model, vec![point]));
                }
            }
        }
        if let Some(done) = current {
            catalog.insert(self.profile(done)?);
        }
        Ok(catalog)
    }

    /// A summary of every stored profile, ordered by GPU model id and model.
    pub fn list_profiles(&self) -> Result<Vec<ProfileSummary>, StoreError> {
        let context = "listing profiles";
        let mut statement = self
            .conn
            .prepare(
                "SELECT p.gpu_model, p.model, COUNT(*), group_concat(DISTINCT p.size_gpcs), \
                 MAX(p.import_id) FROM profiles p GROUP BY p.gpu_model, p.model \
                 ORDER BY p.gpu_model, p.model",
            )
            .map_err(|error| self.sqlite(context, error))?;
        let rows = statement
            .query_map([], |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, i64>(2)?,
                    row.get::<_, String>(3)?,
                    row.get::<_, i64>(4)?,
                ))
            })
            .map_err(|error| self.sqlite(context, error))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|error| self.sqlite(context, error))?;
        let mut summaries = Vec::with_capacity(rows.len());
        for (gpu_id, model, points, sizes, import_id) in rows {
            let gpu = gpu_id.parse().map_err(|error| self.corrupt(&gpu_id, &model, error))?;
            let mut sizes_gpcs = sizes
                .split(',')
                .map(str::parse)
                .collect::<Result<Vec<u8>, _>>()
                .map_err(|error| self.corrupt(&gpu_id, &model, error))?;
            sizes_gpcs.sort_unstable();
            let (source, imported_at) = self
                .conn
                .query_row("SELECT source, imported_at FROM imports WHERE id = ?1", [import_id], |row| {
                    Ok((row.get(0)?, row.get(1)?))
                })
                .optional()
                .map_err(|error| self.sqlite(context, error))?
                .unwrap_or_default();
            summaries.push(ProfileSummary {
                gpu_model: gpu,
                model,
                points: points as usize,
                sizes_gpcs,
                source,
                imported_at,
            });
        }
        Ok(summaries)
    }

    /// Removes the profile of `model` on `gpu` (all its points) in one
    /// transaction; returns the number of points removed. A profile that is
    /// not stored is an error listing the models stored on `gpu`.
    pub fn remove_profile(&mut self, gpu: GpuModel, model: &str) -> Result<usize, StoreError> {
        let path = self.path.clone();
        let context = format!("removing the profile of model '{model}' on {gpu}");
        let sqlite = |error| StoreError::sqlite(&path, context.clone(), error);
        let transaction = self.conn.transaction().map_err(sqlite)?;
        let removed = transaction
            .execute("DELETE FROM profiles WHERE gpu_model = ?1 AND model = ?2", params![gpu.id(), model])
            .map_err(sqlite)?;
        if removed == 0 {
            let models = names(
                &transaction,
                "SELECT DISTINCT model FROM profiles WHERE gpu_model = ?1 ORDER BY model",
                [gpu.id()],
            )
            .map_err(sqlite)?;
            return Err(StoreError::NotStored {
                path: self.path.clone(),
                what: format!("profile of model '{model}' on {gpu}"),
                known: known(&models, &format!("profiles on {gpu}")),
            });
        }
        transaction.commit().map_err(sqlite)?;
        Ok(removed)
    }

    /// Builds a validated profile from stored rows.
    fn profile(
        &self,
        (gpu_id, model, points): (String, String, Vec<ProfilePoint>),
    ) -> Result<ModelProfile, StoreError> {
        let gpu: GpuModel = gpu_id.parse().map_err(|error| self.corrupt(&gpu_id, &model, error))?;
        ModelProfile::new(gpu, model.as_str(), points).map_err(|error| self.corrupt(&gpu_id, &model, error))
    }

    /// Stored data the domain model rejects.
    fn corrupt(&self, gpu: &str, model: &str, detail: impl ToString) -> StoreError {
        StoreError::Corrupt {
            path: self.path.clone(),
            gpu: gpu.to_string(),
            model: model.to_string(),
            detail: detail.to_string(),
        }
    }
}

/// The first column of every row `sql` selects with `params`, as text.
pub(crate) fn names(conn: &Connection, sql: &str, params: impl Params) -> rusqlite::Result<Vec<String>> {
    let mut statement = conn.prepare(sql)?;
    let rows = statement.query_map(params, |row| row.get::<_, String>(0))?;
    rows.collect()
}

/// The names a store holds, comma-separated, or `no <kind>` when none.
pub(crate) fn known(names: &[String], kind: &str) -> String {
    if names.is_empty() {
        format!("no {kind}")
    } else {
        names.join(", ")
    }
}

/// One row of the `profiles` table.
struct StoredPoint {
    gpu: String,
    model: String,
    config: SegmentConfig,
    throughput_rps: f64,
    latency_ms: f64,
    memory_gb: Option<f64>,
    timing: BatchTiming,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(gpu: GpuModel, model: &str, sizes: &[u8]) -> ModelProfile {
        let points = sizes
            .iter()
            .map(|&size_gpcs| {
                let config = SegmentConfig { size_gpcs, batch: 4, procs: 1 };
                ProfilePoint::new(config, 10.0 * f64::from(size_gpcs), 5.5, Some(1.25)).unwrap()
            })
            .collect();
        ModelProfile::new(gpu, model, points).unwrap()
    }

    #[test]
    fn imports_loads_and_lists_profiles() {
        let mut store = Store::open_in_memory().unwrap();
        let bert = profile(GpuModel::A100_80GB, "bert", &[1, 3, 7]);
        let vgg = profile(GpuModel::A100_80GB, "vgg16", &[2]);
        let a30 = profile(GpuModel::A30_24GB, "bert", &[4]);
        let summary = store.import_profiles(&[bert.clone(), vgg.clone(), a30.clone()], "prof/", "parvagpu").unwrap();
        assert_eq!((summary.models, summary.points, summary.replaced_models), (3, 5, 0));
        let catalog = store.load_catalog(None).unwrap();
        assert_eq!(catalog.len(), 3);
        assert_eq!(catalog.get(GpuModel::A100_80GB, "bert"), Some(&bert));
        assert_eq!(catalog.get(GpuModel::A30_24GB, "bert"), Some(&a30));
        let only_a30 = store.load_catalog(Some(GpuModel::A30_24GB)).unwrap();
        assert_eq!(only_a30.iter().collect::<Vec<_>>(), vec![&a30]);

        let list = store.list_profiles().unwrap();
        assert_eq!(list.len(), 3);
        assert_eq!(list[0].model, "bert");
        assert_eq!(list[0].gpu_model, GpuModel::A100_80GB);
        assert_eq!(list[0].points, 3);
        assert_eq!(list[0].sizes_gpcs, vec![1, 3, 7]);
        assert_eq!(list[0].source, "prof/");
        let stamp = &list[0].imported_at;
        assert!(stamp.len() == 20 && stamp.ends_with('Z') && stamp.contains('T'), "{stamp}");
    }

    #[test]
    fn batch_timing_is_stored_and_loaded() {
        let mut store = Store::open_in_memory().unwrap();
        let mut timed = profile(GpuModel::H200_141GB, "bert", &[1, 7]);
        let timing = BatchTiming {
            latency_p50_ms: Some(5.4),
            latency_p99_ms: Some(5.9),
            dispatch_gap_ms: Some(0.012),
            serving_slowdown: Some(-0.001),
        };
        let points = timed.points().iter().map(|point| point.with_timing(timing).unwrap()).collect();
        timed = ModelProfile::new(timed.gpu_model, "bert", points).unwrap();
        store.import_profiles(std::slice::from_ref(&timed), "h200.csv", "native").unwrap();
        assert_eq!(store.load_catalog(None).unwrap().get(GpuModel::H200_141GB, "bert"), Some(&timed));
    }

    #[test]
    fn a_new_import_replaces_all_points_of_a_model() {
        let mut store = Store::open_in_memory().unwrap();
        store.import_profiles(&[profile(GpuModel::A100_80GB, "bert", &[1, 3, 7])], "a", "native").unwrap();
        let newer = profile(GpuModel::A100_80GB, "bert", &[2]);
        let summary = store.import_profiles(std::slice::from_ref(&newer), "b", "native").unwrap();
        assert_eq!(summary.replaced_models, 1);
        let catalog = store.load_catalog(None).unwrap();
        assert_eq!(catalog.get(GpuModel::A100_80GB, "bert"), Some(&newer));
        assert_eq!(store.list_profiles().unwrap()[0].source, "b");
    }

    #[test]
    fn a_failed_import_changes_nothing() {
        let mut store = Store::open_in_memory().unwrap();
        let original = profile(GpuModel::A100_80GB, "bert", &[1]);
        store.import_profiles(std::slice::from_ref(&original), "a", "native").unwrap();
        store
            .conn
            .execute_batch(
                "CREATE TRIGGER fail_vgg BEFORE INSERT ON profiles WHEN NEW.model = 'vgg16' \
                 BEGIN SELECT RAISE(ABORT, 'injected failure'); END;",
            )
            .unwrap();
        let error = store
            .import_profiles(
                &[profile(GpuModel::A100_80GB, "bert", &[7]), profile(GpuModel::A100_80GB, "vgg16", &[2])],
                "b",
                "native",
            )
            .unwrap_err();
        let message = error.to_string();
        assert!(message.contains(":memory:") && message.contains("vgg16") && !message.contains('\n'), "{message}");
        let catalog = store.load_catalog(None).unwrap();
        assert_eq!(catalog.len(), 1);
        assert_eq!(catalog.get(GpuModel::A100_80GB, "bert"), Some(&original));
        let imports: i64 = store.conn.query_row("SELECT COUNT(*) FROM imports", [], |row| row.get(0)).unwrap();
        assert_eq!(imports, 1);
    }

    #[test]
    fn rejects_a_profile_given_twice() {
        let mut store = Store::open_in_memory().unwrap();
        let bert = profile(GpuModel::A100_80GB, "bert", &[1]);
        let message = store.import_profiles(&[bert.clone(), bert], "x.csv", "native").unwrap_err().to_string();
        assert!(message.contains("bert") && message.contains("x.csv"), "{message}");
    }

    #[test]
    fn refuses_invalid_stored_rows() {
        let mut store = Store::open_in_memory().unwrap();
        store.import_profiles(&[profile(GpuModel::A100_80GB, "bert", &[1])], "a", "native").unwrap();
        store.conn.execute("UPDATE profiles SET gpu_model = 'v100'", []).unwrap();
        let message = store.load_catalog(None).unwrap_err().to_string();
        assert!(message.contains("v100") && message.contains("bert"), "{message}");
    }

    #[test]
    fn removes_one_profile_or_says_what_is_stored() {
        let mut store = Store::open_in_memory().unwrap();
        let (bert, vgg) = (profile(GpuModel::A100_80GB, "bert", &[1, 3]), profile(GpuModel::A100_80GB, "vgg16", &[2]));
        let a30 = profile(GpuModel::A30_24GB, "bert", &[4]);
        store.import_profiles(&[bert, vgg.clone(), a30.clone()], "p", "native").unwrap();
        assert_eq!(store.remove_profile(GpuModel::A100_80GB, "bert").unwrap(), 2);
        let catalog = store.load_catalog(None).unwrap();
        assert_eq!(catalog.iter().collect::<Vec<_>>(), vec![&vgg, &a30]);
        let message = store.remove_profile(GpuModel::A100_80GB, "bert").unwrap_err().to_string();
        assert_eq!(message, ":memory:: no profile of model 'bert' on a100-80gb in the store (it holds: vgg16)");
        let message = store.remove_profile(GpuModel::H100_80GB, "bert").unwrap_err().to_string();
        assert!(message.ends_with("(it holds: no profiles on h100-80gb)"), "{message}");
        assert_eq!(store.load_catalog(None).unwrap().len(), 2);
    }

    #[test]
    fn the_schema_checks_values() {
        let store = Store::open_in_memory().unwrap();
        store.conn.execute(r#"INSERT INTO imports (source, format, "rows") VALUES ('s', 'f', 0)"#, []).unwrap();
        let bad =
            store.conn.execute("INSERT INTO profiles VALUES ('a100-80gb', 'bert', 1, 0, 1, 1.0, 1.0, NULL, 1)", []);
        assert!(bad.is_err());
        let orphan =
            store.conn.execute("INSERT INTO profiles VALUES ('a100-80gb', 'bert', 1, 1, 1, 1.0, 1.0, NULL, 42)", []);
        assert!(orphan.is_err(), "foreign key not enforced");
    }

    #[test]
    fn stores_the_real_parvagpu_profiles() {
        let Some(dir) = tessera_testkit::shared_data("parvagpu/prof_data") else { return };
        let import = crate::formats::parvagpu::read_profile_dir(&dir, GpuModel::A100_80GB).unwrap();
        let mut store = Store::open_in_memory().unwrap();
        let expected = import.catalog();
        let profiles: Vec<_> = expected.iter().cloned().collect();
        let summary = store.import_profiles(&profiles, &dir.display().to_string(), "parvagpu").unwrap();
        assert_eq!(summary.models, 11);
        let catalog = store.load_catalog(Some(GpuModel::A100_80GB)).unwrap();
        assert_eq!(catalog, expected);
    }
}
