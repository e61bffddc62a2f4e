//! redraft's engine: a masked-diffusion code model (Qwen2 layout, bidirectional), its tokenizer,
//! and the diffusion sampler that fills a masked span between a prefix and a suffix.
//!
//! Blocking, synchronous Rust: no async runtime, no editor types. Callable from a plain `main`.

pub mod checkpoint;
pub mod config;
pub mod device;
pub mod edit;
pub mod engine;
pub mod error;
pub mod gguf;
pub mod linear;
pub mod ops;
pub mod prompt;
pub mod qwen2;
pub mod sampler;
pub mod text;
pub mod tokenizer;

pub use device::DeviceSpec;
pub use edit::EditRequest;
pub use engine::{Completion, Engine, InfillRequest};
pub use error::{Error, Result};
pub use text::{Draft, Tail, Text};
