//! The service's own tables: tenants' services (SLOs with an image and
//! arguments where known) under a version for optimistic concurrency, and
//! planning jobs with their inputs and plans.
//!
//! Every change of a service checks the version its writer read inside one
//! immediate transaction, so of two writers that read the same version one
//! wins and the other is told the version it missed — never last writer
//! wins. A job's request and inputs are JSON documents whose schema belongs
//! to the caller (the HTTP service); its plan is the plan JSON document.

use rusqlite::{params, OptionalExtension, TransactionBehavior};
use tessera_core::{Plan, ServiceSlo};

use super::Store;
use crate::error::StoreError;
use crate::formats::plan::{parse_plan_json, plan_json};

/// A service as the store keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredService {
    /// The objective (service name, model, rate, latency).
    pub slo: ServiceSlo,
    /// The container image that runs it, if known.
    pub image: Option<String>,
    /// The arguments it runs with, if any.
    pub args: Vec<String>,
    /// Starts at 1, one more with every update.
    pub version: u64,
    /// When it was last written (UTC, ISO 8601).
    pub updated_at: String,
}

/// What a planning job is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobStatus {
    /// Waiting for a worker.
    Queued,
    /// Being planned.
    Running,
    /// Planned: the job holds its plan.
    Done,
    /// Failed: the job holds the reason.
    Failed,
}

impl JobStatus {
    /// The status as stored and as the API spells it.
    pub fn name(self) -> &'static str {
        match self {
            JobStatus::Queued => "queued",
            JobStatus::Running => "running",
            JobStatus::Done => "done",
            JobStatus::Failed => "failed",
        }
    }

    fn parse(text: &str) -> Option<JobStatus> {
        [JobStatus::Queued, JobStatus::Running, JobStatus::Done, JobStatus::Failed]
            .into_iter()
            .find(|status| status.name() == text)
    }
}

/// A planning job as the store keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredJob {
    /// The job's (and its plan's) id.
    pub id: u64,
    /// What it is doing.
    pub status: JobStatus,
    /// What was asked (JSON, the caller's schema).
    pub request: String,
    /// What it plans from (JSON, the caller's schema), kept so the plan can
    /// be verified again later.
    pub inputs: String,
    /// The plan, once done.
    pub plan: Option<Plan>,
    /// Why it failed, once failed.
    pub error: Option<String>,
    /// When it was submitted, started and finished (UTC, ISO 8601).
    pub created_at: String,
    /// When a worker started it.
    pub started_at: Option<String>,
    /// When it finished.
    pub finished_at: Option<String>,
}

/// The columns of a service, in [`service_from_row`]'s order.
const SERVICE_COLUMNS: &str = "name, model, rate_rps, latency_ms, image, args, version, updated_at, percentile";

/// The columns of a job, in [`job_from_row`]'s order.
const JOB_COLUMNS: &str = "id, status, request, inputs, plan, error, created_at, started_at, finished_at";

impl Store {
    /// Every service, by name.
    pub fn list_services(&self) -> Result<Vec<StoredService>, StoreError> {
        let context = "listing services";
        let mut statement = self
            .conn
            .prepare_cached(&format!("SELECT {SERVICE_COLUMNS} FROM services ORDER BY name"))
            .map_err(|e| self.sqlite(context, e))?;
        let rows = statement.query_map([], raw_service).map_err(|e| self.sqlite(context, e))?;
        let mut services = Vec::new();
        for row in rows {
            services.push(self.service_from_row(row.map_err(|e| self.sqlite(context, e))?)?);
        }
        Ok(services)
    }

    /// The service `name`, if stored.
    pub fn service(&self, name: &str) -> Result<Option<StoredService>, StoreError> {
        let raw = self
            .conn
            .prepare_cached(&format!("SELECT {SERVICE_COLUMNS} FROM services WHERE name = ?1"))
            .and_then(|mut statement| statement.query_row([name], raw_service).optional())
            .map_err(|e| self.sqlite("reading a service", e))?;
        raw.map(|raw| self.service_from_row(raw)).transpose()
    }

