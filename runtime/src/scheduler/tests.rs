//! The scheduler as a door drives it, on the embedded default model: model loads while the
//! thread runs, jobs without a model, a FIM job sent to a remote backend (and one that is slow,
//! which holds up no job of the model's), next edits over the plan's region, kept caches that
//! leave a next edit what a fresh cache gives, and one cache policy per job whichever loop runs
//! it.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redraft_context::edit::{parse_patches, unified_diff, HistoryEdit};
use redraft_context::{Language, Source};
use redraft_engine::sampler::{Effort, SamplerConfig};
use redraft_engine::DeviceSpec;
use redraft_engine::{Completion, ContextCache};
use redraft_suggest::edit::{next_edit, EditInput, DRAFT_TAU};
use redraft_suggest::fim::FimOptions;
use serde_json::json;

use super::run::finish_fim;
use super::*;

fn config(max_batch: usize) -> LoopConfig {
    LoopConfig {
        max_batch,
        max_queue: 16,
        cache: SamplerConfig::default().cache,
        kept_bytes: kept::DEFAULT_MIB << 20,
        idle_refresh: None,
        door: "redraft test",
    }
}

fn engine() -> Engine {
    crate::default_model::load_or_default(None, DeviceSpec::Cpu).unwrap()
}

fn start(engine: Result<Engine, String>, max_batch: usize) -> Scheduler {
    Scheduler::start(engine, config(max_batch), Arc::new(Metrics::new())).0
}

/// `ticket`'s answer, waited for on this thread.
fn wait(mut ticket: Ticket) -> Result<Answer, JobError> {
    let answer = ticket
        .reply
        .blocking_recv()
        .unwrap_or_else(|_| Err(JobError::Failed("gone".into())));
    ticket.guard.disarm();
    answer
}

fn run(scheduler: &Scheduler, work: Work, client: Option<&str>) -> Result<Answer, JobError> {
    let submit = Submit {
        client: client.map(str::to_string),
        ..Submit::default()
    };
    wait(scheduler.submit(work, submit).expect("queued"))
}

const TEXT: &str = "fn main() {\n    let total = \n}\n";

fn fim(text: &str, backend: Option<crate::backend::BackendConfig>) -> Work {
    Work::Fim(FimWork {
        text: text.to_string(),
        cursor: text.find(" = ").unwrap() + 3,
        language: Language::Rust,
        tree: None,
        neighbours: Vec::new(),
        // A shipped model's tuned inline bar is not what these tests are about.
        options: FimOptions {
            min_confidence: Some(0.0),
            ..FimOptions::new(8, SamplerConfig::effort(Effort::Low))
        },
        stop: Vec::new(),
        backend,
        effort: None,
    })
}

fn fim_answer(answer: Result<Answer, JobError>) -> FimAnswer {
    match answer {
        Ok(Answer::Fim(answer)) => answer,
        other => panic!("not a FIM answer: {other:?}"),
    }
}

fn edit_answer(answer: Result<Answer, JobError>) -> EditAnswer {
    match answer {
        Ok(Answer::Edit(answer)) => answer,
        other => panic!("not a next-edit answer: {other:?}"),
    }
}

/// A client that is gone (the language server's closed document) leaves no cache behind: its
/// next job, were it to come, starts cold, in both loops.
#[test]
fn a_forgotten_clients_caches_are_dropped() {
    for max_batch in [1, 4] {
        let scheduler = start(Ok(engine()), max_batch);
        // A cold start makes a full pass over the prompt; one from a kept cache does not.
        let full_passes = |scheduler: &Scheduler| {
            fim_answer(run(scheduler, fim(TEXT, None), Some("file:///a.rs")))
                .report
                .full_passes
        };
        assert!(full_passes(&scheduler) >= 1);
        assert_eq!(full_passes(&scheduler), 0, "batch {max_batch}: kept");
        scheduler.forget("file:///b.rs");
        assert_eq!(
            full_passes(&scheduler),
            0,
            "batch {max_batch}: another client's"
        );
        scheduler.forget("file:///a.rs");
        assert!(full_passes(&scheduler) >= 1, "batch {max_batch}: forgotten");
    }
}

/// Jobs whose clients left hold no place in a full queue: a new job finds them answered
/// cancelled and takes a place; with none of them, a full queue refuses it.
#[test]
fn a_full_queue_answers_its_cancelled_jobs_to_make_room() {
    let queue = Queue::new(
        2,
        Arc::new(Metrics::new()),
        Ok(super::queue::ModelFacts::of(&engine())),
    );
    let job = || {
        let (reply, answer) = oneshot::channel();
        let flag = Arc::new(AtomicBool::new(false));
        let job = Job::new(
            fim(TEXT, None),
            Arc::clone(&flag),
            None,
            None,
            reply,
            None,
            None,
        );
        (job, flag, answer)
    };
    let (first, _, mut first_answer) = job();
    let (second, second_flag, mut second_answer) = job();
    queue.push(first).unwrap();
    queue.push(second).unwrap();
    let (third, _, _) = job();
    assert_eq!(queue.push(third).err(), Some(Rejected::Full));
    second_flag.store(true, Ordering::Relaxed);
    let (fourth, _, _) = job();
    queue.push(fourth).expect("the cancelled job made room");
    assert_eq!(second_answer.try_recv().unwrap(), Err(JobError::Cancelled));
    assert!(
        first_answer.try_recv().is_err(),
        "the first job still waits"
    );
}

