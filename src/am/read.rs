//! Reading a store: the API the lookups use.
//!
//! [`scan_entries`] reads every data page once under a share lock and hands the page's arrays to
//! the caller while the lock is held (no copy). It does not check heap visibility: an entry is
//! there from the insert of its heap tuple until a VACUUM finds that tuple dead to everyone, so
//! the caller fetches each candidate by TID with its snapshot ([`fetch_visible`] does) and
//! checks its text. A TID whose entry a VACUUM removes during a scan can be reused by a tuple
//! inserted after the scan's snapshot, which that snapshot does not see. It takes no predicate
//! lock: under SERIALIZABLE the caller locks the table (`PredicateLockRelation`) as a
//! sequential scan of it would.

use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;

use super::buffer::{self, page_of, release};
use super::page::{self, Kind, META_BLOCK};
use crate::pg::error::raise;

/// What a store's metapage says.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Summary {
    /// The sketch width in bytes; 0 while the store holds no value.
    pub(crate) width: usize,
    /// Entries, dead ones included until a VACUUM removes them.
    pub(crate) entries: u64,
    /// Blocks of the store, the metapage included.
    pub(crate) pages: u32,
}

/// Raises 42809 unless `index` is an open index of access method minhash_sketch (with
/// storage: not a partitioned table's index, whose partitions' indexes hold the entries).
pub(crate) fn check_store(index: pg_sys::Relation) {
    // SAFETY: `index` is an open relation; the access method is looked up by its name.
    let ours = unsafe {
        (*(*index).rd_rel).relkind as u8 == pg_sys::RELKIND_INDEX
            && (*(*index).rd_rel).relam
                == pg_sys::get_index_am_oid(c"minhash_sketch".as_ptr(), true)
    };
    if !ours {
        raise(
            PgSqlErrorCode::ERRCODE_WRONG_OBJECT_TYPE,
            format!(
                "\"{}\" is not an index of access method \"minhash_sketch\" with storage",
                buffer::name(index)
            ),
            Some(
                "A partitioned table's index keeps its entries in its partitions' indexes.".into(),
            ),
        );
    }
}

/// The width, entry count and size of a store, from its metapage (one page read).
///
/// `index` is open with at least AccessShareLock; 42809 if it is not a store.
pub(crate) fn summary(index: pg_sys::Relation) -> Summary {
    check_store(index);
    let meta = buffer::read_meta(index);
    Summary {
        width: meta.width as usize,
        entries: meta.entries,
        pages: buffer::blocks(index),
    }
}

/// Calls `visit(tids, sketches, width)` once per data page with entries: `tids[i]`'s sketch is
/// `sketches[i * width..(i + 1) * width]`. The page is share-locked during the call (inserts to
/// it and VACUUM wait), so `visit` must be quick and must not read the store or take buffer
/// locks; interrupts are checked between pages. Entries inserted while the scan runs may or
/// may not be seen; every entry present when it started and not removed since is seen once.
///
/// `index` is open with at least AccessShareLock; 42809 if it is not a store, XX002 for a
/// corrupted page.
pub(crate) fn scan_entries(
    index: pg_sys::Relation,
    mut visit: impl FnMut(&[pg_sys::ItemPointerData], &[u8], usize),
) {
    check_store(index);
    let meta = buffer::read_meta(index);
    let Some(layout) = buffer::layout_of(index, &meta) else {
        return;
    };
    let blocks = buffer::blocks(index);
    // (each page is pinned while the one before it is read: docs/internals.md, "The sketch
    // store")
    let mut ahead = buffer::AheadReader::new(index);
    let mut block = META_BLOCK + 1;
    let mut next = (block < blocks).then(|| ahead.pin(block));
    while let Some(buf) = next.take() {
        buffer::lock(buf, pg_sys::BUFFER_LOCK_SHARE);
        if block + 1 < blocks {
            next = Some(ahead.pin(block + 1));
        }
        let page = page_of(buf);
        // SAFETY: the buffer is pinned and share-locked until `release`.
        match unsafe { page::kind(page, &layout) } {
            Ok(Kind::Data(count)) if count > 0 => {
                // SAFETY: as above; the slices do not outlive the call.
                let (tids, sketches) = unsafe { page::entries(page, &layout, count) };
                visit(tids, sketches, layout.width);
            }
            Ok(_) => {}
            Err(_) => buffer::corrupted(index, block),
        }
        release(buf);
        block += 1;
        pgrx::check_for_interrupts!();
    }
    ahead.finish();
}

/// Fetches the version of the heap tuple at `tid` (the root of a HOT chain, as an index entry
/// names it) that `snapshot` sees into `fetch.slot`; false if it sees none.
pub(crate) fn fetch_visible(
    fetch: &mut HeapFetch,
    tid: pg_sys::ItemPointerData,
    snapshot: pg_sys::Snapshot,
) -> bool {
    let mut tid = tid;
    let mut call_again = false;
    let mut all_dead = false;
    // SAFETY: the fetch state and slot were made for this heap; table_index_fetch_tuple
    // follows a HOT chain from its root and leaves the visible version in the slot.
    unsafe {
        pg_sys::table_index_fetch_tuple(
            fetch.scan,
            &mut tid,
            snapshot,
            fetch.slot,
            &mut call_again,
            &mut all_dead,
        )
    }
}

/// The state of fetches from one heap by TID: the table access method's index-fetch state and a
/// slot. Ended by [`HeapFetch::end`] (or the transaction's end on an error).
pub(crate) struct HeapFetch {
    scan: *mut pg_sys::IndexFetchTableData,
    /// The slot the last visible tuple was stored in.
    pub(crate) slot: *mut pg_sys::TupleTableSlot,
}

impl HeapFetch {
    /// `heap` is an open table.
    pub(crate) fn begin(heap: pg_sys::Relation) -> HeapFetch {
        // SAFETY: the table is open; both are made for it in the current memory context.
        unsafe {
            HeapFetch {
                scan: pg_sys::table_index_fetch_begin(heap),
                slot: pg_sys::table_slot_create(heap, std::ptr::null_mut()),
            }
        }
    }

    pub(crate) fn end(self) {
        // SAFETY: made by `begin`, ended once.
        unsafe {
            pg_sys::table_index_fetch_end(self.scan);
            pg_sys::ExecDropSingleTupleTableSlot(self.slot);
        }
    }
}
