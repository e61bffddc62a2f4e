//! A frame's body to a JSON-RPC message, or to the error the client is owed for it.
//!
//! Text is taken as faithfully as UTF-8 allows, never refused: each byte that is not valid
//! UTF-8 becomes one U+FFFD, and a `\uXXXX` escape of a lone UTF-16 surrogate (JSON allows it,
//! Rust strings cannot hold it) becomes `\ufffd`. One replacement character per bad byte or
//! lone surrogate keeps the positions of the text after it where the client counts them: an
//! editor counts an undecodable byte as one character (Vim, Neovim) and a lone surrogate as one
//! UTF-16 unit, and U+FFFD is one character and one UTF-16 unit.

use std::borrow::Cow;

use serde_json::Value;
use tower_lsp_server::jsonrpc::{Id, Request, Response};

/// What a body held.
#[derive(Debug)]
pub enum Message {
    Request(Request),
    Response(Response),
}

/// Why a body is not a message; each answers the client (with `id` where one could be read).
#[derive(Debug, PartialEq)]
pub enum Rejected {
    /// Not JSON (-32700, id null).
    NotJson(String),
    /// JSON, but not a JSON-RPC request, notification or response (-32600).
    NotJsonRpc { id: Id, reason: String },
}

/// What had to be changed to read the body, for the log.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Repairs {
    pub invalid_utf8_bytes: usize,
    pub lone_surrogates: usize,
    /// Bytes after the JSON value, ignored.
    pub trailing_bytes: usize,
}

impl Repairs {
    pub fn any(&self) -> bool {
        *self != Repairs::default()
    }
}

impl std::fmt::Display for Repairs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if self.invalid_utf8_bytes > 0 {
            parts.push(format!(
                "{} byte(s) that are not UTF-8 read as U+FFFD",
                self.invalid_utf8_bytes
            ));
        }
        if self.lone_surrogates > 0 {
            parts.push(format!(
                "{} lone UTF-16 surrogate(s) read as U+FFFD",
                self.lone_surrogates
            ));
        }
        if self.trailing_bytes > 0 {
            parts.push(format!(
                "{} byte(s) after the JSON value ignored",
                self.trailing_bytes
            ));
        }
        f.write_str(&parts.join(", "))
    }
}

/// Reads a body; see the module comment for what is repaired.
pub fn decode(bytes: Vec<u8>) -> (Result<Message, Rejected>, Repairs) {
    let mut repairs = Repairs::default();
    let text = to_utf8(bytes, &mut repairs);
    let text = repair_surrogates(&text, &mut repairs);
    (parse(&text, &mut repairs), repairs)
}

/// Valid UTF-8 as is (no copy); otherwise one U+FFFD per byte that is not part of a valid
/// sequence (`String::from_utf8_lossy` would merge a run into one, moving later positions).
fn to_utf8(bytes: Vec<u8>, repairs: &mut Repairs) -> String {
    let bytes = match String::from_utf8(bytes) {
        Ok(text) => return text,
        Err(err) => err.into_bytes(),
    };
    let mut text = String::with_capacity(bytes.len() + 16);
    let mut rest = &bytes[..];
    loop {
        match std::str::from_utf8(rest) {
            Ok(valid) => {
                text.push_str(valid);
                return text;
            }
            Err(err) => {
                let (valid, after) = rest.split_at(err.valid_up_to());
                // Checked by `from_utf8` just now.
                text.push_str(std::str::from_utf8(valid).unwrap_or_default());
                let bad = err.error_len().unwrap_or(after.len());
                text.extend(std::iter::repeat_n('\u{fffd}', bad));
                repairs.invalid_utf8_bytes += bad;
                rest = &after[bad..];
            }
        }
    }
}

