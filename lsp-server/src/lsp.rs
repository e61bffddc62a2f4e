//! `redraft lsp`: the language server editors talk to over stdio.
//!
//! One module per concern: `encoding` (the only place LSP positions are converted), `document`
//! and `documents` (ropes and incremental tree-sitter trees, applied in order by one owner
//! thread), `config`, `worker` (the inference thread), `cancel`, `type_through`, `stream` (the
//! `redraft/draftStep` extension), `inline` (the inline completion request) and `server` (the
//! tower-lsp-server glue). Stdout carries the protocol and nothing else.

mod cancel;
mod config;
mod document;
mod documents;
mod encoding;
mod inline;
mod log;
mod server;
mod stream;
mod type_through;
mod worker;

use tower_lsp_server::{LspService, Server as Transport};

/// Requests handled at once. tower-lsp polls notifications (`$/cancelRequest` and edits among
/// them) in the same pool as requests, so the pool must be wide enough that requests waiting on
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

pub fn run(args: Args) -> anyhow::Result<()> {
    let _ = args.stdio;
    let debug = args.debug || std::env::var("REDRAFT_LOG").is_ok_and(|v| v == "debug");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("redraft-lsp")
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let (service, socket) = LspService::build(|client| server::Server::new(client, debug))
            .custom_method(
                "textDocument/inlineCompletion",
                server::Server::inline_completion,
            )
            .finish();
        Transport::new(tokio::io::stdin(), tokio::io::stdout(), socket)
            .concurrency_level(CONCURRENCY)
            .serve(service)
            .await;
    });
    // The document and inference threads block on their channels; the process ends here
    // without waiting for them.
    Ok(())
}
