//! Models by name, end to end: `--model`, the LSP's `model` setting and `redraft serve
//! --model` take `hf:` names (from a Hugging Face hub cache laid out as huggingface_hub writes
//! it, offline) and `ollama:` names (from a store laid out as Ollama writes it); `redraft
//! models` lists them with what they are; `redraft pull` checks one; a bare word is an error
//! naming the forms. (Downloads themselves are tested in `models/` against a fake Hub.)

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

use redraft_tests::cli::{self, json_ok, ok, path, Stdout};
use redraft_tests::lsp_client::{self, items, Start};
use redraft_tests::serve_client;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// The stores every test here reads, made once: the embedded model converted to a GGUF,
/// pulled into a fake Ollama store as `tiny:latest` and cached as `hf:test-org/tiny-GGUF`'s
/// `tiny-q8_0.gguf` in a fake hub cache. Every `redraft` these tests start runs in
/// [`Stores::env`], which points at them.
struct Stores {
    _dir: tempfile::TempDir,
    blob: PathBuf,
    cached: PathBuf,
    ollama: PathBuf,
    hub: PathBuf,
}

impl Stores {
    /// The stores, offline and without a token. Handed to each process rather than set on this
    /// one: the other modules' tests share this binary and start their own `redraft`s.
    fn env(&self) -> Vec<(&'static str, Option<String>)> {
        vec![
            ("OLLAMA_MODELS", Some(path(&self.ollama).to_string())),
            ("HF_HUB_CACHE", Some(path(&self.hub).to_string())),
            ("HF_HUB_OFFLINE", Some("1".to_string())),
            ("HF_TOKEN", None),
        ]
    }
}

fn stores() -> &'static Stores {
    static STORES: OnceLock<Stores> = OnceLock::new();
    STORES.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let gguf = dir.path().join("tiny.gguf");
        ok(cli::redraft(
            &["convert", "--out", path(&gguf), "--type", "q8_0"],
            "",
        ));
        let bytes = std::fs::read(&gguf).unwrap();
        let digest = format!("{:x}", Sha256::digest(&bytes));

        let ollama = dir.path().join("ollama");
        let blob = ollama.join("blobs").join(format!("sha256-{digest}"));
        std::fs::create_dir_all(blob.parent().unwrap()).unwrap();
        std::fs::write(&blob, &bytes).unwrap();
        let manifest = json!({
            "schemaVersion": 2,
            "layers": [{"mediaType": "application/vnd.ollama.image.model", "digest": format!("sha256:{digest}"), "size": bytes.len()}],
        });
        let manifests = ollama.join("manifests/registry.ollama.ai/library/tiny");
        std::fs::create_dir_all(&manifests).unwrap();
        std::fs::write(manifests.join("latest"), manifest.to_string()).unwrap();

        let hub = dir.path().join("hub");
        let repo = hub.join("models--test-org--tiny-GGUF");
        let commit = "0123456789abcdef0123456789abcdef01234567";
        let blobs = repo.join("blobs");
        std::fs::create_dir_all(&blobs).unwrap();
        std::fs::write(blobs.join(&digest), &bytes).unwrap();
        let snapshot = repo.join("snapshots").join(commit);
        std::fs::create_dir_all(&snapshot).unwrap();
        std::os::unix::fs::symlink(
            Path::new("../../blobs").join(&digest),
            snapshot.join("tiny-q8_0.gguf"),
        )
        .unwrap();
        std::fs::create_dir_all(repo.join("refs")).unwrap();
        std::fs::write(repo.join("refs/main"), commit).unwrap();
        // Its own `high` preset: `redraft models` says it is tuned (no test here decodes at
        // `high` on it).
        std::fs::write(
            snapshot.join("redraft.json"),
            json!({"efforts": {"high": {"schedule": {"kind": "top-k", "k": 2}}}}).to_string(),
        )
        .unwrap();

        Stores {
            cached: snapshot.join("tiny-q8_0.gguf"),
            _dir: dir,
            blob,
            ollama,
            hub,
        }
    })
}

/// [`cli::redraft`] in [`Stores::env`].
fn redraft(args: &[&str], stdin: &str) -> Output {
    cli::redraft_in(&stores().env(), args, stdin)
}

