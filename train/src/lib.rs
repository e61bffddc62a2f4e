//! redraft's training side: the corpus builder, next-edit training data and the training loop of
//! its own masked-diffusion code model, kept out of `redraft-engine` so inference stays lean.
//!
//! Synchronous, blocking Rust over the engine's model, tokenizer and kernels.

pub mod corpus;
pub mod edits;
pub mod pack;
pub mod train;