    /// Stores a new service at version 1; one of that name already stored is
    /// an error ([`StoreError::ServiceExists`]).
    pub fn create_service(
        &mut self,
        slo: &ServiceSlo,
        image: Option<&str>,
        args: &[String],
    ) -> Result<StoredService, StoreError> {
        self.write_service(&slo.service, |transaction, found, path| match found {
            Some(_) => Err(StoreError::ServiceExists { path: path.to_path_buf(), service: slo.service.clone() }),
            None => transaction
                .execute(
                    "INSERT INTO services (name, model, rate_rps, latency_ms, image, args, version, percentile) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, 1, ?7)",
                    params![
                        slo.service,
                        slo.model,
                        slo.rate_rps,
                        slo.latency_slo_ms,
                        image,
                        args_json(args),
                        slo.percentile
                    ],
                )
                .map(drop)
                .map_err(|e| StoreError::sqlite(path, "creating a service", e)),
        })?;
        self.stored_service(&slo.service)
    }

    /// Replaces service `slo.service`, which must be stored at
    /// `expected_version` ([`StoreError::VersionConflict`] otherwise,
    /// [`StoreError::NotFound`] when absent); its version goes up by one.
    pub fn update_service(
        &mut self,
        slo: &ServiceSlo,
        image: Option<&str>,
        args: &[String],
        expected_version: u64,
    ) -> Result<StoredService, StoreError> {
        self.write_service(&slo.service, |transaction, found, path| {
            check_version(path, &slo.service, found, expected_version)?;
            transaction
                .execute(
                    "UPDATE services SET model = ?2, rate_rps = ?3, latency_ms = ?4, image = ?5, args = ?6, \
                     percentile = ?7, version = version + 1, updated_at = strftime('%Y-%m-%dT%H:%M:%SZ', 'now') \
                     WHERE name = ?1",
                    params![
                        slo.service,
                        slo.model,
                        slo.rate_rps,
                        slo.latency_slo_ms,
                        image,
                        args_json(args),
                        slo.percentile
                    ],
                )
                .map(drop)
                .map_err(|e| StoreError::sqlite(path, "updating a service", e))
        })?;
        self.stored_service(&slo.service)
    }

    /// Removes service `name`, which must be stored at `expected_version`.
    pub fn delete_service(&mut self, name: &str, expected_version: u64) -> Result<(), StoreError> {
        self.write_service(name, |transaction, found, path| {
            check_version(path, name, found, expected_version)?;
            transaction
                .execute("DELETE FROM services WHERE name = ?1", [name])
                .map(drop)
                .map_err(|e| StoreError::sqlite(path, "removing a service", e))
        })
    }

    /// Runs `change` inside an immediate transaction with the version of
    /// service `name` read in it (`None` when absent), and commits.
    fn write_service(
        &mut self,
        name: &str,
        change: impl FnOnce(&rusqlite::Transaction<'_>, Option<u64>, &std::path::Path) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let path = self.path.clone();
        let transaction = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| StoreError::sqlite(&path, "starting a write", e))?;
        let found: Option<i64> = transaction
            .query_row("SELECT version FROM services WHERE name = ?1", [name], |row| row.get(0))
            .optional()
            .map_err(|e| StoreError::sqlite(&path, "reading a service's version", e))?;
        change(&transaction, found.map(i64::unsigned_abs), &path)?;
        transaction.commit().map_err(|e| StoreError::sqlite(&path, "committing a service", e))
    }

    /// The service `name`, which was just written.
    fn stored_service(&self, name: &str) -> Result<StoredService, StoreError> {
        self.service(name)?.ok_or_else(|| self.not_found(format!("service '{name}'")))
    }

    /// A [`StoreError::NotFound`] of `what` in this store.
    fn not_found(&self, what: String) -> StoreError {
        StoreError::NotFound { path: self.path.clone(), what }
    }

    fn service_from_row(&self, raw: RawService) -> Result<StoredService, StoreError> {
        let corrupt = |detail: String| StoreError::CorruptRow {
            path: self.path.clone(),
            what: format!("service '{}'", raw.name),
            detail,
        };
        let slo = ServiceSlo::new(raw.name.clone(), raw.model, raw.rate_rps, raw.latency_ms)
            .and_then(|slo| slo.with_percentile(raw.percentile))
            .map_err(|e| corrupt(e.to_string()))?;
        let args: Vec<String> = serde_json::from_str(&raw.args).map_err(|e| corrupt(format!("field 'args': {e}")))?;
        Ok(StoredService {
            slo,
            image: raw.image,
            args,
            version: raw.version.unsigned_abs(),
            updated_at: raw.updated_at,
        })
    }

