//! Tessera's planners: from services with SLOs and segment profiles to a
//! [`Plan`](tessera_core::Plan) of MIG instances with MPS segments.
//!
//! The crate's interface is this page. The one way to plan is [`plan`]: a
//! [`PlanRequest`] over [`PlanInputs`] (services and profiles, completed
//! for the fleet) names a [`Strategy`] and its options, optionally a
//! running plan to replan from ([`ReplanFrom`]) and a deploy target's
//! [`Inventory`] to place the plan on; every default (the [`LatencyRule`]
//! above all) is resolved there. The one way to check a plan is
//! [`verify_plan`], answering a [`Verification`]. Beside them:
//! [`relaxation_bound`], the LP bound a plan is proven against;
//! [`complete_profiles`] and [`suggest_measurements`], which predict a
//! profile grid from a few measured points and say which to measure next.
//! Inside:
//!
//! * `strategy`, `inputs`, `planning` and `verification` — the front door
//!   described above; `problem` is what one strategy solves once every
//!   default is resolved.
//! * `placement` — placing a plan on a deploy target's nodes (the pure half
//!   of every cluster adapter).
//! * `configure` and `allocate` — ParvaGPU's segment configurator (which
//!   segments each service runs) and allocator (which GPU each goes to, on
//!   the real MIG placement lattice); `parva` wires them into the `parva`
//!   strategy, physically valid and dropping nothing.
//! * `options`, `cover`, `lp`, `bound`, `round`, `objective`,
//!   `fleet_model`, `branch` and `optimal` — the `optimal` strategy: every
//!   minimal way to serve each service, the linear-programming bound solved
//!   exactly (cheapest covers per service at prices per instance size,
//!   Kelley's cutting planes over a small simplex), the relaxation rounded
//!   to a plan, a local search within the fleet's limits and a
//!   best-bound-first branch and bound; `optimal` is a folder of its phases
//!   (`table`, `bounds`, `candidates`, `rounded`, `local_search`,
//!   `finish`).
//! * `replan` — replanning from a running plan with the fewest changes, a
//!   folder of its steps (`inherit`, `stable`, `fill`, `residual`,
//!   `absorb`, `assemble`, `align`, `keep_layouts`); `spread` — spreading a
//!   service's segments over GPUs.
//! * `share` — light services packed into shared instances;
//!   `share_rich` — a shared plan: each instance placed by the `optimal`
//!   strategy as a stand-in segment, memory-rich instances (`1g.20gb`)
//!   where the placement leaves their memory idle and they save GPUs;
//!   `share_replan` — a replan that keeps running shared instances where
//!   they run.
//! * `assemble` and `report` — per-GPU segments into a plan with explicit
//!   placements and per-service summaries.
//! * `verify` — checks any plan against profiles, SLOs, the lattice and its
//!   fleet; it shares no code with the planners but the latency rule.
//! * `estimate` — profiles for GPU models without measurements.
//! * `complete` — profile completion (`interface`, the request and the
//!   answer; `completion`, the fits and predictions): a latency model
//!   fitted per model under a prior learned across models, intervals from
//!   leave-one-out residuals, memory inferred only from measurements, and
//!   suggestions.
//!
//! Invariant: no I/O, no global state (the `optimal` search reads the clock
//! for its time limit). The modules form no cycle: shared types sit in a
//! module below those that use them, and a folder's `mod.rs` uses its
//! files, never they it.
//!
//! # Design notes
//!
//! A tour of the modules; ARCHITECTURE.md holds the crate's invariants and
//! the tests that enforce them.
//!
//! **API boundary:** every module is private; callers use the root. The
//! planning options every surface takes are one type, `PlanOptions`
//! (`plan_options`: the fleet, process limit, strategy, rule, arrivals, time
//! limit, node size, GPU ceiling and spread, with `ReplanOptions` for a
//! replan), declared once with its command-line flags (feature `clap`), JSON
//! fields (serde) and OpenAPI schema (feature `openapi`); the `plan` command,
//! the autopilot's commands and the service's plan-job body flatten it, and
//! `PlanOptions::request` is where options become a request (a CLI test
//! checks the three surfaces name the same set). The one
//! way to plan is `plan(&PlanRequest)`: a `PlanRequest` over `PlanInputs`
//! (services and profiles completed for the fleet, with notes and images;
//! `PlanInputs::demo` is the built-in example) names a `Strategy`, the rule
//! (`None`: the running plan's for a replan, else `Strategy::default_rule`),
//! the fleet and limits, and optionally `from` (a `ReplanFrom`: the running
//! plan, drained and lost GPUs) and `target` (a deploy target's
//! `Inventory`). `strategy`, `inputs` and `planning` hold them: every default
//! and the strategy dispatch are decided there, and nowhere above; "asked,
//! else recorded in the running plan, else the default" reads a plan's
//! records through `recorded_rule` and `recorded_arrivals`, for planning,
//! verifying and simulating alike. The one way
//! to check a plan is `verify_plan` → `Verification` (`verification`: the
//! rule asked, recorded, or `LatencyRule::DEFAULT` with a note; its JSON is
//! the CLI's and the service's). `relaxation_bound` is the LP bound for the
//! benchmarks. `problem` is what one strategy solves once every default is
//! resolved (the fleet, completed catalogue, services, rule, process limit,
//! time limit, GPU ceiling), its checks (the ceiling from a one-pass bound,
//! before any search) and `usable_points` (the points a planner may run:
//! within the process limit and the instance's memory). `placement` is the
//! pure half of every deploy target: an `Inventory` of `TargetNode`s, the
//! fleet it offers, placing a plan on its nodes (`Plan::node_names`),
//! checking a plan against it, and `NodeRef`/`node_number` (which node a
//! plan's node number means). Profile completion (`complete_profiles`,
//! `suggest_measurements` and their types) is the other front door.
//! `latency` defines the rules: `percentile` (the default,
//! `LatencyRule::DEFAULT`: a segment serves at most its *capacity*, the
//! highest Poisson rate at which its service's percentile of requests meets
//! the SLO under tessera-serving's analytic model), `queueing` (fill + wait +
//! run at the routed rate within the SLO, requests evenly spaced, so each
//! configuration has a maximum provisioning ratio) and `parva` (batch latency
//! < 0.45 × ⌊SLO⌋). `judge` pairs a rule and the robustness margin (every
//! batch that share slower than profiled: `LatencyRule::default_margin`,
//! recorded in the plan, resolved in `planning` like the rule) with the
//! capacities' memo
//! (`CapacityCache`, carried by `PlanInputs` and shared by every plan and
//! verification of the same inputs) and the memo of the points each service
//! is planned with (`PointsMemo`, carried likewise: they do not depend on
//! the rates, and an autopilot plans the same services every minute):
//! under `percentile` the planners see each
//! instance size's best point with its capacity in place of its throughput,
//! and the verifier recomputes every recorded `capacity_rps`. The `parva` strategy is
//! `configure` (ParvaGPU's segment configurator) + `allocate` (its best-fit
//! allocator on the real lattice, then dissolving of small GPUs), wired in
//! `parva`. The `optimal` strategy is `options` (every minimal mix of segments
//! per service, and the mixes priced within a budget), `cover` (each service's
//! cheapest cover at given prices per instance size: a small integer knapsack
//! per size set, the relaxation's pricing step), `lp` (a dense simplex for
//! the master problems, a handful of columns), `bound` (the linear-programming
//! relaxation solved exactly: prices per (GPU model, size) with every maximal
//! layout at most one GPU, Kelley's cutting planes with in–out stabilization;
//! the master's dual is the relaxed plan), `round` (the relaxed plan purified
//! to at most one split service per price, the split ones chosen exactly
//! given the rest), `objective` (GPUs or cost, then slack, then segments),
//! `fleet_model` (the fleet's GPU models as the searches see them — cost,
//! packer, limit — and the packed cost of instances on them; `round`, `branch`
//! and `optimal` all use it, none of them another's types), `optimal` (the
//! rounded relaxation and a local search from several starts within the count
//! limits, every phase under the time limit) and `branch` (best-bound-first
//! branch and bound with the relaxation at every node, reduced-cost fixing,
//! fleets included). `optimal` is a folder: `mod.rs` drives the phases;
//! `table` holds every service's options per model (only the cheapest once
//! the time is up, widened for the local search) and the choices indexing
//! them; `bounds` the relaxation over the covers, the compute bound, their
//! best rounded up to a cost a plan can have and the proofs that a fleet is
//! too small (`relaxation_bound`); `candidates` the mixes priced within a room
//! of a service's cheapest cover, shared by the rounding and the branch and
//! bound; `rounded` the relaxation's solution made whole (the first start);
//! `local_search` the starts' repair within the limits and the
//! single-service moves; `finish` the chosen mixes packed into a plan,
//! checked, never worse than `parva`, with its optimality. `assemble` turns
//! per-GPU segment lists into a `Plan`; `report` the per-service summaries
//! (the serving model's figures only where the request asks, and each
//! service's tolerance only on the plan `plan` answers, or `with_figures`);
//! `verify` checks any plan against the lattice, the profiles (memory
//! included), the SLOs and the fleet it records, listing every `Violation`
//! (a segment judged by one evaluation of the serving model at its SLO);
//! `service_check` is each service as that check sees it (`ServiceCheck`:
//! provided throughput, the predicted percentile latency and attainment or
//! the rule's worst latency, its tolerance — the largest uniform slowdown it
//! bears — and its busiest segment's load), the `by_service` of a
//! `Verification`;
//! `estimate` completes a catalogue for a fleet (measured profiles
//! transferred between GPU models of the same shape; the synthetic model only
//! for the built-in example) and says what it estimated. `complete` predicts
//! the unmeasured configurations of a profile grid from a model's measured
//! ones: `interface` (the grid, method, request and the answer: per model
//! its completed profile, each prediction with intervals and memory
//! feasibility), `completion` (`complete_profiles`: the fits, the intervals
//! and the predictions), `model` (a latency model — floor, own compute, shared capacity —
//! fitted by robust Levenberg–Marquardt under a prior learned across models,
//! with linearised leave-one-out residuals), `residual` (kernel smoothing of
//! its residuals near measurements), `interpolate` (the log-space baseline),
//! `memory` (feasibility inferred only from measured configurations that need
//! at least as much memory; a best guess of memory use for suggestions only),
//! `suggest` (a space-filling start, then what may raise the front of
//! efficiency against latency) and `linalg` (Cholesky). Intervals are
//! calibrated on the pooled leave-one-out residuals. `replan` plans new SLOs
//! from a running plan with the fewest changes: every kept GPU keeps its
//! layout and its still-usable segments, services short of their rate take
//! free instances and instances others can spare, the residual goes to
//! `plan_optimal` on new GPUs (moved into one kept GPU's unused slices where
//! it fits), and while over the GPU bound the most wasteful kept GPUs are
//! dissolved; the result competes with the fresh optimum `align_to`'d to the
//! old numbering, rebuilt on old layouts that hold it (`keep_layouts`) and
//! `reseat`ed, and the one that changes least (by `DiffTotals::churn`) wins.
//! It calls the `optimal` strategy only through `plan_optimal`. `replan` is
//! a folder: `mod.rs` compares the stable plan with the fresh one; `inherit`
//! turns the running plan into work GPUs; `stable` runs the rounds and the
//! dissolving; `fill` moves segments within kept layouts (releasing
//! over-provisioning, covering deficits, handing out leftovers); `residual`
//! plans the rest on new GPUs and `absorb` moves new GPUs into kept ones'
//! unused slices; `assemble` numbers the work GPUs into a plan; `align`
//! (`align_to`, `reseat`) and `keep_layouts` bring the fresh plan close to the
//! running one; beneath them `work` (work GPUs, the per-service ledger),
//! `candidates` (the configurations a service may run) and `position`
//! (`GpuPosition`). `spread`
//! (`PlanRequest::spread`, `plan --spread`) trades segments between same-profile instances of GPUs of
//! one model until no service with several segments sits on one GPU: layouts,
//! GPU count and every service's segments unchanged. Error type:
//! `PlanError` (every service that cannot be served is named, not only the
//! first).

