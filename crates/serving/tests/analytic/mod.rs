//! The analytic percentile latency and capacity of a segment.

mod brute;
mod data;
mod parvagpu;
mod properties;
mod reference;
mod speed;
