//! The plan report at fleet scale, in headless Chromium: GPUs a page at a
//! time (every page drawn by the report's script exactly as the first is
//! drawn in Rust), the search, what shows without the script, and the size
//! and render time of the report of the reference catalogues of 1,100 and
//! 11,000 services (about 25 s for the 11,000 in a debug build on 2 cores,
//! most of it writing and planning the catalogue). Each prints its figures
//! (`--nocapture`).

use std::path::Path;
use std::time::Instant;

use regex::Regex;
use serde_json::{json, Value};
use tessera_core::{
    GpuAssignment, GpuModel, GpuOffer, InstanceAssignment, Plan, ServiceReport, SharedInstance, SharedMember, Sharing,
};
use tessera_plan::{LatencyRule, PlanInputs, PlanRequest, ProfileOrigin, Strategy};
use tessera_report::{
    autopilot_day_html, chromatic_distance, colour_distance, plan_report_html, DayPicture, Palette, StrategySeries,
    StrategyTotals, GPUS_PER_PAGE, MIN_NEIGHBOUR_DISTANCE, MIN_SHARING_DISTANCE,
};

use crate::browser::{check_tiles, chromium, measure, run_chromium, screenshot, screenshot_paths, MEASURE};

/// A plan of 500 A100s on nodes of 8, each GPU holding three of 200
/// tenants (`tenant-000` …), every tenant in the service table, and every
/// fifth GPU a 1g instance shared by two light services (`light-0` and
/// `light-1`, or `light-5` and `light-6`).
fn five_hundred_gpus() -> Plan {
    let instance = |profile: &str, size: u8, start: u8, tenant: usize| InstanceAssignment {
        profile: profile.to_string(),
        size,
        start,
        service: format!("tenant-{tenant:03}"),
        model: "bert-base".to_string(),
        batch: 8,
        procs: 2,
        throughput_rps: 100.0,
        latency_ms: 20.0,
        capacity_rps: None,
    };
    let gpus = (0..500usize)
        .map(|i| GpuAssignment {
            node: i as u32 / 8,
            index: i as u32 % 8,
            gpu_model: GpuModel::A100_80GB,
            instances: vec![
                instance("3g.40gb", 3, 4, (3 * i) % 200),
                instance("2g.20gb", 2, 0, (3 * i + 1) % 200),
                instance("1g.10gb", 1, 2, (3 * i + 2) % 200),
            ],
            shared: if i % 5 == 0 { vec![shared_pair(i % 10)] } else { Vec::new() },
        })
        .collect();
    let services = (0..200)
        .map(|tenant| ServiceReport {
            service: format!("tenant-{tenant:03}"),
            model: "bert-base".to_string(),
            rate_rps: 100.0 + tenant as f64,
            latency_slo_ms: 100.0,
            provisioned_rps: 800.0,
            worst_latency_ms: 40.0,
            segments: 8,
            met: tenant != 7,
            percentile: None,
            predicted_attainment: None,
            tolerance: None,
            busiest_load: None,
        })
        .collect();
    Plan { services, ..Plan::from_gpus(gpus, "optimal", "queueing", 8) }
}

/// A 1g instance at slice 3 shared by `light-{first}` and the next.
fn shared_pair(first: usize) -> SharedInstance {
    let member = |k: usize| SharedMember {
        service: format!("light-{k}"),
        model: "resnet50".to_string(),
        batch: 1,
        latency_ms: 5.0,
        throughput_rps: 200.0,
        capacity_rps: 8.0,
        memory_gb: 2.0,
    };
    SharedInstance {
        profile: "1g.10gb".to_string(),
        size: 1,
        start: 3,
        sharing: Sharing::Serialized,
        members: vec![member(first), member(first + 1)],
    }
}

