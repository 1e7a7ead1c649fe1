//! Keeping an index exact through `pg_dump` and `pg_restore`.
//!
//! A dump holds an indexed table's rows, its band table's rows (computed under the dumped
//! catalog row, from the same snapshot) and the catalog row, as three separate `COPY`s whose
//! order follows the names. A full restore loads all three before it creates the triggers, so
//! the band rows arrive as they were. A data-only restore into an existing schema loads them
//! with the triggers in place (unless `--disable-triggers`): the sync triggers then index the
//! table's rows as they arrive, and the band table's `COPY` would add every band row a second
//! time. Its trigger `minhash_bands_load`, `BEFORE INSERT FOR EACH ROW`, decides once per
//! statement: rows written into a band table by SQL are kept only while the sync triggers
//! have not indexed its table (no catalog row yet, or rows in the table and none in the band
//! table); otherwise they are dropped, and the sync triggers' rows stand. The sync and flag
//! triggers' own `INSERT`s pass through it too, and it keeps their rows without deciding
//! anything ([`sync_writes`]). `minhash_index_create` and
//! `minhash_index_rebuild` fill the band table with it absent or disabled.

use std::cell::Cell;
use std::convert::Infallible;
use std::ffi::CStr;

use pgrx::heap_tuple::PgHeapTuple;
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;

use crate::pg::error::raise;
use crate::pg::names::qualified_name;

use super::extension::Extension;
use crate::index::run::owner::as_owner;
use crate::index::run::spi::spi_failed;

/// The band table's trigger and its function.
const LOAD_TRIGGER: &str = "minhash_bands_load";
const LOAD_FUNCTION: &str = "_minhash_band_load";

/// The sync trigger whose presence marks a table as indexed in its schema.
pub(super) const SYNC_INSERT_TRIGGER: &str = "minhash_sync_insert";
pub(in crate::index) const SYNC_FUNCTION: &str = "_minhash_sync";

/// `tgtype` of a `BEFORE INSERT FOR EACH ROW` trigger (`pg_trigger.h`).
const BEFORE_INSERT_ROW: i16 =
    (pg_sys::TRIGGER_TYPE_ROW | pg_sys::TRIGGER_TYPE_BEFORE | pg_sys::TRIGGER_TYPE_INSERT) as i16;

/// A statement loading a band table: (band table, statement start, command id).
type Statement = (pg_sys::Oid, i64, u32);

thread_local! {
    /// The band table the sync trigger is writing through SQL right now, if any: its load
    /// trigger keeps those rows (see [`sync_writes`]).
    static SYNC_WRITING: Cell<Option<pg_sys::Oid>> = const { Cell::new(None) };

    /// The decision of the statement running now, and whether its rows are kept.
    static DECISION: Cell<Option<(Statement, bool)>> = const { Cell::new(None) };
}

/// Trigger function of a band table's `minhash_bands_load` trigger (see the module
/// documentation): the new band row, or nothing.
// (created in schema minhash_internal by src/index/sql/catalog.sql)
#[pg_trigger(sql = false)]
fn _minhash_band_load<'a>(
    trigger: &'a PgTrigger<'a>,
) -> Result<Option<PgHeapTuple<'a, AllocatedByPostgres>>, Infallible> {
    let data = trigger.trigger_data();
    let event = data.tg_event;
    if event & pg_sys::TRIGGER_EVENT_TIMINGMASK != pg_sys::TRIGGER_EVENT_BEFORE
        || event & pg_sys::TRIGGER_EVENT_ROW == 0
        || event & pg_sys::TRIGGER_EVENT_OPMASK != pg_sys::TRIGGER_EVENT_INSERT
    {
        raise(
            PgSqlErrorCode::ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED,
            "_minhash_band_load() must be fired BEFORE INSERT FOR EACH ROW",
            None,
        );
    }
    // SAFETY: a trigger's relation is open while it fires; a statement's start and command id
    // are plain reads of the transaction state.
    let (band, owner, statement) = unsafe {
        let rel = data.tg_relation;
        (
            (*rel).rd_id,
            (*(*rel).rd_rel).relowner,
            (
                (*rel).rd_id,
                pg_sys::GetCurrentStatementStartTimestamp(),
                pg_sys::GetCurrentCommandId(false),
            ),
        )
    };
    if SYNC_WRITING.get() == Some(band) {
        return Ok(trigger.new());
    }
    let keep = match DECISION.get() {
        Some((key, keep)) if key == statement => keep,
        _ => {
            let ext = Extension::of_function(trigger.trigger().tgfoid);
            let keep = as_owner(owner, || keeps_loaded_rows(band, ext));
            DECISION.set(Some((statement, keep)));
            keep
        }
    };
    Ok(if keep { trigger.new() } else { None })
}

