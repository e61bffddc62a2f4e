//! Load on `redraft serve`: a bounded, self-stopping load generator on loopback. Each client
//! sends Zed's OpenAI-compatible FIM request (Qwen template, Zed's stop list, `max_tokens`
//! 256) with a real FIM cut as the prompt, waits for the answer, and sends the next one 300 ms
//! after the last (Zed's throttle), for a fixed time per setting. Settings: 1, 4 and 16
//! clients with batching (`--max-batch 8`), 16 clients with batching off (`--max-batch 1`),
//! and 48 clients both ways (past what one-at-a-time serving keeps up with here), each on a
//! fresh server. Reports throughput, latency p50/p95/p99, mean canvases per model
//! call (batch size) and canvas tokens per model call, from the server's `/metrics`.
//!
//! ```sh
//! cargo bench -p redraft --bench serve_load                   # 25 s per setting, writes docs/reports/default-model/serve.md
//! cargo bench -p redraft --bench serve_load -- --seconds 10 --tasks T.jsonl.gz --out FILE
//! cargo bench -p redraft --bench serve_load -- --typing --serve-args "--model M.gguf" --out FILE
//! ```
//!
//! `--warmup S`: S seconds of load before the measured ones, not counted (a cold server's first
//! prompts arrive all at once; on a large model they take longer than a short run).
//!
//! `--trace FILE`: appends a JSON line per counted request (setting, client, when it was sent,
//! latency, status, whether it started a cut, the server's token counts), to see which
//! requests make the tail.
//!
//! `--typing`: each client types through its cuts' middles a few characters a request (an
//! editor's throttled keystrokes), so a client's requests share their context and the server's
//! kept caches realign across them, instead of every request bringing a new file.
//!
//! Prompts: the eval's Rust single-line cuts (`target/benchmarks/RustSingleLine.jsonl.gz`,
//! built by `redraft tasks humanevalpack-rust --sets single-line`) when present, else
//! single-line cuts made here from HumanEvalPack-Rust's solutions
//! (`benchmarks/humanevalpack-rust`).
//! Run by `cargo test` (without `--bench`) it is a two-second smoke run that writes nothing.

use redraft_tests::serve_client as client;

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use client::{Server, Start};
use serde_json::json;

/// Zed's throttle between two requests of one editor.
const INTERVAL: Duration = Duration::from_millis(300);

struct Options {
    bench: bool,
    seconds: u64,
    /// Seconds of load before the measured `seconds`: requests sent in them are not counted,
    /// nor are their model calls (a cold server's first prompts, all at once).
    warmup: u64,
    tasks: Option<PathBuf>,
    out: Option<PathBuf>,
    /// `CLIENTSxMAX_BATCH` settings instead of the default ones (`--settings 16x8,16x1`).
    settings: Option<Vec<Setting>>,
    /// Extra `redraft serve` flags for every server (`--serve-args "--join-wait-ms 20"`).
    serve_args: Vec<String>,
    /// Each client types through its cuts' middles, [`TYPED`] characters a request, as an
    /// editor sends a request per (throttled) keystroke, instead of a new cut each request.
    typing: bool,
    /// Writes a JSON line per counted request (`--trace FILE`): its client, when it was sent,
    /// its latency, whether it started a cut, and the token counts the server reported.
    trace: Option<PathBuf>,
}

/// Characters a typing client adds between two requests (about 300 ms of typing).
const TYPED: usize = 4;

