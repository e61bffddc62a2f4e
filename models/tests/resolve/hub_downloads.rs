//! `hf:` checkpoints fetched from the fake Hub: cache layout, no second request, resume,
//! verification, the token, refused files, revisions, shards and two downloads at once.

use std::time::Duration;

use redraft_models::{Error, ModelFormat, NoProgress, Progress, Resolver};

use crate::{checkpoint_files, commit, tree, weights, World};
use redraft_tests::fake_hub::{sha256_hex, FakeHub};

const REPO: &str = "org/coder";

fn hub_with_checkpoint() -> (FakeHub, Vec<(&'static str, Vec<u8>)>) {
    let hub = FakeHub::start();
    let files = checkpoint_files();
    hub.add_commit(REPO, &commit('a'), &files);
    hub.set_ref(REPO, "main", &commit('a'));
    (hub, files)
}

fn content<'a>(files: &'a [(&str, Vec<u8>)], name: &str) -> &'a [u8] {
    &files.iter().find(|(f, _)| *f == name).expect("file").1
}

/// The `GET`s of the CDN (weights) the fake saw, with their `Range` header.
fn cdn_gets(hub: &FakeHub) -> Vec<Option<String>> {
    hub.requests()
        .into_iter()
        .filter(|r| r.method == "GET" && r.path.starts_with("/cdn/"))
        .map(|r| r.header("range").map(str::to_string))
        .collect()
}

#[test]
fn checkpoint_lands_in_the_hub_cache_layout_and_resolves_again_without_requests() {
    let (hub, files) = hub_with_checkpoint();
    let world = World::with_hub(&hub);
    let resolved = world.resolve("hf:org/coder").unwrap();
    let snapshot = world.repo_dir(REPO).join("snapshots").join(commit('a'));
    assert_eq!(resolved.path, snapshot);
    assert_eq!(resolved.format, ModelFormat::SafetensorsDir);
    for file in [
        "config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "redraft.json",
        "model.safetensors",
    ] {
        world.assert_cached(REPO, &commit('a'), file, content(&files, file));
    }
    // Nothing else was fetched: not the pickle, not the code, not the README.
    let snapshot_files = tree(&snapshot);
    assert_eq!(
        snapshot_files,
        [
            "config.json",
            "model.safetensors",
            "redraft.json",
            "tokenizer.json",
            "tokenizer_config.json"
        ]
    );
    let main = std::fs::read_to_string(world.repo_dir(REPO).join("refs/main")).unwrap();
    assert_eq!(main, commit('a'));
    assert!(!tree(&world.repo_dir(REPO).join("blobs"))
        .iter()
        .any(|f| f.ends_with(".incomplete")));

    hub.clear_requests();
    let again = world.resolve("hf:org/coder").unwrap();
    assert_eq!(again, resolved);
    assert!(hub.requests().is_empty(), "{:?}", hub.requests());
}

#[test]
fn interrupted_download_resumes_with_a_range_request() {
    let (hub, files) = hub_with_checkpoint();
    hub.cut_after("model.safetensors", 100_000, 1);
    let world = World::with_hub(&hub);
    world.resolve("hf:org/coder").unwrap();
    assert_eq!(cdn_gets(&hub), [None, Some("bytes=100000-".to_string())]);
    world.assert_cached(
        REPO,
        &commit('a'),
        "model.safetensors",
        content(&files, "model.safetensors"),
    );
}

#[test]
fn partial_file_left_by_a_killed_run_is_resumed() {
    let (hub, files) = hub_with_checkpoint();
    let world = World::with_hub(&hub);
    let weights = content(&files, "model.safetensors");
    let blobs = world.repo_dir(REPO).join("blobs");
    std::fs::create_dir_all(&blobs).unwrap();
    let partial = blobs.join(format!("{}.incomplete", sha256_hex(weights)));
    std::fs::write(&partial, &weights[..123_456]).unwrap();

    world.resolve("hf:org/coder").unwrap();
    assert_eq!(cdn_gets(&hub), [Some("bytes=123456-".to_string())]);
    world.assert_cached(REPO, &commit('a'), "model.safetensors", weights);
    assert!(!partial.exists());
}

#[test]
fn server_ignoring_range_restarts_the_file() {
    let (hub, files) = hub_with_checkpoint();
    hub.ignore_range();
    let world = World::with_hub(&hub);
    let weights = content(&files, "model.safetensors");
    let blobs = world.repo_dir(REPO).join("blobs");
    std::fs::create_dir_all(&blobs).unwrap();
    std::fs::write(
        blobs.join(format!("{}.incomplete", sha256_hex(weights))),
        &weights[..5000],
    )
    .unwrap();

    world.resolve("hf:org/coder").unwrap();
    assert_eq!(
        cdn_gets(&hub),
        [Some("bytes=5000-".to_string())],
        "asked to resume, got 200"
    );
    world.assert_cached(REPO, &commit('a'), "model.safetensors", weights);
}

