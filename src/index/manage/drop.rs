//! `minhash_index_drop(tbl, cascade)`: an index removed with its band table, and with the last
//! index of a table its sync triggers; `_minhash_drop_objects`, the band table's part, which the
//! event trigger of a dropped table calls too.

use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;

use crate::pg::error::{notice, raise, raise_detailed};
use crate::pg::names::{qualified, quote_ident_str, quote_literal, regclass_name, Regclass};

use super::{extension_schema, lock_table, query, statement, CatalogRow};
use crate::index::def::citus::is_citus_table;
use crate::index::run::owner::{relation_owner, with_safe_search_path};

/// Drops the index `tbl` names: the table's only index, or the index whose band table `tbl` is
/// (42725 for a table with several: a drop is never done by default). A
/// `minhash_flag_duplicate` trigger on the table looks rows up in the index, like a
/// constraint's index: dropping the index refuses while one exists (2BP01), or drops it too
/// (`cascade`). A trigger uses the index its fourth argument names by its band table, or,
/// without one, the table's default index. The sync triggers go with the table's last index.
#[pg_extern(volatile, parallel_unsafe)]
fn minhash_index_drop(
    tbl: Option<Regclass>,
    cascade: default!(Option<bool>, false),
    fcinfo: pg_sys::FunctionCallInfo,
) {
    with_safe_search_path(|| {
        let schema = extension_schema(fcinfo);
        refuse_several(&schema, tbl);
        let cfg = CatalogRow::of(tbl);
        let tbl = cfg.tbl;
        // (a duplicate trigger that names no index checks against the table's default one)
        let default_band: Option<String> = statement(
            &format!(
                "SELECT c.relname::pg_catalog.text FROM {schema}.minhash_indexes i
                 JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) i.band_table
                 WHERE i.tbl OPERATOR(pg_catalog.=) $1::pg_catalog.regclass
                 ORDER BY i.band_table::pg_catalog.oid LIMIT 1"
            ),
            &[tbl.into()],
        );
        // SAFETY: a role membership check of two role OIDs.
        if !unsafe { pg_sys::has_privs_of_role(pg_sys::GetUserId(), relation_owner(tbl)) } {
            // SAFETY: a syscache lookup by OID; NULL (checked) or a palloc'd name.
            let name = unsafe {
                let name = pg_sys::get_rel_name(tbl);
                (!name.is_null()).then(|| {
                    std::ffi::CStr::from_ptr(name)
                        .to_string_lossy()
                        .into_owned()
                })
            };
            raise(
                PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
                format!(
                    "must be owner of relation {}",
                    name.map_or(String::new(), |n| quote_ident_str(&n))
                ),
                None,
            );
        }
        // Readers and writers of the table go first, then nothing can hold the band table:
        // each of them takes the table before the band table, so dropping both cannot
        // deadlock.
        lock_table(tbl, "ACCESS EXCLUSIVE");
        let flags: Vec<String> = query(
            &format!(
                "SELECT t.tgname::pg_catalog.text FROM pg_catalog.pg_trigger t
                 WHERE t.tgrelid OPERATOR(pg_catalog.=) $1
                   AND t.tgfoid OPERATOR(pg_catalog.=)
                       '{schema}.minhash_flag_duplicate()'::pg_catalog.regprocedure
                   AND coalesce(
                           CASE WHEN (minhash_internal._minhash_trigger_args(t.oid))[4]
                                     OPERATOR(pg_catalog.<>) ''
                                THEN (minhash_internal._minhash_trigger_args(t.oid))[4] END,
                           $2)
                       OPERATOR(pg_catalog.=)
                       (SELECT c.relname::pg_catalog.text FROM pg_catalog.pg_class c
                        WHERE c.oid OPERATOR(pg_catalog.=) $3)
                 ORDER BY t.tgname"
            ),
            &[tbl.into(), default_band.into(), cfg.band_table.into()],
            |table| {
                table
                    .map(|row| row.get::<String>(1).map(|name| name.expect("a name")))
                    .collect()
            },
        );
        let table_name = regclass_name(tbl);
        if !flags.is_empty() && !cascade.unwrap_or(false) {
            raise_detailed(
                PgSqlErrorCode::ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST,
                format!(
                    "cannot drop the minhash index of table {table_name} because other objects \
                     depend on it"
                ),
                flags
                    .iter()
                    .map(|f| format!("trigger {f} on table {table_name} depends on it"))
                    .collect::<Vec<_>>()
                    .join("\n"),
                format!(
                    "Drop the triggers first, or use minhash_index_drop({}, cascade => true) to \
                     drop them too.",
                    quote_literal(&table_name)
                ),
            );
        }
        for trigger in &flags {
            notice(format!(
                "drop cascades to trigger {trigger} on table {table_name}"
            ));
            // (Citus drops a trigger of its tables only with citus.enable_unsafe_triggers on)
            if is_citus_table(tbl) {
                statement::<String>(
                    "SELECT pg_catalog.set_config('citus.enable_unsafe_triggers', 'on', true)",
                    &[],
                );
            }
            statement::<bool>(
                &format!("DROP TRIGGER {} ON {table_name}", quote_ident_str(trigger)),
                &[],
            );
        }
        // (the catalog row first: a band table dropped while its row names it is refused by
        // the event trigger)
        statement::<bool>(
            &format!(
                "DELETE FROM {schema}.minhash_indexes i
                 WHERE i.band_table OPERATOR(pg_catalog.=) $1::pg_catalog.regclass"
            ),
            &[cfg.band_table.into()],
        );
        drop_band_table(cfg.band_table);
        // (a sketch store no index of the table needs any more goes with the last one that did)
        statement::<bool>(
            "SELECT minhash_internal._minhash_sync_stores($1::pg_catalog.regclass) IS NULL",
            &[tbl.into()],
        );
        let last: bool = statement(
            &format!(
                "SELECT NOT EXISTS (SELECT FROM {schema}.minhash_indexes i
                                    WHERE i.tbl OPERATOR(pg_catalog.=) $1::pg_catalog.regclass)"
            ),
            &[tbl.into()],
        )
        .unwrap_or(true);
        if last {
            statement::<bool>(
                "SELECT minhash_internal._minhash_sync_triggers($1::pg_catalog.regclass, false)
                        IS NULL",
                &[tbl.into()],
            );
            statement::<bool>(
                "SELECT pg_catalog.bool_and(
                            minhash_internal._minhash_sync_triggers(p, false) IS NULL)
                 FROM minhash_internal._minhash_partitions($1::pg_catalog.regclass) p",
                &[tbl.into()],
            );
        } else if is_citus_table(tbl) {
            // (the triggers on the shards carry the catalog rows of the indexes left)
            statement::<bool>(
                "SELECT minhash_internal._minhash_sync_triggers($1::pg_catalog.regclass, true)
                        IS NULL",
                &[tbl.into()],
            );
        }
    })
}

