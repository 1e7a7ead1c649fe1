//! `minhash_index_create`: the arguments checked, the band table named, made and made private,
//! the catalog row written, the sync triggers put on the table's tree, the band table filled
//! and its B-trees built. It runs as the caller, with the search path `pg_catalog, pg_temp` of
//! its `SET` clause (names in its messages print as under it); what runs as the table's owner
//! goes through the internal functions it calls (the backfill, the sketch stores, a text
//! expression's check), each of which switches to the owner itself.

use std::ffi::{c_char, CStr};

use pgrx::datum::DatumWithOid;
use pgrx::fcinfo::{pg_getarg, pg_getarg_datum};
use pgrx::prelude::*;
use pgrx::spi::SpiTupleTable;
use pgrx::PgSqlErrorCode;

use super::{extension_schema, first_row, query, regclass_text, run, run_printed, statement};
use crate::core::params::{
    check_k, check_threshold, float8_text, lsh_params, Banding, Shingling, DEFAULT_MIN_RECALL,
};
use crate::index::def::catalog::check_indexable;
use crate::index::def::text_source::_minhash_text_expression;
use crate::index::write::internal::_minhash_link_band_table;
use crate::pg::error::{raise, OrRaise};
use crate::pg::names::{quote_ident_str, Regclass};

/// Creates a managed MinHash index of `tbl` and fills it; returns its band table.
#[pg_extern(sql = r#"
-- (docs/internals.md, "Creating, rebuilding, checking"; src/index/manage/create.rs)
CREATE FUNCTION @extschema@.minhash_index_create(
    tbl regclass,
    id_column name,
    text_column name DEFAULT NULL,
    k int DEFAULT 128,
    ngram int DEFAULT 5,
    unit text DEFAULT 'char',
    threshold float8 DEFAULT 0.8,
    bands int DEFAULT NULL,
    rows_per_band int DEFAULT NULL,
    text_expression text DEFAULT NULL,
    format int DEFAULT NULL)
