//! A lookup's first step without the executor: the band rows with given keys, read straight
//! from the band table's `(key, id) INCLUDE (sketch1, sketch2)` B-tree through the index access
//! method, the way an index-only scan reads it (visibility map first, the heap only for pages
//! not all-visible). A flagged insert does this once per row; through SQL, executor start-up
//! and forming one result tuple per band row cost about as much as the index reads.
//!
//! It is used only where it returns exactly what the SQL query would: the caller has SELECT on
//! the band table and no row-level security applies to it, the transaction is not SERIALIZABLE
//! (this path takes no predicate locks), and the index is valid, complete and usable by every
//! snapshot. Otherwise, and whenever the band table has no such index, a lookup runs its SQL
//! query instead.

use std::ffi::CString;
use std::ptr;

use pgrx::pg_sys;

/// A band table's B-tree whose first key column is `key` and whose columns include `id`,
/// `sketch1` and `sketch2`: what a lookup reads.
#[derive(Clone, Copy)]
pub(super) struct BandIndex {
    band_table: pg_sys::Oid,
    index: pg_sys::Oid,
    /// Positions of `id`, `sketch1` and `sketch2` among the index's columns.
    columns: [usize; 3],
}

const BAND_COLUMNS: [&str; 4] = ["key", "id", "sketch1", "sketch2"];

impl BandIndex {
    /// The B-tree of `band_table` a lookup can read by itself: not partial, no expressions,
    /// valid for every snapshot, first key column `key` with the standard integer operators.
    /// None if there is none.
    pub(super) fn find(band_table: pg_sys::Oid) -> Option<BandIndex> {
        // SAFETY: relations are opened with a lock and closed again; the index list, pg_index
        // row and key vector are read while their relation is open.
        unsafe {
            let heap = pg_sys::try_table_open(band_table, pg_sys::AccessShareLock as i32);
            if heap.is_null() {
                return None;
            }
            let mut attnums = [0i16; 4];
            for (attnum, name) in attnums.iter_mut().zip(BAND_COLUMNS) {
                let name = CString::new(name).expect("no NUL");
                *attnum = pg_sys::get_attnum(band_table, name.as_ptr());
            }
            let indexes = pg_sys::RelationGetIndexList(heap);
            let found = (0..pg_sys::list_length(indexes))
                .map(|i| pg_sys::list_nth_oid(indexes, i))
                .find_map(|index| Self::usable(band_table, index, attnums));
            pg_sys::table_close(heap, pg_sys::NoLock as i32);
            found
        }
    }

    /// `index` as a [`BandIndex`], if it is one.
    ///
    /// # Safety
    /// `index` is an index of `band_table`, which is open; `attnums` are the attribute numbers
    /// of [`BAND_COLUMNS`] in it (0 where missing).
    unsafe fn usable(
        band_table: pg_sys::Oid,
        index: pg_sys::Oid,
        attnums: [i16; 4],
    ) -> Option<BandIndex> {
        if attnums.contains(&0) {
            return None;
        }
        // SAFETY: per the contract; the index stays locked until the transaction ends.
        unsafe {
            let rel = pg_sys::index_open(index, pg_sys::AccessShareLock as i32);
            let form = &*(*rel).rd_index;
            let fits = (*(*rel).rd_rel).relam == pg_sys::BTREE_AM_OID
                && *(*rel).rd_opfamily == pg_sys::INTEGER_BTREE_FAM_OID
                && form.indisvalid
                && form.indisready
                && form.indislive
                && !form.indcheckxmin
                && pg_sys::RelationGetIndexExpressions(rel).is_null()
                && pg_sys::RelationGetIndexPredicate(rel).is_null();
            let keys = form.indkey.values.as_slice(form.indnatts as usize);
            let position = |attnum| keys.iter().position(|&k| k == attnum);
            let columns = (fits && keys.first() == Some(&attnums[0])).then(|| {
                Some([
                    position(attnums[1])?,
                    position(attnums[2])?,
                    position(attnums[3])?,
                ])
            });
            pg_sys::index_close(rel, pg_sys::NoLock as i32);
            Some(BandIndex {
                band_table,
                index,
                columns: columns.flatten()?,
            })
        }
    }

    pub(super) fn oid(&self) -> pg_sys::Oid {
        self.index
    }

