//! The GPU trainer (`train/gpu/*.py`, PyTorch) proven on the CPU: a pack built from this
//! repository's own sources and synthetic next edits made from them, a few dozen steps of the `tiny` preset, the export loaded by the
//! engine, the engine's logits against PyTorch's on the exported weights, and the trainer's
//! fill-in-the-middle layout against the engine's `Engine::canvas`, token for token.
//!
//! Needs a Python with PyTorch, tokenizers and safetensors: `$REDRAFT_TORCH_PYTHON`, else the
//! `.venv-train` that `scripts/setup-torch` makes (the README's test command runs it first).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use rand::rngs::StdRng;
use rand::SeedableRng;
use redraft_context::edit::cut::CutOptions;
use redraft_engine::sampler::Pass;
use redraft_engine::ContextCache;
use redraft_engine::{Engine, InfillRequest};
use redraft_train::corpus::CorpusRecord;
use redraft_train::edits::synthetic::{self, SyntheticOptions};
use redraft_train::edits::{self, EditRecord};
use redraft_train::pack::{self, PackOptions};
use redraft_train::train::examples::{choose_span, SpanKind};
use serde_json::{json, Value};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The Python scripts/setup-torch set up: `REDRAFT_TORCH_PYTHON`, else the venv it made
/// (`REDRAFT_TORCH_VENV`, as the script reads it, else `.venv-train`).
fn python() -> PathBuf {
    if let Some(path) = std::env::var_os("REDRAFT_TORCH_PYTHON") {
        return PathBuf::from(path);
    }
    let venv = std::env::var_os("REDRAFT_TORCH_VENV")
        .map_or_else(|| repo().join(".venv-train"), PathBuf::from)
        .join("bin/python");
    assert!(
        venv.exists(),
        "no Python with PyTorch at {}: run scripts/setup-torch (it makes .venv-train) or set REDRAFT_TORCH_PYTHON",
        venv.display()
    );
    venv
}

/// Runs `train/gpu/SCRIPT args`, feeding `input` on stdin; its stdout, failing the test if
/// the script failed.
fn run_python(script: &str, args: &[&str], input: Option<&Value>) -> String {
    let (ok, stdout, stderr) = try_python(script, args, input);
    assert!(ok, "{script} {args:?} failed:\n{stdout}\n{stderr}");
    stdout
}

