//! Runs started from another model's checkpoint (issue 16): a GGUF of the Qwen2.5-Coder layout
//! (grouped-query attention, q/k/v biases, an untied head, RoPE base 1e6, quantized matrices)
//! and a transformers safetensors directory, adapted from autoregressive to diffusion. The
//! training model on a GGUF's dequantized weights gives the engine's logits on the same file; a
//! file of another shape is refused naming its tensor; a run exports a model the engine decodes
//! with the adaptation's mask, shift and attention, and resumes to the weights of a run straight
//! through.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use candle_core::quantized::GgmlDType;
use candle_core::{DType, Device, Tensor};
use redraft_engine::config::{AttentionPattern, ModelConfig};
use redraft_engine::prompt::FimLayout;
use redraft_engine::sampler::{Controls, Pass};
use redraft_engine::ContextCache;
use redraft_engine::{Engine, InfillRequest};
use redraft_tests::gguf;
use redraft_train::train::examples::{ExampleBuilder, ExampleKind, Stream};
use redraft_train::train::init::{self, Adaptation, InitCheckpoint};
use redraft_train::train::model::{ForwardInput, TrainModel};
use redraft_train::train::tokens::CorpusSplit;
use redraft_train::train::{train, StopReason, TrainConfig, TrainControls, TrainPaths, LOG_FILE};

const VOCAB: usize = 320;

/// A tiny Qwen2.5-Coder-layout GGUF in its own directory, with its config and f32 weights.
struct Checkpoint {
    _dir: tempfile::TempDir,
    path: PathBuf,
    config: ModelConfig,
    weights: HashMap<String, Tensor>,
}

fn checkpoint(matrices: GgmlDType, reshaped: Option<(&str, &[usize])>) -> Checkpoint {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("qwen-tiny.gguf");
    let tokenizer = gguf::tokenizer_json(VOCAB);
    let config = gguf::config(VOCAB, 512);
    let weights = gguf::weights(&config, 5);
    gguf::write(&path, &config, &weights, &tokenizer, matrices, reshaped);
    Checkpoint {
        _dir: dir,
        path,
        config,
        weights,
    }
}

fn id(checkpoint: &InitCheckpoint, token: &str) -> u32 {
    checkpoint.tokenizer().token_to_id(token).unwrap()
}

/// A qwen2 GGUF is autoregressive: by default it trains bidirectionally, with the logit shift,
/// `<|fim_pad|>` as the mask and its padding id `<|endoftext|>` (not the instruct model's EOS
/// `<|im_end|>`) ending middles; its shape, positions and RoPE base are the run's.
#[test]
fn a_qwen2_gguf_is_adapted_to_diffusion() {
    let file = checkpoint(GgmlDType::Q8_0, None);
    let opened = InitCheckpoint::open(&file.path).unwrap();
    assert!(opened.is_autoregressive());
    let config = opened.train_config(&Adaptation::default()).unwrap();
    let setup = config.diffusion;
    assert_eq!(setup.mask_id, id(&opened, "<|fim_pad|>"));
    assert_eq!(setup.eos_id, id(&opened, "<|endoftext|>"));
    assert!(setup.logit_shift);
    assert_eq!(setup.attention, AttentionPattern::Bidirectional);
    let shape = &config.model;
    assert_eq!(
        (
            shape.layers,
            shape.hidden,
            shape.heads,
            shape.kv_heads,
            shape.ffn
        ),
        (2, 64, 4, 2, 96)
    );
    assert_eq!((shape.vocab_size, shape.max_positions), (VOCAB, Some(512)));
    assert!(!shape.tied_head);
    assert_eq!(shape.rope_theta, 1e6);
    assert_eq!(config.init.as_deref(), Some(file.path.as_path()));
    config.validate().unwrap();

    // The flags: another unused special token, block-causal attention.
    let asked = Adaptation {
        mask_token: Some("<|im_start|>".into()),
        attention: Some(AttentionPattern::Block(8)),
    };
    let setup = opened.setup(&asked).unwrap();
    assert_eq!(setup.mask_id, id(&opened, "<|im_start|>"));
    assert_eq!(setup.attention, AttentionPattern::Block(8));

    // Masks that text could write, that end a middle, that lay a causal prompt out, or that
    // the vocabulary lacks, are refused, naming the token.
    for (token, attention, expected) in [
        ("a", None, "text encodes to the mask `a`"),
        ("<|endoftext|>", None, "also its end of text"),
        (
            "<|fim_middle|>",
            Some(AttentionPattern::Causal),
            "lays out fill-in-the-middle prompts",
        ),
        (
            "<|mask|>",
            None,
            "--mask-token `<|mask|>` is not in its vocabulary",
        ),
    ] {
        let err = opened
            .setup(&Adaptation {
                mask_token: Some(token.into()),
                attention,
            })
            .unwrap_err()
            .to_string();
        assert!(err.contains(expected), "{token}: {err}");
        assert!(err.contains("qwen-tiny.gguf"), "{err}");
    }
}

