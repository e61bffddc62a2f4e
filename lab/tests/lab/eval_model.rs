//! `redraft eval` ties a run's results to the model that wrote them: a rerun into the same
//! directory resumes only with the same model files, not merely the same model path.

use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

use redraft_tests::cli::{lab_in_repo, ok, path, small_model_with};

/// Four match-scored tasks (no test: nothing to compile or run).
fn write_tasks(dir: &Path) -> std::path::PathBuf {
    let rows: Vec<String> = (0..4)
        .map(|i| {
            serde_json::json!({
                "task_id": format!("Match/{i}"), "prompt": format!("fn f{i}() -> u32 {{\n"),
                "suffix": "\n}\n", "canonical_solution": format!("    {i}"), "test": "",
                "entry_point": format!("f{i}"), "language": "rust",
            })
            .to_string()
        })
        .collect();
    let tasks = dir.join("tasks.jsonl");
    std::fs::write(&tasks, rows.join("\n")).unwrap();
    tasks
}

#[test]
fn new_weights_in_the_same_model_directory_are_another_run() {
    let model = small_model_with(serde_json::json!({}));
    let dir = tempfile::tempdir().unwrap();
    let tasks = write_tasks(dir.path());
    let out = dir.path().join("run");
    let eval = |limit: &str| {
        lab_in_repo(&[
            "eval",
            "--model",
            path(model.path()),
            "--tasks",
            path(&tasks),
            "--limit",
            limit,
            "--effort",
            "low",
            "--out",
            path(&out),
        ])
    };
    ok(eval("2"));
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap()).unwrap();
    let fingerprint = run["model_fingerprint"]
        .as_str()
        .unwrap_or_else(|| panic!("{run}"));
    // The same files: resumed.
    let resumed = eval("3");
    assert!(
        String::from_utf8_lossy(&resumed.stderr).contains("resuming, 2 of 3"),
        "{}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    ok(resumed);

    // Other weights in the same place (here: written again, so a new modification time).
    let weights = model.path().join("model.safetensors");
    std::fs::File::options()
        .write(true)
        .open(&weights)
        .unwrap()
        .set_modified(UNIX_EPOCH + Duration::from_secs(1_000_000_000))
        .unwrap();
    let refused = eval("4");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(!stderr.contains("resuming"), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "model_fingerprint \"{fingerprint}\" there, \"fnv1a64:"
        )) && stderr.contains("pick another --out or delete it"),
        "{stderr}"
    );
    let results = std::fs::read_to_string(out.join("tasks.jsonl")).unwrap();
    assert_eq!(
        results.lines().count(),
        3,
        "nothing of the new model mixed in"
    );
}
