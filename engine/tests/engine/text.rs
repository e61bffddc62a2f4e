//! What the model's tokens spell is only ever valid text (`Tokenizer::text`, `Draft::render`):
//! multi-byte characters (emoji, CJK, NUL among ASCII) split across tokens at random points, on
//! the default model's byte-level vocabulary, decode to a prefix of the text at every token,
//! with a character cut off at the end held back, and to the whole text at the last; a byte no
//! character is made of ends the text where it sits. Never a U+FFFD the text did not hold.

use proptest::prelude::*;

use crate::tokenizer;
use redraft_engine::MASK_GLYPH;
use redraft_engine::{Draft, Tail, Text};

/// GPT-2's byte-level character for `b` (the vocabulary's spelling of a lone byte).
fn byte_char(b: u8) -> char {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xa1..=0xac | 0xae..=0xff);
    if printable(b) {
        return b as char;
    }
    let shifted = (0..b).filter(|&x| !printable(x)).count() as u32;
    char::from_u32(256 + shifted).unwrap()
}

/// The ids of `piece`: one token when the vocabulary has it whole, else a token per byte.
fn ids_of(piece: &[u8]) -> Vec<u32> {
    let tok = tokenizer();
    let spelled: String = piece.iter().map(|&b| byte_char(b)).collect();
    match tok.token_to_id(&spelled) {
        Some(id) => vec![id],
        None => piece
            .iter()
            .map(|&b| tok.token_to_id(&byte_char(b).to_string()).unwrap())
            .collect(),
    }
}

/// `text`'s bytes cut at `cuts` (positions taken modulo its length), as token ids.
fn split(text: &str, cuts: &[usize]) -> Vec<u32> {
    split_counted(text, cuts)
        .into_iter()
        .map(|(id, _)| id)
        .collect()
}

/// [`split`], each id with how many bytes it stands for.
fn split_counted(text: &str, cuts: &[usize]) -> Vec<(u32, usize)> {
    let bytes = text.as_bytes();
    let mut at: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    at.extend([0, bytes.len()]);
    at.sort_unstable();
    at.dedup();
    at.windows(2)
        .flat_map(|w| {
            let piece = &bytes[w[0]..w[1]];
            let ids = ids_of(piece);
            let each = if ids.len() == 1 { piece.len() } else { 1 };
            ids.into_iter().map(move |id| (id, each))
        })
        .collect()
}