/// Runs `train/gpu/SCRIPT args`, feeding `input` on stdin: whether it exited 0, its stdout and
/// its stderr.
fn try_python(script: &str, args: &[&str], input: Option<&Value>) -> (bool, String, String) {
    let mut child = Command::new(python())
        .arg(repo().join("train/gpu").join(script))
        .args(args)
        .env("PYTHONUNBUFFERED", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting python");
    let mut stdin = child.stdin.take().unwrap();
    if let Some(input) = input {
        stdin.write_all(input.to_string().as_bytes()).unwrap();
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// This repository's Rust sources as a corpus: the engine, suggest and train crates for
/// training, the context crate for validation; and each split's synthetic next edits (the
/// builder's kinds and excerpts, no version pairs) beside it, as `build-pack` reads them.
fn write_corpus(dir: &Path) -> Vec<String> {
    let mut valid_texts = Vec::new();
    for (split, roots, edit_file) in [
        (
            "train",
            &["engine/src", "suggest/src", "train/src"][..],
            edits::TRAIN_FILE,
        ),
        ("valid", &["context/src"][..], edits::VALID_FILE),
    ] {
        let mut files = Vec::new();
        for root in roots {
            collect_rs(&repo().join(root), &mut files);
        }
        files.sort();
        let mut jsonl = String::new();
        let mut edit_jsonl = String::new();
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            if split == "valid" {
                valid_texts.push(text.clone());
            }
            let path = file.display().to_string();
            let made = synthetic::cases(
                &path,
                &text,
                &path,
                &SyntheticOptions::default(),
                &CutOptions::default(),
            );
            for (kind, case) in made.cases {
                let mut record = EditRecord::new(kind, "redraft", "0.1.0", case);
                record.trim_to_excerpt(40);
                edit_jsonl.push_str(&serde_json::to_string(&record).unwrap());
                edit_jsonl.push('\n');
            }
            let record = CorpusRecord {
                krate: "redraft".into(),
                version: "0.1.0".into(),
                path: file.display().to_string(),
                text,
            };
            jsonl.push_str(&serde_json::to_string(&record).unwrap());
            jsonl.push('\n');
        }
        std::fs::write(dir.join(format!("{split}.jsonl")), jsonl).unwrap();
        // A next edit that outgrows the canvas the engine plans for it (a few lines inserted
        // into a short region), repeated: the synthetic ones rarely do.
        for _ in 0..4 {
            edit_jsonl.push_str(&serde_json::to_string(&outgrowing_edit()).unwrap());
            edit_jsonl.push('\n');
        }
        std::fs::write(dir.join(edit_file), edit_jsonl).unwrap();
    }
    valid_texts
}

/// `let volume` and its use inserted after `let h`, just after `w` was renamed `width`.
fn outgrowing_edit() -> EditRecord {
    let text =
        "fn main() {\n    let width = 3;\n    let h = 4;\n    println!(\"{}\", width * h);\n}\n";
    let at = text.find("    println!").unwrap();
    let case = redraft_context::edit::cut::EditCase {
        path: "src/main.rs".into(),
        text: text.into(),
        cursor: text.find("width = 3").unwrap() + "width".len(),
        history: vec![redraft_context::edit::HistoryEdit {
            path: "src/main.rs".into(),
            old: "    let w = 3;\n".into(),
            new: "    let width = 3;\n".into(),
        }],
        target: Some(redraft_context::edit::TextEdit {
            range: at..at,
            new_text: "    let depth = width + h;\n    let volume = width * h * depth;\n    \
                       let area = width * h;\n    println!(\"{} {}\", volume, area);\n"
                .into(),
        }),
    };
    EditRecord::new(
        redraft_train::edits::EditKind::AddField,
        "redraft",
        "0.1.0",
        case,
    )
}

fn collect_rs(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect_rs(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

struct Trained {
    _dir: tempfile::TempDir,
    pack: PathBuf,
    model: PathBuf,
    log: Value,
    valid_texts: Vec<String>,
}

/// One training run shared by the tests of this file.
fn trained() -> &'static Trained {
    static TRAINED: OnceLock<Trained> = OnceLock::new();
    TRAINED.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let corpus = dir.path().join("corpus");
        std::fs::create_dir_all(&corpus).unwrap();
        let valid_texts = write_corpus(&corpus);
        let pack_dir = dir.path().join("pack");
        let options = PackOptions {
            vocab_size: 1024,
            // Next edits one shorter than the tiny preset's 256 positions: a training sequence
            // holds one and the separator after it.
            seq_len: 255,
            edits: Some(corpus.clone()),
            ..PackOptions::new(&corpus, &pack_dir)
        };
        pack::build(&options).unwrap();
        let model = dir.path().join("model");
        let stdout = run_python(
            "train.py",
            &[
                "--pack",
                pack_dir.to_str().unwrap(),
                "--out",
                model.to_str().unwrap(),
                "--preset",
                "tiny",
                "--seconds",
                "600",
                "--max-steps",
                "40",
                "--no-compile",
                "--workers",
                "0",
            ],
            None,
        );
        eprintln!("{stdout}");
        let log: Value =
            serde_json::from_str(&std::fs::read_to_string(model.join("train_log.json")).unwrap())
                .unwrap();
        Trained {
            _dir: dir,
            pack: pack_dir,
            model,
            log,
            valid_texts,
        }
    })
}

/// Per sequence, the largest difference between the engine's logits of a full pass and
/// PyTorch's on the model directory `dir`, and the largest PyTorch logit (for scale).
fn logit_gaps(engine: &Engine, dir: &Path, sequences: &[Vec<u32>]) -> Vec<(f32, f32)> {
    let answer: Value = serde_json::from_str(&run_python(
        "check.py",
        &["logits", dir.to_str().unwrap()],
        Some(&json!({ "sequences": sequences })),
    ))
    .unwrap();
    sequences
        .iter()
        .enumerate()
        .map(|(s, ids)| {
            let ours: Vec<Vec<f32>> = engine
                .model()
                .forward(
                    std::slice::from_ref(ids),
                    0..ids.len(),
                    &mut ContextCache::default(),
                    Pass::Full { store: false },
                )
                .unwrap()
                .squeeze(0)
                .unwrap()
                .to_vec2()
                .unwrap();
            let theirs = answer["logits"][s].as_array().unwrap();
            assert_eq!(ours.len(), theirs.len());
            let (mut worst, mut scale) = (0f32, 0f32);
            for (row, their_row) in ours.iter().zip(theirs) {
                for (a, b) in row.iter().zip(their_row.as_array().unwrap()) {
                    let b = b.as_f64().unwrap() as f32;
                    worst = worst.max((a - b).abs());
                    scale = scale.max(b.abs());
                }
            }
            (worst, scale)
        })
        .collect()
}

#[test]
fn the_loss_falls_and_the_export_is_logged() {
    let log = &trained().log;
    let steps = log["steps"].as_array().unwrap();
    let first = steps.first().unwrap()["loss"].as_f64().unwrap();
    let last = steps.last().unwrap()["loss"].as_f64().unwrap();
    assert!(
        last < first - 0.3,
        "the training loss did not fall: {first:.3} at step {} to {last:.3} at step {}",
        steps[0]["step"],
        steps.last().unwrap()["step"]
    );
    let eval = log["evals"].as_array().unwrap().last().unwrap();
    for kind in ["plain", "fim"] {
        let loss = eval[kind]["loss"].as_f64().unwrap();
        assert!(
            loss.is_finite() && loss > 0.0,
            "{kind} validation loss {loss}"
        );
    }
    assert!(log["tokens_per_s"].as_f64().unwrap() > 0.0);
    // Next edits were in the mix.
    assert!(eval["edit"]["tokens"].as_u64().unwrap() > 0, "{eval}");
    // The run ends by reading whether the model tells canvases planned too short from ones
    // that hold their middle (`canvas_ends`), FIM and next edits apart.
    let ends = &log["canvas_ends"];
    for example in ["fim", "edit"] {
        for kind in ["holds", "short"] {
            let seen = &ends[example][kind];
            let p = seen["p_eos_last"].as_f64().unwrap();
            assert!(seen["canvases"].as_u64().unwrap() > 0, "{ends}");
            assert!((0.0..=1.0).contains(&p), "{ends}");
        }
    }
}

/// A pack for a later window, built with the shipped model's tokenizer (`TOKENIZER` in
/// `scripts/build-pack`) and fewer training bytes, holds that tokenizer's ids: the pack's
/// tokenizer is the given one (here the 2M default's 4k BPE, unlike the 1k one the shared pack
/// trained on the same corpus), not one trained again.
#[test]
fn a_pack_built_with_a_given_tokenizer_keeps_its_ids() {
    let t = trained();
    let dir = tempfile::tempdir().unwrap();
    let given = repo().join("assets/default-model/tokenizer.json");
    let options = PackOptions {
        vocab_size: 1024,
        seq_len: 256,
        train_bytes: 20_000,
        tokenizer: Some(given.clone()),
        ..PackOptions::new(t.pack.parent().unwrap().join("corpus"), dir.path())
    };
    pack::build(&options).unwrap();
    let vocab = |path: &Path| -> Value {
        let json: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        json["model"]["vocab"].clone()
    };
    let kept = vocab(&dir.path().join("tokenizer.json"));
    assert_eq!(kept, vocab(&given));
    assert_ne!(kept, vocab(&t.pack.join("tokenizer.json")));
    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("meta.json")).unwrap())
            .unwrap();
    assert_eq!(meta["vocab_size"], 4096, "{meta}");
}

