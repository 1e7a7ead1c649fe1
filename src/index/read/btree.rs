//! A lookup's two reads without the executor, straight through PostgreSQL's B-tree access
//! method: the band rows with given keys from the band table's `(key, id) INCLUDE (sketch1,
//! sketch2)` index, the way an index-only scan reads it (visibility map first, the heap only for
//! pages not all-visible); then the texts of the kept ids through the table's unique index on
//! the id, the way an index scan reads it. A flagged insert does both once per row; through
//! SQL, executor start-up, planning and forming result tuples cost about as much as the index
//! reads themselves.
//!
//! A direct read is used only where it returns exactly what the SQL query would: the caller has
//! table-level SELECT on the relation and no row-level security applies to it, the transaction
//! is not SERIALIZABLE (these reads take no predicate locks), and the index is valid, complete
//! and usable by every snapshot. Otherwise, and whenever there is no fitting index, a lookup
//! runs its SQL query instead. The flag trigger's check reads both indexes directly at every
//! isolation level, with a dirty snapshot, as a constraint check does (`scan_dirty`,
//! `fetch_dirty`).

use std::collections::HashSet;
use std::ptr;

use pgrx::pg_sys;
use pgrx::PgMemoryContexts;

use crate::core::bands::keys_of_band;
use crate::core::capacity;
use crate::pg::compat;
use crate::pg::tuple::attnum;

use crate::index::def::band::BandFormat;
use crate::index::def::row_id::{Id, KeyType};
use crate::index::def::text_source::{utf8, TextReader, TextSource};

/// A B-tree of `table` that a lookup reads directly.
#[derive(Clone, Copy)]
pub(in crate::index) struct DirectIndex {
    table: pg_sys::Oid,
    index: pg_sys::Oid,
}

/// Whether the current user may read every row of `table` as it is: table-level SELECT, and
/// no row-level security applies to it (a direct read returns what its SQL would).
pub(super) fn caller_reads_whole(table: pg_sys::Oid) -> bool {
    let mut missing = false;
    // SAFETY: plain catalog checks; a missing table is reported through `missing`.
    unsafe {
        pg_sys::pg_class_aclcheck_ext(
            table,
            pg_sys::GetUserId(),
            pg_sys::ACL_SELECT as pg_sys::AclMode,
            &mut missing,
        ) == pg_sys::AclResult::ACLCHECK_OK
            && !missing
            && pg_sys::check_enable_rls(table, pg_sys::InvalidOid, true)
                != pg_sys::CheckEnableRlsResult::RLS_ENABLED as i32
    }
}

/// The operator family, input type and collation of an index's first column.
#[derive(Clone, Copy)]
struct FirstColumn {
    family: pg_sys::Oid,
    input_type: pg_sys::Oid,
    collation: pg_sys::Oid,
}

/// How a scan compares its key with an index's first column: the B-tree equality function of
/// the column's operator family, under the index's collation.
#[derive(Clone, Copy)]
struct Equality {
    proc: pg_sys::Oid,
    collation: pg_sys::Oid,
}

impl FirstColumn {
    /// The equality of this column for keys of its own input type, if its family has one.
    fn equality(&self) -> Option<Equality> {
        // SAFETY: catalog lookups by OID; InvalidOid when the family has no such operator.
        unsafe {
            let operator = pg_sys::get_opfamily_member(
                self.family,
                self.input_type,
                self.input_type,
                pg_sys::BTEqualStrategyNumber as i16,
            );
            (operator != pg_sys::InvalidOid).then(|| Equality {
                proc: pg_sys::get_opcode(operator),
                collation: self.collation,
            })
        }
    }
}

impl DirectIndex {
    /// The first B-tree of `table` for which `fits(attribute numbers of its columns, how many of
    /// them are key columns, whether it is unique, its first column)` gives a value, among
    /// those that are not partial, have no expressions and are valid for every snapshot.
    fn find<T>(
        table: pg_sys::Oid,
        fits: impl Fn(&[i16], usize, bool, FirstColumn) -> Option<T>,
    ) -> Option<(DirectIndex, T)> {
        // SAFETY: relations are opened with a lock (kept until the transaction ends, as the
        // planner does) and closed again; the index list, pg_index row and key vector are read
        // while their relation is open.
        unsafe {
            let heap = pg_sys::try_table_open(table, pg_sys::AccessShareLock as i32);
            if heap.is_null() {
                return None;
            }
            // (a partitioned table's indexes have no entries: its partitions' indexes do)
            if (*(*heap).rd_rel).relkind != pg_sys::RELKIND_RELATION as std::ffi::c_char {
                pg_sys::table_close(heap, pg_sys::NoLock as i32);
                return None;
            }
            let indexes = pg_sys::RelationGetIndexList(heap);
            let found = (0..pg_sys::list_length(indexes)).find_map(|i| {
                let index = pg_sys::list_nth_oid(indexes, i);
                let rel = pg_sys::index_open(index, pg_sys::AccessShareLock as i32);
                let form = &*(*rel).rd_index;
                let usable = (*(*rel).rd_rel).relam == pg_sys::BTREE_AM_OID
                    && form.indisvalid
                    && form.indisready
                    && form.indislive
                    && !form.indcheckxmin
                    && pg_sys::RelationGetIndexExpressions(rel).is_null()
                    && pg_sys::RelationGetIndexPredicate(rel).is_null();
                let fit = usable
                    .then(|| {
                        let attnums = form.indkey.values.as_slice(form.indnatts as usize);
                        let first = FirstColumn {
                            family: *(*rel).rd_opfamily,
                            input_type: *(*rel).rd_opcintype,
                            collation: *(*rel).rd_indcollation,
                        };
                        fits(attnums, form.indnkeyatts as usize, form.indisunique, first)
                    })
                    .flatten();
                pg_sys::index_close(rel, pg_sys::NoLock as i32);
                Some((DirectIndex { table, index }, fit?))
            });
            pg_sys::table_close(heap, pg_sys::NoLock as i32);
            found
        }
    }

