//! Rows crossing the SQL boundary of an internal function: a row argument (a catalog row,
//! `@extschema@.minhash_indexes`, or an index's settings, `minhash_internal.index_settings`)
//! read by column name or handed on to SPI, and a row returned (a catalog row, or a record of
//! OUT parameters).

use std::ffi::CStr;

use pgrx::callconv::{BoxRet, FcInfo};
use pgrx::datum::{Datum, DatumWithOid};
use pgrx::fcinfo::pg_getarg_datum;
use pgrx::pgrx_sql_entity_graph::metadata::{
    ArgumentError, ReturnsError, ReturnsRef, SqlMappingRef, SqlTranslatable, TypeOrigin,
};
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;

use crate::pg::error::raise;

/// A row value (a composite datum) and its type.
#[derive(Clone, Copy)]
pub(in crate::index) struct Row {
    header: pg_sys::HeapTupleHeader,
    typoid: pg_sys::Oid,
}

impl Row {
    /// Argument `n` of the call `fcinfo`; None if it is NULL.
    ///
    /// # Safety
    /// Argument `n` of the call is of a composite type.
    pub(in crate::index) unsafe fn argument(
        fcinfo: pg_sys::FunctionCallInfo,
        n: usize,
    ) -> Option<Row> {
        // SAFETY: per the contract, a composite datum (detoasted here, as
        // PG_GETARG_HEAPTUPLEHEADER does); its type is in its header.
        unsafe {
            let datum = pg_getarg_datum(fcinfo, n)?;
            Some(Row::of_datum(datum))
        }
    }

    /// The row in composite datum `datum`.
    ///
    /// # Safety
    /// `datum` is a composite datum that outlives the row.
    pub(in crate::index) unsafe fn of_datum(datum: pg_sys::Datum) -> Row {
        // SAFETY: per the contract.
        unsafe {
            let header: pg_sys::HeapTupleHeader =
                pg_sys::pg_detoast_datum(datum.cast_mut_ptr()).cast();
            let typoid = (*header).t_choice.t_datum.datum_typeid;
            Row { header, typoid }
        }
    }

    /// Column `name` (an error for none of that name), None if NULL.
    fn field(&self, name: &CStr) -> Option<pg_sys::Datum> {
        let mut is_null = false;
        // SAFETY: a composite datum's header; raises for a column the type does not have.
        let datum = unsafe { pg_sys::GetAttributeByName(self.header, name.as_ptr(), &mut is_null) };
        (!is_null).then_some(datum)
    }

    /// Column `name`, of an OID type (`regclass`, `oid`).
    pub(in crate::index) fn oid(&self, name: &CStr) -> Option<pg_sys::Oid> {
        // SAFETY: an OID type's datum.
        self.field(name)
            .and_then(|d| unsafe { pg_sys::Oid::from_datum(d, false) })
    }

    /// Column `name`, of type `int`.
    pub(in crate::index) fn int(&self, name: &CStr) -> Option<i32> {
        // SAFETY: an int4 datum.
        self.field(name)
            .and_then(|d| unsafe { i32::from_datum(d, false) })
    }

    /// Column `name`, of type `text`.
    pub(in crate::index) fn text(&self, name: &CStr) -> Option<String> {
        // SAFETY: a text datum.
        self.field(name)
            .and_then(|d| unsafe { String::from_datum(d, false) })
    }

    /// Column `name`, of type `name`.
    pub(in crate::index) fn name(&self, name: &CStr) -> Option<String> {
        // SAFETY: a name datum points to its NUL-terminated NameData.
        self.field(name).map(|d| unsafe {
            CStr::from_ptr(d.cast_mut_ptr::<std::ffi::c_char>())
                .to_string_lossy()
                .into_owned()
        })
    }