RETURNS regclass
LANGUAGE c
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', '@FUNCTION_NAME@';
"#)]
fn minhash_index_create(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Oid {
    // SAFETY: fcinfo is this call's, of the eleven arguments of the signature above.
    let request = unsafe { Request::from_call(fcinfo) };
    request.create(&extension_schema(fcinfo))
}

/// The arguments of one call, the index settings checked and completed as the call goes.
struct Request {
    tbl: pg_sys::Oid,
    id_column: String,
    text_column: Option<String>,
    text_expression: Option<String>,
    k: i32,
    ngram: i32,
    unit: String,
    threshold: f64,
    bands: Option<i32>,
    rows_per_band: Option<i32>,
    format: Option<i32>,
}

/// The table as `pg_class` has it.
struct Relation {
    name: String,
    kind: char,
    persistence: char,
    partition: bool,
    schema: String,
    owner: pg_sys::Oid,
}

/// How Citus manages the table (`_minhash_citus_table`): `kind` NULL for a table it does
/// not manage; `distributed`, `reference` or `other`; the distribution column of a
/// distributed one.
struct Citus {
    kind: Option<String>,
    dist_column: Option<String>,
}

impl Request {
    /// The arguments of the call `fcinfo` (NULL as None; `name` arguments as text).
    ///
    /// # Safety
    /// `fcinfo` is a call of `minhash_index_create` with its eleven arguments.
    unsafe fn from_call(fcinfo: pg_sys::FunctionCallInfo) -> Request {
        // SAFETY: per the contract: each argument is of the signature's type.
        let name = |n: usize| unsafe {
            pg_getarg_datum(fcinfo, n).map(|d| {
                CStr::from_ptr(d.cast_mut_ptr::<c_char>())
                    .to_string_lossy()
                    .into_owned()
            })
        };
        // SAFETY: as above.
        let int = |n: usize| unsafe { pg_getarg::<i32>(fcinfo, n) };
        // SAFETY: as above.
        let (tbl, unit, threshold, text_expression) = unsafe {
            (
                pg_getarg::<pg_sys::Oid>(fcinfo, 0),
                pg_getarg::<String>(fcinfo, 5),
                pg_getarg::<f64>(fcinfo, 6),
                pg_getarg::<String>(fcinfo, 9),
            )
        };
        let (Some(tbl), Some(id_column), Some(k), Some(ngram), Some(unit), Some(threshold)) =
            (tbl, name(1), int(3), int(4), unit, threshold)
        else {
            raise(
                PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
                "only text_column, text_expression, bands, rows_per_band and format may be NULL",
                None,
            )
        };
        Request {
            tbl,
            id_column,
            text_column: name(2),
            text_expression,
            k,
            ngram,
            unit,
            threshold,
            bands: int(7),
            rows_per_band: int(8),
            format: int(10),
        }
    }

    /// Creates the index (see the module documentation); returns its band table.
    fn create(mut self, schema: &str) -> pg_sys::Oid {
        let tbl = self.tbl;
        if self.text_column.is_none() == self.text_expression.is_none() {
            raise(
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                "give either text_column or text_expression",
                Some(
                    "minhash_index_create(tbl, id_column, text_column) indexes a column; \
                     minhash_index_create(tbl, id_column, text_expression => '...') an \
                     expression over the row."
                        .into(),
                ),
            );
        }
        let rel = Relation::of(tbl);
        check_indexable(tbl);
        if let Some(rel) = &rel {
            rel.check_placement(tbl);
        }
        let citus = self.check_citus(rel.as_ref());
        let band_id_type = self.check_id_column(rel.as_ref(), &citus);
        let tenant_type = self.tenant_type(&citus);
        self.check_text();
        self.check_settings();
        let rel = rel.expect("a table that has columns exists");

        // Writers wait until this transaction commits: the backfill sees every row. (From here
        // on the transaction has written, and each statement below reads under a new snapshot,
        // as the PL/pgSQL function's did: an index that a concurrent call committed while this
        // one waited for the lock is seen.)
        run_printed(
            "SELECT pg_catalog.format('LOCK TABLE %s IN SHARE ROW EXCLUSIVE MODE', $1::pg_catalog.regclass)",
            &[tbl.into()],
        );
        self.refuse_duplicate(schema);

        let band_name = free_band_name(&rel);
        // Format 1: one row per row and band, one B-tree; format 2: one row per row, its band
        // keys side by side, each band's keys in a B-tree of their own (docs/contract.md).
        let bands = self.bands.expect("chosen by check_settings");
        let band_format = statement::<i32>(
            "SELECT minhash_internal._minhash_check_format($1, $2)",
            &[self.format.into(), bands.into()],
        )
        .expect("a format");
        self.format = Some(band_format);
        let band = create_band_table(
            &rel,
            &band_name,
            &band_id_type,
            band_format,
            bands,
            tenant_type,
        );
        run_printed(
            "SELECT pg_catalog.format('COMMENT ON TABLE %s IS %L', $1::pg_catalog.regclass,
                    pg_catalog.format('pg_minhash band keys of %s; maintained by triggers',
                                      $2::pg_catalog.regclass))",
            &[band.into(), tbl.into()],
        );
        make_private(band, rel.owner);
        if let Some(kind) = &citus.kind {
            run(
                "SELECT minhash_internal._minhash_citus_distribute($1::pg_catalog.regclass,
                                                                   $2::pg_catalog.regclass, $3)",
                &[band.into(), tbl.into(), kind.clone().into()],
            );
        }
        _minhash_link_band_table(Regclass(tbl), Regclass(band));
        self.insert_catalog_row(schema, band, rel.kind == 'p');

        // The sync triggers (once per table, for all its indexes), on every table of a
        // partition tree: a statement fires the statement triggers of the table it names only
        // (src/index/write/sync.rs).
        run(
            "SELECT minhash_internal._minhash_sync_triggers($1::pg_catalog.regclass, true)",
            &[tbl.into()],
        );
        run(
            "SELECT minhash_internal._minhash_sync_triggers(p, true)
             FROM minhash_internal._minhash_partitions($1::pg_catalog.regclass) p",
            &[tbl.into()],
        );
        run(
            "SELECT minhash_internal._minhash_backfill($1::pg_catalog.regclass)",
            &[band.into()],
        );
        run(
            &format!(
                "SELECT minhash_internal._minhash_band_indexes(i) FROM {schema}.minhash_indexes i
                 WHERE i.band_table OPERATOR(pg_catalog.=) $1::pg_catalog.regclass"
            ),
            &[band.into()],
        );
        // The sketch store that lookups for the k most similar rows and low thresholds sweep
        // (an index of access method minhash_sketch on the table, src/index/read/sketch_store.rs)
        run(
            "SELECT minhash_internal._minhash_sync_stores($1::pg_catalog.regclass)",
            &[tbl.into()],
        );
        if citus.kind.is_none() {
            // Rows a data-only restore copies into the band table after the sync triggers
            // indexed the table are dropped (src/index/def/restore.rs). (Citus has its own way
            // of moving tables and no triggers on band tables.)
            run_printed(
                "SELECT pg_catalog.format('CREATE TRIGGER minhash_bands_load BEFORE INSERT ON %s
                        FOR EACH ROW EXECUTE FUNCTION minhash_internal._minhash_band_load()',
                        $1::pg_catalog.regclass)",
                &[band.into()],
            );
            // (Citus analyzes the shards of a Citus table on the workers, by their autovacuum)
            run_printed(
                "SELECT pg_catalog.format('ANALYZE %s', $1::pg_catalog.regclass)",
                &[band.into()],
            );
        }
        band
    }

    /// How Citus manages the table, refused where an index cannot follow it (0A000).
    fn check_citus(&self, rel: Option<&Relation>) -> Citus {
        let tbl = self.tbl;
        // A table of Citus: its band table becomes a Citus table of the same kind, written by
        // the sync triggers on the table's shards (README, "Scaling out with Citus").
        let (kind, dist_column) = first_row(
            "SELECT c.kind, c.dist_column::pg_catalog.text
             FROM minhash_internal._minhash_citus_table($1::pg_catalog.regclass) c",
            &[tbl.into()],
            |row| Ok((row.get::<String>(1)?, row.get::<String>(2)?)),
        )
        .unwrap_or((None, None));
        let refuse = |message: String, hint: &str| -> ! {
            raise(
                PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                message,
                Some(hint.into()),
            )
        };
        match kind.as_deref() {
            Some("other") => refuse(
                format!(
                    "{} is a Citus table that is neither distributed by a column nor a reference table",
                    regclass_text(tbl)
                ),
                "Index a hash-distributed table, a reference table or a table Citus does not manage.",
            ),
            Some(_) if rel.is_some_and(|rel| rel.kind == 'p') => refuse(
                format!("{} is a partitioned Citus table", regclass_text(tbl)),
                "A minhash index of a Citus table needs a table that is not partitioned.",
            ),
            Some(_) if self.text_expression.is_some() => refuse(
                format!(
                    "a minhash index of Citus table {} cannot index a text expression",
                    regclass_text(tbl)
                ),
                "Index a stored generated column of that expression: ALTER TABLE ... ADD COLUMN \
                 ... text GENERATED ALWAYS AS (...) STORED.",
            ),
            _ => Citus { kind, dist_column },
        }
    }

    /// The id column, checked to be a key of the table's rows that band rows can hold: the
    /// type the band table stores it as (with its collation).
    fn check_id_column(&self, rel: Option<&Relation>, citus: &Citus) -> String {
        let tbl = self.tbl;
        let id_column = &self.id_column;
        let found = first_row(
            &format!(
                "SELECT a.atttypid, a.attnum, a.attcollation,
                        CASE WHEN a.atttypid OPERATOR(pg_catalog.=) ANY (ARRAY['smallint'::pg_catalog.regtype,
                                  'integer'::pg_catalog.regtype, 'bigint'::pg_catalog.regtype]::pg_catalog.oid[])
                             THEN 'bigint' ELSE pg_catalog.format_type(a.atttypid, a.atttypmod) END
                 {COLUMN_NAMED}"
            ),
            &[tbl.into(), id_column.clone().into()],
            |row| {
                Ok((
                    row.get::<pg_sys::Oid>(1)?.expect("a type"),
                    row.get::<i16>(2)?.expect("an attnum"),
                    row.get::<pg_sys::Oid>(3)?.expect("a collation"),
                    row.get::<String>(4)?.expect("a type name"),
                ))
            },
        );
        let Some((typid, attnum, collation, band_type)) = found else {
            no_column(id_column, tbl)
        };
        // The id may be of any type: a unique B-tree on it alone is what makes it a row's key.
        // A partitioned table's unique keys must hold its partition key too: one that holds
        // the id is taken (the id is then unique within a partition; see the README on
        // repeated ids). (PostgreSQL gives a partitioned table with a unique index no foreign
        // partitions, whose writes would fire no statement triggers with transition tables)
        // (a deferrable key lets two rows share an id until commit, and their band rows with
        // it) A Citus table distributed by another column (a tenant) needs a unique key of
        // that column and the id (Citus refuses one without the distribution column): the id
        // is unique within a tenant; its band rows carry the tenant, which places them on the
        // row's shard.
        let unique_key = "SELECT EXISTS (SELECT FROM pg_catalog.pg_index x
                WHERE x.indrelid OPERATOR(pg_catalog.=) $1 AND x.indisunique AND x.indimmediate
                  AND x.indpred IS NULL AND x.indexprs IS NULL AND ";
        if let Some(dist_column) = citus.tenant_column(id_column) {
            let unique = statement::<bool>(
                &format!(
                    "{unique_key} x.indnkeyatts OPERATOR(pg_catalog.=) 2
                  AND (x.indkey::pg_catalog.int2[])[0:1] OPERATOR(pg_catalog.@>) ARRAY[$2,
                      (SELECT a.attnum FROM pg_catalog.pg_attribute a
                       WHERE a.attrelid OPERATOR(pg_catalog.=) $1
                         AND a.attname OPERATOR(pg_catalog.=) $3::pg_catalog.name)])"
                ),
                &[tbl.into(), attnum.into(), dist_column.to_string().into()],
            );
            if unique != Some(true) {
                raise(
                    PgSqlErrorCode::ERRCODE_INVALID_COLUMN_REFERENCE,
                    format!(
                        "id column \"{id_column}\" of table {} is not unique within its \
                         distribution column \"{dist_column}\"",
                        regclass_text(tbl)
                    ),
                    Some(format!(
                        "Add a primary key or unique constraint, not deferrable, on the two \
                         columns: PRIMARY KEY ({}, {}).",
                        quote_ident_str(dist_column),
                        quote_ident_str(id_column)
                    )),
                );
            }
        } else {
            let partitioned = rel.is_some_and(|rel| rel.kind == 'p');
            let unique = statement::<bool>(
                &format!(
                    "{unique_key} CASE WHEN $3
                       THEN $2 OPERATOR(pg_catalog.=) ANY ((x.indkey::pg_catalog.int2[])
                                [0:x.indnkeyatts OPERATOR(pg_catalog.-) 1])
                       ELSE x.indnkeyatts OPERATOR(pg_catalog.=) 1
                            AND x.indkey[0] OPERATOR(pg_catalog.=) $2 END)"
                ),
                &[tbl.into(), attnum.into(), partitioned.into()],
            );
            if unique != Some(true) {
                let hint = if partitioned {
                    "Add a primary key or unique constraint, not deferrable, that holds that \
                     column and the partition key, e.g. PRIMARY KEY (id, created_at)."
                } else {
                    "Add a primary key or unique constraint on that column alone, not \
                     deferrable. A key of several columns cannot identify rows for a minhash \
                     index: add a single-column key, e.g. an identity column."
                };
                raise(
                    PgSqlErrorCode::ERRCODE_INVALID_COLUMN_REFERENCE,
                    format!(
                        "id column \"{id_column}\" of table {} is not unique",
                        regclass_text(tbl)
                    ),
                    Some(hint.into()),
                );
            }
        }
        // (ids are bigint or bytes in Rust, compared byte for byte; a collation that calls
        // different strings equal would let two rows' ids differ only in bytes)
        if collation != pg_sys::InvalidOid
            && statement::<bool>(
                "SELECT EXISTS (SELECT FROM pg_catalog.pg_collation c
                 WHERE c.oid OPERATOR(pg_catalog.=) $1 AND NOT c.collisdeterministic)",
                &[collation.into()],
            ) == Some(true)
        {
            raise(
                PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                format!(
                    "id column \"{id_column}\" of table {} has a nondeterministic collation",
                    regclass_text(tbl)
                ),
                Some("Index the table through a key with a deterministic collation.".into()),
            );
        }
        // (band rows are written and deleted through arrays of ids)
        // SAFETY: a catalog lookup by OID.
        if unsafe { pg_sys::get_array_type(typid) } == pg_sys::InvalidOid {
            raise(
                PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                format!(
                    "id column \"{id_column}\" of table {} is of type {}, which has no array type",
                    regclass_text(tbl),
                    type_text(typid)
                ),
                Some("Index the table through a key of a scalar type.".into()),
            );
        }
        if collation != pg_sys::InvalidOid && collation != pg_sys::DEFAULT_COLLATION_OID {
            let collation = statement::<String>(
                "SELECT $1::pg_catalog.regcollation::pg_catalog.text",
                &[collation.into()],
            )
            .expect("a collation");
            format!("{band_type} COLLATE {collation}")
        } else {
            band_type
        }
    }

    /// Of a Citus table distributed by another column than the id (a tenant): that column's
    /// type, as the band table's tenant column repeats it (docs/citus.md).
    fn tenant_type(&self, citus: &Citus) -> Option<String> {
        let dist_column = citus.tenant_column(&self.id_column)?;
        statement::<String>(
            &format!(
                "SELECT pg_catalog.format_type(a.atttypid, a.atttypmod)
                        OPERATOR(pg_catalog.||) CASE WHEN a.attcollation OPERATOR(pg_catalog.<>) 0
                             AND a.attcollation OPERATOR(pg_catalog.<>) (SELECT t.typcollation
                                 FROM pg_catalog.pg_type t WHERE t.oid OPERATOR(pg_catalog.=) a.atttypid)
                           THEN ' COLLATE ' OPERATOR(pg_catalog.||) a.attcollation::pg_catalog.regcollation::pg_catalog.text
                           ELSE '' END
                 {COLUMN_NAMED}"
            ),
            &[self.tbl.into(), dist_column.to_string().into()],
        )
    }

    /// The text expression checked and printed in the form the catalog keeps (names outside
    /// pg_catalog qualified; 42P17 if it is not IMMUTABLE), or the text column checked.
    fn check_text(&mut self) {
        let tbl = self.tbl;
        if let Some(expression) = &self.text_expression {
            self.text_expression = Some(_minhash_text_expression(Regclass(tbl), expression));
            return;
        }
        let column = self
            .text_column
            .as_deref()
            .expect("a text column or expression");
        let found = first_row(
            &format!("SELECT a.atttypid, a.attgenerated OPERATOR(pg_catalog.=) 'v' {COLUMN_NAMED}"),
            &[tbl.into(), column.to_string().into()],
            |row| {
                Ok((
                    row.get::<pg_sys::Oid>(1)?.expect("a type"),
                    row.get::<bool>(2)?.unwrap_or(false),
                ))
            },
        );
        let Some((typid, is_virtual)) = found else {
            no_column(column, tbl)
        };
        if typid != pg_sys::TEXTOID && typid != pg_sys::VARCHAROID {
            let hint = statement::<String>(
                "SELECT pg_catalog.format('Index an expression instead: text_expression => %L.',
                                          pg_catalog.format('%I::text', $1))",
                &[column.to_string().into()],
            );
            raise(
                PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH,
                format!(
                    "text column \"{column}\" is of type {}, not text or character varying",
                    type_text(typid)
                ),
                hint,
            );
        }
        // (PostgreSQL 18: a virtual generated column has no value in the rows triggers see)
        if is_virtual {
            raise(
                PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                format!(
                    "text column \"{column}\" of table {} is a virtual generated column",
                    regclass_text(tbl)
                ),
                Some(
                    "Make it a stored generated column (GENERATED ALWAYS AS (...) STORED).".into(),
                ),
            );
        }
    }

    /// The settings checked with the core's own messages (those of `minhash`, `lsh_params`
    /// and `lsh_bands`), and the banding chosen if none was given.
    fn check_settings(&mut self) {
        let k = check_k(self.k).or_raise();
        Shingling::new(self.ngram, &self.unit).or_raise();
        self.threshold = check_threshold(self.threshold).or_raise();
        let banding = match (self.bands, self.rows_per_band) {
            (None, Some(_)) => raise(
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                "rows_per_band needs bands",
                None,
            ),
            (None, None) => {
                let best = lsh_params(self.threshold, self.k, DEFAULT_MIN_RECALL).or_raise();
                let Some(best) = best.first() else {
                    raise(
                        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                        format!(
                            "no banding of {} slots reaches {DEFAULT_MIN_RECALL} recall at threshold {}",
                            self.k,
                            float8_text(self.threshold)
                        ),
                        Some("Use a larger k.".into()),
                    )
                };
                Banding {
                    bands: best.bands,
                    rows: best.rows,
                }
            }
            (Some(bands), rows) => Banding::new(k, bands, rows).or_raise(),
        };
        self.bands = Some(banding.bands as i32);
        self.rows_per_band = Some(banding.rows as i32);
    }

    /// Raises 42710 if the table has an index of the same text with the same settings (it
    /// would only cost writes).
    fn refuse_duplicate(&self, schema: &str) {
        let same = statement::<bool>(
            &format!(
                "SELECT EXISTS (SELECT FROM {schema}.minhash_indexes i
                 WHERE i.tbl OPERATOR(pg_catalog.=) $1::pg_catalog.regclass
                   AND i.id_column OPERATOR(pg_catalog.=) $2::pg_catalog.name
                   AND (i.text_column OPERATOR(pg_catalog.=) $3::pg_catalog.name
                        OR (i.text_column IS NULL AND $3 IS NULL))
                   AND (i.text_expression OPERATOR(pg_catalog.=) $4::pg_catalog.text
                        OR (i.text_expression IS NULL AND $4 IS NULL))
                   AND i.k OPERATOR(pg_catalog.=) $5 AND i.ngram OPERATOR(pg_catalog.=) $6
                   AND i.unit OPERATOR(pg_catalog.=) $7 AND i.threshold OPERATOR(pg_catalog.=) $8
                   AND i.bands OPERATOR(pg_catalog.=) $9
                   AND i.rows_per_band OPERATOR(pg_catalog.=) $10)"
            ),
            &self.catalog_args(),
        );
        if same == Some(true) {
            raise(
                PgSqlErrorCode::ERRCODE_DUPLICATE_OBJECT,
                format!(
                    "table {} already has a minhash index of this text with these settings",
                    regclass_text(self.tbl)
                ),
                Some(
                    "Use minhash_index_rebuild() to rebuild it, or minhash_index_drop() first."
                        .into(),
                ),
            );
        }
    }

    /// The settings as parameters $1 to $11 of the catalog's columns tbl, id_column,
    /// text_column, text_expression, k, ngram, unit, threshold, bands, rows_per_band, format.
    fn catalog_args(&self) -> Vec<DatumWithOid<'static>> {
        vec![
            self.tbl.into(),
            self.id_column.clone().into(),
            self.text_column.clone().into(),
            self.text_expression.clone().into(),
            self.k.into(),
            self.ngram.into(),
            self.unit.clone().into(),
            self.threshold.into(),
            self.bands.into(),
            self.rows_per_band.into(),
            self.format.into(),
        ]
    }

    /// Writes the index's catalog row, with band table `band` (and of a partitioned table,
    /// the tables of its tree).
    fn insert_catalog_row(&self, schema: &str, band: pg_sys::Oid, partitioned: bool) {
        let mut args = self.catalog_args();
        args.push(band.into());
        args.push(partitioned.into());
        run(
            &format!(
                "INSERT INTO {schema}.minhash_indexes (tbl, id_column, text_column, band_table,
                     k, ngram, unit, threshold, bands, rows_per_band, created_at, format,
                     text_expression, partitions)
                 VALUES ($1::pg_catalog.regclass, $2::pg_catalog.name, $3::pg_catalog.name,
                         $12::pg_catalog.regclass, $5, $6, $7, $8, $9, $10, pg_catalog.now(), $11,
                         $4::pg_catalog.text,
                         CASE WHEN $13 THEN ARRAY(SELECT minhash_internal._minhash_partitions(
                                                         $1::pg_catalog.regclass)) END)"
            ),
            &args,
        );
    }
}

