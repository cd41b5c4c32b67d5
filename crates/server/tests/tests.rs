//! End-to-end tests of the HTTP service: a real server on a loopback port
//! over a temporary store, driven by the crate's client (one test binary,
//! a module per area).

mod api;
mod browser;
mod errors;
mod faults;
mod openapi;
mod report_pages;
mod util;
