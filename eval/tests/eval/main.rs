//! The eval crate's integration tests, one binary: task building (`build`), next-edit cases and
//! scoring (`next_edit`), the sandboxed scorer (`scorer`) and what its programs may touch
//! (`confinement`), reading task files (`task`)
//! and resuming a stopped run's results (`resume`);
//! `support` is what they share.

mod build;
mod confinement;
mod next_edit;
mod resume;
mod scorer;
mod support;
mod task;
