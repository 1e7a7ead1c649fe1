//! A table's sketch store as a lookup reads it: an index of access method `minhash_sketch`
//! (`crate::am`) on `minhash_sketch(text, ngram, unit)`, the 64-byte fine sketch
//! (`core::fine`) of every row version, packed many to a page. A lookup that must consider
//! every row (`k`, a threshold below the index's) compares the text's sketch with every entry
//! at memory speed, and fetches by TID, under its snapshot, only the rows that may reach its
//! bar. PostgreSQL keeps the store exact under every write, as any index: an entry per row
//! version, dead ones removed by VACUUM; the fetch sees what the snapshot sees, following HOT
//! chains, so a stale entry finds nothing and a reused TID another row (verified as itself).

use std::ffi::CStr;

use pgrx::prelude::*;
use pgrx::{is_a, PgList, PgMemoryContexts};

use crate::am::read::{fetch_visible, HeapFetch};
use crate::core::fine::{
    equal_slots_each, fine_sketch, FineSketch, Shortlist, FINE_BYTES, FINE_SLOTS,
};
use crate::core::params::Shingling;
use crate::core::signature::EMPTY_SLOT;
use crate::pg::backend::{interrupts, SIGNER};
use crate::pg::names::{qualified_name, quote_ident, quote_literal};
use crate::pg::tuple::{attnum, varlena_bytes};

use super::btree::caller_reads_whole;
use crate::index::def::row_id::{Id, KeyType};
use crate::index::def::text_source::{utf8, TextSource};
use crate::index::run::spi::spi_failed;

/// The fine sketch of `doc` (None for a text without shingles, which no store holds).
pub(super) fn text_sketch(doc: &str, shingling: Shingling) -> Option<FineSketch> {
    let signature =
        SIGNER.with_borrow_mut(|s| s.signature(doc, FINE_SLOTS, shingling, &mut interrupts));
    (!signature.iter().all(|&v| v == EMPTY_SLOT)).then(|| fine_sketch(&signature))
}

/// The fine sketch of `doc` with `ngram`-grams of `unit`, what a sketch store holds of a row
/// (`CREATE INDEX ... USING minhash_sketch (minhash_sketch(body, 5, 'char'))`); NULL for a
/// text without shingles.
#[pg_extern(immutable, strict, parallel_safe)]
fn minhash_sketch(
    doc: &str,
    ngram: default!(i32, 5),
    unit: default!(&str, "'char'"),
) -> Option<Vec<u8>> {
    use crate::pg::error::OrRaise;
    let shingling = Shingling::new(ngram, unit).or_raise();
    text_sketch(doc, shingling).map(|s| s.to_vec())
}

/// A row version in a store: its table's place among the store's parts and its TID, packed as
/// `part << 48 | block << 16 | offset`, so that sorting rows sorts them by table and page.
pub(super) type StoreRow = u64;

fn store_row(part: usize, tid: &pg_sys::ItemPointerData) -> StoreRow {
    let block = (u32::from(tid.ip_blkid.bi_hi) << 16) | u32::from(tid.ip_blkid.bi_lo);
    ((part as u64) << 48) | (u64::from(block) << 16) | u64::from(tid.ip_posid)
}

fn row_tid(row: StoreRow) -> (usize, pg_sys::ItemPointerData) {
    let block = (row >> 16) as u32;
    let tid = pg_sys::ItemPointerData {
        ip_blkid: pg_sys::BlockIdData {
            bi_hi: (block >> 16) as u16,
            bi_lo: block as u16,
        },
        ip_posid: row as u16,
    };
    ((row >> 48) as usize, tid)
}

/// One table of a store: the indexed table, or one leaf partition of it.
#[derive(Clone, Copy)]
struct Part {
    table: pg_sys::Oid,
    index: pg_sys::Oid,
    /// Of an index made while HOT chains were broken (`indcheckxmin`), the transaction that
    /// made it: snapshots older than it may not use it (as the planner decides).
    check_xmin: Option<pg_sys::TransactionId>,
}

/// The sketch store of an index's table: one store index per leaf table.
pub(in crate::index) struct SketchStore {
    parts: Vec<Part>,
}