fn options() -> Options {
    let args: Vec<String> = std::env::args().collect();
    let bench = args.iter().any(|a| a == "--bench");
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    Options {
        bench,
        seconds: value("--seconds")
            .and_then(|v| v.parse().ok())
            .unwrap_or(if bench { 25 } else { 2 }),
        warmup: value("--warmup").and_then(|v| v.parse().ok()).unwrap_or(0),
        tasks: value("--tasks").map(PathBuf::from),
        settings: value("--settings").map(|v| {
            v.split(',')
                .map(|s| {
                    let (clients, max_batch) = s.split_once('x').expect("CLIENTSxMAX_BATCH");
                    Setting {
                        clients: clients.parse().unwrap(),
                        max_batch: max_batch.parse().unwrap(),
                    }
                })
                .collect()
        }),
        serve_args: value("--serve-args")
            .map(|v| v.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default(),
        typing: args.iter().any(|a| a == "--typing"),
        trace: value("--trace").map(PathBuf::from),
        out: value("--out")
            .map(PathBuf::from)
            .or_else(|| bench.then(|| repo().join("docs/reports/default-model/serve.md"))),
    }
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A real FIM cut: the code before, the middle that was cut out, the code after.
type Cut = (String, String, String);

/// Real FIM cuts.
fn cuts(options: &Options) -> (Vec<Cut>, String) {
    let built = repo().join("target/benchmarks/RustSingleLine.jsonl.gz");
    let file = options
        .tasks
        .clone()
        .or_else(|| built.is_file().then_some(built));
    if let Some(file) = file {
        let tasks = redraft_eval::task::read_tasks(&file)
            .unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
        let cuts = tasks
            .into_iter()
            .map(|t| (t.prompt, t.canonical_solution, t.suffix))
            .collect();
        return (cuts, format!("`{}`", shown(&file)));
    }
    let file = repo().join("benchmarks/humanevalpack-rust/humanevalpack.jsonl");
    let text = std::fs::read_to_string(&file)
        .unwrap_or_else(|e| panic!("no FIM tasks: {} ({e}); pass --tasks", file.display()));
    let mut cuts = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let row: serde_json::Value = serde_json::from_str(line).unwrap();
        let program = format!(
            "{}{}",
            row["prompt"].as_str().unwrap(),
            row["canonical_solution"].as_str().unwrap()
        );
        let body_start = row["prompt"].as_str().unwrap().len();
        // Every third non-blank line of the solution, cut after its indentation.
        let mut at = body_start;
        for (i, line) in program[body_start..].split_inclusive('\n').enumerate() {
            let indent = line.len() - line.trim_start().len();
            if i % 3 == 1 && !line.trim().is_empty() {
                let cut = at + indent;
                let end = at + line.trim_end_matches('\n').len();
                cuts.push((
                    program[..cut].to_string(),
                    program[cut..end].to_string(),
                    program[end..].to_string(),
                ));
            }
            at += line.len();
        }
    }
    (cuts, format!("single-line cuts of `{}`", shown(&file)))
}

/// A path as the report shows it: relative to the repository when it is inside it.
fn shown(file: &Path) -> String {
    file.strip_prefix(repo())
        .map_or_else(|_| file.display().to_string(), |p| p.display().to_string())
}

struct Setting {
    clients: usize,
    max_batch: usize,
}

#[derive(Default)]
struct Outcome {
    latencies_ms: Vec<f64>,
    errors: usize,
    elapsed: Duration,
    mean_batch: f64,
    tokens_per_forward: f64,
    full_share: f64,
    /// The `--trace` lines of the counted requests.
    trace: Vec<serde_json::Value>,
}

fn run(setting: &Setting, cuts: &Arc<Vec<Cut>>, options: &Options) -> Outcome {
    let seconds = options.seconds;
    let batch = setting.max_batch.to_string();
    let mut args = vec!["--max-batch", &batch, "--max-queue", "256"];
    args.extend(options.serve_args.iter().map(String::as_str));
    let server = Arc::new(Server::start_with(Start {
        args: &args,
        ..Start::default()
    }));
    let stop = Arc::new(AtomicBool::new(false));
    // A JSON line per counted request (the `--trace` lines): latencies and errors come from them.
    let lines = Arc::new(Mutex::new(Vec::new()));
    let started = Instant::now();
    let warmup = Duration::from_secs(options.warmup);
    let threads: Vec<_> = (0..setting.clients)
        .map(|client| {
            let (server, stop, lines, cuts) = (
                Arc::clone(&server),
                Arc::clone(&stop),
                Arc::clone(&lines),
                Arc::clone(cuts),
            );
            let (clients, typing) = (setting.clients, options.typing);
            std::thread::spawn(move || {
                // Each client its own walk through the cuts, so clients do not send the same
                // prompt at once; a small stagger, as editors do not start in step.
                std::thread::sleep(INTERVAL * client as u32 / clients as u32);
                let mut next = client * cuts.len() / clients;
                // Characters of the current cut's middle typed so far (typing clients).
                let mut typed = 0;
                while !stop.load(Ordering::Relaxed) {
                    let (before, middle, suffix) = &cuts[next % cuts.len()];
                    let first_of_cut = typed == 0;
                    let prefix = if typing {
                        let at = middle.floor_char_boundary(typed.min(middle.len()));
                        typed += TYPED;
                        if typed >= middle.len() {
                            (next, typed) = (next + 1, 0);
                        }
                        format!("{before}{}", &middle[..at])
                    } else {
                        next += 1;
                        before.clone()
                    };
                    let body = json!({
                        "model": "qwen2.5-coder:redraft",
                        "prompt": format!("<|fim_prefix|>{prefix}<|fim_suffix|>{suffix}<|fim_middle|>"),
                        "max_tokens": 256,
                        "stop": ["<|endoftext|>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>"],
                    });
                    let sent = Instant::now();
                    // The test client panics on a broken connection or past its read timeout
                    // (120 s): an error of this request, not the end of the run.
                    let response = std::panic::catch_unwind(AssertUnwindSafe(|| {
                        server.post("/v1/completions", &body)
                    }));
                    let took = sent.elapsed();
                    // Requests sent during the warm-up are not counted.
                    if sent >= started + warmup {
                        let status = response.as_ref().map_or(0, |r| r.status);
                        let usage = response
                            .ok()
                            .filter(|r| r.status == 200)
                            .map(|r| r.json()["usage"].clone());
                        lines.lock().unwrap().push(json!({
                            "client": client,
                            "sent_s": (sent - started - warmup).as_secs_f64(),
                            "ms": took.as_secs_f64() * 1e3,
                            "status": status,
                            "first_of_cut": first_of_cut,
                            "prompt_chars": prefix.len() + suffix.len(),
                            "usage": usage,
                        }));
                    }
                    if let Some(rest) = INTERVAL.checked_sub(took) {
                        std::thread::sleep(rest);
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(warmup);
    let at_warmup = Counters::read(&server);
    std::thread::sleep(Duration::from_secs(seconds));
    stop.store(true, Ordering::Relaxed);
    for thread in threads {
        thread.join().unwrap();
    }
    let elapsed = started.elapsed() - warmup;
    let counted = Counters::read(&server).since(&at_warmup);
    let mean_batch = counted.batch_sum / counted.batch_count.max(1.0);
    let tokens_per_forward = counted.canvas_tokens / counted.forwards.max(1.0);
    let full_share = counted.full / (counted.full + counted.window).max(1.0);
    eprintln!(
        "passes: full {}, window {}, realign {}; model calls {}; canvas tokens {}",
        counted.full, counted.window, counted.realign, counted.forwards, counted.canvas_tokens,
    );
    let trace = std::mem::take(&mut *lines.lock().unwrap());
    let answered = |line: &&serde_json::Value| line["status"] == 200;
    let mut latencies_ms: Vec<f64> = (trace.iter().filter(answered))
        .map(|line| line["ms"].as_f64().expect("a latency"))
        .collect();
    latencies_ms.sort_by(f64::total_cmp);
    Outcome {
        errors: trace.len() - latencies_ms.len(),
        latencies_ms,
        elapsed,
        mean_batch,
        tokens_per_forward,
        full_share,
        trace,
    }
}

/// The server's counters a report reads (`/metrics`), at one moment.
struct Counters {
    batch_sum: f64,
    batch_count: f64,
    canvas_tokens: f64,
    forwards: f64,
    full: f64,
    window: f64,
    realign: f64,
}

impl Counters {
    fn read(server: &Server) -> Counters {
        let passes =
            |pass: &str| server.metric(&format!("redraft_passes_total{{pass=\"{pass}\"}}"));
        Counters {
            batch_sum: server.metric("redraft_batch_size_sum"),
            batch_count: server.metric("redraft_batch_size_count"),
            canvas_tokens: server.metric("redraft_canvas_tokens_total"),
            forwards: server.metric("redraft_forwards_total"),
            full: passes("full"),
            window: passes("window"),
            realign: passes("realign"),
        }
    }

    /// What was counted after `earlier`.
    fn since(&self, earlier: &Counters) -> Counters {
        Counters {
            batch_sum: self.batch_sum - earlier.batch_sum,
            batch_count: self.batch_count - earlier.batch_count,
            canvas_tokens: self.canvas_tokens - earlier.canvas_tokens,
            forwards: self.forwards - earlier.forwards,
            full: self.full - earlier.full,
            window: self.window - earlier.window,
            realign: self.realign - earlier.realign,
        }
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn main() {
    let mut options = options();
    let (cuts, source) = cuts(&options);
    let cuts = Arc::new(cuts);
    let settings: Vec<Setting> = if let Some(settings) = options.settings.take() {
        settings
    } else if options.bench {
        vec![
            Setting {
                clients: 1,
                max_batch: 8,
            },
            Setting {
                clients: 4,
                max_batch: 8,
            },
            Setting {
                clients: 16,
                max_batch: 8,
            },
            Setting {
                clients: 16,
                max_batch: 1,
            },
            // Past what one-at-a-time serving keeps up with on the development machine.
            Setting {
                clients: 48,
                max_batch: 8,
            },
            Setting {
                clients: 48,
                max_batch: 1,
            },
        ]
    } else {
        vec![Setting {
            clients: 2,
            max_batch: 8,
        }]
    };
    let mut rows = Vec::new();
    let mut results = Vec::new();
    for setting in &settings {
        let outcome = run(setting, &cuts, &options);
        if let Some(path) = &options.trace {
            let mut lines = String::new();
            for mut line in outcome.trace.iter().cloned() {
                line["setting"] = json!(format!("{}x{}", setting.clients, setting.max_batch));
                lines += &format!("{line}\n");
            }
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .expect("opening the --trace file");
            std::io::Write::write_all(&mut file, lines.as_bytes()).expect("writing the trace");
        }
        let n = outcome.latencies_ms.len();
        let throughput = n as f64 / outcome.elapsed.as_secs_f64();
        let row = format!(
            "| {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.2} | {:.2} | {:.0}% | {} |",
            setting.clients,
            if setting.max_batch > 1 {
                format!("{} (batched)", setting.max_batch)
            } else {
                "1 (off)".to_string()
            },
            n,
            throughput,
            percentile(&outcome.latencies_ms, 50.0),
            percentile(&outcome.latencies_ms, 95.0),
            percentile(&outcome.latencies_ms, 99.0),
            outcome.mean_batch,
            outcome.tokens_per_forward,
            outcome.full_share * 100.0,
            outcome.errors,
        );
        eprintln!("{row}");
        rows.push(row);
        results.push((throughput, percentile(&outcome.latencies_ms, 95.0)));
    }
    let header = "| clients | max batch | requests | throughput (req/s) | p50 ms | p95 ms | p99 ms | mean batch | tokens/forward | full passes | errors |\n|---|---|---|---|---|---|---|---|---|---|---|";
    let mut report = format!("{header}\n{}\n", rows.join("\n"));
    let at = |batched: bool| {
        settings
            .iter()
            .position(|s| s.clients == 16 && (s.max_batch > 1) == batched)
    };
    if let (Some(b), Some(u), true) = (at(true), at(false), options.bench) {
        let (batched, unbatched) = (results[b], results[u]);
        let speedup = batched.0 / unbatched.0;
        let p95 = batched.1 / unbatched.1;
        report.push_str(&format!(
            "\n16 clients, batched vs batching off: throughput x{speedup:.2}, p95 x{p95:.2} (goal: >= 1.5x throughput and <= 0.6x p95: {}).\n",
            if speedup >= 1.5 && p95 <= 0.6 { "met" } else { "not met" }
        ));
    }
    println!("{report}");
    if let Some(out) = &options.out {
        let nproc = std::thread::available_parallelism().map_or(0, |n| n.get());
        // The machine is shared: what else was running shows in the load average.
        let load = std::fs::read_to_string("/proc/loadavg")
            .ok()
            .and_then(|l| l.split_whitespace().next().map(str::to_string))
            .unwrap_or_else(|| "unknown".into());
        let flags: Vec<String> = std::env::args()
            .skip(1)
            .filter(|a| a != "--bench")
            .map(|a| {
                if a.contains(char::is_whitespace) {
                    format!("\"{a}\"")
                } else {
                    a
                }
            })
            .collect();
        let command = format!(
            "cargo bench -p redraft --bench serve_load{}",
            if flags.is_empty() {
                String::new()
            } else {
                format!(" -- {}", flags.join(" "))
            }
        );
        let model = if options.serve_args.iter().any(|a| a == "--model") {
            "the model `--serve-args` names"
        } else {
            "embedded default model"
        };
        let prompts = if options.typing {
            format!(
                "each client typing through the middles of cuts from {source} ({} cuts), {TYPED} characters a request \
                 (its prompt is the cut's prefix and what it has typed of the middle)",
                cuts.len()
            )
        } else {
            format!("with prompts from {source} ({} cuts)", cuts.len())
        };
        let text = format!(
            "# `redraft serve` under load\n\nMeasured by `{command}` (release build, {model}, effort medium, \
             default context cache), {} s per setting{}, each on a fresh server, on {nproc} cores (1-minute load average {load} when it ended); \
             clients send Zed's OpenAI-compatible FIM request (Qwen template, `max_tokens` 256, Zed's stop list) \
             {prompts}, one request at a time each, the next 300 ms after the last one was sent \
             (or at once when the answer took longer). Latency is request to full response at the client. \
             Mean batch is canvases per model call, tokens/forward canvas slots filled per model call (both from `/metrics`).\n\n{report}",
            options.seconds,
            if options.warmup > 0 {
                format!(
                    " after {} s of warm-up (requests sent in it are not counted, nor its model calls)",
                    options.warmup
                )
            } else {
                String::new()
            },
        );
        std::fs::write(out, text).unwrap_or_else(|e| panic!("writing {}: {e}", out.display()));
        eprintln!("written to {}", out.display());
    }
}
