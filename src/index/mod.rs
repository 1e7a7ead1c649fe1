//! The managed band-key index: the catalog, band tables, sync triggers and query functions are
//! hand-written SQL in `sql/index.sql`; this module adds the Rust pieces they call.

use pgrx::prelude::*;

use crate::core::components::components;
use crate::sql::array_arg;
use crate::sql::error::raise;

#[cfg(any(test, feature = "pg_test"))]
mod tests;

pgrx::extension_sql_file!("../../sql/index.sql", name = "managed_index", finalize);

/// Connected components of the graph with edges `id_a[i] -- id_b[i]`: every node of a component
/// of two or more nodes, with the smallest id of its component, ordered by cluster then id.
#[pg_extern(immutable, strict, parallel_safe)]
fn minhash_components(
    id_a: Array<'_, i64>,
    id_b: Array<'_, i64>,
) -> TableIterator<'static, (name!(id, i64), name!(cluster_id, i64))> {
    let (id_a, id_b) = (array_arg(id_a, "id_a"), array_arg(id_b, "id_b"));
    if id_a.len() != id_b.len() {
        raise(
            pgrx::PgSqlErrorCode::ERRCODE_ARRAY_ELEMENT_ERROR,
            format!(
                "id_a and id_b have different lengths {} and {}",
                id_a.len(),
                id_b.len()
            ),
            None,
        );
    }
    TableIterator::new(components(id_a.into_iter().zip(id_b)))
}
