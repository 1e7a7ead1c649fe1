//! The SQL surface: `#[pg_extern]` wrappers that convert, validate and report. Every function
//! here is IMMUTABLE and PARALLEL SAFE; all but `lsh_bands` are STRICT (its `r` defaults to
//! NULL, which has a meaning of its own).

pub(crate) mod dedup;
#[cfg(any(test, feature = "pg_test"))]
mod tests;

use std::cell::RefCell;

use pgrx::array::RawArray;
use pgrx::callconv::{BoxRet, FcInfo};
use pgrx::datum::Datum as CallDatum;
use pgrx::pgrx_sql_entity_graph::metadata::{
    ArgumentError, ReturnsError, ReturnsRef, SqlMappingRef, SqlTranslatable, TypeOrigin,
};
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;

use crate::core::bands::band_keys;
use crate::core::capacity::{reserve, CapacityError};
use crate::core::hash::FORMAT_VERSION;
use crate::core::jaccard::{ShingleCache, ShingleSet, SHINGLE_CACHE_BYTES};
use crate::core::params::{self, check_k, Banding, Shingling, Unit};
use crate::core::signature::estimate_similarity;
use crate::pg::backend::{interrupts, SIGNER};
use crate::pg::error::{raise, OrRaise};

thread_local! {
    /// Shingle sets of the texts `jaccard` saw in this transaction: verifying the candidate
    /// pairs of a table meets each text many times. Emptied when the transaction ends, so an
    /// idle backend holds nothing.
    static SHINGLES: RefCell<ShingleCache> = RefCell::new(ShingleCache::new(SHINGLE_CACHE_BYTES));
}

fn clear_shingle_cache() {
    SHINGLES.with(|cache| {
        if let Ok(mut cache) = cache.try_borrow_mut() {
            cache.clear();
        }
    });
}

/// A signature returned to SQL as int4[]. pgrx builds a `Vec<i32>` result element by element
/// through guarded FFI calls, which costs as much as hashing a short text; this builds the
/// array with one `construct_array` call.
pub(crate) struct SignatureDatum(Vec<u32>);

impl IntoDatum for SignatureDatum {
    fn into_datum(self) -> Option<pg_sys::Datum> {
        let mut elements: Vec<pg_sys::Datum> = self
            .0
            .into_iter()
            .map(|v| pg_sys::Datum::from(v as i32))
            .collect();
        let length = i32::try_from(elements.len()).expect("k <= 1024");
        // SAFETY: `elements` holds `length` int4 datums; the array is palloc'd in the current
        // memory context, which outlives the function call.
        let array = unsafe {
            pg_sys::construct_array(
                elements.as_mut_ptr(),
                length,
                pg_sys::INT4OID,
                4,
                true,
                pg_sys::TYPALIGN_INT as std::ffi::c_char,
            )
        };
        Some(pg_sys::Datum::from(array))
    }

    fn type_oid() -> pg_sys::Oid {
        pg_sys::INT4ARRAYOID
    }
}

// SAFETY: `box_into` returns the datum it made to the function's caller.
unsafe impl BoxRet for SignatureDatum {
    unsafe fn box_into<'fcx>(self, fcinfo: &mut FcInfo<'fcx>) -> CallDatum<'fcx> {
        match self.into_datum() {
            // SAFETY: a freshly built int4[] datum of this call's memory context.
            Some(datum) => unsafe { fcinfo.return_raw_datum(datum) },
            None => fcinfo.return_null(),
        }
    }
}

// SAFETY: the SQL type is exactly Vec<i32>'s: int4[].
unsafe impl SqlTranslatable for SignatureDatum {
    const TYPE_IDENT: &'static str = <Vec<i32> as SqlTranslatable>::TYPE_IDENT;
    const TYPE_ORIGIN: TypeOrigin = <Vec<i32> as SqlTranslatable>::TYPE_ORIGIN;
    const ARGUMENT_SQL: Result<SqlMappingRef, ArgumentError> =
        <Vec<i32> as SqlTranslatable>::ARGUMENT_SQL;
    const RETURN_SQL: Result<ReturnsRef, ReturnsError> = <Vec<i32> as SqlTranslatable>::RETURN_SQL;
}

/// The k-slot MinHash signature of `doc`'s shingle set; slot values are unsigned 32-bit
/// numbers stored in int4 by bit pattern.
#[pg_extern(immutable, strict, parallel_safe)]
fn minhash(
    doc: &str,
    k: default!(i32, 128),
    ngram: default!(i32, 5),
    unit: default!(&str, "'char'"),
) -> SignatureDatum {
    let k = check_k(k).or_raise();
    let shingling = Shingling::new(ngram, unit).or_raise();
    SignatureDatum(
        SIGNER
            .with_borrow_mut(|s| s.try_signature(doc, k, shingling, &mut interrupts))
            .or_raise(),
    )
}

