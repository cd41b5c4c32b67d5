//! Pictures of a plan: every GPU drawn as its memory and compute slices
//! with each MIG instance as a tile at its real start slice, coloured by
//! service; and a self-contained HTML report around them (inline SVG, CSS,
//! data and script, nothing fetched from a network).
//!
//! The crate is pure — a [`Plan`](tessera_core::Plan) in, a string out — so
//! the command line (`tessera report`) and the service (`tessera serve`)
//! draw the same pictures:
//!
//! * [`plan_svg`] — the tiles alone, one SVG document.
//! * [`plan_report_html`] — the whole report, usable at any size: first an
//!   overview (GPUs by model and node, the services' utilisation as a
//!   histogram, the services not met, those closest to their edge), then
//!   the GPUs [`GPUS_PER_PAGE`] to a page with a legend of the page's
//!   services, then the service table under a search box.
//! * [`diff_report_html`] — two plans side by side: every GPU that changes,
//!   as it was beside as it will be (`tessera diff --picture`).
//! * [`serving_report_html`] — a request-level simulation: per service its
//!   latency CDF against its SLO and its attainment over time.
//! * [`autopilot_day_html`] — a simulated day ([`DayPicture`]): the GPUs
//!   each strategy held against the demand, the worst service hour by
//!   hour, the totals.
//! * [`plan_section`] and [`page`] — the pieces, for pages that put a plan
//!   beside other content (text goes in escaped by
//!   `tessera_core::text::escape_xml`).
//! * [`Palette`] — the colour of every service, the same on every page: a
//!   service's first choice comes from its name; services that share a GPU
//!   differ in colour (at least [`MIN_SHARING_DISTANCE`] in
//!   [`chromatic_distance`]) and services on GPUs next to each other are
//!   at least [`MIN_NEIGHBOUR_DISTANCE`] apart.
//!
//! The report is one self-contained document: inline CSS, SVG, data and a
//! small script, nothing fetched. The first page of GPUs is drawn in the
//! document, every GPU is in a `script.plan-data` (JSON, tens of bytes a
//! GPU), and the script draws the other pages from it, pages through them
//! and filters the GPUs and the table by a search. With scripts off the
//! overview, the first page and the whole table still read (the search box
//! stays hidden, a `noscript` line says the other pages need scripts).
//!
//! The DOM is part of the interface (the browser tests read it): the report
//! is a `div.plan-report`; the overview a `section.overview` with
//! `table.fleet` (a `tr` per GPU model, `data-gpu-model`),
//! `svg.histogram` (a `g.bucket` per utilisation tenth, with `data-bucket`
//! and `data-services`) and `table.unmet` (a `tr` per service not met, with
//! `data-service`) or `p.all-met`, and, when services record a tolerance,
//! `table.edge` (a `tr` per service closest to its edge, least tolerant
//! first, with `data-service`); the GPUs a `section.gpu-pages` with
//! `data-per-page`, `data-gpus` and, once the script runs, `data-page`, whose
//! `p.pager .shown` says which GPUs are on screen, `div.legend` has a
//! `span[data-service]` per service on screen and `div.gpu-page` the node
//! sections (`section.node` with `data-node`). Every GPU is an `svg.gpu`
//! with `data-node` and `data-gpu`; every memory slice a `rect.mem-slice`
//! with `data-slice`; every instance a `g.tile` with `data-service`,
//! `data-profile`, `data-start` and `data-memory-slices` whose first child
//! is its `rect`. The service table is one `table.services` per block of
//! rows (each in a `div.service-block`), one `tr` per service in plan order
//! across them, under `p.search`. The script sets the element
//! property `tesseraReport` on the `div.plan-report`: `show(page)` (from
//! 0) and `filter()` (applies the search box).
//!
//! Invariant: no I/O; the same plan gives the same bytes.
//!
//! # Design notes
//!
//! A tour of the modules; ARCHITECTURE.md holds the crate's invariants and
//! the tests that enforce them.
//!
//! **API boundary:** private modules, root re-exports: `plan_svg` (the tiles
//! alone, one SVG document), `plan_report_html` (the whole page),
//! `diff_report_html` (two plans side by side), `serving_report_html`,
//! `autopilot_day_html` (a simulated day, from plain series: `DayPicture`), the
//! pieces a page is built from (`plan_section`, `page`), `Palette` (every
//! service's colour, for every page) and `GPUS_PER_PAGE`. `draw`
//! draws one GPU as its memory slices with a compute band under them; each
//! MIG instance is a tile over the memory slices from its start slice
//! (compute slice `c` sits under memory slice `c`), coloured by service, with
//! its profile, service, batch × processes and its service's utilisation;
//! `serving` the page of a request-level simulation (`serving_report_html`:
//! per service its latency CDF on a "nines" scale with the SLO and the
//! percentile marked, and attainment over time); `day` the page of a
//! simulated day (each strategy's GPUs held as a step line over the demand,
//! its worst service hour by hour on the nines scale, the totals); `palette` gives each service its colour: 36 light OKLab swatches, a
//! service's first choice from a hash of its name, services drawn next to
//! each other (on one GPU or on GPUs next in plan order) at least ΔE 0.08
//! apart; `html` assembles the report; `overview` its first screen (GPUs by
//! model, the services' utilisation histogram, the services not met);
//! `gpu_pages` the GPUs a page at a time — the first page drawn in the HTML,
//! every GPU as compact JSON in the page, and `report.js` (inline) drawing
//! the other pages from it exactly as `draw` does, paging, and searching the
//! GPUs and the table; `services` the service table in blocks the browser
//! lays out only when on screen (`content-visibility`); `diff` draws two
//! plans side by side for `tessera diff --picture` (each GPU that changes,
//! old beside new, one palette for both). The DOM's classes and `data-*`
//! attributes are part of the interface (the crate docs list them): the
//! browser tests read them. It is a crate of its own, not a module of the
//! server, so `tessera report` and the service draw the same pictures without
//! the report depending on an HTTP stack, and under the pure crates' rules.

mod day;
mod diff;
mod draw;
mod edge;
mod gpu_pages;
mod html;
mod overview;
mod palette;
mod services;
mod serving;

pub use day::{autopilot_day_html, DayPicture, StrategySeries, StrategyTotals};
pub use diff::diff_report_html;
pub use draw::plan_svg;
pub use gpu_pages::GPUS_PER_PAGE;
pub use html::{page, plan_report_html, plan_section};
pub use palette::{
    chromatic_distance, colour_distance, Palette, Swatch, GUARANTEED_NEIGHBOURS, MIN_NEIGHBOUR_DISTANCE,
    MIN_SHARING_DISTANCE, SWATCH_COUNT,
};
pub use serving::serving_report_html;