/// After load: the first page as drawn in Rust; page 2 as the script draws
/// it (with [`MEASURE`]'s tiles); page 1 drawn again by the script; the
/// last page; a search for `tenant-007`. Into `#paging`.
const PAGING: &str = r#"<script>
window.addEventListener('load', () => {
  const root = document.querySelector('.plan-report');
  const report = root.tesseraReport;
  const view = root.querySelector('.gpu-page'), legend = root.querySelector('.legend');
  const shown = () => root.querySelector('.pager .shown').textContent;
  const gpus = () => [...view.querySelectorAll('svg.gpu')].map(svg => svg.dataset.node + '/' + svg.dataset.gpu);
  const services = () => [...legend.querySelectorAll('[data-service]')].map(chip => chip.dataset.service);
  const out = {first: {gpus: gpus(), shown: shown()}};
  const [firstView, firstLegend] = [view.innerHTML, legend.innerHTML];
  report.show(1);
  out.second = {gpus: gpus(), legend: services(), shown: shown(), page: root.querySelector('.gpu-pages').dataset.page};
  report.show(0);
  out.redrawn_first_is_identical = view.innerHTML === firstView && legend.innerHTML === firstLegend;
  report.show(1e9);
  out.last = {gpus: gpus(), shown: shown()};
  const search = root.querySelector('p.search');
  out.search_shown = !search.hidden;
  search.querySelector('input').value = 'Tenant-007';
  report.filter();
  out.search = {gpus: gpus(), shown: shown(), found: search.querySelector('.found').textContent,
    rows: [...root.querySelectorAll('table.services tbody tr')].filter(row => !row.hidden).map(row => row.dataset.service)};
  search.querySelector('input').value = 'light-5';
  report.filter();
  out.member_search = {gpus: gpus(), shown: shown(),
    tiles: [...view.querySelectorAll('g.tile[data-members]')].map(tile => tile.dataset.members)};
  const pre = document.createElement('pre'); pre.id = 'paging';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
  search.querySelector('input').value = '';
  report.filter();
  report.show(1);
});
</script>"#;

/// What a person sees after load, into `#visible`: the GPUs and service
/// rows shown, the unmet rows, whether the overview and the search box show.
const VISIBLE: &str = r#"<script>
window.addEventListener('load', () => {
  const shown = selector => [...document.querySelectorAll(selector)].filter(e => e.checkVisibility()).length;
  const pre = document.createElement('pre'); pre.id = 'visible';
  pre.textContent = JSON.stringify({gpus: shown('svg.gpu'), rows: shown('table.services tbody tr'),
    unmet: shown('table.unmet tbody tr'), overview: shown('table.fleet') + shown('svg.histogram') === 2,
    search: shown('p.search') === 1});
  document.body.appendChild(pre);
});
</script>"#;

