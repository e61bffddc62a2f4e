//! Next-edit typing replay against `redraft lsp`: refactorings carried through a real Rust file
//! site by site (renames, a parameter added then each call updated, `.unwrap()` made `?`: see
//! `recording.rs`), typed into the running server at a human pace with a pause between
//! sites, while the client asks for next edits as the editor plugins do: after an edit pause
//! of `nextEdit.debounceMs` (the server precomputes after the same pause), each keystroke
//! cancelling the request still out with `$/cancelRequest`.
//!
//! Reports next-edit latency (p50/p95/p99 of answered requests), requests sent, answered,
//! cancelled and stale (answered after the document moved on, so never shown), suggestions
//! shown, and how they score against what the user typed next, overall and per edit kind:
//! - accepted: the suggested edit, applied to the document it was asked for, gives exactly the
//!   document after the user's next edit group (the rest of the site being typed, or the next
//!   site once one is done);
//! - partially right: not that, but the lines the next edit group changes read as after it (a
//!   line diff of the two documents leaves them matched): the next site done right, with other
//!   changes the user did not make (a later site done ahead of time is one);
//! - at the next site: the suggestion changes a line the next edit group changes.
//!
//! A request is counted under the refactoring its next edit group belongs to; one whose next
//! group starts another refactoring (or comes after the last) cannot be foreseen from the
//! edits so far and is counted apart ("a new refactoring next"). The replay always types the
//! recording: a suggestion that would be accepted is counted, not applied, so runs of
//! different models or settings type the same keystrokes.
//!
//! ```sh
//! cargo bench -p redraft --bench next_edit_typing                 # 4 refactorings of each kind
//! cargo bench -p redraft --bench next_edit_typing -- --max-change none --effort low --file F.rs
//! cargo bench -p redraft --bench next_edit_typing -- --print-recording   # the recording only
//! ```
//!
//! Flags: `--file F.rs`, `--per-kind N` (refactorings of each kind), `--max-sites N` (sites of
//! one), `--interval-ms MS` (mean gap between keys; each gap is 50-150% of it), `--hesitate P`
//! (share of gaps within a site that are a pause past the debounce: a request goes out and the
//! next key may cancel it), `--pause-ms MS` (between sites), `--debounce-ms MS`, `--effort E`,
//! `--max-change F|none` (the server's `nextEdit.maxChange`; `none` is no guard), `--seed N`,
//! `--model PATH` (the server's `model`: a model directory or GGUF file; default the shipped one).
//!
//! The file is candle-core's `src/safetensors.rs` (at the version `Cargo.lock` pins) unless
//! `--file` says otherwise; the server runs the shipped model with `nextEdit.maxChange` at its
//! default (0.5) unless `--max-change` says otherwise.
//!
//! Run by `cargo test` (without `--bench`) it replays one short refactoring of each kind, fast
//! and without the guard, as a smoke test: answers arrive and the counts add up.

use redraft_tests::lsp_client as client;
mod recording;
use redraft_tests::typing as replay;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use client::{DidShowInlineEdit, Lsp, Start, CANCELLED};
use recording::{Kind, Limits, Recording};
use replay::{percentile, position, timed, Args, Rng};
use serde_json::{json, Value};

struct Options {
    file: PathBuf,
    limits: Limits,
    interval: Duration,
    hesitate: f64,
    pause: Duration,
    debounce: Duration,
    effort: String,
    /// The server's `model`; `None`: the shipped one.
    model: Option<String>,
    /// `nextEdit.maxChange`; `None`: no guard (`null`).
    max_change: Option<f64>,
    seed: u64,
    print_recording: bool,
    /// Print each shown suggestion next to the user's next edit.
    verbose: bool,
    bench: bool,
}

