//! The tower-lsp-server glue: capabilities, the lifecycle (initialize, model load with
//! `$/progress`, shutdown), document sync handed to the document owner (a notebook's through
//! `notebook.rs`), configuration and `workspace/executeCommand`. Inline completion itself lives in `inline.rs`, next edits in
//! `next_edit.rs`.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use redraft_engine::DeviceSpec;
use redraft_runtime::scheduler::{LoadFailure, Loaded};
use serde_json::Value;
use tokio::sync::mpsc;
use tower_lsp_server::jsonrpc;
use tower_lsp_server::ls_types::{
    CompletionParams, CompletionResponse, DidChangeConfigurationParams,
    DidChangeNotebookDocumentParams, DidChangeTextDocumentParams, DidChangeWorkspaceFoldersParams,
    DidCloseNotebookDocumentParams, DidCloseTextDocumentParams, DidOpenNotebookDocumentParams,
    DidOpenTextDocumentParams, ExecuteCommandOptions, ExecuteCommandParams, InitializeParams,
    InitializeResult, InitializedParams, LSPAny, MessageType, OneOf, ProgressToken,
    ServerCapabilities, ServerInfo, TextDocumentItem, TextDocumentSyncCapability,
    TextDocumentSyncKind, Uri, WorkspaceFoldersServerCapabilities, WorkspaceServerCapabilities,
};
use tower_lsp_server::{Client, LanguageServer};

use super::cancel::InFlight;
use super::completion_items;
use super::config::Settings;
use super::document_key::DocumentKey;
use super::documents::{Changed, Documents};
use super::encoding::PositionEncoding;
use super::inference::{EditRunner, Inference, Loading};
use super::log::{Level, Log};
use super::next_edit::jobs::NextEdits;
use super::next_edit::ACCEPT_COMMAND;
use super::notebook;
use super::running::Running;
use super::stream::{DraftKind, DraftStep, Drafts, NextEditDraftStep, Outgoing};
use super::type_through::TypeThrough;
use super::workspace::Workspace;

pub struct Server {
    client: Client,
    pub(super) log: Log,
    log_rx: Mutex<Option<mpsc::UnboundedReceiver<(MessageType, String)>>>,
    pub(super) documents: Documents,
    pub(super) inference: Inference,
    pub(super) in_flight: Arc<InFlight>,
    /// The same for `textDocument/completion` (`completion_items.rs`), apart: a client that
    /// sends both (a menu beside ghost text) would have each cancel the other, and drop the
    /// cancelled menu without a word.
    pub(super) menu_in_flight: Arc<InFlight>,
    /// The jobs of both kinds of request running on documents' own text, by place: the second
    /// of a menu's and an inline request at one place waits for the first's answer.
    pub(super) running: Arc<Running>,
    type_through: Mutex<TypeThrough>,
    /// Per document, the change that put it out of sync with the client last logged by an
    /// inline completion (see [`Server::first_told_out_of_sync`]).
    out_of_sync_told: Mutex<HashMap<DocumentKey, u64>>,
    /// Each open document's URI as its `didOpen` spelled it, which its snapshots carry and its
    /// jobs name the runtime's client by: a close spelled otherwise still drops those caches.
    opened: Mutex<HashMap<DocumentKey, Uri>>,
    /// Shared with the next-edit jobs, which read it when they start.
    settings: Arc<Mutex<Settings>>,
    encoding: Mutex<PositionEncoding>,
    pub(super) drafts: Drafts,
    drafts_rx: Mutex<Option<mpsc::UnboundedReceiver<Outgoing>>>,
    pub(super) next_edits: Arc<NextEdits>,
    /// The workspace folders, which documents are named relative to in prompts.
    pub(super) workspace: Workspace,
    /// The document owner's changes, which precomputing next edits waits on (taken at
    /// `initialized`).
    changed_rx: Mutex<Option<mpsc::UnboundedReceiver<Changed>>>,
    /// The first model load, started at `initialize` so requests queue behind it, reported
    /// at `initialized` (progress needs an initialized client).
    loading: Mutex<Option<(Loading, Asked)>>,
    /// The loads asked for and the model that serves, which a failed load puts the settings
    /// back to. Taken before `settings` when both are.
    model_loads: Arc<Mutex<ModelLoads>>,
    progress_supported: Mutex<bool>,
    initial_problems: Mutex<Vec<String>>,
    /// The completion menu as `initialize` announced it (`completion_items.rs`).
    pub(super) menu: OnceLock<completion_items::Menu>,
    /// Debug logging asked for on the command line stays on whatever the settings say.
    debug_from_args: bool,
    /// `shutdown` was answered: the exit status says whether the session ended properly.
    shut_down: AtomicBool,
}

