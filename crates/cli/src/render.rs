//! Rendering plans for people (table), machines (JSON) and ParvaGPU (CSV).

use anyhow::Result;
use tessera_core::Plan;

use crate::args::Format;
use crate::table::TextTable;

/// The plan in the requested format.
pub fn render_plan(plan: &Plan, format: Format) -> Result<Vec<u8>> {
    Ok(match format {
        Format::Table => plan_table(plan).into_bytes(),
        Format::Json => {
            let mut json = serde_json::to_vec_pretty(plan)?;
            json.push(b'\n');
            json
        }
        Format::Csv => {
            let mut csv = Vec::new();
            tessera_store::write_deployment_csv(&mut csv, plan)?;
            csv
        }
    })
}

fn plan_table(plan: &Plan) -> String {
    let gpu_model = plan.gpus.first().map_or_else(|| "-".to_string(), |g| g.gpu_model.to_string());
    let mut out = format!(
        "{} GPUs ({}), {} compute slices used; strategy {}, latency rule {}\n",
        plan.gpu_count,
        gpu_model,
        plan.compute_slices_used(),
        plan.strategy,
        plan.latency_rule
    );
    if let Some(o) = &plan.optimality {
        let verdict =
            if o.proven_optimal { "proven optimal".to_string() } else { format!("gap {:.2}%", 100.0 * o.gap) };
        out.push_str(&format!("lower bound {} GPUs: {verdict}\n", o.lower_bound_gpus));
    }
    out.push('\n');
    let mut gpus =
        TextTable::new(&["node", "gpu", "profile", "start", "service", "model", "batch", "procs", "req/s", "batch ms"]);
    for gpu in &plan.gpus {
        for instance in &gpu.instances {
            gpus.row(vec![
                gpu.node.to_string(),
                gpu.index.to_string(),
                instance.profile.clone(),
                instance.start.to_string(),
                instance.service.clone(),
                instance.model.clone(),
                instance.batch.to_string(),
                instance.procs.to_string(),
                format!("{:.1}", instance.throughput_rps),
                format!("{:.1}", instance.latency_ms),
            ]);
        }
    }
    out.push_str(&gpus.render());
    out.push('\n');
    let mut services = TextTable::new(&[
        "service",
        "model",
        "rate req/s",
        "provisioned req/s",
        "slo ms",
        "worst ms",
        "segments",
        "met",
    ]);
    for service in &plan.services {
        services.row(vec![
            service.service.clone(),
            service.model.clone(),
            format!("{}", service.rate_rps),
            format!("{:.1}", service.provisioned_rps),
            format!("{}", service.latency_slo_ms),
            format!("{:.1}", service.worst_latency_ms),
            service.segments.to_string(),
            if service.met { "yes" } else { "NO" }.to_string(),
        ]);
    }
    out.push_str(&services.render());
    out
}
