//! redraft's training side: the corpus builder and the training loop of its own masked-diffusion
//! code model, kept out of `redraft-engine` so inference stays lean.
//!
//! Synchronous, blocking Rust over the engine's model, tokenizer and kernels.

pub mod corpus;
pub mod train;
