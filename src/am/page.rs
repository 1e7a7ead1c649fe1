//! The pages of a sketch store, as bytes: a metapage at block 0, then data pages that each keep
//! up to `capacity` entries as a struct of arrays (the TIDs, then the sketches, back to back), so
//! that a reader compares a page's sketches as one contiguous slice.
//!
//! Every page has PostgreSQL's standard layout (a page header, `pd_lower`/`pd_upper` bounding
//! the unused hole that generic WAL and full-page images skip, a special space naming the page's
//! kind), so that `pg_filedump`, checksums and generic WAL treat it like bloom's or pgvector's.
//!
//! This module calls no server function (it uses PostgreSQL's page types only), so its tests
//! run without a server.
//!
//! ```text
//! data page: | header | TIDs (6 bytes each, `capacity` slots) | pad | sketches (width bytes each) ... | hole | special |
//!                                                                     pd_lower ends after the last sketch ^      ^ pd_upper = pd_special
//! ```

use std::mem::{offset_of, size_of};

use pgrx::pg_sys;

/// The block of the metapage.
pub(crate) const META_BLOCK: pg_sys::BlockNumber = 0;
/// No block (`InvalidBlockNumber`): the metapage's insert block before the first data page.
pub(crate) const NO_BLOCK: pg_sys::BlockNumber = pg_sys::InvalidBlockNumber;
/// The last two bytes of every page of ours, as bloom (0xFF83) and pgvector (0xFF84, 0xFF90) do
/// for theirs: tools that read pages tell whose a page is by them.
const PAGE_ID: u16 = 0xFF8D;
const MAGIC: u32 = 0x4D48_534B;
/// The layout version a metapage records; a store of another one is rebuilt, never read.
const VERSION: u32 = 1;
/// How many blocks with room the metapage lists for inserts to fill (see [`Meta::free`]).
pub(crate) const FREE_SLOTS: usize = 1024;
const KIND_META: u16 = 1;
const KIND_DATA: u16 = 2;

const BLOCK: usize = pg_sys::BLCKSZ as usize;
/// The page header, MAXALIGNed: where a page's contents start.
const HEADER: usize = align8(offset_of!(pg_sys::PageHeaderData, pd_linp));
/// The special space: [`Special`], MAXALIGNed.
const SPECIAL: usize = align8(size_of::<Special>());
const TID: usize = size_of::<pg_sys::ItemPointerData>();
/// The widest sketch a page holds one of.
pub(crate) const MAX_WIDTH: usize = BLOCK - HEADER - SPECIAL - align8(TID);

const fn align8(n: usize) -> usize {
    (n + 7) & !7
}

/// The special space of every page.
#[repr(C)]
struct Special {
    /// Entries on a data page (0 on the metapage).
    count: u16,
    kind: u16,
    unused: u16,
    page_id: u16,
}

/// The contents of the metapage.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct Meta {
    magic: u32,
    version: u32,
    /// The sketch width in bytes; 0 until the first value is stored.
    pub(crate) width: u32,
    /// The data page inserts append to; [`NO_BLOCK`] before the first.
    pub(crate) insert_block: pg_sys::BlockNumber,
    /// Entries in the store, dead ones included until a VACUUM removes them.
    pub(crate) entries: u64,
    /// How many of `free` are set (`pd_lower` ends after them: the rest is the page's hole,
    /// which generic WAL neither compares nor logs).
    free_count: u32,
    /// Blocks the last VACUUM left with room, which inserts fill (the last first) before they
    /// add a block.
    pub(crate) free: [pg_sys::BlockNumber; FREE_SLOTS],
}

impl Meta {
    /// The blocks with room, the last to be filled first.
    pub(crate) fn free_blocks(&self) -> &[pg_sys::BlockNumber] {
        &self.free[..self.free_count as usize]
    }
}

/// `pd_lower` of a metapage listing `free_count` blocks.
const fn meta_lower(free_count: usize) -> usize {
    HEADER + offset_of!(Meta, free) + free_count * size_of::<pg_sys::BlockNumber>()
}