/// Runs `f`, in which the sync trigger writes band rows into `band` through SQL: its load
/// trigger keeps them.
pub(in crate::index) fn sync_writes<T>(band: pg_sys::Oid, f: impl FnOnce() -> T) -> T {
    struct Reset(Option<pg_sys::Oid>);
    impl Drop for Reset {
        fn drop(&mut self) {
            SYNC_WRITING.set(self.0);
        }
    }
    let _reset = Reset(SYNC_WRITING.replace(Some(band)));
    f()
}

/// Whether rows written into `band` by SQL are kept: unless the catalog of `ext` names it as
/// the band table of a table that the sync triggers have indexed.
fn keeps_loaded_rows(band: pg_sys::Oid, ext: Extension) -> bool {
    let schema = ext.quoted_schema();
    let tbl = Spi::get_one_with_args::<pg_sys::Oid>(
        &format!(
            "SELECT i.tbl::pg_catalog.oid FROM {schema}.minhash_indexes i
             WHERE i.band_table OPERATOR(pg_catalog.=) $1"
        ),
        &[band.into()],
    );
    let Ok(Some(tbl)) = tbl else {
        return true;
    };
    let (tbl, band) = (qualified_name(tbl), qualified_name(band));
    Spi::get_one::<bool>(&format!(
        "SELECT EXISTS (SELECT FROM {tbl}) AND NOT EXISTS (SELECT FROM {band})"
    ))
    .unwrap_or_else(|e| {
        raise(
            PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
            format!("reading the indexed table through SPI failed: {e}"),
            None,
        )
    })
    .unwrap_or(true)
}

/// Gives every band table of the catalog of schema `schema` (quoted) that lacks them its
/// dependencies on its table and on the extension: pg_dump carries neither (pg_depend is not
/// dumped), so a restore gets them back here. Only band tables whose owner is their table's,
/// and whose privileges the current user has (anyone else's are left for their owner's
/// restore); a Citus table's band table has none on its table (`_minhash_link_band_table`).
/// Called after rows are added to the catalog (a full or data-only restore copies them in) and
/// after ALTER TABLE on the catalog (pg_restore --disable-triggers enables its triggers again
/// after the copy).
pub(in crate::index) fn relink(schema: &str) {
    let unlinked = format!(
        "SELECT i.tbl::pg_catalog.oid, i.band_table::pg_catalog.oid
         FROM {schema}.minhash_indexes i
         JOIN pg_catalog.pg_class t ON t.oid OPERATOR(pg_catalog.=) i.tbl
         JOIN pg_catalog.pg_class b ON b.oid OPERATOR(pg_catalog.=) i.band_table
         WHERE b.relowner OPERATOR(pg_catalog.=) t.relowner
           AND pg_catalog.pg_has_role(t.relowner, 'USAGE')
           AND (minhash_internal._minhash_citus_table(i.tbl)).kind IS NULL
           AND NOT EXISTS (
                   SELECT FROM pg_catalog.pg_depend d
                   WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
                     AND d.objid OPERATOR(pg_catalog.=) i.band_table
                     AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
                     AND d.refobjid OPERATOR(pg_catalog.=) i.tbl)"
    );
    Spi::connect_mut(|client| {
        let links: Vec<(Option<pg_sys::Oid>, Option<pg_sys::Oid>)> = client
            .update(&unlinked, None, &[])?
            .map(|row| Ok((row.get::<pg_sys::Oid>(1)?, row.get::<pg_sys::Oid>(2)?)))
            .collect::<pgrx::spi::Result<_>>()?;
        for (tbl, band) in links {
            client.update(
                "SELECT minhash_internal._minhash_link_band_table(
                     $1::pg_catalog.regclass, $2::pg_catalog.regclass)",
                None,
                &[tbl.into(), band.into()],
            )?;
        }
        Ok(())
    })
    .unwrap_or_else(|e| spi_failed(e))
}