fn options() -> Options {
    let args = Args::from_env();
    // The smoke run has no guard, so that suggestions are shown and scored.
    let max_change = match args.value("--max-change").as_deref() {
        None if args.bench => Some(0.5),
        None => None,
        Some("none" | "null") => None,
        Some(v) => Some(
            v.parse()
                .unwrap_or_else(|_| panic!("--max-change {v}: expected a share or none")),
        ),
    };
    Options {
        file: args
            .value("--file")
            .map_or_else(default_file, PathBuf::from),
        limits: Limits {
            per_kind: args.number("--per-kind", 4, 1),
            max_sites: args.number("--max-sites", 6, 3),
        },
        interval: Duration::from_millis(args.number("--interval-ms", 120, 5)),
        hesitate: args.number("--hesitate", 0.05, 0.3),
        pause: Duration::from_millis(args.number("--pause-ms", 1500, 120)),
        debounce: Duration::from_millis(args.number("--debounce-ms", 300, 40)),
        effort: args.value("--effort").unwrap_or_else(|| {
            if args.bench {
                "medium".into()
            } else {
                "low".into()
            }
        }),
        max_change,
        model: args.value("--model"),
        seed: args.number("--seed", 1, 1),
        print_recording: args.flag("--print-recording"),
        verbose: args.flag("--verbose"),
        bench: args.bench,
    }
}

/// candle-core's `safetensors.rs` (candle-core is a dependency: its source is in the registry
/// whenever this builds), which has refactorings of every kind; else a file of this repository
/// that has them too.
fn default_file() -> PathBuf {
    replay::locked_source("candle-core", "src/safetensors.rs")
        .unwrap_or_else(|| replay::repo_file("engine/src/engine.rs"))
}

/// The workspace folder the replayed file sits in (the history names it `src/<file>`).
const ROOT: &str = "file:///replay";

/// Which row of the report a request counts in: the kind of the refactoring its next edit
/// group belongs to, or `None` when that group starts another refactoring (or there is none).
type Row = Option<Kind>;

/// A request as sent: the document then and the document after the user's next
/// edit group (`None` after the recording's last).
struct Asked {
    row: Row,
    document: String,
    target: Option<String>,
}

enum Outcome {
    Cancelled,
    /// Answered after the document moved on: a plugin drops it.
    Stale,
    NoEdit,
    Shown(Value),
}

/// How a shown suggestion compares with the user's next edit group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Score {
    Accepted,
    PartlyRight,
    AtSite,
    Elsewhere,
}

#[derive(Default, Clone)]
struct Tally {
    sent: usize,
    cancelled: usize,
    stale: usize,
    no_edit: usize,
    shown: usize,
    at_site: usize,
    partly_right: usize,
    accepted: usize,
    latencies: Vec<f64>,
}

impl Tally {
    fn answered(&self) -> usize {
        self.stale + self.no_edit + self.shown
    }

    fn add(&mut self, latency: f64, outcome: &Outcome, score: Option<Score>) {
        self.sent += 1;
        match outcome {
            Outcome::Cancelled => self.cancelled += 1,
            Outcome::Stale => self.stale += 1,
            Outcome::NoEdit => self.no_edit += 1,
            Outcome::Shown(_) => self.shown += 1,
        }
        if !matches!(outcome, Outcome::Cancelled) {
            self.latencies.push(latency);
        }
        match score {
            Some(Score::Accepted) => self.accepted += 1,
            Some(Score::PartlyRight) => self.partly_right += 1,
            Some(Score::AtSite) => self.at_site += 1,
            Some(Score::Elsewhere) | None => {}
        }
    }

    fn row(&self, name: &str) -> String {
        let mut sorted = self.latencies.clone();
        sorted.sort_by(f64::total_cmp);
        let ms = |p: f64| {
            let v = percentile(&sorted, p);
            if v.is_nan() {
                "-".to_string()
            } else {
                format!("{v:.1}")
            }
        };
        // "at the next site" counts every suggestion there, the right ones included.
        format!(
            "| {name} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            self.sent,
            self.answered(),
            self.cancelled,
            self.stale,
            self.shown,
            self.at_site + self.partly_right + self.accepted,
            self.partly_right,
            self.accepted,
            ms(50.0),
            ms(95.0),
            ms(99.0),
        )
    }
}

