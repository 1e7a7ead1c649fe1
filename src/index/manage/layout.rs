//! The band table of an index as `minhash_index_create` and `minhash_index_rebuild` shape it:
//! its format (`_minhash_check_format`), its columns of a format (`_minhash_band_reshape`), its
//! B-trees and replica identity (`_minhash_band_indexes`), and of a Citus table its placement
//! (`_minhash_citus_distribute`). Each runs as the caller, with the search path
//! `pg_catalog, pg_temp` of its `SET` clause, as the PL/pgSQL it replaced did.

use std::ffi::CStr;

use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;

use crate::pg::error::raise;
use crate::pg::names::{quote_ident_str, Regclass};

use super::{query, regclass_or_empty, regclass_text, run, statement};
use crate::index::def::citus::CitusTable;
use crate::index::run::row::{first_row, Row, RowDatum};
use crate::index::run::spi::for_each_spi_row;

/// The band table format `format` (1 or 2; NULL: the setting `pg_minhash.default_format`, 1 if
/// unset, and 1 beyond 64 bands) for an index of `bands` bands: 22023 for another value (of the
/// argument or the setting), 0A000 for format 2 beyond 64 bands (a B-tree per band).
#[pg_extern(stable, parallel_safe, schema = "minhash_internal")]
#[search_path(pg_catalog, pg_temp)]
fn _minhash_check_format(format: Option<i32>, bands: Option<i32>) -> Option<i32> {
    let setting = default_format_setting();
    let Some(format) = format else {
        if let Some(setting) = setting.as_deref().filter(|s| !["1", "2"].contains(s)) {
            raise(
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                format!("pg_minhash.default_format must be 1 or 2, got {setting}"),
                None,
            );
        }
        let per_row = setting.as_deref() == Some("2") && bands.is_some_and(|b| b <= 64);
        return Some(if per_row { 2 } else { 1 });
    };
    if format != 1 && format != 2 {
        raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("format must be 1 or 2, got {format}"),
            None,
        );
    }
    if let Some(bands) = bands.filter(|&b| format == 2 && b > 64) {
        raise(
            PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
            format!("format 2 holds at most 64 bands, not {bands}"),
            Some("Use format 1, or fewer bands.".into()),
        );
    }
    Some(format)
}

/// The setting `pg_minhash.default_format`, None if it is unset or empty
/// (`nullif(current_setting(name, true), '')`).
fn default_format_setting() -> Option<String> {
    // SAFETY: a setting's value by name (NULL for one that does not exist), copied at once.
    let value = unsafe {
        let value = pg_sys::GetConfigOptionByName(
            c"pg_minhash.default_format".as_ptr(),
            std::ptr::null_mut(),
            true,
        );
        (!value.is_null()).then(|| CStr::from_ptr(value).to_string_lossy().into_owned())
    };
    value.filter(|v| !v.is_empty())
}

/// Gives the emptied band table of `cfg` the columns and B-trees of format `target` and its
/// catalog row that format (takes the band table's ACCESS EXCLUSIVE lock). Returns the row.
#[pg_extern(
    schema = "minhash_internal",
    sql = r#"