/// Poisoning only says another handler panicked; the data behind these locks is replaced
/// whole, never left half-written, so it is still good.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The `model` and `device` settings a model was loaded with.
type ModelSettings = (Option<PathBuf>, DeviceSpec);

/// One model load asked for: its place among the loads, and the settings it loads.
#[derive(Debug, Clone)]
struct Asked {
    number: u64,
    settings: ModelSettings,
}

/// The model loads asked for, and what serves. A load that fails leaves the model loaded before
/// serving (or none); its `model` and `device` must not stay in the settings, or the next change
/// of the other one loads with them and fails again (a bad `device`, then a good `model`).
///
/// The runtime runs the loads in the order they were asked for, but each load's report is a
/// task of its own that first waits for the client to create its progress, so reports come in
/// any order. A result is applied only once those of the loads before it are, in the loads'
/// order: a failure reported before the success of the load ahead of it put the settings back
/// to the model before that one, while that one served.
#[derive(Debug, Default)]
struct ModelLoads {
    /// Loads asked for so far; only the newest one's failure puts settings back (an older one's
    /// settings were replaced by a newer change already).
    asked: u64,
    /// Loads whose results are applied: 1 to `applied`.
    applied: u64,
    /// Results of loads that ended before a load ahead of them, by number.
    early: BTreeMap<u64, (ModelSettings, LoadEnd)>,
    /// The settings the model that serves was loaded with; `None`: none serves.
    serving: Option<ModelSettings>,
}

/// How a load ended, as far as the settings care.
#[derive(Debug, Clone, Copy)]
enum LoadEnd {
    Loaded,
    /// It failed and the model loaded before still serves.
    Kept,
    /// It failed and no model serves.
    NoneServes,
}

impl ModelLoads {
    fn ask(&mut self, settings: ModelSettings) -> Asked {
        self.asked += 1;
        Asked {
            number: self.asked,
            settings,
        }
    }

    /// Records how the load `asked` ended and applies every result now in order; the settings
    /// to put back if that made the newest load's failure known, with a model still serving.
    fn ended(&mut self, asked: Asked, loaded: &Loaded) -> Option<ModelSettings> {
        let end = match loaded {
            Ok(_) => LoadEnd::Loaded,
            Err(LoadFailure { kept: Some(_), .. }) => LoadEnd::Kept,
            Err(LoadFailure { kept: None, .. }) => LoadEnd::NoneServes,
        };
        self.early.insert(asked.number, (asked.settings, end));
        let mut put_back = None;
        while let Some((settings, end)) = self.early.remove(&(self.applied + 1)) {
            self.applied += 1;
            match end {
                LoadEnd::Loaded => self.serving = Some(settings),
                LoadEnd::NoneServes => self.serving = None,
                LoadEnd::Kept if self.applied == self.asked => put_back = self.serving.clone(),
                LoadEnd::Kept => {}
            }
        }
        put_back
    }
}

impl Server {
    pub fn new(client: Client, debug: bool) -> Server {
        Server::with_edit_runner(client, debug, None)
    }

