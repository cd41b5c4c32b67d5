//! What Tessera's test suites share (a dev-dependency only).
//!
//! The measured data of the published systems lives beside the repository,
//! in `../shared/data` (see its README); a user's fresh clone has none, so
//! tests that need it skip. A skip is never silent: it prints a `skipping:`
//! line straight to the terminal (past the test harness's capture), and
//! where the data is expected — `TESSERA_REQUIRE_SHARED_DATA=1`, which
//! `.ci/run` sets — a missing file fails the test instead.
//!
//! # Design notes
//!
//! A tour of the modules; ARCHITECTURE.md holds the crate's invariants and
//! the tests that enforce them.
//!
//! A dev-dependency only: `kubernetes_validate(files)` validates manifests
//! against Kubernetes 1.34's schemas in strict mode with PyPI's
//! `kubernetes-validate` (skipping visibly when absent, failing under
//! `TESSERA_REQUIRE_KUBERNETES_VALIDATE=1`, which `.ci/run` sets after
//! installing it); `shared_data(relative)` finds a file of
//! `../shared/data` for a test, or prints a visible `skipping:` line (past the
//! test harness's capture) and returns `None`; under
//! `TESSERA_REQUIRE_SHARED_DATA=1`, which `.ci/run` sets when the folder is
//! there, a missing file fails the test instead; `tool_missing(variable,
//! what, install)` does the same for any external tool a test runs
//! (Chromium under `TESSERA_REQUIRE_BROWSER=1`, promtool under
//! `TESSERA_REQUIRE_PROMTOOL=1`; `.ci/run` installs both with apt-get when
//! missing and sets both).

use std::io::Write as _;
use std::path::{Path, PathBuf};

/// The variable that turns a skip into a failure.
pub const REQUIRE_VARIABLE: &str = "TESSERA_REQUIRE_SHARED_DATA";

/// `../shared/data` beside the repository.
pub fn shared_data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data")
}

/// The reference file or folder at `relative` under `../shared/data`, or
/// `None` (after saying so) when it is absent and not required.
///
/// # Panics
/// When it is absent and [`REQUIRE_VARIABLE`] is set to `1`.
pub fn shared_data(relative: &str) -> Option<PathBuf> {
    let required = std::env::var(REQUIRE_VARIABLE).is_ok_and(|value| value == "1");
    let found = locate(&shared_data_dir(), relative, required).unwrap_or_else(|message| panic!("{message}"));
    if found.is_none() {
        // Straight to the terminal: the harness captures only print! and eprint!.
        let _ = writeln!(std::io::stderr(), "skipping: {relative} is absent from {}", shared_data_dir().display());
    }
    found
}

/// The reference scale catalogue of `services` services, written by
/// `../shared/tools/scale_catalogue.py` into `dir/catalogue-<services>` in
/// ParvaGPU's folder format (`prof_data/`, `SLO_req_rate.csv`,
/// `SLO_latency.csv`; every scenario row the same): that folder, or `None`
/// (after saying so) when the tool or its data is absent and not required.
///
/// # Panics
/// When the tool is absent and [`REQUIRE_VARIABLE`] is set to `1`, or when
/// `python3` cannot run it.
pub fn scale_catalogue(services: usize, dir: &Path) -> Option<PathBuf> {
    reference_catalogue("scale_catalogue.py", services, &dir.join(format!("catalogue-{services}")))
}

/// The long-tail catalogue of `services` services over ParvaGPU's models,
/// written by `../shared/tools/long_tail_catalogue.py` (default options)
/// into `dir/long-tail-<services>`: its `services.csv` (service, model,
/// rate_rps, latency_ms), or `None` (after saying so) when the tool or its
/// data is absent and not required.
///
/// # Panics
/// As [`scale_catalogue`].
pub fn long_tail_catalogue(services: usize, dir: &Path) -> Option<PathBuf> {
    let out = dir.join(format!("long-tail-{services}"));
    reference_catalogue("long_tail_catalogue.py", services, &out).map(|out| out.join("services.csv"))
}

