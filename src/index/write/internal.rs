//! Internal SQL functions that the SQL of `src/index/sql/` and the maintenance calls of
//! `manage/` share: the band rows of a text, the checked thresholds, the dependency records of a
//! new band table, and the table's sketch stores.

use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;

use crate::core::params::{check_threshold, Shingling};
use crate::pg::error::{raise, OrRaise};
use crate::pg::names::{regclass_name, Regclass};

use crate::index::def::band::{band_entry, band_values, band_values_batch};
use crate::index::def::citus;
use crate::index::def::extension::Extension;
use crate::index::def::settings::IndexSettings;
use crate::index::read::sketch_store::sync_stores;
use crate::index::run::owner;
use crate::index::run::row::Row;
use crate::index::run::spi::spi_failed;

/// The settings argument `n` of the call `fcinfo`, checked (see [`IndexSettings::of_row`]).
///
/// # Safety
/// Argument `n` of the call is a `minhash_internal.index_settings`, not NULL (the functions
/// that take one are STRICT).
unsafe fn settings_argument(fcinfo: pg_sys::FunctionCallInfo, n: usize) -> IndexSettings {
    // SAFETY: per the contract, a composite argument.
    let row = unsafe { Row::argument(fcinfo, n) }.expect("a STRICT function's argument");
    IndexSettings::of_row(&row)
}

/// What the band table holds for one text (see [`band_entry`]): its `bands` band keys, then
/// its band sketch as two int8; NULL if it is not indexed. One array rather than a set of rows:
/// returning it costs less than returning rows one by one, and the band-row SQL unnests it.
///
/// This and the two functions below take the index's settings as one value, a
/// `minhash_internal.index_settings`: the band-row SQL passes it as a constant
/// (`_minhash_settings_sql` in src/index/sql/build.sql), and on Citus that SQL runs on the
/// workers, which have no catalog rows to pass instead. (Its library entry point is named
/// for the Rust function, `_minhash_text_band_values_wrapper`: the one of the SQL function's
/// name keeps the five-argument form of release 0.2.0, see [`_minhash_band_values`].)
#[pg_extern(
    schema = "minhash_internal",
    sql = r#"
-- (src/index/write/internal.rs)
CREATE FUNCTION minhash_internal._minhash_band_values(doc text, settings minhash_internal.index_settings)
RETURNS bigint[]
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', '@FUNCTION_NAME@';
"#,
    requires = ["index_catalog"]
)]
fn _minhash_text_band_values(fcinfo: pg_sys::FunctionCallInfo) -> Option<Vec<i64>> {
    // SAFETY: fcinfo is this call's: a text and the settings, neither NULL (STRICT).
    let (doc, settings) = unsafe {
        (
            pgrx::fcinfo::pg_getarg::<&str>(fcinfo, 0).expect("a STRICT function's argument"),
            settings_argument(fcinfo, 1),
        )
    };
    band_entry(doc, &settings).map(band_values)
}

/// [`_minhash_band_values`] of each of `docs`, in order (NULL for a NULL text or one that is not
/// indexed): the band-row SQL of a table of this node hands it its rows a batch at a time
/// (`_minhash_band_values_sql` in src/index/sql/build.sql), and it signs them on the build's threads
/// ([`band_values_batch`]).
#[pg_extern(
    schema = "minhash_internal",
    sql = r#"
-- (src/index/write/internal.rs)
CREATE FUNCTION minhash_internal._minhash_band_values_batch(docs text[], settings minhash_internal.index_settings)
RETURNS SETOF bigint[]
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', '@FUNCTION_NAME@';
"#,
    requires = ["index_catalog"]
)]
fn _minhash_band_values_batch(
    fcinfo: pg_sys::FunctionCallInfo,
) -> SetOfIterator<'static, Option<Vec<i64>>> {
    // SAFETY: fcinfo is this call's: a text[] and the settings, neither NULL (STRICT).
    let (docs, settings) = unsafe {
        (
            pgrx::fcinfo::pg_getarg::<Array<'_, &str>>(fcinfo, 0)
                .expect("a STRICT function's argument"),
            settings_argument(fcinfo, 1),
        )
    };
    // (read on this thread: the threads call no PostgreSQL function)
    let docs: Vec<Option<&str>> = docs.iter().collect();
    SetOfIterator::new(band_values_batch(&docs, &settings))
}