    /// A server whose next edits run on `edit_runner` instead of the runtime (tests script
    /// their answers).
    pub(super) fn with_edit_runner(
        client: Client,
        debug: bool,
        edit_runner: Option<Arc<dyn EditRunner>>,
    ) -> Server {
        let (log, log_rx) = Log::new(if debug { Level::Debug } else { Level::Info });
        let (drafts, drafts_rx) = Drafts::channel();
        let (changed_tx, changed_rx) = mpsc::unbounded_channel();
        let documents = Documents::spawn(log.clone(), changed_tx);
        let inference = Inference::start(log.clone());
        let workspace = Workspace::default();
        let settings: Arc<Mutex<Settings>> = Arc::default();
        let next_edits = NextEdits::new(
            documents.clone(),
            edit_runner.unwrap_or_else(|| Arc::new(inference.clone())),
            log.clone(),
            settings.clone(),
            workspace.clone(),
        );
        Server {
            client,
            documents,
            inference,
            log,
            log_rx: Mutex::new(Some(log_rx)),
            in_flight: Arc::default(),
            menu_in_flight: Arc::default(),
            running: Arc::default(),
            type_through: Mutex::default(),
            out_of_sync_told: Mutex::default(),
            opened: Mutex::default(),
            settings,
            encoding: Mutex::default(),
            drafts,
            drafts_rx: Mutex::new(Some(drafts_rx)),
            next_edits,
            workspace,
            changed_rx: Mutex::new(Some(changed_rx)),
            loading: Mutex::new(None),
            model_loads: Arc::default(),
            progress_supported: Mutex::new(false),
            initial_problems: Mutex::default(),
            menu: OnceLock::new(),
            debug_from_args: debug,
            shut_down: AtomicBool::new(false),
        }
    }

    pub(super) fn settings(&self) -> Settings {
        lock(&self.settings).clone()
    }

    /// Whether a completion-menu request is answered under the settings now
    /// (`completion_items::Menu::answers`), read without copying them.
    pub(super) fn menu_answers(&self) -> bool {
        self.menu
            .get()
            .is_some_and(|menu| menu.answers(lock(&self.settings).completion_items))
    }

    pub(super) fn encoding(&self) -> PositionEncoding {
        *lock(&self.encoding)
    }

    pub(super) fn was_shut_down(&self) -> bool {
        self.shut_down.load(Ordering::SeqCst)
    }