/// Runs the reference catalogue tool `name` for `services` services into
/// `out`: `out`, or `None` when the tool or its data is absent.
fn reference_catalogue(name: &str, services: usize, out: &Path) -> Option<PathBuf> {
    shared_data("parvagpu/prof_data")?;
    let required = std::env::var(REQUIRE_VARIABLE).is_ok_and(|value| value == "1");
    let tool =
        locate(&shared_data_dir().join("../tools"), name, required).unwrap_or_else(|message| panic!("{message}"));
    let Some(tool) = tool else {
        let _ = writeln!(std::io::stderr(), "skipping: {name} is absent beside the reference data");
        return None;
    };
    let out = out.to_path_buf();
    let status = std::process::Command::new("python3")
        .arg(&tool)
        .arg(services.to_string())
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap_or_else(|error| panic!("cannot run python3 {}: {error}", tool.display()));
    assert!(status.success(), "python3 {} {services} failed: {status}", tool.display());
    Some(out)
}

/// `dir/relative` when it exists; else `None`, or, when `required`, the
/// reason it must be there.
fn locate(dir: &Path, relative: &str, required: bool) -> Result<Option<PathBuf>, String> {
    let path = dir.join(relative);
    if path.exists() {
        return Ok(Some(path));
    }
    if required {
        return Err(format!(
            "{} is absent but {REQUIRE_VARIABLE}=1 says the reference data must be there",
            path.display()
        ));
    }
    Ok(None)
}

/// The variable that makes [`kubernetes_validate`] required (`.ci/run`
/// sets it).
pub const REQUIRE_VALIDATOR_VARIABLE: &str = "TESSERA_REQUIRE_KUBERNETES_VALIDATE";

/// Validates Kubernetes manifests against Kubernetes 1.34's official
/// schemas in strict mode (unknown fields rejected) with PyPI's
/// `kubernetes-validate`. Returns `false`, after a visible `skipping:`
/// line, when the tool is absent and not required.
///
/// # Panics
/// When a file does not validate, or the tool is absent but
/// [`REQUIRE_VALIDATOR_VARIABLE`] is `1`.
pub fn kubernetes_validate(files: &[PathBuf]) -> bool {
    let run = std::process::Command::new("kubernetes-validate")
        .args(["--strict", "-k", "1.34.0", "--quiet"])
        .args(files)
        .output();
    let output = match run {
        Ok(output) => output,
        Err(error) => {
            tool_missing(
                REQUIRE_VALIDATOR_VARIABLE,
                &format!("kubernetes-validate cannot run ({error})"),
                "python3 -m pip install kubernetes-validate",
            );
            return false;
        }
    };
    assert!(
        output.status.success(),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    true
}

/// Says that a test skips because a tool it runs is missing (`what`, with
/// the command that installs it), on a visible `skipping:` line — or fails
/// the test when `variable` is `1` (CI installs the tool and sets it).
///
/// # Panics
/// When `variable` is set to `1`.
pub fn tool_missing(variable: &str, what: &str, install: &str) {
    assert!(
        std::env::var(variable).as_deref() != Ok("1"),
        "{what}, but {variable}=1 says it is required (install it: {install})"
    );
    // Straight to the terminal: the harness captures only print! and eprint!.
    let _ = writeln!(std::io::stderr(), "skipping: {what} (install it: {install})");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_what_exists_skips_what_does_not_and_fails_when_required() {
        let here = Path::new(env!("CARGO_MANIFEST_DIR"));
        assert_eq!(locate(here, "Cargo.toml", true), Ok(Some(here.join("Cargo.toml"))));
        assert_eq!(locate(here, "no-such-file.csv", false), Ok(None));
        let error = locate(here, "no-such-file.csv", true).unwrap_err();
        assert!(error.contains("no-such-file.csv") && error.contains(REQUIRE_VARIABLE), "{error}");
    }
}