/// A short tiny run on the shared run's pack, `max_steps` steps, with `flags`, on no worker
/// process (unless `flags` names some): its stdout, its log, and whether it exported a model.
fn short_run(max_steps: &str, flags: &[&str]) -> (String, Value, bool) {
    let (ok, stdout, log, exported) = try_short_run(max_steps, flags);
    assert!(ok, "the run failed:\n{stdout}");
    (stdout, log, exported)
}

/// [`short_run`] that may fail: whether it exited 0 as well.
fn try_short_run(max_steps: &str, flags: &[&str]) -> (bool, String, Value, bool) {
    let t = trained();
    let out = tempfile::tempdir().unwrap();
    let (pack, dir) = (t.pack.to_str().unwrap(), out.path().to_str().unwrap());
    let mut args = vec![
        "--pack",
        pack,
        "--out",
        dir,
        "--preset",
        "tiny",
        "--seconds",
        "600",
    ];
    args.extend(["--max-steps", max_steps, "--workers", "0"]);
    args.extend(flags);
    let (ok, stdout, stderr) = try_python("train.py", &args, None);
    let log: Value = match std::fs::read_to_string(out.path().join("train_log.json")) {
        Ok(text) => serde_json::from_str(&text).unwrap(),
        Err(error) => panic!("no train_log.json ({error}):\n{stdout}\n{stderr}"),
    };
    (ok, stdout, log, out.path().join("config.json").exists())
}

/// A compiler failure in the warm-up (here: a backend whose library is not installed, failing
/// the way an Inductor or Triton bug fails) costs the window its speed, not its model: the run
/// logs the error and trains eager.
#[test]
fn a_failed_compile_trains_eager_and_logs_why() {
    let (stdout, log, exported) = short_run("4", &["--compile-backend", "tvm"]);
    assert!(
        stdout.contains("torch.compile failed, training eager"),
        "{stdout}"
    );
    let error = log["compile_error"].as_str().unwrap();
    assert!(error.contains("tvm"), "{error}");
    assert!(log["tokens_per_s"].as_f64().unwrap() > 0.0);
    assert!(exported);
}

