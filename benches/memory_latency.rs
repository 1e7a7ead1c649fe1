//! The host's random-access memory latency: one dependent load after another through a random
//! cycle over a buffer of each size. The insert path and lookups are bound by it (B-tree
//! descents into a 1 GB index are cache and TLB misses), and on a shared host it drifts, so
//! `benches/run.sh` prints it next to the figures it explains. The last line repeats the 1 GiB
//! walk on memory the kernel is asked to back with 2 MiB pages (`MADV_HUGEPAGE`): the difference
//! is what TLB misses cost, which is what huge pages for `shared_buffers` save.
//! `harness = false`: a plain main.

use std::alloc::{alloc, dealloc, Layout};
use std::hint::black_box;
use std::time::Instant;

const HUGE_PAGE: usize = 2 << 20;

/// Nanoseconds per load of a walk through `next`, made one random cycle first (Sattolo's
/// algorithm).
fn chase(next: &mut [usize]) -> f64 {
    for (i, slot) in next.iter_mut().enumerate() {
        *slot = i;
    }
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    for i in (1..next.len()).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        next.swap(i, (state % i as u64) as usize);
    }
    let loads = 4_000_000;
    let mut at = 0;
    let started = Instant::now();
    for _ in 0..loads {
        at = next[at];
    }
    black_box(at);
    started.elapsed().as_secs_f64() * 1e9 / loads as f64
}

/// Kibibytes of anonymous memory the kernel backs with huge pages in this process.
fn anon_huge_kib() -> Option<u64> {
    let rollup = std::fs::read_to_string("/proc/self/smaps_rollup").ok()?;
    let line = rollup.lines().find(|l| l.starts_with("AnonHugePages:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn main() {
    for mib in [1usize, 32, 1024] {
        // usize slots (8 bytes each)
        let mut next = vec![0usize; mib << 17];
        println!(
            "random loads over {mib} MiB: {:.0} ns each",
            chase(&mut next)
        );
    }

    let bytes = 1024 << 20;
    let layout = Layout::from_size_align(bytes, HUGE_PAGE).expect("valid layout");
    // SAFETY: the layout has a nonzero size; the memory is zeroed (a valid [usize]) before the
    // slice is made, used only through `next` while allocated, and freed with the same layout.
    unsafe {
        let memory = alloc(layout);
        assert!(!memory.is_null(), "out of memory");
        // A hint, given before the first touch (pages are backed when first written); without
        // transparent huge pages the walk simply runs on 4 KiB pages.
        libc::madvise(memory.cast(), bytes, libc::MADV_HUGEPAGE);
        std::ptr::write_bytes(memory, 0, bytes);
        let next = std::slice::from_raw_parts_mut(memory.cast::<usize>(), bytes / 8);
        let ns = chase(next);
        let huge = anon_huge_kib().unwrap_or(0) >> 10;
        println!("random loads over 1024 MiB on huge pages ({huge} MiB of it in 2 MiB pages): {ns:.0} ns each");
        dealloc(memory, layout);
    }
}
