//! Typing replay against `redraft lsp`: a few hundred keystrokes of a real Rust file, typed
//! into the running server at a human pace, each followed by an automatic inline completion
//! request (and a `$/cancelRequest` for the previous one if it is still out, as VS Code does).
//! Reports request-to-response latency (p50/p95/p99), how many answers came from the
//! type-through cache and how many requests were cancelled.
//!
//! ```sh
//! cargo bench -p redraft --bench lsp_typing                       # 300 keystrokes, 120 ms apart
//! cargo bench -p redraft --bench lsp_typing -- --keys 500 --interval-ms 80 --file F.rs --effort low
//! cargo bench -p redraft --bench lsp_typing -- --model DIR      # a model not compiled in
//! cargo bench -p redraft --bench lsp_typing -- --pause-ms 400     # and a pause after each word
//! cargo bench -p redraft --bench lsp_typing -- --log F            # what the server did, per keystroke
//! cargo bench -p redraft --bench lsp_typing -- --pause-ms 400 --documents 2   # two files, a line each in turn
//! cargo bench -p redraft --bench lsp_typing -- --menu-too        # and a menu request each keystroke
//! ```
//!
//! `--pause-ms`: after each word typed (a space or a newline) the typist stops that long before
//! going on, as people do between words and lines: the server has time to spare then (its
//! idle refresh of the kept cache).
//!
//! `--documents N`: the file is open N times (N documents of the same text) and the typist
//! types each line into the next document in turn, as someone working across files does: a
//! pause after a line lets the server precompute that document's next edit, and the next line's
//! keystrokes come in another document, which that precompute must not hold up.
//!
//! `--menu-too`: the server offers the completion menu (`completionItems` on) and each
//! keystroke's inline request is followed at once by a menu request at the same place, as a
//! client showing both sends them; the menu's latencies are reported beside, and how many
//! requests took the other's answer instead of running the model.
//!
//! `--log F`: writes one line per keystroke (document version, latency or `cancelled`), then the
//! server's log messages, which name the version each job ran for and the passes it made:
//! where a slow keystroke's time went.
//!
//! Run by `cargo test` (without `--bench`) it replays a dozen keystrokes as a smoke test.

use redraft_tests::lsp_client as client;
use redraft_tests::typing as replay;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use client::{items, Lsp, Start, CANCELLED};
use replay::{percentile, timed, Args};
use serde_json::json;

struct Options {
    file: PathBuf,
    keys: usize,
    interval: Duration,
    effort: String,
    max_tokens: usize,
    /// The editor's `model` setting (default: the embedded model).
    model: Option<String>,
    /// Extra wait after each space or newline typed.
    pause: Duration,
    log: Option<PathBuf>,
    /// Copies of the file open, typed into a line each in turn.
    documents: usize,
    /// A menu request beside each inline one.
    menu_too: bool,
}

/// One open document as the typist left it.
struct Doc {
    uri: String,
    version: i32,
    line: u32,
    column: u32,
}

fn options() -> Options {
    let args = Args::from_env();
    Options {
        file: args
            .value("--file")
            .map_or_else(replay::default_file, PathBuf::from),
        keys: args.number("--keys", 300, 12),
        interval: Duration::from_millis(args.number("--interval-ms", 120, 10)),
        effort: args.value("--effort").unwrap_or_else(|| "medium".into()),
        max_tokens: args.number(
            "--max-tokens",
            redraft_runtime::DEFAULT_MAX_TOKENS,
            redraft_runtime::DEFAULT_MAX_TOKENS,
        ),
        model: args.value("--model"),
        pause: Duration::from_millis(args.number("--pause-ms", 0, 0)),
        log: args.value("--log").map(PathBuf::from),
        documents: args.number("--documents", 1, 1).max(1),
        menu_too: args.flag("--menu-too"),
    }
}

/// Splits `text` into what is there when typing starts (before + after) and the `keys`
/// characters to type, taken from whole lines in the middle of the file's code.
fn session(text: &str, keys: usize) -> (String, String, String) {
    let start_line = text.lines().count() * 2 / 5;
    let start: usize = text.lines().take(start_line).map(|l| l.len() + 1).sum();
    let start = start.min(text.len());
    let typed: String = text[start..].chars().take(keys).collect();
    let end = start + typed.len();
    (text[..start].to_string(), typed, text[end..].to_string())
}