impl SketchStore {
    /// The store of the tables `members` (the indexed table, then its partition tree) whose
    /// rows have the text `text` shingled as `shingling`: a valid `minhash_sketch` index on
    /// `minhash_sketch(<text column>, ngram, unit)` of each leaf, if every leaf has one.
    pub(super) fn find(
        members: &[pg_sys::Oid],
        text: &TextSource,
        shingling: Shingling,
    ) -> Option<SketchStore> {
        let TextSource::Column(column) = text else {
            // (a text expression's store would have to compute the expression as every
            // writer; an index expression must be immutable)
            return None;
        };
        let am = store_am()?;
        let leaves = members.iter().copied().filter(|&m| {
            // SAFETY: as above.
            unsafe { pg_sys::get_rel_relkind(m) == pg_sys::RELKIND_RELATION as std::ffi::c_char }
        });
        let parts = leaves
            .map(|leaf| find_part(leaf, am, column, shingling))
            .collect::<Option<Vec<Part>>>()?;
        (!parts.is_empty()).then_some(SketchStore { parts })
    }

    /// Whether a lookup by the current user may read the store now: as for the direct reads
    /// of `btree` (not SERIALIZABLE, a snapshot active, table-level SELECT on every table and
    /// no row-level security), and every store index usable by the active snapshot.
    pub(super) fn readable(&self) -> bool {
        // SAFETY: reads of the transaction's state and privilege checks by OID.
        unsafe {
            if pg_sys::XactIsoLevel == pg_sys::XACT_SERIALIZABLE as i32
                || !pg_sys::ActiveSnapshotSet()
            {
                return false;
            }
            self.parts.iter().all(|part| {
                part.check_xmin
                    .is_none_or(|xmin| pg_sys::TransactionIdPrecedes(xmin, pg_sys::TransactionXmin))
                    && caller_reads_whole(part.table)
            })
        }
    }

    /// The store indexes, for `minhash_explain`.
    pub(super) fn indexes(&self) -> Vec<pg_sys::Oid> {
        self.parts.iter().map(|p| p.index).collect()
    }

    /// Offers every entry to `list` with the slots its sketch agrees in with `probe`; returns
    /// the entries read. Only after [`SketchStore::readable`].
    pub(super) fn sweep(&self, probe: &FineSketch, list: &mut Shortlist<StoreRow>) -> usize {
        let mut counts = Vec::new();
        let mut read = 0;
        for (i, part) in self.parts.iter().enumerate() {
            // SAFETY: the index is locked as a lookup's reads are (kept until the transaction
            // ends); its pages are read under their buffer locks by `crate::am`.
            unsafe {
                let index = pg_sys::index_open(part.index, pg_sys::AccessShareLock as i32);
                crate::am::read::scan_entries(index, |tids, sketches, width| {
                    // (the store's function gives sketches of one width)
                    if width != FINE_BYTES {
                        return;
                    }
                    equal_slots_each(probe, sketches, &mut counts);
                    read += tids.len();
                    list.offer(&counts, |j| store_row(i, &tids[j]));
                });
                pg_sys::index_close(index, pg_sys::NoLock as i32);
            }
        }
        read
    }

    /// Calls `row(id, text)` for each of `rows` (sorted) that the active snapshot sees (the
    /// visible version of its HOT chain) and has a text. Only after [`SketchStore::readable`].
    pub(super) fn fetch(
        &self,
        text: &TextSource,
        (id_column, key): (&str, KeyType),
        rows: &[StoreRow],
        mut row: impl FnMut(&Id, &str),
    ) {
        let mut texts = PgMemoryContexts::new("pg_minhash store texts");
        let mut at = 0;
        while at < rows.len() {
            let (part, _) = row_tid(rows[at]);
            let end = at + rows[at..].partition_point(|r| row_tid(*r).0 == part);
            let table = self.parts[part].table;
            // SAFETY: the table is locked (the lookup's locks); every TID comes from its
            // store index and is fetched under the active snapshot through the table access
            // method, as an index scan does (`crate::am::read::fetch_visible`); the row is read
            // from the fetch's slot, which keeps its page pinned until the next fetch.
            unsafe {
                let heap = pg_sys::table_open(table, pg_sys::AccessShareLock as i32);
                let reader = text.reader(table, (*heap).rd_att);
                let id_attno = attnum(table, id_column);
                let id_type = pg_sys::get_atttype(table, id_attno);
                let snapshot = pg_sys::GetActiveSnapshot();
                let mut fetch = HeapFetch::begin(heap);
                for &r in &rows[at..end] {
                    pg_sys::check_for_interrupts!();
                    if !fetch_visible(&mut fetch, row_tid(r).1, snapshot) {
                        continue;
                    }
                    texts.switch_to(|_| {
                        let mut null = false;
                        let datum = pg_sys::slot_getattr(fetch.slot, id_attno.into(), &mut null);
                        if null {
                            return;
                        }
                        let id = key.id(datum, id_type);
                        if let Some(bytes) = reader.slot_text(fetch.slot) {
                            row(&id, utf8(bytes));
                        }
                    });
                    texts.reset();
                }
                fetch.end();
                drop(reader);
                pg_sys::table_close(heap, pg_sys::NoLock as i32);
            }
            at = end;
        }
    }
}