/// Replaces `\uXXXX` escapes of unpaired surrogates with `\ufffd`. In valid JSON a backslash
/// only ever starts an escape, so stepping from escape to escape needs no string tracking.
fn repair_surrogates<'a>(text: &'a str, repairs: &mut Repairs) -> Cow<'a, str> {
    let bytes = text.as_bytes();
    let escape = |at: usize| -> Option<u16> {
        let hex = bytes.get(at..at + 6)?;
        if &hex[..2] != b"\\u" {
            return None;
        }
        u16::from_str_radix(std::str::from_utf8(&hex[2..]).ok()?, 16).ok()
    };
    let is_high = |u: u16| (0xd800..0xdc00).contains(&u);
    let is_low = |u: u16| (0xdc00..0xe000).contains(&u);
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut at = 0;
    while let Some(offset) = bytes[at..].iter().position(|&b| b == b'\\') {
        let slash = at + offset;
        match escape(slash) {
            Some(high) if is_high(high) && escape(slash + 6).is_some_and(is_low) => {
                at = slash + 12;
            }
            Some(unit) if is_high(unit) || is_low(unit) => {
                let out = out.get_or_insert_with(|| String::with_capacity(text.len()));
                out.push_str(&text[copied..slash]);
                out.push_str("\\ufffd");
                copied = slash + 6;
                repairs.lone_surrogates += 1;
                at = slash + 6;
            }
            Some(_) => at = slash + 6,
            None => at = slash + 2,
        }
        if at >= bytes.len() {
            break;
        }
    }
    match out {
        Some(mut out) => {
            out.push_str(&text[copied..]);
            Cow::Owned(out)
        }
        None => Cow::Borrowed(text),
    }
}

