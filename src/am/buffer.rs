//! Buffers and generic WAL for the sketch store: reading a block locked, adding one, changing
//! pages through one generic WAL record. Locks are taken in one order, the metapage before a
//! data page, and no backend holds two data pages' locks at once, so no two backends wait for
//! each other. An error releases what is held (PostgreSQL's abort releases buffer locks and
//! pins).

use pgrx::pg_sys;
use pgrx::PgSqlErrorCode;

use super::page::{self, Corrupt, Layout, Meta, META_BLOCK};
use crate::pg::error::raise;

/// Reads `block` of `fork` and locks it (`pg_sys::BUFFER_LOCK_SHARE` or `_EXCLUSIVE`).
///
/// # Safety
/// `index` is an open index relation with that block.
pub(super) unsafe fn read(
    index: pg_sys::Relation,
    block: pg_sys::BlockNumber,
    mode: u32,
    strategy: pg_sys::BufferAccessStrategy,
) -> pg_sys::Buffer {
    // SAFETY: per the contract.
    let buf = unsafe { pin(index, block, strategy) };
    lock(buf, mode);
    buf
}

/// Reads `block` of the main fork into a buffer and pins it, unlocked.
///
/// # Safety
/// `index` is an open index relation with that block.
unsafe fn pin(
    index: pg_sys::Relation,
    block: pg_sys::BlockNumber,
    strategy: pg_sys::BufferAccessStrategy,
) -> pg_sys::Buffer {
    // SAFETY: per the contract.
    unsafe {
        pg_sys::ReadBufferExtended(
            index,
            pg_sys::ForkNumber::MAIN_FORKNUM,
            block,
            pg_sys::ReadBufferMode::RBM_NORMAL,
            strategy,
        )
    }
}

/// Pins the pages of one store in block order, each while the one before it is read: the
/// buffer lookup and the first cache misses of a page then overlap the reading of the last.
///
/// The buffers a backend's last scan of a store found its pages in are kept (4 bytes a page,
/// for the last few stores read): a later scan pins a page still there without a lookup in the
/// shared buffer table (`ReadRecentBuffer`, which checks the buffer's tag), the most of a
/// sweep's cost after the comparisons themselves.
pub(super) struct AheadReader {
    index: pg_sys::Relation,
    recent: Vec<pg_sys::Buffer>,
}

thread_local! {
    /// The pages' buffers of the last stores scanned, by index OID (most recent last).
    static RECENT: std::cell::RefCell<Vec<(pg_sys::Oid, Vec<pg_sys::Buffer>)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Stores whose recent buffers a backend keeps.
const RECENT_STORES: usize = 8;

impl AheadReader {
    /// `index` is an open store that stays open until [`AheadReader::finish`].
    pub(super) fn new(index: pg_sys::Relation) -> AheadReader {
        // SAFETY: `index` is an open relation.
        let oid = unsafe { (*index).rd_id };
        let recent = RECENT.with_borrow_mut(|all| {
            all.iter()
                .position(|(o, _)| *o == oid)
                .map(|at| all.remove(at).1)
                .unwrap_or_default()
        });
        AheadReader { index, recent }
    }

    /// Pins `block` without locking it and asks the CPU for its page's memory; [`lock`] it
    /// before reading it. `block` is below the store's size.
    pub(super) fn pin(&mut self, block: pg_sys::BlockNumber) -> pg_sys::Buffer {
        let at = block as usize;
        let known = self
            .recent
            .get(at)
            .copied()
            .filter(|&b| b != pg_sys::InvalidBuffer as i32);
        // SAFETY: `known` was given to this backend by the buffer manager for this store
        // (ReadRecentBuffer checks that it still holds the block); otherwise the block is
        // read as every page of the store is. A pinned buffer's page stays in memory, and a
        // prefetch reads nothing and cannot fault.
        unsafe {
            let buf = match known {
                Some(b) if crate::pg::compat::read_recent_buffer(self.index, block, b) => b,
                _ => {
                    let b = pin(self.index, block, std::ptr::null_mut());
                    if self.recent.len() <= at {
                        self.recent.resize(at + 1, pg_sys::InvalidBuffer as i32);
                    }
                    self.recent[at] = b;
                    b
                }
            };
            #[cfg(target_arch = "x86_64")]
            {
                use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T1};
                let page = page_of(buf).cast::<i8>();
                for line in (0..pg_sys::BLCKSZ as usize).step_by(64) {
                    _mm_prefetch::<_MM_HINT_T1>(page.wrapping_add(line));
                }
            }
            buf
        }
    }

    /// Keeps the buffers for the backend's next scan of this store.
    pub(super) fn finish(self) {
        // SAFETY: as in `new`.
        let oid = unsafe { (*self.index).rd_id };
        RECENT.with_borrow_mut(|all| {
            if all.len() >= RECENT_STORES {
                all.remove(0);
            }
            all.push((oid, self.recent));
        });
    }
}

/// Locks the pinned `buf` in `mode`.
pub(super) fn lock(buf: pg_sys::Buffer, mode: u32) {
    // SAFETY: the buffer is pinned by this backend.
    unsafe { pg_sys::LockBuffer(buf, mode as i32) }
}

