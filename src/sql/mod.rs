//! The SQL surface: `#[pg_extern]` wrappers that convert, validate and report. Every function
//! here is IMMUTABLE and PARALLEL SAFE; all but `lsh_bands` are STRICT (its `r` defaults to
//! NULL, which has a meaning of its own).

pub(crate) mod error;
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
use crate::core::hash::FORMAT_VERSION;
use crate::core::jaccard::ShingleCache;
use crate::core::normalize::normalize;
use crate::core::params::{self, check_k, Banding, Shingling};
use crate::core::shingle::distinct_shingles;
use crate::core::signature::{estimate_similarity, Signer};
use error::{raise, OrRaise};

/// Bytes of shingle sets `jaccard` keeps per backend within one transaction.
const SHINGLE_CACHE_BYTES: usize = 256 << 20;

thread_local! {
    /// One set of signature buffers per backend: signing a table reuses them row after row
    /// instead of allocating per call.
    pub(crate) static SIGNER: RefCell<Signer> = RefCell::new(Signer::default());
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

pub(crate) fn interrupts() {
    pgrx::check_for_interrupts!();
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
    SignatureDatum(SIGNER.with_borrow_mut(|s| s.signature(doc, k, shingling, &mut interrupts)))
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
    unsafe { raw.data::<T>().as_ref() }.to_vec()
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
    SHINGLES.with_borrow_mut(|cache| {
        if cache.is_empty() {
            pgrx::register_xact_callback(pgrx::PgXactCallbackEvent::Commit, clear_shingle_cache);
            pgrx::register_xact_callback(pgrx::PgXactCallbackEvent::Abort, clear_shingle_cache);
        }
        cache.jaccard(a, b, shingling, &mut interrupts)
    })
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
fn shingles(doc: &str, ngram: default!(i32, 5), unit: default!(&str, "'char'")) -> Vec<String> {
    let shingling = Shingling::new(ngram, unit).or_raise();
    let norm = normalize(doc);
    distinct_shingles(&norm, shingling)
        .into_iter()
        .map(String::from)
        .collect()
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

/// The signature format version this build computes (see README, "The contract").
#[pg_extern(immutable, strict, parallel_safe)]
fn minhash_format_version() -> i32 {
    FORMAT_VERSION as i32
}
