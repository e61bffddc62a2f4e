//! Synthetic edits on small sources: each kind finds its edit, the history is what was done
//! first, applying the target gives the code one edit further, and the same file and seed give
//! the same cases.

use redraft_context::edit::cut::{CutOptions, EditCase};

use super::{cases, SyntheticOptions};
use crate::edits::EditKind;

/// Every case of `kind` from `source`, as (text with `$0` at the cursor, text after the target).
fn made(source: &str, kind: EditKind) -> Vec<(String, Option<String>)> {
    let options = SyntheticOptions {
        per_file: 20,
        no_edit_fraction: 0.0,
        ..SyntheticOptions::default()
    };
    cases(
        "src/lib.rs",
        source,
        "fixture",
        &options,
        &CutOptions::default(),
    )
    .cases
    .into_iter()
    .filter(|(k, _)| *k == kind)
    .map(|(_, case)| (marked(&case), applied(&case)))
    .collect()
}

fn marked(case: &EditCase) -> String {
    let mut text = case.text.clone();
    text.insert_str(case.cursor, "$0");
    text
}

fn applied(case: &EditCase) -> Option<String> {
    let target = case.target.as_ref()?;
    let mut text = case.text.clone();
    text.replace_range(target.range.clone(), &target.new_text);
    Some(text)
}

#[test]
fn unwraps_become_question_marks_one_by_one() {
    let source = "\
fn load(path: &str) -> Result<u32, Error> {
    let text = read(path)?;
    let n = text.trim().parse()?.checked_add(1)?;
    Ok(n)
}
";
    let mut found = made(source, EditKind::UnwrapToTry);
    found.sort();
    assert_eq!(
        found,
        [
            (
                "fn load(path: &str) -> Result<u32, Error> {\n    let text = read(path)?$0;\n    let n = text.trim().parse().unwrap().checked_add(1).unwrap();\n    Ok(n)\n}\n".to_string(),
                Some("fn load(path: &str) -> Result<u32, Error> {\n    let text = read(path)?;\n    let n = text.trim().parse()?.checked_add(1).unwrap();\n    Ok(n)\n}\n".to_string()),
            ),
            (
                "fn load(path: &str) -> Result<u32, Error> {\n    let text = read(path)?;\n    let n = text.trim().parse()?$0.checked_add(1).unwrap();\n    Ok(n)\n}\n".to_string(),
                Some(source.to_string()),
            ),
        ]
    );
}

#[test]
fn a_try_inside_a_closure_is_not_the_fns() {
    let source = "\
fn load() -> Result<(), Error> {
    let f = || -> Result<u32, Error> { Ok(a()?) };
    b()?;
    Ok(())
}
";
    assert_eq!(made(source, EditKind::UnwrapToTry), []);
}

#[test]
fn a_repeated_marker_goes_back_on_the_next_line() {
    let source = "\
struct Point {
    pub x: f32,
    pub y: f32,
    pub z: f32,
}
";
    assert_eq!(
        made(source, EditKind::RepeatPattern),
        [(
            "struct Point {\n    pub x: f32,\n    pub $0y: f32,\n    z: f32,\n}\n".to_string(),
            Some(source.to_string())
        )]
    );
}

#[test]
fn a_new_variant_is_followed_by_its_match_arm() {
    let source = "\
enum Shape {
    Circle(f32),
    /// A square.
    Square(f32),
}

fn area(shape: &Shape) -> f32 {
    match shape {
        Shape::Circle(r) => 3.14 * r * r,
        Shape::Square(s) => s * s,
    }
}
";
    let found = made(source, EditKind::EnumVariant);
    assert!(
        found.contains(&(
            "enum Shape {\n    Circle(f32),\n    /// A square.\n    Square(f32),$0\n}\n\nfn area(shape: &Shape) -> f32 {\n    match shape {\n        Shape::Circle(r) => 3.14 * r * r,\n    }\n}\n".to_string(),
            Some(source.to_string())
        )),
        "{found:#?}"
    );
}

#[test]
fn a_rename_reaches_the_other_uses() {
    let source = "\
fn scale(v: u32) -> u32 {
    let total = v * 2;
    total + total
}
";
    let found = made(source, EditKind::Rename);
    // The new name is picked from the old one: `total_<word>`.
    let new_name = found[0]
        .0
        .split("let ")
        .nth(1)
        .unwrap()
        .split([' ', '$'])
        .next()
        .unwrap();
    assert!(new_name.starts_with("total_"), "{found:#?}");
    assert!(
        found.contains(&(
            format!("fn scale(v: u32) -> u32 {{\n    let {new_name}$0 = v * 2;\n    total + total\n}}\n"),
            Some(format!("fn scale(v: u32) -> u32 {{\n    let {new_name} = v * 2;\n    {new_name} + {new_name}\n}}\n"))
        )),
        "{found:#?}"
    );
    // A name also in a format string, or bound twice, is left alone.
    let source =
        "fn f(a: u32) { let a = a + 1; g(a); }\nfn h(b: u32) { println!(\"{b}\"); g(b); }\n";
    assert_eq!(made(source, EditKind::Rename), []);
}

#[test]
fn a_new_parameter_reaches_the_next_call() {
    let source = "\
fn step(x: u32) -> u32 {
    x + 1
}

fn run() {
    let a = step(1);
    let b = step(a);
}
";
    let found = made(source, EditKind::AddParameter);
    let (text, after) = &found
        .iter()
        .find(|(text, _)| text.contains("step(1, "))
        .expect("a case after the first call");
    assert!(text.contains("fn step(x: u32, "), "{text}");
    let after = after.as_ref().unwrap();
    assert!(after.contains("step(a, "), "{after}");
}

#[test]
fn a_new_field_reaches_the_next_initialiser() {
    let source = "\
pub struct Config {
    pub name: String,
}

impl Config {
    fn new() -> Self {
        Self {
            name: String::new(),
        }
    }
}
";
    let found = made(source, EditKind::AddField);
    assert_eq!(found.len(), 1, "{found:#?}");
    let (text, after) = &found[0];
    assert!(text.contains("    pub name: String,\n    pub "), "{text}");
    let after = after.as_ref().unwrap();
    assert!(
        after.contains("            name: String::new(),\n            "),
        "{after}"
    );
}

#[test]
fn the_same_file_and_seed_give_the_same_cases() {
    let source = include_str!("../../corpus/cargo_files.rs");
    let options = SyntheticOptions::default();
    let run = || cases("a.rs", source, "k", &options, &CutOptions::default()).cases;
    assert_eq!(run(), run());
    let other = SyntheticOptions {
        seed: 1,
        ..options.clone()
    };
    let reseeded = cases("a.rs", source, "k", &other, &CutOptions::default()).cases;
    assert!(!run().is_empty());
    assert_ne!(run(), reseeded, "another seed picks other opportunities");
}
