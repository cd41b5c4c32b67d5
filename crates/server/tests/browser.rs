//! The pages as a person sees them: headless Chromium (Debian's `chromium`)
//! loads the served page, the test reads the DOM Chromium built and where
//! Chromium laid out every tile, and a screenshot is saved for a person to
//! look at (`target/tmp/tessera-screenshots/`, and the folder named by
//! `TESSERA_SCREENSHOT_DIR` when set). Without Chromium the tests say so
//! and skip, unless `TESSERA_REQUIRE_BROWSER=1` (set by `.ci/run`, which
//! installs it).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use regex::Regex;
use serde_json::{json, Value};
use tessera_core::Plan;

use crate::util::{start_server, wait_job};

/// The Chromium binary, or `None` after saying why the test skips:
/// `TESSERA_CHROMIUM`, else Debian's binary itself (its `chromium` wrapper
/// script writes to `/dev/null`, which some sandboxes keep as a plain file
/// that other programs then read), else `chromium` on the `PATH`.
pub(crate) fn chromium() -> Option<PathBuf> {
    let debian = PathBuf::from("/usr/lib/chromium/chromium");
    let on_path = || {
        ["chromium", "chromium-browser", "google-chrome"].iter().find_map(|name| {
            let output = Command::new("sh").args(["-c", &format!("command -v {name}")]).output().ok()?;
            output.status.success().then(|| PathBuf::from(String::from_utf8_lossy(&output.stdout).trim().to_string()))
        })
    };
    let found = std::env::var_os("TESSERA_CHROMIUM")
        .map(PathBuf::from)
        .or_else(|| debian.is_file().then_some(debian))
        .or_else(on_path);
    if found.is_none() {
        tessera_testkit::tool_missing(
            "TESSERA_REQUIRE_BROWSER",
            "chromium is not installed",
            "apt-get install chromium",
        );
    }
    found
}

