//! pg_minhash: near-duplicate text detection in PostgreSQL with MinHash signatures and LSH
//! banding.
//!
//! `core` is plain Rust and defines the signature format; `sql` is the thin pgrx layer that
//! converts arguments, validates them and raises PostgreSQL errors.

#![deny(clippy::undocumented_unsafe_blocks, unsafe_op_in_unsafe_fn)]

::pgrx::pg_module_magic!(name, version);

mod am;
pub mod core;
mod index;
mod pg;
mod sql;

/// Runs when PostgreSQL loads the library.
#[pgrx::pg_guard]
pub extern "C-unwind" fn _PG_init() {
    // An error's DETAIL never carries a Rust backtrace, whatever the server's environment
    // (pgrx's panic hook captures one whenever RUST_BACKTRACE asks for it). Set before any of
    // this library's code can panic; the standard library reads it once.
    std::env::set_var("RUST_LIB_BACKTRACE", "0");
    // the core's allocation failures become ERRORs (53200, 54000)
    pg::error::install_capacity_handler();
    pg::backend::define_settings();
    index::init();
}

/// Required by `cargo pgrx test`.
#[cfg(test)]
pub mod pg_test {
    pub fn setup(_options: Vec<&str>) {}

    #[must_use]
    pub fn postgresql_conf_options() -> Vec<&'static str> {
        vec![]
    }
}