    /// Whether a direct read returns what SQL would, privileges aside: the transaction is not
    /// SERIALIZABLE and a snapshot is active.
    fn usable(&self) -> bool {
        // SAFETY: reads of the transaction's state.
        unsafe {
            pg_sys::XactIsoLevel != pg_sys::XACT_SERIALIZABLE as i32 && pg_sys::ActiveSnapshotSet()
        }
    }

    /// Whether the current user, now, may read `table` directly (see the module documentation).
    fn readable(&self) -> bool {
        self.usable() && caller_reads_whole(self.table)
    }

    /// Runs `read(scan, heap, slot)` once per value of `keys`, with the scan positioned before
    /// the index entries whose first column equals the value (compared with `eq_proc`), under
    /// `snapshot`. `slot` is a slot of the table for heap fetches.
    ///
    /// # Safety
    /// With the active snapshot only after [`DirectIndex::usable`] (and, for a table the caller
    /// reads, `readable`); `snapshot` lives until the scan ends; `eq` is the equality of the
    /// index's first column and every key a datum of its type.
    unsafe fn scan(
        &self,
        snapshot: pg_sys::Snapshot,
        want_index_tuple: bool,
        eq: Equality,
        keys: impl IntoIterator<Item = pg_sys::Datum>,
        read: impl FnMut(pg_sys::IndexScanDesc, pg_sys::Relation, *mut pg_sys::TupleTableSlot),
    ) {
        let equal = pg_sys::BTEqualStrategyNumber;
        let sets = keys
            .into_iter()
            .map(|key| [first_column_key(equal, eq.collation, eq.proc, key)]);
        // SAFETY: per the contract.
        unsafe { self.scan_by(snapshot, want_index_tuple, sets, read) }
    }

    /// [`DirectIndex::scan`] with the scan positioned by each set of `N` scan keys in turn.
    ///
    /// # Safety
    /// As for [`DirectIndex::scan`]; each scan key compares the index's first column with a
    /// datum of its type.
    unsafe fn scan_by<const N: usize>(
        &self,
        snapshot: pg_sys::Snapshot,
        want_index_tuple: bool,
        sets: impl IntoIterator<Item = [pg_sys::ScanKeyData; N]>,
        mut read: impl FnMut(pg_sys::IndexScanDesc, pg_sys::Relation, *mut pg_sys::TupleTableSlot),
    ) {
        // SAFETY: the calls follow nodeIndexscan.c and nodeIndexonlyscan.c: both relations are
        // locked for the scan, and the scan, slot and relations are released at the end (an
        // error releases them with the transaction); index_rescan copies the scan keys.
        unsafe {
            let heap = pg_sys::table_open(self.table, pg_sys::AccessShareLock as i32);
            let index = pg_sys::index_open(self.index, pg_sys::AccessShareLock as i32);
            let scan = compat::index_beginscan(heap, index, snapshot, N as i32, 0);
            (*scan).xs_want_itup = want_index_tuple;
            let slot = pg_sys::table_slot_create(heap, ptr::null_mut());
            for mut set in sets {
                // (one set per id or key of the caller's: as many as it gives)
                pg_sys::check_for_interrupts!();
                pg_sys::index_rescan(scan, set.as_mut_ptr(), N as i32, ptr::null_mut(), 0);
                read(scan, heap, slot);
            }
            pg_sys::index_endscan(scan);
            pg_sys::ExecDropSingleTupleTableSlot(slot);
            pg_sys::index_close(index, pg_sys::NoLock as i32);
            pg_sys::table_close(heap, pg_sys::NoLock as i32);
        }
    }
}

/// A scan key comparing an index's first column with `value` by `proc` (of `strategy`).
fn first_column_key(
    strategy: u32,
    collation: pg_sys::Oid,
    proc: pg_sys::Oid,
    value: pg_sys::Datum,
) -> pg_sys::ScanKeyData {
    let mut entry = pg_sys::ScanKeyData::default();
    // SAFETY: fills `entry` in; the function is looked up by OID.
    unsafe {
        pg_sys::ScanKeyEntryInitialize(
            &mut entry,
            0,
            1,
            strategy as pg_sys::StrategyNumber,
            pg_sys::InvalidOid,
            collation,
            proc,
            value,
        )
    };
    entry
}

/// How an index-only read decided the row an entry points at ([`IndexOnly::entries`]).
#[derive(PartialEq, Eq)]
enum EntryRow {
    /// On an all-visible page: committed, its writer long done; the heap was not read.
    AllVisible,
    /// Read from the heap into the slot: the snapshot sees it.
    Fetched,
    /// Read from the heap: the snapshot does not see it.
    Gone,
}

/// Index entries read as an index-only scan reads them (nodeIndexonlyscan.c): the columns of
/// each entry from the index, the heap only where the visibility map does not say the page is
/// all-visible. Keeps room for one entry's columns and the visibility map page pinned last
/// across scans, until [`IndexOnly::end`].
struct IndexOnly {
    values: Vec<pg_sys::Datum>,
    nulls: Vec<bool>,
    vm_buffer: pg_sys::Buffer,
}

impl IndexOnly {
    fn new() -> IndexOnly {
        IndexOnly {
            values: Vec::new(),
            nulls: Vec::new(),
            vm_buffer: pg_sys::InvalidBuffer as pg_sys::Buffer,
        }
    }