/// A model file no check foresaw must not take the thread that owns the model down with it.
#[test]
fn a_panic_while_reading_a_model_is_an_error() {
    let err = crate::default_model::unpanicked::<()>(|| panic!("attempt to divide by zero"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("reading the model failed: attempt to divide by zero"),
        "{err}"
    );
    let formatted = crate::default_model::unpanicked::<()>(|| panic!("tensor {} misaligned", 3))
        .unwrap_err()
        .to_string();
    assert!(formatted.contains("tensor 3 misaligned"), "{formatted}");
}

#[test]
fn a_model_loaded_while_running_serves_the_jobs_queued_after_it() {
    let scheduler = start(Err("the model is still loading".into()), 1);
    // Nothing loaded, nothing coming: refused at once.
    assert_eq!(
        scheduler.submit(fim(TEXT, None), Submit::default()).err(),
        Some(Rejected::NoModel("the model is still loading".into()))
    );
    assert_eq!(scheduler.positions(), 0);
    let load = scheduler.load(None, DeviceSpec::Cpu);
    // Queued behind the load, answered on the new model.
    let ticket = scheduler
        .submit(fim(TEXT, None), Submit::default())
        .expect("a job waits for a queued load");
    let loaded = load
        .blocking_recv()
        .unwrap()
        .expect("the embedded model loads");
    assert!(loaded.starts_with(crate::default_model::ORIGIN), "{loaded}");
    assert!(loaded.ends_with(" on cpu"), "{loaded}");
    let answer = fim_answer(wait(ticket));
    assert_eq!(answer.choices.len(), 1);
    assert!(answer.report.backend.is_none());
    assert!(answer.report.full_passes >= 1, "{:?}", answer.report);
    let (config, ..) = crate::default_model::FILES
        .read(&candle_core::Device::Cpu)
        .unwrap();
    assert_eq!(scheduler.positions(), config.max_position_embeddings);
    assert_eq!(scheduler.missing(), None);

    // A model that is not there (a mistyped setting) is found missing before the loaded one
    // goes: that one goes on serving, and the answer says so.
    let load = scheduler.load(Some(PathBuf::from("/nonexistent/model")), DeviceSpec::Cpu);
    let failure = load.blocking_recv().unwrap().unwrap_err();
    assert!(failure.reason.contains("/nonexistent/model"), "{failure}");
    assert_eq!(failure.kept.as_deref(), Some(loaded.as_str()));
    assert_eq!(scheduler.missing(), None);
    fim_answer(run(&scheduler, fim(TEXT, None), None));

    // A model whose files read but which does not build (its weights are missing) fails after
    // the old model went: no model is left. The jobs queued behind it learn why, later ones
    // are refused with the same reason. (The load may fail before the job reaches the queue:
    // then the job is one of the later ones.)
    let unbuildable = tempfile::tempdir().unwrap();
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/small-model");
    for file in ["config.json", "redraft.json", "tokenizer.json"] {
        std::fs::copy(fixture.join(file), unbuildable.path().join(file)).unwrap();
    }
    let load = scheduler.load(Some(unbuildable.path().to_path_buf()), DeviceSpec::Cpu);
    let behind = scheduler.submit(fim(TEXT, None), Submit::default());
    let failure = load.blocking_recv().unwrap().unwrap_err();
    assert_eq!(failure.kept, None, "{failure}");
    let why = failure.reason;
    assert!(why.contains("model.safetensors"), "{why}");
    match behind {
        Ok(ticket) => assert_eq!(wait(ticket), Err(JobError::NoModel(why.clone()))),
        Err(refused) => assert_eq!(refused, Rejected::NoModel(why.clone())),
    }
    assert_eq!(
        JobError::NoModel(why.clone()).to_string(),
        format!("no model is loaded ({why})")
    );
    assert_eq!(
        scheduler.submit(fim(TEXT, None), Submit::default()).err(),
        Some(Rejected::NoModel(why.clone()))
    );
    assert_eq!(scheduler.missing(), Some(why));

    // And back: the batched loop reloads the same way.
    let batched = start(Err("none yet".into()), 4);
    batched
        .load(None, DeviceSpec::Cpu)
        .blocking_recv()
        .unwrap()
        .unwrap();
    fim_answer(run(&batched, fim(TEXT, None), None));
    scheduler
        .load(None, DeviceSpec::Cpu)
        .blocking_recv()
        .unwrap()
        .unwrap();
    fim_answer(run(&scheduler, fim(TEXT, None), None));
}

#[test]
fn a_fim_job_sent_to_a_backend_runs_through_the_runtime_with_or_without_a_model() {
    let (url, seen) =
        redraft_tests::fake_openai::start("items.len() + 1;\n    println!(\"{total}\");");
    let mut config = crate::backend::BackendConfig::new(url.as_str());
    config.model = Some("fake-coder".into());
    for scheduler in [start(Err("none".into()), 1), start(Ok(engine()), 4)] {
        let answer = fim_answer(run(&scheduler, fim(TEXT, Some(config.clone())), None));
        // The context layer's finish cut the middle where its line ends, as for a local model.
        assert_eq!(answer.suggestions, ["items.len() + 1;"]);
        assert_eq!(answer.choices[0].text, "items.len() + 1;");
        assert_eq!(answer.choices[0].finish_reason, FinishReason::Stop);
        assert_eq!((answer.prompt_tokens, answer.completion_tokens), (7, 5));
        assert_eq!(
            answer.report.backend.as_deref(),
            Some(format!("{url}/v1/completions").as_str())
        );
        assert_eq!(answer.report.full_passes, 0);
    }
    let requests = seen.lock().unwrap().clone();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0]["model"], json!("fake-coder"));
    assert!(
        requests[0]["prompt"]
            .as_str()
            .unwrap()
            .contains("    let total = <|fim_suffix|>\n}"),
        "{}",
        requests[0]
    );
}

/// A document after a rename typed in it, the cursor after it and the rename as history: what
/// `redraft complete --next-edit` is asked in the language server's tests.
struct Renamed {
    text: String,
    cursor: usize,
    history: Vec<HistoryEdit>,
}

const PATH: &str = "src/lib.rs";

fn renamed(before: &str, at: &str, typed: &str) -> Renamed {
    let at = before.find(at).unwrap() + at.len();
    let mut text = before.to_string();
    text.insert_str(at, typed);
    let diff = unified_diff(PATH, before, &text, 3);
    let history = parse_patches(&diff)
        .unwrap()
        .iter()
        .flat_map(HistoryEdit::from_patch)
        .collect();
    Renamed {
        text,
        cursor: at + typed.len(),
        history,
    }
}

