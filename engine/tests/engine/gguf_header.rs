//! GGUF files whose header lies: an alignment of 0, tensors off the file's alignment or past its
//! end, dimensions that overflow, sizes no model has, a LLaDA head size RoPE cannot pair. Each
//! is a load error naming what is wrong, never a panic or an abort (several were, in candle's
//! reader or in an allocation sized from the header). The files are the default model written
//! by `GgufWriter`, then one metadata key set or a few bytes of the tensor table patched.

use std::path::{Path, PathBuf};

use candle_core::quantized::gguf_file::Value;
use candle_core::quantized::GgmlDType;
use redraft_engine::gguf::GgufWriter;
use redraft_engine::{Engine, Error};

use crate::gguf::{default_tensors, model_gguf, write};

/// The default model as `arch` with `matrices`, `edit`ed before it is written.
fn written(
    arch: &str,
    matrices: GgmlDType,
    edit: impl FnOnce(GgufWriter) -> GgufWriter,
) -> (tempfile::TempDir, PathBuf) {
    let (config, tensors) = default_tensors();
    write(
        &edit(model_gguf(arch, &config, &tensors, matrices)),
        "m.gguf",
    )
}

/// Loading `path` fails: the error and its message.
fn load_err(path: &Path) -> (Error, String) {
    match Engine::load(path) {
        Ok(_) => panic!("{} loaded, expected an error", path.display()),
        Err(e) => {
            let message = e.to_string();
            (e, message)
        }
    }
}

/// The load error of `path` is a corrupt GGUF's, naming the file and every one of `needles`;
/// its message.
fn check_corrupt(path: &Path, needles: &[&str]) -> String {
    let (err, message) = load_err(path);
    assert!(matches!(err, Error::CorruptGguf { .. }), "{message}");
    assert!(message.contains(&path.display().to_string()), "{message}");
    for needle in needles {
        assert!(
            message.contains(needle),
            "`{message}` does not name `{needle}`"
        );
    }
    message
}

/// The load error of `path` is an unsupported config's, naming every one of `needles`.
fn check_unsupported(path: &Path, needles: &[&str]) {
    let (err, message) = load_err(path);
    assert!(matches!(err, Error::UnsupportedConfig { .. }), "{message}");
    for needle in needles {
        assert!(
            message.contains(needle),
            "`{message}` does not name `{needle}`"
        );
    }
}

/// Tensor `name`'s record in the file's tensor table: where its dimensions start (llama.cpp's
/// order, innermost first, 8 bytes each), how many there are, and where its data offset is.
struct Record {
    dims_at: usize,
    rank: usize,
    offset_at: usize,
}

fn record(bytes: &[u8], name: &str) -> Record {
    // A GGUF string: its length (8 bytes, little-endian), then its bytes.
    let mut needle = (name.len() as u64).to_le_bytes().to_vec();
    needle.extend_from_slice(name.as_bytes());
    let at = bytes
        .windows(needle.len())
        .position(|w| w == needle)
        .unwrap_or_else(|| panic!("no tensor `{name}` in the file"));
    let rank_at = at + needle.len();
    let rank = u32::from_le_bytes(bytes[rank_at..rank_at + 4].try_into().unwrap()) as usize;
    let dims_at = rank_at + 4;
    Record {
        dims_at,
        rank,
        // After the dimensions, the block type (4 bytes), then the offset.
        offset_at: dims_at + 8 * rank + 4,
    }
}

/// Rewrites the file at `path` with tensor `name`'s data offset as `offset` makes it.
fn patch_offset(path: &Path, name: &str, offset: impl FnOnce(u64) -> u64) {
    let mut bytes = std::fs::read(path).unwrap();
    let at = record(&bytes, name).offset_at;
    let old = u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    bytes[at..at + 8].copy_from_slice(&offset(old).to_le_bytes());
    std::fs::write(path, bytes).unwrap();
}

