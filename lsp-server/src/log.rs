//! The server's log: every line goes to stderr and, once a client is connected, to
//! `window/logMessage`. Nothing here may ever touch stdout, which belongs to the transport.

use std::fmt::Display;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tower_lsp_server::ls_types::MessageType;

/// How much the log says (the `logLevel` setting): each level adds to the one before.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Error,
    Warn,
    Info,
    /// Each request's canvas choice, passes and timings: lines at typing speed.
    Debug,
}

impl Level {
    /// A `logLevel` value (`trace` is read as `debug`).
    pub fn from_setting(value: &str) -> Option<Level> {
        Some(match value {
            "error" => Level::Error,
            "warn" => Level::Warn,
            "info" => Level::Info,
            "debug" | "trace" => Level::Debug,
            _ => return None,
        })
    }
}

/// A cloneable handle usable from any thread (the document owner and the jobs' answers log
/// through it too); the receiving half forwards to the client.
#[derive(Clone)]
pub struct Log {
    tx: UnboundedSender<(MessageType, String)>,
    level: Arc<AtomicU8>,
}

impl Log {
    pub fn new(level: Level) -> (Log, UnboundedReceiver<(MessageType, String)>) {
        let (tx, rx) = unbounded_channel();
        let log = Log {
            tx,
            level: Arc::new(AtomicU8::new(level as u8)),
        };
        (log, rx)
    }

    /// Lines above `level` are dropped, on stderr and for the client alike.
    pub fn set_level(&self, level: Level) {
        self.level.store(level as u8, Ordering::Relaxed);
    }

    fn says(&self, level: Level) -> bool {
        level as u8 <= self.level.load(Ordering::Relaxed)
    }

    pub fn error(&self, message: impl Display) {
        self.emit(MessageType::ERROR, message.to_string());
    }

    pub fn warn(&self, message: impl Display) {
        self.emit(MessageType::WARNING, message.to_string());
    }

    pub fn info(&self, message: impl Display) {
        self.emit(MessageType::INFO, message.to_string());
    }

    /// `message` is only built when debug logging is on.
    pub fn debug(&self, message: impl FnOnce() -> String) {
        if self.says(Level::Debug) {
            self.emit(MessageType::LOG, message());
        }
    }

    fn emit(&self, typ: MessageType, message: String) {
        let (level, name) = match typ {
            MessageType::ERROR => (Level::Error, "error"),
            MessageType::WARNING => (Level::Warn, "warn"),
            MessageType::INFO => (Level::Info, "info"),
            _ => (Level::Debug, "debug"),
        };
        if !self.says(level) {
            return;
        }
        redraft_runtime::stderr_line(format_args!("redraft lsp {name}: {message}"));
        // The receiver is gone only while the server shuts down; stderr already has the line.
        let _ = self.tx.send((typ, message));
    }
}
