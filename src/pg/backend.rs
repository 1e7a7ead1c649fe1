//! Per-backend state and checks shared by the SQL functions and the index: interrupt checks
//! for long loops and the backend's signature buffers.

use std::cell::RefCell;

use crate::core::signature::Signer;

thread_local! {
    /// One set of signature buffers per backend: signing a table reuses them row after row
    /// instead of allocating per call.
    pub(crate) static SIGNER: RefCell<Signer> = RefCell::new(Signer::default());
}

/// Services a pending cancel or termination (Ctrl-C, `statement_timeout`): the callback every
/// loop sized by its input passes to the core.
pub(crate) fn interrupts() {
    pgrx::check_for_interrupts!();
}
