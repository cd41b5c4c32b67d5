//! Starting the services of a deployment detached, so they outlive
//! Tessera, and later telling whether they run and stopping them by pid
//! (signals through `kill(2)`, never a `kill` program).

#[cfg(any(test, feature = "fake"))]
use std::collections::BTreeSet;
use std::fs::OpenOptions;
use std::os::unix::process::CommandExt as _;
use std::path::Path;
#[cfg(any(test, feature = "fake"))]
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::GpuError;
use crate::signal::{group_exists, signal_group, GroupSignal};

/// Starts, watches and stops the long-running processes of a deployment.
/// A process is known by its pid, which is also its process group's id.
pub trait ServiceLauncher {
    /// Starts `command` (a shell command line) with `env` added to the
    /// environment, detached in its own process group, its standard output
    /// and error appended to `log`; returns its pid.
    fn start_detached(&mut self, command: &str, env: &[(String, String)], log: &Path) -> Result<u32, GpuError>;

    /// `true` while a process of the group `pid` leads runs (also one
    /// Tessera may not signal).
    fn is_alive(&mut self, pid: u32) -> bool;

    /// Stops the process group `pid` leads: SIGTERM, then SIGKILL when it
    /// outlives the grace period. A group already gone is no error; one
    /// that may not be signalled is, naming the group.
    fn stop(&mut self, pid: u32) -> Result<(), GpuError>;
}

/// Runs processes with `sh -c COMMAND` in a new process group, so that a
/// closing terminal or Tessera's exit leaves them running, and signals go
/// to everything the command started.
#[derive(Debug, Clone)]
pub struct DetachedLauncher {
    /// How long a process may take to exit after SIGTERM before it gets
    /// SIGKILL.
    pub grace: Duration,
}

impl Default for DetachedLauncher {
    fn default() -> Self {
        Self { grace: Duration::from_secs(10) }
    }
}

/// How often a stopping process is checked.
const POLL: Duration = Duration::from_millis(20);

/// How long a process group may take to vanish after SIGKILL.
const KILL_WAIT: Duration = Duration::from_secs(2);

impl DetachedLauncher {
    /// Waits up to `limit` for group `pid` to vanish; `true` when it did.
    fn gone_within(&mut self, pid: u32, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while self.is_alive(pid) {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(POLL);
        }
        true
    }
}

impl ServiceLauncher for DetachedLauncher {
    fn start_detached(&mut self, command: &str, env: &[(String, String)], log: &Path) -> Result<u32, GpuError> {
        let error = |message: String| GpuError::Workload { command: command.to_string(), message };
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| error(format!("cannot open its log {}: {e}", log.display())))?;
        let stderr = file.try_clone().map_err(|e| error(format!("cannot open its log {}: {e}", log.display())))?;
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(command)
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(stderr)
            .process_group(0)
            .spawn()
            .map_err(|e| error(format!("cannot start: {e}")))?;
        let pid = child.id();
        // Reaps it should it exit while Tessera still runs (it would linger
        // as a zombie and look alive); after Tessera exits, init does.
        std::thread::spawn(move || child.wait());
        Ok(pid)
    }

    fn is_alive(&mut self, pid: u32) -> bool {
        // A pid Tessera would never signal (0, 1) runs no service of its own.
        group_exists(pid).unwrap_or(false)
    }

    fn stop(&mut self, pid: u32) -> Result<(), GpuError> {
        if !signal_group(pid, GroupSignal::Terminate)? || self.gone_within(pid, self.grace) {
            return Ok(());
        }
        signal_group(pid, GroupSignal::Kill)?;
        if self.gone_within(pid, KILL_WAIT) {
            Ok(())
        } else {
            Err(GpuError::Workload {
                command: format!("process group {pid}"),
                message: format!("still runs {} s after SIGKILL", KILL_WAIT.as_secs()),
            })
        }
    }
}

/// One process the fake started.
#[cfg(any(test, feature = "fake"))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeProcess {
    /// Its pid.
    pub pid: u32,
    /// Its command line.
    pub command: String,
    /// The environment added.
    pub env: Vec<(String, String)>,
    /// Its log.
    pub log: PathBuf,
}

/// Starts nothing: hands out pids from 1000 on and remembers which run.
#[cfg(any(test, feature = "fake"))]
#[derive(Debug, Clone, Default)]
pub struct FakeServiceLauncher {
    /// Every process started, in order.
    pub started: Vec<FakeProcess>,
    /// Every pid stopped, in order.
    pub stopped: Vec<u32>,
    alive: BTreeSet<u32>,
    fail_start: Option<usize>,
}

