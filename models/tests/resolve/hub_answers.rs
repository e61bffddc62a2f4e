//! What the Hub (or a mirror, or the CDN) answers besides the files: redirects of a renamed
//! repository, busy answers with `Retry-After`, a token it does not accept, a gated
//! repository, a CDN on another origin.

use redraft_models::{Error, ModelFormat};

use crate::{checkpoint_files, commit, World};
use redraft_tests::fake_hub::FakeHub;

const REPO: &str = "org/coder";
const SECRET: &str = "hf_SeCrEt0123456789";

fn hub_with_checkpoint() -> FakeHub {
    let hub = FakeHub::start();
    hub.add_commit(REPO, &commit('a'), &checkpoint_files());
    hub.set_ref(REPO, "main", &commit('a'));
    hub
}

/// The Hub answers a renamed repository's URLs (and a name in another case) with a relative
/// 307 to the new name, the API's too: followed, the files land under the name as given (as
/// huggingface_hub files them), and the token goes along to the same origin.
#[test]
fn a_renamed_repository_is_followed_to_its_new_name() {
    let hub = hub_with_checkpoint();
    hub.rename("old-org/coder", REPO);
    hub.require_token(SECRET);
    let world = World::with_hub(&hub).token(SECRET);
    let resolved = world.resolve("hf:old-org/coder").unwrap();
    assert_eq!(resolved.format, ModelFormat::SafetensorsDir);
    assert_eq!(
        resolved.path,
        world
            .repo_dir("old-org/coder")
            .join("snapshots")
            .join(commit('a'))
    );
    let api: Vec<String> = hub
        .requests()
        .into_iter()
        .filter(|r| r.path.starts_with("/api/"))
        .map(|r| r.path)
        .collect();
    assert_eq!(
        api,
        [
            "/api/models/old-org/coder/revision/main",
            "/api/models/org/coder/revision/main"
        ]
    );
}

/// A busy answer (429, 503, ...) is asked again after its `Retry-After`; one that stays busy,
/// or asks for a wait longer than redraft waits, is an error saying when to run again.
#[test]
fn busy_answers_are_retried_after_retry_after_and_a_long_wait_is_said() {
    let hub = hub_with_checkpoint();
    hub.busy(503, Some(0), 2);
    let world = World::with_hub(&hub);
    world.resolve("hf:org/coder").unwrap();

    let hub = hub_with_checkpoint();
    hub.busy(429, Some(3600), 1);
    let world = World::with_hub(&hub);
    let error = world.resolve("hf:org/coder").unwrap_err();
    assert!(
        matches!(error, Error::Busy { status: 429, .. }),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.ends_with(
            "answered 429 and asks to wait 3600 s; run again after that (requests with \
             HF_TOKEN set get a higher rate limit)"
        ),
        "{message}"
    );
    assert_eq!(hub.requests().len(), 1, "not asked again");

    let hub = hub_with_checkpoint();
    hub.busy(502, Some(0), 10);
    let world = World::with_hub(&hub);
    let message = world.resolve("hf:org/coder").unwrap_err().to_string();
    assert!(
        message.ends_with("answered 502 4 times in a row; run again later"),
        "{message}"
    );
    assert_eq!(hub.requests().len(), 4, "once, then three retries");
}

/// A token the Hub does not know (mistyped, revoked) is said to be the problem, not the
/// repository's terms; a gated repository is said to be gated, with what to do; the token
/// is never shown.
#[test]
fn a_refused_token_and_a_gated_repository_say_what_to_do() {
    let hub = hub_with_checkpoint();
    hub.require_token(SECRET);
    const WRONG: &str = "hf_WrOnG9876543210";
    let world = World::with_hub(&hub).token(WRONG);
    let message = world.resolve("hf:org/coder").unwrap_err().to_string();
    assert!(
        message.contains(
            "refused access to org/coder (401: Invalid credentials in Authorization header); \
             the Hub did not accept the token (HF_TOKEN, or the one `hf auth login` saved)"
        ),
        "{message}"
    );
    assert!(!message.contains(WRONG), "{message}");

    let hub = hub_with_checkpoint();
    hub.gate(REPO);
    let anonymous = World::with_hub(&hub);
    let message = anonymous.resolve("hf:org/coder").unwrap_err().to_string();
    assert!(
        message.contains("(403: Access to model org/coder is restricted); it is gated: accept its terms on its Hub page, then set HF_TOKEN"),
        "{message}"
    );
    let signed_in = World::with_hub(&hub).token(SECRET);
    let message = signed_in.resolve("hf:org/coder").unwrap_err().to_string();
    assert!(
        message.contains(
            "it is gated: accept its terms on its Hub page, signed in as the token's owner"
        ),
        "{message}"
    );
    assert!(!message.contains(SECRET), "{message}");
}

/// LFS files redirect to a CDN on another origin (absolute `Location`): the token goes to
/// the Hub, never to the CDN.
#[test]
fn the_token_is_not_sent_to_a_cdn_on_another_origin() {
    let hub = hub_with_checkpoint();
    hub.require_token(SECRET);
    let cdn = hub_with_checkpoint();
    hub.cdn_at(&cdn.url);
    let world = World::with_hub(&hub).token(SECRET);
    world.resolve("hf:org/coder").unwrap();
    let cdn_gets: Vec<_> = cdn
        .requests()
        .into_iter()
        .filter(|r| r.path.starts_with("/cdn/"))
        .collect();
    assert_eq!(cdn_gets.len(), 1, "{cdn_gets:?}");
    assert_eq!(cdn_gets[0].header("authorization"), None);
    assert!(hub
        .requests()
        .iter()
        .all(|r| r.header("authorization") == Some(&*format!("Bearer {SECRET}"))));
}

/// A listing with odd names: one beyond ASCII is fetched (its URL percent-encoded), one that
/// would leave the snapshot (`..`; no Hub repository can hold one, a hostile mirror could) is
/// neither picked nor offered, and nothing is written outside the cache.
#[test]
fn odd_file_names_in_a_listing_never_leave_the_cache() {
    let hub = FakeHub::start();
    let unicode = crate::weights(500, 60);
    hub.add_commit(
        "org/odd-GGUF",
        &commit('b'),
        &[
            ("../evil-Q4_K_M.gguf", crate::weights(500, 61)),
            ("sub/../../evil-Q5_K_M.gguf", crate::weights(500, 62)),
            ("modèle 模型-Q8_0.gguf", unicode.clone()),
        ],
    );
    hub.set_ref("org/odd-GGUF", "main", &commit('b'));
    let world = World::with_hub(&hub);
    let resolved = world.resolve("hf:org/odd-GGUF").unwrap();
    assert!(
        resolved.path.ends_with("modèle 模型-Q8_0.gguf"),
        "{resolved:?}"
    );
    world.assert_cached(
        "org/odd-GGUF",
        &commit('b'),
        "modèle 模型-Q8_0.gguf",
        &unicode,
    );
    let message = world
        .resolve("hf:org/odd-GGUF:Q4_K_M")
        .unwrap_err()
        .to_string();
    assert_eq!(
        message,
        "org/odd-GGUF@main has no GGUF file matching `Q4_K_M`; its GGUF files: modèle 模型-Q8_0.gguf"
    );
    let everything = crate::tree(world.dir.path());
    assert!(
        everything
            .iter()
            .all(|f| f.starts_with("hub/") && !f.contains("evil")),
        "{everything:?}"
    );
}