/// Logits `[len, vocab]` of the training model over `tokens`, every row.
fn training_logits(model: &TrainModel, tokens: &[u32]) -> Vec<f32> {
    let rows: Vec<u32> = (0..tokens.len() as u32).collect();
    model
        .forward(&ForwardInput {
            tokens,
            batch: 1,
            len: tokens.len(),
            lens: &[tokens.len()],
            rows: &rows,
        })
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1()
        .unwrap()
}

fn engine_logits(engine: &Engine, tokens: &[u32]) -> Vec<f32> {
    engine
        .model()
        .forward(
            &[tokens.to_vec()],
            0..tokens.len(),
            &mut ContextCache::default(),
            Pass::Full { store: false },
        )
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1()
        .unwrap()
}

/// `max |a - b| / max |b|`.
fn relative_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    let scale = b.iter().fold(0f32, |m, x| m.max(x.abs()));
    let diff = a.iter().zip(b).fold(0f32, |m, (x, y)| m.max((x - y).abs()));
    diff / scale
}

/// The training model on a GGUF's weights (dequantized to f32, as a run starts from them) gives
/// the engine's logits on the same file, attending bidirectionally (a `redraft.json` beside the
/// file says so): within f32 noise for float files; for a Q8_0 file within the noise of the
/// engine quantizing its activations to multiply the blocks (the trainer multiplies f32), and
/// the trainer's weights are the blocks' values exactly.
#[test]
fn training_logits_on_gguf_weights_equal_the_engines() {
    for (matrices, bound) in [
        (GgmlDType::F32, 1e-5),
        (GgmlDType::F16, 1e-5),
        (GgmlDType::Q8_0, 3e-2),
    ] {
        let file = checkpoint(matrices, None);
        let dir = file.path.parent().unwrap();
        std::fs::write(
            dir.join("redraft.json"),
            r#"{"attention": "bidirectional"}"#,
        )
        .unwrap();
        let engine = Engine::load(&file.path).unwrap();
        assert_eq!(engine.settings().attention, AttentionPattern::Bidirectional);
        assert_eq!(engine.model().is_quantized(), matrices == GgmlDType::Q8_0);
        let weights = init::load_weights(&file.path, &file.config).unwrap();
        let model = TrainModel::from_tensors(&file.config, weights.clone(), &Device::Cpu).unwrap();
        let tokens = engine
            .tokenizer()
            .encode("fn main() {\n    let width = area(3, 4);\n}\n")
            .unwrap();
        let diff = relative_diff(
            &training_logits(&model, &tokens),
            &engine_logits(&engine, &tokens),
        );
        assert!(
            diff <= bound,
            "{matrices:?}: logits differ by {diff} (relative)"
        );
        // What the file holds, not what it was written from (which Q8_0 rounds).
        let written = &file.weights["model.layers.1.mlp.down_proj.weight"];
        let read = &weights["model.layers.1.mlp.down_proj.weight"];
        let moved = (written - read)
            .unwrap()
            .abs()
            .unwrap()
            .max_all()
            .unwrap()
            .to_scalar::<f32>()
            .unwrap();
        match matrices {
            GgmlDType::F32 => assert_eq!(moved, 0.0),
            _ => assert!(moved > 0.0 && moved < 1e-2, "{matrices:?}: {moved}"),
        }
    }
}