#[cfg(any(test, feature = "fake"))]
impl FakeServiceLauncher {
    /// A launcher that has started nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes the `n`-th start (1-based, counted from now) fail.
    pub fn fail_nth_start(&mut self, n: usize) {
        self.fail_start = Some(self.started.len() + n);
    }

    /// The pids that run, ascending.
    pub fn running(&self) -> Vec<u32> {
        self.alive.iter().copied().collect()
    }

    /// Makes `pid` exit on its own (a crash).
    pub fn crash(&mut self, pid: u32) {
        self.alive.remove(&pid);
    }
}

#[cfg(any(test, feature = "fake"))]
impl ServiceLauncher for FakeServiceLauncher {
    fn start_detached(&mut self, command: &str, env: &[(String, String)], log: &Path) -> Result<u32, GpuError> {
        if self.fail_start == Some(self.started.len() + 1) {
            self.fail_start = None;
            return Err(GpuError::Workload {
                command: command.to_string(),
                message: "cannot start: injected failure".to_string(),
            });
        }
        let pid = 1000 + u32::try_from(self.started.len()).unwrap_or(u32::MAX - 1000);
        self.started.push(FakeProcess { pid, command: command.to_string(), env: env.to_vec(), log: log.to_path_buf() });
        self.alive.insert(pid);
        Ok(pid)
    }

    fn is_alive(&mut self, pid: u32) -> bool {
        self.alive.contains(&pid)
    }

    fn stop(&mut self, pid: u32) -> Result<(), GpuError> {
        self.alive.remove(&pid);
        self.stopped.push(pid);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
        let deadline = Instant::now() + limit;
        while !done() {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(POLL);
        }
        true
    }

    #[test]
    fn detached_processes_log_and_stop_with_their_children() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("proc0.log");
        let mut launcher = DetachedLauncher { grace: Duration::from_secs(5) };
        let env = [("TESSERA_TEST_D".to_string(), "d".to_string())];
        let pid = launcher.start_detached("echo up-$TESSERA_TEST_D; sleep 30 & sleep 30", &env, &log).unwrap();
        assert!(launcher.is_alive(pid));
        assert!(wait_until(Duration::from_secs(5), || std::fs::read_to_string(&log).unwrap() == "up-d\n"));
        let start = Instant::now();
        launcher.stop(pid).unwrap();
        assert!(start.elapsed() < Duration::from_secs(5), "stop took {:?}", start.elapsed());
        assert!(!launcher.is_alive(pid), "the whole group is gone");
        launcher.stop(pid).unwrap();
    }

    #[test]
    fn a_process_that_exits_is_not_alive_and_ignoring_sigterm_gets_sigkill() {
        let dir = tempfile::tempdir().unwrap();
        let mut launcher = DetachedLauncher { grace: Duration::from_millis(300) };
        let quick = launcher.start_detached("exit 0", &[], &dir.path().join("quick.log")).unwrap();
        assert!(wait_until(Duration::from_secs(5), || !launcher.is_alive(quick)));
        let stubborn =
            launcher.start_detached("trap '' TERM; while :; do sleep 1; done", &[], &dir.path().join("s.log")).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        launcher.stop(stubborn).unwrap();
        assert!(!launcher.is_alive(stubborn));
        let error = launcher.start_detached("true", &[], &dir.path().join("no/such/dir.log")).unwrap_err().to_string();
        assert!(error.contains("cannot open its log") && error.contains("dir.log"), "{error}");
    }

    #[test]
    fn a_recorded_pid_of_init_or_our_own_group_is_never_signalled() {
        // `kill -- -1` would reach every process of the user; a pids file
        // edited to say 1 (or 0) runs no service of Tessera's.
        let mut launcher = DetachedLauncher { grace: Duration::from_millis(10) };
        for pid in [0, 1] {
            assert!(!launcher.is_alive(pid));
            let error = launcher.stop(pid).unwrap_err().to_string();
            assert!(error.contains(&format!("process group {pid}")), "{error}");
        }
    }

    #[test]
    fn the_fake_counts_and_fails_on_request() {
        let mut fake = FakeServiceLauncher::new();
        let a = fake.start_detached("a", &[], Path::new("a.log")).unwrap();
        fake.fail_nth_start(2);
        let b = fake.start_detached("b", &[], Path::new("b.log")).unwrap();
        assert!(fake.start_detached("c", &[], Path::new("c.log")).unwrap_err().to_string().contains("injected"));
        assert_eq!(fake.running(), vec![a, b]);
        fake.crash(a);
        fake.stop(b).unwrap();
        assert!(!fake.is_alive(a) && !fake.is_alive(b));
        assert_eq!(fake.stopped, vec![b]);
    }
}
