//! The backend's prepared statements: each SQL text the index runs through SPI (catalog reads,
//! lookups, band-table writes) is planned on first use and kept, by its text and whether it
//! writes, so a lookup or a flagged insert costs no parsing or planning; up to
//! [`MAX_PREPARED`] statements (beyond, all are dropped and prepared again). PostgreSQL
//! re-plans a kept plan by itself when a table it reads changes; a renamed table or column
//! changes the text, so it gets a new statement.

use std::cell::RefCell;
use std::collections::HashMap;

use pgrx::datum::DatumWithOid;
use pgrx::spi::{OwnedPreparedStatement, SpiClient, SpiCursor, SpiTupleTable};
use pgrx::{pg_sys, PgOid};

use super::owner::as_owner;
use super::spi::spi_failed;

/// Statements kept; beyond this many, all are dropped.
const MAX_PREPARED: usize = 64;

/// Whether a statement only reads (prepared read-only, as SPI runs a `SELECT`) or writes.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(in crate::index) enum Access {
    Read,
    Write,
}

thread_local! {
    static PREPARED: RefCell<HashMap<(String, Access), OwnedPreparedStatement>> =
        RefCell::new(HashMap::new());
}

/// The statement `sql` kept for this backend (prepared now if it is not), taken out of the
/// cache while `f` runs, so that a nested statement cannot find it borrowed.
fn with_statement<T>(
    client: &SpiClient<'_>,
    sql: &str,
    access: Access,
    types: &[PgOid],
    f: impl FnOnce(&OwnedPreparedStatement) -> pgrx::spi::Result<T>,
) -> pgrx::spi::Result<T> {
    let key = (sql.to_owned(), access);
    let kept = PREPARED.with_borrow_mut(|cache| cache.remove(&key));
    let statement = match kept {
        Some(statement) => statement,
        None if access == Access::Read => client.prepare(sql, types)?.keep(),
        None => client.prepare_mut(sql, types)?.keep(),
    };
    let result = f(&statement)?;
    PREPARED.with_borrow_mut(|cache| {
        if cache.len() >= MAX_PREPARED {
            cache.clear();
        }
        cache.insert(key, statement);
    });
    Ok(result)
}

/// Runs `sql` with parameters `args` (of types `types`) through `client`, prepared on first
/// use, and hands the result to `read`.
pub(in crate::index) fn run<T>(
    client: &SpiClient<'_>,
    sql: &str,
    access: Access,
    types: &[PgOid],
    args: &[DatumWithOid<'_>],
    read: impl FnOnce(SpiTupleTable<'_>) -> pgrx::spi::Result<T>,
) -> pgrx::spi::Result<T> {
    with_statement(client, sql, access, types, |statement| {
        read(client.select(statement, None, args)?)
    })
}

/// Opens a cursor over the read-only statement `sql` with parameters `args` (of types
/// `types`), prepared on first use, as `owner` (`as_owner`: the executor checks the rights
/// to what it reads as it opens), and hands it to `read`, which fetches its rows as it goes;
/// the cursor is closed when `read` returns.
pub(in crate::index) fn with_cursor<T>(
    client: &SpiClient<'_>,
    sql: &str,
    types: &[PgOid],
    args: &[DatumWithOid<'_>],
    owner: pg_sys::Oid,
    read: impl FnOnce(SpiCursor<'_>) -> T,
) -> T {
    with_statement(client, sql, Access::Read, types, |statement| {
        let cursor = as_owner(owner, || client.try_open_cursor(statement, args))?;
        Ok(read(cursor))
    })
    .unwrap_or_else(|e| spi_failed(e))
}

/// Runs the statement `sql` with its one parameter (of type `param_type`) and hands the result
/// to `read`. The statement is prepared on first use and kept for the backend.
pub(in crate::index) fn with_prepared<T>(
    client: &SpiClient<'_>,
    sql: &str,
    param_type: PgOid,
    param: pgrx::datum::DatumWithOid<'_>,
    read: impl FnOnce(pgrx::spi::SpiTupleTable<'_>) -> pgrx::spi::Result<T>,
) -> T {
    with_prepared_args(client, sql, &[param_type], &[param], read)
}

/// [`with_prepared`] for a statement of several parameters.
pub(in crate::index) fn with_prepared_args<T>(
    client: &SpiClient<'_>,
    sql: &str,
    param_types: &[PgOid],
    params: &[pgrx::datum::DatumWithOid<'_>],
    read: impl FnOnce(pgrx::spi::SpiTupleTable<'_>) -> pgrx::spi::Result<T>,
) -> T {
    run(client, sql, Access::Read, param_types, params, read).unwrap_or_else(|e| spi_failed(e))
}
