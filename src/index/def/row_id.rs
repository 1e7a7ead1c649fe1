//! Row ids of any key type. An indexed table's id column may be of any type with a unique
//! B-tree on it alone. Its band table stores the id as `bigint` when the column is `smallint`,
//! `integer` or `bigint`, and in the column's own type otherwise; in Rust an id is an [`Id`]:
//! the integer itself, or the bytes of the value. Two rows of the table never have equal ids
//! (the unique index), and one row's id always has the same bytes, so equal bytes mean the same
//! row.

use std::ffi::{c_char, CStr};

use pgrx::prelude::*;

use crate::pg::tuple::varlena_bytes;

/// One row's id.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(in crate::index) enum Id {
    /// An integer key, or a key of another pass-by-value type (the datum's bits).
    Int(i64),
    /// The bytes of a key of a pass-by-reference type (a varlena's without its header).
    Bytes(Box<[u8]>),
}

/// How ids are stored: the type of the band table's `id` column.
#[derive(Clone, Copy, Debug)]
pub(in crate::index) struct KeyType {
    pub(in crate::index) oid: pg_sys::Oid,
    len: i16,
    by_value: bool,
    align: c_char,
    /// The band table stores `bigint` (the id column is an integer of any width).
    pub(in crate::index) integer: bool,
}

impl KeyType {
    /// The band table's id type `oid` (`bigint` for integer keys).
    pub(in crate::index) fn of(oid: pg_sys::Oid) -> KeyType {
        let (mut len, mut by_value, mut align) = (0i16, false, 0 as c_char);
        // SAFETY: a syscache lookup of an existing type (a column's).
        unsafe { pg_sys::get_typlenbyvalalign(oid, &mut len, &mut by_value, &mut align) };
        KeyType {
            oid,
            len,
            by_value,
            align,
            integer: oid == pg_sys::INT8OID,
        }
    }

    /// How an index stores the ids of an id column of type `column_type`: `bigint` for the
    /// integer types, the column's own type otherwise (as `minhash_index_create` makes the band
    /// table).
    pub(super) fn for_column(column_type: pg_sys::Oid) -> KeyType {
        KeyType::of(if is_integer(column_type) {
            pg_sys::INT8OID
        } else {
            column_type
        })
    }

    /// Whether ids of this type can come from a column of type `column_type`.
    pub(super) fn accepts(&self, column_type: pg_sys::Oid) -> bool {
        if self.integer {
            is_integer(column_type)
        } else {
            column_type == self.oid
        }
    }

    /// The id a datum of this type (or, for integer keys, of an integer type `column_type`)
    /// holds.
    ///
    /// # Safety
    /// `datum` is a non-NULL datum of this type (or an integer of type `column_type`); a
    /// varlena is detoasted into the current memory context.
    pub(in crate::index) unsafe fn id(&self, datum: pg_sys::Datum, column_type: pg_sys::Oid) -> Id {
        if self.integer {
            return Id::Int(match column_type {
                pg_sys::INT2OID => i64::from(datum.value() as i16),
                pg_sys::INT4OID => i64::from(datum.value() as i32),
                _ => datum.value() as i64,
            });
        }
        if self.by_value {
            return Id::Int(datum.value() as i64);
        }
        // SAFETY: per the contract: a varlena, a C string, or `len` bytes.
        let bytes: &[u8] = unsafe {
            match self.len {
                -1 => varlena_bytes(datum),
                -2 => CStr::from_ptr(datum.cast_mut_ptr::<c_char>()).to_bytes(),
                n => std::slice::from_raw_parts(datum.cast_mut_ptr::<u8>(), n as usize),
            }
        };
        Id::Bytes(bytes.into())
    }