#[test]
fn corrupt_download_is_rejected_and_leaves_nothing_loadable() {
    let (hub, files) = hub_with_checkpoint();
    hub.corrupt("model.safetensors");
    let world = World::with_hub(&hub);
    let error = world.resolve("hf:org/coder").unwrap_err();
    assert!(matches!(error, Error::Checksum { .. }), "{error:?}");
    let message = error.to_string();
    assert!(
        message.contains("model.safetensors from org/coder is corrupt"),
        "{message}"
    );
    let etag = sha256_hex(content(&files, "model.safetensors"));
    let dir = world.repo_dir(REPO);
    assert!(!dir.join("blobs").join(&etag).exists(), "no blob");
    assert!(
        !dir.join("blobs")
            .join(format!("{etag}.incomplete"))
            .exists(),
        "partial removed"
    );
    let link = dir
        .join("snapshots")
        .join(commit('a'))
        .join("model.safetensors");
    assert!(link.symlink_metadata().is_err(), "no snapshot link");
    assert!(
        !dir.join("refs/main").exists(),
        "the revision is not recorded as fetched"
    );
}

#[test]
fn token_is_sent_to_the_hub_and_never_shown() {
    const SECRET: &str = "hf_SeCrEt0123456789";
    let (hub, _) = hub_with_checkpoint();
    hub.require_token(SECRET);
    let world = World::with_hub(&hub).token(SECRET);
    world.resolve("hf:org/coder").unwrap();
    let hub_requests: Vec<_> = hub
        .requests()
        .into_iter()
        .filter(|r| !r.path.starts_with("/cdn/"))
        .collect();
    assert!(!hub_requests.is_empty());
    for request in &hub_requests {
        assert_eq!(
            request.header("authorization"),
            Some(&*format!("Bearer {SECRET}")),
            "{request:?}"
        );
    }

    let resolver = world.resolver();
    let errors = [
        resolver
            .resolve("hf:org/missing", &mut NoProgress)
            .unwrap_err(),
        resolver
            .resolve("hf:org/coder@nope", &mut NoProgress)
            .unwrap_err(),
    ];
    for shown in errors
        .iter()
        .flat_map(|e| [e.to_string(), format!("{e:?}")])
        .chain([format!("{resolver:?}"), format!("{:?}", world.settings)])
    {
        assert!(!shown.contains(SECRET), "{shown}");
    }

    // Without the token the Hub refuses, and the message says what to do.
    let anonymous = World::with_hub(&hub);
    let message = anonymous.resolve("hf:org/coder").unwrap_err().to_string();
    assert!(
        message.contains("refused access to org/coder (401)"),
        "{message}"
    );
    assert!(message.contains("set HF_TOKEN"), "{message}");
}

/// An `HF_ENDPOINT` that is not a URL is named as the problem, with its value; the model name,
/// which is fine, is not called invalid.
#[test]
fn an_endpoint_that_is_not_a_url_is_said_to_be_the_problem() {
    let world = World::new("notaurl");
    let error = world.resolve("hf:org/coder").unwrap_err();
    assert!(
        matches!(&error, Error::InvalidEndpoint { value, .. } if value == "notaurl"),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.starts_with("HF_ENDPOINT is `notaurl`, which is not a URL (")
            && message.contains("unset it"),
        "{message}"
    );
    assert!(!message.contains("model name"), "{message}");
}

#[test]
fn pickled_weights_are_refused_with_the_reason() {
    let hub = FakeHub::start();
    hub.add_commit(
        "org/old",
        &commit('b'),
        &[
            ("config.json", b"{}".to_vec()),
            ("pytorch_model.bin", weights(1000, 3)),
        ],
    );
    hub.set_ref("org/old", "main", &commit('b'));
    let world = World::with_hub(&hub);

    let message = world.resolve("hf:org/old").unwrap_err().to_string();
    assert!(
        message.contains("has only pickled weights (pytorch_model.bin)"),
        "{message}"
    );
    assert!(message.contains("can execute code"), "{message}");

    hub.clear_requests();
    let error = world.resolve("hf:org/old/pytorch_model.bin").unwrap_err();
    let message = error.to_string();
    assert!(
        message.starts_with("refusing to download pytorch_model.bin from org/old"),
        "{message}"
    );
    assert!(
        message.contains("pickled weights, which can execute code"),
        "{message}"
    );
    assert!(hub.requests().is_empty(), "refused before any request");
    let message = world
        .resolve("hf:org/old/modeling.py")
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("nothing from a model repository is ever executed"),
        "{message}"
    );
    assert!(!world.repo_dir("org/old").join("blobs").exists());
}