fn renames() -> Vec<Renamed> {
    vec![
        renamed(
            "/* é 😀 */ fn area(w: u32, h: u32) -> u32 {\n    let s = w * h;\n    s + w\n}\n",
            "(w",
            "idth",
        ),
        renamed(
            "fn aire_é(w: u32, h: u32) -> u32 {\n    let é = 1;\n    w * h * é\n}\n",
            "(w",
            "idth",
        ),
        renamed(
            "struct Point {\n    x: f64,\n    y: f64,\n}\n\n/// Norme — 😀\nfn norm(p: &Point) -> f64 {\n    (p.x * p.x + p.y * p.y).sqrt()\n}\n",
            "(p",
            "oint",
        ),
    ]
}

/// The language server's next-edit sampler: `redraft complete --next-edit`'s, with an exact
/// first pass over a kept cache.
fn lsp_sampler() -> SamplerConfig {
    let mut sampler = SamplerConfig::effort(Effort::Low);
    sampler.draft_tau = Some(DRAFT_TAU);
    sampler.cache.realign = None;
    sampler
}

fn no_guard() -> EditLimits {
    EditLimits {
        max_changed_fraction: f64::INFINITY,
        ..EditLimits::default()
    }
}

fn edit(renamed: &Renamed, sampler: SamplerConfig, region: Option<Range<usize>>) -> Work {
    Work::Edit(EditWork {
        document: renamed.text.clone(),
        cursor: renamed.cursor,
        region,
        path: PATH.into(),
        language: Language::Rust,
        tree: None,
        history: renamed.history.clone(),
        sampler,
        limits: no_guard(),
        effort: None,
    })
}

/// The next edit of `renamed` as the command line computes it: the pipeline alone, on a fresh
/// cache.
fn fresh(engine: &Engine, renamed: &Renamed) -> redraft_suggest::edit::EditOutcome {
    let input = EditInput {
        source: Source {
            text: &renamed.text,
            cursor: renamed.cursor,
            language: Language::Rust,
            tree: None,
        },
        path: PATH,
        history: &renamed.history,
    };
    let budget = no_guard().budget(engine.model().config().max_position_embeddings);
    next_edit(
        engine,
        &input,
        &budget,
        lsp_sampler(),
        &mut ContextCache::default(),
        Default::default(),
    )
    .unwrap()
}

#[test]
fn a_next_edit_over_the_plans_region_is_the_pipelines_in_document_offsets() {
    let engine = engine();
    let expected: Vec<_> = renames().iter().map(|r| fresh(&engine, r)).collect();
    let scheduler = start(Ok(engine), 1);
    for (renamed, expected) in renames().iter().zip(&expected) {
        let answer = edit_answer(run(&scheduler, edit(renamed, lsp_sampler(), None), None));
        assert_eq!(answer.edits, expected.suggestion.edits);
        let report = &answer.report;
        assert_eq!(report.region, expected.plan.region_range);
        assert_eq!(report.reason, expected.plan.reason);
        assert_eq!(report.rewrote_too_much, expected.rewrote_too_much);
        assert_eq!(report.steps, expected.completion.steps);
        // Without a region of the client's, the rewrite covers the plan's.
        let mut applied = renamed.text.clone();
        for edit in answer.edits.iter().rev() {
            applied.replace_range(edit.range.clone(), &edit.new_text);
        }
        let region = &report.region;
        let grown = applied.len() + region.len() - renamed.text.len();
        assert_eq!(
            answer.new_region,
            applied[region.start..region.start + grown]
        );
        assert_eq!(answer.changed, !answer.edits.is_empty());
        // A client's region cuts the rewrite to it (the HTTP door's).
        let line = renamed.text[..renamed.cursor]
            .rfind('\n')
            .map_or(0, |i| i + 1);
        let client = line..renamed.cursor;
        let cut = edit_answer(run(
            &scheduler,
            edit(renamed, lsp_sampler(), Some(client.clone())),
            None,
        ));
        assert_eq!(cut.edits, answer.edits);
        let inside = |e: &&redraft_context::edit::TextEdit| {
            e.range.start >= client.start && e.range.end <= client.end
        };
        assert_eq!(cut.changed, answer.edits.iter().any(|e| inside(&e)));
    }
}

/// The language server's next edits start from the kept cache their document's last next edit
/// left: with an exact first pass they are the command line's, whether that cache holds another
/// text (typed since) or the same one (asked again, after a completion in the same document).
#[test]
fn a_next_edit_from_a_kept_cache_is_what_a_fresh_cache_gives() {
    let engine = engine();
    let renames = renames();
    let expected: Vec<_> = renames.iter().map(|r| fresh(&engine, r)).collect();
    let scheduler = start(Ok(engine), 1);
    for round in 0..2 {
        for (renamed, expected) in renames.iter().zip(&expected) {
            fim_answer(run(&scheduler, fim_at(renamed), Some("doc")));
            for again in 0..2 {
                let answer = edit_answer(run(
                    &scheduler,
                    edit(renamed, lsp_sampler(), None),
                    Some("doc"),
                ));
                assert_eq!(
                    answer.edits, expected.suggestion.edits,
                    "round {round}, asked {again}: {}",
                    renamed.text
                );
            }
        }
    }
}

fn fim_at(renamed: &Renamed) -> Work {
    Work::Fim(FimWork {
        text: renamed.text.clone(),
        cursor: renamed.cursor,
        language: Language::Rust,
        tree: None,
        neighbours: Vec::new(),
        options: FimOptions::new(8, SamplerConfig::effort(Effort::Low)),
        stop: Vec::new(),
        backend: None,
        effort: None,
    })
}

fn with_cache(mut sampler: SamplerConfig, cache: CachePolicy) -> SamplerConfig {
    sampler.cache = cache;
    sampler
}

