//! `textDocument/completion`, for clients that have no inline completions (Helix, Kakoune's
//! kak-lsp, Sublime's LSP, an Emacs without `lsp-inline-completion`): the suggestion an inline
//! completion would show, as completion items in the client's menu. The same request runs
//! (`inline.rs`: the type-through cache, the job on the model, cancellation by an edit); only
//! the answer's shape differs.
//!
//! Offered when the client announces no `textDocument.inlineCompletion` capability, or when the
//! `completionItems` setting says so (`initialize` decides: [`offered`]), so an editor that shows
//! inline suggestions does not also get each one in its menu. Where it does (the setting on),
//! the two requests at one place share one job (`running.rs`) or the type-through cache.
//!
//! A client filters a menu by what was typed of the word at the cursor (Helix: the word's
//! characters from where the menu opened): an item starts there, its text that word and the
//! suggestion after it, so typing on through the suggestion keeps it in the menu. The list is
//! incomplete, so the client asks again as the user types; the type-through cache answers those
//! without the model.

use tower_lsp_server::jsonrpc;
use tower_lsp_server::ls_types::{
    CompletionItem, CompletionItemKind, CompletionList, CompletionOptions, CompletionParams,
    CompletionResponse, CompletionTextEdit, Documentation, InitializeParams,
    InlineCompletionContext, InlineCompletionParams, InlineCompletionTriggerKind, InsertTextFormat,
    MarkupContent, MarkupKind, Range, TextEdit,
};

use super::inline::{covers, Answered};
use super::server::Server;

/// The longest label shown in a menu, in characters; the whole suggestion is the item's
/// documentation.
const LABEL_CHARS: usize = 60;

/// Characters after which a client asks at once (without them Helix asks only once two
/// characters of a word are typed, never after `(` or at the start of a line).
const TRIGGER_CHARACTERS: [&str; 8] = [".", ":", "(", "[", "{", ",", "=", " "];

/// Whether the client `params` describes announced inline completions.
pub fn shows_inline(params: &InitializeParams) -> bool {
    params
        .capabilities
        .text_document
        .as_ref()
        .and_then(|t| t.inline_completion.as_ref())
        .is_some()
}

/// Whether the server offers completion items: as the `completionItems` setting says, else
/// (`"auto"`) when the client shows no inline completions ([`shows_inline`]).
pub fn offered(setting: Option<bool>, shows_inline: bool) -> bool {
    setting.unwrap_or(!shows_inline)
}

/// The completion menu as `initialize` announced it, which later settings are held to: the
/// capability is not registered again, so a menu turned off later answers nothing, and one
/// turned on later cannot come.
#[derive(Debug, Clone, Copy)]
pub struct Menu {
    /// Whether `initialize` announced a `completionProvider`.
    pub announced: bool,
    /// Whether the client announced inline completions ([`shows_inline`]).
    pub shows_inline: bool,
}

impl Menu {
    /// Whether a menu request is answered under `setting`.
    pub fn answers(self, setting: Option<bool>) -> bool {
        self.announced && offered(setting, self.shows_inline)
    }

    /// What to tell the user when `setting` comes after `initialize`: a menu the setting asks
    /// for that was not announced; `None` where the setting is done as asked.
    pub fn cannot(self, setting: Option<bool>) -> Option<String> {
        (!self.announced && offered(setting, self.shows_inline)).then(|| {
            "completionItems: the completion menu was not offered when the editor connected, so \
             it cannot be turned on now: give the setting in initializationOptions and restart \
             the language server"
                .to_string()
        })
    }
}

/// The capability announced when [`offered`].
pub fn options() -> CompletionOptions {
    CompletionOptions {
        trigger_characters: Some(TRIGGER_CHARACTERS.map(str::to_string).to_vec()),
        resolve_provider: Some(false),
        ..CompletionOptions::default()
    }
}

impl Server {
    pub async fn completion_items(
        &self,
        params: CompletionParams,
    ) -> jsonrpc::Result<Option<CompletionResponse>> {
        // Always as an automatic inline request, one suggestion: for `textDocument/completion`
        // the specification counts typing a word as invoked (`triggerKind` 1), and Helix asks so
        // as the user types, where the `candidates` an invoked inline request computes cost 2-4
        // times one (the default model: 15-20 ms against 34-62 ms a request).
        let inline = InlineCompletionParams {
            work_done_progress_params: params.work_done_progress_params,
            text_document_position: params.text_document_position,
            context: InlineCompletionContext {
                trigger_kind: InlineCompletionTriggerKind::AUTOMATIC,
                selected_completion_info: None,
            },
        };
        // Nothing where the menu was turned off since `initialize`.
        let answered = if self.menu_answers() {
            self.suggest_inline(inline, &self.menu_in_flight).await?
        } else {
            None
        };
        Ok(Some(CompletionResponse::List(CompletionList {
            is_incomplete: true,
            items: answered.as_ref().map_or_else(Vec::new, items),
        })))
    }
}