#[test]
fn shards_named_by_the_index_are_fetched_and_pickled_shards_refused() {
    let hub = FakeHub::start();
    let index = br#"{"metadata":{},"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}}"#;
    let shard_1 = weights(50_000, 4);
    let shard_2 = weights(60_000, 5);
    hub.add_commit(
        REPO,
        &commit('c'),
        &[
            ("config.json", b"{}".to_vec()),
            ("tokenizer.json", b"{}".to_vec()),
            ("model.safetensors.index.json", index.to_vec()),
            ("model-00001-of-00002.safetensors", shard_1.clone()),
            ("model-00002-of-00002.safetensors", shard_2.clone()),
        ],
    );
    hub.set_ref(REPO, "main", &commit('c'));
    let world = World::with_hub(&hub);
    let resolved = world.resolve("hf:org/coder").unwrap();
    assert_eq!(resolved.format, ModelFormat::SafetensorsDir);
    world.assert_cached(
        REPO,
        &commit('c'),
        "model-00001-of-00002.safetensors",
        &shard_1,
    );
    world.assert_cached(
        REPO,
        &commit('c'),
        "model-00002-of-00002.safetensors",
        &shard_2,
    );
    hub.clear_requests();
    world.resolve("hf:org/coder").unwrap();
    assert!(hub.requests().is_empty());

    let pickled_index = br#"{"weight_map":{"a":"pytorch_model-00001.bin"}}"#;
    hub.add_commit(
        "org/mixed",
        &commit('d'),
        &[
            ("config.json", b"{}".to_vec()),
            ("tokenizer.json", b"{}".to_vec()),
            ("model.safetensors.index.json", pickled_index.to_vec()),
            ("pytorch_model-00001.bin", weights(100, 6)),
        ],
    );
    let message = world
        .resolve(&format!("hf:org/mixed@{}", commit('d')))
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("refusing to download pytorch_model-00001.bin"),
        "{message}"
    );
}

#[test]
fn revision_suffix_resolves_that_commit() {
    let (hub, _) = hub_with_checkpoint();
    let mut v1 = checkpoint_files();
    v1[0].1 = br#"{"model_type":"qwen2","v":1}"#.to_vec();
    hub.add_commit(REPO, &commit('e'), &v1);
    hub.set_ref(REPO, "v1.0", &commit('e'));
    let world = World::with_hub(&hub);

    let tagged = world.resolve("hf:org/coder@v1.0").unwrap();
    assert_eq!(
        tagged.path,
        world.repo_dir(REPO).join("snapshots").join(commit('e'))
    );
    assert_eq!(
        std::fs::read(tagged.path.join("config.json")).unwrap(),
        v1[0].1
    );
    let v1_ref = std::fs::read_to_string(world.repo_dir(REPO).join("refs/v1.0")).unwrap();
    assert_eq!(v1_ref, commit('e'));
    assert!(!world.repo_dir(REPO).join("refs/main").exists());
    let info = hub
        .requests()
        .into_iter()
        .find(|r| r.path.starts_with("/api/"))
        .unwrap();
    assert_eq!(info.path, "/api/models/org/coder/revision/v1.0");

    let by_sha = world
        .resolve(&format!("hf:org/coder@{}", commit('a')))
        .unwrap();
    assert_eq!(
        by_sha.path,
        world.repo_dir(REPO).join("snapshots").join(commit('a'))
    );
    // A commit needs no ref; the shared weights blob was not fetched twice.
    assert!(!world.repo_dir(REPO).join("refs").join(commit('a')).exists());
    assert_eq!(cdn_gets(&hub).len(), 1);
}

#[test]
fn concurrent_downloads_share_one_blob() {
    let (hub, files) = hub_with_checkpoint();
    hub.slow(Duration::from_millis(5));
    let world = World::with_hub(&hub);
    let results: Vec<_> = std::thread::scope(|scope| {
        let runs: Vec<_> = (0..2)
            .map(|_| {
                let resolver = Resolver::new(world.settings.clone());
                scope.spawn(move || resolver.resolve("hf:org/coder", &mut NoProgress))
            })
            .collect();
        runs.into_iter()
            .map(|run| run.join().expect("thread"))
            .collect()
    });
    for result in &results {
        assert_eq!(result.as_ref().unwrap().format, ModelFormat::SafetensorsDir);
    }
    world.assert_cached(
        REPO,
        &commit('a'),
        "model.safetensors",
        content(&files, "model.safetensors"),
    );
    assert_eq!(
        cdn_gets(&hub).len(),
        1,
        "the second waited for the first's download"
    );
    let blobs = tree(&world.repo_dir(REPO).join("blobs"));
    assert!(
        !blobs.iter().any(|f| f.ends_with(".incomplete")),
        "{blobs:?}"
    );
}

/// Records the progress calls.
#[derive(Default)]
struct Recorder(Vec<String>);

