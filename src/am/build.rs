//! Building a store (`ambuild`: CREATE INDEX, REINDEX, a TRUNCATE's new file) and the empty one
//! of an unlogged table's init fork (`ambuildempty`).
//!
//! A build fills one data page at a time in local memory and writes it as a new block logged
//! whole (generic WAL, as bloom's build does), so that every page is written and logged once;
//! the metapage is written first (block 0) and completed last.

use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;

use super::buffer::{self, release, Wal};
use super::page::{self, Layout, META_BLOCK};
use super::value::{layout_for, with_bytes};
use crate::pg::error::raise;

/// A page's worth of bytes, aligned as PostgreSQL aligns a page.
#[repr(C, align(8))]
struct LocalPage([u8; pg_sys::BLCKSZ as usize]);

struct Build {
    index: pg_sys::Relation,
    /// Known from the first value on.
    layout: Option<Layout>,
    page: Box<LocalPage>,
    /// Entries on `page`.
    count: usize,
    /// The last data block written.
    last: pg_sys::BlockNumber,
    entries: u64,
}

impl Build {
    fn local(&mut self) -> pg_sys::Page {
        self.page.0.as_mut_ptr().cast()
    }

    fn add(&mut self, tid: pg_sys::ItemPointerData, bytes: &[u8]) {
        let width = self.layout.map_or(0, |l| l.width as u32);
        let layout = layout_for(self.index, width, bytes.len());
        if self.layout.is_none() {
            self.layout = Some(layout);
            // SAFETY: the local page is BLCKSZ bytes, 8-aligned.
            unsafe { page::init_data(self.local(), &layout) };
        }
        if self.count == layout.capacity {
            self.flush(&layout);
        }
        // SAFETY: the local page is a data page of `layout` with `count` < capacity entries;
        // `bytes` has the layout's width.
        unsafe { page::append(self.local(), &layout, self.count, tid, bytes) };
        self.count += 1;
        self.entries += 1;
    }

    /// Writes the local page as a new block, logged whole, and starts an empty one.
    fn flush(&mut self, layout: &Layout) {
        pgrx::check_for_interrupts!();
        // SAFETY: the index is open and being built by this backend.
        let buf = unsafe { buffer::extend(self.index, pg_sys::ForkNumber::MAIN_FORKNUM) };
        let mut wal = Wal::start(self.index);
        let target = wal.register(buf, true);
        // SAFETY: both are whole pages; the local one is then made empty again.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.page.0.as_ptr(),
                target.cast::<u8>(),
                pg_sys::BLCKSZ as usize,
            );
            page::init_data(self.local(), layout);
        }
        wal.finish();
        // SAFETY: the buffer is pinned.
        self.last = unsafe { pg_sys::BufferGetBlockNumber(buf) };
        release(buf);
        self.count = 0;
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn build_callback(
    _index: pg_sys::Relation,
    tid: pg_sys::ItemPointer,
    values: *mut pg_sys::Datum,
    isnull: *mut bool,
    _alive: bool,
    state: *mut std::ffi::c_void,
) {
    // SAFETY: the table scan passes our state, the heap tuple's TID and the index's one
    // column; a NULL is not indexed.
    unsafe {
        if *isnull {
            return;
        }
        let build = &mut *state.cast::<Build>();
        with_bytes(*values, |bytes| build.add(*tid, bytes));
    }
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn ambuild(
    heap: pg_sys::Relation,
    index: pg_sys::Relation,
    info: *mut pg_sys::IndexInfo,
) -> *mut pg_sys::IndexBuildResult {
    if buffer::blocks(index) != 0 {
        raise(
            PgSqlErrorCode::ERRCODE_INDEX_CORRUPTED,
            format!("index \"{}\" already contains data", buffer::name(index)),
            None,
        );
    }
    write_meta_page(index, pg_sys::ForkNumber::MAIN_FORKNUM);
    let mut build = Build {
        index,
        layout: None,
        page: Box::new(LocalPage([0; pg_sys::BLCKSZ as usize])),
        count: 0,
        last: page::NO_BLOCK,
        entries: 0,
    };
    // SAFETY: the relations are open and locked by CREATE INDEX; the callback gets `build`,
    // which outlives the scan.
    let heap_tuples = unsafe {
        pg_sys::table_index_build_scan(
            heap,
            index,
            info,
            true,
            true,
            Some(build_callback),
            (&mut build as *mut Build).cast(),
            std::ptr::null_mut(),
        )
    };
    if let Some(layout) = build.layout {
        build.flush(&layout);
    }
    // the metapage gets the width, the last page (where inserts continue) and the count
    let buf = buffer::lock_meta(index, pg_sys::BUFFER_LOCK_EXCLUSIVE);
    let mut wal = Wal::start(index);
    let meta = buffer::meta_of(index, wal.register(buf, false));
    meta.width = build.layout.map_or(0, |l| l.width as u32);
    meta.insert_block = build.last;
    meta.entries = build.entries;
    wal.finish();
    release(buf);

    // SAFETY: palloc0 of the node the caller expects, in its memory context.
    let mut result = unsafe { PgBox::<pg_sys::IndexBuildResult>::alloc0() };
    result.heap_tuples = heap_tuples;
    result.index_tuples = build.entries as f64;
    result.into_pg()
}

/// Writes a metapage with no width and no entries as block 0 of `fork`, logged whole.
fn write_meta_page(index: pg_sys::Relation, fork: pg_sys::ForkNumber::Type) {
    // SAFETY: the fork is empty: this adds block 0.
    let buf = unsafe { buffer::extend(index, fork) };
    if fork == pg_sys::ForkNumber::INIT_FORKNUM {
        // An unlogged index's init fork is logged whatever the relation's persistence (generic
        // WAL would not log it): the page is written, then logged as log_newpage_range does.
        // SAFETY: the buffer is pinned and locked exclusively; it is marked dirty before it is
        // released, then logged.
        unsafe {
            page::init_meta(buffer::page_of(buf), 0);
            pg_sys::MarkBufferDirty(buf);
            release(buf);
            pg_sys::log_newpage_range(index, fork, META_BLOCK, META_BLOCK + 1, true);
        }
        return;
    }
    let mut wal = Wal::start(index);
    // SAFETY: the registered copy is a whole page.
    unsafe { page::init_meta(wal.register(buf, true), 0) };
    wal.finish();
    release(buf);
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn ambuildempty(index: pg_sys::Relation) {
    write_meta_page(index, pg_sys::ForkNumber::INIT_FORKNUM);
}
