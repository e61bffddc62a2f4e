//! The server's log: every line goes to stderr and, once a client is connected, to
//! `window/logMessage`. Nothing here may ever touch stdout, which belongs to the transport.

use std::fmt::Display;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tower_lsp_server::ls_types::MessageType;

/// A cloneable handle usable from any thread (the document owner and the jobs' answers log
/// through it too); the receiving half forwards to the client.
#[derive(Clone)]
pub struct Log {
    tx: UnboundedSender<(MessageType, String)>,
    debug: Arc<AtomicBool>,
}

impl Log {
    pub fn new(debug: bool) -> (Log, UnboundedReceiver<(MessageType, String)>) {
        let (tx, rx) = unbounded_channel();
        let log = Log {
            tx,
            debug: Arc::new(AtomicBool::new(debug)),
        };
        (log, rx)
    }

    /// Debug lines (each request's canvas choice, timings) are off unless asked for: they
    /// come at typing speed.
    pub fn set_debug(&self, on: bool) {
        self.debug.store(on, Ordering::Relaxed);
    }

    pub fn debug_enabled(&self) -> bool {
        self.debug.load(Ordering::Relaxed)
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
        if self.debug_enabled() {
            self.emit(MessageType::LOG, message());
        }
    }

    fn emit(&self, typ: MessageType, message: String) {
        let level = match typ {
            MessageType::ERROR => "error",
            MessageType::WARNING => "warn",
            MessageType::INFO => "info",
            _ => "debug",
        };
        redraft_runtime::stderr_line(format_args!("redraft lsp {level}: {message}"));
        // The receiver is gone only while the server shuts down; stderr already has the line.
        let _ = self.tx.send((typ, message));
    }
}
