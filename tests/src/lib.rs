//! What the end-to-end tests and benchmarks of `redraft` and `redraft-lab` share: running the
//! real binaries ([`cli`]), a real LSP client over `redraft lsp` ([`lsp_client`]), a small
//! HTTP/1.1 client over `redraft serve` ([`serve_client`]), typing replayed at a human pace
//! ([`typing`]), small GGUF checkpoints laid out as llama.cpp writes them ([`gguf`]), a Hugging
//! Face Hub on loopback ([`fake_hub`]), an OpenAI-compatible completions server
//! ([`fake_openai`]) and a loopback port that refuses connections ([`refused`]).

pub mod cli;
pub mod fake_hub;
pub mod fake_openai;
pub mod gguf;
pub mod lsp_client;
pub mod refused;
pub mod serve_client;
pub mod typing;
