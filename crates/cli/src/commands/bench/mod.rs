//! `tessera bench …`: figures, not tests. Each subcommand prints a table of
//! measurements taken in the same run, so ratios compare like with like.

mod colocate;
mod long_tail;
mod profiles;
mod replan;
mod scale;
mod serve;
mod simulate;
mod slo;
mod timing;

use anyhow::Result;
use tessera_core::{GpuModel, Plan, ProfileCatalog, ServiceSlo};
use tessera_plan::{plan, LatencyRule, PlanError, PlanInputs, PlanRequest, ProfileOrigin};

use crate::args::BenchCommand;

pub fn run(command: BenchCommand) -> Result<()> {
    match command {
        BenchCommand::Plan { parvagpu, iterations } => timing::run(&parvagpu, iterations),
        BenchCommand::Colocate { data, groups, splits, curve_seeds, plot } => {
            colocate::run(&data, &groups, &splits, curve_seeds, plot.as_deref())
        }
        BenchCommand::Profiles { parvagpu, budgets, seeds, seconds_per_point } => {
            profiles::run(&profiles::ProfilesBench {
                parvagpu: &parvagpu,
                budgets_percent: &budgets,
                seeds,
                seconds_per_point,
            })
        }
        BenchCommand::Simulate { seeds } => simulate::run(seeds),
        BenchCommand::Serve { clients, reads, verifies, jobs, time_limit, workers } => {
            serve::run(clients, reads, verifies, jobs, time_limit, workers)
        }
        BenchCommand::Scale { sizes, catalogue: c } => {
            scale::run(&c.parvagpu, &sizes, c.seed, c.latency_rule, c.time_limit)
        }
        BenchCommand::Slo { parvagpu, trace, scenarios, sizes, seconds, seed } => slo::run(&slo::SloBench {
            parvagpu: &parvagpu,
            trace: &trace,
            scenarios: &scenarios,
            sizes: &sizes,
            seconds,
            seed,
        }),
        BenchCommand::LongTail { parvagpu, sizes, head, exponent, seed, seconds } => {
            let sizes: Vec<usize> = sizes.iter().map(|&size| size as usize).collect();
            long_tail::run(&long_tail::LongTailBench {
                parvagpu: &parvagpu,
                sizes: &sizes,
                head_rps: head,
                exponent,
                seed,
                seconds,
            })
        }
        BenchCommand::Replan { sizes, draws, catalogue: c } => replan::run(&replan::ReplanBench {
            parvagpu: &c.parvagpu,
            sizes: &sizes,
            draws,
            seed: c.seed,
            rule: c.latency_rule,
            time_limit_s: c.time_limit,
        }),
    }
}

/// The `optimal` plan of measured `services` over `catalog` on A100-80GBs
/// under ParvaGPU's latency rule, with no time limit: how the benchmarks
/// compare with ParvaGPU's own figures.
fn optimal_under_parva(catalog: &ProfileCatalog, services: &[ServiceSlo]) -> Result<Plan, PlanError> {
    let gpu = [GpuModel::A100_80GB];
    let inputs = PlanInputs::new(services.to_vec(), catalog.clone(), ProfileOrigin::Measured, &gpu)?;
    let request = PlanRequest { rule: Some(LatencyRule::Parva), time_limit: None, ..PlanRequest::new(&inputs) };
    Ok(plan(&request)?.plan)
}
