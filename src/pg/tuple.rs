//! Reading attributes of tuples and transition rows.

use std::ffi::CString;

use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;

use super::compat;
use super::error::raise;
use super::names::regclass_name;

/// The bytes of a varlena datum (text, varchar), detoasted into the current memory context if
/// need be.
///
/// # Safety
/// `datum` is a non-NULL varlena datum; the bytes live as long as it and that context.
pub(crate) unsafe fn varlena_bytes<'a>(datum: pg_sys::Datum) -> &'a [u8] {
    // SAFETY: per the contract.
    unsafe {
        let value = pg_sys::pg_detoast_datum_packed(datum.cast_mut_ptr());
        pgrx::varlena::varlena_to_byte_slice(value)
    }
}

/// `(attribute number, type, typmod)` of the live column `name`; 42703 naming the table if
/// there is none.
pub(crate) fn column(
    tupdesc: pg_sys::TupleDesc,
    tbl: pg_sys::Oid,
    name: &str,
    hint: &str,
) -> (usize, pg_sys::Oid, i32) {
    // SAFETY: a valid descriptor of `natts` attributes.
    let attributes = unsafe { compat::attributes(tupdesc) };
    attributes
        .iter()
        .enumerate()
        .find(|(_, a)| !a.attisdropped && pgrx::name_data_to_str(&a.attname) == name)
        .map(|(i, a)| (i + 1, a.atttypid, a.atttypmod))
        .unwrap_or_else(|| {
            raise(
                PgSqlErrorCode::ERRCODE_UNDEFINED_COLUMN,
                format!(
                    "column \"{name}\" of table {} does not exist",
                    regclass_name(tbl)
                ),
                Some(hint.into()),
            )
        })
}

/// The attribute number of column `name` of `table`, 0 if it has none.
pub fn attnum(table: pg_sys::Oid, name: &str) -> i16 {
    let name = CString::new(name).expect("identifiers have no NUL");
    // SAFETY: a catalog lookup; InvalidAttrNumber (0) if there is no such column.
    unsafe { pg_sys::get_attnum(table, name.as_ptr()) }
}
