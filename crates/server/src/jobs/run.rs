//! Running one planning job: wait for a worker, plan on a blocking thread
//! within the time limit and its grace (past them the planning is
//! cancelled: its thread stops and frees its worker), store the plan or
//! the reason.

use std::sync::Arc;
use std::time::Instant;

use tessera_core::Plan;
use tessera_plan::Cancel;

use crate::jobs::request::{plan, JobInputs, PlanJobRequest};
use crate::state::AppState;

/// Runs job `id` (already stored as queued, its place reserved): waits for
/// a worker, plans on a blocking thread within the time limit and grace,
/// stores the plan or the reason it failed.
pub(crate) async fn run_job(state: AppState, id: u64, request: PlanJobRequest, inputs: JobInputs) {
    let shared = &state.inner;
    let permit = match shared.jobs.worker().await {
        Some(permit) => permit,
        None => {
            finish(&state, id, Err("the server stopped before the job started".to_string()), None).await;
            return;
        }
    };
    if let Err(error) = state.with_store(true, move |store| Ok(store.start_job(id)?)).await {
        finish(&state, id, Err(error.message), None).await;
        return;
    }
    shared.metrics.job_started();
    let started = Instant::now();
    let cancel = Cancel::new();
    shared.jobs.started(id, started, request.time_limit(), cancel.clone());
    let allowed = request.time_limit() + shared.config.job_grace;
    let cancel_planning = cancel.clone();
    let planning = tokio::task::spawn_blocking(move || {
        let planned = plan(&request, &inputs, &cancel_planning);
        drop(permit);
        planned
    });
    let outcome = match tokio::time::timeout(allowed, planning).await {
        Ok(Ok(planned)) => planned,
        Ok(Err(error)) => Err(format!("the planner failed: {error}")),
        Err(_) => {
            // Its thread stops at the planner's next check and frees its
            // worker.
            cancel.cancel();
            Err(format!(
                "the job exceeded its time limit: no plan after {:.1} s (time limit {:.1} s plus {:.1} s of grace)",
                allowed.as_secs_f64(),
                (allowed - shared.config.job_grace).as_secs_f64(),
                shared.config.job_grace.as_secs_f64()
            ))
        }
    };
    shared.jobs.stopped(id);
    finish(&state, id, outcome, Some(started.elapsed().as_secs_f64())).await;
}

/// Stores job `id`'s outcome, counts it, and makes its plan current (under
/// the store's lock, so no reader sees the job done before its plan is the
/// current one).
async fn finish(state: &AppState, id: u64, outcome: Result<Plan, String>, ran_s: Option<f64>) {
    let status = match outcome {
        Ok(plan) => {
            let current = state.clone();
            let stored = state
                .with_store(true, move |store| {
                    store.complete_job(id, &plan)?;
                    current.offer_plan(id, Arc::new(plan));
                    Ok(())
                })
                .await;
            match stored {
                Ok(()) => "done",
                Err(error) => {
                    let reason = format!("the plan could not be stored: {}", error.message);
                    record_failure(state, id, reason).await;
                    "failed"
                }
            }
        }
        Err(reason) => {
            record_failure(state, id, reason).await;
            "failed"
        }
    };
    state.inner.metrics.job_finished(status, ran_s);
    state.inner.jobs.release();
}

/// Stores job `id` as failed because of `reason`, and logs it.
async fn record_failure(state: &AppState, id: u64, reason: String) {
    tracing::info!(job = id, reason = %reason, "planning job failed");
    if let Err(error) = state.with_store(true, move |store| Ok(store.fail_job(id, &reason)?)).await {
        tracing::error!(job = id, error = %error.message, "a failed job could not be recorded");
    }
}