mod allocate;
mod assemble;
mod bound;
mod branch;
mod cancel;
mod complete;
mod configure;
mod cover;
mod error;
mod estimate;
mod fleet_model;
mod inputs;
mod judge;
mod latency;
mod lp;
mod objective;
mod optimal;
mod options;
mod parva;
mod placement;
mod plan_options;
mod planning;
mod problem;
mod replan;
mod report;
mod round;
mod service_check;
mod share;
mod share_replan;
mod share_rich;
mod spread;
mod strategy;
mod tolerance;
mod verification;
mod verify;
mod verify_shared;
mod violation;

pub use cancel::Cancel;
pub use complete::{
    complete_profiles, suggest_measurements, CompletionMethod, CompletionRequest, Feasibility, Interval,
    ModelCompletion, Prediction, ProfileGrid, Suggestion, GRID_BATCHES, GRID_PROCS, INTERVAL_COVERAGE, SEED_POINTS,
};
pub use error::{PlanError, UnmeetableSlo};
pub use estimate::{complete_for_fleet, Estimate, EstimateSource, ProfileOrigin};
pub use inputs::PlanInputs;
pub use latency::{LatencyRule, DEFAULT_MARGIN, MAX_MARGIN};
pub use optimal::{RelaxationBound, DEFAULT_TIME_LIMIT};
pub use placement::{node_number, Inventory, NodeRef, TargetNode};
#[cfg(feature = "clap")]
pub use plan_options::parse_margin;
pub use plan_options::{Arrivals, PlanOptions, ReplanOptions, DEFAULT_GPU_MODEL};
pub use planning::{
    plan, recorded_arrivals, recorded_rule, relaxation_bound, with_figures, PlanRequest, Planned, ReplanComparison,
    ReplanFrom,
};
pub use problem::{DEFAULT_GPUS_PER_NODE, DEFAULT_MAX_GPUS, DEFAULT_MAX_PROCS, MAX_GPUS_LIMIT};
pub use replan::{align_to, reseat, GpuPosition};
pub use service_check::ServiceCheck;
pub use strategy::Strategy;
pub use verification::{verify_plan, CheckOptions, Finding, Verification};
pub use verify::{check_structure, verify, verify_structure, InstanceRef, VerifyRequest, Violation};