#[tokio::main]
async fn main() {
    let options = options();
    let source = replay::read_source(&options.file);
    let recording = Recording::from_source(&source, &options.limits);
    let kinds = |kind: Kind| {
        recording
            .refactorings
            .iter()
            .filter(|r| r.kind == kind)
            .count()
    };
    if options.print_recording {
        print_recording(&recording);
        return;
    }
    if !options.bench {
        check_judge();
        for kind in Kind::ALL {
            assert!(
                kinds(kind) > 0,
                "the smoke file has a {} refactoring",
                kind.name()
            );
        }
    }
    let after = recording.after_groups();
    let groups = after.len();
    let keystrokes: usize = recording
        .refactorings
        .iter()
        .flat_map(|r| &r.groups)
        .map(Vec::len)
        .sum();

    let max_change = options.max_change.map_or(Value::Null, |m| json!(m));
    let mut init = json!({
        "effort": options.effort,
        "logLevel": "debug",
        "nextEdit": {"debounceMs": options.debounce.as_millis() as u64, "maxChange": max_change},
    });
    if let Some(model) = &options.model {
        init["model"] = json!(model);
    }
    let lsp = Arc::new(
        Lsp::start(Start {
            options: init,
            encodings: Some(vec!["utf-16"]),
            root: Some(ROOT),
            ..Start::default()
        })
        .await,
    );
    let name = options
        .file
        .file_name()
        .map_or("lib.rs".into(), |n| n.to_string_lossy().into_owned());
    let uri = format!("{ROOT}/src/{name}");
    lsp.open(&uri, "rust", &recording.start);

    let mut text = recording.start.clone();
    let current = Arc::new(AtomicI32::new(0));
    let mut rng = Rng::new(options.seed);
    let mut asked: Vec<Asked> = Vec::new();
    let mut answers = Vec::new();
    let mut out: Option<(i32, Arc<AtomicBool>)> = None;
    let mut cancels_sent = 0;
    let mut group = 0;
    let started = Instant::now();
    for (r, refactoring) in recording.refactorings.iter().enumerate() {
        for keys in &refactoring.groups {
            for (k, key) in keys.iter().enumerate() {
                let range = [
                    position(&text, key.at),
                    position(&text, key.at + key.delete),
                ];
                key.apply(&mut text);
                let version = current.load(Ordering::SeqCst) + 1;
                lsp.change(&uri, version, range, &key.insert);
                current.store(version, Ordering::SeqCst);
                // The plugins cancel the request still out at a change.
                if let Some((id, answered)) = out.take() {
                    if !answered.load(Ordering::SeqCst) {
                        lsp.cancel(id);
                        cancels_sent += 1;
                    }
                }
                let last = k + 1 == keys.len();
                let gap = if last {
                    options.pause
                } else if rng.unit() < options.hesitate {
                    options.debounce + options.interval.mul_f64(2.0 * rng.unit())
                } else {
                    options.interval.mul_f64(0.5 + rng.unit())
                };
                if gap < options.debounce {
                    tokio::time::sleep(gap).await;
                    continue;
                }
                tokio::time::sleep(options.debounce).await;
                // The next edit group: the rest of this one, or the next one.
                let next = if last { group + 1 } else { group };
                let row = after
                    .get(next)
                    .filter(|(of, _)| *of == r)
                    .map(|_| refactoring.kind);
                asked.push(Asked {
                    row,
                    document: text.clone(),
                    target: after.get(next).map(|(_, t)| t.clone()),
                });
                let [line, character] = position(&text, key.cursor());
                let request = lsp.next_edit(&uri, version, line, character).await;
                let answered = Arc::new(AtomicBool::new(false));
                out = Some((request.id, answered.clone()));
                answers.push(tokio::spawn(answer(
                    lsp.clone(),
                    request,
                    version,
                    current.clone(),
                    answered,
                )));
                tokio::time::sleep(gap - options.debounce).await;
            }
            group += 1;
        }
    }
    let mut rows: Vec<(Row, Tally)> = Kind::ALL
        .iter()
        .map(|k| (Some(*k), Tally::default()))
        .chain([(None, Tally::default())])
        .collect();
    let mut all = Tally::default();
    for (asked, answer) in asked.iter().zip(answers) {
        let (latency, outcome) = answer.await.expect("the answer task runs");
        let score = match &outcome {
            Outcome::Shown(edit) => Some(score(asked, edit)),
            _ => None,
        };
        if let (true, Outcome::Shown(edit), Some(score)) = (options.verbose, &outcome, score) {
            print_suggestion(asked, edit, score);
        }
        all.add(latency, &outcome, score);
        let row = rows
            .iter_mut()
            .find(|(row, _)| *row == asked.row)
            .expect("every row is listed");
        row.1.add(latency, &outcome, score);
    }
    let wall = started.elapsed();
    // Let the last log lines arrive.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let logs = lsp.received("window/logMessage");
    let joined = logs
        .iter()
        .filter(|p| {
            p["message"]
                .as_str()
                .unwrap_or("")
                .contains("the request joins the")
        })
        .count();

    println!(
        "next-edit typing replay: {} of {} ({} rename, {} signature, {} unwrap refactorings; {groups} edit groups, {keystrokes} keystrokes) in {:.1} s",
        name,
        options.file.display(),
        kinds(Kind::Rename),
        kinds(Kind::Signature),
        kinds(Kind::Unwrap),
        wall.as_secs_f64()
    );
    println!(
        "  keys {} ms apart on average (50-150%, {:.0}% of gaps a hesitation past the debounce), {} ms between sites, debounce {} ms, effort {}, maxChange {}, model {}",
        options.interval.as_millis(),
        options.hesitate * 100.0,
        options.pause.as_millis(),
        options.debounce.as_millis(),
        options.effort,
        options.max_change.map_or("none".into(), |m| m.to_string()),
        options.model.as_deref().unwrap_or("shipped"),
    );
    println!(
        "  requests {}: answered {} (shown {}, no edit {}, stale {}), cancelled {} ($/cancelRequest sent {}), joined a precomputed job {}",
        all.sent,
        all.answered(),
        all.shown,
        all.no_edit,
        all.stale,
        all.cancelled,
        cancels_sent,
        joined
    );
    let mut sorted = all.latencies.clone();
    sorted.sort_by(f64::total_cmp);
    println!(
        "  next-edit latency of answered requests: p50 {:.1} ms, p95 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        percentile(&sorted, 50.0),
        percentile(&sorted, 95.0),
        percentile(&sorted, 99.0),
        sorted.last().copied().unwrap_or(f64::NAN)
    );
    println!(
        "  shown {}: accepted {}, partially right {}, at the next site (any) {}",
        all.shown,
        all.accepted,
        all.partly_right,
        all.at_site + all.partly_right + all.accepted
    );
    println!();
    println!("| requests for | sent | answered | cancelled | stale | shown | at the next site | partially right | accepted | p50 ms | p95 ms | p99 ms |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (row, tally) in &rows {
        println!(
            "{}",
            tally.row(row.map_or("a new refactoring next", Kind::name))
        );
    }
    println!("{}", all.row("all"));

    // The protocol held: every request was answered or cancelled, the tallies agree.
    assert_eq!(all.sent, asked.len());
    assert!(
        all.sent >= groups,
        "a request after every site ({} of {groups})",
        all.sent
    );
    assert_eq!(all.sent, all.answered() + all.cancelled);
    assert!(all.answered() > 0, "some request was answered");
    let sum = |f: fn(&Tally) -> usize| rows.iter().map(|(_, t)| f(t)).sum::<usize>();
    assert_eq!(sum(|t| t.sent), all.sent);
    assert_eq!(sum(|t| t.shown), all.shown);
    assert_eq!(sum(|t| t.accepted), all.accepted);
    assert!(all.accepted + all.partly_right + all.at_site <= all.shown);
    let lsp = Arc::try_unwrap(lsp).unwrap_or_else(|_| panic!("the answer tasks are done"));
    lsp.shutdown().await;
}

