//! The server calls whose form differs between the PostgreSQL versions pg_minhash builds for
//! (15, 16, 17 and 18, one Cargo feature each): every version gate of the crate is in this
//! module.

use pgrx::pg_sys;

/// The attributes of the tuple descriptor `desc`, `natts` of them, dropped ones included (at
/// their positions: attribute number = index + 1).
///
/// PostgreSQL 18 keeps a `CompactAttribute` array first and the full `FormData_pg_attribute`
/// array right after it (its `TupleDescAttr`); earlier versions keep only the full array.
///
/// # Safety
/// `desc` is a valid tuple descriptor that outlives the returned slice and is not changed
/// while the slice is in use.
pub(crate) unsafe fn attributes<'a>(
    desc: pg_sys::TupleDesc,
) -> &'a [pg_sys::FormData_pg_attribute] {
    // SAFETY: by the caller's contract `desc` is valid; `natts` counts the attributes.
    let natts = unsafe { (*desc).natts } as usize;
    #[cfg(any(feature = "pg15", feature = "pg16", feature = "pg17"))]
    // SAFETY: the `attrs` flexible array of a valid descriptor holds `natts` attributes.
    let attributes = unsafe { (*desc).attrs.as_slice(natts) };
    #[cfg(feature = "pg18")]
    // SAFETY: as TupleDescAttr in PostgreSQL 18's tupdesc.h: `natts` full attributes start
    // right after the `natts` compact ones, in the same allocation, suitably aligned.
    let attributes = unsafe {
        let first = (*desc)
            .compact_attrs
            .as_ptr()
            .add(natts)
            .cast::<pg_sys::FormData_pg_attribute>();
        std::slice::from_raw_parts(first, natts)
    };
    attributes
}

/// `index_beginscan` with no instrumentation (PostgreSQL 18 takes an
/// `IndexScanInstrumentation` pointer, which NULL leaves out, as the catalog scans do).
///
/// # Safety
/// As `index_beginscan`: `heap` and `index` are open and locked, `snapshot` lives until the
/// scan ends.
pub(crate) unsafe fn index_beginscan(
    heap: pg_sys::Relation,
    index: pg_sys::Relation,
    snapshot: pg_sys::Snapshot,
    nkeys: i32,
    norderbys: i32,
) -> pg_sys::IndexScanDesc {
    #[cfg(any(feature = "pg15", feature = "pg16", feature = "pg17"))]
    // SAFETY: by the caller's contract.
    let scan = unsafe { pg_sys::index_beginscan(heap, index, snapshot, nkeys, norderbys) };
    #[cfg(feature = "pg18")]
    // SAFETY: by the caller's contract; a NULL instrumentation pointer is never written to.
    let scan = unsafe {
        pg_sys::index_beginscan(
            heap,
            index,
            snapshot,
            std::ptr::null_mut(),
            nkeys,
            norderbys,
        )
    };
    scan
}

/// VACUUM's pause between pages of an index (`vacuum_delay_point`; PostgreSQL 18 asks whether
/// ANALYZE is the caller: it is not).
pub(crate) fn vacuum_delay_point() {
    #[cfg(any(feature = "pg15", feature = "pg16", feature = "pg17"))]
    // SAFETY: a backend function VACUUM's callbacks call between pages.
    unsafe {
        pg_sys::vacuum_delay_point()
    };
    #[cfg(feature = "pg18")]
    // SAFETY: as above.
    unsafe {
        pg_sys::vacuum_delay_point(false)
    };
}