/// A corpus of two splits from the crate's own sources.
fn corpus() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (split, texts) in [
        (
            "train.jsonl",
            vec![
                gguf::TEXT,
                include_str!("../../src/train/model.rs"),
                include_str!("../../src/train/init.rs"),
            ],
        ),
        (
            "valid.jsonl",
            vec![include_str!("../../src/train/optim.rs")],
        ),
    ] {
        let lines: Vec<String> = texts
            .iter()
            .enumerate()
            .map(|(i, text)| {
                serde_json::json!({"crate": "c", "version": "1.0.0", "path": format!("src/f{i}.rs"), "text": text})
                    .to_string()
            })
            .collect();
        std::fs::write(dir.path().join(split), lines.join("\n") + "\n").unwrap();
    }
    dir
}

/// A short run from `path` into `out` with `adaptation`: the run's config and paths, the
/// tokenizer written.
fn run_from(
    path: &Path,
    corpus: &Path,
    out: &Path,
    adaptation: &Adaptation,
) -> (TrainConfig, TrainPaths) {
    let opened = InitCheckpoint::open(path).unwrap();
    let mut config = opened.train_config(adaptation).unwrap();
    config.data.seq_len = 48;
    config.batch = 2;
    config.steps = 4;
    config.optim.lr = 3e-3;
    config.optim.warmup = 1;
    config.eval_every = 2;
    config.eval_examples = 4;
    config.save_every = 100;
    let paths = TrainPaths {
        corpus: corpus.to_path_buf(),
        out: out.to_path_buf(),
        edits: None,
    };
    opened.write_tokenizer(&paths).unwrap();
    (config, paths)
}

fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A run from a quantized GGUF: evaluated before its first step, trained, stopped and resumed to
/// the weights of a run straight through; the export is a model directory the engine decodes
/// with the adaptation's settings (written in config.json and redraft.json), with the GGUF's
/// vocabulary as its tokenizer.json and the GGUF's positions.
#[test]
fn a_run_from_a_gguf_exports_a_diffusion_model_and_resumes() {
    let file = checkpoint(GgmlDType::Q8_0, None);
    let corpus = corpus();
    let (straight, stopped) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let adaptation = Adaptation::default();
    let (config, paths) = run_from(&file.path, corpus.path(), straight.path(), &adaptation);
    let summary = train(
        &config,
        &paths,
        false,
        DType::F32,
        &Device::Cpu,
        TrainControls::default(),
    )
    .unwrap();
    assert_eq!((summary.step, summary.stopped), (4, StopReason::Finished));

    let (config2, paths2) = run_from(&file.path, corpus.path(), stopped.path(), &adaptation);
    assert_eq!(config2, config);
    let controls = TrainControls {
        stop_after: Some(2),
        ..TrainControls::default()
    };
    train(&config2, &paths2, false, DType::F32, &Device::Cpu, controls).unwrap();
    let opened = InitCheckpoint::open(&file.path).unwrap();
    let err = opened.write_tokenizer(&paths2).err().unwrap().to_string();
    assert!(err.contains("already holds a checkpoint"), "{err}");
    let summary = train(
        &config2,
        &paths2,
        true,
        DType::F32,
        &Device::Cpu,
        TrainControls::default(),
    )
    .unwrap();
    assert_eq!((summary.step, summary.steps_this_session), (4, 2));
    let read = |dir: &Path| std::fs::read(dir.join("model.safetensors")).unwrap();
    assert!(
        read(straight.path()) == read(stopped.path()),
        "weights differ after resume"
    );
    // (step, held-out loss, training loss) of each evaluation (times differ between runs).
    let log = |dir: &Path| -> Vec<(u64, f64, Option<f64>)> {
        std::fs::read_to_string(dir.join(LOG_FILE))
            .unwrap()
            .lines()
            .map(|l| {
                let r: serde_json::Value = serde_json::from_str(l).unwrap();
                let (step, val) = (r["step"].as_u64().unwrap(), r["val_loss"].as_f64().unwrap());
                (step, val, r["train_loss"].as_f64())
            })
            .collect()
    };
    assert_eq!(log(straight.path()), log(stopped.path()));
    let steps: Vec<u64> = log(straight.path()).iter().map(|e| e.0).collect();
    assert_eq!(
        steps,
        [0, 2, 4],
        "the start is evaluated before the first step"
    );
    assert_eq!(log(straight.path())[0].2, None);

    let out = straight.path();
    let redraft = read_json(&out.join("redraft.json"));
    let fim_pad = id(&opened, "<|fim_pad|>") as u64;
    let end = id(&opened, "<|endoftext|>") as u64;
    assert_eq!(redraft["mask_token_id"], fim_pad);
    assert_eq!(redraft["eos_token_id"], end);
    assert_eq!(redraft["logit_shift"], true);
    assert_eq!(redraft["attention"], "bidirectional");
    let exported = read_json(&out.join("config.json"));
    assert_eq!(exported["tie_word_embeddings"], false);
    assert_eq!(exported["num_key_value_heads"], 2);
    assert_eq!(exported["max_position_embeddings"], 512);
    assert_eq!(exported["rope_theta"], 1e6);
    let tensors =
        candle_core::safetensors::load(out.join("model.safetensors"), &Device::Cpu).unwrap();
    assert!(tensors.contains_key("lm_head.weight"));

    let engine = Engine::load(out).unwrap();
    let settings = engine.settings();
    assert_eq!(
        (settings.mask_token_id as u64, settings.eos_token_id as u64),
        (fim_pad, end)
    );
    assert!(settings.logit_shift);
    assert_eq!(settings.attention, AttentionPattern::Bidirectional);
    assert_eq!(engine.layout(), FimLayout::Infill);
    let text = "fn main() {\n    let width = 3;\n}\n";
    assert_eq!(
        engine.tokenizer().encode(text).unwrap(),
        opened.tokenizer().encode(text).unwrap()
    );
    let mut request = InfillRequest::new("fn main() {\n    let x = ", ";\n}\n");
    request.max_tokens = 8;
    let completion = engine
        .complete(&request, &mut ContextCache::default(), Controls::default())
        .unwrap();
    assert!(completion.tokens.len() <= 8);
}

/// Block-causal training sees a FIM example as the engine lays a request out for the exported
/// model: `<|fim_prefix|> prefix <|fim_suffix|> suffix <|fim_middle|> canvas`, the canvas last.
#[test]
fn a_block_causal_run_lays_fim_out_as_the_engine_does() {
    let file = checkpoint(GgmlDType::F32, None);
    let corpus = corpus();
    let out = tempfile::tempdir().unwrap();
    let adaptation = Adaptation {
        mask_token: None,
        attention: Some(AttentionPattern::Block(8)),
    };
    let (mut config, paths) = run_from(&file.path, corpus.path(), out.path(), &adaptation);
    config.steps = 1;
    train(
        &config,
        &paths,
        false,
        DType::F32,
        &Device::Cpu,
        TrainControls::default(),
    )
    .unwrap();
    assert_eq!(
        read_json(&out.path().join("redraft.json"))["attention"],
        serde_json::json!({"block": 8})
    );
    let engine = Engine::load(out.path()).unwrap();
    assert_eq!(engine.settings().attention, AttentionPattern::Block(8));
    let FimLayout::PrefixSuffixMiddle {
        prefix,
        suffix,
        middle,
    } = engine.layout()
    else {
        panic!("a block-causal model with FIM tokens is prompted prefix-suffix-middle")
    };

    let tokenizer = engine.tokenizer();
    let split = CorpusSplit::from_texts(vec![gguf::TEXT.to_string()], tokenizer).unwrap();
    let builder = ExampleBuilder::new(&split, tokenizer, config.data.clone(), 3, Stream::Train)
        .with_setup(config.diffusion);
    assert_eq!(builder.fim_markers(), Some([prefix, suffix, middle]));
    let examples = builder.batch(0, 16).unwrap();
    let mut fim = 0;
    for ex in &examples {
        if let ExampleKind::Fim(_) = ex.kind {
            fim += 1;
            assert_eq!(ex.tokens[0], prefix);
            assert_eq!(ex.canvas.end, ex.tokens.len());
            assert_eq!(ex.tokens[ex.canvas.start - 1], middle);
            assert_eq!(ex.tokens.iter().filter(|&&t| t == suffix).count(), 1);
            assert!(ex.tokens.len() <= config.data.seq_len);
        }
    }
    assert!(fim > 0, "no FIM example among {}", examples.len());
}