impl Relation {
    /// Relation `tbl`, if it exists.
    fn of(tbl: pg_sys::Oid) -> Option<Relation> {
        let row = first_row(
            "SELECT c.relname::pg_catalog.text, c.relkind::pg_catalog.text,
                    c.relpersistence::pg_catalog.text, c.relispartition,
                    n.nspname::pg_catalog.text, c.relowner
             FROM pg_catalog.pg_class c
             JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
             WHERE c.oid OPERATOR(pg_catalog.=) $1",
            &[tbl.into()],
            |row| {
                let text = |n: usize| -> pgrx::spi::Result<String> {
                    Ok(row.get::<String>(n)?.unwrap_or_default())
                };
                let first = |s: String| s.chars().next().unwrap_or('\0');
                Ok(Relation {
                    name: text(1)?,
                    kind: first(text(2)?),
                    persistence: first(text(3)?),
                    partition: row.get::<bool>(4)?.unwrap_or(false),
                    schema: text(5)?,
                    owner: row.get::<pg_sys::Oid>(6)?.unwrap_or(pg_sys::InvalidOid),
                })
            },
        );
        row
    }

    /// Raises 0A000 for a table whose index could not follow its rows (a partition, a
    /// temporary table, a tree of mixed persistence, inheritance), 0A000 for a database
    /// that is not UTF8, 42501 unless the caller has the owner's privileges.
    fn check_placement(&self, tbl: pg_sys::Oid) {
        let refuse = |message: String, hint: String| -> ! {
            raise(
                PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                message,
                Some(hint),
            )
        };
        // (an index covers a whole partition tree; its triggers would not see rows written
        // through the tables above the partition)
        if self.partition {
            let (parent, root) = first_row(
                "SELECT (SELECT h.inhparent::pg_catalog.regclass::pg_catalog.text
                         FROM pg_catalog.pg_inherits h WHERE h.inhrelid OPERATOR(pg_catalog.=) $1),
                        pg_catalog.pg_partition_root($1::pg_catalog.regclass)::pg_catalog.text",
                &[tbl.into()],
                |row| Ok((row.get::<String>(1)?, row.get::<String>(2)?)),
            )
            .expect("a row");
            let (parent, root) = (parent.unwrap_or_default(), root.unwrap_or_default());
            refuse(
                format!("{} is a partition of {parent}", regclass_text(tbl)),
                format!("Index the partitioned table at the root of its tree, {root}."),
            );
        }
        // (its catalog row would outlive the session, and pg_dump would carry it)
        if self.persistence == 't' {
            refuse(
                format!("{} is a temporary table", regclass_text(tbl)),
                "Index a permanent or unlogged table.".into(),
            );
        }
        // (one band table, of the root's persistence, serves the whole tree: a crash must
        // empty both or neither)
        let mixed = statement::<bool>(
            "SELECT EXISTS (SELECT FROM pg_catalog.pg_partition_tree($1::pg_catalog.regclass) p
                            JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) p.relid
                            WHERE c.relpersistence OPERATOR(pg_catalog.<>) $2::pg_catalog.\"char\")",
            &[tbl.into(), self.persistence.to_string().into()],
        );
        if mixed == Some(true) {
            refuse(
                format!(
                    "the partitions of {} are not all of its persistence",
                    regclass_text(tbl)
                ),
                "Make every partition logged, or every one unlogged, like the partitioned table."
                    .into(),
            );
        }
        // (the Rust side reads text as UTF-8; the contract hashes UTF-8 bytes)
        // SAFETY: reads the database's encoding.
        let encoding = unsafe { pg_sys::GetDatabaseEncoding() };
        if encoding != pg_sys::pg_enc::PG_UTF8 as i32 {
            // SAFETY: the name of the database's encoding, a static string.
            let name = unsafe { CStr::from_ptr(pg_sys::GetDatabaseEncodingName()) };
            refuse(
                format!(
                    "database encoding {} is not supported",
                    name.to_string_lossy()
                ),
                "A minhash index needs a UTF8 database: CREATE DATABASE ... ENCODING 'UTF8' \
                 TEMPLATE template0."
                    .into(),
            );
        }
        // (a query of a parent reads its children's rows, which the triggers of the parent
        // never see)
        if self.kind == 'r'
            && statement::<bool>(
                "SELECT EXISTS (SELECT FROM pg_catalog.pg_inherits h
                                WHERE h.inhrelid OPERATOR(pg_catalog.=) $1
                                   OR h.inhparent OPERATOR(pg_catalog.=) $1)",
                &[tbl.into()],
            ) == Some(true)
        {
            refuse(
                format!("{} has inheritance parents or children", regclass_text(tbl)),
                "Index a table that neither inherits nor is inherited from, or a partitioned \
                 table."
                    .into(),
            );
        }
        // SAFETY: a role membership check of two role OIDs (pg_has_role(owner, 'USAGE')).
        if !unsafe { pg_sys::has_privs_of_role(pg_sys::GetUserId(), self.owner) } {
            raise(
                PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
                format!("must be owner of table {}", regclass_text(tbl)),
                None,
            );
        }
    }
}