/// Runs headless Chromium on `url` with `arguments`; returns its standard
/// output.
pub(crate) fn run_chromium(chromium: &Path, arguments: &[&str], url: &str) -> String {
    let profile = tempfile::tempdir().unwrap();
    let output = Command::new(chromium)
        // As root in a container: no sandbox, and no reliance on a small /dev/shm.
        .args(["--headless", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--no-first-run"])
        .arg("--hide-scrollbars")
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(arguments)
        .arg(url)
        .output()
        .unwrap();
    assert!(output.status.success(), "chromium failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

/// Where screenshots go: the test's target folder and, when set,
/// `TESSERA_SCREENSHOT_DIR`.
pub(crate) fn screenshot_paths(name: &str) -> Vec<PathBuf> {
    let mut paths = vec![PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("tessera-screenshots").join(name)];
    if let Some(dir) = std::env::var_os("TESSERA_SCREENSHOT_DIR") {
        paths.push(PathBuf::from(dir).join(name));
    }
    paths
}

/// Takes a screenshot of `url` at `width`×`height` into each of `paths`.
pub(crate) fn screenshot(chromium: &Path, url: &str, width: u32, height: u32, paths: &[PathBuf]) {
    for path in paths {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        run_chromium(
            chromium,
            &[&format!("--screenshot={}", path.display()), &format!("--window-size={width},{height}")],
            url,
        );
        let png = std::fs::read(path).unwrap();
        assert!(png.starts_with(b"\x89PNG") && png.len() > 10_000, "{} is no screenshot", path.display());
    }
}

/// The script that measures, in the laid-out page, each tile against the
/// memory slices it should cover, and the page's size, into `#measured`.
pub(crate) const MEASURE: &str = r#"<script>
window.addEventListener('load', () => {
  const tiles = [];
  document.querySelectorAll('svg.gpu').forEach(svg => svg.querySelectorAll('g.tile').forEach(tile => {
    const start = +tile.dataset.start, slices = +tile.dataset.memorySlices;
    const box = tile.querySelector('rect').getBoundingClientRect();
    const first = svg.querySelector(`rect.mem-slice[data-slice="${start}"]`).getBoundingClientRect();
    const last = svg.querySelector(`rect.mem-slice[data-slice="${start + slices - 1}"]`).getBoundingClientRect();
    tiles.push({gpu: svg.dataset.node + '/' + svg.dataset.gpu, service: tile.dataset.service, start,
      left: box.left, right: box.right, first: first.left, last: last.right, width: box.width / slices});
  }));
  // Table headers whose text runs past their cell (into the next one).
  const overflowing = [...document.querySelectorAll('th')]
    .filter(th => th.offsetParent !== null && th.scrollWidth > th.clientWidth + 1).map(th => th.textContent);
  const pre = document.createElement('pre'); pre.id = 'measured';
  pre.textContent = JSON.stringify({tiles, page_height: document.documentElement.scrollHeight,
    viewport_height: window.innerHeight, overflowing_headers: overflowing});
  document.body.appendChild(pre);
});
</script>"#;

/// Lays `html` out in Chromium (a `width`×`height` window) and returns
/// what [`MEASURE`] found.
pub(crate) fn measure(chromium: &Path, html: &str, width: u32, height: u32) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("page.html");
    std::fs::write(&file, html.replace("</body>", &format!("{MEASURE}</body>"))).unwrap();
    let dom = run_chromium(
        chromium,
        &["--dump-dom", &format!("--window-size={width},{height}")],
        &format!("file://{}", file.display()),
    );
    let measured = Regex::new(r#"(?s)<pre id="measured">(.*?)</pre>"#).unwrap();
    let text = &measured.captures(&dom).expect("the measurement ran")[1];
    serde_json::from_str(&text.replace("&quot;", "\"").replace("&amp;", "&")).unwrap()
}

/// Every tile of `measured` sits exactly over the memory slices from its
/// start slice, at least `min_slice_px` wide per slice; returns how many.
pub(crate) fn check_tiles(measured: &Value, min_slice_px: f64) -> usize {
    let tiles = measured["tiles"].as_array().unwrap();
    for tile in tiles {
        let (left, first) = (tile["left"].as_f64().unwrap(), tile["first"].as_f64().unwrap());
        let (right, last) = (tile["right"].as_f64().unwrap(), tile["last"].as_f64().unwrap());
        assert!((left - first).abs() < 0.5 && (right - last).abs() < 0.5, "tile off its slices: {tile}");
        assert!(tile["width"].as_f64().unwrap() >= min_slice_px, "tile shrunk: {tile}");
    }
    tiles.len()
}

/// `dom` without its scripts' text (the report's script holds markup of
/// its own, and its data every GPU).
pub(crate) fn without_scripts(dom: &str) -> String {
    Regex::new(r"(?s)<script\b.*?</script>").unwrap().replace_all(dom, "").into_owned()
}

/// The fill of every tile's service in `html`, by service (each service
/// has one).
pub(crate) fn tile_fills(html: &str) -> BTreeMap<String, String> {
    let tile = Regex::new(r#"<g class="tile" data-service="([^"]*)"[^>]*><rect [^>]*fill="(#[0-9a-f]{6})""#).unwrap();
    let mut fills = BTreeMap::new();
    for found in tile.captures_iter(&without_scripts(html)) {
        let fill = fills.entry(found[1].to_string()).or_insert_with(|| found[2].to_string());
        assert_eq!(fill, &found[2], "{} has two colours", &found[1]);
    }
    fills
}

/// Instances of a plan JSON document, as (node/gpu, service, start).
fn instances(plan: &Value) -> Vec<(String, String, u64)> {
    let mut found = Vec::new();
    for gpu in plan["gpus"].as_array().unwrap() {
        for instance in gpu["instances"].as_array().unwrap() {
            found.push((
                format!("{}/{}", gpu["node"], gpu["index"]),
                instance["service"].as_str().unwrap().to_string(),
                instance["start"].as_u64().unwrap(),
            ));
        }
    }
    found.sort();
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plan_page_shows_every_instance_at_its_start_slice_and_the_service_table() {
    let Some(chromium) = chromium() else { return };
    let mut server = start_server(|config| config.public_reads = true).await;
    let mut client = server.client().await;
    // Sixteen tenants (the six of the demo at several rates): about 16 GPUs.
    let import = json!({"format": "tessera", "files": {"example.csv": crate::util::example_profiles_csv()}});
    assert_eq!(client.post("/v1/profiles", &import).await.unwrap().status, 201);
    for (index, slo) in tessera_core::synthetic::demo_services().iter().cycle().take(16).enumerate() {
        let body = json!({"name": format!("{}-{index}", slo.service), "model": slo.model,
            "rate_rps": slo.rate_rps * (1.0 + index as f64 / 10.0), "latency_slo_ms": slo.latency_slo_ms});
        assert_eq!(client.post("/v1/services", &body).await.unwrap().status, 201);
    }
    let id = client.post("/v1/plans", &json!({"time_limit_s": 20.0})).await.unwrap().json()["id"].as_u64().unwrap();
    let job = wait_job(&mut client, id).await;
    assert_eq!(job["status"], "done", "{job}");
    let plan = &job["plan"];
    let url = format!("http://{}/", server.address);

    // The DOM Chromium built from the served page.
    let dom = without_scripts(&run_chromium(&chromium, &["--dump-dom"], &url));
    let tile = Regex::new(r#"<g class="tile" data-service="([^"]*)" data-profile="[^"]*" data-start="(\d+)""#).unwrap();
    assert_eq!(tile.captures_iter(&dom).count(), instances(plan).len(), "one tile per instance");
    let row = Regex::new(
        r#"<tr data-service="([^"]*)"><td>[^<]*</td><td>([^<]*)</td><td>([\d.]+)</td><td>([\d.]+)</td><td>[^<]*</td><td>([\d.]+)</td><td>([\d.]+)</td><td>([\d.]+)% of ([\d.]+)%</td><td>([+-][\d.]+)%</td><td>(\d+)</td><td class="[a-z]+">(yes|no)</td></tr>"#,
    )
    .unwrap();
    let rows: Vec<_> = row.captures_iter(&dom).collect();
    let services = plan["services"].as_array().unwrap();
    assert_eq!(rows.len(), services.len());
    for (row, report) in rows.iter().zip(services) {
        assert_eq!(&row[1], report["service"].as_str().unwrap());
        assert_eq!(&row[2], report["model"].as_str().unwrap());
        for (column, field) in [(3, "rate_rps"), (4, "provisioned_rps"), (5, "worst_latency_ms"), (6, "latency_slo_ms")]
        {
            assert_eq!(row[column].to_string(), format!("{:.2}", report[field].as_f64().unwrap()), "{field}");
        }
        let predicted = 100.0 * report["predicted_attainment"].as_f64().unwrap();
        assert_eq!(row[7].to_string(), format!("{predicted:.2}"), "predicted_attainment");
        assert_eq!(row[8].parse::<f64>().unwrap(), report["percentile"].as_f64().unwrap());
        let tolerance = 100.0 * report["tolerance"].as_f64().unwrap();
        assert_eq!(row[9].to_string(), format!("{tolerance:+.1}"), "tolerance");
        assert_eq!(row[10].parse::<u64>().unwrap(), report["segments"].as_u64().unwrap());
        assert_eq!(&row[11] == "yes", report["met"].as_bool().unwrap());
    }
    // The overview lists the least tolerant services first.
    let edge =
        dom.split(r#"<table class="edge">"#).nth(1).expect("the overview has the services closest to their edge");
    let edge = edge.split("</table>").next().unwrap();
    let least = services
        .iter()
        .min_by(|a, b| a["tolerance"].as_f64().unwrap().total_cmp(&b["tolerance"].as_f64().unwrap()))
        .unwrap();
    let first = edge.split(r#"<tr data-service=""#).nth(1).unwrap().split('"').next().unwrap();
    assert_eq!(first, least["service"].as_str().unwrap(), "{edge}");
    assert_eq!(edge.matches("<tr data-service=").count(), services.len().min(5));

    // Where Chromium laid the tiles out: each over its own memory slices.
    let html = client.get("/").await.unwrap().text();
    let measured = measure(&chromium, &html, 1440, 900);
    assert_eq!(check_tiles(&measured, 60.0), instances(plan).len());
    let mut seen: Vec<(String, String, u64)> = measured["tiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["gpu"].as_str().unwrap().to_string(),
                t["service"].as_str().unwrap().to_string(),
                t["start"].as_u64().unwrap(),
            )
        })
        .collect();
    seen.sort();
    assert_eq!(seen, instances(plan));

    // One palette: every service has the colour tessera-report gives it,
    // the same as in `tessera report`'s page of this plan, and services
    // drawn next to each other are far apart.
    let plan: Plan = tessera_store::parse_plan("the job's plan", plan.to_string().as_bytes()).unwrap();
    let palette = tessera_report::Palette::of(&plan);
    let served = tile_fills(&html);
    assert_eq!(served.len(), services.len());
    assert_eq!(served, tile_fills(&tessera_report::plan_report_html(&plan, "the same plan")));
    for (service, fill) in &served {
        assert_eq!(fill, palette.fill(&service.replace("&amp;", "&")), "{service}");
    }
    crate::report_pages::assert_neighbours_apart(&plan);

    screenshot(&chromium, &url, 1440, 900, &screenshot_paths("plan-page.png"));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_docs_page_lists_every_operation_of_the_document() {
    let Some(chromium) = chromium() else { return };
    let mut server = start_server(|config| config.public_reads = true).await;
    let doc = server.client().await.get("/openapi.json").await.unwrap().json();
    let mut operations: Vec<String> = doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, item)| item.as_object().unwrap().keys().map(move |method| format!("{method} {path}")))
        .collect();
    // The page's script fetches the document and draws one entry per
    // operation: let it run before the DOM is read.
    let dom = run_chromium(
        &chromium,
        &["--virtual-time-budget=5000", "--dump-dom"],
        &format!("http://{}/docs", server.address),
    );
    let entry = Regex::new(r#"<summary><span class="method ([a-z]+)">[A-Z]+</span> <code>([^<]+)</code>"#).unwrap();
    let mut drawn: Vec<String> =
        entry.captures_iter(&dom).map(|found| format!("{} {}", &found[1], found[2].replace("&amp;", "&"))).collect();
    operations.sort();
    drawn.sort();
    assert!(operations.len() > 20, "{operations:?}");
    assert_eq!(drawn, operations);
    server.stop().await;
}
