//! The MPS control program: starting, asking and quitting a control
//! daemon. A daemon is addressed by the environment it was started with:
//! `CUDA_MPS_PIPE_DIRECTORY` (where its control socket lives) and
//! `CUDA_MPS_LOG_DIRECTORY`.

use std::time::{Duration, Instant};

use crate::error::GpuError;
use crate::runner::{command_line, CommandOutput, CommandRunner};

/// The MPS control program.
pub const MPS_CONTROL: &str = "nvidia-cuda-mps-control";

/// Starts an MPS control daemon (`nvidia-cuda-mps-control -d`) with `env`;
/// it fails when one already runs for the same pipe directory.
pub fn start_daemon(runner: &mut dyn CommandRunner, env: &[(String, String)]) -> Result<(), GpuError> {
    let args = ["-d".to_string()];
    let output = runner.run_with(MPS_CONTROL, &args, env, None)?;
    checked(output, || command_line(MPS_CONTROL, &args))
}

/// How long [`quit_daemon`] waits for a daemon to stop answering.
const QUIT_WAIT: Duration = Duration::from_secs(10);

/// Quits the daemon of `env`'s pipe directory (`echo quit |
/// nvidia-cuda-mps-control`) and waits until it no longer answers: `quit`
/// returns at once while the daemon shuts its server down, and the next
/// daemon (or a MIG change) must not race it.
pub fn quit_daemon(runner: &mut dyn CommandRunner, env: &[(String, String)]) -> Result<(), GpuError> {
    let output = send(runner, env, "quit")?;
    checked(output, || format!("echo quit | {MPS_CONTROL}"))?;
    let asked = Instant::now();
    while daemon_answers(runner, env)? {
        if asked.elapsed() >= QUIT_WAIT {
            return Err(GpuError::CommandFailed {
                command: format!("echo quit | {MPS_CONTROL}"),
                status: 0,
                message: format!("the daemon still answers {} s after quit", QUIT_WAIT.as_secs()),
            });
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

/// `true` when a daemon answers on `env`'s pipe directory (`echo
/// get_server_list | nvidia-cuda-mps-control` succeeds); `false` also when
/// the control program is not installed, as then no daemon can run.
pub fn daemon_answers(runner: &mut dyn CommandRunner, env: &[(String, String)]) -> Result<bool, GpuError> {
    match send(runner, env, "get_server_list") {
        Ok(output) => Ok(output.success()),
        Err(GpuError::ProgramMissing { .. }) => Ok(false),
        Err(error) => Err(error),
    }
}

/// Sends one command to the daemon on standard input.
fn send(runner: &mut dyn CommandRunner, env: &[(String, String)], command: &str) -> Result<CommandOutput, GpuError> {
    runner.run_with(MPS_CONTROL, &[], env, Some(&format!("{command}\n")))
}

fn checked(output: CommandOutput, command: impl FnOnce() -> String) -> Result<(), GpuError> {
    if output.success() {
        Ok(())
    } else {
        Err(GpuError::CommandFailed { command: command(), status: output.status, message: output.first_error_line() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::FakeNvidiaSmi;
    use crate::runner::SystemRunner;

    fn pipe(dir: &str) -> Vec<(String, String)> {
        vec![("CUDA_MPS_PIPE_DIRECTORY".to_string(), dir.to_string())]
    }

    #[test]
    fn one_daemon_per_pipe_directory() {
        let mut fake = FakeNvidiaSmi::new();
        assert!(!daemon_answers(&mut fake, &pipe("/a")).unwrap());
        start_daemon(&mut fake, &pipe("/a")).unwrap();
        start_daemon(&mut fake, &pipe("/b")).unwrap();
        let again = start_daemon(&mut fake, &pipe("/a")).unwrap_err().to_string();
        assert!(again.contains("-d") && again.contains("already running"), "{again}");
        assert!(daemon_answers(&mut fake, &pipe("/a")).unwrap() && daemon_answers(&mut fake, &pipe("/b")).unwrap());
        quit_daemon(&mut fake, &pipe("/a")).unwrap();
        assert!(!daemon_answers(&mut fake, &pipe("/a")).unwrap() && daemon_answers(&mut fake, &pipe("/b")).unwrap());
        let error = quit_daemon(&mut fake, &pipe("/a")).unwrap_err().to_string();
        assert!(error.contains("echo quit") && error.contains("Cannot find MPS control daemon"), "{error}");
    }

    #[test]
    fn no_control_program_means_no_daemon() {
        // An empty PATH: the control program cannot be found.
        let mut env = pipe("/nowhere");
        env.push(("PATH".to_string(), String::new()));
        assert!(!daemon_answers(&mut SystemRunner, &env).unwrap());
    }
}
