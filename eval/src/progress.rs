//! The progress line on stderr: redrawn in place on a terminal, a line every few seconds
//! otherwise (CI logs), always a final line.

use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub struct Progress {
    label: String,
    total: usize,
    /// Tasks done before this run (resumed), left out of the rate.
    initial: usize,
    started: Instant,
    terminal: bool,
    state: Mutex<State>,
}

struct State {
    done: usize,
    passed: usize,
    last_drawn: Option<Instant>,
}

impl Progress {
    pub fn new(label: &str, total: usize) -> Progress {
        Progress::resuming(label, total, 0, 0)
    }

    /// A bar that starts with `done` tasks (`passed` of them passing) already finished.
    pub fn resuming(label: &str, total: usize, done: usize, passed: usize) -> Progress {
        Progress {
            label: label.to_string(),
            total,
            initial: done,
            started: Instant::now(),
            terminal: std::io::stderr().is_terminal(),
            state: Mutex::new(State {
                done,
                passed,
                last_drawn: None,
            }),
        }
    }

    pub fn tick(&self, passed: bool) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.done += 1;
        state.passed += usize::from(passed);
        let every = if self.terminal {
            Duration::from_millis(100)
        } else {
            Duration::from_secs(10)
        };
        // The last one is drawn by `finish`.
        if state.done < self.total && state.last_drawn.is_none_or(|t| t.elapsed() >= every) {
            state.last_drawn = Some(Instant::now());
            self.draw(&state, false);
        }
    }

    pub fn finish(&self) {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        self.draw(&state, true);
    }

    fn draw(&self, state: &State, last: bool) {
        let width = 24;
        let filled = (state.done * width)
            .checked_div(self.total)
            .unwrap_or(width)
            .min(width);
        let elapsed = self.started.elapsed().as_secs_f64();
        let rate = (state.done - self.initial) as f64 / elapsed.max(1e-9);
        let left = self.total.saturating_sub(state.done);
        let eta = if rate > 0.0 && !last {
            format!(", ~{:.0} s left", left as f64 / rate)
        } else {
            String::new()
        };
        let line = format!(
            "{} [{}{}] {}/{} pass {} ({:.1} s{eta})",
            self.label,
            "#".repeat(filled),
            "-".repeat(width - filled),
            state.done,
            self.total,
            state.passed,
            elapsed,
        );
        let mut err = std::io::stderr().lock();
        let _ = if self.terminal {
            write!(err, "\r\x1b[2K{line}{}", if last { "\n" } else { "" })
        } else {
            writeln!(err, "{line}")
        };
        let _ = err.flush();
    }
}
