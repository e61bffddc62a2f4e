//! The `redraft` binary end to end, one test binary (one link on 2 cores): `redraft complete`
//! and the developer commands it hands on (`complete`), `redraft convert`'s output
//! (`convert`), models by name (`models`), `redraft lsp` (`lsp`), `redraft serve` (`serve`)
//! and `scripts/ship-model` (`ship`). One group runs with a filter:
//! `cargo test -p redraft --test cli lsp::`.

mod complete;
mod convert;
mod lsp;
mod models;
mod serve;
mod ship;