/// `minhash_internal._minhash_relink()`: [`relink`] for the catalog of this extension.
// (created in schema minhash_internal by src/index/sql/catalog.sql)
#[pg_extern(sql = false)]
fn _minhash_relink(fcinfo: pg_sys::FunctionCallInfo) {
    // SAFETY: the call's own `fcinfo`, its `flinfo` set by the function manager.
    let fn_oid = unsafe { (*(*fcinfo).flinfo).fn_oid };
    relink(&Extension::of_function(fn_oid).quoted_schema());
}

/// Trigger function of the catalog's `minhash_indexes_loaded` (`AFTER INSERT FOR EACH
/// STATEMENT`): rows copied into the catalog get their band tables linked ([`relink`]).
// (created in schema minhash_internal by src/index/sql/catalog.sql)
#[pg_trigger(sql = false)]
fn _minhash_catalog_loaded<'a>(
    trigger: &'a PgTrigger<'a>,
) -> Result<Option<PgHeapTuple<'a, AllocatedByPostgres>>, Infallible> {
    relink(&Extension::of_function(trigger.trigger().tgfoid).quoted_schema());
    Ok(None)
}

/// Trigger function of the catalog's `minhash_indexes_kept` (`BEFORE INSERT FOR EACH ROW`): a
/// data-only restore into a table that has an index already copies in a second catalog row
/// for it (the same table and band table). The index there stands, and the row is skipped (its
/// band rows are dropped by the band table's load trigger, [`_minhash_band_load`]).
// (created in schema minhash_internal by src/index/sql/catalog.sql)
#[pg_trigger(sql = false)]
fn _minhash_catalog_insert<'a>(
    trigger: &'a PgTrigger<'a>,
) -> Result<Option<PgHeapTuple<'a, AllocatedByPostgres>>, Infallible> {
    let new = trigger.new();
    let column = |name: &str| {
        new.as_ref()
            .and_then(|row| row.get_by_name::<pg_sys::Oid>(name).ok().flatten())
    };
    let (band, tbl) = (column("band_table"), column("tbl"));
    let schema = Extension::of_function(trigger.trigger().tgfoid).quoted_schema();
    // (as PL/pgSQL ran it: not read-only, so a row an earlier row of the same COPY inserted is
    // seen)
    let kept = Spi::connect_mut(|client| {
        client
            .update(
                &format!(
                    "SELECT EXISTS (SELECT FROM {schema}.minhash_indexes i
                                    WHERE i.band_table OPERATOR(pg_catalog.=) $1::pg_catalog.regclass
                                      AND i.tbl OPERATOR(pg_catalog.=) $2::pg_catalog.regclass)"
                ),
                None,
                &[band.into(), tbl.into()],
            )?
            .first()
            .get_one::<bool>()
    })
    .unwrap_or_else(|e| spi_failed(e));
    Ok(if kept == Some(true) { None } else { new })
}

