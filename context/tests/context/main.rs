//! The context layer's integration tests, one binary (one link on 2 cores): windows and plans
//! (`context`), cuts (`cut`), next-edit regions and history (`edit`), real code (`real_code`,
//! `languages`, measured by `redraft_context::survival`).

mod context;
mod cut;
mod edit;
mod languages;
mod real_code;

use redraft_context::{plan, Budget, ByteEstimate, Language, Plan, Source};

/// The context plan for a cursor at byte `cursor` of `text`, read without a syntax tree.
fn plan_for_text(text: &str, cursor: usize, language: Language, budget: Budget) -> Plan {
    let source = Source {
        text,
        cursor,
        language,
        tree: None,
    };
    plan(&source, &budget, &ByteEstimate, &[])
}