/// Adds a block to `fork` of `index` and returns it locked exclusively, as bloom's
/// `BloomNewBuffer` does: under the relation extension lock, so that two backends never add the
/// same block.
///
/// # Safety
/// `index` is an open index relation with that fork.
pub(super) unsafe fn extend(
    index: pg_sys::Relation,
    fork: pg_sys::ForkNumber::Type,
) -> pg_sys::Buffer {
    // SAFETY: per the contract; the extension lock is released right after the block is added.
    unsafe {
        pg_sys::LockRelationForExtension(index, pg_sys::ExclusiveLock as i32);
        let buf = pg_sys::ReadBufferExtended(
            index,
            fork,
            page::NO_BLOCK, // P_NEW
            pg_sys::ReadBufferMode::RBM_NORMAL,
            std::ptr::null_mut(),
        );
        pg_sys::UnlockRelationForExtension(index, pg_sys::ExclusiveLock as i32);
        pg_sys::LockBuffer(buf, pg_sys::BUFFER_LOCK_EXCLUSIVE as i32);
        buf
    }
}

/// The page of a pinned buffer.
pub(super) fn page_of(buf: pg_sys::Buffer) -> pg_sys::Page {
    // SAFETY: a pinned buffer has a page.
    unsafe { pg_sys::BufferGetPage(buf) }
}

/// Unlocks and unpins `buf`.
pub(super) fn release(buf: pg_sys::Buffer) {
    // SAFETY: every buffer of this module is returned pinned and locked, and released once.
    unsafe { pg_sys::UnlockReleaseBuffer(buf) }
}

/// The number of blocks of the store's main fork, metapage included.
pub(super) fn blocks(index: pg_sys::Relation) -> pg_sys::BlockNumber {
    // SAFETY: `index` is an open relation.
    unsafe { pg_sys::RelationGetNumberOfBlocksInFork(index, pg_sys::ForkNumber::MAIN_FORKNUM) }
}

/// Raises XX002 index_corrupted for `block` of `index`.
pub(super) fn corrupted(index: pg_sys::Relation, block: pg_sys::BlockNumber) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_INDEX_CORRUPTED,
        format!(
            "index \"{}\" contains a corrupted page at block {block}",
            name(index)
        ),
        Some("Please REINDEX it.".into()),
    )
}

/// The name of `index`, for messages.
pub(super) fn name(index: pg_sys::Relation) -> String {
    // SAFETY: an open relation has a pg_class row with a NUL-terminated name.
    unsafe { pgrx::name_data_to_str(&(*(*index).rd_rel).relname).to_string() }
}

/// The metapage's contents, checked (XX002 otherwise), from the locked metapage buffer.
pub(super) fn meta_of<'a>(index: pg_sys::Relation, page: pg_sys::Page) -> &'a mut Meta {
    // SAFETY: the caller holds block 0 of the store pinned and locked.
    unsafe { page::meta(page) }.unwrap_or_else(|Corrupt| corrupted(index, META_BLOCK))
}

/// The metapage's buffer, pinned and locked in `mode` (`BUFFER_LOCK_SHARE` or
/// `BUFFER_LOCK_EXCLUSIVE`).
pub(super) fn lock_meta(index: pg_sys::Relation, mode: u32) -> pg_sys::Buffer {
    // SAFETY: every store has its metapage at block 0.
    unsafe { read(index, META_BLOCK, mode, std::ptr::null_mut()) }
}

/// A copy of the metapage's contents, read under a share lock.
pub(super) fn read_meta(index: pg_sys::Relation) -> Meta {
    let buf = lock_meta(index, pg_sys::BUFFER_LOCK_SHARE);
    let meta = *meta_of(index, page_of(buf));
    release(buf);
    meta
}

/// The layout of the store's data pages, `None` while it holds no value.
pub(super) fn layout_of(index: pg_sys::Relation, meta: &Meta) -> Option<Layout> {
    (meta.width != 0)
        .then(|| Layout::of(meta.width as usize).unwrap_or_else(|| corrupted(index, META_BLOCK)))
}

/// Changes to pages logged as one generic WAL record (`GenericXLogStart`): pages are changed
/// through the copies [`Wal::register`] returns, and only [`Wal::finish`] writes them to the
/// buffers, in a critical section, with their WAL (none for an unlogged or a not yet committed
/// new relation: generic WAL asks `RelationNeedsWAL`). An error before `finish` leaves the
/// buffers as they were.
pub(super) struct Wal(*mut pg_sys::GenericXLogState);

impl Wal {
    pub(super) fn start(index: pg_sys::Relation) -> Wal {
        // SAFETY: `index` is an open relation; the state is palloc'd in the current context.
        Wal(unsafe { pg_sys::GenericXLogStart(index) })
    }

    /// The copy of `buf`'s page to change (at most 4 per record). `whole`: the page is logged
    /// whole, as a new page must be.
    pub(super) fn register(&mut self, buf: pg_sys::Buffer, whole: bool) -> pg_sys::Page {
        let flags = if whole {
            pg_sys::GENERIC_XLOG_FULL_IMAGE
        } else {
            0
        };
        // SAFETY: `buf` is pinned and locked exclusively by the caller.
        unsafe { pg_sys::GenericXLogRegisterBuffer(self.0, buf, flags as i32) }
    }

    pub(super) fn finish(self) {
        // SAFETY: the state came from GenericXLogStart and is finished once.
        unsafe { pg_sys::GenericXLogFinish(self.0) };
    }
}