/// Awaits one request's answer, as a plugin takes it when it comes: a cancel, stale (the
/// document moved past `version`), no edit, or shown (`didShowInlineEdit` sent).
async fn answer(
    lsp: Arc<Lsp>,
    request: client::Pending,
    version: i32,
    current: Arc<AtomicI32>,
    answered: Arc<AtomicBool>,
) -> (f64, Outcome) {
    let (latency, answer) = timed(request).await;
    answered.store(true, Ordering::SeqCst);
    let outcome = match answer {
        Err(code) if code == CANCELLED => Outcome::Cancelled,
        Err(code) => panic!("a next-edit request failed with {code}"),
        Ok(value) => {
            let edits = value["edits"]
                .as_array()
                .unwrap_or_else(|| panic!("not a copilotInlineEdit answer: {value}"));
            if current.load(Ordering::SeqCst) != version {
                Outcome::Stale
            } else if let Some(edit) = edits.first() {
                assert_eq!(edit["textDocument"]["version"], json!(version), "{edit}");
                lsp.notify::<DidShowInlineEdit>(json!({"item": {"command": edit["command"]}}));
                Outcome::Shown(edit.clone())
            } else {
                Outcome::NoEdit
            }
        }
    };
    (latency, outcome)
}

/// A shown suggestion against the user's next edit group.
fn score(asked: &Asked, edit: &Value) -> Score {
    let at = |p: &Value| {
        replay::offset(
            &asked.document,
            p["line"].as_u64().unwrap() as u32,
            p["character"].as_u64().unwrap() as u32,
        )
    };
    let range = at(&edit["range"]["start"])..at(&edit["range"]["end"]);
    judge(
        &asked.document,
        asked.target.as_deref(),
        range,
        edit["text"].as_str().unwrap(),
    )
}

