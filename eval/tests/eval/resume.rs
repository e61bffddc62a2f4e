//! Resuming a run whose results file a stop left mid-line: what was whole is kept, what was cut
//! is redone, and results appended by the resumed run stay readable, however often it stops.

use std::io::Write;

use redraft_eval::run::{resume, RESULTS_FILE};
use serde_json::{json, Value};

fn result(id: &str) -> String {
    // A non-ASCII completion, so a cut can fall inside a character.
    json!({"task_id": id, "completion": "// señal ünïcode"}).to_string()
}

/// The results `resume` reads from `out` (as the run about to append to its file).
fn resumed(out: &std::path::Path) -> Vec<String> {
    let identity = json!({"tasks": "tasks.jsonl"});
    let results = resume(out, RESULTS_FILE, &identity, |r: &Value| {
        r["task_id"].as_str().unwrap()
    })
    .unwrap();
    let mut ids: Vec<String> = results.into_keys().collect();
    ids.sort();
    ids
}

/// The resumed run appending a result, as `evaluate` does, then stopping.
fn append(out: &std::path::Path, line: &str) {
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(out.join(RESULTS_FILE))
        .unwrap();
    writeln!(file, "{line}").unwrap();
}

#[test]
fn a_results_file_stopped_mid_line_resumes_and_stays_readable() {
    let out = tempfile::tempdir().unwrap();
    let out = out.path();
    assert!(resumed(out).is_empty(), "a fresh directory");
    let results = out.join(RESULTS_FILE);

    // Stopped inside the third result, in the middle of the `ñ`: the two before it are kept.
    let third = result("c");
    let cut = third.find('ñ').unwrap() + 1;
    let mut bytes = format!("{}\n{}\n", result("a"), result("b")).into_bytes();
    bytes.extend_from_slice(&third.as_bytes()[..cut]);
    std::fs::write(&results, &bytes).unwrap();
    assert_eq!(resumed(out), ["a", "b"]);
    // The resumed run appends `c` again and stops: every result is there for the next one (the
    // result appended used to join the cut line, and the next resume refused the file).
    append(out, &result("c"));
    assert_eq!(resumed(out), ["a", "b", "c"]);

    // Stopped between a whole result and its newline: the result is kept.
    let mut text = std::fs::read_to_string(&results).unwrap();
    text.push_str(&result("d"));
    std::fs::write(&results, &text).unwrap();
    assert_eq!(resumed(out), ["a", "b", "c", "d"]);
    append(out, &result("e"));
    assert_eq!(resumed(out), ["a", "b", "c", "d", "e"]);
    let text = std::fs::read_to_string(&results).unwrap();
    assert_eq!(text.lines().count(), 5, "{text}");

    // A bad line that is not the last was not cut by a stop: refused, naming it.
    std::fs::write(
        &results,
        format!("{}\nnot json\n{}\n", result("a"), result("b")),
    )
    .unwrap();
    let identity = json!({"tasks": "tasks.jsonl"});
    let refused = resume(out, RESULTS_FILE, &identity, |r: &Value| {
        r["task_id"].as_str().unwrap()
    })
    .unwrap_err()
    .to_string();
    assert!(refused.contains("tasks.jsonl: line 2:"), "{refused}");
}
