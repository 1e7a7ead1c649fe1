//! Adding one entry (`aminsert`: every write path of the table, and the validation scan of
//! CREATE INDEX CONCURRENTLY and REINDEX CONCURRENTLY).
//!
//! An insert holds the metapage exclusively from start to end: it reads the width and the
//! insert block there, appends to that block (or to a new one when it is full) and counts the
//! entry, all in one generic WAL record. Inserts to one store are serialized by that lock, as
//! they would be by the one page they append to.

use pgrx::prelude::*;

use super::buffer::{self, page_of, release, Wal};
use super::page::{self, Kind, META_BLOCK, NO_BLOCK};
use super::value::{layout_for, with_bytes};

#[pg_guard]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe extern "C-unwind" fn aminsert(
    index: pg_sys::Relation,
    values: *mut pg_sys::Datum,
    isnull: *mut bool,
    heap_tid: pg_sys::ItemPointer,
    _heap: pg_sys::Relation,
    _check_unique: pg_sys::IndexUniqueCheck::Type,
    _index_unchanged: bool,
    _info: *mut pg_sys::IndexInfo,
) -> bool {
    // SAFETY: the executor passes the index's one column and the heap tuple's TID.
    unsafe {
        if *isnull {
            return false;
        }
        with_bytes(*values, |bytes| insert(index, *heap_tid, bytes));
    }
    // (no uniqueness to report: the access method cannot be unique)
    false
}

fn insert(index: pg_sys::Relation, tid: pg_sys::ItemPointerData, bytes: &[u8]) {
    // SAFETY: every store has its metapage at block 0.
    let meta_buf = unsafe {
        buffer::read(
            index,
            META_BLOCK,
            pg_sys::BUFFER_LOCK_EXCLUSIVE,
            std::ptr::null_mut(),
        )
    };
    let meta = *buffer::meta_of(index, page_of(meta_buf));
    let layout = layout_for(index, meta.width, bytes.len());

    // the insert block if it has room, checked before anything is registered for WAL
    let mut target = None;
    if meta.insert_block != NO_BLOCK {
        // SAFETY: the metapage names a block of the store.
        let buf = unsafe {
            buffer::read(
                index,
                meta.insert_block,
                pg_sys::BUFFER_LOCK_EXCLUSIVE,
                std::ptr::null_mut(),
            )
        };
        // SAFETY: the buffer is pinned and locked.
        match unsafe { page::kind(page_of(buf), &layout) } {
            Ok(Kind::Data(count)) if count < layout.capacity => target = Some((buf, count)),
            Ok(_) => release(buf),
            Err(_) => buffer::corrupted(index, meta.insert_block),
        }
    }

    let mut wal = Wal::start(index);
    let meta_copy = buffer::meta_of(index, wal.register(meta_buf, false));
    let (buf, count, page) = match target {
        Some((buf, count)) => (buf, count, wal.register(buf, false)),
        None => {
            // SAFETY: the store is open; the new block is locked before the metapage names it.
            let buf = unsafe { buffer::extend(index, pg_sys::ForkNumber::MAIN_FORKNUM) };
            let page = wal.register(buf, true);
            // SAFETY: the registered copy is a whole page.
            unsafe { page::init_data(page, &layout) };
            // SAFETY: the buffer is pinned.
            meta_copy.insert_block = unsafe { pg_sys::BufferGetBlockNumber(buf) };
            (buf, 0, page)
        }
    };
    // SAFETY: `page` is the registered copy of a data page of `layout` with `count` <
    // capacity entries; `bytes` has the layout's width.
    unsafe { page::append(page, &layout, count, tid, bytes) };
    meta_copy.width = layout.width as u32;
    meta_copy.entries += 1;
    wal.finish();
    release(buf);
    release(meta_buf);
}