fn multibyte_text() -> impl Strategy<Value = String> {
    let pieces = prop::sample::select(vec![
        "a",
        " ",
        "\n",
        "{",
        "é",
        "中",
        "文",
        "😀",
        "🦀",
        "\0",
        "ü",
        "∑",
        "\u{10ffff}",
    ]);
    prop::collection::vec(pieces, 0..24).prop_map(|p| p.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Every prefix of the tokens is a prefix of the text, held back only inside a character;
    /// all of them are the text.
    #[test]
    fn every_token_prefix_is_a_prefix_of_the_text(
        text in multibyte_text(),
        cuts in prop::collection::vec(any::<usize>(), 0..16),
    ) {
        let tok = tokenizer();
        let counted = split_counted(&text, &cuts);
        let ids: Vec<u32> = counted.iter().map(|&(id, _)| id).collect();
        let mut spelled = 0;
        for k in 0..=ids.len() {
            let decoded = tok.text(&ids[..k]).unwrap();
            prop_assert!(text.starts_with(&decoded.text), "{decoded:?} of {text:?}");
            // Held back: only the start of one character, and only then.
            let held = spelled - decoded.text.len();
            match decoded.tail {
                Tail::Complete => prop_assert_eq!(held, 0),
                Tail::Incomplete => prop_assert!((1..=3).contains(&held)),
                Tail::Invalid => prop_assert!(false, "{decoded:?}"),
            }
            spelled += counted.get(k).map_or(0, |&(_, n)| n);
        }
        prop_assert_eq!(tok.text(&ids).unwrap(), Text { text: text.clone(), tail: Tail::Complete });
        // The tokenizer's own encoding is one more split.
        let encoded = tok.encode(&text).unwrap();
        prop_assert_eq!(tok.text(&encoded).unwrap().text, text.clone());
        prop_assert_eq!(tok.decode(&encoded).unwrap(), text);
    }

    /// A byte no character is made of, anywhere, ends the text before it (and before the
    /// character it interrupts).
    #[test]
    fn a_stray_byte_ends_the_text_where_it_sits(
        text in multibyte_text(),
        cuts in prop::collection::vec(any::<usize>(), 0..16),
        at in any::<usize>(),
        stray in prop::sample::select(vec![0xffu8, 0xc0, 0xf8]),
    ) {
        let tok = tokenizer();
        let mut ids = split(&text, &cuts);
        let at = at % (ids.len() + 1);
        let before = tok.text(&ids[..at]).unwrap().text;
        ids.insert(at, ids_of(&[stray])[0]);
        let decoded = tok.text(&ids).unwrap();
        prop_assert_eq!(decoded, Text { text: before, tail: Tail::Invalid });
    }

    /// A draft with masked slots among the tokens shows, between the masks, only text the
    /// finished middle will hold, and ends at an EOS.
    #[test]
    fn drafts_show_only_text_of_the_middle(
        text in multibyte_text(),
        cuts in prop::collection::vec(any::<usize>(), 0..16),
        masked in prop::collection::vec(any::<bool>(), 0..64),
    ) {
        let tok = tokenizer();
        let ids = split(&text, &cuts);
        let slots: Vec<Option<u32>> = ids
            .iter()
            .zip(masked.iter().chain(std::iter::repeat(&false)))
            .map(|(&id, &m)| (!m).then_some(id))
            .collect();
        let draft = Draft::render(tok, &slots, |_| false);
        prop_assert_eq!(draft.masked, slots.iter().filter(|s| s.is_none()).count());
        for piece in draft.text.split(MASK_GLYPH) {
            prop_assert!(text.contains(piece), "{piece:?} is not in {text:?}");
        }
        prop_assert!(!draft.text.contains(char::REPLACEMENT_CHARACTER), "{:?}", draft);
    }
}

#[test]
fn the_cases_that_came_back_as_replacement_characters() {
    let tok = tokenizer();
    // What the default model wrote for `\0\0😀\0` before `\0😀😀` (the token `ãģ`: a
    // character's first byte and a byte that does not continue it), 20 times.
    let ids = vec![2867; 20];
    assert!(tok.decode(&ids).unwrap().contains('\u{fffd}'));
    let text = tok.text(&ids).unwrap();
    assert_eq!(
        text,
        Text {
            text: String::new(),
            tail: Tail::Invalid
        }
    );
    // Text first, then the bad bytes: the text is kept.
    let mut ids = tok.encode("let x = \"🦀\";").unwrap();
    let kept = ids.len();
    ids.extend([2867, 2867]);
    assert_eq!(
        tok.text(&ids).unwrap().text,
        tok.decode(&ids[..kept]).unwrap()
    );
    // In a draft: one such token is a character begun (held back, the mask may complete it);
    // two cannot be one, and nothing after them is shown.
    let draft = |slots: &[Option<u32>]| Draft::render(tok, slots, |_| false);
    assert_eq!(draft(&[Some(2867), None]).text, MASK_GLYPH.to_string());
    assert_eq!(
        draft(&[Some(2867), Some(2867), None, Some(2867)]),
        Draft {
            text: String::new(),
            masked: 1
        }
    );
}

/// Every token alone: its bytes are what the tokenizer's decode makes of it wherever that is
/// text (so assembling bytes never changes a valid answer).
#[test]
fn token_bytes_agree_with_the_tokenizers_decode() {
    let tok = tokenizer();
    for id in 0..tok.vocab_size() as u32 {
        let decoded = tok.decode(&[id]).unwrap();
        let text = tok.text(&[id]).unwrap();
        if decoded.contains('\u{fffd}') {
            assert_ne!(text.tail, Tail::Complete, "token {id}");
            assert!(decoded.starts_with(&text.text), "token {id}");
        } else {
            assert_eq!(text.text, decoded, "token {id}");
            assert_eq!(text.tail, Tail::Complete, "token {id}");
        }
    }
}
