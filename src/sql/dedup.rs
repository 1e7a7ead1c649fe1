//! One-off near-duplicate search over arrays, without an index: `minhash_duplicates(ids,
//! texts, ...)` and `minhash_clusters(ids, texts, ...)`. Ids are of any type with a default
//! B-tree ordering and come back in that type (`pg::ids`); array order is the greedy order of
//! the representative mode, so `array_agg(... ORDER BY created_at)` keeps the oldest row.

use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::{AnyArray, AnyElement, PgSqlErrorCode};

use crate::core::components::try_components;
use crate::core::dedup::{Corpus, Search};
use crate::core::params::{check_k, check_threshold, default_banding, ClusterMode, Shingling};
use crate::pg::backend::{bound_search, interrupts, search_threads};
use crate::pg::error::{raise, OrRaise};
use crate::pg::ids::{by_rank, keyed_clusters, keyed_pairs, Ids};
use crate::sql::array_arg;

/// Every pair of near-duplicate texts among `texts`, as their `ids` (`id_a < id_b` in the ids'
/// ordering), with exact Jaccard similarity, ordered by `(id_a, id_b)`.
#[pg_extern(immutable, strict, parallel_safe, name = "minhash_duplicates")]
#[allow(clippy::too_many_arguments)]
fn minhash_duplicates_of_arrays(
    ids: AnyArray,
    texts: Array<'_, &str>,
    threshold: default!(f64, 0.8),
    k: default!(i32, 128),
    ngram: default!(i32, 5),
    unit: default!(&str, "'char'"),
    fcinfo: pg_sys::FunctionCallInfo,
) -> TableIterator<
    'static,
    (
        name!(id_a, AnyElement),
        name!(id_b, AnyElement),
        name!(similarity, f64),
    ),
> {
    let search = array_search(threshold, k, ngram, unit);
    let (corpus, ids) = load_arrays(ids, texts, search, fcinfo);
    keyed_pairs(corpus, ids)
}

/// The clusters of near-duplicate texts among `texts`, as `(id, cluster_id)` ordered by
/// `(cluster_id, id)` in the ids' ordering: connected components named by their smallest id,
/// or (mode 'representative') keep-one groups in array order named by the kept row's id.
#[pg_extern(immutable, strict, parallel_safe, name = "minhash_clusters")]
#[allow(clippy::too_many_arguments)]
fn minhash_clusters_of_arrays(
    ids: AnyArray,
    texts: Array<'_, &str>,
    threshold: default!(f64, 0.8),
    k: default!(i32, 128),
    ngram: default!(i32, 5),
    unit: default!(&str, "'char'"),
    mode: default!(&str, "'connected'"),
    fcinfo: pg_sys::FunctionCallInfo,
) -> TableIterator<'static, (name!(id, AnyElement), name!(cluster_id, AnyElement))> {
    let mode = ClusterMode::parse(mode).or_raise();
    let search = array_search(threshold, k, ngram, unit);
    let (corpus, ids) = load_arrays(ids, texts, search, fcinfo);
    keyed_clusters(corpus, ids, mode)
}

/// The search of the array forms' arguments, banded as `minhash_index_create` bands an index.
fn array_search(threshold: f64, k: i32, ngram: i32, unit: &str) -> Search {
    let threshold = check_threshold(threshold).or_raise();
    let shingling = Shingling::new(ngram, unit).or_raise();
    let banding = default_banding(threshold, k).or_raise();
    Search {
        k: check_k(k).or_raise(),
        shingling,
        banding,
        threshold,
        threads: search_threads(),
    }
}