#[tokio::main]
async fn main() {
    let options = options();
    let text = replay::read_source(&options.file);
    let (before, typed, after) = session(&text, options.keys);
    let lsp = Lsp::start(Start {
        options: json!({
            "effort": options.effort,
            "maxTokens": options.max_tokens,
            "logLevel": "debug",
            "model": options.model,
            "completionItems": options.menu_too,
        }),
        encodings: Some(vec!["utf-16"]),
        ..Start::default()
    })
    .await;
    let mut docs: Vec<Doc> = (0..options.documents)
        .map(|n| {
            let uri = match n {
                0 => "file:///replay/src/lib.rs".to_string(),
                n => format!("file:///replay/src/lib{n}.rs"),
            };
            lsp.open(&uri, "rust", &format!("{before}{after}"));
            Doc {
                uri,
                version: 0,
                line: before.matches('\n').count() as u32,
                column: before
                    .rsplit('\n')
                    .next()
                    .unwrap_or("")
                    .encode_utf16()
                    .count() as u32,
            }
        })
        .collect();
    let mut current = 0;

    let started = Instant::now();
    let mut previous: Option<i32> = None;
    let mut previous_menu: Option<i32> = None;
    let mut answers = Vec::new();
    let mut menus = Vec::new();
    let mut keys = Vec::new();
    for ch in typed.chars() {
        let mut buf = [0u16; 2];
        let doc = &mut docs[current];
        doc.version += 1;
        let (line, column) = (doc.line, doc.column);
        lsp.change(
            &doc.uri,
            doc.version,
            [[line, column], [line, column]],
            ch.encode_utf8(&mut [0; 4]),
        );
        if ch == '\n' {
            doc.line += 1;
            doc.column = 0;
        } else {
            doc.column += ch.encode_utf16(&mut buf).len() as u32;
        }
        keys.push(match current {
            0 => format!("v{}", doc.version),
            n => format!("doc{n} v{}", doc.version),
        });
        // Like an editor: the previous request is stale now (harmless if it was answered).
        if let Some(id) = previous {
            lsp.cancel(id);
        }
        let request = lsp.inline(&doc.uri, doc.line, doc.column, false).await;
        previous = Some(request.id);
        answers.push(tokio::spawn(timed(request)));
        if options.menu_too {
            if let Some(id) = previous_menu {
                lsp.cancel(id);
            }
            let menu = lsp.completion(&doc.uri, doc.line, doc.column, false).await;
            previous_menu = Some(menu.id);
            menus.push(tokio::spawn(timed(menu)));
        }
        tokio::time::sleep(options.interval).await;
        if ch == ' ' || ch == '\n' {
            tokio::time::sleep(options.pause).await;
        }
        if ch == '\n' {
            current = (current + 1) % docs.len();
        }
    }
    let mut latencies = Vec::new();
    let mut log = String::new();
    let (mut cancelled, mut empty, mut shown) = (0, 0, 0);
    for (key, answer) in keys.iter().zip(answers) {
        let (latency, answer) = answer.await.unwrap();
        let outcome = match &answer {
            Ok(_) => format!("{latency:.1} ms"),
            Err(_) => "cancelled".to_string(),
        };
        log.push_str(&format!("{key} {outcome}\n"));
        match answer {
            Ok(value) => {
                latencies.push(latency);
                if items(&value).is_empty() {
                    empty += 1;
                } else {
                    shown += 1;
                }
            }
            Err(code) if code == CANCELLED => cancelled += 1,
            Err(code) => panic!("request failed with {code}"),
        }
    }
    let mut menu_latencies = Vec::new();
    let mut menus_cancelled = 0;
    for menu in menus {
        match menu.await.unwrap() {
            (latency, Ok(_)) => menu_latencies.push(latency),
            (_, Err(code)) if code == CANCELLED => menus_cancelled += 1,
            (_, Err(code)) => panic!("menu request failed with {code}"),
        }
    }
    let wall = started.elapsed();
    // Let the last log lines arrive.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let logs = lsp.received("window/logMessage");
    let logged = |what: &str| {
        logs.iter()
            .filter(|p| p["message"].as_str().unwrap_or("").contains(what))
            .count()
    };
    let from_cache = logged("type-through cache");
    let shared = logged("answered from the job of a request at the same place");
    let (precomputed, ready) = (
        logged("next edit precomputed"),
        logged("precomputed next edit ready"),
    );
    if let Some(path) = &options.log {
        for message in &logs {
            log.push_str(message["message"].as_str().unwrap_or(""));
            log.push('\n');
        }
        std::fs::write(path, log).expect("the log is written");
    }
    latencies.sort_by(f64::total_cmp);
    menu_latencies.sort_by(f64::total_cmp);
    let precomputes = format!("next edits precomputed {precomputed}, of them ready {ready}");
    let requests = typed.chars().count();
    println!(
        "lsp typing replay: {} keystrokes of {} into {} document(s) ({} ms apart, {} ms more after a word, effort {}, max {} tokens) in {:.1} s",
        requests,
        options.file.display(),
        docs.len(),
        options.interval.as_millis(),
        options.pause.as_millis(),
        options.effort,
        options.max_tokens,
        wall.as_secs_f64()
    );
    println!(
        "  answered {} (suggestion shown {}, empty {}), cancelled {}, from the type-through cache {}; {precomputes}",
        latencies.len(),
        shown,
        empty,
        cancelled,
        from_cache
    );
    println!(
        "  request-to-response latency of answered requests: p50 {:.1} ms, p95 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        percentile(&latencies, 50.0),
        percentile(&latencies, 95.0),
        percentile(&latencies, 99.0),
        latencies.last().copied().unwrap_or(f64::NAN)
    );
    if options.menu_too {
        println!(
            "  menu requests: answered {}, cancelled {menus_cancelled}; p50 {:.1} ms, p95 {:.1} ms, p99 {:.1} ms; requests answered with the other kind's job {shared}",
            menu_latencies.len(),
            percentile(&menu_latencies, 50.0),
            percentile(&menu_latencies, 95.0),
            percentile(&menu_latencies, 99.0),
        );
        assert_eq!(
            menu_latencies.len() + menus_cancelled,
            requests,
            "every menu request was answered"
        );
    }
    assert_eq!(
        latencies.len() + cancelled,
        requests,
        "every request was answered"
    );
    lsp.shutdown().await;
}