    /// Calls `entry(values, nulls, tid, row)` for each entry `scan` returns, with its columns;
    /// `row()` decides the row it points at (reading it into `slot` if need be).
    ///
    /// # Safety
    /// `scan` is positioned, wants index tuples and is of `heap`'s index; `slot` is a slot of
    /// `heap`.
    unsafe fn entries(
        &mut self,
        scan: pg_sys::IndexScanDesc,
        heap: pg_sys::Relation,
        slot: *mut pg_sys::TupleTableSlot,
        mut entry: impl FnMut(
            &[pg_sys::Datum],
            &[bool],
            &pg_sys::ItemPointerData,
            &mut dyn FnMut() -> EntryRow,
        ),
    ) {
        // SAFETY: per the contract; an entry is read while the scan is positioned on it.
        unsafe {
            let natts = (*(*scan).xs_itupdesc).natts as usize;
            self.values.resize(natts, pg_sys::Datum::from(0));
            self.nulls.resize(natts, false);
            loop {
                pg_sys::check_for_interrupts!();
                let tid =
                    pg_sys::index_getnext_tid(scan, pg_sys::ScanDirection::ForwardScanDirection);
                if tid.is_null() {
                    break;
                }
                pg_sys::index_deform_tuple(
                    (*scan).xs_itup,
                    (*scan).xs_itupdesc,
                    self.values.as_mut_ptr(),
                    self.nulls.as_mut_ptr(),
                );
                let vm_buffer = &mut self.vm_buffer;
                let mut row = || {
                    let block = pgrx::itemptr::item_pointer_get_block_number(tid);
                    let status = pg_sys::visibilitymap_get_status(heap, block, vm_buffer);
                    if u32::from(status) & pg_sys::VISIBILITYMAP_ALL_VISIBLE != 0 {
                        EntryRow::AllVisible
                    } else if pg_sys::index_fetch_heap(scan, slot) {
                        EntryRow::Fetched
                    } else {
                        EntryRow::Gone
                    }
                };
                entry(&self.values, &self.nulls, &*tid, &mut row);
            }
        }
    }

    /// Releases the visibility map page.
    fn end(self) {
        if self.vm_buffer != pg_sys::InvalidBuffer as pg_sys::Buffer {
            // SAFETY: a buffer `visibilitymap_get_status` pinned and left to the caller.
            unsafe { pg_sys::ReleaseBuffer(self.vm_buffer) };
        }
    }
}

/// The B-trees of a band table through which a lookup finds candidates: of format 1, the one
/// whose first key column is `key` and whose columns include `id`, `sketch1` and `sketch2`; of
/// format 2, one whose first key column is `key<i>` for each band i.
#[derive(Clone)]
pub(in crate::index) enum BandIndex {
    PerBand {
        direct: DirectIndex,
        /// Positions of `id`, `sketch1` and `sketch2` among the index's columns.
        columns: [usize; 3],
        /// The type of `id`.
        key: KeyType,
    },
    PerRow {
        /// Band i's B-tree.
        bands: Vec<DirectIndex>,
        /// Attribute numbers of `id`, `sketch1` and `sketch2` in the band table.
        columns: [i16; 3],
        key: KeyType,
    },
}

impl BandIndex {
    /// The fitting B-trees of `band_table` (of format `format`, with `bands` bands), if it has
    /// them.
    pub(super) fn find(
        band_table: pg_sys::Oid,
        key_type: KeyType,
        format: BandFormat,
        bands: usize,
    ) -> Option<BandIndex> {
        let led_by = |column: &str| {
            let attnum = attnum(band_table, column);
            move |attnums: &[i16], first: &FirstColumn| {
                attnum != 0
                    && attnums.first() == Some(&attnum)
                    && first.family == pg_sys::INTEGER_BTREE_FAM_OID
            }
        };
        let [id, sketch1, sketch2] = ["id", "sketch1", "sketch2"].map(|c| attnum(band_table, c));
        match format {
            BandFormat::PerBand => {
                let key = led_by("key");
                let (direct, columns) = DirectIndex::find(band_table, |attnums, _, _, first| {
                    let position = |attnum| attnums.iter().position(|&a| a == attnum);
                    key(attnums, &first)
                        .then(|| Some([position(id)?, position(sketch1)?, position(sketch2)?]))
                        .flatten()
                })?;
                Some(BandIndex::PerBand {
                    direct,
                    columns,
                    key: key_type,
                })
            }
            BandFormat::PerRow => {
                if id == 0 || sketch1 == 0 || sketch2 == 0 {
                    return None;
                }
                let bands = (0..bands)
                    .map(|band| {
                        let key = led_by(&format.key_column(band));
                        DirectIndex::find(band_table, |attnums, _, _, first| {
                            key(attnums, &first).then_some(())
                        })
                        .map(|(direct, ())| direct)
                    })
                    .collect::<Option<Vec<_>>>()?;
                Some(BandIndex::PerRow {
                    bands,
                    columns: [id, sketch1, sketch2],
                    key: key_type,
                })
            }
        }
    }

    /// The B-tree a lookup reads first.
    pub(super) fn oid(&self) -> pg_sys::Oid {
        match self {
            BandIndex::PerBand { direct, .. } => direct.index,
            BandIndex::PerRow { bands, .. } => {
                bands.first().map_or(pg_sys::InvalidOid, |d| d.index)
            }
        }
    }

    /// How many B-trees a lookup reads.
    pub(super) fn count(&self) -> usize {
        match self {
            BandIndex::PerBand { .. } => 1,
            BandIndex::PerRow { bands, .. } => bands.len(),
        }
    }

