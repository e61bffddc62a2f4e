//! redraft's engine: a masked-diffusion code model (Qwen2 layout, bidirectional), its tokenizer,
//! and the diffusion sampler that fills a masked span between a prefix and a suffix.
//!
//! Blocking, synchronous Rust: no async runtime, no editor types. Callable from a plain `main`.
//!
//! The types every caller uses are at the root ([`Engine`], its requests and [`Completion`], the
//! [`ContextCache`] a caller keeps, [`Error`]); the public modules are the subsystems a caller
//! configures or drives directly (the sampler's settings, checkpoints and GGUF files, the
//! tokenizer, the next-edit and FIM layouts, the model for benchmarks and training).

mod cache;
pub mod checkpoint;
pub mod config;
pub mod device;
pub mod edit;
pub mod engine;
mod error;
pub mod gguf;
pub mod linear;
pub mod ops;
pub mod prompt;
pub mod qwen2;
pub mod sampler;
mod text;
pub mod tokenizer;

pub use cache::ContextCache;
pub use device::DeviceSpec;
pub use edit::EditRequest;
pub use engine::{Completion, Engine, InfillRequest};
pub use error::{panic_text, Error, Result};
pub use text::{Draft, Tail, Text, MASK_GLYPH};
