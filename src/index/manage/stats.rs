//! `minhash_index_stats(tbl)`: rows, keys and bucket sizes of an index, counted by reading its
//! band rows as the table's owner.

use pgrx::prelude::*;
use pgrx::JsonB;

use crate::pg::names::{quote_literal, regclass_name, Regclass};

use super::{band_rows_and_total, extension_schema, function_oid, table_argument};
use crate::index::def::citus::is_citus_table;
use crate::index::read::access_plan::Index;
use crate::index::run::owner::{owner_statement, with_safe_search_path};
use crate::index::run::progress::run_id;

/// The rows indexed, the band rows (keys), the distinct keys (buckets), the largest bucket, and
/// the buckets by size in power-of-two classes ("1", "2", "3-4", "5-8", ...), read as the
/// table's owner. The index is resolved as the whole-table searches resolve it
/// ([`Index::of_rows`]).
#[pg_extern(volatile, parallel_unsafe)]
#[allow(clippy::type_complexity)] // (the SQL function's result columns)
fn minhash_index_stats(
    tbl: Option<Regclass>,
    fcinfo: pg_sys::FunctionCallInfo,
) -> TableIterator<
    'static,
    (
        name!(rows_indexed, Option<i64>),
        name!(keys, Option<i64>),
        name!(distinct_buckets, Option<i64>),
        name!(largest_bucket, Option<i64>),
        name!(bucket_histogram, Option<JsonB>),
    ),
> {
    let tbl = table_argument(tbl);
    let stats = with_safe_search_path(|| {
        let index = Spi::connect(|client| Index::of_rows(client, function_oid(fcinfo), tbl));
        let def = &index.def;
        let (band_rows, total) =
            band_rows_and_total(&extension_schema(fcinfo), def.band_table, false);
        // The rows of each key (its bucket, of_id 0) and of each id (of_id 1): on one node as
        // two grouping sets of one read of the band rows, with progress (run::progress) over
        // them (one in 64 counted for 64); on Citus, which plans no grouping sets, as two
        // groupings.
        let groups = if is_citus_table(def.tbl) {
            // (of a table distributed by a tenant, a row is its id and tenant: ids repeat
            // across tenants)
            format!(
                "SELECT pg_catalog.count(*) AS size, 0 AS of_id FROM {band_rows} b GROUP BY b.key
                 UNION ALL
                 SELECT pg_catalog.count(*), 1 FROM {band_rows} b GROUP BY b.id{}",
                if def.tenant.is_some() {
                    ", b.tenant"
                } else {
                    ""
                }
            )
        } else {
            format!(
                "SELECT pg_catalog.count(*) AS size, GROUPING(b.key) AS of_id
                 FROM (SELECT b.*, CASE WHEN (b.key OPERATOR(pg_catalog.&) 63)
                                             OPERATOR(pg_catalog.=) 0
                                        THEN minhash_internal._minhash_progress({}, {}, {total},
                                                                                {}, 64) END
                       FROM {band_rows} b) b
                 GROUP BY GROUPING SETS ((b.key), (b.id))",
                quote_literal(&format!(
                    "minhash_index_stats on {}",
                    regclass_name(def.tbl)
                )),
                quote_literal("band rows"),
                run_id()
            )
        };
        let sql = format!(
            "WITH groups AS MATERIALIZED ({groups}),
             buckets AS (SELECT g.size FROM groups g WHERE g.of_id OPERATOR(pg_catalog.=) 0),
             classes AS (
                 SELECT CASE WHEN b.size OPERATOR(pg_catalog.<=) 2 THEN b.size::pg_catalog.text
                             ELSE (b.p OPERATOR(pg_catalog./) 2 OPERATOR(pg_catalog.+) 1)::pg_catalog.text
                                  OPERATOR(pg_catalog.||) '-' OPERATOR(pg_catalog.||)
                                  b.p::pg_catalog.text END AS label,
                        pg_catalog.min(b.size) AS lo, pg_catalog.count(*) AS n
                 FROM (SELECT u.size,
                              (2 OPERATOR(pg_catalog.^) pg_catalog.ceil(pg_catalog.log(2, u.size)))
                                  ::pg_catalog.int8 AS p
                       FROM buckets u) b
                 GROUP BY 1)
             SELECT (SELECT pg_catalog.count(*) FROM groups g WHERE g.of_id OPERATOR(pg_catalog.=) 1),
                    (SELECT coalesce(pg_catalog.sum(u.size), 0)::pg_catalog.int8 FROM buckets u),
                    (SELECT pg_catalog.count(*) FROM buckets u),
                    (SELECT coalesce(pg_catalog.max(u.size), 0) FROM buckets u),
                    (SELECT coalesce(pg_catalog.jsonb_object_agg(c.label, c.n ORDER BY c.lo),
                                     '{{}}') FROM classes c)"
        );
        owner_statement(def.tbl, &sql, |table| {
            let row = table.first();
            Ok((
                row.get::<i64>(1)?,
                row.get::<i64>(2)?,
                row.get::<i64>(3)?,
                row.get::<i64>(4)?,
                row.get::<JsonB>(5)?,
            ))
        })
    });
    TableIterator::once(stats)
}
