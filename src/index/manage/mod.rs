//! What users call to manage an index: `minhash_index_create` (`create`), and the maintenance
//! functions of an index that exists: `minhash_index_check` (`check`) and `minhash_index_stats`
//! (`stats`) count what the band table holds, `minhash_index_rebuild` (`rebuild`) fills it
//! again, `minhash_index_drop` (`drop`) removes the index. Each of these four runs with the
//! search path `pg_catalog, pg_temp`, as the PL/pgSQL functions it replaced did by their `SET`
//! clause. The internal functions they share with the event triggers are here too: finding an
//! index's catalog row, the backfill and the sync triggers (`build`), and a band table's
//! format, columns, B-trees and Citus placement (`layout`), each with that search path in its
//! `SET` clause. What a user's DDL on an indexed table sets off, the event trigger function
//! `_minhash_ddl` (`ddl`), lives here too, its path pinned the same way. They reach the
//! SQL-language helpers of `src/index/sql/` through SPI by qualified names. It may use every
//! room below it: `write`, `read`, `def` and `run`.

mod build;
pub(super) mod check;
mod create;
mod ddl;
pub(super) mod drop;
mod layout;
pub(super) mod rebuild;
pub(super) mod stats;

use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;
use pgrx::spi::SpiTupleTable;
use pgrx::PgSqlErrorCode;

use crate::pg::error::raise;
use crate::pg::names::Regclass;

use crate::index::def::extension::Extension;
use crate::index::run::spi::{first_value, spi_failed};

/// The table argument of a maintenance function: 22004 for NULL, as `_minhash_index` says.
fn table_argument(tbl: Option<Regclass>) -> pg_sys::Oid {
    match tbl {
        Some(Regclass(tbl)) => tbl,
        None => raise(
            PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
            "tbl must not be NULL",
            None,
        ),
    }
}

/// The schema of the extension of the function `fcinfo` calls, quoted (`@extschema@`).
fn extension_schema(fcinfo: pg_sys::FunctionCallInfo) -> String {
    // SAFETY: PostgreSQL passes this call's fcinfo, whose flinfo names the function.
    let fn_oid = unsafe { (*(*fcinfo).flinfo).fn_oid };
    Extension::of_function(fn_oid).quoted_schema()
}

