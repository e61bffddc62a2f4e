//! A request's context is encoded only as far as the model can see it
//! (`Tokenizer::encode_tail`/`encode_head`, `Engine::canvas`): the canvas of a huge prefix and
//! suffix is the canvas of the text near the cursor, token for token, and the tail and head
//! encodings agree with the whole text's tokens past their cut edge.

use std::path::Path;

use proptest::prelude::*;
use redraft_engine::tokenizer::Tokenizer;

use crate::tokenizer;
use redraft_engine::{Engine, InfillRequest};

fn engine() -> Engine {
    Engine::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/small-model"))
        .expect("the fixture model loads")
}

/// Code of every shape the cut may land in: indentation, long identifiers, string literals,
/// runs of spaces and punctuation (long ones, which BPE splits from their start), multi-byte
/// characters.
fn code(lines: usize) -> String {
    (0..lines)
        .map(|i| match i % 7 {
            5 if i % 3 == 0 => format!("    let pad = \"{}\";\n", " ".repeat(500 + i * 13)),
            5 => format!("// {}\n", "=/".repeat(300 + i * 7)),
            0 => format!("fn function_number_{i}(x: u32) -> u32 {{\n"),
            1 => format!("    let s = \"chaîne {i} — 字\";{}\n", " ".repeat(i % 37)),
            2 => "    // ==================================================\n".to_string(),
            3 => format!("    x.wrapping_mul({i}).rotate_left(3)\n"),
            _ => "}\n\n".to_string(),
        })
        .collect()
}

fn whole_tail(tok: &Tokenizer, text: &str, keep: usize) -> Vec<u32> {
    let ids = tok.encode(text).unwrap();
    ids[ids.len().saturating_sub(keep)..].to_vec()
}

#[test]
fn a_huge_context_gives_the_canvas_of_the_text_near_the_cursor() {
    let engine = engine();
    let prefix = code(60_000); // ~2 MB
    let suffix = code(60_000);
    let near_prefix = &prefix[prefix.len() - 20_000..];
    let near_suffix = &suffix[..20_000];
    let huge = engine
        .canvas(&InfillRequest::new(&prefix, &suffix))
        .unwrap();
    let near = engine
        .canvas(&InfillRequest::new(near_prefix, near_suffix))
        .unwrap();
    assert_eq!(huge, near);
    assert!(!huge.prefix.is_empty() && !huge.suffix.is_empty());
}

#[test]
fn tail_and_head_asked_for_more_than_the_text_holds_are_the_whole_texts() {
    let tok = tokenizer();
    let text = code(7);
    let whole = tok.encode(&text).unwrap();
    assert_eq!(tok.encode_tail(&text, whole.len() + 1).unwrap(), whole);
    assert_eq!(tok.encode_head(&text, whole.len() + 1).unwrap(), whole);
    assert_eq!(tok.encode_tail("", 10).unwrap(), Vec::<u32>::new());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Past the edge's spare, the tail's tokens are the whole text's last tokens and the head's
    /// its first, wherever the text ends.
    #[test]
    fn past_the_edge_the_tokens_are_the_whole_texts(lines in 40usize..200, cut in 0usize..97, want in 1usize..300) {
        let tok = tokenizer();
        let mut text = code(lines);
        let mut end = text.len().saturating_sub(cut);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        let tail = tok.encode_tail(&text, want).unwrap();
        let whole = tok.encode(&text).unwrap();
        prop_assert!(tail.len() >= want.min(whole.len()));
        prop_assert_eq!(&tail[..], &whole_tail(tok, &text, tail.len())[..]);
        let head = tok.encode_head(&text, want).unwrap();
        prop_assert!(head.len() >= want.min(whole.len()));
        prop_assert_eq!(&head[..], &whole[..head.len()]);
    }
}

/// A cut inside a run far longer than any token (spaces, `=`), with no line start near: the
/// whole run's tokens shift with where it starts, so the run is left out, not guessed.
#[test]
fn a_cut_inside_a_long_run_keeps_only_the_whole_texts_tokens() {
    let tok = tokenizer();
    for run in [" ", "=", "/"] {
        for len in [500, 3000, 6000] {
            let text = format!("x{}{}", run.repeat(len), code(5));
            let whole = tok.encode(&text).unwrap();
            for want in [16, 64, 200] {
                let tail = tok.encode_tail(&text, want).unwrap();
                assert!(
                    tail.len() >= want.min(whole.len()),
                    "{run:?} x {len}, {want}"
                );
                assert_eq!(
                    tail,
                    whole_tail(tok, &text, tail.len()),
                    "{run:?} x {len}, {want}"
                );
                let reversed = format!("{}{}x", code(5), run.repeat(len));
                let whole = tok.encode(&reversed).unwrap();
                let head = tok.encode_head(&reversed, want).unwrap();
                assert!(head.len() >= want.min(whole.len()));
                assert_eq!(head, whole[..head.len()], "{run:?} x {len}, {want}");
            }
        }
    }
}
