//! Per-backend state and checks shared by the SQL functions and the index: interrupt checks
//! for long loops, the backend's signature buffers, and the snapshots a read runs under.

use std::cell::RefCell;

use pgrx::guc::{GucContext, GucFlags, GucRegistry, GucSetting};

use crate::core::dedup::Corpus;
use crate::core::signature::Signer;
use crate::core::spill::SpillDir;

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

/// Threads a whole-table search may run on: this backend and, as a parallel query of the
/// session would have them, `max_parallel_workers_per_gather` more, at most
/// `max_parallel_workers` (the threads are the backend's own and take no worker from the pool).
pub(crate) fn search_threads() -> usize {
    // SAFETY: reads an integer setting of this backend.
    threads_for(unsafe { pgrx::pg_sys::max_parallel_workers_per_gather })
}

/// Threads the build of an index's band table (`minhash_index_create`, `minhash_index_rebuild`)
/// signs its rows on: this backend and, as PostgreSQL's parallel CREATE INDEX would have them,
/// `max_parallel_maintenance_workers` more, at most `max_parallel_workers` (0: the backend
/// alone). The threads are the backend's own and take no worker from the pool.
pub(crate) fn build_threads() -> usize {
    // SAFETY: reads an integer setting of this backend.
    threads_for(unsafe { pgrx::pg_sys::max_parallel_maintenance_workers })
}

/// This backend and `workers` more threads, at most `max_parallel_workers` more; a process
/// with helpers stops them before its exit frees what they read.
fn threads_for(workers: i32) -> usize {
    // SAFETY: reads an integer setting of this backend.
    let total = unsafe { pgrx::pg_sys::max_parallel_workers };
    let threads = 1 + usize::try_from(workers.min(total)).unwrap_or(0);
    if threads > 1 {
        halt_helpers_on_exit();
    }
    threads
}

/// `pg_minhash.search_mem_multiplier`: a whole-table search's budget is `maintenance_work_mem`
/// times this, as a hash table's is `work_mem` times `hash_mem_multiplier`.
static SEARCH_MEM_MULTIPLIER: GucSetting<f64> = GucSetting::<f64>::new(2.0);

/// Defines the settings of this layer (from `_PG_init`).
pub(crate) fn define_settings() {
    GucRegistry::define_float_guc(
        c"pg_minhash.search_mem_multiplier",
        c"Multiple of maintenance_work_mem a whole-table search may use.",
        c"minhash_duplicates and minhash_clusters keep their texts and band keys in memory \
          while they fit, then in temporary files, within maintenance_work_mem times this.",
        &SEARCH_MEM_MULTIPLIER,
        1.0,
        1000.0,
        GucContext::Userset,
        GucFlags::default(),
    );
}

/// Keeps a whole-table search within `maintenance_work_mem` times
/// `pg_minhash.search_mem_multiplier`, as far as `Corpus::spill_to` can,
/// with its temporary files in the data directory's `base/pgsql_tmp` (the backend's working
/// directory is the data directory), named as PostgreSQL's own, `pgsql_tmp<pid>.`, which a
/// restart after a crash removes (they are unlinked as they are made, so none is left); at
/// most `temp_file_limit` of them per search.
pub(crate) fn bound_search(corpus: &mut Corpus) {
    // SAFETY: reads two integer settings (kilobytes; -1 is no limit) and the process id of
    // this backend.
    let (kilobytes, limit, pid) = unsafe {
        (
            pgrx::pg_sys::maintenance_work_mem,
            pgrx::pg_sys::temp_file_limit,
            pgrx::pg_sys::MyProcPid,
        )
    };
    let kilobytes = usize::try_from(kilobytes).unwrap_or(0) as f64 * SEARCH_MEM_MULTIPLIER.get();
    // (at most 1000 times a setting of at most 2 TB: within f64's exact integers)
    let budget = (kilobytes * 1024.0) as usize;
    let dir = SpillDir {
        dir: "base/pgsql_tmp".into(),
        prefix: format!("pgsql_tmp{pid}"),
        limit: u64::try_from(limit).ok().map(|kb| kb.saturating_mul(1024)),
    };
    corpus.spill_to(dir, budget, Some(spilled));
}