impl Citus {
    /// Of a table distributed by another column than the id `id_column`: that column.
    fn tenant_column(&self, id_column: &str) -> Option<&str> {
        match (self.kind.as_deref(), self.dist_column.as_deref()) {
            (Some("distributed"), Some(column)) if column != id_column => Some(column),
            _ => None,
        }
    }
}

/// `<table>_minhash_bands`, or with the first number that makes it free (a second index, or a
/// table renamed and another created under its old name), as PostgreSQL names indexes; 42P07
/// if none of the first thousand is.
fn free_band_name(rel: &Relation) -> String {
    const SUFFIX: &str = "_minhash_bands";
    let mut band_name = String::new();
    for n in 0..=1000 {
        let number = if n == 0 { String::new() } else { n.to_string() };
        // (left() in characters, as the name always was cut)
        let keep = 63 - SUFFIX.len() - number.len();
        band_name = rel.name.chars().take(keep).collect::<String>() + SUFFIX + &number;
        if !relation_exists(&rel.schema, &band_name) {
            return band_name;
        }
    }
    raise(
        PgSqlErrorCode::ERRCODE_DUPLICATE_TABLE,
        format!(
            "relation {}.{} already exists",
            quote_ident_str(&rel.schema),
            quote_ident_str(&band_name)
        ),
        None,
    )
}