/// [`serve_client::Server`] started in [`Stores::env`].
struct Server;

impl Server {
    fn start(args: &[&str]) -> serve_client::Server {
        // serve_client only sets variables: an empty `HF_TOKEN` reads as none.
        let env = stores().env();
        let env: Vec<(&str, &str)> = env
            .iter()
            .map(|(name, value)| (*name, value.as_deref().unwrap_or("")))
            .collect();
        serve_client::Server::start_with(serve_client::Start {
            args,
            env: &env,
            ..serve_client::Start::default()
        })
    }
}

/// [`lsp_client::Lsp`] started in [`Stores::env`], then the test's own `env` over it.
struct Lsp;

impl Lsp {
    async fn start(start: Start) -> lsp_client::Lsp {
        let mut env = stores().env();
        env.extend(start.env);
        lsp_client::Lsp::start(Start { env, ..start }).await
    }
}

fn complete_with(model: &str) -> std::process::Output {
    let request = json!({"prefix": "fn main() {\n    let v = vec![1, 2, 3];\n    for x in ", "suffix": " {\n    }\n}\n"});
    redraft(
        &[
            "complete",
            "--model",
            model,
            "--stdin-json",
            "--json",
            "--effort",
            "low",
            "--max-tokens",
            "8",
        ],
        &request.to_string(),
    )
}

#[test]
fn complete_runs_models_named_by_ollama_and_by_the_hub_cache() {
    stores();
    for name in [
        "ollama:tiny",
        "ollama:library/tiny:latest",
        "hf:test-org/tiny-GGUF:Q8_0",
        "hf:test-org/tiny-GGUF/tiny-q8_0.gguf",
    ] {
        let answer = json_ok(&complete_with(name));
        assert!(answer["middle"].is_string(), "{name}: {answer}");
    }
}

#[test]
fn a_name_not_in_the_caches_or_a_bare_word_is_an_error_saying_what_works() {
    stores();
    let offline = complete_with("hf:test-org/other-GGUF:Q4_K_M");
    assert!(!offline.status.success());
    let stderr = String::from_utf8_lossy(&offline.stderr);
    assert!(stderr.contains("test-org/other-GGUF"), "{stderr}");

    let missing = complete_with("ollama:absent");
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(
        !missing.status.success() && stderr.contains("ollama pull"),
        "{stderr}"
    );

    let bare = complete_with("qwen-coder");
    let stderr = String::from_utf8_lossy(&bare.stderr);
    assert!(
        !bare.status.success() && stderr.contains("hf:") && stderr.contains("ollama:"),
        "{stderr}"
    );
}

#[test]
fn models_lists_the_embedded_model_the_hub_cache_and_ollama_with_what_each_is() {
    stores();
    let listed: Vec<Value> = ok(redraft(&["models", "--json"], ""))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let find = |name: &str| {
        listed
            .iter()
            .find(|m| m["name"] == name)
            .unwrap_or_else(|| panic!("{name} not listed: {listed:?}"))
    };
    let embedded = find("(embedded default)");
    assert_eq!(embedded["kind"], "diffusion");
    // The shipped model's own presets, where `scripts/tune-effort` wrote some.
    let shipped: Value = serde_json::from_str(
        &std::fs::read_to_string(cli::repo().join("assets/default-model/redraft.json")).unwrap(),
    )
    .unwrap();
    let efforts = embedded["efforts"].as_str().unwrap();
    match shipped.get("efforts") {
        None => assert_eq!(efforts, "built-in"),
        Some(_) => assert!(efforts.starts_with("tuned: "), "{efforts}"),
    }
    assert_eq!(
        find("hf:test-org/tiny-GGUF/tiny-q8_0.gguf")["efforts"],
        "tuned: high"
    );
    assert_eq!(embedded["runs"], true);
    for name in ["ollama:tiny:latest", "hf:test-org/tiny-GGUF/tiny-q8_0.gguf"] {
        let model = find(name);
        assert_eq!(model["format"], "gguf", "{model}");
        assert_eq!(model["kind"], "diffusion", "{model}");
        assert_eq!(model["fim"], "in place", "{model}");
        assert_eq!(model["runs"], true, "{model}");
        assert!(model["size"].as_u64().unwrap() > 1000, "{model}");
    }
    let table = ok(redraft(&["models"], ""));
    assert!(table.starts_with("NAME\tSIZE\tFORMAT\tKIND"), "{table}");
    assert!(table.contains("ollama:tiny:latest"), "{table}");
}

