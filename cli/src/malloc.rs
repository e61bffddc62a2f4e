//! glibc malloc tuning: candle allocates and frees large tensors every layer; with the default
//! thresholds glibc returns them to the OS and maps them again each time (measured when this was
//! written: ~35% of forward time on this 2-core machine class; end to end, docs/performance.md
//! has ~7% since). Keeping them in the heap avoids that.
//! Set `REDRAFT_MALLOC_DEFAULT=1` to keep glibc's defaults (for measuring the difference).

/// Elsewhere (musl, macOS, Windows) the allocator is left as it is.
pub fn tune() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("REDRAFT_MALLOC_DEFAULT").is_none() {
        // SAFETY: mallopt only changes allocator tunables; it is called before any other
        // thread exists.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
            libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30);
            libc::mallopt(libc::M_TOP_PAD, 256 << 20);
        }
    }
}
