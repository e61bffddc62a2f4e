//! Downloads that meet trouble in the cache: a blob cut short by someone else, another process
//! fetching the same blob, a partial file left by a killed run, a cache that cannot be written.

use std::sync::mpsc;
use std::time::Duration;

use redraft_models::{ModelName, NoProgress, Progress};

use crate::{checkpoint_files, commit, World};
use redraft_tests::fake_hub::{sha256_hex, FakeHub};

const REPO: &str = "org/coder";

fn hub_with_checkpoint() -> (FakeHub, Vec<u8>) {
    let hub = FakeHub::start();
    let files = checkpoint_files();
    hub.add_commit(REPO, &commit('a'), &files);
    hub.set_ref(REPO, "main", &commit('a'));
    let weights = files
        .into_iter()
        .find(|(f, _)| *f == "model.safetensors")
        .expect("weights")
        .1;
    (hub, weights)
}

/// A blob cut short in the cache (a full disk, another tool's killed copy) is not linked into
/// a new snapshot that shares it: when `pull` follows a moved branch to a commit with the same
/// weights, the blob's size is checked against the Hub's and the file fetched again.
#[test]
fn a_blob_cut_short_is_fetched_again_before_a_new_snapshot_links_it() {
    let (hub, weights) = hub_with_checkpoint();
    let world = World::with_hub(&hub);
    world.resolve("hf:org/coder").unwrap();
    let blob = world
        .repo_dir(REPO)
        .join("blobs")
        .join(sha256_hex(&weights));
    std::fs::write(&blob, &weights[..1000]).unwrap();
    let mut moved = checkpoint_files();
    moved[0].1 = br#"{"model_type":"qwen2","moved":true}"#.to_vec();
    hub.add_commit(REPO, &commit('f'), &moved);
    hub.set_ref(REPO, "main", &commit('f'));

    let name = ModelName::parse("hf:org/coder").unwrap();
    let pulled = world.resolver().pull(&name, &mut NoProgress).unwrap();
    assert_eq!(
        pulled.path,
        world.repo_dir(REPO).join("snapshots").join(commit('f'))
    );
    world.assert_cached(REPO, &commit('f'), "model.safetensors", &weights);
}

/// Reports when a download waits for another; the lock's holder is told through `waited`.
struct Waiter(mpsc::Sender<String>);

impl Progress for Waiter {
    fn start(&mut self, _file: &str, _total: Option<u64>) {}
    fn advance(&mut self, _bytes: u64) {}
    fn finish(&mut self) {}
    fn waiting(&mut self, file: &str) {
        let _ = self.0.send(file.to_string());
    }
}

/// A second download of a blob another process is fetching (it holds the blob's lock, as
/// huggingface_hub's would) says that it waits, then goes on once the lock is free.
#[test]
fn a_download_waiting_for_another_says_so() {
    let (hub, weights) = hub_with_checkpoint();
    let world = World::with_hub(&hub);
    let lock = world
        .settings
        .hub_cache
        .join(".locks/models--org--coder")
        .join(format!("{}.lock", sha256_hex(&weights)));
    std::fs::create_dir_all(lock.parent().unwrap()).unwrap();
    let held = std::fs::File::create(&lock).unwrap();
    held.lock().unwrap();
    let (told, waited) = mpsc::channel();
    let resolver = world.resolver();
    let said = std::thread::scope(|scope| {
        let run = scope.spawn(move || resolver.resolve("hf:org/coder", &mut Waiter(told)));
        // Released once the download says it waits (or, should it never say so, after a
        // minute: then this test fails instead of hanging).
        let said = waited.recv_timeout(Duration::from_secs(60));
        held.unlock().unwrap();
        run.join().expect("thread").unwrap();
        said
    });
    assert_eq!(said.as_deref(), Ok("model.safetensors"));
    world.assert_cached(REPO, &commit('a'), "model.safetensors", &weights);
}

/// Records the progress calls that tell a resumed download from a fresh one.
#[derive(Default)]
struct Recorder(Vec<String>);

impl Progress for Recorder {
    fn start(&mut self, file: &str, _total: Option<u64>) {
        self.0.push(format!("start {file}"));
    }
    fn advance(&mut self, _bytes: u64) {}
    fn finish(&mut self) {}
    fn resume(&mut self, bytes: u64) {
        self.0.push(format!("resume {bytes}"));
    }
}

/// A rerun after a killed download says that it resumes, and from where.
#[test]
fn a_rerun_says_it_resumes_a_killed_download() {
    let (hub, weights) = hub_with_checkpoint();
    let world = World::with_hub(&hub);
    let blobs = world.repo_dir(REPO).join("blobs");
    std::fs::create_dir_all(&blobs).unwrap();
    let partial = blobs.join(format!("{}.incomplete", sha256_hex(&weights)));
    std::fs::write(&partial, &weights[..123_456]).unwrap();
    let mut recorder = Recorder::default();
    world
        .resolver()
        .resolve("hf:org/coder", &mut recorder)
        .unwrap();
    let weights_calls: Vec<&str> = recorder
        .0
        .iter()
        .map(String::as_str)
        .skip_while(|c| *c != "start model.safetensors")
        .collect();
    assert_eq!(weights_calls, ["start model.safetensors", "resume 123456"]);
    world.assert_cached(REPO, &commit('a'), "model.safetensors", &weights);
}

/// A cache that is a file (or read-only, or another user's) is named with the variable that
/// moves it; nothing is written elsewhere.
#[test]
fn a_cache_that_cannot_be_written_says_which_variable_moves_it() {
    let (hub, _) = hub_with_checkpoint();
    let mut world = World::with_hub(&hub);
    let file = world.dir.path().join("hub-is-a-file");
    std::fs::write(&file, "x").unwrap();
    world.settings.hub_cache = file.clone();
    let message = world.resolve("hf:org/coder").unwrap_err().to_string();
    let blobs = file.join("models--org--coder/blobs");
    assert!(
        message.starts_with(&format!("could not create {}: ", blobs.display())),
        "{message}"
    );
    assert!(
        message.ends_with(
            "the Hugging Face cache must be a directory redraft can write: set HF_HUB_CACHE \
             (or HF_HOME) to one"
        ),
        "{message}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "x");
}
