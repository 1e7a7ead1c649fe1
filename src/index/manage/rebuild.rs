//! `minhash_index_rebuild(tbl, format)`: an index's band table emptied and filled again from its
//! table's rows, of another band-table format if asked.

use pgrx::prelude::*;

use crate::pg::names::{qualified_name, Regclass};

use super::{extension_schema, lock_table, statement, CatalogRow};
use crate::index::def::citus::is_citus_table;
use crate::index::run::owner::{owner_statement, with_safe_search_path};

/// Rebuilds the index `tbl` names (see [`CatalogRow`]); returns the rows read. `format` (1 or
/// 2, NULL: the index's) is the band-table format it is rebuilt in (docs/contract.md).
#[pg_extern(volatile, parallel_unsafe)]
fn minhash_index_rebuild(
    tbl: Option<Regclass>,
    format: default!(Option<i32>, "NULL"),
    fcinfo: pg_sys::FunctionCallInfo,
) -> Option<i64> {
    with_safe_search_path(|| {
        let cfg = CatalogRow::of(tbl);
        let schema = extension_schema(fcinfo);
        // Writers wait until this transaction commits. The band rows are deleted rather than
        // truncated: a lookup that holds the band table while it waits to write the table
        // keeps its lock and goes on once this commits (a TRUNCATE would wait for it: a
        // deadlock), and a REPEATABLE READ writer whose snapshot is older gets a
        // serialization failure instead of missing the new band rows. (As the owner: the
        // caller must have the owner's privileges, 42501 otherwise.)
        lock_table(cfg.tbl, "SHARE ROW EXCLUSIVE");
        owner_statement(
            cfg.tbl,
            &format!("DELETE FROM {}", qualified_name(cfg.band_table)),
            |_| Ok(()),
        );
        let reshape = |target: Option<i32>| {
            statement::<String>(
                &format!(
                    "SELECT minhash_internal._minhash_band_reshape(
                         $1::{schema}.minhash_indexes, $2)::pg_catalog.text"
                ),
                &[cfg.text.clone().into(), target.into()],
            );
        };
        // Of another format, the emptied band table is made one of `format` (docs/contract.md).
        if format.is_some() && format != cfg.format {
            statement::<i32>(
                "SELECT minhash_internal._minhash_check_format($1, $2)",
                &[format.into(), cfg.bands.into()],
            );
            reshape(format);
        // (the band table of a Citus table indexed before 0.3.0 gets its unique B-tree and
        // replica identity: see _minhash_band_indexes)
        } else if full_replica_identity(cfg.band_table) && is_citus_table(cfg.tbl) {
            reshape(cfg.format);
        }
        // (an index made before sketch stores existed gets its store)
        statement::<bool>(
            "SELECT minhash_internal._minhash_sync_stores($1::pg_catalog.regclass) IS NULL",
            &[cfg.tbl.into()],
        );
        statement::<i64>(
            "SELECT minhash_internal._minhash_backfill($1::pg_catalog.regclass)",
            &[cfg.band_table.into()],
        )
    })
}

/// Whether the replica identity of `band_table` is the whole row (`REPLICA IDENTITY FULL`).
fn full_replica_identity(band_table: pg_sys::Oid) -> bool {
    // SAFETY: a syscache lookup by OID; the tuple is released before returning.
    unsafe {
        let tuple = pg_sys::SearchSysCache1(
            pg_sys::SysCacheIdentifier::RELOID as std::ffi::c_int,
            pg_sys::Datum::from(band_table),
        );
        if tuple.is_null() {
            return false;
        }
        let form = pg_sys::GETSTRUCT(tuple).cast::<pg_sys::FormData_pg_class>();
        let full = (*form).relreplident == pg_sys::REPLICA_IDENTITY_FULL as std::ffi::c_char;
        pg_sys::ReleaseSysCache(tuple);
        full
    }
}
