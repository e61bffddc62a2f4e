//! GGUF files whose header lies: an alignment of 0, tensors off the file's alignment, past its
//! end or over each other, dimensions that overflow or are 0, a key or tensor named twice, counts
//! and lengths no file holds, types no reader knows, a file cut anywhere, sizes no model has, a
//! LLaDA head size RoPE cannot pair. Each is a load error naming the file and what is wrong,
//! never a panic, an abort or an allocation sized from the header (several were). The files are
//! the default model written by `GgufWriter`, then one metadata key set, a few bytes of the
//! header patched, or the whole rewritten by candle's writer (which writes what `GgufWriter`
//! refuses to: a key or a tensor twice).

use std::path::{Path, PathBuf};

use candle_core::quantized::gguf_file::{self, Content, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{DType, Device, Tensor};
use proptest::prelude::*;
use redraft_engine::gguf::{GgufWriter, Tensors};
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

/// candle's reader divided by `general.alignment`: a 0 there panicked inside it (caught, but
/// its panic message was printed first). Any value but a power of two is refused, as llama.cpp
/// refuses it.
#[test]
fn an_alignment_of_zero_or_not_a_power_of_two_is_refused() {
    let (_d, path) = written("dream", GgmlDType::Q8_0, |w| {
        w.set("general.alignment", Value::U32(0))
    });
    check_corrupt(&path, &["general.alignment", "is 0, not a power of two"]);

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

/// RoPE other than the default, as llama.cpp reads it from a file (`rope.scaling.*`: a factor
/// with no type scales linearly, the old `rope.scale_linear` too; YaRN, as its converter writes
/// for a Qwen2.5 config with `rope_scaling`) or over part of each head (`rope.dimension_count`),
/// loaded as default RoPE over whole heads: every position's logits were other than the file's
/// model gives. Refused by name; a factor of 1 (or 0, llama.cpp's "unset"), a type of `none`,
/// and a rotation over whole heads are default RoPE and load.
#[test]
fn rope_scaled_or_partial_is_refused_and_default_rope_loads() {
    // The default model as a file of the keys' architecture, with `keys` set.
    let with = |keys: &[(&str, Value)]| {
        let arch = keys[0].0.split('.').next().unwrap();
        written(arch, GgmlDType::Q8_0, |mut w| {
            for (key, value) in keys {
                w = w.set(key, value.clone());
            }
            w
        })
    };
    let refused = |keys: &[(&str, Value)], named: &[&str]| {
        let (_d, path) = with(keys);
        check_unsupported(&path, named);
    };
    let string = |s: &str| Value::String(s.into());
    refused(
        &[
            ("qwen2.rope.scaling.type", string("yarn")),
            ("qwen2.rope.scaling.factor", Value::F32(4.0)),
        ],
        &[
            "`qwen2.rope.scaling.factor`",
            "yarn",
            "factor of 4",
            "default RoPE",
        ],
    );
    refused(
        &[("qwen2.rope.scaling.factor", Value::F32(2.0))],
        &["`qwen2.rope.scaling.factor`", "linear", "factor of 2"],
    );
    refused(
        &[("qwen2.rope.scale_linear", Value::F32(8.0))],
        &["`qwen2.rope.scale_linear`", "linear", "factor of 8"],
    );
    refused(
        &[
            ("dream.rope.scaling.type", string("linear")),
            ("dream.rope.scaling.factor", Value::F64(0.5)),
        ],
        &["`dream.rope.scaling.factor`", "linear", "factor of 0.5"],
    );
    refused(
        &[("qwen2.rope.scaling.type", string("longrope"))],
        &["`qwen2.rope.scaling.type`", "longrope", "default RoPE"],
    );
    refused(
        &[("qwen2.rope.dimension_count", Value::U32(32))],
        &["`qwen2.rope.dimension_count`", "32, not the head size 64"],
    );
    // (`dream`: the default model's settings are a diffusion model's.)
    let loaded: [&[(&str, Value)]; 5] = [
        &[
            ("dream.rope.scaling.type", string("none")),
            ("dream.rope.scaling.factor", Value::F32(4.0)),
        ],
        &[
            ("dream.rope.scaling.type", string("yarn")),
            ("dream.rope.scaling.factor", Value::F32(1.0)),
        ],
        &[("dream.rope.scaling.type", string("linear"))],
        &[("dream.rope.scaling.factor", Value::F32(0.0))],
        &[("dream.rope.dimension_count", Value::U32(64))],
    ];
    for keys in loaded {
        let (_d, path) = with(keys);
        if let Err(e) = Engine::load(&path) {
            panic!("{keys:?}: {e}");
        }
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
    check_corrupt(
        &path,
        &["tensor `blk.0.attn_q.weight`", "has a dimension of 0"],
    );
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

/// Tensor `name`'s data offset, as the file states it.
fn offset_of(path: &Path, name: &str) -> u64 {
    let bytes = std::fs::read(path).unwrap();
    let at = record(&bytes, name).offset_at;
    u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap())
}

/// Rewrites the file at `path` with the little-endian `value` at byte `at`.
fn patch_u64(path: &Path, at: usize, value: u64) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[at..at + 8].copy_from_slice(&value.to_le_bytes());
    std::fs::write(path, bytes).unwrap();
}

/// Where metadata key `key`'s record starts (its name's length).
fn key_at(bytes: &[u8], key: &str) -> usize {
    let mut needle = (key.len() as u64).to_le_bytes().to_vec();
    needle.extend_from_slice(key.as_bytes());
    bytes
        .windows(needle.len())
        .position(|w| w == needle)
        .unwrap_or_else(|| panic!("no key `{key}` in the file"))
}

/// The file at `path` read by candle and written again by candle's writer, its metadata and
/// tensors (each in name order) `edit`ed in between.
fn rewrite(path: &Path, edit: impl FnOnce(&mut Vec<(String, Value)>, &mut Vec<(String, QTensor)>)) {
    let mut file = std::fs::File::open(path).unwrap();
    let content = Content::read(&mut file).unwrap();
    let mut names: Vec<&String> = content.tensor_infos.keys().collect();
    names.sort();
    let mut tensors: Vec<(String, QTensor)> = names
        .into_iter()
        .map(|name| {
            let tensor = content.tensor(&mut file, name, &Device::Cpu).unwrap();
            (name.clone(), tensor)
        })
        .collect();
    let mut metadata: Vec<(String, Value)> = content.metadata.into_iter().collect();
    metadata.sort_by(|a, b| a.0.cmp(&b.0));
    edit(&mut metadata, &mut tensors);
    let metadata: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let tensors: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut out = std::fs::File::create(path).unwrap();
    gguf_file::write(&mut out, &metadata, &tensors).unwrap();
}

/// An f32 vector of `n` zeros.
fn zeros(n: usize) -> QTensor {
    QTensor::quantize(
        &Tensor::zeros(n, DType::F32, &Device::Cpu).unwrap(),
        GgmlDType::F32,
    )
    .unwrap()
}

/// Two tensors whose bytes are the same bytes, or some of them, loaded: each read the other's
/// weights. llama.cpp refuses any layout but the tensors one after another; redraft refuses
/// tensors over each other, by both names.
#[test]
fn tensors_over_each_other_are_refused_by_name() {
    for shift in [0, 32] {
        let (_d, path) = written("dream", GgmlDType::Q8_0, |w| w);
        let under = offset_of(&path, "blk.0.ffn_up.weight");
        patch_offset(&path, "blk.1.ffn_up.weight", |_| under + shift);
        check_corrupt(
            &path,
            &[
                "tensor `blk.1.ffn_up.weight`",
                "overlaps tensor `blk.0.ffn_up.weight`",
            ],
        );
    }
}

/// A test binary's child run of test `name` alone, with `CHILD` set: its stderr.
fn stderr_of_child(name: &str) -> String {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "{}{stderr}",
        String::from_utf8_lossy(&out.stdout)
    );
    stderr
}

const CHILD: &str = "REDRAFT_GGUF_HEADER_CHILD";

/// An alignment of 0 was an error, but only after candle's reader had panicked on it and the
/// panic's message had reached stderr (the CLI printed "thread panicked at ... divide by zero"
/// above its error). Loading such a file in a child process prints no panic.
#[test]
fn an_alignment_of_zero_prints_no_panic() {
    if std::env::var_os(CHILD).is_some() {
        let (_d, path) = written("dream", GgmlDType::Q8_0, |w| {
            w.set("general.alignment", Value::U32(0))
        });
        check_corrupt(&path, &["general.alignment"]);
        return;
    }
    let stderr = stderr_of_child("gguf_header::an_alignment_of_zero_prints_no_panic");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// A key stated twice loaded, the last one winning (llama.cpp refuses the file).
#[test]
fn a_metadata_key_stated_twice_is_refused_by_name() {
    let (_d, path) = written("dream", GgmlDType::Q8_0, |w| w);
    rewrite(&path, |metadata, _| {
        metadata.push(("dream.context_length".into(), Value::U32(7)))
    });
    check_corrupt(
        &path,
        &["metadata key `dream.context_length` appears twice"],
    );
}

/// A tensor listed twice loaded, the last one winning: here a copy of zeros (llama.cpp refuses
/// the file).
#[test]
fn a_tensor_listed_twice_is_refused_by_name() {
    let (_d, path) = written("dream", GgmlDType::F32, |w| w);
    rewrite(&path, |_, tensors| {
        let shape = tensors
            .iter()
            .find(|(name, _)| name == "blk.0.attn_norm.weight")
            .unwrap()
            .1
            .shape()
            .elem_count();
        tensors.push(("blk.0.attn_norm.weight".into(), zeros(shape)));
    });
    check_corrupt(&path, &["tensor `blk.0.attn_norm.weight` appears twice"]);
}

/// A tensor with a dimension of 0 (here one redraft does not use) has no bytes, and so no place
/// in the file to check; no model has one.
#[test]
fn a_dimension_of_zero_is_refused_by_name() {
    let (_d, path) = written("dream", GgmlDType::Q8_0, |w| w);
    rewrite(&path, |_, tensors| {
        tensors.push(("rope_freqs.weight".into(), zeros(32)))
    });
    patch_dims(&path, "rope_freqs.weight", &[0]);
    check_corrupt(
        &path,
        &["tensor `rope_freqs.weight`", "has a dimension of 0"],
    );
}

/// Tensor and key counts, array lengths and string lengths the file's bytes cannot hold are
/// refused before anything is sized from them.
#[test]
fn counts_and_lengths_past_the_end_of_the_file_are_refused() {
    let (_d, good) = written("dream", GgmlDType::Q8_0, |w| w);
    let bytes = std::fs::read(&good).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let tokens = key_at(&bytes, "tokenizer.ggml.tokens");
    let tokens_len = tokens + 8 + "tokenizer.ggml.tokens".len() + 4 + 4;
    for (what, at, value, needle) in [
        ("tensor count", 8, 1 << 40, "1099511627776 tensors"),
        (
            "key count",
            16,
            u64::MAX,
            "18446744073709551615 metadata keys",
        ),
        ("key length", 24, 1 << 40, "a string of 1099511627776 bytes"),
        (
            "key length",
            24,
            bytes.len() as u64,
            &format!("a string of {} bytes", bytes.len()),
        ),
        (
            "array length",
            tokens_len,
            1 << 40,
            "`tokenizer.ggml.tokens` is an array of 1099511627776",
        ),
    ] {
        let path = dir.path().join("m.gguf");
        std::fs::copy(&good, &path).unwrap();
        patch_u64(&path, at, value);
        let message = check_corrupt(&path, &[needle]);
        assert!(
            message.contains("past the end of the file"),
            "{what}: {message}"
        );
    }
}

/// A tensor type no reader knows, or one llama.cpp has but redraft cannot read, was candle's
/// "unknown dtype for tensor 16", naming neither the tensor nor the type.
#[test]
fn a_tensor_type_redraft_cannot_read_is_refused_by_name() {
    for (id, needle) in [
        (99, "ggml type 99, which llama.cpp does not read either"),
        (16, "ggml type 16 (IQ2_XXS), which redraft cannot read"),
    ] {
        let (_d, path) = written("dream", GgmlDType::Q8_0, |w| w);
        let mut bytes = std::fs::read(&path).unwrap();
        let at = record(&bytes, "blk.0.ffn_up.weight").offset_at - 4;
        bytes[at..at + 4].copy_from_slice(&(id as u32).to_le_bytes());
        std::fs::write(&path, bytes).unwrap();
        check_corrupt(&path, &["tensor `blk.0.ffn_up.weight`", needle]);
    }
}

/// More than ggml's 4 dimensions.
#[test]
fn more_than_four_dimensions_are_refused_by_name() {
    let (_d, path) = written("dream", GgmlDType::Q8_0, |w| w);
    let mut bytes = std::fs::read(&path).unwrap();
    let at = record(&bytes, "blk.0.ffn_up.weight").dims_at - 4;
    bytes[at..at + 4].copy_from_slice(&5u32.to_le_bytes());
    std::fs::write(&path, bytes).unwrap();
    check_corrupt(
        &path,
        &[
            "tensor `blk.0.ffn_up.weight`",
            "has 5 dimensions (at most 4)",
        ],
    );
}

/// A file cut anywhere in its header is an error saying where the file ends, or what runs past
/// it (candle's was "failed to fill whole buffer"); cut in its tensors, one naming the tensor
/// that runs past the end.
#[test]
fn a_file_cut_anywhere_says_where_it_ends() {
    let (_d, good) = written("dream", GgmlDType::Q8_0, |w| w);
    let bytes = std::fs::read(&good).unwrap();
    let header = Content::read(&mut std::fs::File::open(&good).unwrap())
        .unwrap()
        .tensor_data_offset as usize;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cut.gguf");
    let cuts = (0..64).chain((64..header).step_by(header / 97));
    for cut in cuts.chain([header + 1, bytes.len() - 1]) {
        std::fs::write(&path, &bytes[..cut]).unwrap();
        let message = check_corrupt(&path, &[]);
        let said: &[&str] = if cut < 4 {
            &["does not start with the GGUF magic bytes"]
        } else if cut < header {
            // Where a count or length is read before the end: it runs past the end.
            &["the file ends at byte", "past the end of the file's"]
        } else {
            &["runs past the end of the file"]
        };
        assert!(
            said.iter().any(|said| message.contains(said)),
            "cut at {cut}: {message}"
        );
    }
}

/// Files written the usual way still load, their tensors read where they are.
#[test]
fn well_formed_files_still_load() {
    for (arch, matrices) in [
        ("dream", GgmlDType::Q8_0),
        ("llada", GgmlDType::F16),
        ("dream", GgmlDType::Q4_0),
    ] {
        let (_d, path) = written(arch, matrices, |w| w);
        Engine::load(&path).unwrap();
        // candle's writer's layout: the same tensors, in another order, still load.
        rewrite(&path, |_, tensors| tensors.reverse());
        Engine::load(&path).unwrap();
    }
}

/// The default model's bytes as a Q8_0 `dream` file, and where its header ends.
fn good_bytes() -> &'static (Vec<u8>, usize) {
    static GOOD: std::sync::OnceLock<(Vec<u8>, usize)> = std::sync::OnceLock::new();
    GOOD.get_or_init(|| {
        let (_d, path) = written("dream", GgmlDType::Q8_0, |w| w);
        let header = Content::read(&mut std::fs::File::open(&path).unwrap())
            .unwrap()
            .tensor_data_offset as usize;
        (std::fs::read(&path).unwrap(), header)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// A well-formed file with a few of its header's bytes changed (counts, lengths, types,
    /// the vocabulary, dimensions, offsets) loads or is an error, never a panic.
    #[test]
    fn header_bytes_changed_anywhere_never_panic(
        changes in prop::collection::vec((0.0f64..1.0, any::<u8>(), any::<bool>()), 1..6)
    ) {
        let (good, header) = good_bytes();
        let mut bytes = good.clone();
        for (at, value, in_table) in changes {
            // Half the changes among the last 2 KiB, the tensor table, which the vocabulary
            // before it would otherwise outnumber.
            let from = if in_table { header.saturating_sub(2048) } else { 0 };
            bytes[from + (at * (header - from) as f64) as usize] = value;
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.gguf");
        std::fs::write(&path, &bytes).unwrap();
        let _ = redraft_engine::gguf::load(&path, None, &Device::Cpu, Tensors::Checked);
    }
}
