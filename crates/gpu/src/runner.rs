//! Every driver program Tessera runs on a GPU machine (`nvidia-smi`,
//! `nvidia-cuda-mps-control`) goes through [`CommandRunner`], so the logic
//! can be tested against the fake driver (feature `fake`).

use std::io::{ErrorKind, Write as _};
use std::process::{Command, Stdio};

use crate::error::GpuError;

/// What a command printed and how it exited.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CommandOutput {
    /// Exit status (−1 when killed by a signal).
    pub status: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl CommandOutput {
    /// `true` for exit status 0.
    pub fn success(&self) -> bool {
        self.status == 0
    }

    /// The first non-empty line of stderr, else of stdout (nvidia-smi
    /// prints many errors on stdout).
    pub fn first_error_line(&self) -> String {
        self.stderr
            .lines()
            .chain(self.stdout.lines())
            .map(str::trim)
            .find(|line| !line.is_empty())
            .unwrap_or("no output")
            .to_string()
    }
}

/// Runs a program with arguments.
pub trait CommandRunner {
    /// Runs `program` with `args` and returns its output; `Err` only when it
    /// cannot be run at all. A non-zero exit status is an `Ok` output.
    fn run(&mut self, program: &str, args: &[String]) -> Result<CommandOutput, GpuError>;

    /// Like [`CommandRunner::run`], with `env` added to the environment and
    /// `stdin` (when given) written to its standard input. Runners that
    /// cannot do either refuse when asked to.
    fn run_with(
        &mut self,
        program: &str,
        args: &[String],
        env: &[(String, String)],
        stdin: Option<&str>,
    ) -> Result<CommandOutput, GpuError> {
        if env.is_empty() && stdin.is_none() {
            self.run(program, args)
        } else {
            Err(GpuError::Spawn {
                program: program.to_string(),
                message: "this runner cannot set the environment or standard input".to_string(),
            })
        }
    }
}

/// Runs commands on this machine with [`std::process::Command`].
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemRunner;

impl CommandRunner for SystemRunner {
    fn run(&mut self, program: &str, args: &[String]) -> Result<CommandOutput, GpuError> {
        self.run_with(program, args, &[], None)
    }

    fn run_with(
        &mut self,
        program: &str,
        args: &[String],
        env: &[(String, String)],
        stdin: Option<&str>,
    ) -> Result<CommandOutput, GpuError> {
        let spawn_error = |error: std::io::Error| match error.kind() {
            ErrorKind::NotFound => GpuError::ProgramMissing { program: program.to_string() },
            _ => GpuError::Spawn { program: program.to_string(), message: error.to_string() },
        };
        let mut child = Command::new(program)
            .args(args)
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(spawn_error)?;
        if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
            // A program that exits without reading its input is not an error here.
            let _ = pipe.write_all(text.as_bytes());
        }
        let output = child.wait_with_output().map_err(spawn_error)?;
        Ok(CommandOutput {
            status: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        })
    }
}

/// `program args…` as one line, for messages and dry runs.
pub fn command_line(program: &str, args: &[String]) -> String {
    std::iter::once(program).chain(args.iter().map(String::as_str)).collect::<Vec<_>>().join(" ")
}

/// `text` as one shell word: as is when it holds only safe characters,
/// else in single quotes. Every command line Tessera shows or hands to a
/// shell quotes its words with this.
pub fn shell_word(text: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c);
    if !text.is_empty() && text.chars().all(safe) {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// Runs a command and turns a non-zero exit status into
/// [`GpuError::CommandFailed`].
pub fn run_checked(runner: &mut dyn CommandRunner, program: &str, args: &[String]) -> Result<CommandOutput, GpuError> {
    let output = runner.run(program, args)?;
    if output.success() {
        Ok(output)
    } else {
        Err(GpuError::CommandFailed {
            command: command_line(program, args),
            status: output.status,
            message: output.first_error_line(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_program_is_a_one_line_error() {
        let error = SystemRunner.run("tessera-no-such-program-xyz", &[]).unwrap_err();
        assert!(matches!(error, GpuError::ProgramMissing { .. }));
        let message = error.to_string();
        assert_eq!(message, "tessera-no-such-program-xyz not found: install the NVIDIA driver");
    }

    #[test]
    fn shell_words_are_quoted_only_when_needed() {
        assert_eq!(shell_word("/tmp/tessera-mps/gpu0-3g.40gb-4/pipe"), "/tmp/tessera-mps/gpu0-3g.40gb-4/pipe");
        assert_eq!(shell_word("python serve.py"), "'python serve.py'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        assert_eq!(shell_word(""), "''");
        // What a shell makes of it is the text again.
        let text = "a 'quoted' $HOME \"word\"; echo no";
        let output = SystemRunner.run("sh", &["-c".into(), format!("printf %s {}", shell_word(text))]).unwrap();
        assert_eq!(output.stdout, text);
    }

    #[test]
    fn runs_a_real_program() {
        let output = SystemRunner.run("sh", &["-c".into(), "echo hi; exit 3".into()]).unwrap();
        assert_eq!((output.status, output.stdout.trim()), (3, "hi"));
    }

    #[test]
    fn runs_with_environment_and_input() {
        let env = [("TESSERA_TEST_Y".to_string(), "y".to_string())];
        let args = ["-c".to_string(), "read line; echo $TESSERA_TEST_Y-$line".to_string()];
        let output = SystemRunner.run_with("sh", &args, &env, Some("quit\n")).unwrap();
        assert_eq!((output.status, output.stdout.trim()), (0, "y-quit"));
        let missing = SystemRunner.run_with("tessera-no-such-program-xyz", &[], &env, None).unwrap_err();
        assert!(matches!(missing, GpuError::ProgramMissing { .. }));
    }
}
