//! Download progress, reported file by file so that a terminal can draw a bar, a log can print
//! lines and the LSP server can send `$/progress`.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// Receives the progress of downloads, one file at a time: `start`, any number of `advance`,
/// then `finish` (also after a failed download). Files already in the cache report nothing.
pub trait Progress {
    /// A download of `file` (a repository path) begins; `total` is its size when known.
    fn start(&mut self, file: &str, total: Option<u64>);
    /// `bytes` more bytes of the current file are on disk.
    fn advance(&mut self, bytes: u64);
    /// The current file resumes a download left unfinished (killed, cut off): `bytes` of it
    /// were already on disk. By default, an `advance` by that much.
    fn resume(&mut self, bytes: u64) {
        self.advance(bytes);
    }
    /// Another process (or thread) is downloading `file` into the same cache; this one waits
    /// for it to finish (or to die, then resumes what it left), before any `start`.
    fn waiting(&mut self, _file: &str) {}
    /// The current file is done, or failed.
    fn finish(&mut self);
}

/// Reports nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoProgress;

impl Progress for NoProgress {
    fn start(&mut self, _file: &str, _total: Option<u64>) {}
    fn advance(&mut self, _bytes: u64) {}
    fn finish(&mut self) {}
}

/// Progress on stderr: a redrawn bar when stderr is a terminal, otherwise one line when a file
/// starts and one when it ends (logs stay readable). Never writes to stdout, which the LSP
/// transport owns. A line stderr cannot take (`2>/dev/full`) is dropped: progress is no reason
/// to stop a download.
#[derive(Debug)]
pub struct TerminalProgress {
    bar: bool,
    file: String,
    total: Option<u64>,
    done: u64,
    started: Instant,
    drawn: Option<Instant>,
}

impl TerminalProgress {
    /// A bar if stderr is a terminal, plain lines otherwise.
    pub fn new() -> TerminalProgress {
        TerminalProgress::with_bar(std::io::stderr().is_terminal())
    }

    /// Chooses the bar (`true`) or plain lines (`false`) explicitly.
    pub fn with_bar(bar: bool) -> TerminalProgress {
        TerminalProgress {
            bar,
            file: String::new(),
            total: None,
            done: 0,
            started: Instant::now(),
            drawn: None,
        }
    }

    fn draw(&mut self) {
        let now = Instant::now();
        if self
            .drawn
            .is_some_and(|at| now - at < Duration::from_millis(100))
        {
            return;
        }
        self.drawn = Some(now);
        let line = match self.total {
            Some(total) if total > 0 => {
                const WIDTH: u64 = 30;
                let filled = (self.done.min(total) * WIDTH / total) as usize;
                format!(
                    "{} [{}{}] {:>3}% {}/{}",
                    self.file,
                    "=".repeat(filled),
                    " ".repeat(WIDTH as usize - filled),
                    self.done.min(total) * 100 / total,
                    human_bytes(self.done),
                    human_bytes(total)
                )
            }
            _ => format!("{} {}", self.file, human_bytes(self.done)),
        };
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K{line}");
        let _ = err.flush();
    }
}

impl Default for TerminalProgress {
    fn default() -> Self {
        TerminalProgress::new()
    }
}

impl Progress for TerminalProgress {
    fn start(&mut self, file: &str, total: Option<u64>) {
        self.file = file.to_string();
        self.total = total;
        self.done = 0;
        self.started = Instant::now();
        self.drawn = None;
        if self.bar {
            self.draw();
        } else {
            let size = total
                .map(|t| format!(" ({})", human_bytes(t)))
                .unwrap_or_default();
            let _ = writeln!(std::io::stderr(), "downloading {file}{size}");
        }
    }

    fn advance(&mut self, bytes: u64) {
        self.done += bytes;
        if self.bar {
            self.draw();
        }
    }

    fn resume(&mut self, bytes: u64) {
        if self.bar {
            // Above the bar, which stays on its line.
            let _ = write!(std::io::stderr(), "\r\x1b[2K");
        }
        let _ = writeln!(
            std::io::stderr(),
            "resuming {} at {} (left by an earlier download)",
            self.file,
            human_bytes(bytes)
        );
        self.drawn = None;
        self.advance(bytes);
    }

    fn waiting(&mut self, file: &str) {
        let _ = writeln!(
            std::io::stderr(),
            "waiting for another download of {file} (another redraft or huggingface_hub) to finish"
        );
    }