impl Progress for Recorder {
    fn start(&mut self, file: &str, total: Option<u64>) {
        self.0.push(format!("start {file} {total:?}"));
    }
    fn advance(&mut self, _bytes: u64) {}
    fn finish(&mut self) {
        self.0.push("finish".to_string());
    }
}

#[test]
fn progress_reports_each_downloaded_file_with_its_size() {
    let (hub, files) = hub_with_checkpoint();
    let world = World::with_hub(&hub);
    let mut recorder = Recorder::default();
    world
        .resolver()
        .resolve("hf:org/coder", &mut recorder)
        .unwrap();
    let size = content(&files, "model.safetensors").len();
    assert!(
        recorder
            .0
            .contains(&format!("start model.safetensors Some({size})")),
        "{:?}",
        recorder.0
    );
    assert_eq!(
        recorder.0.iter().filter(|c| c.starts_with("start")).count(),
        5
    );
    assert_eq!(recorder.0.iter().filter(|c| *c == "finish").count(), 5);
}

#[test]
fn download_broken_every_time_keeps_the_partial_file_for_the_next_run() {
    let (hub, files) = hub_with_checkpoint();
    // Five attempts, each cut after 10 000 bytes: the resolve gives up with 50 000 on disk.
    hub.cut_after("model.safetensors", 10_000, 5);
    let world = World::with_hub(&hub);
    let error = world.resolve("hf:org/coder").unwrap_err();
    let message = error.to_string();
    assert!(
        message.starts_with(
            "the download of model.safetensors from org/coder stopped at 50000 of 300000 bytes"
        ),
        "{message}"
    );
    assert!(message.ends_with("run again to resume it"), "{message}");
    let weights = content(&files, "model.safetensors");
    let partial = world
        .repo_dir(REPO)
        .join("blobs")
        .join(format!("{}.incomplete", sha256_hex(weights)));
    assert_eq!(std::fs::read(&partial).unwrap(), &weights[..50_000]);

    hub.clear_requests();
    world.resolve("hf:org/coder").unwrap();
    assert_eq!(cdn_gets(&hub), [Some("bytes=50000-".to_string())]);
    world.assert_cached(REPO, &commit('a'), "model.safetensors", weights);
}

#[test]
fn pull_follows_a_moved_branch_that_resolve_leaves_alone() {
    let (hub, _) = hub_with_checkpoint();
    let world = World::with_hub(&hub);
    let first = world.resolve("hf:org/coder").unwrap();
    let mut moved = checkpoint_files();
    moved[0].1 = br#"{"model_type":"qwen2","moved":true}"#.to_vec();
    hub.add_commit(REPO, &commit('f'), &moved);
    hub.set_ref(REPO, "main", &commit('f'));

    hub.clear_requests();
    assert_eq!(
        world.resolve("hf:org/coder").unwrap(),
        first,
        "the cached commit, no request"
    );
    assert!(hub.requests().is_empty());
    let name = redraft_models::ModelName::parse("hf:org/coder").unwrap();
    let pulled = world.resolver().pull(&name, &mut NoProgress).unwrap();
    assert_eq!(
        pulled.path,
        world.repo_dir(REPO).join("snapshots").join(commit('f'))
    );
    let main = std::fs::read_to_string(world.repo_dir(REPO).join("refs/main")).unwrap();
    assert_eq!(main, commit('f'));
    assert_eq!(
        cdn_gets(&hub).len(),
        0,
        "the unchanged weights blob was reused"
    );
    assert_eq!(world.resolve("hf:org/coder").unwrap(), pulled);
}

/// A cached file cut short (a full disk, a copy killed half way) is what the snapshot shows
/// until `pull` runs: `pull` compares each cached file's size with the Hub's and fetches a
/// damaged one again, leaving the intact ones alone.
#[test]
fn pull_fetches_again_a_cached_file_cut_short() {
    let (hub, files) = hub_with_checkpoint();
    let world = World::with_hub(&hub);
    world.resolve("hf:org/coder").unwrap();
    let weights = content(&files, "model.safetensors");
    let blob = world.repo_dir(REPO).join("blobs").join(sha256_hex(weights));
    std::fs::write(&blob, &weights[..1000]).unwrap();

    hub.clear_requests();
    let name = redraft_models::ModelName::parse("hf:org/coder").unwrap();
    world.resolver().pull(&name, &mut NoProgress).unwrap();
    assert_eq!(cdn_gets(&hub), [None], "only the damaged file, whole");
    world.assert_cached(REPO, &commit('a'), "model.safetensors", weights);
    world.assert_cached(
        REPO,
        &commit('a'),
        "config.json",
        content(&files, "config.json"),
    );

    // Intact, a pull asks for metadata only.
    hub.clear_requests();
    world.resolver().pull(&name, &mut NoProgress).unwrap();
    assert!(cdn_gets(&hub).is_empty());
}
