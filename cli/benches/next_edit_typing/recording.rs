//! The next-edit typing replay's recording: refactorings a programmer carries through a real
//! Rust file site by site, found in its text with tree-sitter, so the same file always gives
//! the same recording and nothing in it is picked by hand.
//!
//! - [`Kind::Rename`]: a local or parameter renamed at its declaration, then at each use in
//!   file order (a word appended to short names, put before long ones: `len` -> `len_total`).
//! - [`Kind::Signature`]: a parameter appended to a fn's signature, then an argument added at
//!   each call site in the file (the fn's own parameter in a call from inside it).
//! - [`Kind::Unwrap`]: the `?`s of a fn returning `Result` or `Option` written as `.unwrap()`
//!   in the starting text (so the end state is the code as its author wrote it), then turned
//!   back into `?` one by one.
//!
//! The refactorings are found by `redraft_train::edits::synthetic::refactorings`, the search
//! that also makes next-edit training cases of the same kinds, with its stricter [`RULES`]: a
//! rename only where the name is bound once in the fn (closures included) and never spelled in
//! a format string or a shorthand field, and with two uses at least; a parameter only on fns
//! that are not a trait's and whose name no other fn has; an unwrap refactoring of two `?`s at
//! least. Each refactoring owns the fns it edits and no two share one, so their sites never
//! collide.
//!
//! Every site is one edit group, typed as an editor sends it: an inserted name part, parameter
//! or argument a character at a time; a `.unwrap()` selected and replaced by `?` in one change.

use std::ops::Range;

use redraft_context::parse_rust;
use redraft_train::edits::synthetic::refactorings::{self, File, Rules};
use redraft_train::edits::EditKind;

/// The search's rules for the replay: stricter than the training data's, so that every site
/// typed is one a programmer carrying the refactoring through would edit.
const RULES: Rules = Rules {
    closures: true,
    shorthand_patterns: true,
    skip_after_dot: true,
    unique_names: true,
    option_returns: true,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Rename,
    Signature,
    Unwrap,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Rename, Kind::Signature, Kind::Unwrap];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Rename => "rename",
            Kind::Signature => "signature",
            Kind::Unwrap => "unwrap",
        }
    }
}

/// One change as an editor sends it: bytes `at..at + delete` of the document as it is then
/// replaced by `insert`.
#[derive(Debug, Clone, PartialEq)]
pub struct Keystroke {
    pub at: usize,
    pub delete: usize,
    pub insert: String,
}

impl Keystroke {
    pub fn apply(&self, text: &mut String) {
        text.replace_range(self.at..self.at + self.delete, &self.insert);
    }

    /// Where the cursor is after it.
    pub fn cursor(&self) -> usize {
        self.at + self.insert.len()
    }
}

/// A refactoring: its sites in the order they are edited, each an edit group of keystrokes.
#[derive(Debug, Clone)]
pub struct Refactoring {
    pub kind: Kind,
    /// What it does, for the report (`rename `n` -> `n_count` in fn `advance``).
    pub what: String,
    pub groups: Vec<Vec<Keystroke>>,
}

#[derive(Debug, Clone)]
pub struct Recording {
    /// The document when typing starts: the file, with the unwrap refactorings' `?`s written
    /// as `.unwrap()`.
    pub start: String,
    /// In the order they are typed (the kinds taking turns).
    pub refactorings: Vec<Refactoring>,
}

/// How much to take from a file.
pub struct Limits {
    /// Refactorings of each kind, at most (spread over the file's candidates).
    pub per_kind: usize,
    /// Sites of one refactoring, at most (the first ones in editing order).
    pub max_sites: usize,
}

/// A site in the starting text: `range` becomes `text`, typed a character at a time when
/// `typed`, else as one replacement.
#[derive(Debug, Clone)]
struct Site {
    range: Range<usize>,
    text: String,
    typed: bool,
}

/// A candidate: what it does, the fns it edits (their byte ranges) and its sites in order.
struct Candidate {
    kind: Kind,
    what: String,
    owns: Vec<Range<usize>>,
    sites: Vec<Site>,
}

impl From<refactorings::Refactoring> for Candidate {
    /// A found refactoring's edits as sites: a rename's or added parameter's typed, an
    /// unwrap's (each `?` of the real file written `.unwrap()`) to be undone in the starting
    /// text.
    fn from(refactoring: refactorings::Refactoring) -> Candidate {
        let (kind, typed) = match refactoring.kind {
            EditKind::Rename => (Kind::Rename, true),
            EditKind::AddParameter => (Kind::Signature, true),
            EditKind::UnwrapToTry => (Kind::Unwrap, false),
            other => unreachable!("the search makes no {other:?} refactorings"),
        };
        let sites = refactoring
            .typed_edits()
            .into_iter()
            .map(|edit| Site {
                range: edit.range,
                text: edit.new_text,
                typed,
            })
            .collect();
        Candidate {
            kind,
            what: refactoring.what,
            owns: refactoring.owns,
            sites,
        }
    }
}

