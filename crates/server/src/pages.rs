//! The pages people look at: the current plan and every stored plan drawn
//! as GPU tiles (the report `tessera report` writes, with its colours, its
//! pages of GPUs and its search), the colocation recommendation and the
//! simulator's Gantt chart. Plain HTML and inline SVG; the plan report's
//! small inline script is the only one, and nothing is fetched.

use std::fmt::Write;

use axum::extract::State;
use axum::http::header;
use axum::response::{Html, IntoResponse, Response};
use serde::Deserialize;
use tessera_core::text::escape_xml;
use tessera_report::{page, plan_section, plan_svg};

use crate::api::analysis::{rank, RecommendBody};
use crate::api::{off_the_workers, tags, ApiPath, ApiQuery};
use crate::error::ApiError;
use crate::state::AppState;

/// The links every page shows.
const NAV: [(&str, &str); 5] = [
    ("/", "Current plan"),
    ("/plans", "Plans"),
    ("/colocation", "Colocation"),
    ("/simulation", "Simulation"),
    ("/docs", "API"),
];

/// The current plan (the newest finished one) as tiles, with its table.
#[utoipa::path(get, path = "/", tag = tags::PAGES, security(("bearer" = [])),
    responses((status = 200, description = "HTML page", content_type = "text/html")))]
pub(crate) async fn index(State(state): State<AppState>) -> Result<Html<String>, ApiError> {
    let current = match state.current_plan() {
        Some(current) => Some(current),
        None => state
            .with_store(false, |store| Ok(store.latest_done_job()?))
            .await?
            .and_then(|job| job.plan.map(|plan| (job.id, std::sync::Arc::new(plan)))),
    };
    let body = match current {
        Some((id, plan)) => format!(
            "<h2>Plan {id} <span class=\"muted\">· <a href=\"/plans/{id}\">permalink</a> · \
             <a href=\"/plans/{id}/tiles.svg\">SVG</a> · <a href=\"/v1/plans/{id}\">JSON</a></span></h2>{}",
            plan_section(&plan)
        ),
        None => "<p>No plan yet: start one with <code>POST /v1/plans</code> (see <a href=\"/docs\">the API</a>).</p>"
            .to_string(),
    };
    Ok(Html(page("Tessera — current plan", &NAV, &body)))
}

/// Every stored plan, newest first.
#[utoipa::path(get, path = "/plans", tag = tags::PAGES, security(("bearer" = [])),
    responses((status = 200, description = "HTML page", content_type = "text/html")))]
pub(crate) async fn plans_page(State(state): State<AppState>) -> Result<Html<String>, ApiError> {
    let jobs = state.with_store(false, |store| Ok(store.list_jobs(100)?)).await?;
    let mut body = String::from(
        "<table class=\"jobs\"><thead><tr><th>plan</th><th>status</th><th>submitted</th><th>GPUs</th>\
         <th>services met</th></tr></thead><tbody>",
    );
    for job in &jobs {
        let (gpus, met) = job.plan.as_ref().map_or((String::new(), String::new()), |plan| {
            let met = plan.services.iter().filter(|report| report.met).count();
            (plan.gpu_count.to_string(), format!("{met} of {}", plan.services.len()))
        });
        let _ = write!(
            body,
            "<tr><td><a href=\"/plans/{id}\">{id}</a></td><td>{}</td><td>{}</td><td>{gpus}</td><td>{met}</td></tr>",
            escape_xml(job.status.name()),
            escape_xml(&job.created_at),
            id = job.id
        );
    }
    body.push_str("</tbody></table>");
    if jobs.is_empty() {
        body.push_str("<p>No plans yet.</p>");
    }
    Ok(Html(page("Tessera — plans", &NAV, &body)))
}

/// One stored plan's report.
#[utoipa::path(get, path = "/plans/{id}", tag = tags::PAGES, security(("bearer" = [])),
    params(("id" = u64, Path, example = 1)),
    responses((status = 200, description = "HTML page", content_type = "text/html"), (status = 404, description = "no such plan")))]
pub(crate) async fn plan_page(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<u64>,
) -> Result<Html<String>, ApiError> {
    let job = state.with_store(false, move |store| Ok(store.job(id)?)).await?;
    let job = job.ok_or_else(|| ApiError::not_found(format!("no planning job {id}")))?;
    let body = match (&job.plan, &job.error) {
        (Some(plan), _) => format!(
            "<h2>Plan {id} <span class=\"muted\">· <a href=\"/plans/{id}/tiles.svg\">SVG</a> · \
             <a href=\"/v1/plans/{id}\">JSON</a></span></h2>{}",
            plan_section(plan)
        ),
        (None, Some(error)) => format!("<h2>Plan {id}</h2><p>The job failed: {}</p>", escape_xml(error)),
        (None, None) => format!("<h2>Plan {id}</h2><p>The job is {}; reload to see its plan.</p>", job.status.name()),
    };
    Ok(Html(page(&format!("Tessera — plan {id}"), &NAV, &body)))
}