/// PostgreSQL 18's virtual generated columns: the index's triggers would see no value in one,
/// so a text column that is one is refused, when the index is made and by a later ALTER TABLE.
#[cfg(all(feature = "pg18", any(test, feature = "pg_test")))]
#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    /// "SQLSTATE: message" of the error `sql` raises, or "ok".
    fn outcome(sql: &str) -> String {
        Spi::get_one_with_args::<String>("SELECT pg_temp.outcome($1)", &[sql.into()])
            .unwrap()
            .unwrap()
    }

    #[pg_test]
    fn virtual_generated_text_column_is_refused() {
        Spi::run("SET LOCAL client_min_messages = warning").unwrap();
        Spi::run(
            "CREATE FUNCTION pg_temp.outcome(q text) RETURNS text LANGUAGE plpgsql AS $$
             BEGIN EXECUTE q; RETURN 'ok';
             EXCEPTION WHEN others THEN RETURN SQLSTATE || ': ' || SQLERRM; END $$",
        )
        .unwrap();
        Spi::run(
            "CREATE TABLE public.gen (id bigint PRIMARY KEY, raw text,
                                      v text GENERATED ALWAYS AS (lower(raw)) VIRTUAL,
                                      s text GENERATED ALWAYS AS (lower(raw)) STORED);
             INSERT INTO public.gen (id, raw) SELECT g, 'Row ' || g || ' ' || md5(g::text)
             FROM generate_series(1, 50) g",
        )
        .unwrap();
        assert_eq!(
            outcome("SELECT minhash_index_create('public.gen', 'id', 'v')"),
            "0A000: text column \"v\" of table public.gen is a virtual generated column"
        );
        // a stored one is kept exact through writes
        assert_eq!(
            outcome("SELECT minhash_index_create('public.gen', 'id', 's')"),
            "ok"
        );
        Spi::run(
            "INSERT INTO public.gen (id, raw) SELECT g, 'Row ' || g FROM generate_series(51, 60) g;
             UPDATE public.gen SET raw = raw || ' edited' WHERE id % 7 = 0;
             DELETE FROM public.gen WHERE id % 11 = 0",
        )
        .unwrap();
        assert_eq!(
            Spi::get_one::<String>(
                "SELECT missing || '/' || orphaned FROM minhash_index_check('public.gen')"
            )
            .unwrap()
            .as_deref(),
            Some("0/0")
        );
        // replacing the indexed column by a virtual generated one of the same name
        assert_eq!(
            outcome(
                "ALTER TABLE public.gen DROP COLUMN s,
                 ADD COLUMN s text GENERATED ALWAYS AS (upper(raw)) VIRTUAL"
            ),
            "2BP01: the minhash index of table public.gen reads column \"s\""
        );
    }
}

/// `build_attrmap_by_name`: for each attribute of `outdesc`, the number of the attribute of
/// `indesc` with its name (PostgreSQL 16 added `missing_ok`, false here: a missing column is an
/// error, as before).
///
/// # Safety
/// Both descriptors are valid; the map is allocated in the current memory context.
pub(crate) unsafe fn attr_map_by_name(
    indesc: pg_sys::TupleDesc,
    outdesc: pg_sys::TupleDesc,
) -> *mut pg_sys::AttrMap {
    #[cfg(feature = "pg15")]
    // SAFETY: per the contract.
    let map = unsafe { pg_sys::build_attrmap_by_name(indesc, outdesc) };
    #[cfg(any(feature = "pg16", feature = "pg17", feature = "pg18"))]
    // SAFETY: per the contract.
    let map = unsafe { pg_sys::build_attrmap_by_name(indesc, outdesc, false) };
    map
}

/// Pins `block` of the main fork of `rel` if it is still in the buffer `recent` (a buffer this
/// backend read it into before), without a lookup in the shared buffer table; false if not.
///
/// # Safety
/// `rel` is an open relation; `recent` is a buffer this backend was given by the buffer
/// manager (a valid buffer number, shared or local).
pub(crate) unsafe fn read_recent_buffer(
    rel: pg_sys::Relation,
    block: pg_sys::BlockNumber,
    recent: pg_sys::Buffer,
) -> bool {
    #[cfg(feature = "pg15")]
    // SAFETY: per the contract; the call compares the buffer's tag before it keeps the pin.
    let pinned = unsafe {
        pg_sys::ReadRecentBuffer(
            (*rel).rd_node,
            pg_sys::ForkNumber::MAIN_FORKNUM,
            block,
            recent,
        )
    };
    #[cfg(any(feature = "pg16", feature = "pg17", feature = "pg18"))]
    // SAFETY: as above.
    let pinned = unsafe {
        pg_sys::ReadRecentBuffer(
            (*rel).rd_locator,
            pg_sys::ForkNumber::MAIN_FORKNUM,
            block,
            recent,
        )
    };
    pinned
}