    /// Whether a lookup may read these B-trees directly now. The band table is private to the
    /// table's owner: whoever calls this has checked that the results may be shown.
    pub(super) fn usable(&self) -> bool {
        match self {
            BandIndex::PerBand { direct, .. } => direct.usable(),
            BandIndex::PerRow { bands, .. } => bands.first().is_some_and(DirectIndex::usable),
        }
    }

    /// Calls `row(id, [sketch1, sketch2])` for every band row with one of `keys` (band `i`'s key
    /// `keys[i]`) that the active snapshot sees, once per matching band row. Only after
    /// [`BandIndex::usable`].
    pub(super) fn scan(&self, keys: &[i64], mut row: impl FnMut(Id, [u64; 2])) {
        // SAFETY: after `usable`, under the active snapshot.
        unsafe {
            self.scan_under(
                pg_sys::GetActiveSnapshot(),
                keys,
                |_| true,
                |id, sketch, _| row(id, sketch),
            )
        }
    }

    /// Calls `row(id, [sketch1, sketch2], writer)` for every band row with one of `keys` that
    /// is committed and not deleted, or written by this transaction, or written or being
    /// deleted by a transaction still in progress (`writer`: its id). This is how a constraint
    /// check sees an index (`check_exclusion_or_unique_constraint`): with a dirty snapshot.
    /// Entries whose id `wanted` refuses are skipped (of format 1 before their heap tuple is
    /// read).
    pub(in crate::index) fn scan_dirty(
        &self,
        keys: &[i64],
        wanted: impl Fn(&Id) -> bool,
        row: impl FnMut(Id, [u64; 2], Option<pg_sys::TransactionId>),
    ) {
        let mut dirty = dirty_snapshot();
        // SAFETY: the dirty snapshot outlives the scan.
        unsafe { self.scan_under(&mut dirty, keys, wanted, row) }
    }

    /// The scans of [`BandIndex::scan`] and [`BandIndex::scan_dirty`].
    ///
    /// # Safety
    /// `snapshot` is the active snapshot (after `usable`) or a dirty snapshot, and outlives the
    /// call.
    unsafe fn scan_under(
        &self,
        snapshot: pg_sys::Snapshot,
        keys: &[i64],
        wanted: impl Fn(&Id) -> bool,
        row: impl FnMut(Id, [u64; 2], Option<pg_sys::TransactionId>),
    ) {
        // SAFETY: per the contract.
        unsafe {
            match self {
                BandIndex::PerBand {
                    direct,
                    columns,
                    key,
                } => scan_per_band(direct, *columns, *key, snapshot, keys, wanted, row),
                BandIndex::PerRow {
                    bands,
                    columns,
                    key,
                } => scan_per_row(bands, *columns, *key, snapshot, keys, wanted, row),
            }
        }
    }
}

impl BandIndex {
    /// The band table these B-trees index, read whole by a lookup's scan of every row's band
    /// sketch, if it has the columns that needs: of format 2 its heap, of format 1 the first
    /// band's entries of its `(key, id) INCLUDE (sketch1, sketch2)` B-tree.
    pub(super) fn heap(&self) -> Option<BandHeap> {
        let (table, key, read) = match self {
            BandIndex::PerBand {
                direct,
                columns: [id, sketch1, sketch2],
                key,
            } => (
                direct.table,
                *key,
                SketchRead::FirstBand {
                    index: *direct,
                    columns: [*id, *sketch1, *sketch2],
                },
            ),
            BandIndex::PerRow {
                bands,
                columns: [_, sketch1, sketch2],
                key,
            } => (
                bands.first()?.table,
                *key,
                SketchRead::Heap {
                    sketches: [*sketch1, *sketch2],
                },
            ),
        };
        let id = attnum(table, "id");
        (id > 0).then_some(BandHeap {
            table,
            id,
            read,
            key,
        })
    }
}

/// A band table read whole for a lookup's scan of every row's band sketch (`lookup`): each
/// row's sketch once, kept if it differs from the text's in few enough bits, ordered by how
/// many. Read directly under the same conditions as the band table's B-trees
/// ([`BandIndex::usable`]).
pub(super) struct BandHeap {
    table: pg_sys::Oid,
    /// The attribute number of `id`.
    id: i16,
    read: SketchRead,
    key: KeyType,
}

/// Where a [`BandHeap`] reads the sketches.
enum SketchRead {
    /// Of format 2, the heap, as a sequential scan reads it: the attribute numbers of `sketch1`
    /// and `sketch2`.
    Heap { sketches: [i16; 2] },
    /// Of format 1, the entries of the first band's keys in the `(key, ...)` B-tree, as an
    /// index-only scan reads them (one per row, where the heap holds one per row and band):
    /// the positions of `id`, `sketch1` and `sketch2` among its columns.
    FirstBand {
        index: DirectIndex,
        columns: [usize; 3],
    },
}

/// A band row a [`BandHeap`] scan kept: the sketch bits in which it differs from the text in
/// the top 16 bits, its heap TID below.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct NearRow(u64);

impl NearRow {
    fn new(differing: usize, tid: &pg_sys::ItemPointerData) -> NearRow {
        // SAFETY: `tid` is a reference, so a valid item pointer.
        let (block, offset) = unsafe {
            (
                pgrx::itemptr::item_pointer_get_block_number(tid),
                pgrx::itemptr::item_pointer_get_offset_number(tid),
            )
        };
        NearRow((differing as u64) << 48 | u64::from(block) << 16 | u64::from(offset))
    }

    pub(super) fn differing(self) -> usize {
        (self.0 >> 48) as usize
    }

