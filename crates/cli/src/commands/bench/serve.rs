//! `tessera bench serve`: the HTTP service under load on 127.0.0.1
//! (tessera-server's load benchmark), as a table.

use anyhow::{bail, Result};
use tessera_core::text::count;
use tessera_server::{bench_serve, LoadOptions};

use crate::output::{out, outln};
use crate::progress::Progress;
use crate::table::TextTable;

pub fn run(clients: u32, reads: u32, verifies: u32, jobs: u32, time_limit: f64, workers: u32) -> Result<()> {
    let options = LoadOptions {
        clients: clients as usize,
        read_requests: reads as usize,
        verify_requests: verifies as usize,
        plan_jobs: jobs as usize,
        plan_time_limit_s: time_limit,
        planning_workers: workers as usize,
        ..LoadOptions::default()
    };
    let spinner = Progress::spinner(format!(
        "{reads} reads and {verifies} verifications from {}, then {}, on 127.0.0.1",
        count(clients as usize, "client"),
        count(jobs as usize, "planning job")
    ));
    let report = bench_serve(&options);
    drop(spinner);
    let report = report?;
    let mut table = TextTable::new(&["route", "requests", "errors", "req/s", "p50 ms", "p99 ms"]);
    for route in &report.routes {
        table.row(vec![
            route.route.clone(),
            route.requests.to_string(),
            route.errors.to_string(),
            format!("{:.0}", route.throughput_rps),
            format!("{:.2}", route.p50_ms),
            format!("{:.2}", route.p99_ms),
        ]);
    }
    out!("{}", table.render())?;
    outln!(
        "planning jobs: {} submitted, {} done, {} failed, {} lost; submission to done p50 {:.2} s, p99 {:.2} s; all \
         finished in {:.1} s",
        report.jobs_submitted,
        report.jobs_done,
        report.jobs_failed.len(),
        report.jobs_lost,
        report.job_p50_s,
        report.job_p99_s,
        report.jobs_seconds
    )?;
    for failure in &report.jobs_failed {
        outln!("  failed: {failure}")?;
    }
    outln!(
        "{} hung up mid-request: {}",
        count(report.disconnects, "client"),
        if report.disconnect_traces.is_empty() {
            "no trace left".to_string()
        } else {
            report.disconnect_traces.join("; ")
        }
    )?;
    outln!(
        "store after shutdown: integrity {}, {} planning jobs stored, {} with a plan",
        report.store_integrity,
        report.stored_jobs.0,
        report.stored_jobs.1
    )?;
    if report.jobs_lost > 0 || !report.disconnect_traces.is_empty() || report.store_integrity != "ok" {
        bail!("the service lost jobs, kept traces of abandoned requests or damaged its store (see above)");
    }
    Ok(())
}