/// The store index of the leaf table `leaf` for text column `column`, if it has one.
fn find_part(
    leaf: pg_sys::Oid,
    am: pg_sys::Oid,
    column: &str,
    shingling: Shingling,
) -> Option<Part> {
    let wanted = Sketched {
        column: attnum(leaf, column),
        ngram: shingling.ngram,
        unit: shingling.unit.name().to_owned(),
    };
    if wanted.column <= 0 {
        return None;
    }
    store_indexes(leaf, am, true)
        .into_iter()
        .find(|(_, sketched, _)| *sketched == wanted)
        .map(|(index, _, check_xmin)| Part {
            table: leaf,
            index,
            check_xmin,
        })
}

/// The store indexes of `table` (of access method `am`, on `minhash_sketch` of a column),
/// with what they hold and, of one made while HOT chains were broken, its transaction; with
/// `valid`, only those valid and ready for every write. None of a table of another access
/// method than heap (the one the store is made and tested for).
fn store_indexes(
    table: pg_sys::Oid,
    am: pg_sys::Oid,
    valid: bool,
) -> Vec<(pg_sys::Oid, Sketched, Option<pg_sys::TransactionId>)> {
    // SAFETY: relations are opened with a lock (kept until the transaction ends, as the
    // planner does) and closed again; the index list, pg_index row and expressions are read
    // while their relation is open.
    unsafe {
        let heap = pg_sys::try_table_open(table, pg_sys::AccessShareLock as i32);
        if heap.is_null() {
            return Vec::new();
        }
        let class = &*(*heap).rd_rel;
        if class.relkind == pg_sys::RELKIND_RELATION as std::ffi::c_char
            && class.relam != pg_sys::HEAP_TABLE_AM_OID
        {
            pg_sys::table_close(heap, pg_sys::NoLock as i32);
            return Vec::new();
        }
        let indexes = pg_sys::RelationGetIndexList(heap);
        let found = (0..pg_sys::list_length(indexes))
            .filter_map(|i| {
                let index = pg_sys::list_nth_oid(indexes, i);
                let rel = pg_sys::index_open(index, pg_sys::AccessShareLock as i32);
                let form = &*(*rel).rd_index;
                let fits = (*(*rel).rd_rel).relam == am
                    && (!valid || form.indisvalid && form.indisready && form.indislive)
                    && form.indnatts == 1
                    && pg_sys::RelationGetIndexPredicate(rel).is_null();
                let found = fits.then(|| sketched(rel)).flatten().map(|sketched| {
                    let check_xmin = form.indcheckxmin.then(|| {
                        let header = &*(*(*rel).rd_indextuple).t_data;
                        header.t_choice.t_heap.t_xmin
                    });
                    (index, sketched, check_xmin)
                });
                pg_sys::index_close(rel, pg_sys::NoLock as i32);
                found
            })
            .collect();
        pg_sys::table_close(heap, pg_sys::NoLock as i32);
        found
    }
}

/// The access method of sketch stores, if installed.
fn store_am() -> Option<pg_sys::Oid> {
    // SAFETY: a catalog lookup by name.
    let am = unsafe { pg_sys::get_am_oid(c"minhash_sketch".as_ptr(), true) };
    (am != pg_sys::InvalidOid).then_some(am)
}