    pub(super) fn type_through(&self) -> MutexGuard<'_, TypeThrough> {
        lock(&self.type_through)
    }

    /// Whether the document `key`, out of sync since the change at `since`, is not yet logged as
    /// such: an inline completion says why it answers nothing once, not at every keystroke.
    pub(super) fn first_told_out_of_sync(&self, key: &DocumentKey, since: u64) -> bool {
        lock(&self.out_of_sync_told).insert(key.clone(), since) != Some(since)
    }

    /// What a close does before the document owner hears of it, and so an open over an open
    /// document (the protocol wants a close first), which replaces its text: what is on its way
    /// for the old text is stale, and the model's caches for it are dropped (under the name the
    /// open gave them; `uri`, the message's, if it is not open).
    fn forget(&self, key: &DocumentKey, uri: &Uri) {
        self.in_flight.edited(key);
        self.menu_in_flight.edited(key);
        self.next_edits.closed(key);
        self.type_through().forget(key);
        let opened = lock(&self.opened).remove(key);
        self.inference.forget(opened.as_ref().unwrap_or(uri));
        lock(&self.out_of_sync_told).remove(key);
    }

    /// Applies `value` to the settings; problems are logged now and returned for the user.
    fn apply_settings(&self, value: &Value) -> (Settings, Vec<String>) {
        let (settings, problems) = self.update_settings(value);
        self.settings_applied(&settings, &problems);
        (settings, problems)
    }

    /// Applies `value` to the settings: the settings after it and the problems found, not yet
    /// logged ([`Server::settings_applied`]).
    fn update_settings(&self, value: &Value) -> (Settings, Vec<String>) {
        let mut settings = lock(&self.settings);
        let problems = settings.update(value);
        (settings.clone(), problems)
    }

    /// Logs at the level `settings` ask for, and logs `problems`.
    fn settings_applied(&self, settings: &Settings, problems: &[String]) {
        self.log.set_level(match self.debug_from_args {
            true => Level::Debug,
            false => settings.log_level,
        });
        for problem in problems {
            self.log.warn(problem);
        }
    }

    /// Tells the user which settings were ignored (the editor shows it; a log line would go
    /// unnoticed).
    fn show_setting_problems(&self, problems: Vec<String>) {
        if problems.is_empty() {
            return;
        }
        let client = self.client.clone();
        tokio::spawn(async move {
            client
                .show_message(
                    MessageType::WARNING,
                    format!("redraft settings: {}", problems.join("; ")),
                )
                .await;
        });
    }

    /// Reports a model load to the client: `$/progress` while it runs (when the client takes
    /// progress), `window/showMessage` if it fails.
    fn report_load(&self, load: Loading, asked: Asked) {
        let client = self.client.clone();
        let log = self.log.clone();
        let model_loads = self.model_loads.clone();
        let settings = self.settings.clone();
        let progress_supported = *lock(&self.progress_supported);
        tokio::spawn(async move {
            let progress = if progress_supported {
                let token = ProgressToken::String(format!(
                    "redraft/model-load/{}",
                    std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_nanos())
                ));
                // A client that never answers must not keep the load from being reported.
                let created = tokio::time::timeout(
                    std::time::Duration::from_secs(5),
                    client.create_work_done_progress(token.clone()),
                )
                .await;
                match created {
                    Ok(Ok(())) => Some(
                        client
                            .progress(token, "redraft: loading the model")
                            .begin()
                            .await,
                    ),
                    Ok(Err(_)) | Err(_) => None,
                }
            } else {
                None
            };
            let Loading {
                answer,
                mut downloads,
            } = load;
            tokio::pin!(answer);
            // A named model's downloads come before the answer: each as a progress report, the
            // end of each file in the log too.
            let result = loop {
                tokio::select! {
                    biased;
                    Some(message) = downloads.recv() => {
                        if message.starts_with("downloaded ") || message.starts_with("stopped ") {
                            log.info(&message);
                        }
                        if let Some(progress) = &progress {
                            progress.report(message).await;
                        }
                    }
                    answer = &mut answer => {
                        break answer.unwrap_or_else(|_| Err(LoadFailure {
                            reason: "the inference thread stopped".into(),
                            kept: None,
                        }));
                    }
                }
            };
            // Before the failure is told: a client that changes a setting once it hears of it
            // changes the settings put back.
            {
                let mut loads = lock(&model_loads);
                if let Some((model, device)) = loads.ended(asked, &result) {
                    let mut settings = lock(&settings);
                    log.info(format!(
                        "settings `model` and `device` put back to {} and {device}, which the model that serves was loaded with: the next change starts from them",
                        describe_model(model.as_ref()),
                    ));
                    settings.model = model;
                    settings.device = device;
                }
            }
            let message = match &result {
                Ok(origin) => format!("model loaded from {origin}"),
                Err(LoadFailure {
                    reason,
                    kept: Some(kept),
                }) => {
                    format!("model kept: the one from {kept}; the new model did not load: {reason}")
                }
                Err(LoadFailure { reason, kept: None }) => format!("model not loaded: {reason}"),
            };
            // Logged before the progress ends: once a client has the end, the line is written
            // (or dropped, under a quieter `logLevel`).
            match &result {
                Ok(_) => log.info(&message),
                Err(_) => log.error(&message),
            }
            if let Some(progress) = progress {
                progress.finish_with_message(message).await;
            }
            match result {
                Ok(_) => {}
                Err(LoadFailure {
                    reason,
                    kept: Some(kept),
                }) => {
                    client
                        .show_message(
                            MessageType::WARNING,
                            format!("redraft could not load the new model: {reason}. Suggestions still come from the model loaded before ({kept})."),
                        )
                        .await;
                }
                Err(LoadFailure { reason, kept: None }) => {
                    client
                        .show_message(
                            MessageType::ERROR,
                            format!("redraft could not load its model: {reason}. Suggestions stay empty until the `model` setting names a model that loads (hf:ORG/REPO:QUANT, ollama:NAME, a model directory or a GGUF file)."),
                        )
                        .await;
                }
            }
        });
    }
}