    /// `id` as a datum of this type, allocated in the current memory context.
    pub(in crate::index) fn datum(&self, id: &Id) -> pg_sys::Datum {
        match id {
            Id::Int(v) => pg_sys::Datum::from(*v as usize),
            // SAFETY: palloc'd memory of the size written; a varlena gets its 4-byte header.
            Id::Bytes(bytes) => unsafe {
                let header = if self.len == -1 { pg_sys::VARHDRSZ } else { 0 };
                // (a C string ends in a NUL, which palloc0 gives it)
                let size = header + bytes.len() + usize::from(self.len == -2);
                let memory = pg_sys::palloc0(size).cast::<u8>();
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), memory.add(header), bytes.len());
                if self.len == -1 {
                    pgrx::set_varsize_4b(memory.cast(), size as i32);
                }
                pg_sys::Datum::from(memory)
            },
        }
    }

    /// The array of `ids` (`bigint[]` for integer keys), in the current memory context, and
    /// its type.
    pub(super) fn array(&self, ids: &[Id]) -> (pg_sys::Datum, pg_sys::Oid) {
        let mut datums: Vec<pg_sys::Datum> = ids.iter().map(|id| self.datum(id)).collect();
        // SAFETY: every datum is of this type, described by its length, by-value flag and
        // alignment; construct_array copies them.
        unsafe {
            let array = pg_sys::construct_array(
                datums.as_mut_ptr(),
                datums.len() as i32,
                self.oid,
                self.len.into(),
                self.by_value,
                self.align,
            );
            (pg_sys::Datum::from(array), pg_sys::get_array_type(self.oid))
        }
    }

    /// The array of `ids` as an SPI argument, and its type.
    pub(in crate::index) fn array_arg(
        &self,
        ids: &[Id],
    ) -> (pgrx::datum::DatumWithOid<'static>, pgrx::PgOid) {
        let (array, array_type) = self.array(ids);
        // SAFETY: `array` is a datum of type `array_type`, made just now.
        let arg = unsafe { pgrx::datum::DatumWithOid::new(array, array_type) };
        (arg, pgrx::PgOid::from(array_type))
    }

    /// The id in column `column` (1-based) of the current row of an SPI result, read as this
    /// type (`bigint` for integer keys); None for NULL.
    pub(in crate::index) fn spi_id(
        &self,
        row: &pgrx::spi::SpiTupleTable<'_>,
        column: usize,
    ) -> pgrx::spi::Result<Option<Id>> {
        let datum = row.get_datum_by_ordinal(column)?;
        // SAFETY: the queries select the id as this type (cast to int8 for integer keys).
        Ok(datum.map(|d| unsafe { self.id(d, pg_sys::INT8OID) }))
    }

    /// `id` as text, through the type's output function (integers as digits).
    pub(in crate::index) fn text(&self, id: &Id) -> String {
        if let (true, Id::Int(v)) = (self.integer, id) {
            return v.to_string();
        }
        let (mut output, mut varlena) = (pg_sys::Oid::INVALID, false);
        // SAFETY: the type exists; its output function takes a datum of it and returns a
        // palloc'd C string.
        unsafe {
            pg_sys::getTypeOutputInfo(self.oid, &mut output, &mut varlena);
            let text = pg_sys::OidOutputFunctionCall(output, self.datum(id));
            CStr::from_ptr(text).to_string_lossy().into_owned()
        }
    }

    /// The value of this type that `text` spells, through the type's input function (with
    /// its checks and errors, as a cast of the text would).
    pub(in crate::index) fn parse(&self, text: &str) -> Id {
        let text = std::ffi::CString::new(text).unwrap_or_else(|_| {
            crate::pg::error::raise(
                pgrx::PgSqlErrorCode::ERRCODE_UNTRANSLATABLE_CHARACTER,
                "a text value contains a NUL character",
                None,
            )
        });
        let (mut input, mut ioparam) = (pg_sys::Oid::INVALID, pg_sys::Oid::INVALID);
        // SAFETY: the type exists (it is a column's); the input function takes a C string
        // and returns a datum of the type (a varlena is palloc'd, and read at once).
        unsafe {
            pg_sys::getTypeInputInfo(self.oid, &mut input, &mut ioparam);
            let datum = pg_sys::OidInputFunctionCall(input, text.as_ptr() as *mut _, ioparam, -1);
            self.id(datum, self.oid)
        }
    }

    /// `id` as a value of type `typid` (typmod `typmod`): the datum itself for this type, the
    /// integer for `bigint`, otherwise through the text form and that type's input function
    /// (with its checks, as an assignment of the text would).
    pub(in crate::index) fn convert(
        &self,
        id: &Id,
        typid: pg_sys::Oid,
        typmod: i32,
    ) -> pg_sys::Datum {
        if typid == self.oid && !self.integer || typid == pg_sys::INT8OID && self.integer {
            return self.datum(id);
        }
        let text = std::ffi::CString::new(self.text(id)).expect("output functions give no NUL");
        let (mut input, mut ioparam) = (pg_sys::Oid::INVALID, pg_sys::Oid::INVALID);
        // SAFETY: the type exists (it is a column's); the input function takes a C string.
        unsafe {
            pg_sys::getTypeInputInfo(typid, &mut input, &mut ioparam);
            pg_sys::OidInputFunctionCall(input, text.as_ptr() as *mut _, ioparam, typmod)
        }
    }
}

/// Whether `typid` is `smallint`, `integer` or `bigint`.
fn is_integer(typid: pg_sys::Oid) -> bool {
    matches!(typid, pg_sys::INT2OID | pg_sys::INT4OID | pg_sys::INT8OID)
}

/// The id attribute, as the band table stores it (`key`), NULL as None.
///
/// # Safety
/// `attno` is an attribute of type `typid` of `tupdesc`, which describes `tuple`; `key` is the
/// index's.
pub(in crate::index) unsafe fn tuple_id(
    tuple: *mut pg_sys::HeapTupleData,
    tupdesc: pg_sys::TupleDesc,
    attno: usize,
    typid: pg_sys::Oid,
    key: KeyType,
) -> Option<Id> {
    let mut is_null = false;
    // SAFETY: per the contract.
    unsafe {
        let datum = pg_sys::heap_getattr(tuple, attno as i32, tupdesc, &mut is_null);
        (!is_null).then(|| key.id(datum, typid))
    }
}
