//! tessera-k8s against the fake API server and the fake nvidia-smi; one
//! test binary, a module per area.

mod agent;
mod apply;
mod common;
mod end_to_end;
mod export;
mod inventory;
mod lease;
mod routing;
mod scale;
mod transition;