    /// Whether a lookup by the current user, now, may read this index directly (see the module
    /// documentation); if not, it runs its SQL query, which checks and reports the same things.
    pub(super) fn readable(&self) -> bool {
        let mut missing = false;
        // SAFETY: plain catalog checks; a missing table is reported through `missing`.
        unsafe {
            pg_sys::XactIsoLevel != pg_sys::XACT_SERIALIZABLE as i32
                && pg_sys::ActiveSnapshotSet()
                && pg_sys::pg_class_aclcheck_ext(
                    self.band_table,
                    pg_sys::GetUserId(),
                    pg_sys::ACL_SELECT as pg_sys::AclMode,
                    &mut missing,
                ) == pg_sys::AclResult::ACLCHECK_OK
                && !missing
                && pg_sys::check_enable_rls(self.band_table, pg_sys::InvalidOid, true)
                    != pg_sys::CheckEnableRlsResult::RLS_ENABLED as i32
        }
    }

    /// Calls `row(id, [sketch1, sketch2])` for every band row with one of `keys` that the active
    /// snapshot sees, once per matching band row. Only after [`BandIndex::readable`].
    pub(super) fn scan(&self, keys: &[i64], mut row: impl FnMut(i64, [u64; 2])) {
        // SAFETY: the scan follows nodeIndexonlyscan.c: both relations are locked for the scan,
        // entries are read only while the scan is positioned on them, and every pin, slot and
        // scan is released at the end (an error releases them with the transaction).
        unsafe {
            let heap = pg_sys::table_open(self.band_table, pg_sys::AccessShareLock as i32);
            let index = pg_sys::index_open(self.index, pg_sys::AccessShareLock as i32);
            let scan = pg_sys::index_beginscan(heap, index, pg_sys::GetActiveSnapshot(), 1, 0);
            (*scan).xs_want_itup = true;
            let mut vm_buffer = pg_sys::InvalidBuffer as pg_sys::Buffer;
            let mut slot: *mut pg_sys::TupleTableSlot = ptr::null_mut();
            let natts = (*(*index).rd_index).indnatts as usize;
            let (mut values, mut nulls) = (vec![pg_sys::Datum::from(0); natts], vec![false; natts]);
            let mut key_entry = pg_sys::ScanKeyData::default();
            for &key in keys {
                pg_sys::ScanKeyInit(
                    &mut key_entry,
                    1,
                    pg_sys::BTEqualStrategyNumber as pg_sys::StrategyNumber,
                    pg_sys::Oid::from(pg_sys::F_INT8EQ),
                    key.into(),
                );
                pg_sys::index_rescan(scan, &mut key_entry, 1, ptr::null_mut(), 0);
                loop {
                    pg_sys::check_for_interrupts!();
                    let tid = pg_sys::index_getnext_tid(
                        scan,
                        pg_sys::ScanDirection::ForwardScanDirection,
                    );
                    if tid.is_null() {
                        break;
                    }
                    let block = pgrx::itemptr::item_pointer_get_block_number(tid);
                    let all_visible = pg_sys::visibilitymap_get_status(heap, block, &mut vm_buffer)
                        as u32
                        & pg_sys::VISIBILITYMAP_ALL_VISIBLE
                        != 0;
                    if !all_visible {
                        if slot.is_null() {
                            slot = pg_sys::table_slot_create(heap, ptr::null_mut());
                        }
                        if !pg_sys::index_fetch_heap(scan, slot) {
                            continue;
                        }
                    }
                    pg_sys::index_deform_tuple(
                        (*scan).xs_itup,
                        (*scan).xs_itupdesc,
                        values.as_mut_ptr(),
                        nulls.as_mut_ptr(),
                    );
                    let [id, s1, s2] = self.columns;
                    if !(nulls[id] || nulls[s1] || nulls[s2]) {
                        let int = |i: usize| values[i].value() as i64;
                        row(int(id), [int(s1) as u64, int(s2) as u64]);
                    }
                }
            }
            pg_sys::index_endscan(scan);
            if vm_buffer != pg_sys::InvalidBuffer as pg_sys::Buffer {
                pg_sys::ReleaseBuffer(vm_buffer);
            }
            if !slot.is_null() {
                pg_sys::ExecDropSingleTupleTableSlot(slot);
            }
            pg_sys::index_close(index, pg_sys::NoLock as i32);
            pg_sys::table_close(heap, pg_sys::NoLock as i32);
        }
    }
}