    /// Records a queued planning job with its `request` and `inputs` (JSON
    /// documents); returns its id.
    pub fn insert_job(&mut self, request: &str, inputs: &str) -> Result<u64, StoreError> {
        self.conn
            .execute("INSERT INTO plan_jobs (status, request, inputs) VALUES ('queued', ?1, ?2)", [request, inputs])
            .map_err(|e| self.sqlite("recording a planning job", e))?;
        Ok(self.conn.last_insert_rowid().unsigned_abs())
    }

    /// Marks job `id` as running.
    pub fn start_job(&mut self, id: u64) -> Result<(), StoreError> {
        self.finish_transition(
            id,
            "UPDATE plan_jobs SET status = 'running', started_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') \
             WHERE id = ?1 AND status = 'queued'",
            params![id_param(id)],
        )
    }

    /// Stores `plan` as job `id`'s result.
    pub fn complete_job(&mut self, id: u64, plan: &Plan) -> Result<(), StoreError> {
        let json = String::from_utf8(plan_json(plan)).unwrap_or_else(|_| unreachable!("serde_json writes UTF-8"));
        self.finish_transition(
            id,
            "UPDATE plan_jobs SET status = 'done', plan = ?2, finished_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') \
             WHERE id = ?1 AND status IN ('queued', 'running')",
            params![id_param(id), json],
        )
    }

    /// Marks job `id` as failed because of `reason`.
    pub fn fail_job(&mut self, id: u64, reason: &str) -> Result<(), StoreError> {
        self.finish_transition(
            id,
            "UPDATE plan_jobs SET status = 'failed', error = ?2, finished_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') \
             WHERE id = ?1 AND status IN ('queued', 'running')",
            params![id_param(id), reason],
        )
    }

    /// Runs an update of job `id` that must change exactly one row.
    fn finish_transition(&mut self, id: u64, sql: &str, params: impl rusqlite::Params) -> Result<(), StoreError> {
        let changed = self.conn.execute(sql, params).map_err(|e| self.sqlite("updating a planning job", e))?;
        if changed == 1 {
            Ok(())
        } else {
            Err(self.not_found(format!("unfinished planning job {id}")))
        }
    }

    /// Marks every job still queued or running as failed because of
    /// `reason` (jobs a stopped server left behind); returns how many.
    pub fn fail_unfinished_jobs(&mut self, reason: &str) -> Result<usize, StoreError> {
        self.fail_jobs("('queued', 'running')", reason, "failing unfinished planning jobs")
    }

    /// Marks every running job failed with `reason` (the server stops
    /// without waiting for them); how many.
    pub fn fail_running_jobs(&mut self, reason: &str) -> Result<usize, StoreError> {
        self.fail_jobs("('running')", reason, "failing running planning jobs")
    }

    /// Marks every job of the `statuses` (an SQL list) failed with
    /// `reason`; how many. `what` names the step in an error.
    fn fail_jobs(&mut self, statuses: &'static str, reason: &str, what: &str) -> Result<usize, StoreError> {
        let sql = format!(
            "UPDATE plan_jobs SET status = 'failed', error = ?1, \
             finished_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE status IN {statuses}"
        );
        self.conn.execute(&sql, [reason]).map_err(|e| self.sqlite(what, e))
    }

    /// Job `id`, if stored.
    pub fn job(&self, id: u64) -> Result<Option<StoredJob>, StoreError> {
        let raw = self
            .conn
            .prepare_cached(&format!("SELECT {JOB_COLUMNS} FROM plan_jobs WHERE id = ?1"))
            .and_then(|mut statement| statement.query_row([id_param(id)], raw_job).optional())
            .map_err(|e| self.sqlite("reading a planning job", e))?;
        raw.map(|raw| self.job_from_row(raw)).transpose()
    }

