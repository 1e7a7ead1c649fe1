//! VACUUM (`ambulkdelete`, `amvacuumcleanup`). A bulk delete asks its callback about every
//! entry once (the validation of CREATE INDEX CONCURRENTLY collects the TIDs it is given that
//! way) and packs each page that loses entries, one generic WAL record per page; the metapage's
//! count then drops by the entries removed.
//!
//! Entries never move between pages, so a reader that reads every page once sees every entry
//! that was there before it started and not removed. The metapage then lists the blocks with
//! room (up to [`FREE_SLOTS`]), which inserts fill before they add blocks.

use pgrx::prelude::*;

use super::buffer::{self, page_of, release, Wal};
use super::page::{self, Kind, FREE_SLOTS, META_BLOCK};
use crate::pg::compat;

/// The statistics node VACUUM passes on, made on first use.
fn stats_or_new(stats: *mut pg_sys::IndexBulkDeleteResult) -> *mut pg_sys::IndexBulkDeleteResult {
    if stats.is_null() {
        // SAFETY: palloc0 of the node VACUUM expects, in its memory context.
        unsafe { PgBox::<pg_sys::IndexBulkDeleteResult>::alloc0().into_pg() }
    } else {
        stats
    }
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn ambulkdelete(
    info: *mut pg_sys::IndexVacuumInfo,
    stats: *mut pg_sys::IndexBulkDeleteResult,
    callback: pg_sys::IndexBulkDeleteCallback,
    callback_state: *mut std::ffi::c_void,
) -> *mut pg_sys::IndexBulkDeleteResult {
    // SAFETY: VACUUM passes its info and its callback.
    let (index, strategy, dead) = unsafe {
        (
            (*info).index,
            (*info).strategy,
            callback.expect("a callback"),
        )
    };
    let stats = stats_or_new(stats);
    let meta = buffer::read_meta(index);
    let blocks = buffer::blocks(index);
    let mut removed: u64 = 0;
    let mut kept: u64 = 0;
    let mut free = Vec::new();
    if let Some(layout) = buffer::layout_of(index, &meta) {
        let mut keep = Vec::with_capacity(layout.capacity);
        for block in META_BLOCK + 1..blocks {
            compat::vacuum_delay_point();
            // SAFETY: the block is below the store's size.
            let buf =
                unsafe { buffer::read(index, block, pg_sys::BUFFER_LOCK_EXCLUSIVE, strategy) };
            // SAFETY: the buffer is pinned and locked.
            let count = match unsafe { page::kind(page_of(buf), &layout) } {
                Ok(Kind::Data(count)) => count,
                Ok(Kind::New) => {
                    release(buf);
                    if free.len() < FREE_SLOTS {
                        free.push(block);
                    }
                    continue;
                }
                Err(_) => buffer::corrupted(index, block),
            };
            // SAFETY: the page has `count` entries and stays locked while they are read.
            let (tids, _) = unsafe { page::entries(page_of(buf), &layout, count) };
            keep.clear();
            keep.extend(tids.iter().map(|tid| {
                let mut tid = *tid;
                // SAFETY: the callback reads the TID it is given.
                !unsafe { dead(&mut tid, callback_state) }
            }));
            let left = keep.iter().filter(|k| **k).count();
            if left < count {
                let mut wal = Wal::start(index);
                // SAFETY: the registered copy is the data page read above.
                unsafe { page::compact(wal.register(buf, false), &layout, &keep) };
                wal.finish();
            }
            release(buf);
            if left < layout.capacity && block != meta.insert_block && free.len() < FREE_SLOTS {
                free.push(block);
            }
            removed += (count - left) as u64;
            kept += left as u64;
        }
    }
    // the last listed is filled first: the lowest block
    free.reverse();
    if removed > 0 || free[..] != *meta.free_blocks() {
        let buf = buffer::lock_meta(index, pg_sys::BUFFER_LOCK_EXCLUSIVE);
        let mut wal = Wal::start(index);
        let page = wal.register(buf, false);
        let meta = buffer::meta_of(index, page);
        meta.entries = meta.entries.saturating_sub(removed);
        meta.free[..free.len()].copy_from_slice(&free);
        // SAFETY: the registered copy of the metapage; `free` holds at most FREE_SLOTS.
        unsafe { page::set_free_count(page, free.len()) };
        wal.finish();
        release(buf);
    }
    // SAFETY: `stats` is VACUUM's node or ours.
    unsafe {
        (*stats).num_pages = blocks;
        (*stats).tuples_removed += removed as f64;
        (*stats).num_index_tuples = kept as f64;
        (*stats).estimated_count = false;
    }
    stats
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn amvacuumcleanup(
    info: *mut pg_sys::IndexVacuumInfo,
    stats: *mut pg_sys::IndexBulkDeleteResult,
) -> *mut pg_sys::IndexBulkDeleteResult {
    // SAFETY: VACUUM passes its info.
    let (index, analyze_only) = unsafe { ((*info).index, (*info).analyze_only) };
    if analyze_only {
        return stats;
    }
    if !stats.is_null() {
        return stats;
    }
    // no bulk delete ran: the counts come from the metapage
    let stats = stats_or_new(stats);
    let meta = buffer::read_meta(index);
    // SAFETY: `stats` is ours.
    unsafe {
        (*stats).num_pages = buffer::blocks(index);
        (*stats).num_index_tuples = meta.entries as f64;
        (*stats).estimated_count = false;
    }
    stats
}