/// The items for `answered`'s suggestions, each starting where the word at the cursor starts.
/// A one-line suggestion that ends with the rest of the line (a closing bracket written again)
/// is inserted without it, up to the cursor: menus built on Vim's `complete()` replace from an
/// item's start to the cursor whatever its range says, and would leave the bracket twice.
pub(crate) fn items(answered: &Answered) -> Vec<CompletionItem> {
    let start = word_start(answered);
    let typed = answered.rope.byte_slice(start..answered.start).to_string();
    let range_start = answered.encoding.position(&answered.rope, start);
    let (rest, _) = answered.rest_of_line();
    let cursor = answered.encoding.position(&answered.rope, answered.end);
    answered
        .texts
        .iter()
        .map(|text| {
            if !text.contains('\n') && covers(text, &rest) {
                let kept = text.trim_end();
                return (&kept[..kept.len() - rest.trim_end().len()], cursor);
            }
            (text.as_str(), answered.range(text).end)
        })
        .filter(|(text, _)| !text.trim().is_empty())
        .enumerate()
        .map(|(rank, (text, end))| {
            let new_text = format!("{typed}{}{text}", answered.lead);
            let range = Range::new(range_start, end);
            CompletionItem {
                label: label(&new_text),
                kind: Some(CompletionItemKind::TEXT),
                detail: Some("redraft".into()),
                documentation: Some(Documentation::MarkupContent(MarkupContent {
                    kind: MarkupKind::Markdown,
                    value: format!("```{}\n{new_text}\n```", answered.language),
                })),
                // Ahead of what other servers offer for the same word, in the model's order,
                // the first preselected: Helix orders its menu by how well each item matches
                // the word typed, and only a preselected item goes ahead of better matches
                // (rust-analyzer's `values()` for `counts.va`, say).
                sort_text: Some(format!("!{rank}")),
                preselect: Some(rank == 0),
                filter_text: Some(new_text.clone()),
                insert_text_format: Some(InsertTextFormat::PLAIN_TEXT),
                text_edit: Some(CompletionTextEdit::Edit(TextEdit { range, new_text })),
                ..CompletionItem::default()
            }
        })
        .collect()
}

/// Where the word the cursor ends starts: the letters, digits and `_` before it on its line.
fn word_start(answered: &Answered) -> usize {
    let rope = &answered.rope;
    let line_start = rope.line_to_byte(rope.byte_to_line(answered.start));
    let before = rope.byte_slice(line_start..answered.start).to_string();
    let word: usize = before
        .chars()
        .rev()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .map(char::len_utf8)
        .sum();
    answered.start - word
}

