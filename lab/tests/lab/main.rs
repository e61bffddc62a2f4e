//! `redraft-lab` end to end, one binary (one link on 2 cores): remote backends (`backend`), FIM
//! and next-edit evaluation (`eval`, `eval_next_edit`; `eval_model`: a run tied to its model),
//! GGUF conversion and scoring (`gguf`), llama.cpp parity (`llama_parity`), training (`train`)
//! and training from a GGUF (`train_init`).

mod backend;
mod eval;
mod eval_model;
mod eval_next_edit;
mod gguf;
mod llama_parity;
mod train;
mod train_init;