/// The elements of a one-dimensional array argument without NULLs.
pub(crate) fn array_arg<T: Copy>(array: Array<'_, T>, name: &str) -> Vec<T> {
    // SAFETY: `array` came from PostgreSQL as an array datum of element type T.
    let mut raw = unsafe { RawArray::from_array(array) }.expect("a non-NULL array datum");
    let ndims = raw.dims().len();
    if ndims > 1 {
        raise(
            PgSqlErrorCode::ERRCODE_ARRAY_ELEMENT_ERROR,
            format!("{name} must be a one-dimensional array, not {ndims}-dimensional"),
            None,
        );
    }
    // SAFETY: the array header was validated by PostgreSQL.
    if unsafe { raw.any_nulls() } {
        raise(
            PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
            format!("{name} must not contain NULL elements"),
            None,
        );
    }
    // SAFETY: fixed-size elements without NULLs are a packed slice of `len` elements.
    let elements = unsafe { raw.data::<T>().as_ref() };
    let mut copy = Vec::new();
    reserve(&mut copy, elements.len(), "an array argument").or_raise();
    copy.extend_from_slice(elements);
    copy
}

/// A signature argument as unsigned slot values: one-dimensional, no NULLs, not empty.
fn signature_arg(array: Array<'_, i32>, name: &str) -> Vec<u32> {
    let slots = array_arg(array, name);
    if slots.is_empty() {
        raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("{name} must not be empty"),
            None,
        );
    }
    slots.into_iter().map(|v| v as u32).collect()
}

/// The b band keys of a signature. With `r` NULL, bands are len/b slots long and b must divide
/// the length; with `r` given, the first b*r slots are used.
#[pg_extern(immutable, parallel_safe)]
fn lsh_bands(
    signature: Option<Array<'_, i32>>,
    b: Option<i32>,
    r: default!(Option<i32>, "NULL"),
) -> Option<Vec<i64>> {
    let signature = signature_arg(signature?, "signature");
    let banding = Banding::new(signature.len(), b?, r).or_raise();
    Some(
        band_keys(&signature, banding)
            .into_iter()
            .map(|k| k as i64)
            .collect(),
    )
}

/// Exact Jaccard similarity of the two documents' shingle sets.
#[pg_extern(immutable, strict, parallel_safe)]
fn jaccard(a: &str, b: &str, ngram: default!(i32, 5), unit: default!(&str, "'char'")) -> f64 {
    let shingling = Shingling::new(ngram, unit).or_raise();
    SHINGLES
        .with_borrow_mut(|cache| {
            if cache.is_empty() {
                pgrx::register_xact_callback(
                    pgrx::PgXactCallbackEvent::Commit,
                    clear_shingle_cache,
                );
                pgrx::register_xact_callback(pgrx::PgXactCallbackEvent::Abort, clear_shingle_cache);
            }
            cache.try_jaccard(a, b, shingling, &mut interrupts)
        })
        .or_raise()
}

/// Fraction of equal slots of two signatures: their estimate of the Jaccard similarity.
#[pg_extern(immutable, strict, parallel_safe)]
fn minhash_similarity(a: Array<'_, i32>, b: Array<'_, i32>) -> f64 {
    let a = signature_arg(a, "a");
    let b = signature_arg(b, "b");
    if a.len() != b.len() {
        raise(
            PgSqlErrorCode::ERRCODE_ARRAY_ELEMENT_ERROR,
            format!(
                "signatures have different lengths {} and {}",
                a.len(),
                b.len()
            ),
            Some("compare signatures computed with the same k".into()),
        );
    }
    estimate_similarity(&a, &b)
}

/// The distinct shingles of `doc`, sorted by code point: exactly what `minhash` hashes.
#[pg_extern(immutable, strict, parallel_safe)]
fn shingles(doc: &str, ngram: default!(i32, 5), unit: default!(&str, "'char'")) -> TextArray {
    let shingling = Shingling::new(ngram, unit).or_raise();
    // Refused as early as the size is known to be too large: every shingle of a text with two
    // or more is a whole window, at least this long.
    let shortest = match shingling.unit {
        Unit::Char => shingling.ngram,
        Unit::Word => 2 * shingling.ngram - 1,
    };
    let mut refuse = |distinct: usize| {
        let shortest = if distinct < 2 { 0 } else { shortest };
        let data = distinct.saturating_mul(text_element_bytes(shortest));
        check_text_array(distinct, ARRAY_HEADER.saturating_add(data)).map(|_| ())
    };
    let set = ShingleSet::try_new_bounded(doc, shingling, &mut refuse, &mut interrupts).or_raise();
    let bytes = text_array_bytes(set.shingles().map(str::len)).or_raise();
    let sorted = set.try_into_sorted(&mut interrupts).or_raise();
    TextArray::new(sorted.iter(), bytes)
}

