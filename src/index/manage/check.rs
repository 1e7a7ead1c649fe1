//! `minhash_index_check(tbl)`: the band rows an index misses and holds in excess of its table's
//! rows, counted by reading both as the table's owner.

use pgrx::prelude::*;

use crate::pg::names::{qualified_name, quote_literal, regclass_name, Regclass};

use super::{band_rows_and_total, extension_schema, function_oid, statement, table_argument};
use crate::index::def::citus::is_citus_table;
use crate::index::read::access_plan::Index;
use crate::index::run::owner::{owner_statement, with_safe_search_path};
use crate::index::run::progress::run_id;

/// The band rows the table's rows give (expected) against those the band table holds, as
/// multisets: `missing` = expected EXCEPT ALL held, `orphaned` = held EXCEPT ALL expected, both
/// from one grouping of the two, read as the table's owner. The index is resolved as the
/// whole-table searches resolve it ([`Index::of_rows`]).
#[pg_extern(volatile, parallel_unsafe)]
fn minhash_index_check(
    tbl: Option<Regclass>,
    fcinfo: pg_sys::FunctionCallInfo,
) -> TableIterator<'static, (name!(missing, Option<i64>), name!(orphaned, Option<i64>))> {
    let tbl = table_argument(tbl);
    let counts = with_safe_search_path(|| {
        let index = Spi::connect(|client| Index::of_rows(client, function_oid(fcinfo), tbl));
        let def = &index.def;
        let schema = extension_schema(fcinfo);
        let (band_rows, total) = band_rows_and_total(&schema, def.band_table, true);
        let mut source = qualified_name(def.tbl);
        let mut band = band_rows.clone();
        // Progress (run::progress) as the rows of the table are signed and the band rows read
        // (one in 64 counted for 64), of about as many as the table and the band table had
        // when last vacuumed, analyzed or indexed (of format 2, a row holds `bands` band rows);
        // in the target list, where it leaves the planner's estimates alone.
        // (Not on a Citus table, whose rows are read on the workers.)
        if !is_citus_table(def.tbl) {
            let progress = format!(
                "minhash_internal._minhash_progress({}, {}, {total}, {}, ",
                quote_literal(&format!(
                    "minhash_index_check on {}",
                    regclass_name(def.tbl)
                )),
                quote_literal("rows and band rows"),
                run_id()
            );
            source = format!("(SELECT t.*, {progress}1) FROM {source} t)");
            band = format!(
                "(SELECT b.*, CASE WHEN (b.key OPERATOR(pg_catalog.&) 63) OPERATOR(pg_catalog.=) 0
                                   THEN {progress}64) END
                  FROM {band_rows} b)"
            );
        }
        let expected: String = statement(
            &format!(
                "SELECT minhash_internal._minhash_band_rows_sql(i, $2)
                 FROM {schema}.minhash_indexes i WHERE i.band_table OPERATOR(pg_catalog.=) $1"
            ),
            &[def.band_table.into(), source.into()],
        )
        .expect("the catalog row of a resolved index");
        // (of a table distributed by a tenant, a band row is of its row's tenant too)
        let tenant = |alias: &str| match def.tenant {
            Some(_) => format!(", {alias}.tenant"),
            None => String::new(),
        };
        let sql = format!(
            "SELECT coalesce(pg_catalog.sum(GREATEST(g.expected OPERATOR(pg_catalog.-) g.held, 0)), 0)
                        ::pg_catalog.int8,
                    coalesce(pg_catalog.sum(GREATEST(g.held OPERATOR(pg_catalog.-) g.expected, 0)), 0)
                        ::pg_catalog.int8
             FROM (SELECT pg_catalog.count(*) FILTER (WHERE r.expected) AS expected,
                          pg_catalog.count(*) FILTER (WHERE NOT r.expected) AS held
                   FROM (SELECT e.id, e.key, e.sketch1, e.sketch2{}, true AS expected
                         FROM ({expected}) e
                         UNION ALL
                         SELECT b.id, b.key, b.sketch1, b.sketch2{}, false FROM {band} b) r
                   GROUP BY r.id, r.key, r.sketch1, r.sketch2{}) g",
            tenant("e"),
            tenant("b"),
            tenant("r"),
        );
        owner_statement(def.tbl, &sql, |table| {
            let row = table.first();
            Ok((row.get::<i64>(1)?, row.get::<i64>(2)?))
        })
    });
    TableIterator::once(counts)
}
