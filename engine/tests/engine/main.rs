//! The engine's integration tests, one binary (one link on 2 cores): batches (`batch`), a cancel
//! landing mid-pass (`cancel`), edit reuse (`edit_reuse`), GGUF files (`gguf`), split ones (`gguf_split`) and files
//! whose header lies (`gguf_header`), the kernels against candle (`kernels`), LLaDA (`llada`), load
//! errors (`load_errors`), parity with transformers (`parity`), a plain reference forward on odd
//! shapes and the cached passes held to fresh ones (`reference`), the sampler on a scripted model
//! (`sampler`), valid text (`text`), what the engine records of its weights (`weights_summary`).

mod batch;
mod cancel;
mod context_reach;
mod edit_reuse;
mod gguf;
mod gguf_header;
mod gguf_split;
mod kernels;
mod llada;
mod load_errors;
mod parity;
mod reference;
mod sampler;
mod text;
mod weights_summary;

/// The fixture model's tokenizer (byte-level BPE), loaded once for the tests that need only it.
fn tokenizer() -> &'static redraft_engine::tokenizer::Tokenizer {
    static TOKENIZER: std::sync::OnceLock<redraft_engine::tokenizer::Tokenizer> =
        std::sync::OnceLock::new();
    TOKENIZER.get_or_init(|| {
        redraft_engine::tokenizer::Tokenizer::load(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../fixtures/small-model/tokenizer.json"),
        )
        .unwrap()
    })
}