fn parse(text: &str, repairs: &mut Repairs) -> Result<Message, Rejected> {
    let mut values = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    let value = match values.next() {
        Some(Ok(value)) => value,
        Some(Err(err)) => return Err(Rejected::NotJson(err.to_string())),
        None => return Err(Rejected::NotJson("an empty body".into())),
    };
    // A body cut short by the next header may be followed by that frame's other headers.
    repairs.trailing_bytes = text[values.byte_offset()..].trim_ascii_start().len();
    let id = value
        .get("id")
        .and_then(|id| serde_json::from_value(id.clone()).ok())
        .unwrap_or(Id::Null);
    let Some(object) = value.as_object() else {
        return Err(Rejected::NotJsonRpc {
            id,
            reason: "not a JSON object".into(),
        });
    };
    // The value is moved, not cloned, into the message: it may hold a 50 MB document.
    let (is_request, is_response) = (
        object.contains_key("method"),
        object.contains_key("result") || object.contains_key("error"),
    );
    let reason = if is_request {
        match serde_json::from_value(value) {
            Ok(request) => return Ok(Message::Request(request)),
            Err(err) => format!("not a JSON-RPC 2.0 request: {err}"),
        }
    } else if is_response {
        match serde_json::from_value(value) {
            Ok(response) => return Ok(Message::Response(response)),
            Err(err) => format!("not a JSON-RPC 2.0 response: {err}"),
        }
    } else {
        "neither a request (no method) nor a response (no result or error)".into()
    };
    Err(Rejected::NotJsonRpc { id, reason })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repaired(json: &str) -> (String, usize) {
        let mut repairs = Repairs::default();
        let out = repair_surrogates(json, &mut repairs).into_owned();
        (out, repairs.lone_surrogates)
    }

    #[test]
    fn lone_surrogates_become_replacement_characters_and_pairs_stay() {
        // serde_json refuses a lone surrogate; that refusal used to end the server.
        assert!(serde_json::from_str::<Value>(r#""\ud83d""#).is_err());
        for (json, expect, count) in [
            (r#""\ud83d""#, r#""\ufffd""#, 1),
            (r#""\ude00x""#, r#""\ufffdx""#, 1),
            (r#""\ud83d\ude00""#, r#""\ud83d\ude00""#, 0),
            (r#""\ud83d\ud83d\ude00""#, r#""\ufffd\ud83d\ude00""#, 1),
            (r#""\ude00\ud83d""#, r#""\ufffd\ufffd""#, 2),
            // An escaped backslash before `ud83d` is text, not an escape.
            (r#""\\ud83d""#, r#""\\ud83d""#, 0),
            (r#""\\\ud83d""#, r#""\\\ufffd""#, 1),
            (r#""\u00e9\n\ud83d"#, r#""\u00e9\n\ufffd"#, 1),
            (r#""\ud8"#, r#""\ud8"#, 0),
            ("\"😀\\", "\"😀\\", 0),
        ] {
            assert_eq!(repaired(json), (expect.to_string(), count), "{json}");
        }
        let (text, _) = repaired(r#""a\ud83db""#);
        assert_eq!(serde_json::from_str::<String>(&text).unwrap(), "a\u{fffd}b");
    }

    #[test]
    fn each_byte_that_is_not_utf8_is_one_replacement_character() {
        let mut repairs = Repairs::default();
        let text = to_utf8(
            b"a\xffb\xe2\x82c\xf0\x9f\x98\x80\xed\xa0\x80\xe2".to_vec(),
            &mut repairs,
        );
        assert_eq!(
            text,
            "a\u{fffd}b\u{fffd}\u{fffd}c😀\u{fffd}\u{fffd}\u{fffd}\u{fffd}"
        );
        assert_eq!(repairs.invalid_utf8_bytes, 7);
        let mut repairs = Repairs::default();
        assert_eq!(to_utf8(b"plain".to_vec(), &mut repairs), "plain");
        assert!(!repairs.any());
    }

    fn rejected(body: &str) -> Rejected {
        decode(body.as_bytes().to_vec()).0.unwrap_err()
    }

    #[test]
    fn bodies_that_are_not_json_rpc_say_why_and_keep_the_id() {
        assert!(matches!(rejected("{not json"), Rejected::NotJson(_)));
        assert!(matches!(rejected(""), Rejected::NotJson(_)));
        assert!(matches!(
            rejected(&"[".repeat(10_000)),
            Rejected::NotJson(_)
        ));
        for (body, id) in [
            (r#"{"hello":"world"}"#, Id::Null),
            ("[1, 2]", Id::Null),
            (r#"{"jsonrpc":"1.0","id":7,"method":"x"}"#, Id::Number(7)),
            (
                r#"{"jsonrpc":"2.0","id":"a","method":5}"#,
                Id::String("a".into()),
            ),
            (r#"{"jsonrpc":"2.0","id":3}"#, Id::Number(3)),
            (r#"{"jsonrpc":"2.0","id":1.5,"method":"x"}"#, Id::Null),
        ] {
            match rejected(body) {
                Rejected::NotJsonRpc { id: got, .. } => assert_eq!(got, id, "{body}"),
                other => panic!("{body}: {other:?}"),
            }
        }
    }

    #[test]
    fn requests_and_responses_with_repairs() {
        let body = b"{\"jsonrpc\":\"2.0\",\"method\":\"textDocument/didOpen\",\"params\":{\"text\":\"\xff\\ud83d\"}}Content-Type: x\r\n".to_vec();
        let (message, repairs) = decode(body);
        let Ok(Message::Request(request)) = message else {
            panic!("{message:?}");
        };
        assert_eq!(request.method(), "textDocument/didOpen");
        assert_eq!(request.params().unwrap()["text"], "\u{fffd}\u{fffd}");
        assert_eq!(
            repairs,
            Repairs {
                invalid_utf8_bytes: 1,
                lone_surrogates: 1,
                trailing_bytes: 17
            }
        );
        let (message, repairs) = decode(br#"{"jsonrpc":"2.0","id":0,"result":null}"#.to_vec());
        assert!(matches!(message, Ok(Message::Response(_))), "{message:?}");
        assert!(!repairs.any());
    }
}
