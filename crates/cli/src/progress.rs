//! A spinner on stderr for work that may take a while. It draws only when
//! stderr is a terminal, so pipes and logs stay clean.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// How often the spinner redraws.
const TICK: Duration = Duration::from_millis(120);

/// A running spinner; [`Spinner::finish`] clears it.
pub struct Spinner(ProgressBar);

impl Spinner {
    /// Starts a spinner with `message` and the elapsed time.
    pub fn start(message: String) -> Self {
        let bar = ProgressBar::new_spinner()
            .with_style(ProgressStyle::with_template("{spinner} {msg} ({elapsed})").expect("a valid template"))
            .with_message(message);
        bar.enable_steady_tick(TICK);
        Spinner(bar)
    }

    /// Removes the spinner.
    pub fn finish(self) {
        self.0.finish_and_clear();
    }
}