/// Where the arrays of a data page lie, for one sketch width.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    pub(crate) width: usize,
    pub(crate) capacity: usize,
    sketches_at: usize,
}

impl Layout {
    /// The layout of pages of `width`-byte sketches; `None` for 0 or more than [`MAX_WIDTH`].
    pub(crate) const fn of(width: usize) -> Option<Layout> {
        if width == 0 || width > MAX_WIDTH {
            return None;
        }
        let room = BLOCK - HEADER - SPECIAL;
        let mut capacity = room / (TID + width);
        while align8(capacity * TID) + capacity * width > room {
            capacity -= 1;
        }
        Some(Layout {
            width,
            capacity,
            sketches_at: HEADER + align8(capacity * TID),
        })
    }

    fn lower(&self, count: usize) -> usize {
        self.sketches_at + count * self.width
    }
}

/// What a page of the store is.
pub(crate) enum Kind {
    /// All zeros: a page extended but never written (a crash between the two leaves one);
    /// an insert may make it a data page.
    New,
    /// A data page with this many entries.
    Data(usize),
}

/// A page that is not what its place says: the caller raises XX002.
pub(crate) struct Corrupt;

/// The page header of `page`.
///
/// # Safety
/// `page` points at a whole page the caller has pinned and locked.
unsafe fn header<'a>(page: pg_sys::Page) -> &'a mut pg_sys::PageHeaderData {
    // SAFETY: per the contract, a page starts with its header.
    unsafe { &mut *page.cast::<pg_sys::PageHeaderData>() }
}

/// The special space of `page`, if its header puts it where ours is.
///
/// # Safety
/// As [`header`].
unsafe fn special<'a>(page: pg_sys::Page) -> Option<&'a mut Special> {
    // SAFETY: per the contract.
    let h = unsafe { header(page) };
    (h.pd_special as usize == BLOCK - SPECIAL
        && h.pd_upper == h.pd_special
        && h.pd_lower as usize >= HEADER)
        // SAFETY: pd_special is checked to lie inside the page, SPECIAL bytes from its end.
        .then(|| unsafe { &mut *page.add(BLOCK - SPECIAL).cast::<Special>() })
}

/// Initializes `page` (a copy registered with generic WAL, or a local buffer) with `kind`, as
/// `PageInit(page, BLCKSZ, SPECIAL)` does, then our special space.
///
/// # Safety
/// `page` points at `BLCKSZ` writable bytes, 8-aligned.
unsafe fn init(page: pg_sys::Page, kind: u16, lower: usize) {
    // SAFETY: per the contract.
    unsafe {
        std::ptr::write_bytes(page.cast::<u8>(), 0, BLOCK);
        let h = header(page);
        h.pd_upper = (BLOCK - SPECIAL) as u16;
        h.pd_special = (BLOCK - SPECIAL) as u16;
        h.pd_pagesize_version = (BLOCK as u16) | pg_sys::PG_PAGE_LAYOUT_VERSION as u16;
        h.pd_lower = lower as u16;
        let s = special(page).expect("our special space was just made");
        s.kind = kind;
        s.page_id = PAGE_ID;
    }
}

/// Initializes `page` as a metapage of `width`-byte sketches (0: not known yet), no entries.
///
/// # Safety
/// As [`init`].
pub(crate) unsafe fn init_meta(page: pg_sys::Page, width: u32) {
    // SAFETY: per the contract; the metapage's contents fit after the header.
    unsafe {
        init(page, KIND_META, meta_lower(0));
        page.add(HEADER).cast::<Meta>().write(Meta {
            magic: MAGIC,
            version: VERSION,
            width,
            insert_block: NO_BLOCK,
            entries: 0,
            free_count: 0,
            free: [NO_BLOCK; FREE_SLOTS],
        });
    }
}

