//! The host's random-access memory latency: one dependent load after another through a random
//! cycle over a buffer of each size. The insert path and lookups are bound by it (B-tree
//! descents into a 1 GB index are cache and TLB misses), and on a shared host it drifts, so
//! `benches/run.sh` prints it next to the figures it explains. `harness = false`: a plain main.

use std::hint::black_box;
use std::time::Instant;

fn main() {
    for mib in [1usize, 32, 1024] {
        // usize slots (8 bytes each)
        let n = mib << 17;
        // Sattolo's algorithm: a random permutation that is one single cycle
        let mut next: Vec<usize> = (0..n).collect();
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        for i in (1..n).rev() {
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
        let ns = started.elapsed().as_secs_f64() * 1e9 / loads as f64;
        black_box(at);
        println!("random loads over {mib} MiB: {ns:.0} ns each");
    }
}