/// A GGUF whose tensor has another shape than its metadata implies is refused when the run
/// starts, naming the tensor under the file's own name.
#[test]
fn a_gguf_of_another_shape_is_refused_naming_its_tensor() {
    let file = checkpoint(
        GgmlDType::Q8_0,
        Some(("model.layers.1.self_attn.k_proj.weight", &[16, 64][..])),
    );
    let corpus = corpus();
    let out = tempfile::tempdir().unwrap();
    let (config, paths) = run_from(
        &file.path,
        corpus.path(),
        out.path(),
        &Adaptation::default(),
    );
    let err = train(
        &config,
        &paths,
        false,
        DType::F32,
        &Device::Cpu,
        TrainControls::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("blk.1.attn_k.weight") && err.contains("[16, 64]") && err.contains("[32, 64]"),
        "{err}"
    );
}

/// A transformers Qwen2 directory (no mask token, RoPE base in `rope_parameters`, a BOS id, an
/// untied head): adapted as a GGUF is, its weights the run's first ones.
#[test]
fn a_transformers_qwen2_directory_starts_a_run_with_its_weights() {
    let dir = tempfile::tempdir().unwrap();
    let tokenizer = gguf::tokenizer_json(VOCAB);
    std::fs::write(dir.path().join("tokenizer.json"), &tokenizer).unwrap();
    let config = gguf::config(VOCAB, 384);
    let mut json = serde_json::to_value(&config).unwrap();
    json["rope_theta"] = serde_json::Value::Null;
    json["rope_parameters"] = serde_json::json!({"rope_theta": 500000.0, "rope_type": "default"});
    json["bos_token_id"] = 0.into();
    json["eos_token_id"] = 0.into();
    std::fs::write(dir.path().join("config.json"), json.to_string()).unwrap();
    let weights = gguf::weights(&config, 9);
    candle_core::safetensors::save(&weights, dir.path().join("model.safetensors")).unwrap();

    let opened = InitCheckpoint::open(dir.path()).unwrap();
    assert!(opened.is_autoregressive());
    let corpus = corpus();
    let out = tempfile::tempdir().unwrap();
    let (mut config, paths) = run_from(
        dir.path(),
        corpus.path(),
        out.path(),
        &Adaptation::default(),
    );
    assert_eq!(config.model.rope_theta, 500000.0);
    assert_eq!(config.diffusion.eos_id, 0);
    config.steps = 1;
    config.optim.lr = 1e-12;
    config.optim.warmup = 0;
    train(
        &config,
        &paths,
        false,
        DType::F32,
        &Device::Cpu,
        TrainControls::default(),
    )
    .unwrap();
    let trained =
        candle_core::safetensors::load(out.path().join("model.safetensors"), &Device::Cpu).unwrap();
    assert_eq!(trained.len(), weights.len());
    for (name, tensor) in &weights {
        let moved = (tensor - &trained[name])
            .unwrap()
            .abs()
            .unwrap()
            .max_all()
            .unwrap()
            .to_scalar::<f32>()
            .unwrap();
        assert!(moved < 1e-6, "{name} moved by {moved}");
    }
    let exported = read_json(&out.path().join("config.json"));
    assert_eq!(exported["rope_theta"], 500000.0);
    assert_eq!(exported["max_position_embeddings"], 384);
    assert!(exported.get("bos_token_id").is_none());
    Engine::load(out.path()).unwrap();
}
