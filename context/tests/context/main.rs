//! The context layer's integration tests, one binary (one link on 2 cores): windows and plans\n//! (`context`), cuts (`cut`), next-edit regions and history (`edit`), real code (`real_code`).

mod context;
mod cut;
mod edit;
mod real_code;
