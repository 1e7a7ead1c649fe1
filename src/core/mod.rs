//! The pure-Rust core: everything that defines a signature, with no PostgreSQL in it.
//!
//! The pipeline is `normalize` -> `shingle` -> `hash` -> `signature` -> `bands`; `jaccard`
//! is the exact measure the signatures estimate, and `params` holds the argument ranges and the
//! LSH probability maths. The SQL layer (`crate::sql`) only converts, validates and reports.
//! Every allocation that grows with the input goes through `capacity` (fallible) and every long
//! sort through `sort` (interruptible).

pub mod bands;
pub mod capacity;
pub mod components;
pub mod dedup;
pub mod fine;
pub mod hash;
pub mod jaccard;
pub mod nearest;
pub mod normalize;
pub mod parallel;
pub mod params;
pub mod shingle;
pub mod signature;
mod simd;
pub mod sketch;
pub mod slots;
pub mod sort;
pub mod spill;

#[cfg(any(test, feature = "pg_test"))]
pub mod testing;

#[cfg(test)]
mod accuracy_tests;
#[cfg(test)]
mod format_vectors;
#[cfg(test)]
mod properties;