impl Recording {
    pub fn from_source(source: &str, limits: &Limits) -> Recording {
        // The unwrap refactorings are chosen on the real file, whose `?`s they undo; the others
        // on the starting text.
        let real = parse_rust(source).expect("tree-sitter parses");
        let file = File::new(source, &real);
        let unwraps = refactorings::unwraps_to_try(&file, &RULES)
            .into_iter()
            .filter(|r| r.edits.len() >= 2)
            .map(Candidate::from)
            .collect();
        let unwraps = pick(unwraps, limits.per_kind, &[]);
        // Their sites as found: each `?` of the real file and the `.unwrap()` it starts as.
        let mut undo: Vec<&Site> = unwraps.iter().flat_map(|c| &c.sites).collect();
        undo.sort_by_key(|s| s.range.start);
        let mut start = String::with_capacity(source.len() + 8 * undo.len());
        let mut at = 0;
        for site in &undo {
            start.push_str(&source[at..site.range.start]);
            start.push_str(&site.text);
            at = site.range.end;
        }
        start.push_str(&source[at..]);
        // Real offset -> starting text offset.
        let shift = |offset: usize| {
            offset
                + undo
                    .iter()
                    .filter(|s| s.range.end <= offset)
                    .map(|s| s.text.len() - s.range.len())
                    .sum::<usize>()
        };
        let unwraps: Vec<Candidate> = unwraps
            .iter()
            .map(|c| Candidate {
                kind: c.kind,
                what: c.what.clone(),
                owns: c
                    .owns
                    .iter()
                    .map(|r| shift(r.start)..shift(r.end))
                    .collect(),
                sites: c
                    .sites
                    .iter()
                    .map(|s| {
                        let at = shift(s.range.start);
                        Site {
                            range: at..at + s.text.len(),
                            text: source[s.range.clone()].to_string(),
                            typed: false,
                        }
                    })
                    .collect(),
            })
            .collect();

        let tree = parse_rust(&start).expect("tree-sitter parses");
        let file = File::new(&start, &tree);
        let taken: Vec<Range<usize>> = unwraps.iter().flat_map(|c| c.owns.clone()).collect();
        let renames = refactorings::renames(&file, &RULES)
            .into_iter()
            // The declaration and two uses at least.
            .filter(|r| r.edits.len() >= 3)
            .map(Candidate::from)
            .collect();
        let renames = pick(renames, limits.per_kind, &taken);
        let taken: Vec<Range<usize>> = taken
            .into_iter()
            .chain(renames.iter().flat_map(|c| c.owns.clone()))
            .collect();
        let signatures = refactorings::added_parameters(&file, &RULES)
            .into_iter()
            .map(Candidate::from)
            .collect();
        let signatures = pick(signatures, limits.per_kind, &taken);

        let mut by_kind = [renames, signatures, unwraps].map(|c| c.into_iter());
        let mut chosen = Vec::new();
        loop {
            let before = chosen.len();
            for kind in &mut by_kind {
                chosen.extend(kind.next());
            }
            if chosen.len() == before {
                break;
            }
        }
        let refactorings = keystrokes(&start, chosen, limits.max_sites);
        Recording {
            start,
            refactorings,
        }
    }

    /// The document after each edit group, in order, and the refactoring each group is in.
    pub fn after_groups(&self) -> Vec<(usize, String)> {
        let mut text = self.start.clone();
        let mut out = Vec::new();
        for (r, refactoring) in self.refactorings.iter().enumerate() {
            for group in &refactoring.groups {
                for key in group {
                    key.apply(&mut text);
                }
                out.push((r, text.clone()));
            }
        }
        out
    }
}

/// The chosen candidates' sites as keystrokes, in typing order: each site's offsets moved by
/// the edits typed before it.
fn keystrokes(start: &str, chosen: Vec<Candidate>, max_sites: usize) -> Vec<Refactoring> {
    // Edits typed so far: (position in the starting text, bytes added there).
    let mut done: Vec<(usize, isize)> = Vec::new();
    let now = |done: &[(usize, isize)], at: usize| -> usize {
        let shift: isize = done.iter().filter(|(p, _)| *p < at).map(|(_, d)| d).sum();
        (at as isize + shift) as usize
    };
    let mut out = Vec::new();
    for candidate in chosen {
        let mut groups = Vec::new();
        for site in candidate.sites.iter().take(max_sites) {
            let at = now(&done, site.range.start);
            debug_assert!(start.is_char_boundary(site.range.start));
            let group = if site.typed {
                debug_assert!(site.range.is_empty());
                let mut cursor = at;
                site.text
                    .chars()
                    .map(|c| {
                        let key = Keystroke {
                            at: cursor,
                            delete: 0,
                            insert: c.to_string(),
                        };
                        cursor += c.len_utf8();
                        key
                    })
                    .collect()
            } else {
                vec![Keystroke {
                    at,
                    delete: site.range.len(),
                    insert: site.text.clone(),
                }]
            };
            groups.push(group);
            done.push((
                site.range.start,
                site.text.len() as isize - site.range.len() as isize,
            ));
        }
        out.push(Refactoring {
            kind: candidate.kind,
            what: candidate.what,
            groups,
        });
    }
    out
}

/// Up to `n` candidates spread evenly over `all` (file order), skipping any that edits a fn
/// `taken` or an earlier pick holds.
fn pick(all: Vec<Candidate>, n: usize, taken: &[Range<usize>]) -> Vec<Candidate> {
    let overlaps = |a: &Range<usize>, b: &Range<usize>| a.start < b.end && b.start < a.end;
    let mut held: Vec<Range<usize>> = taken.to_vec();
    let mut chosen = Vec::new();
    let mut all: Vec<Option<Candidate>> = all.into_iter().map(Some).collect();
    for i in 0..n.min(all.len()) {
        let from = i * all.len() / n.min(all.len());
        for slot in all[from..].iter_mut() {
            let fits = slot
                .as_ref()
                .is_some_and(|c| !c.owns.iter().any(|o| held.iter().any(|h| overlaps(o, h))));
            if fits {
                let candidate = slot.take().expect("checked");
                held.extend(candidate.owns.iter().cloned());
                chosen.push(candidate);
                break;
            }
        }
    }
    chosen
}