/// Bytes `range` of `document` replaced by `text`, against `target` (the document after the
/// user's next edit group).
fn judge(document: &str, target: Option<&str>, range: std::ops::Range<usize>, text: &str) -> Score {
    let mut suggested = document.to_string();
    suggested.replace_range(range, text);
    let Some(target) = target else {
        return Score::Elsewhere;
    };
    if suggested == target {
        return Score::Accepted;
    }
    let before: Vec<&str> = document.split('\n').collect();
    let wanted: Vec<&str> = target.split('\n').collect();
    let got: Vec<&str> = suggested.split('\n').collect();
    // Lines of the document each changes (old lines), and the lines the user's edit wrote.
    let (user_old, user_new) = changed_lines(&before, &wanted);
    let (ours_old, _) = changed_lines(&before, &got);
    let touches = |a: &std::ops::Range<usize>, b: &std::ops::Range<usize>| {
        // An insertion between lines touches the line it is inserted at.
        let widen = |r: &std::ops::Range<usize>| r.start..r.end.max(r.start + 1);
        let (a, b) = (widen(a), widen(b));
        a.start < b.end && b.start < a.end
    };
    if !touches(&user_old, &ours_old) {
        return Score::Elsewhere;
    }
    if !user_new.is_empty() && matched(&wanted, &got, user_new) {
        Score::PartlyRight
    } else {
        Score::AtSite
    }
}

