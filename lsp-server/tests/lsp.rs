//! `redraft lsp` end to end: the real binary over stdio, driven by a real LSP client library
//! (async-lsp's client main loop), on the embedded default model at low effort: the protocol,
//! next edits, bad input and a cancellation storm.

#[path = "lsp/backend.rs"]
mod backend;
#[path = "lsp/bad_input.rs"]
mod bad_input;
#[path = "cli/mod.rs"]
mod cli;
#[allow(dead_code)] // shared with the typing benchmark, which uses other parts
#[path = "lsp/client.rs"]
mod client;
#[path = "lsp/next_edit.rs"]
mod next_edit;
#[path = "lsp/protocol.rs"]
mod protocol;
#[path = "lsp/storm.rs"]
mod storm;