/// PostgreSQL's MaxAllocSize: no datum, so no array, can be longer.
const MAX_ALLOC_SIZE: usize = 0x3FFF_FFFF;
/// PostgreSQL's MaxArraySize: the most elements an array can have.
const MAX_ARRAY_ELEMENTS: usize = MAX_ALLOC_SIZE / std::mem::size_of::<pg_sys::Datum>();
/// Bytes before the first element of a one-dimensional array without NULLs: the header, one
/// dimension and one lower bound, MAXALIGNed (ARR_OVERHEAD_NONULLS(1)).
const ARRAY_HEADER: usize =
    (std::mem::size_of::<pg_sys::ArrayType>() + 2 * std::mem::size_of::<i32>()).next_multiple_of(8);
/// Bytes a text element of `len` bytes takes: a 4-byte varlena header and the bytes, padded
/// to text's 4-byte alignment.
const fn text_element_bytes(len: usize) -> usize {
    (pg_sys::VARHDRSZ + len).next_multiple_of(4)
}

/// The size of a one-dimensional text[] of elements of the byte lengths given, or 54000 if it
/// would pass PostgreSQL's limits.
fn text_array_bytes(lengths: impl ExactSizeIterator<Item = usize>) -> Result<usize, CapacityError> {
    let count = lengths.len();
    let bytes = lengths.fold(ARRAY_HEADER, |total, len| {
        total.saturating_add(text_element_bytes(len))
    });
    check_text_array(count, bytes)
}

/// `bytes`, if a text[] of `count` elements and `bytes` bytes is within PostgreSQL's limits.
fn check_text_array(count: usize, bytes: usize) -> Result<usize, CapacityError> {
    if count > MAX_ARRAY_ELEMENTS {
        return Err(CapacityError::TooLarge {
            what: "the text[] result's element count",
            bytes: count,
            limit: MAX_ARRAY_ELEMENTS,
        });
    }
    if bytes > MAX_ALLOC_SIZE {
        return Err(CapacityError::TooLarge {
            what: "the text[] result",
            bytes,
            limit: MAX_ALLOC_SIZE,
        });
    }
    Ok(bytes)
}

/// A text[] built in one palloc'd block, element by element: returning a `Vec<String>` would
/// hold every shingle twice more (as Rust strings and as separate text datums) on the way.
pub(crate) struct TextArray(pg_sys::Datum);

impl TextArray {
    /// The array of `items`, which [`text_array_bytes`] found to take `bytes`.
    fn new<'a>(items: impl ExactSizeIterator<Item = &'a str>, bytes: usize) -> TextArray {
        let count = items.len();
        if count == 0 {
            // SAFETY: builds an empty array in the current memory context.
            let empty = unsafe { pg_sys::construct_empty_array(pg_sys::TEXTOID) };
            return TextArray(pg_sys::Datum::from(empty));
        }
        // SAFETY: `bytes` is at most MaxAllocSize (checked by `text_array_bytes`), so palloc0
        // either returns that many zeroed bytes, MAXALIGNed, or raises an ERROR. The header
        // fields, the dimension and lower bound, and then each element (a 4-byte varlena header
        // and its bytes, at a 4-byte aligned offset) are written inside that block: the
        // offsets advance by exactly what `text_array_bytes` added up for the same items.
        unsafe {
            let array = pg_sys::palloc0(bytes).cast::<pg_sys::ArrayType>();
            pgrx::set_varsize_4b(array.cast(), bytes as i32);
            (*array).ndim = 1;
            (*array).dataoffset = 0;
            (*array).elemtype = pg_sys::TEXTOID;
            let dims = array.add(1).cast::<i32>();
            *dims = count as i32;
            *dims.add(1) = 1;
            let mut at = array.cast::<u8>().add(ARRAY_HEADER);
            for item in items {
                pgrx::set_varsize_4b(at.cast(), (pg_sys::VARHDRSZ + item.len()) as i32);
                std::ptr::copy_nonoverlapping(item.as_ptr(), at.add(pg_sys::VARHDRSZ), item.len());
                at = at.add(text_element_bytes(item.len()));
            }
            debug_assert_eq!(at, array.cast::<u8>().add(bytes));
            TextArray(pg_sys::Datum::from(array))
        }
    }
}