/// Whether `schema.name` names a relation.
fn relation_exists(schema: &str, name: &str) -> bool {
    statement::<bool>(
        "SELECT pg_catalog.to_regclass(pg_catalog.format('%I.%I', $1, $2)) IS NOT NULL",
        &[schema.to_string().into(), name.to_string().into()],
    ) == Some(true)
}

/// Makes the band table `band_name` in the table's schema, of the table's persistence (unlogged
/// like its table: after a crash both come back empty), with the columns of format
/// `band_format` (`bands` bands): `id` of type `band_id_type` (bigint for integer keys, the
/// key's own type otherwise; see src/index/def/row_id.rs), the
/// band values (among them sketch1 and sketch2: 128 signature bits a lookup compares before
/// fetching a candidate), and of a table distributed by another column than the id (a
/// tenant), `tenant` of type `tenant_type`. Returns its OID.
fn create_band_table(
    rel: &Relation,
    band_name: &str,
    band_id_type: &str,
    band_format: i32,
    bands: i32,
    tenant_type: Option<String>,
) -> pg_sys::Oid {
    let columns = statement::<String>(
        "SELECT pg_catalog.string_agg(pg_catalog.format('%I bigint NOT NULL', u.col), ', ' ORDER BY u.pos)
         FROM pg_catalog.unnest(minhash_internal._minhash_band_value_columns($1, $2))
              WITH ORDINALITY AS u(col, pos)",
        &[band_format.into(), bands.into()],
    )
    .expect("band columns");
    let unlogged = if rel.persistence == 'u' {
        "UNLOGGED"
    } else {
        ""
    };
    let tenant = tenant_type.map_or(String::new(), |t| format!(", tenant {t} NOT NULL"));
    run(
        &format!(
            "CREATE {unlogged} TABLE {}.{} (id {band_id_type} NOT NULL, {columns}{tenant})",
            quote_ident_str(&rel.schema),
            quote_ident_str(band_name),
        ),
        &[],
    );
    statement::<pg_sys::Oid>(
        "SELECT pg_catalog.format('%I.%I', $1, $2)::pg_catalog.regclass::pg_catalog.oid",
        &[rel.schema.clone().into(), band_name.to_string().into()],
    )
    .expect("the band table")
}