/// The loop's part of a job's cache policy: what it turns off is off, the prompt's pieces are
/// its own; the rest is the job's, FIM or next edit alike.
#[test]
fn a_jobs_cache_policy_is_its_own_within_the_loops() {
    let on = SamplerConfig::default().cache;
    let reuse = |radius| {
        Some(redraft_engine::sampler::Realign {
            radius,
            ..redraft_engine::sampler::Realign::DEFAULT
        })
    };
    let asked = CachePolicy {
        enabled: true,
        refresh_every: Some(3),
        realign: reuse(16),
        prompt_chunk: Some(32),
    };
    let jobs = |cache: CachePolicy| {
        let renamed = &renames()[0];
        let mut fim = fim(TEXT, None);
        if let Work::Fim(work) = &mut fim {
            work.options.sampler.cache = cache;
        }
        [fim, edit(renamed, with_cache(lsp_sampler(), cache), None)]
    };
    let in_loop = |realign, enabled, prompt_chunk| CachePolicy {
        enabled,
        realign,
        prompt_chunk,
        ..on
    };
    for work in jobs(asked) {
        let kind = work.kind();
        // The job's own, but for the loop's prompt pieces.
        assert_eq!(
            cache_policy(&work, &in_loop(reuse(8), true, None)),
            CachePolicy {
                prompt_chunk: None,
                ..asked
            },
            "{kind}"
        );
        assert_eq!(
            cache_policy(&work, &in_loop(reuse(8), true, Some(256))).prompt_chunk,
            Some(256),
            "{kind}"
        );
        // The loop turns edit reuse or the whole cache off for everyone.
        assert_eq!(
            cache_policy(&work, &in_loop(None, true, None)).realign,
            None,
            "{kind}"
        );
        assert!(
            !cache_policy(&work, &in_loop(reuse(8), false, None)).enabled,
            "{kind}"
        );
    }
    // A job that asks for an exact first pass (the language server's next edits) or no cache
    // gets it in a loop that reuses caches across edits.
    for work in jobs(CachePolicy {
        realign: None,
        ..on
    }) {
        assert_eq!(cache_policy(&work, &on).realign, None, "{}", work.kind());
    }
    for work in jobs(CachePolicy {
        enabled: false,
        ..on
    }) {
        assert!(!cache_policy(&work, &on).enabled, "{}", work.kind());
    }
}

/// The value of the sample `name` (with its labels) in `metrics`' text; 0 when absent.
fn metric(metrics: &Metrics, name: &str) -> f64 {
    let text = metrics.render();
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

/// The model passes `metrics` counted: full, window, edit.
fn passes(metrics: &Metrics) -> [f64; 3] {
    ["full", "window", "realign"]
        .map(|pass| metric(metrics, &format!("redraft_passes_total{{pass=\"{pass}\"}}")))
}

/// A job's record through a loop: the policy it asked for, its kind, the passes it cost (full,
/// window, edit) and its answer.
type Ran = (CachePolicy, &'static str, Vec<f64>, String);

/// FIM jobs and next edits of four clients, each asking for a cache policy of its own (as it
/// is, without edit reuse, without the cache, refreshed every other step), through a loop of
/// `max_batch` whose own policy is `in_loop`, one after another. Each job typed a character
/// after its client's last of its kind, so the second of each kind meets its client's kept
/// cache across an edit.
fn jobs_through(max_batch: usize, in_loop: CachePolicy, asked: &[CachePolicy]) -> Vec<Ran> {
    let before = "fn area(w: u32, h: u32) -> u32 {\n    let s = w * h;\n    s + w\n}\n";
    let typed = [renamed(before, "(w", "idt"), renamed(before, "(w", "idth")];
    let fim_texts = [
        "fn main() {\n    let total = \n}\n",
        "fn main() {\n    let totals = \n}\n",
    ];
    let metrics = Arc::new(Metrics::new());
    let config = LoopConfig {
        cache: in_loop,
        ..config(max_batch)
    };
    let (scheduler, _) = Scheduler::start(Ok(engine()), config, Arc::clone(&metrics));
    let mut ran = Vec::new();
    for (client, &cache) in asked.iter().enumerate() {
        let client = format!("doc {client}");
        let fims = fim_texts.iter().map(|text| {
            let mut work = fim(text, None);
            if let Work::Fim(work) = &mut work {
                work.options.sampler.cache = cache;
            }
            work
        });
        let edits = (typed.iter()).map(|r| edit(r, with_cache(lsp_sampler(), cache), None));
        for work in fims.chain(edits) {
            let kind = work.kind();
            let counted = passes(&metrics);
            let answer = match run(&scheduler, work, Some(&client)) {
                Ok(Answer::Fim(answer)) => format!("{:?}", answer.suggestions),
                Ok(Answer::Edit(answer)) => format!("{:?}", answer.edits),
                other => panic!("{other:?}"),
            };
            let spent = passes(&metrics).into_iter().zip(counted);
            ran.push((cache, kind, spent.map(|(n, c)| n - c).collect(), answer));
        }
    }
    ran
}

/// The same jobs cost the same passes of each kind and get the same answers one at a time and
/// batched, under a loop that reuses caches across edits and under one that does not: the two
/// loops choose a job's cache alike. A loop that used its own policy instead of the job's (the
/// batched one did) fails here (its lanes realign a kept cache where the job asked for an exact
/// first pass, use the cache where the job asked for none, refresh it on their own count), and
/// so does one that ignored what its loop turns off.
#[test]
fn the_serial_and_batched_loops_cache_a_job_alike() {
    let on = SamplerConfig::default().cache;
    let asked = [
        on,
        CachePolicy {
            realign: None,
            ..on
        },
        CachePolicy {
            enabled: false,
            ..on
        },
        CachePolicy {
            refresh_every: Some(2),
            ..on
        },
    ];
    let no_reuse = CachePolicy {
        realign: None,
        ..on
    };
    for in_loop in [on, no_reuse] {
        let serial = jobs_through(1, in_loop, &asked);
        let batched = jobs_through(4, in_loop, &asked);
        for (alone, together) in serial.iter().zip(&batched) {
            assert_eq!(
                alone, together,
                "one at a time, then batched, in {in_loop:?}"
            );
        }
        // The jobs did meet what either loop could have chosen otherwise: a kept cache
        // realigned across an edit only where the job and the loop allow it, no window pass
        // without the cache, more full passes refreshed.
        let spent = |cache: &CachePolicy, pass: usize| -> f64 {
            (serial.iter())
                .filter(|job| job.0 == *cache)
                .map(|job| job.2[pass])
                .sum()
        };
        let realigned = if in_loop == on { 1.0 } else { 0.0 };
        assert!(spent(&asked[0], 2) >= realigned, "{serial:?}");
        assert_eq!(spent(&asked[1], 2), 0.0, "{serial:?}");
        assert_eq!(spent(&asked[2], 1), 0.0, "{serial:?}");
        assert!(spent(&asked[3], 0) > spent(&asked[1], 0), "{serial:?}");
        if in_loop == no_reuse {
            let edits: f64 = serial.iter().map(|job| job.2[2]).sum();
            assert_eq!(edits, 0.0, "{serial:?}");
        }
    }
}

/// A stand-in backend that takes connections and never answers: a job sent to it runs until its
/// cancel flag (or its timeout) ends it. Each connection is reported once taken.
fn silent_backend() -> (String, std::sync::mpsc::Receiver<()>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (taken, connections) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut open = Vec::new();
        for stream in listener.incoming().flatten() {
            open.push(stream);
            if taken.send(()).is_err() {
                return;
            }
        }
    });
    (url, connections)
}