    fn tid(self) -> pg_sys::ItemPointerData {
        let mut tid = pg_sys::ItemPointerData::default();
        pgrx::itemptr::item_pointer_set_all(
            &mut tid,
            (self.0 >> 16) as pg_sys::BlockNumber,
            self.0 as pg_sys::OffsetNumber,
        );
        tid
    }
}

impl BandHeap {
    /// The band rows the active snapshot sees whose sketch differs (`differing`) from the
    /// text's in at most `max_differing` bits, fewest first; with `shown`, of the rows whose
    /// ids it holds only (the others cost the same whatever their sketch). Only after
    /// [`BandIndex::usable`].
    pub(super) fn nearest(
        &self,
        differing: impl Fn([u64; 2]) -> usize,
        max_differing: usize,
        shown: Option<&HashSet<Id>>,
    ) -> Vec<NearRow> {
        const WHAT: &str = "the rows a lookup's scan keeps";
        // one list per count of differing bits, each in the order read
        let mut kept: Vec<Vec<NearRow>> = vec![Vec::new(); max_differing + 1];
        let mut keep = |sketch: [u64; 2], tid: &pg_sys::ItemPointerData, id: pg_sys::Datum| {
            if let Some(shown) = shown {
                // SAFETY: the band table's id, stored as the key type (bigint for integer keys).
                let id = unsafe { self.key.id(id, pg_sys::INT8OID) };
                if !shown.contains(&id) {
                    return;
                }
            }
            let bits = differing(sketch);
            if bits <= max_differing {
                capacity::push(&mut kept[bits], NearRow::new(bits, tid), WHAT)
                    .unwrap_or_else(|e| e.fail());
            }
        };
        // SAFETY: after `usable`, under the active snapshot.
        unsafe {
            match self.read {
                SketchRead::Heap { sketches } => {
                    read_heap(self.table, [self.id, sketches[0], sketches[1]], &mut keep)
                }
                SketchRead::FirstBand { index, columns } => {
                    read_first_band(&index, columns, &mut keep)
                }
            }
        }
        let mut rows = Vec::new();
        capacity::reserve(&mut rows, kept.iter().map(Vec::len).sum(), WHAT)
            .unwrap_or_else(|e| e.fail());
        for count in kept {
            pg_sys::check_for_interrupts!();
            rows.extend(count);
        }
        rows
    }

    /// The ids of the band rows `rows` ([`BandHeap::nearest`] under the same snapshot), in
    /// order; a row no longer there is left out.
    pub(super) fn ids(&self, rows: &[NearRow]) -> Vec<(Id, usize)> {
        let mut ids = Vec::with_capacity(rows.len());
        // SAFETY: as `nearest`; each TID names a tuple that scan saw under the active snapshot
        // (or, of format 1, the first of its HOT chain), which keeps it from being pruned. The relation is locked for the fetches and the
        // slot released at the end (an error releases both with the transaction); the id is
        // read while the slot holds the tuple, as its column's type.
        unsafe {
            let heap = pg_sys::table_open(self.table, pg_sys::AccessShareLock as i32);
            let slot = pg_sys::table_slot_create(heap, ptr::null_mut());
            let i = self.id as usize - 1;
            let column_type = compat::attributes((*heap).rd_att)[i].atttypid;
            // (format 1's TIDs are its index entries': the first of a HOT chain, followed as
            // an index scan follows it; format 2's are the versions its scan saw)
            let chains = match self.read {
                SketchRead::FirstBand { .. } => pg_sys::table_index_fetch_begin(heap),
                SketchRead::Heap { .. } => ptr::null_mut(),
            };
            for &row in rows {
                pg_sys::check_for_interrupts!();
                let mut tid = row.tid();
                let snapshot = pg_sys::GetActiveSnapshot();
                let found = if chains.is_null() {
                    pg_sys::table_tuple_fetch_row_version(heap, &mut tid, snapshot, slot)
                } else {
                    let (mut call_again, mut all_dead) = (false, false);
                    pg_sys::table_index_fetch_tuple(
                        chains,
                        &mut tid,
                        snapshot,
                        slot,
                        &mut call_again,
                        &mut all_dead,
                    )
                };
                if !found {
                    continue;
                }
                pg_sys::slot_getsomeattrs_int(slot, i32::from(self.id));
                if !*(*slot).tts_isnull.add(i) {
                    let datum = *(*slot).tts_values.add(i);
                    ids.push((self.key.id(datum, column_type), row.differing()));
                }
            }
            if !chains.is_null() {
                pg_sys::table_index_fetch_end(chains);
            }
            pg_sys::ExecDropSingleTupleTableSlot(slot);
            pg_sys::table_close(heap, pg_sys::NoLock as i32);
        }
        ids
    }
}

/// [`BandHeap::nearest`] of format 2: `keep(sketch, tid, id)` for every band row of `table`
/// the active snapshot sees, read as a sequential scan reads them.
///
/// # Safety
/// After [`BandIndex::usable`]; `columns` are the attribute numbers of `id` and of `sketch1`
/// and `sketch2`, int8 columns of `table`.
unsafe fn read_heap(
    table: pg_sys::Oid,
    columns: [i16; 3],
    keep: &mut impl FnMut([u64; 2], &pg_sys::ItemPointerData, pg_sys::Datum),
) {
    let last = columns.iter().copied().max().unwrap_or(0);
    // SAFETY: per the contract; the relation is locked for the scan, and the scan and slot
    // are released at the end (an error releases them with the transaction). A slot's values
    // are read while it holds the tuple.
    unsafe {
        let heap = pg_sys::table_open(table, pg_sys::AccessShareLock as i32);
        let slot = pg_sys::table_slot_create(heap, ptr::null_mut());
        let scan = pg_sys::table_beginscan(heap, pg_sys::GetActiveSnapshot(), 0, ptr::null_mut());
        while pg_sys::table_scan_getnextslot(
            scan,
            pg_sys::ScanDirection::ForwardScanDirection,
            slot,
        ) {
            pg_sys::check_for_interrupts!();
            pg_sys::slot_getsomeattrs_int(slot, i32::from(last));
            let value = |attnum: i16| {
                let i = attnum as usize - 1;
                (!*(*slot).tts_isnull.add(i)).then(|| *(*slot).tts_values.add(i))
            };
            if let [Some(id), Some(s1), Some(s2)] = columns.map(value) {
                keep([s1.value() as u64, s2.value() as u64], &(*slot).tts_tid, id);
            }
        }
        pg_sys::table_endscan(scan);
        pg_sys::ExecDropSingleTupleTableSlot(slot);
        pg_sys::table_close(heap, pg_sys::NoLock as i32);
    }
}