#[test]
fn pull_names_where_a_model_is_and_whether_it_runs() {
    let stores = stores();
    let out = redraft(&["pull", "ollama:tiny"], "");
    assert_eq!(ok(out.clone()).trim(), path(&stores.blob));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("redraft runs it"), "{stderr}");
    let bad = redraft(&["pull", "qwen-coder"], "");
    assert!(!bad.status.success());
}

/// A cached file redraft cannot read (cut short here) is pulled "in place", with why it does
/// not run; a name never reaches outside the cache (`..`, and `--`, which would name another
/// repository's cache folder), and the name says what is wrong with it.
#[test]
fn pull_says_why_a_cached_model_does_not_run_and_refuses_names_leaving_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("models--org--cut-GGUF");
    let commit = "0123456789abcdef0123456789abcdef01234567";
    let snapshot = repo.join("snapshots").join(commit);
    std::fs::create_dir_all(&snapshot).unwrap();
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::write(repo.join("refs/main"), commit).unwrap();
    let bytes = std::fs::read(&stores().blob).unwrap();
    std::fs::write(snapshot.join("cut-Q8_0.gguf"), &bytes[..100]).unwrap();
    let env = [
        ("HF_HUB_CACHE", Some(path(dir.path()).to_string())),
        ("HF_HUB_OFFLINE", Some("1".to_string())),
        (
            "OLLAMA_MODELS",
            Some(path(&dir.path().join("ollama")).to_string()),
        ),
    ];
    let out = cli::redraft_in(&env, &["pull", "hf:org/cut-GGUF:Q8_0"], "");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("hf:org/cut-GGUF:Q8_0 is in place, but redraft cannot run it: ")
            && stderr.contains("truncated or corrupt"),
        "{stderr}"
    );
    // A listing, and a load, say how to fetch it again.
    let table = ok(cli::redraft_in(&env, &["models"], ""));
    assert!(
        table.contains("no: the stored copy of hf:org/cut-GGUF/cut-Q8_0.gguf is damaged; `redraft pull hf:org/cut-GGUF/cut-Q8_0.gguf` fetches it again: "),
        "{table}"
    );
    let out = cli::redraft_in(
        &env,
        &[
            "complete",
            "--model",
            "hf:org/cut-GGUF:Q8_0",
            "--stdin-json",
        ],
        r#"{"prefix": "fn main() {", "suffix": "}"}"#,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("`redraft pull hf:org/cut-GGUF:Q8_0` fetches it again"),
        "{stderr}"
    );
    for (name, says) in [
        ("hf:", "expected hf:ORG/REPO"),
        ("hf:a", "expected hf:ORG/REPO"),
        ("hf:../org/x", "`..` is not a Hub organisation"),
        (
            "hf:org/r/../../x.gguf",
            "is not a file path inside the repository",
        ),
        ("hf:org/r@../../x", "is not a branch, tag or commit"),
        ("hf:org--cut/GGUF", "no `--` or `..`"),
        ("hf:org/r b", "is not a Hub organisation or repository name"),
        ("ollama:../x", "is not an Ollama model name"),
        ("ollama:x:..", "is not an Ollama tag"),
    ] {
        let out = cli::redraft_in(&env, &["pull", name], "");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {stderr}");
        assert!(
            stderr.contains(&format!("`{name}` is not a valid model name: "))
                && stderr.contains(says),
            "{name}: {stderr}"
        );
    }
}