impl IntoDatum for TextArray {
    fn into_datum(self) -> Option<pg_sys::Datum> {
        Some(self.0)
    }

    fn type_oid() -> pg_sys::Oid {
        pg_sys::TEXTARRAYOID
    }
}

// SAFETY: `box_into` returns the datum it was given to the function's caller.
unsafe impl BoxRet for TextArray {
    unsafe fn box_into<'fcx>(self, fcinfo: &mut FcInfo<'fcx>) -> CallDatum<'fcx> {
        // SAFETY: a text[] datum built in this call's memory context.
        unsafe { fcinfo.return_raw_datum(self.0) }
    }
}

// SAFETY: the SQL type is exactly Vec<String>'s: text[].
unsafe impl SqlTranslatable for TextArray {
    const TYPE_IDENT: &'static str = <Vec<String> as SqlTranslatable>::TYPE_IDENT;
    const TYPE_ORIGIN: TypeOrigin = <Vec<String> as SqlTranslatable>::TYPE_ORIGIN;
    const ARGUMENT_SQL: Result<SqlMappingRef, ArgumentError> =
        <Vec<String> as SqlTranslatable>::ARGUMENT_SQL;
    const RETURN_SQL: Result<ReturnsRef, ReturnsError> =
        <Vec<String> as SqlTranslatable>::RETURN_SQL;
}

/// 1 - (1 - s^r)^b: the chance a pair of Jaccard similarity s shares at least one band key.
#[pg_extern(immutable, strict, parallel_safe)]
fn lsh_probability(similarity: f64, b: i32, r: i32) -> f64 {
    params::lsh_probability(similarity, b, r).or_raise()
}

/// Every (bands, rows_per_band) with bands * rows_per_band <= k that catches a pair at the
/// threshold with probability >= min_recall, the recommended one first.
#[pg_extern(immutable, strict, parallel_safe)]
fn lsh_params(
    threshold: f64,
    k: default!(i32, 128),
    min_recall: default!(f64, 0.99),
) -> TableIterator<
    'static,
    (
        name!(bands, i32),
        name!(rows_per_band, i32),
        name!(recall_at_threshold, f64),
        name!(false_positive_area, f64),
        name!(false_negative_area, f64),
    ),
> {
    let choices = params::lsh_params(threshold, k, min_recall).or_raise();
    TableIterator::new(choices.into_iter().map(|c| {
        (
            c.bands as i32,
            c.rows as i32,
            c.recall_at_threshold,
            c.false_positive_area,
            c.false_negative_area,
        )
    }))
}

/// The signature format version this build computes (docs/contract.md).
#[pg_extern(immutable, strict, parallel_safe)]
fn minhash_format_version() -> i32 {
    FORMAT_VERSION as i32
}

#[cfg(test)]
mod size_tests {
    use super::*;

    #[test]
    fn text_arrays_are_measured_and_refused_before_they_are_built() {
        assert_eq!(ARRAY_HEADER, 24);
        assert_eq!(text_element_bytes(0), 4);
        assert_eq!(text_element_bytes(5), 12);
        assert_eq!(text_element_bytes(16), 20);
        assert_eq!(
            text_array_bytes(["ab", "cde", ""].map(str::len).into_iter()),
            Ok(24 + 8 + 8 + 4)
        );
        // 53,687,089 16-byte shingles are the most that fit in MaxAllocSize
        let fits = (MAX_ALLOC_SIZE - ARRAY_HEADER) / 20;
        assert_eq!(fits, 53_687_089);
        assert_eq!(
            text_array_bytes(std::iter::repeat_n(16, fits)),
            Ok(ARRAY_HEADER + 20 * fits)
        );
        assert_eq!(
            text_array_bytes(std::iter::repeat_n(16, fits + 1)),
            Err(CapacityError::TooLarge {
                what: "the text[] result",
                bytes: ARRAY_HEADER + 20 * (fits + 1),
                limit: MAX_ALLOC_SIZE
            })
        );
        assert_eq!(
            check_text_array(MAX_ARRAY_ELEMENTS + 1, 100),
            Err(CapacityError::TooLarge {
                what: "the text[] result's element count",
                bytes: MAX_ARRAY_ELEMENTS + 1,
                limit: MAX_ARRAY_ELEMENTS
            })
        );
    }
}