/// The JSON a script wrote into `<pre id="{id}">` of `dom`.
fn written(dom: &str, id: &str) -> Value {
    let pre = Regex::new(&format!(r#"(?s)<pre id="{id}">(.*?)</pre>"#)).unwrap();
    let text = &pre.captures(dom).unwrap_or_else(|| panic!("#{id} was not written"))[1];
    serde_json::from_str(&text.replace("&quot;", "\"").replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&"))
        .unwrap()
}

/// `node/index` of `gpus`.
fn names(gpus: &[GpuAssignment]) -> Vec<String> {
    gpus.iter().map(|gpu| format!("{}/{}", gpu.node, gpu.index)).collect()
}

#[test]
fn no_table_header_runs_into_the_next_at_a_laptop_or_a_desktop_width() {
    let Some(chromium) = chromium() else { return };
    let html = plan_report_html(&five_hundred_gpus(), "500 GPUs");
    for width in [1100, 1440] {
        let measured = measure(&chromium, &html, width, 900);
        assert_eq!(measured["overflowing_headers"], json!([]), "at {width} px");
    }
}

#[test]
fn five_hundred_gpus_are_paged_and_every_page_is_drawn_as_the_first() {
    let Some(chromium) = chromium() else { return };
    let plan = five_hundred_gpus();
    let html = plan_report_html(&plan, "500 GPUs");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("report.html");
    // MEASURE runs after PAGING has left page 2 on screen.
    std::fs::write(&file, html.replace("</body>", &format!("{PAGING}{MEASURE}</body>"))).unwrap();
    let dom = run_chromium(&chromium, &["--dump-dom", "--window-size=1440,900"], &format!("file://{}", file.display()));
    let paging = written(&dom, "paging");

    assert_eq!(paging["first"]["gpus"], json!(names(&plan.gpus[..GPUS_PER_PAGE])));
    assert_eq!(paging["first"]["shown"], format!("GPUs 1–{GPUS_PER_PAGE} of 500"));
    assert_eq!(paging["second"]["gpus"], json!(names(&plan.gpus[GPUS_PER_PAGE..2 * GPUS_PER_PAGE])));
    assert_eq!(paging["second"]["page"], "2");
    assert_eq!(paging["second"]["shown"], format!("GPUs {}–{} of 500", GPUS_PER_PAGE + 1, 2 * GPUS_PER_PAGE));
    // The legend: the services of page 2, in the order they appear.
    let mut legend: Vec<String> = Vec::new();
    for instance in plan.gpus[GPUS_PER_PAGE..2 * GPUS_PER_PAGE].iter().flat_map(|gpu| &gpu.instances) {
        if !legend.contains(&instance.service) {
            legend.push(instance.service.clone());
        }
    }
    assert_eq!(paging["second"]["legend"], json!(legend));
    assert_eq!(paging["redrawn_first_is_identical"], true, "the script draws a page as Rust does");
    let last = 500 - 500 / GPUS_PER_PAGE * GPUS_PER_PAGE;
    assert_eq!(paging["last"]["gpus"], json!(names(&plan.gpus[500 - last..])));

    // The search (any case) keeps the table's one match and the GPUs that
    // hold it.
    assert_eq!(paging["search_shown"], true);
    assert_eq!(paging["search"]["rows"], json!(["tenant-007"]));
    assert_eq!(paging["search"]["found"], "1 of 200 services");
    let holding: Vec<GpuAssignment> = plan
        .gpus
        .iter()
        .filter(|gpu| gpu.instances.iter().any(|instance| instance.service == "tenant-007"))
        .cloned()
        .collect();
    assert!(!holding.is_empty() && holding.len() < GPUS_PER_PAGE);
    assert_eq!(paging["search"]["gpus"], json!(names(&holding)));
    assert_eq!(
        paging["search"]["shown"],
        format!("GPUs 1–{} of {} holding services that match “Tenant-007”", holding.len(), holding.len())
    );

    // A member's name finds the GPUs whose shared instances host it.
    let hosting: Vec<String> =
        names(&plan.gpus).into_iter().enumerate().filter(|(i, _)| i % 10 == 5).map(|(_, n)| n).collect();
    assert_eq!(paging["member_search"]["gpus"], json!(hosting[..GPUS_PER_PAGE]));
    assert_eq!(
        paging["member_search"]["shown"],
        format!("GPUs 1–{GPUS_PER_PAGE} of 50 holding services that match “light-5”")
    );
    assert_eq!(paging["member_search"]["tiles"], json!(vec!["light-5 light-6"; GPUS_PER_PAGE]));

    // Page 2's tiles, drawn by the script, each over its own memory
    // slices at full size (a shared instance on every fifth GPU).
    let measured = written(&dom, "measured");
    let shared_on_page_two = (GPUS_PER_PAGE..2 * GPUS_PER_PAGE).filter(|i| i % 5 == 0).count();
    assert_eq!(check_tiles(&measured, 60.0), 3 * GPUS_PER_PAGE + shared_on_page_two);
    let (page, viewport) = (measured["page_height"].as_f64().unwrap(), measured["viewport_height"].as_f64().unwrap());
    assert!(page > 5.0 * viewport, "a page of GPUs scrolls: {page} px in a {viewport} px window");

    // Without the report's script (Chromium's --dump-dom needs scripts, so
    // the page's own are taken out instead): the overview, the first page
    // and the whole table show; the search box does not.
    let scriptless = Regex::new(r"(?s)<script\b.*?</script>").unwrap().replace_all(&html, "");
    std::fs::write(&file, scriptless.replace("</body>", &format!("{VISIBLE}</body>"))).unwrap();
    let dom = run_chromium(&chromium, &["--dump-dom"], &format!("file://{}", file.display()));
    let visible = written(&dom, "visible");
    assert_eq!(
        visible,
        json!({"gpus": GPUS_PER_PAGE, "rows": 200, "unmet": 1, "overview": true, "search": false}),
        "what shows without the script"
    );
    std::fs::write(&file, &html).unwrap();
    screenshot(&chromium, &format!("file://{}", file.display()), 1440, 900, &screenshot_paths("report-500-gpus.png"));
}

/// After load, into `#day`: each strategy's step line (its length, its
/// box), the demand's box, the hours drawn per strategy, the totals' rows,
/// and whether the page is wider than the window.
const DAY: &str = r#"<script>
window.addEventListener('load', () => {
  const box = e => { const r = e.getBoundingClientRect(); return {left: r.left, right: r.right, top: r.top, bottom: r.bottom}; };
  const chart = document.querySelector('svg.day-gpus');
  const lines = {};
  chart.querySelectorAll('path.gpus').forEach(p => lines[p.dataset.strategy] = {length: p.getTotalLength(), box: box(p)});
  const hours = {};
  document.querySelectorAll('svg.day-hours g.strategy').forEach(g => hours[g.dataset.strategy] = g.querySelectorAll('circle.hour').length);
  const pre = document.createElement('pre'); pre.id = 'day';
  pre.textContent = JSON.stringify({lines, hours, chart: box(chart), demand: box(chart.querySelector('path.demand')),
    rows: [...document.querySelectorAll('table.day-totals tr[data-strategy]')].map(r => r.dataset.strategy),
    overflows: document.documentElement.scrollWidth > window.innerWidth});
  document.body.appendChild(pre);
});
</script>"#;

/// A day of 24 hours: demand on a daily cycle, the autopilot's GPUs
/// following it hour by hour, static provisioning flat at the peak, and
/// scratch changing every half hour.
fn a_day() -> DayPicture {
    let demand = |hour: f64| 2000.0 + 1000.0 * (std::f64::consts::PI * (hour - 14.0) / 12.0).cos();
    let series = |name: &str, gpus: Vec<(f64, usize)>, worst: f64| StrategySeries {
        name: name.to_string(),
        gpus,
        worst_by_hour: (0..24).map(|hour| Some(worst - 0.0001 * f64::from(hour % 3))).collect(),
        totals: StrategyTotals { gpu_hours: 100.0, attainment: Some(worst), ..StrategyTotals::default() },
    };
    DayPicture {
        hours: 24.0,
        demand_rps: (0..24 * 60).map(|minute| (60.0 * f64::from(minute), demand(f64::from(minute) / 60.0))).collect(),
        strategies: vec![
            series(
                "autopilot",
                (0..24).map(|h| (3600.0 * f64::from(h), (demand(f64::from(h)) / 400.0).ceil() as usize)).collect(),
                0.995,
            ),
            series("static peak", vec![(0.0, 8)], 0.999),
            series("scratch", (0..48).map(|h| (1800.0 * f64::from(h), 3 + (h % 5) as usize)).collect(), 0.8),
        ],
        reference: 1,
    }
}

#[test]
fn the_day_page_draws_every_strategy_against_the_demand_within_the_window() {
    let Some(chromium) = chromium() else { return };
    let html = autopilot_day_html(&a_day(), "a day", "a synthetic day", 99.0);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("day.html");
    std::fs::write(&file, html.replace("</body>", &format!("{DAY}</body>"))).unwrap();
    let dom = run_chromium(&chromium, &["--dump-dom", "--window-size=1100,960"], &format!("file://{}", file.display()));
    let day = written(&dom, "day");
    assert_eq!(day["rows"], json!(["autopilot", "static peak", "scratch"]));
    assert_eq!(day["hours"], json!({"autopilot": 24, "static peak": 24, "scratch": 24}));
    assert_eq!(day["overflows"], false, "the page fits a 1100 px window");
    let chart = &day["chart"];
    let inside = |b: &Value| {
        b["left"].as_f64().unwrap() >= chart["left"].as_f64().unwrap() - 0.5
            && b["right"].as_f64().unwrap() <= chart["right"].as_f64().unwrap() + 0.5
            && b["top"].as_f64().unwrap() >= chart["top"].as_f64().unwrap() - 0.5
            && b["bottom"].as_f64().unwrap() <= chart["bottom"].as_f64().unwrap() + 0.5
    };
    for name in ["autopilot", "static peak", "scratch"] {
        let line = &day["lines"][name];
        assert!(line["length"].as_f64().unwrap() > 500.0, "{name}'s line is drawn across the day: {line}");
        assert!(inside(&line["box"]), "{name}'s line stays in the chart: {line}");
    }
    // Static provisioning is flat: its line has no height.
    let flat = &day["lines"]["static peak"]["box"];
    assert!((flat["bottom"].as_f64().unwrap() - flat["top"].as_f64().unwrap()).abs() < 3.0, "{flat}");
    assert!(inside(&day["demand"]), "the demand stays in the chart");
    std::fs::write(&file, &html).unwrap();
    screenshot(
        &chromium,
        &format!("file://{}", file.display()),
        1100,
        960,
        &screenshot_paths("autopilot-day-synthetic.png"),
    );
}

/// The reference catalogue of `size` services planned (optimal strategy,
/// ParvaGPU's latency rule, A100-80GB), or `None` when the reference data
/// is absent.
fn reference_plan(size: usize, dir: &Path) -> Option<Plan> {
    let catalogue = tessera_testkit::scale_catalogue(size, dir)?;
    let gpu = GpuModel::A100_80GB;
    let catalog = tessera_store::read_profile_dir(&catalogue.join("prof_data"), gpu).unwrap().catalog();
    let models: Vec<String> = catalog.models(gpu).map(str::to_string).collect();
    let services = tessera_store::read_slo_scenario(
        &catalogue.join("SLO_req_rate.csv"),
        &catalogue.join("SLO_latency.csv"),
        1,
        &models,
    )
    .unwrap();
    let inputs = PlanInputs::new(services, catalog, ProfileOrigin::Measured, &[gpu]).unwrap();
    let request = PlanRequest {
        strategy: Strategy::Optimal,
        rule: Some(LatencyRule::Parva),
        fleet: vec![GpuOffer::plain(gpu)],
        time_limit: None,
        ..PlanRequest::new(&inputs)
    };
    Some(tessera_plan::plan(&request).unwrap().plan)
}

/// Services sharing a GPU of `plan` differ in colour (chromatic distance),
/// services on GPUs next to each other by the palette's ΔE.
pub(crate) fn assert_neighbours_apart(plan: &Plan) {
    let palette = Palette::of(plan);
    let lab = |service: &str| palette.swatch(service).lab;
    for (position, gpu) in plan.gpus.iter().enumerate() {
        let next = plan.gpus.get(position + 1).map_or(&[][..], |next| &next.instances[..]);
        for a in &gpu.instances {
            for b in gpu.instances.iter().filter(|b| b.service != a.service) {
                let apart = chromatic_distance(&lab(&a.service), &lab(&b.service));
                assert!(apart >= MIN_SHARING_DISTANCE, "{} and {} share a GPU, {apart:.3} apart", a.service, b.service);
            }
            for b in next.iter().filter(|b| b.service != a.service) {
                let apart = colour_distance(&lab(&a.service), &lab(&b.service));
                assert!(
                    apart >= MIN_NEIGHBOUR_DISTANCE,
                    "{} and {} side by side, {apart:.3} apart",
                    a.service,
                    b.service
                );
            }
        }
    }
}

/// Records, at load, how long the page took to parse, run its script and
/// lay out (`performance.now()` after forcing layout), into `#timing`.
const TIMING: &str = r#"<script>
window.addEventListener('load', () => {
  const height = document.documentElement.scrollHeight;
  const pre = document.createElement('pre'); pre.id = 'timing';
  pre.textContent = JSON.stringify({render_ms: performance.now(), page_height: height,
    gpus: document.querySelectorAll('svg.gpu').length,
    rows: document.querySelectorAll('table.services tbody tr').length});
  document.body.appendChild(pre);
});
</script>"#;

/// The report of the `size`-service reference plan: its colours keep
/// neighbours apart; its bytes, and its render time in headless Chromium
/// (in the page, and the whole Chromium run beside one of an empty page),
/// must be under 5 MB and 3 s. A screenshot of its first screen is saved.
fn check_reference_report(size: usize) {
    let Some(chromium) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let Some(plan) = reference_plan(size, dir.path()) else { return };
    assert_neighbours_apart(&plan);
    let html = plan_report_html(&plan, &format!("Tessera plan — the reference catalogue of {size} services"));
    let file = dir.path().join("report.html");
    std::fs::write(&file, html.replace("</body>", &format!("{TIMING}</body>"))).unwrap();
    let empty = dir.path().join("empty.html");
    std::fs::write(&empty, format!("<!DOCTYPE html><html><body>{TIMING}</body></html>")).unwrap();
    let started = Instant::now();
    run_chromium(&chromium, &["--dump-dom"], &format!("file://{}", empty.display()));
    let empty_s = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let dom = run_chromium(&chromium, &["--dump-dom", "--window-size=1440,900"], &format!("file://{}", file.display()));
    let run_s = started.elapsed().as_secs_f64();
    let timing = written(&dom, "timing");
    let render_ms = timing["render_ms"].as_f64().unwrap();
    eprintln!(
        "report of {size} services: {} GPUs, {} bytes; Chromium: {render_ms:.0} ms to load and lay out, \
         {run_s:.2} s for the whole run (an empty page {empty_s:.2} s)",
        plan.gpu_count,
        html.len()
    );
    assert_eq!(timing["gpus"], GPUS_PER_PAGE.min(plan.gpus.len()));
    assert_eq!(timing["rows"], size);
    assert!(html.len() < 5_000_000, "{} bytes", html.len());
    assert!(render_ms < 3_000.0, "{render_ms:.0} ms to render");
    std::fs::write(&file, &html).unwrap();
    let shot = format!("report-{size}-services.png");
    screenshot(&chromium, &format!("file://{}", file.display()), 1440, 900, &screenshot_paths(&shot));
}

#[test]
fn the_report_of_the_1100_service_reference_plan_is_small_and_quick() {
    check_reference_report(1_100);
}

#[test]
fn the_report_of_the_11000_service_reference_plan_is_under_5_mb_and_3_s() {
    check_reference_report(11_000);
}