    /// The newest `limit` jobs, newest first, without their inputs.
    pub fn list_jobs(&self, limit: u64) -> Result<Vec<StoredJob>, StoreError> {
        let context = "listing planning jobs";
        let mut statement = self
            .conn
            .prepare_cached(
                "SELECT id, status, request, '', plan, error, created_at, started_at, finished_at \
                 FROM plan_jobs ORDER BY id DESC LIMIT ?1",
            )
            .map_err(|e| self.sqlite(context, e))?;
        let rows = statement.query_map([id_param(limit)], raw_job).map_err(|e| self.sqlite(context, e))?;
        let mut jobs = Vec::new();
        for row in rows {
            jobs.push(self.job_from_row(row.map_err(|e| self.sqlite(context, e))?)?);
        }
        Ok(jobs)
    }

    /// The newest finished plan's job, if any.
    pub fn latest_done_job(&self) -> Result<Option<StoredJob>, StoreError> {
        let id: Option<i64> = self
            .conn
            .query_row("SELECT max(id) FROM plan_jobs WHERE status = 'done'", [], |row| row.get(0))
            .map_err(|e| self.sqlite("finding the newest plan", e))?;
        match id {
            Some(id) => self.job(id.unsigned_abs()),
            None => Ok(None),
        }
    }

    fn job_from_row(&self, raw: RawJob) -> Result<StoredJob, StoreError> {
        let what = || format!("planning job {}", raw.id);
        let status = JobStatus::parse(&raw.status).ok_or_else(|| StoreError::CorruptRow {
            path: self.path.clone(),
            what: what(),
            detail: format!("unknown status '{}'", raw.status),
        })?;
        let plan = raw
            .plan
            .map(|json| parse_plan_json(&self.path, json.as_bytes()))
            .transpose()
            .map_err(|e| StoreError::CorruptRow { path: self.path.clone(), what: what(), detail: e.to_string() })?;
        Ok(StoredJob {
            id: raw.id.unsigned_abs(),
            status,
            request: raw.request,
            inputs: raw.inputs,
            plan,
            error: raw.error,
            created_at: raw.created_at,
            started_at: raw.started_at,
            finished_at: raw.finished_at,
        })
    }
}

/// A service's columns as read.
struct RawService {
    name: String,
    model: String,
    rate_rps: f64,
    latency_ms: f64,
    image: Option<String>,
    args: String,
    version: i64,
    updated_at: String,
    percentile: f64,
}

fn raw_service(row: &rusqlite::Row<'_>) -> rusqlite::Result<RawService> {
    Ok(RawService {
        name: row.get(0)?,
        model: row.get(1)?,
        rate_rps: row.get(2)?,
        latency_ms: row.get(3)?,
        image: row.get(4)?,
        args: row.get(5)?,
        version: row.get(6)?,
        updated_at: row.get(7)?,
        percentile: row.get(8)?,
    })
}

/// A job's columns as read.
struct RawJob {
    id: i64,
    status: String,
    request: String,
    inputs: String,
    plan: Option<String>,
    error: Option<String>,
    created_at: String,
    started_at: Option<String>,
    finished_at: Option<String>,
}

fn raw_job(row: &rusqlite::Row<'_>) -> rusqlite::Result<RawJob> {
    Ok(RawJob {
        id: row.get(0)?,
        status: row.get(1)?,
        request: row.get(2)?,
        inputs: row.get(3)?,
        plan: row.get(4)?,
        error: row.get(5)?,
        created_at: row.get(6)?,
        started_at: row.get(7)?,
        finished_at: row.get(8)?,
    })
}

/// A job id as SQLite's integer (ids beyond `i64` do not exist).
fn id_param(id: u64) -> i64 {
    i64::try_from(id).unwrap_or(i64::MAX)
}

/// The arguments as the JSON array they are stored as.
fn args_json(args: &[String]) -> String {
    serde_json::to_string(args).unwrap_or_else(|_| unreachable!("strings always serialize"))
}