/// The metapage's contents, checked.
///
/// # Safety
/// `page` is block 0 of a store, pinned and locked.
pub(crate) unsafe fn meta<'a>(page: pg_sys::Page) -> Result<&'a mut Meta, Corrupt> {
    // SAFETY: per the contract; the contents are read only once the page is known to be a
    // metapage, whose header is followed by a Meta.
    unsafe {
        let s = special(page).ok_or(Corrupt)?;
        if s.page_id != PAGE_ID || s.kind != KIND_META {
            return Err(Corrupt);
        }
        let m = &mut *page.add(HEADER).cast::<Meta>();
        let width_ok = m.width == 0 || Layout::of(m.width as usize).is_some();
        if m.magic != MAGIC
            || m.version != VERSION
            || !width_ok
            || m.free_count as usize > FREE_SLOTS
            || header(page).pd_lower as usize != meta_lower(m.free_count as usize)
        {
            return Err(Corrupt);
        }
        Ok(m)
    }
}

/// Keeps the first `count` blocks of the metapage's list (`free` set up to there).
///
/// # Safety
/// `page` is a writable metapage (or a copy registered with generic WAL); `count` is at most
/// [`FREE_SLOTS`].
pub(crate) unsafe fn set_free_count(page: pg_sys::Page, count: usize) {
    debug_assert!(count <= FREE_SLOTS);
    // SAFETY: per the contract; a metapage's contents follow its header.
    unsafe {
        (*page.add(HEADER).cast::<Meta>()).free_count = count as u32;
        header(page).pd_lower = meta_lower(count) as u16;
    }
}

/// Initializes `page` as an empty data page.
///
/// # Safety
/// As [`init`].
pub(crate) unsafe fn init_data(page: pg_sys::Page, layout: &Layout) {
    // SAFETY: per the contract.
    unsafe { init(page, KIND_DATA, layout.lower(0)) }
}

/// What `page`, a block after the metapage, holds, checked against `layout`.
///
/// # Safety
/// `page` is a block of a store, pinned and locked.
pub(crate) unsafe fn kind(page: pg_sys::Page, layout: &Layout) -> Result<Kind, Corrupt> {
    // SAFETY: per the contract.
    unsafe {
        // (PageIsNew)
        if header(page).pd_upper == 0 {
            return Ok(Kind::New);
        }
        let s = special(page).ok_or(Corrupt)?;
        let count = s.count as usize;
        if s.page_id != PAGE_ID
            || s.kind != KIND_DATA
            || count > layout.capacity
            || header(page).pd_lower as usize != layout.lower(count)
        {
            return Err(Corrupt);
        }
        Ok(Kind::Data(count))
    }
}

/// The first `count` TIDs and sketches of a data page.
///
/// # Safety
/// `page` is a data page of `layout` pinned and locked for as long as the slices live, with at
/// least `count` entries.
pub(crate) unsafe fn entries<'a>(
    page: pg_sys::Page,
    layout: &Layout,
    count: usize,
) -> (&'a [pg_sys::ItemPointerData], &'a [u8]) {
    // SAFETY: per the contract the arrays hold `count` entries; ItemPointerData is 2-aligned
    // and HEADER is 8-aligned.
    unsafe {
        (
            std::slice::from_raw_parts(page.add(HEADER).cast(), count),
            std::slice::from_raw_parts(page.add(layout.sketches_at).cast(), count * layout.width),
        )
    }
}

/// Appends an entry to a data page with room for it (`count < capacity`).
///
/// # Safety
/// `page` is a writable data page of `layout` (or a copy registered with generic WAL) with
/// `count` entries; `sketch` is `layout.width` bytes.
pub(crate) unsafe fn append(
    page: pg_sys::Page,
    layout: &Layout,
    count: usize,
    tid: pg_sys::ItemPointerData,
    sketch: &[u8],
) {
    debug_assert!(count < layout.capacity && sketch.len() == layout.width);
    // SAFETY: per the contract, slot `count` of both arrays is inside the page.
    unsafe {
        page.add(HEADER + count * TID)
            .cast::<pg_sys::ItemPointerData>()
            .write_unaligned(tid);
        std::ptr::copy_nonoverlapping(
            sketch.as_ptr(),
            page.add(layout.sketches_at + count * layout.width).cast(),
            layout.width,
        );
        set_count(page, layout, count + 1);
    }
}

