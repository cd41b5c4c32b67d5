//! When the live loop decides: on the wall clock's multiples of the
//! interval (sleeping until each), or, replaying a file without waiting,
//! one interval after the other at once.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The decision times.
#[derive(Debug, Clone)]
pub struct Clock {
    interval_s: f64,
    no_wait: bool,
    next_s: Option<f64>,
}

impl Clock {
    /// Decisions every `interval_s` seconds, on the wall clock's multiples
    /// of it; with `no_wait`, one after the other at once.
    pub fn new(interval_s: f64, no_wait: bool) -> Clock {
        Clock { interval_s, no_wait, next_s: None }
    }

    /// The next decision time (seconds since the Unix epoch), after
    /// waiting until it with `wait`, and how many decision times were
    /// skipped because the last decision overran.
    pub fn tick(&mut self, wait: &mut dyn FnMut(Duration)) -> (f64, u64) {
        let now_s = unix_now_s();
        let mut next_s = self.next_s.unwrap_or_else(|| (now_s / self.interval_s).ceil() * self.interval_s);
        let mut skipped = 0;
        if !self.no_wait {
            if now_s > next_s {
                let missed = ((now_s - next_s) / self.interval_s).ceil();
                next_s += missed * self.interval_s;
                skipped = missed as u64;
            }
            wait(Duration::from_secs_f64((next_s - now_s).max(0.0)));
        }
        self.next_s = Some(next_s + self.interval_s);
        (next_s, skipped)
    }
}

/// Seconds since the Unix epoch.
fn unix_now_s() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |elapsed| elapsed.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions_fall_on_the_intervals_multiples_and_a_replay_does_not_wait() {
        let mut waited = Vec::new();
        let mut clock = Clock::new(60.0, false);
        let (first_s, skipped) = clock.tick(&mut |duration| waited.push(duration));
        assert_eq!((first_s % 60.0, skipped), (0.0, 0));
        assert!(waited[0] <= Duration::from_secs(60), "{waited:?}");
        let mut replay = Clock::new(60.0, true);
        let (a, _) = replay.tick(&mut |_| panic!("a replay does not wait"));
        let (b, _) = replay.tick(&mut |_| panic!("a replay does not wait"));
        assert_eq!(b - a, 60.0);
    }
}
