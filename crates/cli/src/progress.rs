//! Progress on standard error for work that may take a while: a spinner
//! when the amount of work is unknown, a bar when it is counted. At a
//! terminal both draw in place and vanish when dropped (also when the work
//! fails); when standard error is not a terminal (a pipe, a log) a line
//! `progress: …` is written every [`LOG_EVERY`] instead (every
//! `TESSERA_PROGRESS_EVERY_S` seconds when that is set), so that a long
//! run in a log still shows it is alive, and nothing for short work.

use std::io::{IsTerminal, Write};
use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How often a spinner redraws.
const TICK: Duration = Duration::from_millis(120);

/// How often a line is written when standard error is not a terminal.
const LOG_EVERY: Duration = Duration::from_secs(30);

/// A spinner or a bar; dropping it clears it (and stops its lines).
pub struct Progress {
    bar: ProgressBar,
    log: Option<(Sender<()>, JoinHandle<()>)>,
}

impl Progress {
    /// A spinner with `message` and the elapsed time.
    pub fn spinner(message: String) -> Self {
        let bar = ProgressBar::new_spinner().with_style(style("{spinner} {msg} ({elapsed})")).with_message(message);
        bar.enable_steady_tick(TICK);
        Progress::drawn(bar)
    }

    /// A bar over `len` steps counted in `unit` (e.g. `samples`), with
    /// `message` after it: `[####    ] 3/10 samples (4s) message`.
    pub fn bar(len: u64, unit: &str, message: String) -> Self {
        let template = format!("{{bar:30}} {{pos}}/{{len}} {unit} ({{elapsed}}) {{msg}}");
        Progress::drawn(ProgressBar::new(len).with_style(style(&template)).with_message(message))
    }

    /// `bar` drawn at a terminal, else logged on standard error.
    fn drawn(bar: ProgressBar) -> Self {
        if std::io::stderr().is_terminal() {
            return Progress { bar, log: None };
        }
        Progress::logged(bar, log_every(), Box::new(std::io::stderr()))
    }

    /// `bar` not drawn, a line of it written to `out` every `every`.
    fn logged(bar: ProgressBar, every: Duration, mut out: Box<dyn Write + Send>) -> Self {
        bar.set_draw_target(ProgressDrawTarget::hidden());
        let (stop, stopped) = channel::<()>();
        let watched = bar.clone();
        let thread = std::thread::spawn(move || {
            while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
                let _ = writeln!(out, "progress: {}", line(&watched));
            }
        });
        Progress { bar, log: Some((stop, thread)) }
    }

    /// Replaces the message.
    pub fn set_message(&self, message: String) {
        self.bar.set_message(message);
    }

    /// Advances the bar by one step.
    pub fn step(&self) {
        self.bar.inc(1);
    }

    /// Moves the bar to step `position`.
    pub fn set_position(&self, position: u64) {
        self.bar.set_position(position);
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
        if let Some((stop, thread)) = self.log.take() {
            drop(stop);
            let _ = thread.join();
        }
    }
}

/// The logged line of `bar`: its message, how far it got (bars) and how
/// long it has run.
fn line(bar: &ProgressBar) -> String {
    let elapsed_s = bar.elapsed().as_secs();
    match bar.length() {
        Some(len) => format!("{} ({}/{len}, {elapsed_s} s)", bar.message(), bar.position()),
        None => format!("{} ({elapsed_s} s)", bar.message()),
    }
}

/// [`LOG_EVERY`], or `TESSERA_PROGRESS_EVERY_S` seconds when that is a
/// positive number.
fn log_every() -> Duration {
    std::env::var("TESSERA_PROGRESS_EVERY_S")
        .ok()
        .and_then(|text| text.trim().parse::<f64>().ok())
        .filter(|seconds| seconds.is_finite() && *seconds > 0.0)
        .map_or(LOG_EVERY, Duration::from_secs_f64)
}

/// A style from a template written in this module (so always valid).
fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar())
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// A writer into a shared buffer.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn off_a_terminal_long_work_writes_a_line_now_and_then_and_short_work_none() {
        let written = Shared::default();
        let bar = ProgressBar::new(10).with_message("measuring".to_string());
        let progress = Progress::logged(bar, Duration::from_millis(20), Box::new(written.clone()));
        progress.set_position(3);
        std::thread::sleep(Duration::from_millis(110));
        drop(progress);
        let text = String::from_utf8(written.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines.len() >= 2, "{text}");
        assert!(lines.iter().all(|line| line.starts_with("progress: measuring (3/10, ") && line.ends_with(" s)")));
        let after = text.len();
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(written.0.lock().unwrap().len(), after, "nothing after the work ended");

        let quiet = Shared::default();
        drop(Progress::logged(ProgressBar::new_spinner(), Duration::from_secs(60), Box::new(quiet.clone())));
        assert!(quiet.0.lock().unwrap().is_empty());
    }
}
