//! Giving freed memory back to the system.
//!
//! glibc's allocator keeps the pages of freed blocks in its arenas (one
//! per thread that met contention, up to eight per core) and returns them
//! only when the top of a heap is free, which after a burst of large
//! requests it almost never is: a process that once held a few hundred
//! MiB for one request keeps that RSS while idle. A long-running service
//! therefore asks the allocator, from a low-priority thread, to release
//! what it holds free once that exceeds [`RETAINED_FREE_LIMIT`]. The
//! check reads counters only (`mallinfo2`); `malloc_trim` runs when there
//! is something to give back.
//!
//! Other allocators (musl, a swapped global allocator) manage their own
//! return of memory, so this is glibc only.

use std::time::Duration;

/// How much memory the allocator may keep free before it is asked to
/// give it back.
pub const RETAINED_FREE_LIMIT: usize = 32 << 20;

/// How often the counters are read.
const CHECK_INTERVAL: Duration = Duration::from_secs(5);

/// Starts the trimming thread for the life of the process.
pub fn spawn_trimmer() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let started = std::thread::Builder::new().name("memory-trim".into()).spawn(|| loop {
            std::thread::sleep(CHECK_INTERVAL);
            glibc::trim_if_retaining(RETAINED_FREE_LIMIT);
        });
        if let Err(e) = started {
            tracing::warn!(target: "keelson::memory", "cannot start the memory trimmer: {e}");
        }
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod glibc {
    /// Releases the allocator's free pages when it holds more than
    /// `limit` bytes free; answers the bytes it held free before.
    pub fn trim_if_retaining(limit: usize) -> usize {
        // SAFETY: mallinfo2 only reads the allocator's counters.
        let info = unsafe { libc::mallinfo2() };
        // fordblks: free bytes in the arenas' chunks; fsmblks: in fastbins.
        let free = info.fordblks.saturating_add(info.fsmblks);
        if free > limit {
            // SAFETY: malloc_trim is safe to call from any thread at any
            // time; it takes the arenas' locks itself.
            unsafe { libc::malloc_trim(0) };
        }
        free
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        fn rss_bytes() -> usize {
            let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
            let pages: usize = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
            pages * 4096
        }

        #[test]
        fn freed_blocks_are_given_back() {
            // Many medium blocks (below the mmap threshold, so they live in
            // the heap), then all but the last freed: the heap's top is in
            // use, so glibc cannot shrink it by itself.
            let mut blocks: Vec<Vec<u8>> = (0..4000).map(|i| vec![(i % 251) as u8; 64 * 1024]).collect();
            let last = blocks.pop();
            drop(blocks);
            let before = rss_bytes();
            let held = trim_if_retaining(super::super::RETAINED_FREE_LIMIT);
            let after = rss_bytes();
            assert!(held > 200 << 20, "the allocator held {held} bytes free");
            assert!(after + (150 << 20) < before, "RSS {before} -> {after}");
            drop(last);
        }
    }
}