/// Makes the store indexes of `tbl` (a table of this node, or a partitioned one: its index
/// goes to every partition) those its minhash indexes `wanted` need, as `(text column, ngram,
/// unit)`: creates each missing one (`CREATE INDEX ... USING minhash_sketch
/// (<schema>.minhash_sketch(column, ngram, unit))`) and drops each of this form that none
/// needs. Runs as the caller, who owns the table (the index functions checked).
pub(in crate::index) fn sync_stores(
    tbl: pg_sys::Oid,
    schema: &str,
    wanted: &[(String, Shingling)],
) {
    let Some(am) = store_am() else {
        return;
    };
    let mut distinct: Vec<Sketched> = Vec::new();
    for (column, shingling) in wanted {
        let sketched = Sketched {
            column: attnum(tbl, column),
            ngram: shingling.ngram,
            unit: shingling.unit.name().to_owned(),
        };
        if sketched.column > 0 && !distinct.contains(&sketched) {
            distinct.push(sketched);
        }
    }
    let wanted = distinct;
    let have = store_indexes(tbl, am, false);
    let mut statements = Vec::new();
    for (index, sketched, _) in &have {
        if !wanted.contains(sketched) {
            statements.push(format!("DROP INDEX {}", qualified_name(*index)));
        }
    }
    for sketched in &wanted {
        if have.iter().any(|(_, s, _)| s == sketched) {
            continue;
        }
        // SAFETY: a catalog lookup of an existing attribute; a palloc'd name.
        let column =
            unsafe { CStr::from_ptr(pg_sys::get_attname(tbl, sketched.column, false)).to_owned() };
        statements.push(format!(
            "CREATE INDEX ON {} USING minhash_sketch ({schema}.minhash_sketch({}, {}, {}))",
            qualified_name(tbl),
            quote_ident(&column),
            sketched.ngram,
            quote_literal(&sketched.unit)
        ));
    }
    for sql in statements {
        Spi::run(&sql).unwrap_or_else(|e| spi_failed(e));
    }
}

/// What a store index holds the sketches of: `minhash_sketch(<column>, ngram, unit)`.
#[derive(Clone, PartialEq, Eq)]
struct Sketched {
    column: i16,
    ngram: usize,
    unit: String,
}

/// What the index `rel` holds the sketches of, if its expression is exactly
/// `minhash_sketch(<column>, <int4 constant>, <text constant>)` of this library's function.
///
/// # Safety
/// `rel` is an open index.
unsafe fn sketched(rel: pg_sys::Relation) -> Option<Sketched> {
    // SAFETY: per the contract: nodes are inspected by tag before they are cast.
    unsafe {
        let exprs = PgList::<pg_sys::Node>::from_pg(pg_sys::RelationGetIndexExpressions(rel));
        let node = exprs.get_ptr(0).filter(|_| exprs.len() == 1)?;
        if !is_a(node, pg_sys::NodeTag::T_FuncExpr) {
            return None;
        }
        let func = &*(node as *mut pg_sys::FuncExpr);
        if !is_sketch_function(func.funcid) {
            return None;
        }
        let args = PgList::<pg_sys::Node>::from_pg(func.args);
        if args.len() != 3 {
            return None;
        }
        let mut text = args.get_ptr(0)?;
        // (a varchar column is relabeled as text)
        if is_a(text, pg_sys::NodeTag::T_RelabelType) {
            text = (*(text as *mut pg_sys::RelabelType)).arg.cast();
        }
        if !is_a(text, pg_sys::NodeTag::T_Var) {
            return None;
        }
        let var = &*(text as *mut pg_sys::Var);
        let constant = |n: usize, typid: pg_sys::Oid| {
            let node = args.get_ptr(n)?;
            if !is_a(node, pg_sys::NodeTag::T_Const) {
                return None;
            }
            let c = &*(node as *mut pg_sys::Const);
            (c.consttype == typid && !c.constisnull).then_some(c.constvalue)
        };
        let ngram = constant(1, pg_sys::INT4OID)?.value() as i32;
        let unit = varlena_bytes(constant(2, pg_sys::TEXTOID)?);
        (var.varlevelsup == 0 && ngram > 0).then(|| Sketched {
            column: var.varattno,
            ngram: ngram as usize,
            unit: String::from_utf8_lossy(unit).into_owned(),
        })
    }
}

/// Whether `funcid` is this library's `minhash_sketch`: the C function it calls is ours (a
/// function of another schema or language by the same name is not).
fn is_sketch_function(funcid: pg_sys::Oid) -> bool {
    // SAFETY: fmgr_info looks the function up by OID (an error for a missing one, which an
    // index's expression cannot name); only its address is compared.
    unsafe {
        let mut info: pg_sys::FmgrInfo = std::mem::zeroed();
        pg_sys::fmgr_info(funcid, &mut info);
        // (the wrapper is an exported, unmangled symbol: one address, the one `fmgr_info`
        // resolves by its name)
        info.fn_addr.is_some_and(|f| {
            std::ptr::fn_addr_eq(
                f,
                minhash_sketch_wrapper as unsafe extern "C-unwind" fn(_) -> _,
            )
        })
    }
}
