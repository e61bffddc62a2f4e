//! redraft's prompt layouts as text, each defined once: the names of the marker tokens
//! ([`markers`]), Sweep Next-Edit's file blocks ([`sweep`]), which the engine writes for a
//! Sweep checkpoint, the context layer writes the history of, and the HTTP server reads back
//! from a client's prompt, and the FIM templates of autoregressive models' servers
//! ([`fim_template`]), which the remote backends write and the HTTP server reads back.
//!
//! Token ids are the engine's business (`redraft_engine::prompt::FimLayout` and
//! `redraft_engine::edit::EditMarkers` look these names up in a checkpoint's vocabulary); this
//! crate knows only text, so every crate that writes or reads a prompt can depend on it.

pub mod fim_template;
pub mod markers;
pub mod sweep;
