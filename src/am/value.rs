//! The value an entry stores: the bytes of the index's one bytea key, all of one width per
//! store (the first value's).

use pgrx::pg_sys;
use pgrx::PgSqlErrorCode;

use super::buffer::name;
use super::page::{Layout, MAX_WIDTH};
use crate::pg::error::raise;

/// Calls `f` with the bytes of the bytea `datum`, detoasted (a heap column's value may be
/// compressed or stored out of line; the copy is freed after).
///
/// # Safety
/// `datum` is a non-NULL bytea datum.
pub(super) unsafe fn with_bytes<T>(datum: pg_sys::Datum, f: impl FnOnce(&[u8]) -> T) -> T {
    let raw = datum.cast_mut_ptr::<pg_sys::varlena>();
    // SAFETY: per the contract; pg_detoast_datum_packed returns `raw` itself or a palloc'd
    // copy, a varlena either way.
    unsafe {
        let plain = pg_sys::pg_detoast_datum_packed(raw);
        let bytes = std::slice::from_raw_parts(
            pgrx::varlena::vardata_any(plain).cast::<u8>(),
            pgrx::varlena::varsize_any_exhdr(plain),
        );
        let result = f(bytes);
        if plain != raw {
            pg_sys::pfree(plain.cast());
        }
        result
    }
}

/// The layout of `index`'s pages for a `len`-byte value, given the store's width (0: none yet,
/// the value sets it): 22023 for a value of another width or an empty one, 54000 for one wider
/// than a page holds.
pub(super) fn layout_for(index: pg_sys::Relation, width: u32, len: usize) -> Layout {
    if width != 0 && len != width as usize {
        raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!(
                "value of {len} bytes differs in width from the {width}-byte values of index \"{}\"",
                name(index)
            ),
            Some("Every value of a minhash_sketch index has the length of the first one.".into()),
        );
    }
    Layout::of(len).unwrap_or_else(|| {
        if len == 0 {
            raise(
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                format!("empty value for index \"{}\"", name(index)),
                None,
            )
        }
        raise(
            PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            format!(
                "value of {len} bytes exceeds the maximum width {MAX_WIDTH} of index \"{}\"",
                name(index)
            ),
            None,
        )
    })
}