/// The OID of the function `fcinfo` calls.
fn function_oid(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Oid {
    // SAFETY: as above.
    unsafe { (*(*fcinfo).flinfo).fn_oid }
}

/// Runs the statement `sql` with `args` through SPI, as the caller (it may write: each
/// statement sees what the ones before it did, as in PL/pgSQL), and returns what `read` makes
/// of its result.
fn query<T>(
    sql: &str,
    args: &[DatumWithOid<'_>],
    read: impl FnOnce(pgrx::spi::SpiTupleTable<'_>) -> pgrx::spi::Result<T>,
) -> T {
    Spi::connect_mut(|client| read(client.update(sql, None, args)?))
        .unwrap_or_else(|e| spi_failed(e))
}

/// [`query`] for the first column of the first row (None for no row or NULL).
fn statement<T: FromDatum + IntoDatum>(sql: &str, args: &[DatumWithOid<'_>]) -> Option<T> {
    query(sql, args, first_value::<T>)
}

/// [`query`] for what `read` reads of the first row, None if there is none.
fn first_row<T>(
    sql: &str,
    args: &[DatumWithOid<'_>],
    read: impl FnOnce(&SpiTupleTable<'_>) -> pgrx::spi::Result<T>,
) -> Option<T> {
    query(sql, args, |table| {
        if table.is_empty() {
            return Ok(None);
        }
        read(&table.first()).map(Some)
    })
}

/// [`query`] for the statement's effect.
fn run(sql: &str, args: &[DatumWithOid<'_>]) {
    query(sql, args, |_| Ok(()));
}

/// Runs the statement that the query `sql` prints (a `format()` of qualified names).
fn run_printed(sql: &str, args: &[DatumWithOid<'_>]) {
    let printed = statement::<String>(sql, args).expect("a statement");
    run(&printed, &[]);
}

/// The band rows of the index with band table `band_table` as a FROM item of columns (id,
/// key, sketch1, sketch2[, tenant]) whatever its format (`_minhash_band_rows_of`), and about
/// how many band rows (and, `with_rows`, rows of the table) there are, from what the band table
/// (and the table) had when last vacuumed, analyzed or indexed (of format 2, a row holds
/// `bands` band rows): what a progress report counts up to.
fn band_rows_and_total(schema: &str, band_table: pg_sys::Oid, with_rows: bool) -> (String, i64) {
    let sql = format!(
        "SELECT minhash_internal._minhash_band_rows_of(i),
                (SELECT pg_catalog.sum(GREATEST(c.reltuples, 0) OPERATOR(pg_catalog.*)
                            CASE WHEN c.oid OPERATOR(pg_catalog.=) i.band_table
                                      AND i.format OPERATOR(pg_catalog.=) 2
                                 THEN i.bands ELSE 1 END)::pg_catalog.int8
                 FROM pg_catalog.pg_class c
                 WHERE c.oid OPERATOR(pg_catalog.=) i.band_table
                    OR ($2 AND c.oid OPERATOR(pg_catalog.=) i.tbl))
         FROM {schema}.minhash_indexes i WHERE i.band_table OPERATOR(pg_catalog.=) $1"
    );
    query(&sql, &[band_table.into(), with_rows.into()], |table| {
        let row = table.first();
        Ok((
            row.get::<String>(1)?.expect("a resolved index's band rows"),
            row.get::<i64>(2)?.unwrap_or(0),
        ))
    })
}

/// The catalog row of the index a call names, as `minhash_internal._minhash_index` finds it:
/// the index whose band table `tbl` is, or the table's default index; 22004 for NULL, 42809
/// for a relation that cannot have one, 42704 for a table that has none. It locks nothing: the
/// calls that change an index (rebuild, drop) take the table's lock of their own first, before
/// anything of the band table (a lookup's resolver, `Index::of_rows`, would hold a lock on
/// both while they wait for theirs).
struct CatalogRow {
    /// The row as text, for the SQL that takes a row (`$1::@extschema@.minhash_indexes`).
    text: String,
    tbl: pg_sys::Oid,
    band_table: pg_sys::Oid,
    id_column: String,
    text_column: Option<String>,
    text_expression: Option<String>,
    format: Option<i32>,
    bands: Option<i32>,
}

/// The columns of a [`CatalogRow`], of a catalog row `i`.
const CATALOG_ROW_COLUMNS: &str = "i::pg_catalog.text, i.tbl::pg_catalog.oid,
    i.band_table::pg_catalog.oid, i.id_column::pg_catalog.text, i.text_column::pg_catalog.text,
    i.text_expression, i.format, i.bands";

impl CatalogRow {
    fn of(tbl: Option<Regclass>) -> CatalogRow {
        let arg = match tbl {
            Some(Regclass(tbl)) => DatumWithOid::from(tbl),
            None => DatumWithOid::null::<pg_sys::Oid>(),
        };
        CatalogRow::read(
            &format!(
                "SELECT {CATALOG_ROW_COLUMNS}
                 FROM minhash_internal._minhash_index($1::pg_catalog.regclass) i"
            ),
            &[arg],
        )
        .pop()
        .expect("_minhash_index returns a row or raises")
    }

    /// The catalog rows `i` of the extension's schema `schema` that satisfy `condition`.
    fn matching(schema: &str, condition: &str) -> Vec<CatalogRow> {
        CatalogRow::read(
            &format!(
                "SELECT {CATALOG_ROW_COLUMNS} FROM {schema}.minhash_indexes i WHERE {condition}"
            ),
            &[],
        )
    }

    /// The rows of `sql`, a query of [`CATALOG_ROW_COLUMNS`].
    fn read(sql: &str, args: &[DatumWithOid<'_>]) -> Vec<CatalogRow> {
        query(sql, args, |table| {
            table
                .map(|row| {
                    Ok(CatalogRow {
                        text: row.get::<String>(1)?.expect("a row"),
                        tbl: row.get::<pg_sys::Oid>(2)?.expect("NOT NULL column"),
                        band_table: row.get::<pg_sys::Oid>(3)?.expect("NOT NULL column"),
                        id_column: row.get::<String>(4)?.expect("NOT NULL column"),
                        text_column: row.get::<String>(5)?,
                        text_expression: row.get::<String>(6)?,
                        format: row.get::<i32>(7)?,
                        bands: row.get::<i32>(8)?,
                    })
                })
                .collect()
        })
    }
}

/// `LOCK TABLE tbl IN <mode> MODE`, as the caller (with its privilege checks).
fn lock_table(tbl: pg_sys::Oid, mode: &str) {
    let sql = format!(
        "LOCK TABLE {} IN {mode} MODE",
        crate::pg::names::qualified_name(tbl)
    );
    statement::<bool>(&sql, &[]);
}

/// `rel` as `regclass` prints it under the current search path (qualified unless visible; the
/// OID of a dropped one), as the PL/pgSQL these functions replaced formatted a regclass with
/// `%s` and `%`.
fn regclass_text(rel: pg_sys::Oid) -> String {
    // SAFETY: regclassout takes any OID (a number for one of no relation) and returns a
    // palloc'd C string.
    unsafe {
        let text = pg_sys::OidOutputFunctionCall(
            pg_sys::Oid::from(pg_sys::F_REGCLASSOUT),
            pg_sys::Datum::from(rel),
        );
        std::ffi::CStr::from_ptr(text)
            .to_string_lossy()
            .into_owned()
    }
}

/// [`regclass_text`] of an argument that may be NULL, as `format('%s')` prints NULL: nothing.
fn regclass_or_empty(rel: Option<pg_sys::Oid>) -> String {
    rel.map(regclass_text).unwrap_or_default()
}