/// Refuses a change of service `name` stored at `found` (or absent) by a
/// writer that read `expected`.
fn check_version(path: &std::path::Path, name: &str, found: Option<u64>, expected: u64) -> Result<(), StoreError> {
    match found {
        None => Err(StoreError::NotFound { path: path.to_path_buf(), what: format!("service '{name}'") }),
        Some(found) if found != expected => {
            Err(StoreError::VersionConflict { path: path.to_path_buf(), service: name.to_string(), expected, found })
        }
        Some(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slo(name: &str, rate_rps: f64) -> ServiceSlo {
        ServiceSlo::new(name, "bert-base", rate_rps, 100.0).unwrap()
    }

    #[test]
    fn services_are_versioned_and_a_stale_writer_is_refused() {
        let mut store = Store::open_in_memory().unwrap();
        let created = store.create_service(&slo("search", 10.0), Some("img:1"), &["--fast".to_string()]).unwrap();
        assert_eq!((created.version, created.image.as_deref(), created.args.len()), (1, Some("img:1"), 1));
        assert!(matches!(store.create_service(&slo("search", 20.0), None, &[]), Err(StoreError::ServiceExists { .. })));
        let updated = store.update_service(&slo("search", 20.0), None, &[], 1).unwrap();
        assert_eq!((updated.version, updated.slo.rate_rps, updated.image), (2, 20.0, None));
        // A second writer that also read version 1 loses, and is told so.
        let error = store.update_service(&slo("search", 30.0), None, &[], 1).unwrap_err();
        assert!(matches!(error, StoreError::VersionConflict { expected: 1, found: 2, .. }), "{error}");
        assert!(error.to_string().contains("service 'search' is at version 2, not 1"), "{error}");
        assert_eq!(store.service("search").unwrap().unwrap().slo.rate_rps, 20.0);
        assert!(matches!(store.delete_service("search", 1), Err(StoreError::VersionConflict { .. })));
        store.delete_service("search", 2).unwrap();
        assert!(store.service("search").unwrap().is_none());
        assert!(matches!(store.update_service(&slo("search", 1.0), None, &[], 2), Err(StoreError::NotFound { .. })));
        assert!(store.list_services().unwrap().is_empty());
        // A service's percentile is kept and updated with it.
        let strict = slo("tail", 5.0).with_percentile(99.9).unwrap();
        store.create_service(&strict, None, &[]).unwrap();
        assert_eq!(store.service("tail").unwrap().unwrap().slo.percentile, 99.9);
        let loose = slo("tail", 5.0).with_percentile(95.0).unwrap();
        assert_eq!(store.update_service(&loose, None, &[], 1).unwrap().slo.percentile, 95.0);
    }

    fn tiny_plan() -> Plan {
        Plan { notes: vec!["a note".to_string()], ..Plan::from_gpus(Vec::new(), "optimal", "queueing", 8) }
    }

    #[test]
    fn jobs_move_from_queued_to_done_or_failed_once() {
        let mut store = Store::open_in_memory().unwrap();
        let first = store.insert_job("{}", r#"{"services":[]}"#).unwrap();
        let second = store.insert_job("{}", "{}").unwrap();
        assert_eq!(store.job(first).unwrap().unwrap().status, JobStatus::Queued);
        store.start_job(first).unwrap();
        assert_eq!(store.job(first).unwrap().unwrap().status, JobStatus::Running);
        store.complete_job(first, &tiny_plan()).unwrap();
        let done = store.job(first).unwrap().unwrap();
        assert_eq!(
            (done.status, done.plan, done.inputs.as_str()),
            (JobStatus::Done, Some(tiny_plan()), r#"{"services":[]}"#)
        );
        assert!(done.finished_at.is_some());
        // A finished job does not change again.
        assert!(matches!(store.fail_job(first, "late"), Err(StoreError::NotFound { .. })));
        assert_eq!(store.fail_unfinished_jobs("the server stopped").unwrap(), 1);
        let failed = store.job(second).unwrap().unwrap();
        assert_eq!((failed.status, failed.error.as_deref()), (JobStatus::Failed, Some("the server stopped")));
        assert_eq!(store.list_jobs(10).unwrap().iter().map(|job| job.id).collect::<Vec<_>>(), vec![second, first]);
        assert_eq!(store.latest_done_job().unwrap().unwrap().id, first);
        assert!(store.job(99).unwrap().is_none());
        // At shutdown only running jobs fail; a queued one fails by its own task.
        let (queued, running) = (store.insert_job("{}", "{}").unwrap(), store.insert_job("{}", "{}").unwrap());
        store.start_job(running).unwrap();
        assert_eq!(store.fail_running_jobs("stopped while it ran").unwrap(), 1);
        assert_eq!(store.job(queued).unwrap().unwrap().status, JobStatus::Queued);
        let stopped = store.job(running).unwrap().unwrap();
        assert_eq!((stopped.status, stopped.error.as_deref()), (JobStatus::Failed, Some("stopped while it ran")));
    }
}
