//! The analytic percentile latency and capacity of a segment.

mod data;
mod parvagpu;
mod properties;
mod reference;
mod speed;