/// The menu's line for `text`: its first line, cut at [`LABEL_CHARS`], with `…` where more
/// follows.
fn label(text: &str) -> String {
    let mut lines = text.lines();
    let first = lines.next().unwrap_or_default().trim_end();
    let mut label: String = first.chars().take(LABEL_CHARS).collect();
    if label.len() < first.len() || lines.next().is_some() {
        label.push('…');
    }
    label
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encoding::PositionEncoding;
    use ropey::Rope;
    use tower_lsp_server::ls_types::Position;

    /// The items for `suggestions` at `$0` in `text`: (label, range, new text).
    fn menu(text: &str, suggestions: &[&str]) -> Vec<(String, Range, String)> {
        let cursor = text.find("$0").unwrap();
        let answered = Answered {
            rope: Rope::from_str(&text.replace("$0", "")),
            start: cursor,
            end: cursor,
            lead: String::new(),
            encoding: PositionEncoding::Utf16,
            texts: suggestions.iter().map(|s| s.to_string()).collect(),
            language: "rust".into(),
        };
        items(&answered)
            .into_iter()
            .map(|item| {
                let Some(CompletionTextEdit::Edit(edit)) = item.text_edit else {
                    panic!("a plain edit: {item:?}");
                };
                assert_eq!(item.filter_text.as_deref(), Some(edit.new_text.as_str()));
                (item.label, edit.range, edit.new_text)
            })
            .collect()
    }

    #[test]
    fn an_item_starts_where_the_word_at_the_cursor_starts() {
        let at = |l, c| Position::new(l, c);
        // The word typed so far (UTF-16 columns past a 4-byte character) is the item's start.
        assert_eq!(
            menu("fn f() {\n    let 😀 = pri$0\n}", &["ntln!(\"x\");"]),
            vec![(
                "println!(\"x\");".into(),
                Range::new(at(1, 13), at(1, 16)),
                "println!(\"x\");".into()
            )]
        );
        // After punctuation nothing is typed of a word: an insertion at the cursor. A one-line
        // suggestion that ends with the rest of the line is inserted without it (a menu that
        // replaces only up to the cursor would leave `)` twice); a longer one replaces the rest,
        // as inline; a suggestion that is only the rest is no item.
        assert_eq!(
            menu("    foo($0)", &["a, b)", "a, b)\nc", ")"]),
            vec![
                ("a, b".into(), Range::new(at(0, 8), at(0, 8)), "a, b".into()),
                (
                    "a, b)…".into(),
                    Range::new(at(0, 8), at(0, 9)),
                    "a, b)\nc".into()
                ),
            ]
        );
    }

    #[test]
    fn labels_are_one_short_line_and_empty_suggestions_are_no_items() {
        let long = "x".repeat(70);
        let labels: Vec<String> = menu("let v = $0", &[&long, "a;\nb;", "  ", ""])
            .into_iter()
            .map(|(label, _, _)| label)
            .collect();
        assert_eq!(
            labels,
            vec![format!("{}…", "x".repeat(60)), "a;…".to_string()]
        );
    }

    /// A menu's request and an inline one on the same document do not cancel each other (a
    /// client showing ghost text beside a menu dropped the cancelled menu without a word, seen
    /// in Neovim); an edit cancels both.
    #[tokio::test]
    async fn a_menu_and_an_inline_request_run_side_by_side_and_an_edit_stops_both() {
        use crate::harness::{TestServer, CANCELLED};
        use serde_json::json;
        const URI: &str = "file:///w/src/lib.rs";
        let (mut lsp, _jobs) = TestServer::start(json!({})).await;
        lsp.open(URI, "fn f() {\n    let total = \n}\n").await;
        let menu_request = json!({"textDocument": {"uri": URI},
            "position": {"line": 1, "character": 16}, "context": {"triggerKind": 3}});
        // Both wait for their snapshots while the inline request arrives after the menu's.
        let held = lsp.hold_documents();
        let menu = lsp
            .request("textDocument/completion", menu_request.clone())
            .await;
        let inline = lsp.inline(URI, 1, 16).await;
        drop(held);
        let answer = menu
            .answer()
            .await
            .expect("the menu's request is not cancelled");
        assert_eq!(
            answer,
            json!({"isIncomplete": true, "items": []}),
            "no model here"
        );
        assert!(inline.answer().await.is_ok());

        let held = lsp.hold_documents();
        let menu = lsp
            .request("textDocument/completion", menu_request.clone())
            .await;
        let inline = lsp.inline(URI, 1, 16).await;
        lsp.change(URI, 1, Some([[2, 1], [2, 1]]), "\n").await;
        drop(held);
        assert_eq!(menu.answer().await, Err(CANCELLED));
        assert_eq!(inline.answer().await, Err(CANCELLED));
    }

    #[test]
    fn items_are_offered_to_clients_without_inline_completions_unless_set() {
        let with_inline: InitializeParams = serde_json::from_value(serde_json::json!({
            "capabilities": {"textDocument": {"inlineCompletion": {}}}
        }))
        .unwrap();
        let without = InitializeParams::default();
        let (with_inline, without) = (shows_inline(&with_inline), shows_inline(&without));
        assert!(!offered(None, with_inline));
        assert!(offered(None, without));
        assert!(offered(Some(true), with_inline));
        assert!(!offered(Some(false), without));
    }

    #[test]
    fn a_menu_announced_goes_with_the_setting_and_one_not_announced_cannot_come() {
        let menu = |announced, shows_inline| Menu {
            announced,
            shows_inline,
        };
        // Announced (a client without inline completions): off later answers nothing.
        assert!(menu(true, false).answers(None));
        assert!(!menu(true, false).answers(Some(false)));
        assert!(menu(true, true).answers(Some(true)));
        assert!(!menu(true, true).answers(None));
        assert_eq!(menu(true, false).cannot(Some(false)), None);
        // Not announced: never answered, and asking for it says how.
        assert!(!menu(false, true).answers(Some(true)));
        assert!(menu(false, true)
            .cannot(Some(true))
            .is_some_and(|note| note.contains("initializationOptions")));
        assert_eq!(menu(false, true).cannot(None), None);
        assert_eq!(menu(false, true).cannot(Some(false)), None);
    }
}
