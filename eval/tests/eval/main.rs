//! The eval crate's integration tests, one binary: task building (`build`), next-edit cases and
//! scoring (`next_edit`), the sandboxed scorer (`scorer`) and what its programs may touch
//! (`confinement`), reading task files (`task`)
//! resuming a stopped run's results (`resume`) and what reruns leave in a run's directory
//! (`run`);
//! `support` is what they share. The sandbox's tests are Linux's, where its namespaces,
//! Landlock and seccomp are (elsewhere the crate builds, `scripts/check-platforms`).

mod build;
#[cfg(target_os = "linux")]
mod confinement;
mod next_edit;
mod resume;
mod run;
#[cfg(target_os = "linux")]
mod scorer;
mod support;
mod task;
