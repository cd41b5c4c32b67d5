//! Pictures of a plan: every GPU drawn as its memory and compute slices
//! with each MIG instance as a tile at its real start slice, coloured by
//! service; and a self-contained HTML report around them (inline SVG and
//! CSS, nothing fetched from a network).
//!
//! The crate is pure — a [`Plan`](tessera_core::Plan) in, a string out — so
//! the command line (`tessera report`) and the service (`tessera serve`)
//! draw the same pictures:
//!
//! * [`plan_svg`] — the tiles alone, one SVG document.
//! * [`plan_report_html`] — the whole report: the optimality line, a legend,
//!   GPUs grouped by node, the per-service table.
//! * [`diff_report_html`] — two plans side by side: every GPU that changes,
//!   as it was beside as it will be (`tessera diff --picture`).
//! * [`serving_report_html`] — a request-level simulation: per service its
//!   latency CDF against its SLO and its attainment over time.
//! * [`plan_section`] and [`page`] — the pieces, for pages that put a plan
//!   beside other content (text goes in escaped by
//!   `tessera_core::text::escape_xml`).
//!
//! The DOM is part of the interface (the browser test reads it): every GPU
//! is an `svg.gpu` with `data-node` and `data-gpu`; every memory slice a
//! `rect.mem-slice` with `data-slice`; every instance a `g.tile` with
//! `data-service`, `data-profile`, `data-start` and `data-memory-slices`
//! whose first child is its `rect`; the service table is `table.services`
//! with one `tr` per service in plan order.
//!
//! Invariant: no I/O; the same plan gives the same bytes.

mod diff;
mod draw;
mod gpu_pages;
mod html;
mod overview;
mod palette;
mod serving;

pub use diff::diff_report_html;
pub use draw::plan_svg;
pub use gpu_pages::GPUS_PER_PAGE;
pub use html::{page, plan_report_html, plan_section};
pub use palette::{Palette, Swatch, GUARANTEED_NEIGHBOURS, MIN_NEIGHBOUR_DISTANCE, SWATCH_COUNT};
pub use serving::serving_report_html;