/// [`BandHeap::nearest`] of format 1: `keep(sketch, tid, id)` for every entry of the first
/// band's keys in `index` whose band row the active snapshot sees, read as an index-only scan
/// reads them (the heap only where the page is not all-visible); `tid` is the entry's.
///
/// # Safety
/// After [`BandIndex::usable`]; `index` is a band table's B-tree led by `key` (int8) whose
/// columns `columns` are `id` and the int8 `sketch1` and `sketch2`.
unsafe fn read_first_band(
    index: &DirectIndex,
    columns: [usize; 3],
    keep: &mut impl FnMut([u64; 2], &pg_sys::ItemPointerData, pg_sys::Datum),
) {
    let keys = keys_of_band(0);
    let bound = |strategy, proc: u32, value: u64| {
        let value = pg_sys::Datum::from(value as i64);
        first_column_key(strategy, pg_sys::InvalidOid, pg_sys::Oid::from(proc), value)
    };
    let bounds = [
        bound(
            pg_sys::BTGreaterEqualStrategyNumber,
            pg_sys::F_INT8GE,
            *keys.start(),
        ),
        bound(
            pg_sys::BTLessEqualStrategyNumber,
            pg_sys::F_INT8LE,
            *keys.end(),
        ),
    ];
    let mut reader = IndexOnly::new();
    // SAFETY: per the contract; the scan wants index tuples.
    unsafe {
        let snapshot = pg_sys::GetActiveSnapshot();
        index.scan_by(snapshot, true, [bounds], |scan, heap, slot| {
            reader.entries(scan, heap, slot, |values, nulls, tid, row| {
                let [id, s1, s2] = columns;
                if !nulls[id] && !nulls[s1] && !nulls[s2] && row() != EntryRow::Gone {
                    let sketch = [values[s1].value() as u64, values[s2].value() as u64];
                    keep(sketch, tid, values[id]);
                }
            });
        });
    }
    reader.end();
}

/// The equality of a band key column (int8).
fn int8_equality() -> Equality {
    Equality {
        proc: pg_sys::Oid::from(pg_sys::F_INT8EQ),
        collation: pg_sys::InvalidOid,
    }
}

/// [`BandIndex::scan_under`] of format 1: the entries of `direct` with each of `keys`, read as
/// an index-only scan reads them (the heap only where the page is not all-visible).
///
/// # Safety
/// As for [`BandIndex::scan_under`]; `direct` is a band table's `(key, ...)` B-tree whose
/// columns `columns` are `id` (of type `key`), `sketch1` and `sketch2`.
unsafe fn scan_per_band(
    direct: &DirectIndex,
    columns: [usize; 3],
    key: KeyType,
    snapshot: pg_sys::Snapshot,
    keys: &[i64],
    wanted: impl Fn(&Id) -> bool,
    mut row: impl FnMut(Id, [u64; 2], Option<pg_sys::TransactionId>),
) {
    let keys = keys.iter().map(|&key| pg_sys::Datum::from(key));
    let mut reader = IndexOnly::new();
    // SAFETY: per the contract; the scan wants index tuples. A dirty snapshot's xmin and xmax
    // describe the heap tuple fetched last.
    unsafe {
        direct.scan(snapshot, true, int8_equality(), keys, |scan, heap, slot| {
            reader.entries(scan, heap, slot, |values, nulls, _, entry_row| {
                let [id, s1, s2] = columns;
                if nulls[id] || nulls[s1] || nulls[s2] {
                    return;
                }
                let int = |i: usize| values[i].value() as u64;
                let (id, sketch) = (key.id(values[id], pg_sys::INT8OID), [int(s1), int(s2)]);
                if !wanted(&id) {
                    return;
                }
                let writer = match entry_row() {
                    EntryRow::AllVisible => None,
                    EntryRow::Fetched if !withdrawn(slot) => {
                        in_progress_write(snapshot).map(|(xid, _)| xid)
                    }
                    EntryRow::Fetched | EntryRow::Gone => return,
                };
                row(id, sketch, writer);
            });
        });
    }
    reader.end();
}