-- (src/index/manage/layout.rs)
CREATE FUNCTION minhash_internal._minhash_band_reshape(cfg @extschema@.minhash_indexes, target int)
RETURNS @extschema@.minhash_indexes
LANGUAGE c
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', '@FUNCTION_NAME@';
"#,
    requires = ["index_catalog"]
)]
fn _minhash_band_reshape(fcinfo: pg_sys::FunctionCallInfo) -> RowDatum {
    // SAFETY: fcinfo is this call's: a catalog row and an int.
    let (cfg, target) = unsafe {
        (
            Row::argument(fcinfo, 0),
            pgrx::fcinfo::pg_getarg::<i32>(fcinfo, 1),
        )
    };
    let band_table = cfg.and_then(|c| c.oid(c"band_table"));
    let bands = cfg.and_then(|c| c.int(c"bands"));
    let (Some(cfg), Some(band_table), Some(bands), Some(target)) = (cfg, band_table, bands, target)
    else {
        raise(
            PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
            "the catalog row and the format must not be NULL",
            None,
        )
    };
    let indexes: Vec<pg_sys::Oid> = query(
        "SELECT x.indexrelid FROM pg_catalog.pg_index x
         WHERE x.indrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass",
        &[band_table.into()],
        |table| {
            let mut indexes = Vec::new();
            for_each_spi_row(table, |row| {
                indexes.extend(row.get::<pg_sys::Oid>(1)?);
                Ok(())
            })?;
            Ok(indexes)
        },
    );
    for index in indexes {
        run(&format!("DROP INDEX {}", regclass_text(index)), &[]);
    }
    // (NULL as format prints it, nothing, where the band table has no such columns)
    let alter: String = statement(
        "SELECT pg_catalog.format('ALTER TABLE %s %s, %s', $1::pg_catalog.regclass,
                    (SELECT pg_catalog.string_agg(pg_catalog.format('DROP COLUMN %I', a.attname), ', '
                                                  ORDER BY a.attnum)
                     FROM pg_catalog.pg_attribute a
                     WHERE a.attrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass
                       AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped
                       AND a.attname OPERATOR(pg_catalog.<>) ALL (ARRAY['id', 'tenant']::pg_catalog.name[])),
                    (SELECT pg_catalog.string_agg(pg_catalog.format('ADD COLUMN %I bigint NOT NULL', u.col),
                                                  ', ' ORDER BY u.pos)
                     FROM pg_catalog.unnest(minhash_internal._minhash_band_value_columns($2, $3))
                          WITH ORDINALITY AS u(col, pos)))",
        &[band_table.into(), target.into(), bands.into()],
    )
    .expect("format() of a non-NULL format string");
    run(&alter, &[]);
    let schema = super::extension_schema(fcinfo);
    statement::<bool>(
        &format!(
            "UPDATE {schema}.minhash_indexes i SET format = $2
             WHERE i.band_table OPERATOR(pg_catalog.=) $1::pg_catalog.regclass"
        ),
        &[band_table.into(), target.into()],
    );
    let reshaped = query(
        "SELECT pg_catalog.jsonb_populate_record($1, pg_catalog.jsonb_build_object('format', $2))",
        &[cfg.spi_arg(), target.into()],
        first_row,
    )
    .expect("a row");
    band_indexes(reshaped);
    reshaped.returned()
}

/// Creates the B-trees of the band table of `cfg` (PostgreSQL builds them as the band table's
/// owner) and sets its replica identity. Of format 1, a lookup reads and filters candidates from
/// `(key, id) INCLUDE (sketch1, sketch2)` alone (an index-only scan), and the sync trigger
/// deletes band rows through it. Of format 2, a lookup reads band i's candidates through the
/// B-tree on `key<i>` and their sketches from the band table, and the sync trigger deletes band
/// rows through the B-tree on `id`. On one node none is unique: a flag trigger writes a row's
/// band rows before it checks the row (src/index/write/claim.rs), while band rows of the row's
/// id may still be there; the replica identity is then the whole row, so UPDATE and DELETE on
/// the table work under a publication that includes the band table. On Citus, where checks
/// make no claims and a key's top bits are its band (src/core/bands.rs), `(key, id)` is unique
/// by construction: that B-tree is unique and the replica identity, so a shard move replays
/// each write through it (docs/citus.md).
#[pg_extern(
    schema = "minhash_internal",
    sql = r#"
-- (src/index/manage/layout.rs)
CREATE FUNCTION minhash_internal._minhash_band_indexes(cfg @extschema@.minhash_indexes)
RETURNS void
LANGUAGE c
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', '@FUNCTION_NAME@';
"#,
    requires = ["index_catalog"]
)]
fn _minhash_band_indexes(fcinfo: pg_sys::FunctionCallInfo) {
    // SAFETY: fcinfo is this call's, of a catalog row.
    match unsafe { Row::argument(fcinfo, 0) } {
        Some(cfg) => band_indexes(cfg),
        // (every column of a NULL row is NULL: no format 1, and a loop to NULL bands)
        None => null_loop_bound(),
    }
}

