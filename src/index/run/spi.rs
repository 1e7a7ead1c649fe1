//! Reading SPI results: row by row, `(id, text)` rows, and the error of a failed read.

use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;

use crate::pg::error::raise;

/// Calls `f` with `table` positioned on each of its rows in turn.
pub(in crate::index) fn for_each_spi_row(
    mut table: pgrx::spi::SpiTupleTable<'_>,
    mut f: impl FnMut(&pgrx::spi::SpiTupleTable<'_>) -> pgrx::spi::Result<()>,
) -> pgrx::spi::Result<()> {
    let rows = table.len();
    if rows == 0 {
        return Ok(());
    }
    table = table.first();
    for _ in 0..rows {
        f(&table)?;
        table.next();
    }
    Ok(())
}

/// Calls `f(id, text)` for each row of an SPI result of `(id, text)` rows, skipping rows where
/// either is NULL. Both are borrowed from the SPI memory context, not copied: the texts stay
/// valid while the SPI session of `table` lasts (`'conn`).
pub(in crate::index) fn for_each_text_row<'conn>(
    table: pgrx::spi::SpiTupleTable<'conn>,
    mut f: impl FnMut(pg_sys::Datum, &'conn str),
) -> pgrx::spi::Result<()> {
    for_each_spi_row(table, |row| {
        if let (Some(id), Some(text)) = (row.get_datum_by_ordinal(1)?, row.get_datum_by_ordinal(2)?)
        {
            // SAFETY: column 2 is a text datum (the queries cast it), not NULL; it and any
            // detoasted copy are in the SPI session's memory, freed when the session ends.
            let text = unsafe { <&str as FromDatum>::from_datum(text, false) };
            f(id, text.expect("not NULL"));
        }
        Ok(())
    })
}

/// The first column of the first row of `table` (None for no row, NULL, or a statement of no
/// result: LOCK TABLE, DROP TABLE, or a statement Citus runs and returns no rows of).
pub(in crate::index) fn first_value<T: FromDatum + IntoDatum>(
    table: pgrx::spi::SpiTupleTable<'_>,
) -> pgrx::spi::Result<Option<T>> {
    if table.is_empty() {
        return Ok(None);
    }
    match table.first().get::<T>(1) {
        Err(pgrx::spi::SpiError::NoTupleTable) => Ok(None),
        result => result,
    }
}

/// Raises XX000 for a failed SPI read of the indexed table or the catalog.
pub(in crate::index) fn spi_failed(e: pgrx::spi::Error) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
        format!("reading the indexed table through SPI failed: {e}"),
        None,
    )
}
