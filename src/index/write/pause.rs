//! A test hook that stops a sync trigger between two of its writes, so that an isolation spec
//! can replay what a concurrent duplicate check sees at that moment
//! (`tests/isolation/specs/reject_sync.spec`).
//!
//! `pg_minhash.test_sync_pause` is an integer setting, 0 (off) by default, that only a superuser
//! can set. While it is not 0, a sync trigger, before each statement it runs on a band table
//! (each batch `INSERT` or `DELETE`, a `TRUNCATE`), takes the advisory lock `(setting, n)` in
//! share mode and lets it go at once, `n` counting those statements of the transaction's syncs
//! from 1: a session that holds `pg_advisory_lock(setting, n)` stops the transaction's syncs
//! just before the `n`th of their statements, until it lets the lock go. Off, a pause point
//! costs one read of the setting.

use std::cell::Cell;

use pgrx::guc::{GucContext, GucFlags, GucRegistry, GucSetting};
use pgrx::{pg_sys, IntoDatum};

static TEST_SYNC_PAUSE: GucSetting<i32> = GucSetting::<i32>::new(0);

thread_local! {
    /// The pause points passed by the syncs of the transaction with this top-level id.
    static PASSED: Cell<(pg_sys::TransactionId, i32)> =
        const { Cell::new((pg_sys::InvalidTransactionId, 0)) };
}

/// Defines the setting (from `_PG_init`).
pub(crate) fn define_setting() {
    GucRegistry::define_int_guc(
        c"pg_minhash.test_sync_pause",
        c"For tests only: stops the sync trigger before each write of a band table.",
        c"While not 0, the sync trigger takes the advisory lock (this value, n) in share mode \
          before its nth statement on a band table and lets it go at once.",
        &TEST_SYNC_PAUSE,
        0,
        i32::MAX,
        GucContext::Suset,
        GucFlags::NO_SHOW_ALL,
    );
}

/// A pause point: before a sync's statement on a band table.
pub(super) fn point() {
    let key = TEST_SYNC_PAUSE.get();
    if key == 0 {
        return;
    }
    // SAFETY: reads the transaction's state (a sync runs after its statement wrote a row).
    let xact = unsafe { pg_sys::GetTopTransactionIdIfAny() };
    let n = match PASSED.get() {
        (of, n) if of == xact => n + 1,
        _ => 1,
    };
    PASSED.set((xact, n));
    // SAFETY: both functions take two int4s; the lock is taken and let go in this call.
    unsafe {
        let args = [key.into_datum(), n.into_datum()];
        pgrx::direct_function_call::<pg_sys::Datum>(pg_sys::pg_advisory_lock_shared_int4, &args);
        pgrx::direct_function_call::<bool>(pg_sys::pg_advisory_unlock_shared_int4, &args);
    }
}