/// A step that runs out of GPU memory (simulated: `--oom-above`, the error PyTorch raises)
/// halves the batch until one fits, and the run goes on and exports; the log says at which
/// steps and what the batch became.
#[test]
fn a_step_out_of_memory_halves_the_batch_and_the_run_goes_on() {
    let (stdout, log, exported) = short_run("6", &["--no-compile", "--oom-above", "3"]);
    assert!(
        stdout.contains("out of memory at step 0: batch halved to 4"),
        "{stdout}"
    );
    let shrinks: Vec<u64> = log["out_of_memory"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["batch"].as_u64().unwrap())
        .collect();
    assert_eq!(shrinks, [4, 2], "{log}");
    assert_eq!(log["batch"], 2);
    // The steps after the two of the warm-up, on batches that fit: 4 of 2 x 256 tokens.
    assert_eq!(log["tokens_seen"], 4 * 2 * 256, "{log}");
    assert!(exported);
}

/// A step that fails for another reason than memory, on the eager trunk, ends training early:
/// the run still evaluates and exports the weights it has, logs the step and the error, and
/// exits 1.
#[test]
fn a_failed_step_stops_the_run_with_its_model_exported() {
    let (ok, stdout, log, exported) = try_short_run("8", &["--no-compile", "--fail-step", "4"]);
    assert!(!ok, "a run stopped by a failure exits 1:\n{stdout}");
    assert!(
        stdout.contains("step 4 failed, stopping to export"),
        "{stdout}"
    );
    assert_eq!(log["error"]["step"], 4, "{log}");
    assert!(
        log["error"]["error"]
            .as_str()
            .unwrap()
            .contains("simulated (--fail-step 4)"),
        "{log}"
    );
    // The two warm-up steps and the two after them, and the last evaluation of those.
    assert_eq!(log["tokens_seen"], 2 * 8 * 256, "{log}");
    assert_eq!(log["evals"].as_array().unwrap().last().unwrap()["step"], 4);
    assert!(exported);
}

/// A run that diverges (a weight turns NaN, as a too-high learning rate makes it) keeps the
/// export made before: the weights are checked before each export, the run stops at the first
/// non-finite ones and exits 1 with the reason in the log.
#[test]
fn a_diverged_run_keeps_its_last_finite_export() {
    let (ok, stdout, log, exported) = try_short_run(
        "8",
        &["--no-compile", "--export-every", "0", "--nan-step", "5"],
    );
    assert!(!ok, "a diverged run exits 1:\n{stdout}");
    assert!(exported, "{stdout}");
    let error = log["error"]["error"].as_str().unwrap();
    assert!(error.contains("not finite"), "{log}");
    assert_eq!(log["error"]["step"], 5, "{log}");
    // The last evaluation and export are of step 4's weights; nothing after step 5 ran.
    assert_eq!(log["evals"].as_array().unwrap().last().unwrap()["step"], 4);
}

/// On a compiled trunk the same failure (a recompile after the batch was halved, a kernel) costs
/// the run its speed, not its model: it goes on eager, the step again, to the end.
#[test]
fn a_compiled_step_that_fails_after_the_warm_up_goes_on_eager() {
    let (stdout, log, exported) =
        short_run("6", &["--compile-backend", "aot_eager", "--fail-step", "3"]);
    assert!(
        stdout.contains("torch.compile failed, training eager"),
        "{stdout}"
    );
    assert!(
        log["compile_error"]
            .as_str()
            .unwrap()
            .contains("simulated (--fail-step 3)"),
        "{log}"
    );
    assert!(log.get("error").is_none(), "{log}");
    assert_eq!(log["tokens_seen"], 4 * 8 * 256, "{log}");
    assert!(exported);
}

/// Batch workers that die (a machine with too little shared memory, say) do not end the run:
/// the batches are made in the trainer's own process from that step on, and the log says so.
/// The worker dies after its first batch, so PyTorch reports it while the trainer waits for the
/// next batch or in the middle of a step, whichever comes first: both are handled.
#[test]
fn dead_batch_workers_leave_the_batches_to_the_trainer() {
    let (stdout, log, exported) =
        short_run("4", &["--no-compile", "--workers", "1", "--fail-batches"]);
    assert!(
        stdout.contains("making batches in this process"),
        "{stdout}"
    );
    assert_eq!(log["data_errors"].as_array().unwrap().len(), 1, "{log}");
    assert_eq!(log["tokens_seen"], 2 * 8 * 256, "{log}");
    assert!(exported);
}

