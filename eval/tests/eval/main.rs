//! The eval crate's integration tests, one binary: task building (`build`), next-edit cases and\n//! scoring (`next_edit`), the sandboxed scorer (`scorer`); `support` is what they share.

mod build;
mod next_edit;
mod scorer;
mod support;