/// The band table belongs to the table's owner `owner`, whoever made it (a superuser, or
/// another member of the owning role), like the table's own indexes, and is private to that
/// role: default privileges may have granted something on it.
fn make_private(band: pg_sys::Oid, owner: pg_sys::Oid) {
    run_printed(
        "SELECT pg_catalog.format('ALTER TABLE %s OWNER TO %I', $1::pg_catalog.regclass,
                                  pg_catalog.pg_get_userbyid($2))",
        &[band.into(), owner.into()],
    );
    let revokes = query(
        "SELECT pg_catalog.format('REVOKE ALL ON %s FROM %s', $1::pg_catalog.regclass, g.grantee)
             FROM (SELECT DISTINCT CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                                        ELSE pg_catalog.quote_ident(r.rolname) END AS grantee
                   FROM pg_catalog.pg_class c
                   CROSS JOIN LATERAL pg_catalog.aclexplode(c.relacl) a
                   LEFT JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) a.grantee
                   WHERE c.oid OPERATOR(pg_catalog.=) $1
                     AND a.grantee OPERATOR(pg_catalog.<>) $2) g",
        &[band.into(), owner.into()],
        strings,
    );
    for revoke in revokes {
        run(&revoke, &[]);
    }
}

/// Raises 42703: table `tbl` has no column `column`.
fn no_column(column: &str, tbl: pg_sys::Oid) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_UNDEFINED_COLUMN,
        format!(
            "column \"{column}\" of table {} does not exist",
            regclass_text(tbl)
        ),
        None,
    )
}

/// Type `typid` as `regtype` prints it under this function's search path.
fn type_text(typid: pg_sys::Oid) -> String {
    statement::<String>(
        "SELECT $1::pg_catalog.regtype::pg_catalog.text",
        &[typid.into()],
    )
    .expect("an OID prints")
}

/// The column of table $1 named $2 (text), as `a`, if it exists.
const COLUMN_NAMED: &str = "FROM pg_catalog.pg_attribute a
    WHERE a.attrelid OPERATOR(pg_catalog.=) $1 AND a.attname OPERATOR(pg_catalog.=) $2::pg_catalog.name
      AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped";

/// The first column of each row of `table`, as text.
fn strings(table: SpiTupleTable<'_>) -> pgrx::spi::Result<Vec<String>> {
    let mut out = Vec::new();
    for row in table {
        if let Some(s) = row.get::<String>(1)? {
            out.push(s);
        }
    }
    Ok(out)
}