/// The rows of the two arrays, `ids[i]` with `texts[i]`, as a corpus whose ids are the ranks
/// of `ids` (see `pg::ids`). A NULL or empty text is left out, as the index leaves it out; a
/// NULL id goes only with a NULL text (22004).
fn load_arrays(
    ids: AnyArray,
    texts: Array<'_, &str>,
    search: Search,
    fcinfo: pg_sys::FunctionCallInfo,
) -> (Corpus, Ids) {
    // SAFETY: PostgreSQL passes this call's fcinfo; `ids` is an array datum of type
    // `ids.oid()`, detoasted into this call's memory context.
    let (id_values, id_nulls, elemtype, collation) = unsafe {
        let array =
            pg_sys::pg_detoast_datum(ids.datum().cast_mut_ptr()).cast::<pg_sys::ArrayType>();
        let elemtype = (*array).elemtype;
        let (values, nulls) = elements(array, elemtype, "ids");
        (values, nulls, elemtype, (*fcinfo).fncollation)
    };
    // SAFETY: a text[] datum, detoasted by `Array`.
    let (text_values, text_nulls) =
        unsafe { elements(texts.into_array_type().cast_mut(), pg_sys::TEXTOID, "texts") };
    if id_values.len() != text_values.len() {
        raise(
            PgSqlErrorCode::ERRCODE_ARRAY_ELEMENT_ERROR,
            format!(
                "ids and texts have different lengths {} and {}",
                id_values.len(),
                text_values.len()
            ),
            None,
        );
    }
    let mut corpus = Corpus::new(search);
    bound_search(&mut corpus);
    // SAFETY: reading the backend's current memory context: the function's multi-call one.
    let mut ids = Ids::new(elemtype, collation, unsafe { pg_sys::CurrentMemoryContext });
    let mut rows: Vec<(i64, &str)> = Vec::new();
    for i in 0..id_values.len() {
        let text = (!text_nulls[i]).then(|| {
            // SAFETY: a non-NULL element of a text[] array.
            unsafe { <&str as FromDatum>::from_datum(text_values[i], false) }.expect("not NULL")
        });
        if id_nulls[i] {
            if text.is_some() {
                raise(
                    PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
                    format!("ids[{}] is NULL but its text is not", i + 1),
                    None,
                );
            }
            continue;
        }
        let position = ids.push(id_values[i]);
        if let Some(text) = text {
            rows.push((position, text));
        }
        if i % 65_536 == 0 {
            interrupts();
        }
    }
    for batch in rows.chunks(65_536) {
        corpus.add_rows(batch, &mut interrupts).or_raise();
    }
    by_rank(&mut corpus, &mut ids);
    (corpus, ids)
}

/// The elements and NULL flags of the array `array` of `elemtype` (a one-dimensional array,
/// 2202E otherwise), pointing into it.
///
/// # Safety
/// `array` is a valid, detoasted array of `elemtype` that outlives the returned datums.
unsafe fn elements(
    array: *mut pg_sys::ArrayType,
    elemtype: pg_sys::Oid,
    name: &str,
) -> (Vec<pg_sys::Datum>, Vec<bool>) {
    // SAFETY: by the caller's contract `array` is a valid array header.
    let ndim = unsafe { (*array).ndim };
    if ndim > 1 {
        raise(
            PgSqlErrorCode::ERRCODE_ARRAY_ELEMENT_ERROR,
            format!("{name} must be a one-dimensional array, not {ndim}-dimensional"),
            None,
        );
    }
    let (mut typlen, mut typbyval, mut typalign) = (0i16, false, 0 as std::ffi::c_char);
    let (mut values, mut nulls, mut count) = (std::ptr::null_mut(), std::ptr::null_mut(), 0);
    // SAFETY: the array is valid and of `elemtype`; deconstruct_array pallocs the two arrays
    // of `count` entries it returns.
    unsafe {
        pg_sys::get_typlenbyvalalign(elemtype, &mut typlen, &mut typbyval, &mut typalign);
        pg_sys::deconstruct_array(
            array,
            elemtype,
            typlen.into(),
            typbyval,
            typalign,
            &mut values,
            &mut nulls,
            &mut count,
        );
        let count = count as usize;
        if count == 0 {
            return (Vec::new(), Vec::new());
        }
        (
            std::slice::from_raw_parts(values, count).to_vec(),
            std::slice::from_raw_parts(nulls, count).to_vec(),
        )
    }
}

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
    TableIterator::new(try_components(id_a.into_iter().zip(id_b), &mut interrupts).or_raise())
}
