//! Training's integration tests, one binary: next-edit data (`edits`), the GPU trainer's CPU
//! round trip (`gpu_trainer`), runs started from other checkpoints (`init`).

mod edits;
mod gpu_trainer;
mod init;