/// [`BandIndex::scan_under`] of format 2: for each band i, the rows that band i's B-tree finds
/// under `keys[i]`, read from the band table.
///
/// # Safety
/// As for [`BandIndex::scan_under`]; `bands[i]` is a B-tree led by band i's key column of a
/// band table whose attributes `columns` are `id` (of type `key`), `sketch1` and `sketch2`.
unsafe fn scan_per_row(
    bands: &[DirectIndex],
    columns: [i16; 3],
    key: KeyType,
    snapshot: pg_sys::Snapshot,
    keys: &[i64],
    wanted: impl Fn(&Id) -> bool,
    mut row: impl FnMut(Id, [u64; 2], Option<pg_sys::TransactionId>),
) {
    let last = columns.iter().copied().max().unwrap_or(0);
    // SAFETY: per the contract. A heap tuple is read while the slot holds it; a dirty
    // snapshot's xmin and xmax describe the heap tuple fetched last.
    unsafe {
        for (direct, &band_key) in bands.iter().zip(keys) {
            let keys = [pg_sys::Datum::from(band_key)];
            direct.scan(snapshot, false, int8_equality(), keys, |scan, _, slot| {
                loop {
                    pg_sys::check_for_interrupts!();
                    let tid = pg_sys::index_getnext_tid(
                        scan,
                        pg_sys::ScanDirection::ForwardScanDirection,
                    );
                    if tid.is_null() {
                        break;
                    }
                    if !pg_sys::index_fetch_heap(scan, slot) || withdrawn(slot) {
                        continue;
                    }
                    pg_sys::slot_getsomeattrs_int(slot, i32::from(last));
                    let value = |attnum: i16| {
                        let i = attnum as usize - 1;
                        (!*(*slot).tts_isnull.add(i)).then(|| *(*slot).tts_values.add(i))
                    };
                    let [id, s1, s2] = columns.map(value);
                    let (Some(id), Some(s1), Some(s2)) = (id, s1, s2) else {
                        continue;
                    };
                    let id = key.id(id, key.oid);
                    if !wanted(&id) {
                        continue;
                    }
                    let writer = in_progress_write(snapshot).map(|(xid, _)| xid);
                    row(id, [s1.value() as u64, s2.value() as u64], writer);
                }
            });
        }
    }
}

/// Whether the heap tuple in `slot` was deleted by the transaction that inserted it: a band row
/// a flag trigger wrote and took back while that transaction is still in progress (a dirty
/// snapshot shows a row inserted by a transaction in progress whatever its xmax says). Read
/// without the buffer lock: a delete not seen yet only makes the caller wait, as for a row
/// still there.
///
/// # Safety
/// `slot` holds a heap tuple.
unsafe fn withdrawn(slot: *mut pg_sys::TupleTableSlot) -> bool {
    // SAFETY: per the contract; the tuple header stays valid while the slot holds it.
    unsafe {
        let mut should_free = false;
        let tuple = pg_sys::ExecFetchSlotHeapTuple(slot, false, &mut should_free);
        let header = &*(*tuple).t_data;
        let mask = u32::from(header.t_infomask);
        let heap = header.t_choice.t_heap;
        let taken_back = mask & (pg_sys::HEAP_XMAX_INVALID | pg_sys::HEAP_XMAX_LOCK_ONLY) == 0
            && mask & pg_sys::HEAP_XMAX_IS_MULTI == 0
            && heap.t_xmax == heap.t_xmin;
        if should_free {
            pg_sys::heap_freetuple(tuple);
        }
        taken_back
    }
}

/// A dirty snapshot (`InitDirtySnapshot`): sees what is committed, what this transaction wrote,
/// and what transactions in progress wrote, and tells which of those it met last.
fn dirty_snapshot() -> pg_sys::SnapshotData {
    pg_sys::SnapshotData {
        snapshot_type: pg_sys::SnapshotType::SNAPSHOT_DIRTY,
        ..Default::default()
    }
}

/// The transaction in progress that inserted or is deleting the tuple a dirty `snapshot` saw
/// last, if any (`HeapTupleSatisfiesDirty` leaves it in the snapshot's xmin or xmax), and
/// whether it is inserting the tuple (rather than deleting it).
///
/// # Safety
/// `snapshot` points to a snapshot; its xmin and xmax are meaningful only if it is dirty.
unsafe fn in_progress_write(snapshot: pg_sys::Snapshot) -> Option<(pg_sys::TransactionId, bool)> {
    // SAFETY: per the contract.
    let snapshot = unsafe { &*snapshot };
    if snapshot.snapshot_type != pg_sys::SnapshotType::SNAPSHOT_DIRTY {
        return None;
    }
    let valid = |xid: pg_sys::TransactionId| xid != pg_sys::InvalidTransactionId;
    if valid(snapshot.xmin) {
        Some((snapshot.xmin, true))
    } else {
        valid(snapshot.xmax).then_some((snapshot.xmax, false))
    }
}

/// How a row a dirty fetch returned stands: who is still writing it, and whether the
/// transaction's snapshot sees it.
#[derive(Clone, Copy)]
pub(in crate::index) struct RowState {
    /// The transaction in progress that inserted or is deleting the row, if any.
    pub(in crate::index) writer: Option<pg_sys::TransactionId>,
    /// Whether `writer` is inserting the row (rather than deleting or updating it).
    pub(in crate::index) inserting: bool,
    /// Whether the row is this transaction's own or committed before its snapshot was taken.
    pub(in crate::index) in_snapshot: bool,
}

/// An indexed table's unique B-tree on its id column alone, or a partition's B-tree led by the
/// id column: where a lookup fetches the texts of the candidates it kept.
#[derive(Clone, Copy)]
pub(in crate::index) struct RowIndex {
    direct: DirectIndex,
    /// The id column's type.
    id_type: pg_sys::Oid,
    /// How the band table stores ids.
    key: KeyType,
    equality: Equality,
}

