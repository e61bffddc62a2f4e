//! redraft's compute kernels: the loops inference and training spend their time in, as plain
//! functions over slices, with the SIMD paths picked at run time.
//!
//! - [`rows`]: softmax and SwiGLU of each row, and the vectorisable [`rows::exp`] they share
//!   (AVX2+FMA where the CPU has them).
//! - [`attention`]: fused attention straight from projection rows (no score tensor), and its
//!   few-query path for a decoding step (AVX-512 or AVX2).
//! - [`rope`]: the projection bias and rotary embedding, in place.
//! - [`q8`]: GGUF's Q8_0/Q5_0/Q4_K/Q6_K matrices repacked into panels, multiplied with
//!   AVX-512 VNNI or AVX2. [`half`]: f16/bf16 matrices widened in registers (AVX-512).
//! - [`DisjointOutput`]: the one way a kernel lends an output buffer to parallel tasks that write
//!   disjoint, strided parts of it.
//!
//! This crate knows no tensor library and no other redraft crate (`tests/tests/layering.rs`):
//! the engine's `ops` wraps these functions as candle ops, and training calls them directly.
//!
//! Every `unsafe` block says why it is sound in a `// SAFETY:` comment (the CPU feature was
//! detected, the offsets are in bounds, the written areas are disjoint), and every `unsafe fn`
//! says what its caller promises in a `# Safety` section: the lints below make both an error,
//! and `tests/tests/tidy.rs` checks that they stay here.

#![deny(
    clippy::undocumented_unsafe_blocks,
    clippy::missing_safety_doc,
    unsafe_op_in_unsafe_fn
)]

pub mod attention;
pub mod disjoint;
pub mod half;
pub mod q8;
pub mod rope;
pub mod rows;
pub mod testing;

pub use disjoint::DisjointOutput;

/// The kernels' result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Arguments a kernel cannot work on: the buffers do not hold what the shapes say.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Quantized bytes that are not whole rows of whole blocks.
    #[error("{bytes} bytes are not rows of {cols} in {block_bytes}-byte blocks of {per}")]
    Blocks {
        bytes: usize,
        cols: usize,
        block_bytes: usize,
        per: usize,
    },
    /// Buffers or shapes that do not match (the message says which).
    #[error("{0}")]
    Shape(String),
}
