//! Deterministic test data shared by the statistical and recall tests.

/// A small seeded generator (SplitMix64): the same seed gives the same data on every run.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        let (state, out) = super::hash::splitmix64(self.0);
        self.0 = state;
        out
    }

    /// Uniform in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// A word of `len` random lowercase ASCII letters.
    pub fn word(&mut self, len: u64) -> String {
        (0..len)
            .map(|_| char::from(b'a' + self.below(26) as u8))
            .collect()
    }
}