    /// The row as an SPI argument, of its type.
    pub(in crate::index) fn spi_arg(&self) -> DatumWithOid<'_> {
        // SAFETY: the datum is of its header's type, and lives as long as `self`.
        unsafe { DatumWithOid::new(pg_sys::Datum::from(self.header), self.typoid) }
    }

    /// The row as a value a function returns.
    pub(in crate::index) fn returned(self) -> RowDatum {
        RowDatum(pg_sys::Datum::from(self.header))
    }
}

/// A composite datum a function returns. Its SQL type is in the function's hand-written SQL.
pub(in crate::index) struct RowDatum(pg_sys::Datum);

impl RowDatum {
    /// The record of the OUT parameters of the call `fcinfo`, of `values` (None for NULL),
    /// each the datum of its column's type.
    ///
    /// # Safety
    /// `fcinfo` is this call's; `values` match the OUT parameters in number and type.
    pub(in crate::index) unsafe fn record(
        fcinfo: pg_sys::FunctionCallInfo,
        values: &[Option<pg_sys::Datum>],
    ) -> RowDatum {
        // SAFETY: per the contract; the descriptor is blessed so that the record's type can be
        // found from its header, as funcapi.h's users do.
        unsafe {
            let mut tupdesc: pg_sys::TupleDesc = std::ptr::null_mut();
            if pg_sys::get_call_result_type(fcinfo, std::ptr::null_mut(), &mut tupdesc)
                != pg_sys::TypeFuncClass::TYPEFUNC_COMPOSITE
            {
                raise(
                    PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                    "function returning record called in context that cannot accept type record",
                    None,
                );
            }
            let tupdesc = pg_sys::BlessTupleDesc(tupdesc);
            let mut datums: Vec<pg_sys::Datum> = values
                .iter()
                .map(|v| v.unwrap_or(pg_sys::Datum::null()))
                .collect();
            let mut nulls: Vec<bool> = values.iter().map(Option::is_none).collect();
            let tuple = pg_sys::heap_form_tuple(tupdesc, datums.as_mut_ptr(), nulls.as_mut_ptr());
            RowDatum(pg_sys::heap_copy_tuple_as_datum(tuple, tupdesc))
        }
    }
}

// SAFETY: the datum is returned as it is, a composite datum in the call's memory.
unsafe impl BoxRet for RowDatum {
    unsafe fn box_into<'fcx>(self, fcinfo: &mut FcInfo<'fcx>) -> Datum<'fcx> {
        // SAFETY: a valid datum of the function's result type.
        unsafe { fcinfo.return_raw_datum(self.0) }
    }
}

// SAFETY: the functions returning a RowDatum have hand-written SQL, which names the type.
unsafe impl SqlTranslatable for RowDatum {
    const TYPE_IDENT: &'static str = <pgrx::datum::Internal as SqlTranslatable>::TYPE_IDENT;
    const TYPE_ORIGIN: TypeOrigin = <pgrx::datum::Internal as SqlTranslatable>::TYPE_ORIGIN;
    const ARGUMENT_SQL: Result<SqlMappingRef, ArgumentError> =
        <pgrx::datum::Internal as SqlTranslatable>::ARGUMENT_SQL;
    const RETURN_SQL: Result<ReturnsRef, ReturnsError> =
        <pgrx::datum::Internal as SqlTranslatable>::RETURN_SQL;
}

/// The row in the first column of the first row of `table`, copied out of the SPI session's
/// memory into that of its caller (it outlives the session); None for no row or NULL.
pub(in crate::index) fn first_row(
    table: pgrx::spi::SpiTupleTable<'_>,
) -> pgrx::spi::Result<Option<Row>> {
    if table.is_empty() {
        return Ok(None);
    }
    let Some(datum) = table.first().get_datum_by_ordinal(1)? else {
        return Ok(None);
    };
    // SAFETY: a composite datum (a varlena), copied into the memory context that was current
    // when the session began.
    Ok(Some(unsafe {
        Row::of_datum(pg_sys::SPI_datumTransfer(datum, false, -1))
    }))
}