/// Whether the triggers `trigdesc` (of a band table) are none, or only its load trigger of
/// `ext` (and, of a Citus table, Citus's truncate trigger).
///
/// # Safety
/// `trigdesc` is NULL or the trigger descriptor of an open relation.
pub(in crate::index) unsafe fn only_load_trigger(
    trigdesc: *const pg_sys::TriggerDesc,
    ext: Extension,
) -> bool {
    // SAFETY: per the contract.
    unsafe { triggers(trigdesc) }.iter().all(|t| {
        is_ours(t, LOAD_TRIGGER, BEFORE_INSERT_ROW, LOAD_FUNCTION, ext) || is_citus_truncate(t)
    })
}

/// Whether trigger `t` is the internal trigger by which Citus truncates the shards of a Citus
/// table (a band table of a Citus table has one).
fn is_citus_truncate(t: &pg_sys::Trigger) -> bool {
    // SAFETY: a syscache lookup that returns NULL or a palloc'd name; the namespace lookup
    // of a function that exists.
    unsafe {
        let name = pg_sys::get_func_name(t.tgfoid);
        t.tgisinternal
            && !name.is_null()
            && CStr::from_ptr(name).to_bytes() == b"citus_truncate_trigger"
            && pg_sys::get_func_namespace(t.tgfoid)
                == pg_sys::Oid::from(pg_sys::PG_CATALOG_NAMESPACE)
    }
}

/// Whether the table with triggers `trigdesc` carries the insert sync trigger of `ext`, as an
/// indexed table restored without its catalog row yet does.
///
/// # Safety
/// `trigdesc` is NULL or the trigger descriptor of an open relation.
pub(in crate::index) unsafe fn has_sync_trigger(
    trigdesc: *const pg_sys::TriggerDesc,
    ext: Extension,
) -> bool {
    let after_insert_statement = pg_sys::TRIGGER_TYPE_INSERT as i16;
    // SAFETY: per the contract.
    unsafe { triggers(trigdesc) }.iter().any(|t| {
        is_ours(
            t,
            SYNC_INSERT_TRIGGER,
            after_insert_statement,
            SYNC_FUNCTION,
            ext,
        )
    })
}

/// # Safety
/// `trigdesc` is NULL or the trigger descriptor of an open relation.
pub(in crate::index) unsafe fn triggers<'a>(
    trigdesc: *const pg_sys::TriggerDesc,
) -> &'a [pg_sys::Trigger] {
    if trigdesc.is_null() {
        return &[];
    }
    // SAFETY: per the contract: `numtriggers` triggers at `triggers`.
    unsafe { std::slice::from_raw_parts((*trigdesc).triggers, (*trigdesc).numtriggers as usize) }
}

/// Whether trigger `t` is named `name`, of type `tgtype`, and calls `function` of `ext`.
pub(super) fn is_ours(
    t: &pg_sys::Trigger,
    name: &str,
    tgtype: i16,
    function: &str,
    ext: Extension,
) -> bool {
    // SAFETY: a trigger's name is a C string.
    unsafe { CStr::from_ptr(t.tgname) }.to_bytes() == name.as_bytes()
        && t.tgtype == tgtype
        && is_function(t, function, ext)
}

/// Whether trigger `t` calls `function` of `ext`.
pub(in crate::index) fn is_function(t: &pg_sys::Trigger, function: &str, ext: Extension) -> bool {
    is_member_function(t.tgfoid, function, ext)
}

/// Whether function `fn_oid` is `function` of `ext`.
pub(in crate::index) fn is_member_function(
    fn_oid: pg_sys::Oid,
    function: &str,
    ext: Extension,
) -> bool {
    // SAFETY: a syscache read that returns NULL or a palloc'd name for a function that is gone.
    let function_name = unsafe { pg_sys::get_func_name(fn_oid) };
    !function_name.is_null()
        // SAFETY: a name returned by get_func_name is a C string.
        && unsafe { CStr::from_ptr(function_name) }.to_bytes() == function.as_bytes()
        && ext.owns_function(fn_oid)
}