/// Says at DEBUG1 that a search's band keys or texts moved to temporary files.
fn spilled(what: &str) {
    pgrx::debug1!(
        "pg_minhash: a whole-table search's {what} moved to temporary files to keep within \
         maintenance_work_mem times pg_minhash.search_mem_multiplier"
    );
}

/// Makes the process's exit stop a search's helper threads first. A FATAL (pg_terminate_backend,
/// a parallel worker told to end, a shutdown) raised by the interrupt check of a threaded search
/// exits the process from inside it, without unwinding; the exit callbacks then abort the
/// transaction and free the query's memory, the texts the helpers read. Registered once per
/// process, after `InitPostgres` registered its own, so it runs before them.
fn halt_helpers_on_exit() {
    thread_local! {
        static REGISTERED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }
    if REGISTERED.replace(true) {
        return;
    }
    // SAFETY: registers a callback that calls no PostgreSQL function and cannot unwind.
    unsafe { pgrx::pg_sys::before_shmem_exit(Some(halt_helpers), pgrx::pg_sys::Datum::from(0)) };
}

unsafe extern "C-unwind" fn halt_helpers(_code: std::ffi::c_int, _arg: pgrx::pg_sys::Datum) {
    crate::core::parallel::halt_all();
}

/// Whether the transaction reads under one snapshot from its first statement on (REPEATABLE
/// READ, SERIALIZABLE) rather than one per statement (READ COMMITTED).
pub(crate) fn uses_transaction_snapshot() -> bool {
    // SAFETY: reads the transaction's isolation level.
    unsafe { pgrx::pg_sys::XactIsoLevel >= pgrx::pg_sys::XACT_REPEATABLE_READ as i32 }
}

/// Runs `f` under a snapshot of what is committed now (`GetLatestSnapshot`), as PostgreSQL reads
/// its own catalogs once it holds its locks; `f` alone, in a parallel worker (which may not
/// take one: the leader's snapshot is the query's).
pub(crate) fn with_latest_snapshot<T>(f: impl FnOnce() -> T) -> T {
    // SAFETY: reads the backend's state; the snapshot is a static one that PushActiveSnapshot
    // copies.
    unsafe {
        if pgrx::pg_sys::IsInParallelMode() {
            return f();
        }
        with_active_snapshot(pgrx::pg_sys::GetLatestSnapshot(), f)
    }
}

/// Runs `f` under the snapshot a statement starting now would take (`GetTransactionSnapshot`:
/// of READ COMMITTED, a new one; otherwise the transaction's); `f` alone in a parallel worker.
pub(crate) fn with_new_statement_snapshot<T>(f: impl FnOnce() -> T) -> T {
    // SAFETY: as above.
    unsafe {
        if pgrx::pg_sys::IsInParallelMode() {
            return f();
        }
        with_active_snapshot(pgrx::pg_sys::GetTransactionSnapshot(), f)
    }
}

/// Runs `f` with `snapshot` as the active snapshot (the one read-only SPI statements and the
/// direct reads of `index::read::btree` use), popped when `f` returns. An error pops it with the
/// (sub)transaction it aborts, as it pops every snapshot pushed inside.
///
/// # Safety
/// `snapshot` is one `PushActiveSnapshot` may take (it copies a static one).
unsafe fn with_active_snapshot<T>(snapshot: pgrx::pg_sys::Snapshot, f: impl FnOnce() -> T) -> T {
    // SAFETY: per the contract; the pop matches the push (`f` leaves the stack as it found it,
    // as SPI and the direct reads do).
    unsafe { pgrx::pg_sys::PushActiveSnapshot(snapshot) };
    let result = f();
    // SAFETY: as above.
    unsafe { pgrx::pg_sys::PopActiveSnapshot() };
    result
}
