//! Ctrl-C during `eval`, as a terminal sends it (SIGINT to the foreground process group): the
//! programs being scored run in process groups of their own, which it never reaches, and ran
//! on past their deadline, their scratch directories left in the work dir.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use redraft_tests::cli::{lab_binary, path};

/// Waits (polling, up to `patience`) until `done` holds; whether it did.
fn wait_until(patience: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while !done() {
        if start.elapsed() > patience {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// The processes whose working directory is under `dir` (the sandboxed programs, whose
/// directories are made there).
fn working_in(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let dir = dir.to_string_lossy().into_owned();
    entries
        .flatten()
        .filter_map(|entry| {
            let cwd = std::fs::read_link(entry.path().join("cwd")).ok()?;
            let cwd = cwd.to_string_lossy().into_owned();
            cwd.starts_with(&dir)
                .then(|| format!("{}: {cwd}", entry.file_name().to_string_lossy()))
        })
        .collect()
}

fn scratch_dirs(work: &Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(work)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("redraft-eval-")
        })
        .collect()
}

#[test]
fn ctrl_c_during_eval_kills_its_programs_and_removes_their_scratch_directories() {
    let dir = tempfile::tempdir().unwrap();
    // Programs run as `nobody` under root: the work dir must be reachable.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    std::fs::set_permissions(&work, std::fs::Permissions::from_mode(0o755)).unwrap();
    let tasks = dir.path().join("sleep.jsonl");
    let task = serde_json::json!({
        "task_id": "Sleep/0", "prompt": "def f():\n", "suffix": "",
        "canonical_solution": "    return 1\n",
        "test": "def check(candidate):\n    assert candidate() == 1\n",
        "entry_point": "f", "language": "python",
    });
    std::fs::write(&tasks, format!("{task}\n")).unwrap();
    let completions = dir.path().join("sleep-completions.jsonl");
    let sleeper =
        "    import time\n    open('sleeping', 'w').close()\n    time.sleep(60)\n    return 1\n";
    let row = serde_json::json!({"task_id": "Sleep/0", "completion": sleeper});
    std::fs::write(&completions, format!("{row}\n")).unwrap();
    let out = dir.path().join("out");
    let stderr = dir.path().join("stderr");
    let mut eval = Command::new(lab_binary())
        .args([
            "eval",
            "--tasks",
            path(&tasks),
            "--completions",
            path(&completions),
            "--timeout-s",
            "60",
            "--work-dir",
            path(&work),
            "--out",
            path(&out),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr).unwrap())
        // Its own group, as a terminal's foreground job, so the signal reaches no test.
        .process_group(0)
        .spawn()
        .unwrap();
    let said = || std::fs::read_to_string(&stderr).unwrap_or_default();
    let sleeping = wait_until(Duration::from_secs(120), || {
        scratch_dirs(&work)
            .iter()
            .any(|d| d.join("sleeping").exists())
    });
    if !sleeping {
        let _ = eval.kill();
        panic!("the program never started: {}", said());
    }
    let group = format!("-{}", eval.id());
    let sent = Command::new("kill")
        .args(["-INT", "--", &group])
        .status()
        .unwrap();
    assert!(sent.success());
    let status = eval.wait().unwrap();
    assert!(
        status.signal() == Some(2) || status.code() == Some(130),
        "{status:?}: {}",
        said()
    );
    // SIGKILL takes effect as the kernel gets to each process: waited for, not assumed.
    let gone = wait_until(Duration::from_secs(10), || working_in(&work).is_empty());
    assert!(gone, "still running: {:?}", working_in(&work));
    assert!(scratch_dirs(&work).is_empty(), "{:?}", scratch_dirs(&work));
    // What was done is kept for the rerun to resume; no summary of a run that did not end.
    assert!(out.join("tasks.jsonl").is_file());
    assert!(!out.join("summary.json").exists());
}