/// An export cut short (a full disk, a run killed by the command's limit) leaves nothing but the
/// last whole export in the folder a device call returns (at most 8 files: a half-written
/// export beside the good one could push one of its shards out); the half-written one is in
/// the stage.
#[test]
fn an_export_cut_short_leaves_only_the_last_whole_one_beside_it() {
    let (returned, stage) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let answer: Value = serde_json::from_str(&run_python(
        "check.py",
        &[
            "export-interrupted",
            returned.path().join("model").to_str().unwrap(),
        ],
        Some(&json!({"stage": stage.path()})),
    ))
    .unwrap();
    let beside: Vec<&str> = answer["beside"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    assert!(
        beside.len() > 3 && beside.iter().all(|f| f.starts_with("model/")),
        "{beside:?}"
    );
    assert!(
        beside.contains(&"model/model.safetensors.index.json"),
        "the first export is whole: {beside:?}"
    );
    let staged: Vec<&str> = answer["stage"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    assert!(
        staged.len() == 1 && staged[0].starts_with("model.new/model-00001-of-"),
        "the second export stopped after its first shard: {staged:?}"
    );
}

#[test]
fn the_engine_gives_pytorchs_logits_on_the_export() {
    let t = trained();
    let engine = Engine::load(&t.model).unwrap();
    // Trained on next edits in redraft's marker layout (the pack's tokenizer has the markers),
    // the export is read as such: `redraft models` and the doors offer next edits on it.
    assert!(
        matches!(
            engine.edit_format(),
            Ok(redraft_engine::edit::EditFormat::Markers(_))
        ),
        "{:?}",
        engine.edit_format()
    );
    let tokenizer = engine.tokenizer();
    let mut sequences = Vec::new();
    for text in t.valid_texts.iter().take(3) {
        let mut ids = tokenizer.encode(text).unwrap();
        ids.truncate(200);
        // Some masked positions, as the model sees them in use.
        for i in (5..ids.len()).step_by(7) {
            ids[i] = engine.settings().mask_token_id;
        }
        sequences.push(ids);
    }
    for (s, (worst, scale)) in logit_gaps(&engine, &t.model, &sequences)
        .into_iter()
        .enumerate()
    {
        assert!(
            worst <= 1e-3 * scale.max(1.0),
            "sequence {s}: the engine's logits differ from PyTorch's by up to {worst} (largest logit {scale})"
        );
    }
}

/// Where no fused attention kernel takes grouped key/value heads, the trainer hands SDPA the
/// heads repeated (`Attention.grouped` in `model.py`, set from a probe of the device): the same
/// function as the grouped heads, on a random model.
#[test]
fn repeated_key_value_heads_compute_the_grouped_attention() {
    let answer: Value = serde_json::from_str(&run_python(
        "check.py",
        &["attention-paths", "-"],
        Some(&json!({"seed": 3})),
    ))
    .unwrap();
    let difference = answer["largest_difference"].as_f64().unwrap();
    let scale = answer["largest_output"].as_f64().unwrap();
    assert!(
        scale > 0.0 && difference <= 1e-5 * scale.max(1.0),
        "{answer}"
    );
}

/// The trainer compiles the trunk layer by layer (`model.compiled_trunk`): the same hidden
/// states and gradients as the eager trunk, and one graph for all the layers, so the compiler's
/// cold start (counted against the window) is one layer's, not one per layer.
#[test]
fn the_compiled_layers_compute_the_eager_trunk_and_share_one_graph() {
    let answer: Value = serde_json::from_str(&run_python(
        "check.py",
        &["compiled-trunk", "-"],
        Some(&json!({"seed": 5})),
    ))
    .unwrap();
    let number = |key: &str| answer[key].as_f64().unwrap();
    assert!(
        number("largest_output") > 0.0
            && number("largest_difference") <= 1e-5 * number("largest_output").max(1.0),
        "{answer}"
    );
    assert!(
        number("largest_grad") > 0.0
            && number("largest_grad_difference") <= 1e-5 * number("largest_grad").max(1e-3),
        "{answer}"
    );
    assert!(answer["layers"].as_u64().unwrap() > 1, "{answer}");
    assert_eq!(answer["graphs"], 1, "{answer}");
}

/// A FIM canvas's length says nothing of its middle but that it fits: the lengths are the
/// engine's plans (16, 24, 48 slots) or the longest, or any length up to it, never the smallest
/// that holds the middle (the engine's plan cannot know it), so a 16-slot canvas often holds a
/// middle of a few tokens, as a rest-of-line request's does. And a sequence holds as many
/// examples as fit, each context budget drawn from those that still fit, the last taking what
/// is left, and a canvas shorter than the longest leaves its slots to the context: 1.75
/// examples a sequence and a fifth of its positions unmasked filler without those, 2.35 and 1%
/// with them.
#[test]
fn fim_canvas_lengths_do_not_give_the_middle_away_and_sequences_are_full() {
    let t = trained();
    let stats: Value = serde_json::from_str(&run_python(
        "check.py",
        &["canvases", t.pack.to_str().unwrap()],
        Some(&json!({"kind": "fim", "seq_len": 1024, "overflow": 0.0, "sequences": 300})),
    ))
    .unwrap();
    let lengths = stats["lengths"].as_object().unwrap();
    let count = |length: &str| lengths.get(length).and_then(Value::as_u64).unwrap_or(0);
    for planned in ["16", "24", "48", "64"] {
        assert!(count(planned) > 0, "{stats}");
    }
    // Smallest-bucket lengths (4, 8, 32) only come from the even draw up to 64, now rare.
    let in_16 = count("16") as f64;
    let short = stats["short_in_16"].as_u64().unwrap() as f64;
    assert!(
        short / in_16 > 0.1,
        "few short middles in 16-slot canvases: {stats}"
    );
    assert!(stats["per_sequence"].as_f64().unwrap() > 2.2, "{stats}");
    assert!(stats["filled"].as_f64().unwrap() > 0.97, "{stats}");
}

/// A next-edit sequence holds as many edits as fit: an edit too long for what is left is put
/// back and another drawn (`DataConfig.edit_tries`), where the first that did not fit used to
/// end the sequence (on the GPU pack: 2.15 edits a sequence and 88% of its positions filled,
/// against 1.87 and 78%).
#[test]
fn next_edit_sequences_draw_again_for_the_room_left() {
    let t = trained();
    let stats = |tries: u32| -> Value {
        serde_json::from_str(&run_python(
            "check.py",
            &["canvases", t.pack.to_str().unwrap()],
            // The test pack's edits are at most 255 tokens: at 700, two fit and a third only
            // where the room left is enough for it (2.16 a sequence without drawing again, 2.39
            // with).
            Some(
                &json!({"kind": "edit", "seq_len": 700, "overflow": 0.0, "sequences": 200,
                         "edit_tries": tries}),
            ),
        ))
        .unwrap()
    };
    let (none, once, again) = (stats(0), stats(1), stats(8));
    // The first edit drawn always fits an empty sequence: never a sequence of none.
    assert_eq!(none["per_sequence"], 1.0, "{none}");
    let number = |v: &Value, key: &str| v[key].as_f64().unwrap();
    assert!(
        number(&again, "per_sequence") > number(&once, "per_sequence") + 0.1,
        "{once}\n{again}"
    );
    assert!(
        number(&again, "filled") > number(&once, "filled"),
        "{once}\n{again}"
    );
    assert!(number(&again, "filled") <= 1.0, "{again}");
}

/// A share of the FIM canvases the trainer makes (`DataConfig.overflow`) is planned too short
/// for its middle: every slot holds a token of the middle, the last one too, which is what
/// makes the engine grow a canvas; with the share at 0 every canvas ends in EOS. Next edits
/// get such a canvas only where the engine's own plan is too short for the new region (half
/// of those), never shorter than that plan.
#[test]
fn some_canvases_are_shorter_than_their_middle_and_hold_no_eos() {
    let t = trained();
    let canvases = |kind: &str, overflow: f64, sequences: usize| -> Value {
        serde_json::from_str(&run_python(
            "check.py",
            &["canvases", t.pack.to_str().unwrap()],
            Some(&json!({"kind": kind, "seq_len": 256, "overflow": overflow, "sequences": sequences})),
        ))
        .unwrap()
    };
    for kind in ["fim", "edit"] {
        let none = canvases(kind, 0.0, 300);
        assert!(none["canvases"].as_u64().unwrap() >= 200, "{kind}: {none}");
        assert_eq!(none["full"], 0, "{kind}: {none}");
    }
    let some = canvases("fim", 0.2, 300);
    let (all, full) = (
        some["canvases"].as_u64().unwrap() as f64,
        some["full"].as_u64().unwrap() as f64,
    );
    // 0.2 of the middles of two tokens or more.
    assert!((0.05..=0.25).contains(&(full / all)), "{some}");
    assert_eq!(some["eos_in_full"], 0, "{some}");
    let edits = canvases("edit", 0.1, 3000);
    let (outgrown, full) = (
        edits["outgrown"].as_u64().unwrap(),
        edits["full"].as_u64().unwrap(),
    );
    // Half of those the plan is too short for.
    assert!(outgrown >= 20, "{edits}");
    assert!(4 * full >= outgrown && 4 * full <= 3 * outgrown, "{edits}");
    assert_eq!(edits["eos_in_full"], 0, "{edits}");
    assert_eq!(edits["below_plan"], 0, "{edits}");
}

/// The trainer works out the canvas the engine plans for a laid-out next edit from the old
/// region between its markers: the engine's `canvas_length` of the old region's tokens.
#[test]
fn the_trainers_next_edit_plan_is_the_engines() {
    use redraft_engine::edit::{canvas_length, EditMarkers};
    use redraft_train::train::examples::edit::edit_tokens;
    let t = trained();
    let engine = Engine::load(&t.model).unwrap();
    let markers = EditMarkers::of(engine.tokenizer()).unwrap();
    let records = edits::read_edit_records(
        &t.pack
            .parent()
            .unwrap()
            .join("corpus")
            .join(edits::VALID_FILE),
    )
    .unwrap();
    // And the outgrowing edit with its cursor at every character of its line: a cursor inside
    // a word splits tokens the whole region would merge.
    let moved = outgrowing_edit().case();
    let line = moved.text.find("    let width").unwrap();
    let cases = records
        .iter()
        .map(|r| r.case())
        .chain((line..line + 18).map(|cursor| {
            let mut case = moved.clone();
            case.cursor = cursor;
            case
        }));
    let mut rng = StdRng::seed_from_u64(5);
    let (mut examples, mut expected, mut split_differs) = (Vec::new(), Vec::new(), false);
    for case in cases {
        let Some(e) = edit_tokens(
            engine.tokenizer(),
            markers,
            &case,
            256,
            redraft_train::train::EOS_ID,
            &mut rng,
        )
        .unwrap() else {
            continue;
        };
        let start = e.tokens[..e.canvas.start]
            .iter()
            .rposition(|&t| t == markers.edit_start)
            .unwrap();
        // The two halves around the cursor, counted apart.
        split_differs |= e.canvas.start - start - 3 != e.draft.len();
        examples.push(json!({"ids": e.tokens, "canvas_start": e.canvas.start}));
        expected.push(canvas_length(e.draft.len()));
    }
    assert!(examples.len() >= 10, "{} examples", examples.len());
    assert!(
        split_differs,
        "some old region is tokenized differently split at its cursor"
    );
    let answer: Value = serde_json::from_str(&run_python(
        "check.py",
        &[
            "edit-plans",
            t.pack.join("tokenizer.json").to_str().unwrap(),
        ],
        Some(&json!({ "examples": examples })),
    ))
    .unwrap();
    let planned: Vec<usize> = answer["planned"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_u64().unwrap() as usize)
        .collect();
    assert_eq!(planned, expected);
}

#[test]
fn the_trainers_fim_layout_is_the_engines() {
    let t = trained();
    let engine = Engine::load(&t.model).unwrap();
    let positions = engine.model().config().max_position_embeddings;
    let mut rng = StdRng::seed_from_u64(7);
    let kinds = [
        SpanKind::LineRest,
        SpanKind::Lines,
        SpanKind::Block,
        SpanKind::Random,
    ];
    let mut cases = Vec::new();
    let mut requests = Vec::new();
    for (i, text) in t.valid_texts.iter().enumerate() {
        for (k, kind) in kinds.iter().enumerate() {
            let Some(span) = choose_span(text, *kind, &mut rng) else {
                continue;
            };
            let middle = &text[span.clone()];
            let middle_tokens = engine.tokenizer().encode(middle).unwrap().len();
            let canvas_len = if (i + k) % 3 == 0 && middle_tokens >= 2 {
                // Planned too short: the middle's first tokens, no EOS.
                middle_tokens.div_ceil(2)
            } else {
                [8, 16, 32, 64][(i + k) % 4].max(middle_tokens + 1)
            };
            if canvas_len > 64 {
                continue;
            }
            cases.push(json!({
                "prefix": &text[..span.start],
                "middle": middle,
                "suffix": &text[span.end..],
                "canvas_len": canvas_len,
                "budget": positions - canvas_len,
            }));
            let mut request = InfillRequest::new(&text[..span.start], &text[span.end..]);
            request.canvas_tokens = canvas_len;
            request.max_tokens = canvas_len;
            request.max_prefix_tokens = usize::MAX;
            request.max_suffix_tokens = usize::MAX;
            requests.push((request, middle.to_string()));
        }
    }
    assert!(cases.len() >= 20, "only {} cuts", cases.len());
    let tokenizer_json = t.model.join("tokenizer.json");
    let answer: Value = serde_json::from_str(&run_python(
        "check.py",
        &["fim-layouts", tokenizer_json.to_str().unwrap()],
        Some(&json!({ "eos_id": engine.settings().eos_token_id, "cases": cases })),
    ))
    .unwrap();
    for (i, (request, middle)) in requests.iter().enumerate() {
        let canvas = engine.canvas(request).unwrap();
        let mut expected = canvas.prefix.clone();
        let mut middle_ids = engine.tokenizer().encode(middle).unwrap();
        middle_ids.resize(canvas.length, engine.settings().eos_token_id);
        expected.extend(middle_ids);
        expected.extend(&canvas.suffix);
        let layout = &answer["layouts"][i];
        let ids: Vec<u32> = layout["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as u32)
            .collect();
        assert_eq!(
            layout["canvas_start"].as_u64().unwrap() as usize,
            canvas.prefix.len(),
            "cut {i}: the canvas starts elsewhere"
        );
        assert_eq!(ids, expected, "cut {i} ({middle:?}): the layouts differ");
    }
}

/// What a GPU run returns: the default preset exported as `scripts/gpu-train` exports it (bf16,
/// the tokenizer left to the pack) fits the 8 files of at most 16 MiB a device call returns,
/// and the engine loads its shards and computes PyTorch's logits from them.
#[test]
fn the_default_export_fits_a_device_call_and_loads_in_the_engine() {
    let t = trained();
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("model");
    let answer: Value = serde_json::from_str(&run_python(
        "check.py",
        &["export-default", model.to_str().unwrap()],
        Some(&json!({"mask_id": 0, "eos_id": 1})),
    ))
    .unwrap();
    let files: Vec<_> = std::fs::read_dir(&model)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(files.len() <= 8, "{} files: {files:?}", files.len());
    let total: u64 = files.iter().map(|f| f.metadata().unwrap().len()).sum();
    for file in &files {
        let len = file.metadata().unwrap().len();
        assert!(
            len <= 15 << 20,
            "{} is {len} bytes, over 15 MiB",
            file.display()
        );
    }
    assert!(
        total <= 60 << 20,
        "the export is {total} bytes, over 60 MiB"
    );
    assert!(answer["parameters"].as_u64().unwrap() > 20_000_000);

    // What scripts/gpu-train-import adds: the pack's tokenizer (here the test pack's, whose ids
    // are a subset of the model's vocabulary).
    std::fs::copy(t.model.join("tokenizer.json"), model.join("tokenizer.json")).unwrap();
    let engine = Engine::load(&model).unwrap();
    assert_eq!(engine.model().config().num_hidden_layers, 6);
    let ids: Vec<u32> = (0..300u32).map(|i| (i * 37 + 11) % 1024).collect();
    let [(worst, _)] = logit_gaps(&engine, &model, &[ids])[..] else {
        unreachable!("one sequence, one gap")
    };
    assert!(
        worst < 2e-3,
        "the engine's logits differ from PyTorch's by up to {worst}"
    );
}

/// A second GPU window continues from the shipped default model, which a device call already
/// carries (`assets/default-model`: one GGUF, no config.json; no room for a second copy beside
/// the pack): PyTorch reads that file (`train/gpu/gguf_read.py`, through `export.load`, which
/// `train.py --resume` calls) as the model the engine runs from it. f32 matrices pin the names
/// and layouts; Q8_0 ones (what ships) differ by the engine's 8-bit activations alone.
#[test]
fn pytorch_resumes_from_the_shipped_gguf() {
    use candle_core::quantized::GgmlDType;
    use candle_core::{DType, Device};
    use redraft_engine::checkpoint::Weights;
    use redraft_engine::engine::load_settings;
    use redraft_engine::gguf::GgufWriter;

    let t = trained();
    let (config, settings) = load_settings(&t.model).unwrap();
    let tensors = Weights::load(&t.model, DType::F32, &Device::Cpu)
        .unwrap()
        .dense_tensors()
        .unwrap();
    let tokenizer = std::fs::read_to_string(t.model.join("tokenizer.json")).unwrap();
    let ids: Vec<u32> = (0..200u32).map(|i| (i * 37 + 11) % 1024).collect();
    for (dtype, tolerance) in [(GgmlDType::F32, 2e-3), (GgmlDType::Q8_0, 0.05)] {
        let dir = tempfile::tempdir().unwrap();
        let shipped = dir.path().join("default-model");
        std::fs::create_dir(&shipped).unwrap();
        GgufWriter::new("dream", &config, &settings, &tokenizer, &tensors, dtype)
            .unwrap()
            .write(&shipped.join("model.gguf"))
            .unwrap();
        for file in ["tokenizer.json", "redraft.json"] {
            std::fs::copy(t.model.join(file), shipped.join(file)).unwrap();
        }
        let engine = Engine::load(&shipped).unwrap();
        assert_eq!(engine.model().is_quantized(), dtype == GgmlDType::Q8_0);
        let [(worst, scale)] = logit_gaps(&engine, &shipped, std::slice::from_ref(&ids))[..] else {
            unreachable!("one sequence, one gap")
        };
        assert!(
            worst <= tolerance * scale.max(1.0),
            "{dtype:?}: PyTorch's logits from the GGUF differ from the engine's by up to {worst} (largest logit {scale})"
        );
    }
}
