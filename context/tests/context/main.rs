//! The context layer's integration tests, one binary (one link on 2 cores): windows and plans
//! (`context`), cuts (`cut`), next-edit regions and history (`edit`), real code (`real_code`,
//! `languages`, measured by `redraft_context::survival`).

mod context;
mod cut;
mod edit;
mod languages;
mod real_code;