/// One stored plan's tiles as an SVG document.
#[utoipa::path(get, path = "/plans/{id}/tiles.svg", tag = tags::PAGES, security(("bearer" = [])),
    params(("id" = u64, Path, example = 1)),
    responses((status = 200, description = "SVG", content_type = "image/svg+xml"), (status = 404, description = "no such plan")))]
pub(crate) async fn plan_tiles(State(state): State<AppState>, ApiPath(id): ApiPath<u64>) -> Result<Response, ApiError> {
    let job = state.with_store(false, move |store| Ok(store.job(id)?)).await?;
    let plan = job.and_then(|job| job.plan).ok_or_else(|| ApiError::not_found(format!("no finished plan {id}")))?;
    Ok(([(header::CONTENT_TYPE, "image/svg+xml")], plan_svg(&plan)).into_response())
}

/// The colocation form's fields.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ColocationQuery {
    /// The workload to find partners for.
    pub target: Option<String>,
    /// Workloads per group, the target included.
    pub group_size: Option<usize>,
    /// Groups to show.
    pub top: Option<usize>,
}

/// Partners for a target, ranked by a model trained on the stored
/// colocations (a form; the answer below it).
#[utoipa::path(get, path = "/colocation", tag = tags::PAGES, security(("bearer" = [])), params(ColocationQuery),
    responses((status = 200, description = "HTML page", content_type = "text/html")))]
pub(crate) async fn colocation_page(
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<ColocationQuery>,
) -> Result<Html<String>, ApiError> {
    let (rows, pool) =
        state.with_store(false, |store| Ok((store.load_colocations()?, store.load_workloads()?))).await?;
    let target = query.target.clone().unwrap_or_default();
    let mut body = format!(
        "<form method=\"get\" action=\"/colocation\"><label>target <input name=\"target\" value=\"{}\" size=\"40\"></label> \
         <label>group size <input name=\"group_size\" type=\"number\" min=\"2\" value=\"{}\"></label> \
         <button>Recommend</button></form><p class=\"muted\">{} stored workloads, {} measured colocations.</p>",
        escape_xml(&target),
        query.group_size.unwrap_or(2),
        pool.len(),
        rows.len()
    );
    if !target.is_empty() {
        let request = RecommendBody {
            target,
            group_size: query.group_size.unwrap_or(2),
            top: query.top.unwrap_or(5),
            model: "slowdown".to_string(),
            gpu_memory_gb: 32.0,
        };
        let ranked = off_the_workers(move || rank(&request, &rows, pool)).await?;
        match ranked {
            Ok(result) => {
                body.push_str(
                    "<table><thead><tr><th>group</th><th>predicted (samples/s)</th><th>vs taking turns</th>\
                     <th>retained</th><th>memory (GB)</th></tr></thead><tbody>",
                );
                for group in &result.groups {
                    let names: Vec<String> = group.members.iter().map(|m| escape_xml(&m.workload)).collect();
                    let retained: Vec<String> = group
                        .members
                        .iter()
                        .map(|m| m.retained.map_or("—".to_string(), |r| format!("{:.2}", r)))
                        .collect();
                    let _ = write!(
                        body,
                        "<tr><td>{}</td><td>{:.1}</td><td>{:.2}×</td><td>{}</td><td>{:.1}{}</td></tr>",
                        names.join(" + "),
                        group.predicted_total_rps,
                        group.vs_time_sharing,
                        retained.join(" / "),
                        group.memory_gb,
                        if group.exceeds_memory { " (does not fit)" } else { "" }
                    );
                }
                let _ = write!(
                    body,
                    "</tbody></table><p class=\"muted\">model {}, {} search, trained on {} colocations</p>",
                    escape_xml(&result.model),
                    escape_xml(&result.search),
                    result.trained_on
                );
            }
            Err(error) => {
                let _ = write!(body, "<p>{}</p>", escape_xml(&error.message));
            }
        }
    }
    Ok(Html(page("Tessera — colocation", &NAV, &body)))
}

/// The last simulation's Gantt chart (`POST /v1/simulate` runs one).
#[utoipa::path(get, path = "/simulation", tag = tags::PAGES, security(("bearer" = [])),
    responses((status = 200, description = "HTML page", content_type = "text/html")))]
pub(crate) async fn simulation_page(State(state): State<AppState>) -> Html<String> {
    let body = match state.last_simulation() {
        Some((title, svg)) => format!("<h2>{}</h2><div class=\"gantt\">{svg}</div>", escape_xml(&title)),
        None => "<p>No simulation yet: post a trace to <code>POST /v1/simulate</code>.</p>".to_string(),
    };
    Html(page("Tessera — simulation", &NAV, &body))
}