impl RowIndex {
    /// The fitting B-tree of `table`, if it has one: unique on the id alone, or, for a
    /// `partition` of the indexed table, any B-tree whose first column is the id.
    pub(super) fn find(
        table: pg_sys::Oid,
        id_column: &str,
        key: KeyType,
        partition: bool,
    ) -> Option<Self> {
        let id = attnum(table, id_column);
        // SAFETY: a catalog lookup of an existing attribute.
        let id_type = unsafe { pg_sys::get_atttype(table, id) };
        let (direct, equality) = DirectIndex::find(table, |attnums, keys, unique, first| {
            // integer keys come as int8 and are compared with the integer operators
            let integer = first.family == pg_sys::INTEGER_BTREE_FAM_OID;
            ((partition || unique && keys == 1)
                && attnums.first() == Some(&id)
                && id != 0
                && integer == key.integer)
                .then(|| first.equality())
                .flatten()
        })?;
        Some(RowIndex {
            direct,
            id_type,
            key,
            equality,
        })
    }

    pub(super) fn oid(&self) -> pg_sys::Oid {
        self.direct.index
    }

    /// Whether a lookup by the current user may read the table directly now.
    pub(super) fn readable(&self) -> bool {
        self.direct.readable()
    }

    /// Calls `row(id, text)` for each row with one of the ids `ids` and a text (read from
    /// `text`) that the active snapshot sees. Only after [`RowIndex::readable`].
    pub(super) fn fetch(&self, text: &TextSource, ids: &[Id], mut row: impl FnMut(&Id, &str)) {
        // SAFETY: after `readable`, under the active snapshot.
        unsafe {
            self.fetch_under(pg_sys::GetActiveSnapshot(), text, ids, |id, text, _| {
                row(id, text)
            })
        }
    }

    /// Calls `row(id, text, state)` for each row with one of the ids `ids` and a text that a
    /// dirty snapshot sees (see [`BandIndex::scan_dirty`]): a row another transaction is
    /// inserting, updating or deleting may come with more than one version.
    pub(in crate::index) fn fetch_dirty(
        &self,
        text: &TextSource,
        ids: &[Id],
        row: impl FnMut(&Id, &str, RowState),
    ) {
        let mut dirty = dirty_snapshot();
        // SAFETY: the dirty snapshot outlives the scan.
        unsafe { self.fetch_under(&mut dirty, text, ids, row) }
    }

    /// The fetches of [`RowIndex::fetch`] and [`RowIndex::fetch_dirty`].
    ///
    /// # Safety
    /// `snapshot` is the active snapshot (after `readable`) or a dirty snapshot, and outlives
    /// the call.
    unsafe fn fetch_under(
        &self,
        snapshot: pg_sys::Snapshot,
        text: &TextSource,
        ids: &[Id],
        mut row: impl FnMut(&Id, &str, RowState),
    ) {
        // an integer id that does not fit the column's type is no row's
        let fits = |id: &&Id| match (self.id_type, id) {
            (pg_sys::INT2OID, Id::Int(v)) => i16::try_from(*v).is_ok(),
            (pg_sys::INT4OID, Id::Int(v)) => i32::try_from(*v).is_ok(),
            _ => true,
        };
        let wanted: Vec<&Id> = ids.iter().filter(fits).collect();
        // detoasted texts are freed row by row
        let mut texts = PgMemoryContexts::new("pg_minhash candidate texts");
        let mut next = wanted.iter();
        let mut reader = None;
        // SAFETY: per the contract; the index's first column is the id, compared by
        // `self.equality` with datums of its operator class's input type: the same bits for
        // int2, int4 and int8 alike, the column's own type otherwise. The slot holds a heap
        // tuple of the table while its header is read.
        unsafe {
            self.direct.scan(
                snapshot,
                false,
                self.equality,
                wanted.iter().map(|id| self.key.datum(id)),
                |scan, heap, slot| {
                    let id = *next.next().expect("one scan per id");
                    let reader: &TextReader = reader
                        .get_or_insert_with(|| text.reader(self.direct.table, (*heap).rd_att));
                    while pg_sys::index_getnext_slot(
                        scan,
                        pg_sys::ScanDirection::ForwardScanDirection,
                        slot,
                    ) {
                        pg_sys::check_for_interrupts!();
                        let write = in_progress_write(snapshot);
                        let dirty =
                            (*snapshot).snapshot_type == pg_sys::SnapshotType::SNAPSHOT_DIRTY;
                        let state = RowState {
                            writer: write.map(|(xid, _)| xid),
                            inserting: write.is_some_and(|(_, inserting)| inserting),
                            in_snapshot: !dirty || in_snapshot(slot),
                        };
                        texts.switch_to(|_| {
                            if let Some(text) = reader.slot_text(slot) {
                                row(id, utf8(text), state);
                            }
                        });
                        texts.reset();
                    }
                },
            );
        }
    }
}

/// Whether the row in `slot` (found by a snapshot that sees it) is this transaction's own or
/// was committed before the active snapshot was taken (under REPEATABLE READ and SERIALIZABLE,
/// the transaction's snapshot).
///
/// # Safety
/// `slot` holds a heap tuple, inside a transaction.
unsafe fn in_snapshot(slot: *mut pg_sys::TupleTableSlot) -> bool {
    // SAFETY: per the contract; the tuple header stays valid while the slot holds it.
    unsafe {
        let mut should_free = false;
        let tuple = pg_sys::ExecFetchSlotHeapTuple(slot, false, &mut should_free);
        let header = &*(*tuple).t_data;
        let xmin = header.t_choice.t_heap.t_xmin;
        let frozen =
            u32::from(header.t_infomask) & pg_sys::HEAP_XMIN_FROZEN == pg_sys::HEAP_XMIN_FROZEN;
        let seen = frozen
            || pg_sys::TransactionIdIsCurrentTransactionId(xmin)
            || !pg_sys::XidInMVCCSnapshot(xmin, pg_sys::GetActiveSnapshot());
        if should_free {
            pg_sys::heap_freetuple(tuple);
        }
        seen
    }
}
