//! Signals to process groups through the `kill(2)` system call (rustix),
//! never by running a `kill` program: a group that is gone and a group that
//! may not be signalled are told apart.

use rustix::io::Errno;
use rustix::process::{kill_process_group, test_kill_process_group, Pid, Signal};

use crate::error::GpuError;

/// The signals Tessera sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GroupSignal {
    /// SIGTERM: please exit.
    Terminate,
    /// SIGKILL: exit now.
    Kill,
}

impl GroupSignal {
    fn name(self) -> &'static str {
        match self {
            GroupSignal::Terminate => "SIGTERM",
            GroupSignal::Kill => "SIGKILL",
        }
    }

    fn raw(self) -> Signal {
        match self {
            GroupSignal::Terminate => Signal::TERM,
            GroupSignal::Kill => Signal::KILL,
        }
    }
}

/// The group led by `pgid`; 0 and 1 are refused, as `kill(-1)` would reach
/// every process of the user and `kill(-0)` Tessera's own group.
fn group(pgid: u32, what: &str) -> Result<Pid, GpuError> {
    i32::try_from(pgid).ok().filter(|&raw| raw > 1).and_then(Pid::from_raw).ok_or_else(|| GpuError::Signal {
        pgid,
        what: what.to_string(),
        message: "not a process group Tessera started".into(),
    })
}

/// What a `kill` answered: delivered (`true`), no such group (`false`, it
/// is gone), or an error naming the group (e.g. not permitted).
fn outcome(pgid: u32, what: &str, result: Result<(), Errno>) -> Result<bool, GpuError> {
    match result {
        Ok(()) => Ok(true),
        Err(Errno::SRCH) => Ok(false),
        Err(Errno::PERM) => Err(GpuError::Signal {
            pgid,
            what: what.to_string(),
            message: "not permitted (the processes belong to another user)".to_string(),
        }),
        Err(errno) => Err(GpuError::Signal { pgid, what: what.to_string(), message: errno.to_string() }),
    }
}

/// Sends `signal` to every process of the group `pgid` leads: `Ok(true)`
/// when it reached one, `Ok(false)` when the group is gone.
pub(crate) fn signal_group(pgid: u32, signal: GroupSignal) -> Result<bool, GpuError> {
    let what = format!("send {} to", signal.name());
    let pid = group(pgid, &what)?;
    outcome(pgid, &what, kill_process_group(pid, signal.raw()))
}

/// `true` while a process of the group `pgid` leads exists (also one
/// Tessera may not signal); `false` once it is gone.
pub(crate) fn group_exists(pgid: u32) -> Result<bool, GpuError> {
    let what = "look for";
    let pid = group(pgid, what)?;
    match test_kill_process_group(pid) {
        Err(Errno::PERM) => Ok(true),
        other => outcome(pgid, what, other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gone_is_no_error_and_not_permitted_names_the_group() {
        assert!(!outcome(4242, "send SIGTERM to", Err(Errno::SRCH)).unwrap());
        assert!(outcome(4242, "send SIGTERM to", Ok(())).unwrap());
        let error = outcome(4242, "send SIGTERM to", Err(Errno::PERM)).unwrap_err().to_string();
        assert_eq!(
            error,
            "cannot send SIGTERM to process group 4242: not permitted (the processes belong to another user)"
        );
    }

    #[test]
    fn init_and_our_own_group_are_never_signalled() {
        for pgid in [0, 1, u32::MAX] {
            let error = signal_group(pgid, GroupSignal::Kill).unwrap_err().to_string();
            assert!(error.contains(&format!("process group {pgid}")), "{error}");
        }
    }

    #[test]
    fn a_group_that_never_existed_is_gone() {
        // The kernel's pid range ends well below this.
        let unused = 0x3fff_fff0;
        assert!(!group_exists(unused).unwrap());
        assert!(!signal_group(unused, GroupSignal::Terminate).unwrap());
    }
}
