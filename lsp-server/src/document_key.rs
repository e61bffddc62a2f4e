//! How the server tells documents apart: by their URI normalized as RFC 3986 (section 6.2.2)
//! allows for every URI, so the spellings of one URI are one document. Every map the server
//! keeps per document is keyed by a [`DocumentKey`]; what it sends keeps the client's own
//! spelling (an answer and its drafts the request's, the log the message's or the `didOpen`'s),
//! which is why a key never goes back to the client.
//!
//! Normalized:
//! - the hexadecimal digits of a percent-encoding, to upper case (`%c3%a9` is `%C3%A9`; 6.2.2.1);
//! - a percent-encoded unreserved character (letter, digit, `-`, `.`, `_`, `~`), decoded (`%2D`
//!   is `-`, `%7E` is `~`; 6.2.2.2);
//! - the scheme and the host, to lower case (`FILE:` is `file:`, `file://SERVER/` is
//!   `file://server/`; 6.2.2.1).
//!
//! Each is an equivalence for every URI whatever its scheme, and for a `file` URI the decoded
//! path, the file, is the same. Left as they are, though they may look alike:
//! - dot segments (`/w/link/../a.rs`): 6.2.2.3 would remove them, but through a symbolic link
//!   that path is another file than `/w/a.rs`, and keying two files as one would apply one's
//!   edits to the other's text;
//! - a percent-encoded reserved character (`%3A` and `:`): not equivalent under RFC 3986
//!   (section 2.2), and on its own it joins nothing in practice: VS Code's `file:///c%3A/x.rs`
//!   and the `file:///C:/x.rs` of most other clients differ in the drive letter's case too;
//! - a Windows drive letter's case (`C:` and `c:`): the case of a path is the file system's to
//!   fold, not the URI's (on Linux `/C:/` and `/c:/` are two folders), and a client spells a
//!   drive one way throughout (VS Code always `c%3A`), so one session never sees both.

use tower_lsp_server::ls_types::Uri;

/// An open document's identity: its URI, normalized (see the module comment).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DocumentKey(String);

impl DocumentKey {
    /// The key of the document the client names `uri`.
    pub fn of(uri: &Uri) -> DocumentKey {
        let mut key = String::with_capacity(uri.as_str().len());
        key.push_str(&uri.scheme().as_str().to_ascii_lowercase());
        key.push(':');
        if let Some(authority) = uri.authority() {
            key.push_str("//");
            if let Some(userinfo) = authority.userinfo() {
                push_normalized(&mut key, userinfo.as_str(), Case::AsIs);
                key.push('@');
            }
            push_normalized(&mut key, authority.host(), Case::Lower);
            if let Some(port) = authority.port() {
                key.push(':');
                key.push_str(port.as_str());
            }
        }
        push_normalized(&mut key, uri.path().as_str(), Case::AsIs);
        if let Some(query) = uri.query() {
            key.push('?');
            push_normalized(&mut key, query.as_str(), Case::AsIs);
        }
        if let Some(fragment) = uri.fragment() {
            key.push('#');
            push_normalized(&mut key, fragment.as_str(), Case::AsIs);
        }
        DocumentKey(key)
    }