/// Document sync, for the `textDocument/*` notifications and a notebook's cells alike. Never
/// `async`: a handler queues every event of its message before anything else runs, so the
/// owner applies messages whole and in order.
impl Server {
    pub(super) fn open_document(&self, document: TextDocumentItem) {
        let key = DocumentKey::of(&document.uri);
        let open = lock(&self.opened).get(&key).cloned();
        if let Some(open) = open.filter(|open| *open != document.uri) {
            self.log.warn(format!(
                "textDocument/didOpen of {}: the document is open as {}, the same URI spelled \
                 otherwise (escapes, or the scheme's or host's case); redraft keeps one document \
                 under both, this text replaces that one's, and a close under either closes it",
                document.uri.as_str(),
                open.as_str()
            ));
        }
        self.forget(&key, &document.uri);
        lock(&self.opened).insert(key.clone(), document.uri.clone());
        self.next_edits.opened(&key);
        self.documents.open(
            document.uri,
            document.language_id,
            document.version,
            document.text,
        );
    }

    pub(super) fn change_document(&self, params: DidChangeTextDocumentParams) {
        let uri = params.text_document.uri;
        let key = DocumentKey::of(&uri);
        self.in_flight.edited(&key);
        self.menu_in_flight.edited(&key);
        self.next_edits.edited(&key);
        self.documents
            .change(uri, params.text_document.version, params.content_changes);
    }

    pub(super) fn close_document(&self, uri: Uri) {
        self.forget(&DocumentKey::of(&uri), &uri);
        self.documents.close(uri);
    }
}

impl LanguageServer for Server {
    async fn initialize(&self, params: InitializeParams) -> jsonrpc::Result<InitializeResult> {
        let encoding = PositionEncoding::negotiate(
            params
                .capabilities
                .general
                .as_ref()
                .and_then(|g| g.position_encodings.as_deref()),
        );
        *lock(&self.encoding) = encoding;
        self.documents.set_encoding(encoding);
        self.workspace.set_from(&params);
        *lock(&self.progress_supported) = params
            .capabilities
            .window
            .as_ref()
            .and_then(|w| w.work_done_progress)
            .unwrap_or(false);
        let (settings, problems) = self.apply_settings(
            params
                .initialization_options
                .as_ref()
                .unwrap_or(&Value::Null),
        );
        // Shown once the client is initialized (messages before that are dropped).
        *lock(&self.initial_problems) = problems;
        let shows_inline = completion_items::shows_inline(&params);
        let menu = completion_items::Menu {
            announced: completion_items::offered(settings.completion_items, shows_inline),
            shows_inline,
        };
        // Set once: the first `initialize` is the one announced.
        let _ = self.menu.set(menu);
        let asked = lock(&self.model_loads).ask((settings.model.clone(), settings.device));
        let load = self.inference.load(settings.model.clone(), settings.device);
        *lock(&self.loading) = Some((load, asked));
        Ok(InitializeResult {
            capabilities: ServerCapabilities {
                position_encoding: Some(encoding.kind()),
                text_document_sync: Some(TextDocumentSyncCapability::Kind(
                    TextDocumentSyncKind::INCREMENTAL,
                )),
                notebook_document_sync: Some(OneOf::Left(notebook::sync_options())),
                inline_completion_provider: Some(OneOf::Left(true)),
                completion_provider: menu.announced.then(completion_items::options),
                workspace: Some(WorkspaceServerCapabilities {
                    workspace_folders: Some(WorkspaceFoldersServerCapabilities {
                        supported: Some(true),
                        change_notifications: Some(OneOf::Left(true)),
                    }),
                    file_operations: None,
                }),
                execute_command_provider: Some(ExecuteCommandOptions {
                    commands: vec![ACCEPT_COMMAND.into()],
                    ..ExecuteCommandOptions::default()
                }),
                ..ServerCapabilities::default()
            },
            server_info: Some(ServerInfo {
                name: "redraft".into(),
                version: Some(env!("CARGO_PKG_VERSION").into()),
            }),
            offset_encoding: None,
        })
    }