/// Keeps the entries of a data page whose `keep` flag is set, in order, packed at the front of
/// both arrays; zeroes the freed slots. Returns the entries kept.
///
/// # Safety
/// `page` is a writable data page of `layout` with `keep.len()` entries.
pub(crate) unsafe fn compact(page: pg_sys::Page, layout: &Layout, keep: &[bool]) -> usize {
    let w = layout.width;
    let mut kept = 0;
    // SAFETY: per the contract every index below `keep.len()` is an entry of the page.
    unsafe {
        let tids = page.add(HEADER);
        let sketches = page.add(layout.sketches_at);
        for (i, _) in keep.iter().enumerate().filter(|(_, k)| **k) {
            if i != kept {
                std::ptr::copy_nonoverlapping(tids.add(i * TID), tids.add(kept * TID), TID);
                std::ptr::copy_nonoverlapping(sketches.add(i * w), sketches.add(kept * w), w);
            }
            kept += 1;
        }
        let freed = keep.len() - kept;
        std::ptr::write_bytes(tids.add(kept * TID), 0, freed * TID);
        std::ptr::write_bytes(sketches.add(kept * w), 0, freed * w);
        set_count(page, layout, kept);
    }
    kept
}

/// # Safety
/// `page` is a writable data page of `layout`.
unsafe fn set_count(page: pg_sys::Page, layout: &Layout, count: usize) {
    // SAFETY: per the contract; the page's special space was checked or made by us.
    unsafe {
        special(page).expect("a data page").count = count as u16;
        header(page).pd_lower = layout.lower(count) as u16;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[repr(C, align(8))]
    struct TestPage([u8; BLOCK]);

    impl TestPage {
        fn new() -> Box<TestPage> {
            Box::new(TestPage([0; BLOCK]))
        }
        fn ptr(&mut self) -> pg_sys::Page {
            self.0.as_mut_ptr().cast()
        }
    }

    fn tid(n: u32) -> pg_sys::ItemPointerData {
        let mut t = pg_sys::ItemPointerData::default();
        t.ip_blkid.bi_hi = (n >> 16) as u16;
        t.ip_blkid.bi_lo = n as u16;
        t.ip_posid = (n % 300 + 1) as u16;
        t
    }

    fn sketch(n: u32, width: usize) -> Vec<u8> {
        (0..width).map(|i| (n as usize * 31 + i) as u8).collect()
    }

    /// A TID's fields, comparable.
    fn key(t: pg_sys::ItemPointerData) -> (u16, u16, u16) {
        let (hi, lo, pos) = (t.ip_blkid.bi_hi, t.ip_blkid.bi_lo, t.ip_posid);
        (hi, lo, pos)
    }

    /// The (tid, sketch) entries of a data page, checked.
    fn read(page: &mut TestPage, layout: &Layout) -> Vec<((u16, u16, u16), Vec<u8>)> {
        // SAFETY: a test page of BLCKSZ bytes.
        unsafe {
            let Ok(Kind::Data(count)) = kind(page.ptr(), layout) else {
                panic!("not a data page");
            };
            let (tids, sketches) = entries(page.ptr(), layout, count);
            assert_eq!(sketches.len(), count * layout.width);
            tids.iter()
                .map(|t| key(*t))
                .zip(sketches.chunks_exact(layout.width).map(<[u8]>::to_vec))
                .collect()
        }
    }

    #[test]
    fn layouts_fit_a_page() {
        for width in 1..=MAX_WIDTH {
            let l = Layout::of(width).unwrap();
            assert!(l.capacity >= 1);
            assert!(l.lower(l.capacity) <= BLOCK - SPECIAL, "width {width}");
            // one more entry would not fit
            let more = l.capacity + 1;
            assert!(HEADER + align8(more * TID) + more * width > BLOCK - SPECIAL);
        }
        assert_eq!(Layout::of(0), None);
        assert_eq!(Layout::of(MAX_WIDTH + 1), None);
        assert_eq!(Layout::of(64).unwrap().capacity, 116);
        assert_eq!(Layout::of(16).unwrap().capacity, 370);
    }

    /// Appends and packs against a model (a Vec of entries), for several widths: the page
    /// holds exactly the model's entries, in order, with its bounds checked by `kind`.
    #[test]
    fn append_and_compact_keep_the_entries_in_order() {
        for width in [1, 7, 16, 64, 1000, MAX_WIDTH] {
            let layout = Layout::of(width).unwrap();
            let mut page = TestPage::new();
            // SAFETY: a test page of BLCKSZ bytes.
            unsafe { init_data(page.ptr(), &layout) };
            let mut model = Vec::new();
            let mut next = 0u32;
            for round in 0..4 {
                while model.len() < layout.capacity {
                    let (t, s) = (tid(next), sketch(next, width));
                    // SAFETY: a data page with room.
                    unsafe { append(page.ptr(), &layout, model.len(), t, &s) };
                    model.push((key(t), s));
                    next += 1;
                }
                assert_eq!(read(&mut page, &layout), model);
                // keep every (round + 2)th entry
                let keep: Vec<bool> = (0..model.len()).map(|i| i % (round + 2) == 0).collect();
                // SAFETY: a data page with `keep.len()` entries.
                let kept = unsafe { compact(page.ptr(), &layout, &keep) };
                let mut k = keep.iter();
                model.retain(|_| *k.next().unwrap());
                assert_eq!(kept, model.len());
                assert_eq!(read(&mut page, &layout), model);
            }
        }
    }

    #[test]
    fn pages_are_checked() {
        let layout = Layout::of(64).unwrap();
        let mut page = TestPage::new();
        // SAFETY: test pages of BLCKSZ bytes.
        unsafe {
            assert!(matches!(kind(page.ptr(), &layout), Ok(Kind::New)));
            init_meta(page.ptr(), 64);
            assert!(matches!(kind(page.ptr(), &layout), Err(Corrupt)));
            let m = meta(page.ptr()).ok().unwrap();
            assert_eq!((m.width, m.insert_block, m.entries), (64, NO_BLOCK, 0));
            assert!(m.free_blocks().is_empty());
            m.free[..3].copy_from_slice(&[5, 4, 3]);
            set_free_count(page.ptr(), 3);
            assert_eq!(meta(page.ptr()).ok().unwrap().free_blocks(), [5, 4, 3]);
            // a width no page holds, a count past the list, another page id
            meta(page.ptr()).ok().unwrap().width = (MAX_WIDTH + 1) as u32;
            assert!(meta(page.ptr()).is_err());
            init_meta(page.ptr(), 0);
            (*page.ptr().add(HEADER).cast::<Meta>()).free_count = 2;
            assert!(meta(page.ptr()).is_err());
            init_data(page.ptr(), &layout);
            assert!(meta(page.ptr()).is_err());
            append(page.ptr(), &layout, 0, tid(1), &sketch(1, 64));
            assert!(matches!(kind(page.ptr(), &layout), Ok(Kind::Data(1))));
            // pd_lower that does not match the count, a count over the capacity, a page id
            header(page.ptr()).pd_lower += 1;
            assert!(kind(page.ptr(), &layout).is_err());
            header(page.ptr()).pd_lower -= 1;
            special(page.ptr()).unwrap().count = (layout.capacity + 1) as u16;
            assert!(kind(page.ptr(), &layout).is_err());
            special(page.ptr()).unwrap().count = 1;
            page.0[BLOCK - 1] ^= 1;
            assert!(kind(page.ptr(), &layout).is_err());
        }
    }
}