/// Rewrites the file at `path` with tensor `name`'s dimensions as `dims` (candle's order,
/// outermost first, as many as the tensor has).
fn patch_dims(path: &Path, name: &str, dims: &[u64]) {
    let mut bytes = std::fs::read(path).unwrap();
    let record = record(&bytes, name);
    assert_eq!(record.rank, dims.len(), "`{name}` keeps its rank");
    for (i, &d) in dims.iter().rev().enumerate() {
        let at = record.dims_at + 8 * i;
        bytes[at..at + 8].copy_from_slice(&d.to_le_bytes());
    }
    std::fs::write(path, bytes).unwrap();
}

/// candle's reader divides by `general.alignment`: a 0 there panicked inside it. Any value
/// but a power of two is refused, as llama.cpp refuses it.
#[test]
fn an_alignment_of_zero_or_not_a_power_of_two_is_refused() {
    let (_d, path) = written("dream", GgmlDType::Q8_0, |w| {
        w.set("general.alignment", Value::U32(0))
    });
    check_corrupt(
        &path,
        &["the header could not be read", "general.alignment"],
    );

    let (_d, path) = written("dream", GgmlDType::Q8_0, |w| {
        w.set("general.alignment", Value::U32(24))
    });
    check_corrupt(&path, &["general.alignment", "24, not a power of two"]);

    // candle would read a 64-bit one as the default 32 and look for the tensors elsewhere.
    let (_d, path) = written("dream", GgmlDType::Q8_0, |w| {
        w.set("general.alignment", Value::U64(64))
    });
    check_corrupt(
        &path,
        &["general.alignment", "not an unsigned 32-bit integer"],
    );

    // The default, stated, loads; as a 64-bit integer too (candle lays the tensors out at the
    // default then, which is what it says).
    for stated in [Value::U32(32), Value::U64(32)] {
        let (_d, path) = written("dream", GgmlDType::Q8_0, |w| {
            w.set("general.alignment", stated)
        });
        Engine::load(&path).unwrap();
    }
}

/// A tensor whose offset is off the file's alignment was read in place anyway: candle asserts
/// its blocks' alignment (a Q4_0 matrix, a LLaDA f16 query panicked while loading) or a Q8_0
/// embedding's on the first request. It is refused while reading the header, by name.
#[test]
fn a_tensor_off_the_files_alignment_is_refused_by_name() {
    for (arch, matrices, name) in [
        ("dream", GgmlDType::Q4_0, "blk.0.attn_output.weight"),
        ("dream", GgmlDType::Q8_0, "token_embd.weight"),
        ("llada", GgmlDType::F16, "blk.0.attn_q.weight"),
    ] {
        let (_d, path) = written(arch, matrices, |w| w);
        patch_offset(&path, name, |offset| offset + 1);
        check_corrupt(
            &path,
            &[
                &format!("tensor `{name}`"),
                "not a multiple of the file's alignment 32",
            ],
        );
    }
}

/// A data offset near 2^64 overflowed adding the data section's start (a panic in a debug
/// build, a wrapped offset in a release one).
#[test]
fn a_tensor_offset_that_overflows_is_refused_by_name() {
    let (_d, path) = written("dream", GgmlDType::Q8_0, |w| w);
    patch_offset(&path, "blk.0.attn_norm.weight", |_| u64::MAX - 63);
    check_corrupt(
        &path,
        &[
            "tensor `blk.0.attn_norm.weight`",
            "past the end of the file",
        ],
    );
}

/// Dimensions whose product overflows (2^32 x 2^32) overflowed counting the file's parameters,
/// a tensor redraft would not even use included.
#[test]
fn dimensions_that_overflow_are_refused_by_name() {
    let (_d, path) = written("dream", GgmlDType::Q8_0, |w| w);
    patch_dims(&path, "blk.1.ffn_up.weight", &[1 << 32, 1 << 32]);
    check_corrupt(
        &path,
        &[
            "tensor `blk.1.ffn_up.weight`",
            "more elements than any file can hold",
        ],
    );
    // Within range but far larger than the file: its bytes run past the end.
    let (_d, path) = written("dream", GgmlDType::Q8_0, |w| w);
    patch_dims(&path, "blk.1.ffn_up.weight", &[1 << 20, 1 << 20]);
    check_corrupt(
        &path,
        &[
            "tensor `blk.1.ffn_up.weight`",
            "runs past the end of the file",
        ],
    );
}