/// The band rows of one text, `(key, sketch1, sketch2)`, one per band ([`band_entry`]); none
/// if it is not indexed. The band-row SQL of a Citus table calls it in `FROM`, where Citus
/// runs it on the shards (see `_minhash_band_rows_sql` in src/index/sql/build.sql). (Its
/// entry point is `_minhash_text_band_rows_wrapper`, as above.)
#[pg_extern(
    schema = "minhash_internal",
    sql = r#"
-- (src/index/write/internal.rs)
CREATE FUNCTION minhash_internal._minhash_band_rows(doc text, settings minhash_internal.index_settings)
RETURNS TABLE (key bigint, sketch1 bigint, sketch2 bigint)
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', '@FUNCTION_NAME@';
"#,
    requires = ["index_catalog"]
)]
fn _minhash_text_band_rows(
    fcinfo: pg_sys::FunctionCallInfo,
) -> TableIterator<'static, (name!(key, i64), name!(sketch1, i64), name!(sketch2, i64))> {
    // SAFETY: fcinfo is this call's: a text and the settings, neither NULL (STRICT).
    let (doc, settings) = unsafe {
        (
            pgrx::fcinfo::pg_getarg::<&str>(fcinfo, 0).expect("a STRICT function's argument"),
            settings_argument(fcinfo, 1),
        )
    };
    band_rows(doc, &settings)
}

/// The band rows of `doc` under `settings`, one per band; none if it is not indexed.
fn band_rows(
    doc: &str,
    settings: &IndexSettings,
) -> TableIterator<'static, (name!(key, i64), name!(sketch1, i64), name!(sketch2, i64))> {
    let (keys, sketch) = band_entry(doc, settings).unwrap_or_default();
    let [s1, s2] = sketch.map(|w| w as i64);
    TableIterator::new(keys.into_iter().map(move |key| (key, s1, s2)))
}

/// The library entry point of release 0.2.0's `_minhash_band_values(doc, k, ngram, unit,
/// bands, rows_per_band)`: kept, with the same arguments, so that a database still on 0.2.0's
/// SQL objects builds and keeps its indexes with this library until `ALTER EXTENSION
/// pg_minhash UPDATE` replaces that function (an entry point that read its arguments as this
/// release's would take an integer for a row and crash the server). No SQL of this release
/// declares it.
#[pg_extern(sql = false)]
fn _minhash_band_values(
    doc: &str,
    k: i32,
    ngram: i32,
    unit: &str,
    bands: i32,
    rows_per_band: i32,
) -> Option<Vec<i64>> {
    let settings = IndexSettings::checked(k, ngram, unit, bands, rows_per_band);
    band_entry(doc, &settings).map(band_values)
}

/// The library entry point of release 0.2.0's `_minhash_band_rows(doc, k, ngram, unit, bands,
/// rows_per_band)`, kept as [`_minhash_band_values`] is.
#[pg_extern(sql = false)]
fn _minhash_band_rows(
    doc: &str,
    k: i32,
    ngram: i32,
    unit: &str,
    bands: i32,
    rows_per_band: i32,
) -> TableIterator<'static, (name!(key, i64), name!(sketch1, i64), name!(sketch2, i64))> {
    let settings = IndexSettings::checked(k, ngram, unit, bands, rows_per_band);
    band_rows(doc, &settings)
}

/// Internal to the index's SQL: a threshold argument (see [`check_threshold`]), or
/// `fallback` if it is NULL.
#[pg_extern(immutable, parallel_safe, schema = "minhash_internal")]
fn _minhash_threshold(threshold: Option<f64>, fallback: Option<f64>) -> Option<f64> {
    threshold
        .map(|t| check_threshold(t).or_raise())
        .or(fallback)
}

