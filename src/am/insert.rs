//! Adding one entry (`aminsert`: every write path of the table, and the validation scan of
//! CREATE INDEX CONCURRENTLY and REINDEX CONCURRENTLY).
//!
//! An insert holds the metapage exclusively from start to end: it reads the width and the
//! insert block there, appends to that block (when it is full, to the next block VACUUM left
//! with room, or to a new one, which becomes the insert block) and counts the entry, all in one
//! generic WAL record. Inserts to one store are serialized by that lock, as
//! they would be by the one page they append to.

use pgrx::prelude::*;

use super::buffer::{self, page_of, release, Wal};
use super::page::{self, Kind, NO_BLOCK};
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
    let meta_buf = buffer::lock_meta(index, pg_sys::BUFFER_LOCK_EXCLUSIVE);
    // (read in place: the changes go to the copy generic WAL registers)
    let meta = buffer::meta_of(index, page_of(meta_buf));
    let layout = layout_for(index, meta.width, bytes.len());

    // the block to append to, chosen before anything is registered for WAL: the insert block
    // while it has room, then the blocks VACUUM left with room, then a new one (a block past
    // the end is PostgreSQL's read error; the metapage is not a data page, XX002)
    let mut free = meta.free_blocks();
    let mut next_free = || {
        let (last, rest) = free.split_last()?;
        free = rest;
        Some(*last)
    };
    let mut candidate = Some(meta.insert_block)
        .filter(|b| *b != NO_BLOCK)
        .or_else(&mut next_free);
    let mut target = None;
    while let Some(block) = candidate {
        // SAFETY: a block of the store, read as a data page and checked.
        let buf = unsafe {
            buffer::read(
                index,
                block,
                pg_sys::BUFFER_LOCK_EXCLUSIVE,
                std::ptr::null_mut(),
            )
        };
        // SAFETY: the buffer is pinned and locked.
        match unsafe { page::kind(page_of(buf), &layout) } {
            Ok(Kind::Data(count)) if count < layout.capacity => {
                target = Some((buf, Some(count)));
                break;
            }
            Ok(Kind::New) => {
                target = Some((buf, None));
                break;
            }
            Ok(Kind::Data(_)) => release(buf),
            Err(_) => buffer::corrupted(index, block),
        }
        candidate = next_free();
    }
    let free_left = free.len();

    let mut wal = Wal::start(index);
    let meta_page = wal.register(meta_buf, false);
    let meta_copy = buffer::meta_of(index, meta_page);
    let (buf, count, page) = match target {
        Some((buf, Some(count))) => (buf, count, wal.register(buf, false)),
        // a new block, or one a crash left unwritten: made a data page, logged whole
        found => {
            let buf = match found {
                Some((buf, None)) => buf,
                // SAFETY: the store is open; the new block is locked before the metapage names it.
                _ => unsafe { buffer::extend(index, pg_sys::ForkNumber::MAIN_FORKNUM) },
            };
            let page = wal.register(buf, true);
            // SAFETY: the registered copy is a whole page.
            unsafe { page::init_data(page, &layout) };
            (buf, 0, page)
        }
    };
    // SAFETY: the buffer is pinned.
    meta_copy.insert_block = unsafe { pg_sys::BufferGetBlockNumber(buf) };
    // SAFETY: the registered copy of the metapage; fewer blocks than it listed.
    unsafe { page::set_free_count(meta_page, free_left) };
    // SAFETY: `page` is the registered copy of a data page of `layout` with `count` <
    // capacity entries; `bytes` has the layout's width.
    unsafe { page::append(page, &layout, count, tid, bytes) };
    meta_copy.width = layout.width as u32;
    meta_copy.entries += 1;
    wal.finish();
    release(buf);
    release(meta_buf);
}