/// Refuses (42725) to drop by the name of a table that has several indexes: a drop is never
/// done by default; the hint names their band tables.
fn refuse_several(schema: &str, tbl: Option<Regclass>) {
    let Some(Regclass(tbl)) = tbl else { return };
    let (count, band_tables): (i64, Option<String>) = query(
        &format!(
            "SELECT pg_catalog.count(*),
                    pg_catalog.string_agg(i.band_table::pg_catalog.text, ', '
                                          ORDER BY i.band_table::pg_catalog.oid)
             FROM {schema}.minhash_indexes i
             WHERE i.tbl OPERATOR(pg_catalog.=) $1::pg_catalog.regclass"
        ),
        &[tbl.into()],
        |table| {
            let row = table.first();
            Ok((row.get::<i64>(1)?.unwrap_or(0), row.get::<String>(2)?))
        },
    );
    if count > 1 {
        raise(
            PgSqlErrorCode::ERRCODE_AMBIGUOUS_FUNCTION,
            format!("table {} has {count} minhash indexes", regclass_name(tbl)),
            Some(format!(
                "Name the one to drop by its band table: {}.",
                band_tables.unwrap_or_default()
            )),
        );
    }
}

/// Drops band table `band_table` if it still exists: it may be gone already, dropped by hand or
/// along with its table. As the caller: the catalog's policy made sure the row names a band
/// table of the table's owner, and DROP TABLE checks the caller is (42501).
fn drop_band_table(band_table: pg_sys::Oid) {
    // (a dropped band table prints as a bare OID, which DROP TABLE cannot parse)
    if let Some(name) = qualified(band_table) {
        statement::<bool>(&format!("DROP TABLE {name}"), &[]);
    }
}

/// Internal to the event trigger of dropped tables (`_minhash_ddl`): drops the band table of
/// an index whose table was dropped, if it still exists (see [`drop_band_table`]).
#[pg_extern(volatile, parallel_unsafe, schema = "minhash_internal")]
fn _minhash_drop_objects(band_table: Option<Regclass>) {
    if let Some(Regclass(band_table)) = band_table {
        with_safe_search_path(|| drop_band_table(band_table));
    }
}