    fn finish(&mut self) {
        let seconds = self.started.elapsed().as_secs_f64();
        if self.bar {
            self.drawn = None;
            self.draw();
            let _ = writeln!(std::io::stderr());
        } else if self.total.is_none_or(|total| self.done >= total) {
            let _ = writeln!(
                std::io::stderr(),
                "downloaded {} ({} in {seconds:.1}s)",
                self.file,
                human_bytes(self.done)
            );
        } else {
            let _ = writeln!(
                std::io::stderr(),
                "stopped {} at {}",
                self.file,
                human_bytes(self.done)
            );
        }
    }
}

/// Progress as short messages handed to `send` (an editor's `$/progress`, a log): one when a
/// file starts, one at each further whole percent (or MiB, when the size is unknown), one when
/// it ends. `send` runs on the downloading thread and must not block.
pub struct Messages<F: FnMut(String)> {
    send: F,
    file: String,
    total: Option<u64>,
    done: u64,
    /// The last percent (or MiB) reported.
    shown: u64,
}

impl<F: FnMut(String)> Messages<F> {
    pub fn new(send: F) -> Messages<F> {
        Messages {
            send,
            file: String::new(),
            total: None,
            done: 0,
            shown: 0,
        }
    }

    fn mark(&self) -> u64 {
        match self.total {
            Some(total) if total > 0 => self.done.min(total) * 100 / total,
            _ => self.done >> 20,
        }
    }

    fn message(&self) -> String {
        match self.total {
            Some(total) if total > 0 => format!(
                "downloading {}: {} of {} ({}%)",
                self.file,
                human_bytes(self.done.min(total)),
                human_bytes(total),
                self.mark()
            ),
            _ => format!("downloading {}: {}", self.file, human_bytes(self.done)),
        }
    }
}

impl<F: FnMut(String)> Progress for Messages<F> {
    fn start(&mut self, file: &str, total: Option<u64>) {
        self.file = file.to_string();
        self.total = total;
        self.done = 0;
        self.shown = 0;
        let message = self.message();
        (self.send)(message);
    }

    fn advance(&mut self, bytes: u64) {
        self.done += bytes;
        let mark = self.mark();
        if mark > self.shown {
            self.shown = mark;
            let message = self.message();
            (self.send)(message);
        }
    }

    fn resume(&mut self, bytes: u64) {
        self.done += bytes;
        self.shown = self.mark();
        let message = format!(
            "resuming {} at {} (left by an earlier download)",
            self.file,
            human_bytes(bytes)
        );
        (self.send)(message);
    }

    fn waiting(&mut self, file: &str) {
        (self.send)(format!(
            "waiting for another download of {file} (another redraft or huggingface_hub) to finish"
        ));
    }

    fn finish(&mut self) {
        let message = if self.total.is_none_or(|total| self.done >= total) {
            format!("downloaded {} ({})", self.file, human_bytes(self.done))
        } else {
            format!("stopped {} at {}", self.file, human_bytes(self.done))
        };
        (self.send)(message);
    }
}

/// `1.5 GiB`, `20.0 MiB`, `512 B`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::{human_bytes, Messages, Progress};

    #[test]
    fn messages_come_at_start_each_whole_percent_and_end() {
        let mut seen = Vec::new();
        let mut progress = Messages::new(|m| seen.push(m));
        progress.start("model.gguf", Some(1000));
        for _ in 0..200 {
            progress.advance(5);
        }
        progress.finish();
        drop(progress);
        assert_eq!(seen.len(), 1 + 100 + 1, "{seen:?}");
        assert_eq!(seen[0], "downloading model.gguf: 0 B of 1000 B (0%)");
        assert_eq!(seen[50], "downloading model.gguf: 500 B of 1000 B (50%)");
        assert_eq!(seen[101], "downloaded model.gguf (1000 B)");
    }

    #[test]
    fn a_resumed_download_says_so_and_counts_from_where_it_was() {
        let mut seen = Vec::new();
        let mut progress = Messages::new(|m| seen.push(m));
        progress.waiting("model.gguf");
        progress.start("model.gguf", Some(1000));
        progress.resume(600);
        progress.advance(5);
        progress.advance(395);
        progress.finish();
        drop(progress);
        assert_eq!(
            seen,
            [
                "waiting for another download of model.gguf (another redraft or huggingface_hub) to finish",
                "downloading model.gguf: 0 B of 1000 B (0%)",
                "resuming model.gguf at 600 B (left by an earlier download)",
                "downloading model.gguf: 1000 B of 1000 B (100%)",
                "downloaded model.gguf (1000 B)",
            ]
        );
    }

    #[test]
    fn sizes_read_like_ls_h() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(20 * 1024 * 1024), "20.0 MiB");
        assert_eq!(human_bytes(3 * 1024 * 1024 * 1024 / 2), "1.5 GiB");
    }
}
