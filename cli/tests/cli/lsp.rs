//! `redraft lsp` end to end: the real binary over stdio, driven by a real LSP client library
//! (async-lsp's client main loop), on the embedded default model at low effort: the protocol,
//! next edits, bad input and a cancellation storm.

mod backend;
mod bad_input;
mod next_edit;
mod notebook;
mod protocol;
mod storm;

use redraft_tests::{cli, lsp_client as client};