/// `redraft models` and `redraft pull` print their answer on stdout: one that cannot take it
/// (a full disk) is an error saying so, exit status 1, not a panic; a reader that stops reading
/// (`redraft models | head -1`, here a pipe closed before anything is written) ends them
/// quietly, as it ends git.
#[test]
fn models_and_pull_say_a_full_stdout_and_end_quietly_on_a_closed_pipe() {
    for args in [
        &["models"][..],
        &["models", "--json"],
        &["pull", "hf:test-org/tiny-GGUF:Q8_0"],
    ] {
        let run =
            |stdout| cli::writing_to(&cli::redraft_binary(), &stores().env(), args, "", stdout);
        let full = run(Stdout::Full);
        let stderr = String::from_utf8_lossy(&full.stderr);
        assert_eq!(full.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains("Error: cannot write to standard output: No space left on device"),
            "{args:?}: {stderr}"
        );
        let closed = run(Stdout::Closed);
        let stderr = String::from_utf8_lossy(&closed.stderr);
        assert_eq!(closed.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(
            !stderr.contains("Error") && !stderr.contains("panicked"),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn serve_takes_a_model_name() {
    let stores = stores();
    let server = Server::start(&["--model", "hf:test-org/tiny-GGUF:Q8_0"]);
    let answer = server.post(
        "/v1/completions",
        &json!({"prompt": "fn main() {\n    let x = ", "max_tokens": 8}),
    );
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert!(answer.json()["choices"][0]["text"].is_string());
    assert!(
        server.stderr().contains(path(&stores.cached)),
        "{}",
        server.stderr()
    );
}

/// A model name is served under one id however it is spelled: an Ollama name without its
/// `ollama:` (as Ollama lists it, and as Zed infers a prompt format from it, reading up to the
/// first `:`), a Hub name under what follows its last `/`.
#[test]
fn serve_names_a_named_model_without_its_scheme() {
    for (model, id) in [
        ("ollama:tiny", "tiny"),
        ("ollama:library/tiny:latest", "tiny:latest"),
        ("hf:test-org/tiny-GGUF:Q8_0", "tiny-GGUF:Q8_0"),
    ] {
        let server = Server::start(&["--model", model]);
        let listed = server.get("/v1/models").json();
        assert_eq!(listed["data"][0]["id"], id, "{model}: {listed}");
        let tags = server.get("/api/tags").json();
        assert_eq!(tags["models"][0]["name"], id, "{model}: {tags}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lsp_model_setting_takes_a_model_name() {
    let stores = stores();
    let lsp = Lsp::start(Start {
        options: json!({"effort": "low", "maxTokens": 8, "model": "ollama:tiny"}),
        ..Start::default()
    })
    .await;
    let loaded = lsp
        .wait_for_log(|line| {
            line.contains("model loaded from") || line.contains("model not loaded")
        })
        .await;
    assert!(loaded.contains(path(&stores.blob)), "{loaded}");
    let uri = "file:///work/demo/src/lib.rs";
    lsp.open(uri, "rust", "fn main() {\n    let total = \n}\n");
    let answer = lsp.inline(uri, 1, 16, true).await.answer().await.unwrap();
    // The tiny model may suggest nothing worth showing; the request must still be answered.
    let _ = items(&answer);
    lsp.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lsp_downloads_a_named_model_with_progress_reports() {
    stores();
    let bytes = std::fs::read(&stores().cached).unwrap();
    let hub = redraft_tests::fake_hub::FakeHub::start();
    let commit = "89abcdef0123456789abcdef0123456789abcdef";
    hub.add_commit("net-org/tiny-GGUF", commit, &[("tiny-Q8_0.gguf", bytes)]);
    hub.set_ref("net-org/tiny-GGUF", "main", commit);
    let cache = tempfile::tempdir().unwrap();
    let lsp = Lsp::start(Start {
        options: json!({"effort": "low", "maxTokens": 8, "model": "hf:net-org/tiny-GGUF:Q8_0"}),
        env: vec![
            ("HF_HUB_OFFLINE", None),
            ("HF_ENDPOINT", Some(hub.url.clone())),
            ("HF_HUB_CACHE", Some(path(cache.path()).to_string())),
        ],
        ..Start::default()
    })
    .await;
    let loaded = lsp
        .wait_for_log(|line| {
            line.contains("model loaded from") || line.contains("model not loaded")
        })
        .await;
    let file = cache
        .path()
        .join("models--net-org--tiny-GGUF/snapshots")
        .join(commit)
        .join("tiny-Q8_0.gguf");
    assert!(loaded.contains(path(&file)), "{loaded}");
    let reports: Vec<String> = lsp
        .received("$/progress")
        .iter()
        .filter_map(|p| p["value"]["message"].as_str().map(str::to_string))
        .collect();
    assert!(
        reports
            .iter()
            .any(|m| m.starts_with("downloading tiny-Q8_0.gguf: ") && m.ends_with("(100%)")),
        "{reports:?}"
    );
    assert!(
        reports
            .iter()
            .any(|m| m.starts_with("downloaded tiny-Q8_0.gguf")),
        "{reports:?}"
    );
    lsp.shutdown().await;
}

/// `redraft convert` reads a safetensors directory: a GGUF file is refused up front, saying
/// what it takes; a place it cannot write is named as one it cannot write, with nothing left
/// behind.
#[test]
fn convert_refuses_a_file_and_names_what_it_cannot_write() {
    let gguf = &stores().blob;
    let refused = cli::redraft(
        &["convert", "--model", path(gguf), "--out", "/tmp/never.gguf"],
        "",
    );
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("is a file") && stderr.contains("safetensors model"),
        "{stderr}"
    );
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("missing/y.gguf");
    let failed = cli::redraft(&["convert", "--out", path(&out)], "");
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert_eq!(failed.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot write") && !stderr.contains("cannot read"),
        "{stderr}"
    );
    assert!(!dir.path().join("missing").exists());
}

/// A pull cut off by a full disk (here the file-size limit `ulimit -f`, which fails a write as
/// a full disk does) says so and what to do, and keeps what it had: the next pull resumes from
/// there, says that it does, and ends with the whole file.
#[test]
fn a_pull_cut_off_by_a_full_disk_says_so_and_the_next_resumes() {
    let bytes = redraft_tests::fake_hub::weights(600_000, 1);
    let hub = redraft_tests::fake_hub::FakeHub::start();
    let commit = "fedcba9876543210fedcba9876543210fedcba98";
    hub.add_commit(
        "net-org/big-GGUF",
        commit,
        &[("big-Q8_0.gguf", bytes.clone())],
    );
    hub.set_ref("net-org/big-GGUF", "main", commit);
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("hub");
    let env = [
        ("HF_HUB_OFFLINE", None),
        ("HF_TOKEN", None),
        ("HF_ENDPOINT", Some(hub.url.clone())),
        ("HF_HUB_CACHE", Some(path(&cache).to_string())),
        (
            "OLLAMA_MODELS",
            Some(path(&dir.path().join("ollama")).to_string()),
        ),
    ];
    // 512 blocks of 512 bytes; SIGXFSZ ignored, so the write fails with EFBIG instead.
    let mut limited = std::process::Command::new("sh");
    limited
        .args(["-c", "ulimit -f 512 && trap '' XFSZ && exec \"$0\" \"$@\""])
        .arg(cli::redraft_binary())
        .args(["pull", "hf:net-org/big-GGUF:Q8_0"]);
    for (name, value) in &env {
        match value {
            Some(value) => limited.env(name, value),
            None => limited.env_remove(name),
        };
    }
    let cut = limited.output().unwrap();
    let stderr = String::from_utf8_lossy(&cut.stderr);
    assert_eq!(cut.status.code(), Some(1), "{stderr}");
    let etag = format!("{:x}", Sha256::digest(&bytes));
    let partial = cache.join(format!("models--net-org--big-GGUF/blobs/{etag}.incomplete"));
    assert!(
        stderr.contains(&format!("could not write {}: ", path(&partial)))
            && stderr.contains(
                "free some space (or set HF_HUB_CACHE to a disk with room) and run again: the \
                 download resumes where it stopped"
            ),
        "{stderr}"
    );
    assert_eq!(std::fs::read(&partial).unwrap(), &bytes[..262_144]);

    hub.clear_requests();
    let out = cli::redraft_in(&env, &["pull", "hf:net-org/big-GGUF:Q8_0"], "");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("resuming big-Q8_0.gguf at 256.0 KiB (left by an earlier download)"),
        "{stderr}"
    );
    let file = cache
        .join("models--net-org--big-GGUF/snapshots")
        .join(commit)
        .join("big-Q8_0.gguf");
    assert_eq!(ok(out).trim(), path(&file));
    assert_eq!(std::fs::read(&file).unwrap(), bytes);
    let ranges: Vec<_> = hub
        .requests()
        .into_iter()
        .filter(|r| r.path.starts_with("/cdn/"))
        .map(|r| r.header("range").map(str::to_string))
        .collect();
    assert_eq!(ranges, [Some("bytes=262144-".to_string())]);
}

/// `redraft models` over caches holding junk (a link to a deleted blob, a killed download, an
/// Ollama manifest naming a missing blob) lists what it can and says on stderr what it passed
/// over and what to do; it does not fail.
#[test]
fn models_lists_what_it_can_and_says_what_it_skipped() {
    let stores = stores();
    let dir = tempfile::tempdir().unwrap();
    let hub = dir.path().join("hub");
    let repo = hub.join("models--org--gone-GGUF");
    let commit = "0123456789abcdef0123456789abcdef01234567";
    let snapshot = repo.join("snapshots").join(commit);
    std::fs::create_dir_all(&snapshot).unwrap();
    std::fs::create_dir_all(repo.join("blobs")).unwrap();
    std::fs::write(repo.join("blobs/abc.incomplete"), [0u8; 10]).unwrap();
    std::os::unix::fs::symlink("../../blobs/deleted", snapshot.join("gone-Q8_0.gguf")).unwrap();
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::write(repo.join("refs/main"), commit).unwrap();
    let ollama = dir.path().join("ollama");
    let manifests = ollama.join("manifests/registry.ollama.ai/library/lost");
    std::fs::create_dir_all(&manifests).unwrap();
    std::fs::copy(
        stores
            .ollama
            .join("manifests/registry.ollama.ai/library/tiny/latest"),
        manifests.join("latest"),
    )
    .unwrap();
    let env = [
        ("HF_HUB_CACHE", Some(path(&hub).to_string())),
        ("OLLAMA_MODELS", Some(path(&ollama).to_string())),
    ];
    let out = cli::redraft_in(&env, &["models"], "");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let table = ok(out);
    assert!(table.contains("(embedded default)"), "{table}");
    let skipped: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("redraft models: skipped "))
        .collect();
    assert_eq!(skipped.len(), 3, "{stderr}");
    for says in [
        "gone-Q8_0.gguf: a link to a blob that is gone (deleted, or never finished); `redraft pull hf:org/gone-GGUF/gone-Q8_0.gguf` fetches it again",
        "abc.incomplete: a download of org/gone-GGUF not finished (10 B so far)",
        "lost/latest: ollama model lost:latest names blob",
    ] {
        assert!(skipped.iter().any(|l| l.contains(says)), "{says}: {stderr}");
    }
}

/// With `HOME` unset (a service, `env -i`), the Hugging Face cache is the account's, found as
/// Python's `expanduser` finds it, never `./.cache/huggingface/hub` under whatever directory
/// redraft was started in.
#[test]
fn without_home_the_cache_is_not_taken_from_the_current_directory() {
    let stores = stores();
    let cwd = tempfile::tempdir().unwrap();
    let repo = cwd
        .path()
        .join(".cache/huggingface/hub/models--cwd--trap-GGUF");
    let commit = "0123456789abcdef0123456789abcdef01234567";
    let snapshot = repo.join("snapshots").join(commit);
    std::fs::create_dir_all(&snapshot).unwrap();
    std::fs::copy(&stores.blob, snapshot.join("trap-Q8_0.gguf")).unwrap();
    let mut command = std::process::Command::new(cli::redraft_binary());
    command
        .args(["models", "--json"])
        .current_dir(cwd.path())
        .env("OLLAMA_MODELS", path(&cwd.path().join("ollama")));
    for name in [
        "HOME",
        "USERPROFILE",
        "HF_HOME",
        "HF_HUB_CACHE",
        "HUGGINGFACE_HUB_CACHE",
        "XDG_CACHE_HOME",
    ] {
        command.env_remove(name);
    }
    let out = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("(embedded default)"), "{stdout}");
    assert!(!stdout.contains("hf:cwd/trap-GGUF"), "{stdout}");
}
