//! `redraft lsp`: the language server editors talk to over stdio, a protocol adapter over the one
//! runtime (`redraft_runtime::scheduler`), which loads the model, queues and runs every job
//! (local or on a remote backend) and keeps the caches, as it does for `redraft serve`.
//!
//! One module per concern: `encoding` (the only place LSP positions are converted), `document`
//! and `documents` (ropes and incremental tree-sitter trees, applied in order by one owner
//! thread), `document_key` (the normalized URI every per-document map is keyed by), `notebook` (a notebook's cells as documents, and the text around a cell), `history` (each document's recent edits), `config`, `inference` (snapshots and
//! settings into the runtime's work, its answers and drafts back), `cancel`, `type_through`,
//! `running` (the job a second request at the same place waits for instead of running its own),
//! `stream` (the `redraft/draftStep` extension), `inline` (the inline completion request),
//! `completion_items` (the same suggestion as `textDocument/completion` items, for clients
//! without inline completions),
//! `next_edit` (Copilot's `textDocument/copilotInlineEdit` and its accept command), `workspace` (the
//! folders documents are named relative to), `server` (the tower-lsp-server glue) and `transport` (stdin/stdout framing that survives any bytes).
//! Stdout carries the protocol and nothing else. The tests' `harness` runs the server in
//! process, message by message, its next edits answered by the test instead of a model.

mod cancel;
mod completion_items;
mod config;
mod document;
mod document_key;
mod documents;
mod encoding;
#[cfg(test)]
mod harness;
mod history;
mod inference;
mod inline;
mod log;
mod next_edit;
mod notebook;
mod running;
mod server;
mod stream;
mod transport;
mod type_through;
mod workspace;

use std::process::ExitCode;

use tower_lsp_server::{Client, ClientSocket, LspService};

use transport::Ended;

/// Requests handled at once. The transport polls notifications (`$/cancelRequest` and edits
/// among them) in the same pool as requests, so the pool must be wide enough that requests waiting on
/// the model never hold up the messages that would cancel them.
const CONCURRENCY: usize = 1024;

#[derive(clap::Args)]
pub struct Args {
    /// Talk LSP over stdin/stdout (the only transport; accepted because editors pass it).
    #[arg(long)]
    stdio: bool,
    /// Log each request's canvas choice and timings to stderr and window/logMessage.
    #[arg(long)]
    debug: bool,
}

/// The service around the server `init` makes, with redraft's methods beyond the standard ones.
fn service(
    init: impl FnOnce(Client) -> server::Server,
) -> (LspService<server::Server>, ClientSocket) {
    LspService::build(init)
        .custom_method(
            "textDocument/inlineCompletion",
            server::Server::inline_completion,
        )
        .custom_method(
            next_edit::INLINE_EDIT_METHOD,
            server::Server::copilot_inline_edit,
        )
        .custom_method(
            "textDocument/didShowInlineEdit",
            server::Server::did_show_inline_edit,
        )
        .custom_method("textDocument/didFocus", server::Server::did_focus)
        .finish()
}

/// Serves until `exit` or the end of stdin. The status follows the protocol: 0 after `shutdown`
/// then `exit`, 1 for `exit` without `shutdown`; the end of stdin without `shutdown` (the client
/// went away) is 1 too. A transport that fails (stdin or stdout) is an error, logged by `main`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let _ = args.stdio;
    let debug = args.debug || std::env::var("REDRAFT_LOG").is_ok_and(|v| v == "debug");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("redraft-lsp")
        .enable_all()
        .build()?;
    let (ended, shut_down, log) = runtime.block_on(async move {
        let (mut service, socket) = service(|client| server::Server::new(client, debug));
        let ended = transport::serve(&mut service, socket, CONCURRENCY).await;
        let server = service.inner();
        (ended, server.was_shut_down(), server.log.clone())
    });
    // The document owner and the runtime's inference thread block on their queues, and tasks
    // may still wait on them; the process ends here without waiting.
    runtime.shutdown_background();
    let status = match (ended?, shut_down) {
        (Ended::Exit | Ended::EndOfInput, true) => 0,
        (Ended::Exit, false) => {
            log.error("exit without shutdown first: exit status 1, as the protocol says");
            1
        }
        (Ended::EndOfInput, false) => {
            log.error("stdin closed without shutdown and exit (the client is gone): exit status 1");
            1
        }
    };
    Ok(ExitCode::from(status))
}
