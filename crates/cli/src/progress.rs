//! Progress on standard error for work that may take a while: a spinner
//! when the amount of work is unknown, a bar when it is counted. Both draw
//! only when standard error is a terminal, so pipes and logs stay clean,
//! and both vanish when dropped (also when the work fails).

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// How often a spinner redraws.
const TICK: Duration = Duration::from_millis(120);

/// A spinner or a bar; dropping it clears it.
pub struct Progress(ProgressBar);

impl Progress {
    /// A spinner with `message` and the elapsed time.
    pub fn spinner(message: String) -> Self {
        let bar = ProgressBar::new_spinner().with_style(style("{spinner} {msg} ({elapsed})")).with_message(message);
        bar.enable_steady_tick(TICK);
        Progress(bar)
    }

    /// A bar over `len` steps counted in `unit` (e.g. `samples`), with
    /// `message` after it: `[####    ] 3/10 samples (4s) message`.
    pub fn bar(len: u64, unit: &str, message: String) -> Self {
        let template = format!("{{bar:30}} {{pos}}/{{len}} {unit} ({{elapsed}}) {{msg}}");
        Progress(ProgressBar::new(len).with_style(style(&template)).with_message(message))
    }

    /// Replaces the message.
    pub fn set_message(&self, message: String) {
        self.0.set_message(message);
    }

    /// Advances the bar by one step.
    pub fn step(&self) {
        self.0.inc(1);
    }

    /// Moves the bar to step `position`.
    pub fn set_position(&self, position: u64) {
        self.0.set_position(position);
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.0.finish_and_clear();
    }
}

/// A style from a template written in this module (so always valid).
fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar())
}