    async fn initialized(&self, _: InitializedParams) {
        if let Some(mut rx) = lock(&self.log_rx).take() {
            let client = self.client.clone();
            tokio::spawn(async move {
                while let Some((typ, message)) = rx.recv().await {
                    client.log_message(typ, message).await;
                }
            });
        }
        if let Some(mut rx) = lock(&self.drafts_rx).take() {
            let client = self.client.clone();
            tokio::spawn(async move {
                while let Some(outgoing) = rx.recv().await {
                    match outgoing {
                        Outgoing::Draft(DraftKind::Inline, draft) => {
                            client.send_notification::<DraftStep>(draft).await;
                        }
                        Outgoing::Draft(DraftKind::NextEdit, draft) => {
                            client.send_notification::<NextEditDraftStep>(draft).await;
                        }
                        Outgoing::Flush(done) => {
                            let _ = done.send(());
                        }
                    }
                }
            });
        }
        if let Some(rx) = lock(&self.changed_rx).take() {
            tokio::spawn(self.next_edits.clone().precompute_on_changes(rx));
        }
        let problems = std::mem::take(&mut *lock(&self.initial_problems));
        self.show_setting_problems(problems);
        let load = lock(&self.loading).take();
        if let Some((load, asked)) = load {
            self.report_load(load, asked);
        }
    }

    async fn completion(
        &self,
        params: CompletionParams,
    ) -> jsonrpc::Result<Option<CompletionResponse>> {
        self.completion_items(params).await
    }

    async fn shutdown(&self) -> jsonrpc::Result<()> {
        self.shut_down.store(true, Ordering::SeqCst);
        Ok(())
    }

    async fn did_open(&self, params: DidOpenTextDocumentParams) {
        self.open_document(params.text_document);
    }

    async fn did_change(&self, params: DidChangeTextDocumentParams) {
        self.change_document(params);
    }

    async fn did_close(&self, params: DidCloseTextDocumentParams) {
        self.close_document(params.text_document.uri);
    }

    async fn notebook_did_open(&self, params: DidOpenNotebookDocumentParams) {
        self.notebook_opened(params);
    }

    async fn notebook_did_change(&self, params: DidChangeNotebookDocumentParams) {
        self.notebook_changed(params);
    }

    async fn notebook_did_close(&self, params: DidCloseNotebookDocumentParams) {
        self.notebook_closed(params);
    }

    async fn execute_command(
        &self,
        params: ExecuteCommandParams,
    ) -> jsonrpc::Result<Option<LSPAny>> {
        if params.command == ACCEPT_COMMAND {
            self.accepted_next_edit(&params.arguments).await?;
            return Ok(None);
        }
        Err(jsonrpc::Error::invalid_params(format!(
            "unknown command `{}` (redraft runs only {ACCEPT_COMMAND})",
            params.command
        )))
    }

    async fn did_change_workspace_folders(&self, params: DidChangeWorkspaceFoldersParams) {
        // Jobs started from here on name documents by the new folders; a precomputed next
        // edit's history named them by the old ones, which only changes how the prompt spells
        // paths, so it is kept.
        self.workspace.change(&params.event);
    }

    async fn did_change_configuration(&self, params: DidChangeConfigurationParams) {
        // Held from before the change until its load is counted: a failed load puts the
        // settings back only while it is the newest, never over a change applied after it.
        let mut model_loads = lock(&self.model_loads);
        // Held while the settings change and the cache is cleared (and a new model's load is
        // queued): a request reads its generation and settings under it (`inline`), so it
        // sees both before the change or both after. A load queued under it runs before any job
        // of a request that read the generation after the clear. Nothing logs under it (a
        // client that does not read stderr could block the write, and every request with it).
        let mut type_through = self.type_through();
        let before = self.settings();
        let (after, mut problems) = self.update_settings(&params.settings);
        if after != before {
            // Suggestions computed under other settings (another bar, effort or length) or
            // another model are not these.
            type_through.clear();
        }
        let switch = after.model != before.model || after.device != before.device;
        let load = switch.then(|| self.inference.load(after.model.clone(), after.device));
        drop(type_through);
        self.settings_applied(&after, &problems);
        if after.completion_items != before.completion_items {
            let note = self
                .menu
                .get()
                .and_then(|menu| menu.cannot(after.completion_items));
            if let Some(note) = note {
                self.log.warn(&note);
                problems.push(note);
            }
        }
        self.show_setting_problems(problems);
        if let Some(load) = load {
            self.log.info(format!(
                "loading the model from {} (device {})",
                describe_model(after.model.as_ref()),
                after.device
            ));
            let asked = model_loads.ask((after.model.clone(), after.device));
            drop(model_loads);
            self.report_load(load, asked);
        }
        if after != before {
            // After the load is queued: a job started from here on runs on the new model.
            self.next_edits.clear();
        }
    }
}