/// A block tensor of part of a block was reported as running past the end of the file.
#[test]
fn a_tensor_of_partial_blocks_says_so() {
    let (_d, path) = written("dream", GgmlDType::Q4_0, |w| w);
    patch_dims(&path, "blk.0.attn_output.weight", &[1, 48]);
    let message = check_corrupt(
        &path,
        &[
            "tensor `blk.0.attn_output.weight`",
            "48 elements, not whole blocks of 32",
        ],
    );
    assert!(!message.contains("past the end"), "{message}");
}

/// A layer count of 1e9 (or 2^60) sized the model's list of layers before any tensor was
/// looked for: an allocation of 240 GB that aborted the process.
#[test]
fn sizes_no_model_has_are_refused_before_anything_is_allocated() {
    for layers in [1_000_000_000u64, 1 << 60] {
        let (_d, path) = written("dream", GgmlDType::Q8_0, |w| {
            w.set("dream.block_count", Value::U64(layers))
        });
        check_unsupported(
            &path,
            &[&format!("num_hidden_layers {layers} is more than 1024")],
        );
    }
    let (_d, path) = written("dream", GgmlDType::Q8_0, |w| {
        w.set("dream.attention.key_length", Value::U64(1 << 40))
    });
    check_unsupported(&path, &["head_dim 1099511627776 is more than"]);
}

/// A context length of 0, or a RoPE base that is no number, loaded: then every request failed.
#[test]
fn positions_rope_base_and_epsilon_must_make_sense() {
    for (key, value, named) in [
        (
            "dream.context_length",
            Value::U32(0),
            "max_position_embeddings is 0",
        ),
        (
            "dream.rope.freq_base",
            Value::F32(f32::NAN),
            "rope_theta NaN",
        ),
        ("dream.rope.freq_base", Value::F32(-1.0), "rope_theta -1"),
        (
            "dream.attention.layer_norm_rms_epsilon",
            Value::F32(-1.0),
            "rms_norm_eps -1",
        ),
    ] {
        let (_d, path) = written("dream", GgmlDType::Q8_0, |w| w.set(key, value));
        check_unsupported(&path, &[named]);
    }
}

/// A LLaDA file's query and key rows are put back in `rotate_half` order before anything else
/// checks them: a head size of 1 divided by its half (0), and a query of 0 rows by its row
/// count. Both are refused by name first.
#[test]
fn a_llada_head_rope_cannot_pair_is_refused() {
    let (_d, path) = written("llada", GgmlDType::F32, |w| {
        w.set("llada.attention.key_length", Value::U32(1))
            .set("llada.rope.dimension_count", Value::U32(1))
    });
    check_unsupported(&path, &["head_dim 1 is odd"]);

    let (_d, path) = written("llada", GgmlDType::F32, |w| w);
    patch_dims(&path, "blk.0.attn_q.weight", &[0, 192]);
    check_corrupt(&path, &["tensor `blk.0.attn_q.weight` has 0 rows"]);
}

/// `redraft convert` writes a vocabulary table of `vocab_size` entries: a config of 1e11
/// aborted the process; the writer refuses it, as loading the config does.
#[test]
fn the_writer_refuses_a_vocabulary_no_model_has() {
    let (mut config, tensors) = default_tensors();
    config.vocab_size = 100_000_000_000;
    let (_, settings) = redraft_engine::engine::load_settings(&crate::gguf::small_model()).unwrap();
    let tokenizer =
        std::fs::read_to_string(crate::gguf::small_model().join("tokenizer.json")).unwrap();
    let err = GgufWriter::new(
        "dream",
        &config,
        &settings,
        &tokenizer,
        &tensors,
        GgmlDType::Q8_0,
    )
    .err()
    .expect("a vocabulary of 1e11 is refused");
    assert!(
        err.to_string()
            .contains("vocab_size 100000000000 is more than"),
        "{err}"
    );
}
