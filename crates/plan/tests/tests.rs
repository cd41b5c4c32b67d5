//! The planners on many inputs: random SLO sets checked by the verifier,
//! and an integer-program oracle of the optimality proofs. One test binary
//! with a module per area.

mod common;
mod ilp_oracle;
mod random_slos;
mod reference;
mod replan;