/// A backend job is no job of the model's: while its request is held, a job being decoded
/// finishes and one queued behind it runs, in either loop; the `running` gauge counts it, and
/// its client leaving closes the request and answers it as cancelled. Ordered by events, not
/// timed: the backend answers nothing, so a loop that ran the backend job itself would answer
/// the model's jobs only once it ended (its timeout), after it, which the checks below catch.
#[test]
fn a_slow_backend_job_holds_up_no_job_of_the_models() {
    let (url, connections) = silent_backend();
    let mut backend = crate::backend::BackendConfig::new(url.as_str());
    backend.model = Some("fake-coder".into());
    backend.timeout = Duration::from_secs(120);
    for max_batch in [1, 4] {
        let metrics = Arc::new(Metrics::new());
        let (scheduler, _) =
            Scheduler::start(Ok(engine()), config(max_batch), Arc::clone(&metrics));
        // A job the model decodes one token a step, running (its first draft came) when the
        // backend job comes.
        let mut long = fim(TEXT, None);
        if let Work::Fim(work) = &mut long {
            work.options = FimOptions::new(32, SamplerConfig::effort(Effort::High));
        }
        let submit = Submit {
            drafts: true,
            ..Submit::default()
        };
        let mut running = scheduler.submit(long, submit).expect("queued");
        running
            .drafts
            .as_mut()
            .unwrap()
            .blocking_recv()
            .expect("a first draft");
        let cancel = Arc::new(AtomicBool::new(false));
        let submit = Submit {
            cancel: Some(Arc::clone(&cancel)),
            ..Submit::default()
        };
        let mut slow = scheduler
            .submit(fim(TEXT, Some(backend.clone())), submit)
            .expect("queued");
        connections.recv().expect("the backend job's request");
        let behind = scheduler
            .submit(fim(TEXT, None), Submit::default())
            .expect("queued");
        for ticket in [running, behind] {
            let answer = fim_answer(wait(ticket));
            assert_eq!(answer.report.backend, None);
        }
        assert!(
            slow.reply.try_recv().is_err(),
            "--max-batch {max_batch}: the backend job ended before the model's jobs"
        );
        assert_eq!(metric(&metrics, "redraft_running_jobs"), 1.0);
        cancel.store(true, Ordering::Relaxed);
        assert_eq!(wait(slow), Err(JobError::Cancelled));
        assert_eq!(metric(&metrics, "redraft_running_jobs"), 0.0);
        let outcome = |outcome| {
            metric(
                &metrics,
                &format!("redraft_jobs_total{{kind=\"fim\",outcome=\"{outcome}\"}}"),
            )
        };
        assert_eq!((outcome("answered"), outcome("cancelled")), (2.0, 1.0));
    }
}

fn model_calls(report: &FimReport) -> usize {
    report.full_passes + report.window_passes + report.realign_passes
}

/// A job's effort means the preset of the model that runs it, bound when it runs: a load queued
/// before the job changes what `low` does; a job without an effort keeps its sampler as it is.
#[test]
fn a_jobs_effort_is_the_preset_of_the_model_that_runs_it() {
    let tuned = |low| redraft_tests::cli::tuned_small_model(json!({ "low": low }));
    let one_step = tuned(json!({"schedule": {"kind": "top-k", "k": 1}, "max_steps": 1}));
    let one_slot = tuned(json!({"schedule": {"kind": "top-k", "k": 1}}));
    let low = |effort| match fim(TEXT, None) {
        Work::Fim(work) => Work::Fim(FimWork { effort, ..work }),
        Work::Edit(_) => unreachable!(),
    };
    for max_batch in [1, 4] {
        let scheduler = start(Ok(Engine::load(one_step.path()).unwrap()), max_batch);
        let answer = fim_answer(run(&scheduler, low(Some(Effort::Low)), None));
        assert_eq!(
            model_calls(&answer.report),
            1,
            "batch {max_batch}: {:?}",
            answer.report
        );

        let load = scheduler.load(Some(one_slot.path().to_path_buf()), DeviceSpec::Cpu);
        let behind = scheduler
            .submit(low(Some(Effort::Low)), Submit::default())
            .expect("queued behind the load");
        load.blocking_recv()
            .unwrap()
            .expect("the tuned model loads");
        let answer = fim_answer(wait(behind));
        assert!(
            model_calls(&answer.report) > 1,
            "batch {max_batch}: {:?}",
            answer.report
        );

        // No effort: the built-in `low` the job was made with (at most 4 steps), not the
        // model's one slot per step.
        let as_given = fim_answer(run(&scheduler, low(None), None));
        let stepwise = fim_answer(run(&scheduler, low(Some(Effort::Low)), None));
        assert!(
            model_calls(&as_given.report) <= 4
                && model_calls(&as_given.report) < model_calls(&stepwise.report),
            "batch {max_batch}: {:?} vs {:?}",
            as_given.report,
            stepwise.report
        );
    }
}