    /// The key of `uri`, for tests that name documents by string.
    #[cfg(test)]
    pub fn parse(uri: &str) -> DocumentKey {
        DocumentKey::of(&uri.parse().expect("a URI"))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Case {
    AsIs,
    /// Letters to lower case, but not a percent-encoding's hexadecimal digits.
    Lower,
}

/// Appends `component` (a URI's, so ASCII with well-formed percent-encodings) with each
/// percent-encoding normalized: an unreserved character decoded, any other octet's hexadecimal
/// digits in upper case.
fn push_normalized(key: &mut String, component: &str, case: Case) {
    let push = |key: &mut String, text: &str| match case {
        Case::AsIs => key.push_str(text),
        Case::Lower => key.push_str(&text.to_ascii_lowercase()),
    };
    let mut rest = component;
    while let Some(at) = rest.find('%') {
        push(key, &rest[..at]);
        let octet = rest
            .get(at + 1..at + 3)
            .filter(|hex| hex.bytes().all(|b| b.is_ascii_hexdigit()))
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match octet {
            Some(octet) if unreserved(octet) => key.push(match case {
                Case::AsIs => char::from(octet),
                Case::Lower => char::from(octet.to_ascii_lowercase()),
            }),
            Some(octet) => key.push_str(&format!("%{octet:02X}")),
            // Not a percent-encoding (a URI never has one); kept as it is.
            None => {
                key.push('%');
                rest = &rest[at + 1..];
                continue;
            }
        }
        rest = &rest[at + 3..];
    }
    push(key, rest);
}

/// RFC 3986's unreserved characters (section 2.3).
fn unreserved(octet: u8) -> bool {
    octet.is_ascii_alphanumeric() || matches!(octet, b'-' | b'.' | b'_' | b'~')
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn check(spellings: &[&str], key: &str) {
        for spelling in spellings {
            assert_eq!(DocumentKey::parse(spelling).as_str(), key, "{spelling}");
        }
    }

    #[test]
    fn spellings_of_one_uri_are_one_key() {
        // Percent-encoding's case, escaped unreserved characters.
        check(
            &[
                "file:///w/caf%c3%a9%2Dlib.rs",
                "file:///w/caf%C3%A9-lib.rs",
                "file:///w/caf%C3%a9%2dlib.rs",
                "file:///w/%63af%C3%A9-lib.rs",
            ],
            "file:///w/caf%C3%A9-lib.rs",
        );
        check(
            &["file:///home/%7Eme/a%20b.rs", "file:///home/~me/a%20b.rs"],
            "file:///home/~me/a%20b.rs",
        );
        // The scheme and the host, whatever their case; a percent-encoding in the host keeps
        // its digits in upper case.
        check(
            &["FILE://Server/share/a.rs", "file://SERVER/share/%61.rs"],
            "file://server/share/a.rs",
        );
        check(&["file://H%c3%a9/x"], "file://h%C3%A9/x");
        // Every component: userinfo, port, query and fragment too.
        check(
            &["Untitled:%55ntitled-1?a=%2f#%7e"],
            "untitled:Untitled-1?a=%2F#~",
        );
        check(
            &["http://%75ser@Example.com:8080/%7e?q#f"],
            "http://user@example.com:8080/~?q#f",
        );
    }

    /// What looks alike but is kept apart (see the module comment for why).
    #[test]
    fn what_may_name_another_file_or_is_no_uri_equivalence_stays_apart() {
        let apart = |a: &str, b: &str| {
            assert_ne!(DocumentKey::parse(a), DocumentKey::parse(b), "{a} and {b}");
        };
        // Dot segments: through a symbolic link, another file.
        apart("file:///w/link/../a.rs", "file:///w/a.rs");
        apart("file:///w/./a.rs", "file:///w/a.rs");
        // A reserved character escaped or not; a drive letter's case.
        apart("file:///c%3A/x.rs", "file:///c:/x.rs");
        apart("file:///c:/x.rs", "file:///C:/x.rs");
        apart("file:///C:/x.rs", "file:///c%3A/x.rs");
        apart("file:///w/a%2Fb.rs", "file:///w/a/b.rs");
        // A path's case.
        apart("file:///w/A.rs", "file:///w/a.rs");
        // An authority, empty or not.
        apart("file:///w/a.rs", "file://localhost/w/a.rs");
        // Spellings VS Code sends, unchanged.
        check(&["file:///c%3A/w/a%20b.rs"], "file:///c%3A/w/a%20b.rs");
    }

    /// A path segment, decoded, and two ways to spell it in a URI.
    fn segment() -> impl Strategy<Value = (String, [String; 2])> {
        let unreserved = "abcXYZ019-._~"
            .chars()
            .map(String::from)
            .collect::<Vec<_>>();
        let other = [" ", "é", ":", "/", "%", "#", "?", "😀"]
            .map(String::from)
            .to_vec();
        let character = prop_oneof![
            3 => prop::sample::select(unreserved),
            1 => prop::sample::select(other),
        ];
        prop::collection::vec((character, any::<[(bool, bool); 2]>()), 1..8).prop_map(|chars| {
            let decoded = chars.iter().map(|(c, _)| c.as_str()).collect();
            let spell = |which: usize| -> String {
                chars
                    .iter()
                    .map(|(c, ways)| spelled(c, ways[which]))
                    .collect()
            };
            (decoded, [spell(0), spell(1)])
        })
    }

    /// `text` in a URI's path: as it is when it is unreserved and not `escape`d, else
    /// percent-encoded, the digits in `lower` case or not.
    fn spelled(text: &str, (escape, lower): (bool, bool)) -> String {
        if !escape && text.bytes().all(unreserved) {
            return text.to_string();
        }
        text.bytes()
            .map(|b| match lower {
                true => format!("%{b:02x}"),
                false => format!("%{b:02X}"),
            })
            .collect()
    }

    proptest! {
        /// Oracle: the spellings of a `file` URI of one path are one key, a URI that is its
        /// own key and names that path; a path that decodes otherwise is another key.
        #[test]
        fn spellings_of_a_path_are_one_key_and_other_paths_another(
            (path, spellings) in segment(),
            (other, other_spellings) in segment(),
            scheme in prop::sample::select(vec!["file", "FILE", "File"]),
        ) {
            let key = |spelled: &str| DocumentKey::parse(&format!("{scheme}:///w/{spelled}.rs"));
            let [first, second] = spellings.clone().map(|s| key(&s));
            prop_assert_eq!(&first, &second, "{:?}", spellings);
            prop_assert_eq!(&DocumentKey::parse(first.as_str()), &first, "a key is its own key");
            let uri: Uri = first.as_str().parse().unwrap();
            prop_assert_eq!(
                uri.to_file_path().unwrap().to_string_lossy().into_owned(),
                format!("/w/{path}.rs"),
                "the same file"
            );
            if other != path {
                prop_assert_ne!(key(&other_spellings[0]), first);
            }
        }
    }
}