/// Internal to `minhash_index_create`: records that the band table `band` of `tbl` goes with
/// `tbl` (dropping the table drops it, as it drops the table's indexes) and with the extension
/// (`DROP EXTENSION` refuses while it exists, and `DROP EXTENSION ... CASCADE` drops it). The
/// caller must have the privileges of the owner of both, which must be one role (42501), and
/// `band` must be an ordinary table (42809): it acts on nothing the caller could not drop.
#[pg_extern(volatile, strict, parallel_unsafe, schema = "minhash_internal")]
pub(in crate::index) fn _minhash_link_band_table(tbl: Regclass, band: Regclass) {
    let (tbl, band) = (tbl.0, band.0);
    let owner = owner::check_owner(tbl);
    if owner::relation_owner(band) != owner {
        raise(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!(
                "{} does not belong to the owner of {}",
                regclass_name(band),
                regclass_name(tbl)
            ),
            None,
        );
    }
    // SAFETY: catalog lookups and dependency records of existing objects (the owner checks
    // above found both relations); the extension is the one whose script or function runs.
    unsafe {
        if pg_sys::get_rel_relkind(band) != pg_sys::RELKIND_RELATION as std::ffi::c_char {
            raise(
                PgSqlErrorCode::ERRCODE_WRONG_OBJECT_TYPE,
                format!("{} is not an ordinary table", regclass_name(band)),
                None,
            );
        }
        let extension = pg_sys::get_extension_oid(c"pg_minhash".as_ptr(), false);
        let address = |class: u32, object: pg_sys::Oid| pg_sys::ObjectAddress {
            classId: pg_sys::Oid::from(class),
            objectId: object,
            objectSubId: 0,
        };
        // (not for a Citus table: Citus takes a table dropped through an automatic dependency
        // for a partition whose shards went with its parent's, and would leave the band
        // table's shards behind; the minhash_ddl_dropped event trigger drops the band table
        // with its own DROP TABLE instead, after which Citus drops its shards)
        let citus = citus::is_citus_table(tbl);
        let band = address(pg_sys::RelationRelationId.into(), band);
        if !citus {
            pg_sys::recordDependencyOn(
                &band,
                &address(pg_sys::RelationRelationId.into(), tbl),
                pg_sys::DependencyType::DEPENDENCY_AUTO,
            );
        }
        pg_sys::recordDependencyOn(
            &band,
            &address(pg_sys::ExtensionRelationId.into(), extension),
            pg_sys::DependencyType::DEPENDENCY_NORMAL,
        );
    }
}

/// Internal to `minhash_index_create`, `minhash_index_rebuild` and `minhash_index_drop`: makes
/// the sketch stores of `tbl` those its minhash indexes need (`sketch_store::sync_stores`): one per
/// text column, ngram and unit of an index of a text column, on a table of this node (a
/// lookup of a Citus table verifies on the workers, and reads no store).
#[pg_extern(volatile, schema = "minhash_internal")]
fn _minhash_sync_stores(tbl: Regclass, fcinfo: pg_sys::FunctionCallInfo) {
    let tbl = tbl.0;
    owner::check_owner(tbl);
    if citus::is_citus_table(tbl) {
        return;
    }
    // SAFETY: fcinfo is this call's.
    let fn_oid = unsafe { (*(*fcinfo).flinfo).fn_oid };
    let schema = Extension::of_function(fn_oid).quoted_schema();
    let wanted: Vec<(String, Shingling)> = Spi::connect(|client| {
        let mut wanted = Vec::new();
        let rows = client.select(
            &format!(
                "SELECT i.text_column::pg_catalog.text, i.ngram, i.unit FROM {schema}.minhash_indexes i \
                 WHERE i.tbl OPERATOR(pg_catalog.=) $1 AND i.text_column IS NOT NULL"
            ),
            None,
            &[tbl.into()],
        )?;
        for row in rows {
            if let (Some(column), Some(ngram), Some(unit)) = (
                row.get::<String>(1)?,
                row.get::<i32>(2)?,
                row.get::<String>(3)?,
            ) {
                wanted.push((column, Shingling::new(ngram, &unit).or_raise()));
            }
        }
        Ok::<_, pgrx::spi::Error>(wanted)
    })
    .unwrap_or_else(|e| spi_failed(e));
    sync_stores(tbl, &schema, &wanted);
}