/// A `model` setting for the log.
fn describe_model(model: Option<&PathBuf>) -> String {
    model.map_or("the binary (default model)".into(), |p| {
        p.display().to_string()
    })
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use redraft_engine::DeviceSpec;
    use redraft_runtime::scheduler::{LoadFailure, Loaded};
    use serde_json::json;

    use super::{ModelLoads, ModelSettings};
    use crate::harness::TestServer;

    fn model(path: &str) -> ModelSettings {
        (Some(PathBuf::from(path)), DeviceSpec::Auto)
    }

    fn kept(from: &str) -> Loaded {
        Err(LoadFailure {
            reason: "nothing there".into(),
            kept: Some(from.into()),
        })
    }

    /// Each load's report is a task of its own, and the tasks run in any order: a good model B
    /// loads, then a path with nothing there fails at once with B kept, and the failure's
    /// report comes first. The settings go back to B, which serves, not to A, which served
    /// before B's report came.
    #[test]
    fn a_failure_reported_before_the_load_ahead_of_it_puts_back_what_serves() {
        let mut loads = ModelLoads::default();
        let a = loads.ask(model("a"));
        assert_eq!(loads.ended(a, &Ok("a".into())), None);
        let b = loads.ask(model("b"));
        let missing = loads.ask(model("/nonexistent"));
        assert_eq!(
            loads.ended(missing, &kept("b")),
            None,
            "held for B's result"
        );
        assert_eq!(loads.ended(b, &Ok("b".into())), Some(model("b")));

        // In order, the same; an older load's failure puts nothing back.
        let c = loads.ask(model("c"));
        assert_eq!(loads.ended(c, &Ok("c".into())), None);
        let older = loads.ask(model("/nonexistent"));
        let newest = loads.ask(model("/nonexistent/too"));
        assert_eq!(loads.ended(older, &kept("c")), None, "not the newest");
        assert_eq!(loads.ended(newest, &kept("c")), Some(model("c")));
    }

    /// An open over an open document (without the close the protocol wants first) does what a
    /// close does before the document is opened again: the model's caches for the old text are
    /// dropped too.
    #[tokio::test]
    async fn an_open_over_an_open_document_forgets_what_a_close_forgets() {
        const URI: &str = "file:///w/src/lib.rs";
        let (mut lsp, _jobs) = TestServer::start(json!({})).await;
        let forgotten = |lsp: &TestServer| {
            let forgotten = lsp.server().inference.forgotten();
            forgotten.iter().filter(|uri| *uri == URI).count()
        };
        lsp.open(URI, "fn a() {}\n").await;
        let opened = forgotten(&lsp);
        lsp.open(URI, "fn b() {}\n").await;
        assert_eq!(forgotten(&lsp), opened + 1, "opened over the open one");
        let closed = json!({"textDocument": {"uri": URI}});
        lsp.notify("textDocument/didClose", closed).await;
        assert_eq!(forgotten(&lsp), opened + 2, "closed");
    }

    /// One document however the client escapes its URI (percent-encoding in lower or upper
    /// case, an unreserved character escaped or not, the scheme's case): an edit, a request
    /// and a close under other spellings than the open's all reach it. What the server sends
    /// back names the document as the message it answers did.
    #[tokio::test]
    async fn a_document_is_one_however_its_uri_is_escaped() {
        const OPENED: &str = "file:///w/src/caf%c3%a9%2Dlib.rs";
        const CHANGED: &str = "FILE:///w/src/caf%C3%A9%2dlib.rs";
        const ASKED: &str = "file:///w/src/caf%C3%a9-lib.rs";
        const CLOSED: &str = "file:///w/src/caf%C3%A9-lib.rs";
        let (mut lsp, mut jobs) = TestServer::start(json!({"nextEdit": {"debounceMs": 0}})).await;
        lsp.open(OPENED, "fn area(w: u32) -> u32 {\n    w * w\n}\n")
            .await;
        lsp.change(CHANGED, 1, Some([[0, 9], [0, 9]]), "idth").await;
        let asked = tokio::spawn(lsp.next_edit(ASKED, 1, 0, 13).await.answer());
        let job = jobs.next().await;
        assert_eq!(
            job.job.document.rope.to_string(),
            "fn area(width: u32) -> u32 {\n    w * w\n}\n",
            "the change under another spelling applied to the opened document"
        );
        let at = "fn area(width: u32) -> u32 {\n    ".len();
        job.answer(Ok(crate::inference::NextEdit {
            edits: vec![redraft_context::edit::TextEdit {
                range: at..at + 1,
                new_text: "width".into(),
            }],
            ..crate::inference::NextEdit::default()
        }));
        let answer = asked.await.unwrap().unwrap();
        assert_eq!(
            answer["edits"][0]["textDocument"],
            json!({"uri": ASKED, "version": 1}),
            "{answer}"
        );
        lsp.notify(
            "textDocument/didClose",
            json!({"textDocument": {"uri": CLOSED}}),
        )
        .await;
        let forgotten = lsp.server().inference.forgotten();
        assert_eq!(
            forgotten.last().map(String::as_str),
            Some(OPENED),
            "the model's caches are kept under the open's spelling, and dropped at the close"
        );
        let answer = lsp.next_edit(OPENED, 1, 0, 13).await.answer().await;
        assert_eq!(answer, Err(-32602), "closed under another spelling");
    }

    /// tower-lsp-server drops a notification whose params do not deserialize without a word
    /// (a `uri` that is not a URI: the document never opens, and every request on it fails):
    /// the server says so in its log, naming the method and why, and goes on.
    #[tokio::test]
    async fn a_notification_whose_params_do_not_read_is_logged() {
        let (mut lsp, _jobs) = TestServer::start(json!({})).await;
        lsp.open("file:///w/a b.rs", "fn a() {}\n").await;
        lsp.wait_for_log("textDocument/didOpen ignored: its uri `file:///w/a b.rs` is not a URI")
            .await;
        lsp.notify(
            "textDocument/didClose",
            json!({"textDocument": {"uri": "not a uri"}}),
        )
        .await;
        lsp.wait_for_log("textDocument/didClose ignored: its uri `not a uri` is not a URI")
            .await;
        lsp.notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": "file:///w/a.rs", "version": 1}, "contentChanges": "no"}),
        )
        .await;
        lsp.wait_for_log("textDocument/didChange ignored: ").await;
        // Requests with such params are answered with an error, as before.
        let answer = lsp.inline("file:///w/a b.rs", 0, 0).await.answer().await;
        assert_eq!(answer, Err(-32602));
    }

    /// A second open of one document under another spelling of its URI, without a close, is
    /// the same document opened again (its text replaced), and the log says so: a close under
    /// either spelling then closes it.
    #[tokio::test]
    async fn an_open_under_another_spelling_of_an_open_document_is_said() {
        let (mut lsp, _jobs) = TestServer::start(json!({})).await;
        lsp.open("file:///w/caf%c3%a9.rs", "fn a() {}\n").await;
        lsp.open("file:///w/caf%c3%a9.rs", "fn b() {}\n").await;
        lsp.open("file:///w/caf%C3%A9.rs", "fn c() {}\n").await;
        let line = lsp
            .wait_for_log("the document is open as file:///w/caf%c3%a9.rs")
            .await;
        assert!(
            line.starts_with("textDocument/didOpen of file:///w/caf%C3%A9.rs"),
            "{line}"
        );
        let said = lsp
            .logs()
            .iter()
            .filter(|l| l.contains("is open as"))
            .count();
        assert_eq!(said, 1, "an open under the same spelling says nothing");
    }
}
