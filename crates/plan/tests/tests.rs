//! The planners on many inputs: random SLO sets checked by the verifier,
//! an integer-program oracle of the optimality proofs, and plans under the
//! default rule checked by the request-level simulator. One test binary
//! with a module per area.

mod common;
mod ilp_oracle;
mod independent;
mod random_slos;
mod reference;
mod replan;
mod serving;