/// A FIM job after `typed` was typed at the cursor, whose first pass realigns a kept cache
/// (recomputing 4 tokens on each side of the edit) until `refresh_after` such passes in a row.
fn keystroke(typed: &str, refresh_after: usize) -> Work {
    let mut work = fim(
        &format!("fn main() {{\n    let total = {typed}\n}}\n"),
        None,
    );
    if let Work::Fim(work) = &mut work {
        work.cursor += typed.len();
        work.options.sampler.cache.realign = Some(redraft_engine::sampler::Realign {
            radius: 4,
            refresh_after,
        });
    }
    work
}

/// Keystrokes of one client, each a FIM job whose first pass realigns the kept cache and
/// whose cache asks for an exact pass after two realigning passes in a row, through a loop of
/// `max_batch` with `idle_refresh`; with `next_edits`, each followed by a next edit of the same
/// client (its own kept cache, exact, then the newest, as the language server's precomputed
/// next edits leave it); with `pause`, each keystroke waits for the loop's idle refresh to end
/// before the next is sent. The full passes the FIM jobs paid, and the refreshes done.
fn keystrokes(
    max_batch: usize,
    idle_refresh: Option<Duration>,
    pause: bool,
    next_edits: bool,
) -> (f64, f64) {
    let metrics = Arc::new(Metrics::new());
    let config = LoopConfig {
        idle_refresh,
        ..config(max_batch)
    };
    let (scheduler, _) = Scheduler::start(Ok(engine()), config, Arc::clone(&metrics));
    let done =
        |metrics: &Metrics| metric(metrics, "redraft_idle_refreshes_total{outcome=\"done\"}");
    let mut fim_full = 0.0;
    for typed in ["", "s", "su", "sum", "sum_", "sum_o", "sum_of"] {
        let work = keystroke(typed, 2);
        let refreshed = done(&metrics);
        let full = passes(&metrics)[0];
        fim_answer(run(&scheduler, work, Some("doc")));
        fim_full += passes(&metrics)[0] - full;
        if next_edits {
            let renamed = &renames()[0];
            edit_answer(run(
                &scheduler,
                edit(renamed, lsp_sampler(), None),
                Some("doc"),
            ));
        }
        if pause && !typed.is_empty() {
            // The job realigned the kept cache: the loop refreshes it once idle.
            let waited = std::time::Instant::now();
            while done(&metrics) == refreshed {
                assert!(
                    waited.elapsed() < Duration::from_secs(30),
                    "no idle refresh"
                );
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }
    (fim_full, done(&metrics))
}

/// While the loop is idle it makes the client's realigned kept cache exact again (also behind a
/// next edit's newer, exact one), so a keystroke after a pause realigns from an exact cache and no keystroke pays the exact pass the refresh
/// schedule would otherwise ask for (every third job here); without pauses, or with the idle
/// refresh off, the schedule's exact passes come back. Either loop alike.
#[test]
fn a_pause_refreshes_the_kept_cache_so_no_keystroke_pays_the_exact_pass() {
    let idle = Some(Duration::from_millis(20));
    for max_batch in [1, 4] {
        // The first job's cold pass only; six refreshes, one after each realigning job, also
        // when a next edit's exact cache is the newest kept.
        for next_edits in [false, true] {
            assert_eq!(
                keystrokes(max_batch, idle, true, next_edits),
                (1.0, 6.0),
                "{max_batch}, {next_edits}"
            );
        }
        // The cold pass, then an exact pass after every two realigning ones.
        assert_eq!(
            keystrokes(max_batch, None, false, false),
            (3.0, 0.0),
            "{max_batch}"
        );
    }
}

/// What the idle refresh asks of the queue: a wait with a deadline ends idle when nothing
/// comes and with the job when one does; work for the model (what stops a refresh) is a job or
/// load for it, or a closed queue, never a job sent to a remote backend, nor one run ahead of
/// any request until a request waits for it (and a request's job goes before it).
#[test]
fn the_queue_tells_an_idle_loop_when_work_for_the_model_comes() {
    let facts = queue::ModelFacts::of(&engine());
    let queue = Queue::new(4, Arc::new(Metrics::new()), Ok(facts));
    let job = |work: Work| {
        let (reply, _) = oneshot::channel();
        Job::new(work, Arc::default(), None, None, reply, None, None)
    };
    assert!(!queue.model_work_waiting());
    assert!(matches!(
        queue.next_within(Duration::from_millis(10)),
        queue::Waited::Idle
    ));
    let remote = crate::backend::BackendConfig::new("http://127.0.0.1:9");
    queue.push(job(fim(TEXT, Some(remote)))).unwrap();
    assert!(!queue.model_work_waiting(), "a remote backend's job");
    queue.push(job(fim(TEXT, None))).unwrap();
    assert!(queue.model_work_waiting());
    assert!(matches!(
        queue.next_within(Duration::from_secs(5)),
        queue::Waited::Job(_)
    ));
    assert!(!queue.model_work_waiting());

    // A job run ahead of any request neither ends the wait nor counts as work, until its flag
    // goes up; the loop may still take it (after its refresh).
    let queued = |client: &str, wanted: Option<&Arc<AtomicBool>>| {
        let (reply, _) = oneshot::channel();
        let work = fim(TEXT, None);
        let (client, wanted) = (Some(client.into()), wanted.map(Arc::clone));
        Job::new(work, Arc::default(), None, None, reply, client, wanted)
    };
    let wanted = Arc::new(AtomicBool::new(false));
    queue.push(queued("ahead", Some(&wanted))).unwrap();
    assert!(!queue.model_work_waiting());
    assert!(matches!(
        queue.next_within(Duration::from_millis(30)),
        queue::Waited::Idle
    ));
    assert!(queue.try_next_if(|_| true).is_some(), "still queued");
    queue.push(queued("ahead", Some(&wanted))).unwrap();
    wanted.store(true, Ordering::Relaxed);
    assert!(queue.model_work_waiting(), "a request waits for it now");
    assert!(matches!(
        queue.next_within(Duration::from_secs(5)),
        queue::Waited::Job(_)
    ));
    let nobody = Arc::new(AtomicBool::new(false));
    queue.push(queued("ahead", Some(&nobody))).unwrap();
    let raised = std::thread::spawn({
        let nobody = Arc::clone(&nobody);
        move || {
            std::thread::sleep(Duration::from_millis(50));
            nobody.store(true, Ordering::Relaxed);
        }
    });
    let waited = std::time::Instant::now();
    assert!(
        matches!(
            queue.next_within(Duration::from_secs(5)),
            queue::Waited::Job(_)
        ),
        "a flag raised while the loop waits ends the wait"
    );
    assert!(waited.elapsed() < Duration::from_secs(5));
    raised.join().unwrap();

    // A request goes before a job nobody asked for yet, whichever came first.
    queue
        .push(queued("ahead", Some(&Arc::new(AtomicBool::new(false)))))
        .unwrap();
    queue.push(queued("request", None)).unwrap();
    let Some(first) = queue.try_next_if(|_| true) else {
        panic!("two jobs queued")
    };
    assert_eq!(first.client.as_deref(), Some("request"));
    let Some(second) = queue.try_next_if(|_| true) else {
        panic!("one job queued")
    };
    assert_eq!(second.client.as_deref(), Some("ahead"));

    queue
        .push(queued("ahead", Some(&Arc::new(AtomicBool::new(false)))))
        .unwrap();

    queue.close();
    assert!(queue.model_work_waiting(), "closed: the loop should end");
    assert!(
        matches!(
            queue.next_within(Duration::from_secs(5)),
            queue::Waited::Job(_)
        ),
        "closed: the loop drains what is queued, wanted or not"
    );
    assert!(matches!(
        queue.next_within(Duration::from_secs(5)),
        queue::Waited::Ended
    ));
}

/// A next edit precomputed in a pause (`Submit::wanted`, its flag down) waits for the idle
/// refresh of the kept cache the keystroke before it left approximate, without stopping it,
/// and runs right after it; one a request waits for goes first, before the loop is idle.
#[test]
fn a_precomputed_job_lets_the_idle_refresh_go_first_and_a_wanted_one_does_not() {
    for max_batch in [1, 4] {
        for wanted in [false, true] {
            let metrics = Arc::new(Metrics::new());
            // Long enough that the request's job always comes before the loop is idle.
            let config = LoopConfig {
                idle_refresh: Some(Duration::from_secs(1)),
                ..config(max_batch)
            };
            let (scheduler, _) = Scheduler::start(Ok(engine()), config, Arc::clone(&metrics));
            let refreshes = |outcome: &str| {
                metric(
                    &metrics,
                    &format!("redraft_idle_refreshes_total{{outcome=\"{outcome}\"}}"),
                )
            };
            for typed in ["", "s"] {
                fim_answer(run(&scheduler, keystroke(typed, 8), Some("doc")));
            }
            // The second keystroke realigned the kept cache: a refresh is due once idle.
            let submit = Submit {
                client: Some("doc".into()),
                wanted: (!wanted).then(|| Arc::new(AtomicBool::new(false))),
                ..Submit::default()
            };
            let ticket = scheduler
                .submit(edit(&renames()[0], lsp_sampler(), None), submit)
                .expect("queued");
            edit_answer(wait(ticket));
            let (done, stopped) = (refreshes("done"), refreshes("stopped"));
            if wanted {
                assert_eq!(done, 0.0, "batch {max_batch}: the request's job went first");
            } else {
                assert_eq!(
                    (done, stopped),
                    (1.0, 0.0),
                    "batch {max_batch}: the refresh went first, unstopped"
                );
            }
        }
    }
}

/// A next edit precomputed in a pause (`Submit::wanted`, its flag down) that is running when a
/// keystroke's completion for another document comes makes way for it: the completion is
/// answered first, and the precompute, queued again, is answered in full after it (not as
/// cancelled). One a request already waits for runs to its end first, unless that request went
/// away (its flag down again) before the other came. The serial loop, the language server's;
/// each step is slowed down so that the request comes mid-run.
#[test]
fn a_running_precompute_makes_way_for_a_request_unless_one_waits_for_it() {
    // Whether a request waited for the precompute when it started, and whether it left then.
    for (asked, left) in [(false, false), (true, false), (true, true)] {
        let metrics = Arc::new(Metrics::new());
        // Slow steps, and many of them (high effort), so that the request comes while the
        // precompute has steps left on a loaded machine too, and the answers' order shows.
        let delay = Some(Duration::from_millis(100));
        let (scheduler, _) =
            Scheduler::start_with(Ok(engine()), config(1), Arc::clone(&metrics), delay);
        let submit = |work: Work, client: &str, wanted: Option<&Arc<AtomicBool>>| {
            let submit = Submit {
                client: Some(client.into()),
                wanted: wanted.map(Arc::clone),
                ..Submit::default()
            };
            let ticket = scheduler.submit(work, submit).expect("queued");
            // When the answer came, and what it was.
            std::thread::spawn(move || {
                let answer = wait(ticket);
                (std::time::Instant::now(), answer)
            })
        };
        let mut sampler = SamplerConfig::effort(Effort::High);
        sampler.draft_tau = Some(DRAFT_TAU);
        sampler.cache.realign = None;
        let wanted = Arc::new(AtomicBool::new(asked));
        let precompute = submit(edit(&renames()[0], sampler, None), "a", Some(&wanted));
        let waited = std::time::Instant::now();
        while metric(&metrics, "redraft_running_jobs") < 1.0 {
            assert!(waited.elapsed() < Duration::from_secs(30), "never ran");
            std::thread::sleep(Duration::from_millis(1));
        }
        if left {
            wanted.store(false, Ordering::Relaxed);
        }
        let request = submit(fim(TEXT, None), "b", None);
        let (edit_at, edit) = precompute.join().unwrap();
        let (fim_at, fim) = request.join().unwrap();
        assert!(
            edit_answer(edit).report.steps >= 4,
            "the precompute has steps left"
        );
        fim_answer(fim);
        let requeued = metric(&metrics, "redraft_jobs_requeued_total{kind=\"edit\"}");
        let cancelled = metric(
            &metrics,
            "redraft_jobs_total{kind=\"edit\",outcome=\"cancelled\"}",
        );
        assert_eq!(cancelled, 0.0, "asked {asked}, left {left}");
        if asked && !left {
            assert_eq!(requeued, 0.0);
            assert!(
                edit_at < fim_at,
                "the precompute a request waits for ended first"
            );
        } else {
            assert_eq!(requeued, 1.0, "asked {asked}, left {left}");
            assert!(fim_at < edit_at, "the request went first");
        }
    }
}

/// What a running job nobody waits for yet makes way for (`Queue::request_waiting`): a queued
/// request for the model that someone still waits for, before any load (behind one it would
/// wait for the running job anyway), in an open queue; not a job nobody waits for, one sent to
/// a remote backend, nor one whose client left.
#[test]
fn a_running_precompute_makes_way_only_for_a_request_that_can_go_first() {
    let facts = queue::ModelFacts::of(&engine());
    let queue = Queue::new(8, Arc::new(Metrics::new()), Ok(facts));
    let job = |work: Work, cancel: bool, wanted: Option<bool>| {
        let (reply, rx) = oneshot::channel();
        let cancel = Arc::new(AtomicBool::new(cancel));
        let wanted = wanted.map(|up| Arc::new(AtomicBool::new(up)));
        (Job::new(work, cancel, None, None, reply, None, wanted), rx)
    };
    let mut replies = Vec::new();
    let mut push = |work: Work, cancel: bool, wanted: Option<bool>| {
        let (job, rx) = job(work, cancel, wanted);
        replies.push(rx);
        queue.push(job).unwrap();
    };
    push(fim(TEXT, None), false, Some(false));
    let remote = crate::backend::BackendConfig::new("http://127.0.0.1:9");
    push(fim(TEXT, Some(remote)), false, None);
    push(fim(TEXT, None), true, None);
    assert!(!queue.request_waiting(), "nobody waits for any of these");

    let (reply, _) = oneshot::channel();
    queue.push_load(queue::Load {
        model: None,
        device: DeviceSpec::Cpu,
        progress: None,
        reply,
    });
    push(fim(TEXT, None), false, None);
    assert!(!queue.request_waiting(), "the request is behind a load");

    // A job put back goes first, before the load: once someone waits for it, it counts.
    let ahead = Arc::new(AtomicBool::new(false));
    let (reply, _answer) = oneshot::channel();
    let work = fim(TEXT, None);
    let wanted = Some(Arc::clone(&ahead));
    queue.put_back(Job::new(
        work,
        Arc::default(),
        None,
        None,
        reply,
        None,
        wanted,
    ));
    assert!(!queue.request_waiting());
    ahead.store(true, Ordering::Relaxed);
    assert!(queue.request_waiting(), "put back first, and now wanted");
    queue.close();
    assert!(!queue.request_waiting(), "a closed queue drains in order");
}

/// The bar weighs what each door sends: the language server's suggestion is the whole cleaned
/// text, an HTTP choice that text cut at the client's stop strings. A middle sure up to a stop
/// string and unsure after it is withheld from the one and sent to the other.
#[test]
fn the_bar_weighs_a_choice_as_cut_at_the_clients_stop_strings() {
    let engine = engine();
    let Work::Fim(mut work) = fim(TEXT, None) else {
        unreachable!("a FIM work")
    };
    work.options.min_confidence = Some(0.5);
    let prepared = redraft_suggest::fim::prepare(&engine, &work.source(), &[], &work.options);
    let middle = "count + 1; // zzz qqq";
    let cleaned = redraft_context::finish(middle, &prepared.plan).unwrap();
    assert!(cleaned.contains("// zzz"), "{cleaned:?}");
    // Sure (0.9) of the tokens before ` //`, unsure (0.1) of the rest.
    let tokens = engine.tokenizer().encode(middle).unwrap();
    let probabilities = (0..tokens.len())
        .map(|i| {
            let end = engine.tokenizer().decode(&tokens[..=i]).unwrap().len();
            if end <= middle.find(" //").unwrap() {
                0.9
            } else {
                0.1
            }
        })
        .collect();
    let completion = Completion {
        middle: middle.into(),
        tokens,
        probabilities,
        ended_by_eos: true,
        ..Completion::default()
    };
    let mut answer = |stop: &[&str]| {
        work.stop = stop.iter().map(|s| s.to_string()).collect();
        finish_fim(
            &engine,
            &prepared,
            std::slice::from_ref(&completion),
            &work,
            &Metrics::new(),
        )
    };
    let cut = answer(&[" //"]);
    assert!(cut.suggestions.is_empty(), "{cut:?}");
    assert_eq!(cut.report.withheld, 1);
    assert_eq!(cut.choices[0].text, "count + 1;");
    assert_eq!(cut.choices[0].finish_reason, FinishReason::Stop);
    // Without the stop string the choice is the whole text, and withheld as well.
    assert_eq!(answer(&[]).choices[0].text, "");
}
