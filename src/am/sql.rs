//! The internal SQL functions of the sketch store, for tests and diagnosis: every entry of a
//! store, and what its metapage says. Superusers only (42501): the entries are the indexed
//! values of rows, whatever the caller's rights on the table.

use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;

use super::read::{scan_entries, summary, Summary};
use crate::pg::error::raise;
use crate::pg::names::Regclass;

/// Calls `f` with the store `index` open under AccessShareLock, for a superuser (42501
/// otherwise).
fn with_store<T>(what: &str, index: Regclass, f: impl FnOnce(pg_sys::Relation) -> T) -> T {
    // SAFETY: reads the current role's attributes.
    if !unsafe { pg_sys::superuser() } {
        raise(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!("only a superuser may call {what}"),
            None,
        );
    }
    // SAFETY: index_open checks that the OID names an index (42809 otherwise) and locks it;
    // it is closed below, or by the transaction's end on an error.
    unsafe {
        let rel = pg_sys::index_open(index.0, pg_sys::AccessShareLock as i32);
        let result = f(rel);
        pg_sys::index_close(rel, pg_sys::AccessShareLock as i32);
        result
    }
}

/// Every entry of the sketch store `index`: the heap TID and the stored value, in page order.
#[pg_extern(volatile, strict, parallel_safe, schema = "minhash_internal")]
fn _minhash_sketch_entries(
    index: Regclass,
) -> TableIterator<'static, (name!(tid, pg_sys::ItemPointerData), name!(sketch, Vec<u8>))> {
    let rows = with_store("_minhash_sketch_entries", index, |rel| {
        let mut rows = Vec::new();
        scan_entries(rel, |tids, sketches, width| {
            rows.extend(
                tids.iter()
                    .zip(sketches.chunks_exact(width))
                    .map(|(t, s)| (*t, s.to_vec())),
            );
        });
        rows
    });
    TableIterator::new(rows)
}

/// What the metapage of the sketch store `index` says: the value width (0 before the first
/// value), the entries (dead ones included until a VACUUM) and the blocks, metapage included.
#[pg_extern(volatile, strict, parallel_safe, schema = "minhash_internal")]
fn _minhash_sketch_stats(
    index: Regclass,
) -> TableIterator<'static, (name!(width, i32), name!(entries, i64), name!(pages, i64))> {
    let Summary {
        width,
        entries,
        pages,
    } = with_store("_minhash_sketch_stats", index, summary);
    TableIterator::once((width as i32, entries as i64, i64::from(pages)))
}