/// The lines `a` and `b` differ in, trimmed of their common first and last lines: that range
/// of `a`'s lines, and of `b`'s.
fn changed_lines(a: &[&str], b: &[&str]) -> (std::ops::Range<usize>, std::ops::Range<usize>) {
    let head = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let tail = a[head..]
        .iter()
        .rev()
        .zip(b[head..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    (head..a.len() - tail, head..b.len() - tail)
}

/// Whether every line of `wanted[lines]` is matched in a longest common subsequence of the
/// lines of `wanted` and `got` (their differing middle only: the shared first and last lines
/// match themselves).
fn matched(wanted: &[&str], got: &[&str], lines: std::ops::Range<usize>) -> bool {
    let (w, g) = changed_lines(wanted, got);
    let (head, w_mid, g_mid) = (w.start, &wanted[w.clone()], &got[g]);
    let unmatched: Vec<usize> = lines.filter(|l| w.contains(l)).map(|l| l - head).collect();
    if unmatched.is_empty() {
        return true;
    }
    // lcs[i][j]: the longest common subsequence of w_mid[i..] and g_mid[j..].
    let (n, m) = (w_mid.len(), g_mid.len());
    let mut lcs = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if w_mid[i] == g_mid[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let mut kept = vec![false; n];
    let (mut i, mut j) = (0, 0);
    while i < n && j < m {
        if w_mid[i] == g_mid[j] {
            kept[i] = true;
            i += 1;
            j += 1;
        } else if lcs[i + 1][j] >= lcs[i][j + 1] {
            i += 1;
        } else {
            j += 1;
        }
    }
    unmatched.iter().all(|&l| kept[l])
}

/// One shown suggestion and the user's next edit group, as the lines each changes.
fn print_suggestion(asked: &Asked, edit: &Value, score: Score) {
    let before: Vec<&str> = asked.document.split('\n').collect();
    let show = |after: &str| {
        let after: Vec<&str> = after.split('\n').collect();
        let (old, new) = changed_lines(&before, &after);
        format!(
            "line {}: {:?} -> {:?}",
            old.start + 1,
            before[old].join("\n"),
            after[new].join("\n")
        )
    };
    let mut suggested = asked.document.clone();
    let at = |p: &Value| {
        replay::offset(
            &asked.document,
            p["line"].as_u64().unwrap() as u32,
            p["character"].as_u64().unwrap() as u32,
        )
    };
    suggested.replace_range(
        at(&edit["range"]["start"])..at(&edit["range"]["end"]),
        edit["text"].as_str().unwrap(),
    );
    println!(
        "{} ({score:?})\n  suggested {}\n  next edit {}",
        asked.row.map_or("a new refactoring next", Kind::name),
        show(&suggested),
        asked.target.as_deref().map_or("none".into(), show)
    );
}

fn print_recording(recording: &Recording) {
    let mut text = recording.start.clone();
    for refactoring in &recording.refactorings {
        println!(
            "{}: {} ({} sites typed)",
            refactoring.kind.name(),
            refactoring.what,
            refactoring.groups.len()
        );
        for keys in &refactoring.groups {
            let typed: String = keys.iter().map(|k| k.insert.as_str()).collect();
            let deleted: usize = keys.iter().map(|k| k.delete).sum();
            for key in keys {
                key.apply(&mut text);
            }
            // The line the site's last key leaves the cursor on.
            let end = keys.last().expect("a site is typed").cursor();
            let [line, _] = position(&text, end);
            let shown = text.lines().nth(line as usize).unwrap_or("");
            println!(
                "  line {:>4}: {:?}{} -> {}",
                line + 1,
                typed,
                if deleted > 0 {
                    format!(" over {deleted} bytes")
                } else {
                    String::new()
                },
                shown.trim()
            );
        }
    }
}

/// The scorer on made-up suggestions (run by the smoke test, this having no test harness).
fn check_judge() {
    let document = "fn f(n: u32) -> u32 {\n    let a = n + 1;\n    let b = n * 2;\n    a + b\n}\n";
    // The user renames `n` to `n_count` at the first use, next.
    let target = document.replacen("= n +", "= n_count +", 1);
    let at = |needle: &str| document.find(needle).unwrap();
    let first = at("n + 1");
    let judge_fn = judge;
    let judge =
        |range: std::ops::Range<usize>, text: &str| judge_fn(document, Some(&target), range, text);
    assert_eq!(judge(first..first + 1, "n_count"), Score::Accepted);
    // Both uses at once: the next one right, and one more.
    let both = first..at("n * 2") + 1;
    assert_eq!(
        judge(both.clone(), "n_count + 1;\n    let b = n_count"),
        Score::PartlyRight
    );
    // The right line, wrong text.
    assert_eq!(judge(first..first + 1, "m"), Score::AtSite);
    // A line inserted after it changes no line the user changes; the right rename with that
    // line is partly right.
    let line_end = at(";\n    let b") + 2;
    assert_eq!(judge(line_end..line_end, "    x();\n"), Score::Elsewhere);
    assert_eq!(
        judge(first..line_end, "n_count + 1;\n    x();\n"),
        Score::PartlyRight
    );
    // Another line only.
    let b = at("n * 2");
    assert_eq!(judge(b..b + 1, "n_count"), Score::Elsewhere);
    // After the recording's last edit nothing is right.
    assert_eq!(
        judge_fn(document, None, first..first + 1, "n_count"),
        Score::Elsewhere
    );
}