/// [`_minhash_band_indexes`] of the catalog row `cfg`.
fn band_indexes(cfg: Row) {
    let citus = CitusTable::of(cfg.oid(c"tbl")).kind.is_some();
    // (a unique key of a Citus table holds its distribution column: the tenant, if it has one)
    let has_tenant = statement::<bool>(
        "SELECT minhash_internal._minhash_tenant_column($1) IS NOT NULL",
        &[cfg.spi_arg()],
    )
    .unwrap_or(false);
    let tenant = if has_tenant { ", tenant" } else { "" };
    let unique = if citus { "UNIQUE" } else { "" };
    let band_table = cfg.oid(c"band_table");
    let band = regclass_or_empty(band_table);
    if cfg.int(c"format") == Some(1) {
        run(
            &format!(
                "CREATE {unique} INDEX ON {band} (key, id{tenant}) INCLUDE (sketch1, sketch2)"
            ),
            &[],
        );
    } else {
        run(
            &format!("CREATE {unique} INDEX ON {band} (id{tenant})"),
            &[],
        );
        let Some(bands) = cfg.int(c"bands") else {
            null_loop_bound()
        };
        for i in 1..=bands {
            run(
                &format!(
                    "CREATE INDEX ON {band} ({})",
                    quote_ident_str(&format!("key{i}"))
                ),
                &[],
            );
        }
    }
    if citus {
        let unique_index: String = statement(
            "SELECT pg_catalog.format('ALTER TABLE %s REPLICA IDENTITY USING INDEX %I', $1::pg_catalog.regclass,
                        (SELECT c.relname FROM pg_catalog.pg_index x
                         JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) x.indexrelid
                         WHERE x.indrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass AND x.indisunique))",
            &[oid_arg(band_table)],
        )
        .expect("format() of a non-NULL format string");
        run(&unique_index, &[]);
    } else {
        run(&format!("ALTER TABLE {band} REPLICA IDENTITY FULL"), &[]);
    }
}

/// An OID argument that may be NULL.
fn oid_arg(oid: Option<pg_sys::Oid>) -> DatumWithOid<'static> {
    match oid {
        Some(oid) => oid.into(),
        None => DatumWithOid::null::<pg_sys::Oid>(),
    }
}

/// 22004 for a band count of NULL, as PL/pgSQL says of `FOR i IN 1..NULL`.
fn null_loop_bound() -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
        "upper bound of FOR loop cannot be null",
        None,
    )
}

/// Makes the (empty) band table `band` of an index of the Citus table `tbl` (of Citus kind
/// `kind`) a Citus table too: of a distributed table, distributed by id (or, of a table
/// distributed by a tenant, by its tenant column) and co-located with it, so that each band
/// row lives on the shard of its row and the sync triggers on the shards write locally; of a
/// reference table, a reference table, written on each node beside the table's copy there.
#[pg_extern(volatile, schema = "minhash_internal")]
#[search_path(pg_catalog, pg_temp)]
fn _minhash_citus_distribute(band: Option<Regclass>, tbl: Option<Regclass>, kind: Option<&str>) {
    let band = band.map(|b| b.0);
    if kind == Some("distributed") {
        let tenant = band.is_some_and(|band| {
            // SAFETY: a syscache lookup by OID and name (InvalidAttrNumber for a dropped or
            // missing column).
            unsafe { pg_sys::get_attnum(band, c"tenant".as_ptr()) > 0 }
        });
        let column = if tenant { "tenant" } else { "id" };
        query(
            "SELECT pg_catalog.create_distributed_table($1::pg_catalog.regclass, $3,
                                                        colocate_with => $2)",
            &[
                oid_arg(band),
                tbl.map(|t| regclass_text(t.0)).into(),
                column.into(),
            ],
            |_| Ok(()),
        );
    } else {
        query(
            "SELECT pg_catalog.create_reference_table($1::pg_catalog.regclass)",
            &[oid_arg(band)],
            |_| Ok(()),
        );
    }
}
