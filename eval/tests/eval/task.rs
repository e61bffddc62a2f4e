//! Reading task files: a file that is not a task set is an error naming the file, the line and
//! what is wrong with it, whatever is wrong (not JSON, not an object, not UTF-8, a gzip stream
//! cut short), never a task set of the lines before it.

use std::io::Write;
use std::path::Path;

use redraft_eval::task::read_tasks;

const TASK: &str = r#"{"task_id": "a", "prompt": "fn f() {", "canonical_solution": "}"}"#;

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

/// `bytes` written as `name` and read: the error, which must name the file and `says`.
fn check_refused(name: &str, bytes: &[u8], says: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    let error = read_tasks(&path)
        .map(|tasks| format!("read as {} tasks", tasks.len()))
        .unwrap_or_else(|e| e.to_string());
    assert!(
        error.starts_with(&path.display().to_string()) && error.contains(says),
        "{name}: {error}"
    );
}

#[test]
fn a_task_file_that_is_not_tasks_is_an_error_naming_its_line() {
    // Invalid UTF-8 in the second task's prompt (a Latin-1 `é`): std's line reader said only
    // "stream did not contain valid UTF-8", not where.
    let mut latin1 = format!("{TASK}\n").into_bytes();
    latin1.extend_from_slice(br#"{"task_id": "b", "prompt": "fn f"#);
    latin1.push(0xe9);
    latin1.extend_from_slice(br#"() {", "canonical_solution": "}"}"#);
    check_refused(
        "latin1.jsonl",
        &latin1,
        "line 2: invalid unicode code point",
    );

    // A gzip file cut short, as an interrupted download leaves it: the lines before the cut
    // are not the task set.
    let mut many = String::new();
    for i in 0..200 {
        many.push_str(&TASK.replace("\"a\"", &format!("\"t{i}\"")));
        many.push('\n');
    }
    let whole = gzip(many.as_bytes());
    check_refused(
        "cut.jsonl.gz",
        &whole[..whole.len() / 2],
        "the gzip file is cut short",
    );
    check_refused("cut.jsonl.gz", &whole[..whole.len() - 4], "line ");

    // A JSON array is no task, though serde would read one field by field.
    let array = r#"["a", "fn f() {", "", "}", "", "", null]"#;
    check_refused(
        "array.jsonl",
        format!("{TASK}\n{array}\n").as_bytes(),
        "line 2: not a JSON object",
    );
    check_refused("number.jsonl", b"\n\n5\n", "line 3: not a JSON object");
    check_refused(
        "wrong.jsonl",
        format!("{TASK}\n{}\n", TASK.replace("\"}\"", "7")).as_bytes(),
        "line 2: invalid type: integer `7`, expected a string",
    );
    check_refused(
        "dup.jsonl",
        format!("{TASK}\n{TASK}\n").as_bytes(),
        "task id `a` appears twice",
    );
}

/// What is a task file is read: blank lines skipped, a byte-order mark (as some Windows
/// editors save UTF-8) and a last line without its newline taken, gzip by its magic bytes.
#[test]
fn task_files_as_editors_save_them_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let read = |name: &str, bytes: &[u8]| {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        read_tasks(Path::new(&path)).unwrap()
    };
    let text = format!("\u{feff}{TASK}\r\n\r\n{}", TASK.replace("\"a\"", "\"b\""));
    let tasks = read("bom.jsonl", text.as_bytes());
    assert_eq!(tasks.len(), 2);
    assert_eq!(tasks[1].task_id, "b");
    assert_eq!(read("named-plain.jsonl", &gzip(text.as_bytes())).len(), 2);
}

#[test]
fn an_atomic_write_replaces_whole_and_a_failed_one_leaves_nothing_behind() {
    use redraft_eval::task::write_atomic;
    use std::os::unix::fs::PermissionsExt;

    let dir = tempfile::tempdir().unwrap();
    let names = |dir: &Path| {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };

    let file = dir.path().join("summary.json");
    write_atomic(&file, b"old").unwrap();
    write_atomic(&file, b"new").unwrap();
    assert_eq!(std::fs::read(&file).unwrap(), b"new");
    // The mode a plain file gets under this umask, not a temporary file's 0600.
    let plain = dir.path().join("plain");
    std::fs::File::create(&plain).unwrap();
    let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&file), mode(&plain));
    std::fs::remove_file(&plain).unwrap();

    // A rename that fails (a directory with files where the file should go): an error naming
    // the path, and no temporary file left beside it (one was, named `<path>.tmp<pid>`).
    let taken = dir.path().join("results.jsonl");
    std::fs::create_dir(&taken).unwrap();
    std::fs::write(taken.join("inside"), "kept").unwrap();
    let error = write_atomic(&taken, b"lost").unwrap_err().to_string();
    assert!(error.contains(&taken.display().to_string()), "{error}");
    assert_eq!(names(dir.path()), ["results.jsonl", "summary.json"]);
    assert_eq!(
        std::fs::read_to_string(taken.join("inside")).unwrap(),
        "kept"
    );
}
