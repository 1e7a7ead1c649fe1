//! Row ids of any type with a default B-tree ordering (uuid, text, numeric, ...), as the
//! core's ordinals.
//!
//! The core pairs and clusters `i64` ids and orders its results by them. A search over ids of
//! another type gives each row its position as id while loading, then [`Ids::rank`] sorts the
//! ids with their type's B-tree comparison and the core's ids become ranks
//! (`Corpus::rename`): results ordered by rank are ordered by id, and [`Ids::get`] maps a rank
//! back to its datum. Integers are compared in Rust; other types through the comparison
//! function of their default B-tree operator class, under the collation given (as `ORDER BY`
//! sorts them).

use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::{AnyElement, PgSqlErrorCode};

use crate::core::capacity::{push, reserve};
use crate::core::dedup::Corpus;
use crate::core::params::ClusterMode;
use crate::core::sort::sort_by;
use crate::pg::backend::interrupts;
use crate::pg::error::{raise, OrRaise};
use crate::pg::names::type_name;

/// What the ids' memory holds; named in out-of-memory errors.
const IDS: &str = "the ids";

/// How two ids compare.
enum Compare {
    /// smallint, integer or bigint (`bytes` long): by value.
    Integer { bytes: i16 },
    /// Through the type's B-tree comparison function (the type cache's copy, which lives as
    /// long as the backend) under `collation`.
    Btree {
        function: *mut pg_sys::FmgrInfo,
        collation: pg_sys::Oid,
    },
}

/// Ids of one type, in the order they were added, copied into a memory context that outlives
/// the list (a set-returning function's multi-call context, so that they stay valid while it
/// returns rows).
pub struct Ids {
    typ: pg_sys::Oid,
    typlen: i16,
    typbyval: bool,
    compare: Compare,
    context: pg_sys::MemoryContext,
    datums: Vec<pg_sys::Datum>,
    /// Positions in id order, once ranked.
    sorted: Vec<u32>,
}

impl Ids {
    /// An empty list of ids of type `typ`, compared under `collation` (the database's default
    /// for a collatable type given none), whose copies go into `context`. A type without a
    /// default B-tree operator class cannot be ordered: 42883, as `ORDER BY` reports it.
    pub fn new(typ: pg_sys::Oid, collation: pg_sys::Oid, context: pg_sys::MemoryContext) -> Ids {
        let (mut typlen, mut typbyval, mut typalign) = (0i16, false, 0 as std::ffi::c_char);
        // SAFETY: catalog look-ups of a type that exists (a function argument's or a query
        // column's); the type cache entry is never freed.
        let compare = unsafe {
            pg_sys::get_typlenbyvalalign(typ, &mut typlen, &mut typbyval, &mut typalign);
            if [pg_sys::INT2OID, pg_sys::INT4OID, pg_sys::INT8OID].contains(&typ) {
                Compare::Integer { bytes: typlen }
            } else {
                let entry = pg_sys::lookup_type_cache(typ, pg_sys::TYPECACHE_CMP_PROC_FINFO as i32);
                if (*entry).cmp_proc_finfo.fn_oid == pg_sys::InvalidOid {
                    raise(
                        PgSqlErrorCode::ERRCODE_UNDEFINED_FUNCTION,
                        format!(
                            "could not identify a comparison function for type {}",
                            type_name(typ)
                        ),
                        Some("Ids must be of a type with a default btree operator class.".into()),
                    );
                }
                let collation =
                    if collation == pg_sys::InvalidOid && pg_sys::type_is_collatable(typ) {
                        pg_sys::DEFAULT_COLLATION_OID
                    } else {
                        collation
                    };
                Compare::Btree {
                    function: &mut (*entry).cmp_proc_finfo,
                    collation,
                }
            }
        };
        Ids {
            typ,
            typlen,
            typbyval,
            compare,
            context,
            datums: Vec::new(),
            sorted: Vec::new(),
        }
    }

    /// Adds a copy of the id `datum` (of the list's type, not NULL) and returns its position:
    /// 0, 1, 2, ... in the order of adding.
    pub fn push(&mut self, datum: pg_sys::Datum) -> i64 {
        // SAFETY: `datum` is a value of type `typ`, whose length and passing `typlen` and
        // `typbyval` describe; the copy is made in `context`, which outlives the list.
        let copy = unsafe {
            let old = pg_sys::MemoryContextSwitchTo(self.context);
            let copy = if self.typbyval {
                datum
            } else if self.typlen == -1 {
                // detoasted: the copy must not point into a tuple or TOAST table
                pg_sys::Datum::from(pg_sys::pg_detoast_datum_copy(datum.cast_mut_ptr()))
            } else {
                let len = if self.typlen == -2 {
                    std::ffi::CStr::from_ptr(datum.cast_mut_ptr()).count_bytes() + 1
                } else {
                    self.typlen as usize
                };
                let copy = pg_sys::palloc(len);
                std::ptr::copy_nonoverlapping(datum.cast_mut_ptr::<u8>(), copy.cast(), len);
                pg_sys::Datum::from(copy)
            };
            pg_sys::MemoryContextSwitchTo(old);
            copy
        };
        push(&mut self.datums, copy, IDS).or_raise();
        self.datums.len() as i64 - 1
    }

    /// The rank of each id in id order, by position: `ranks[position]`. Two equal ids are an
    /// error (22023) naming the id.
    pub fn rank(&mut self, check_interrupts: &mut dyn FnMut()) -> Vec<i64> {
        let n = self.datums.len();
        let mut sorted = Vec::new();
        reserve(&mut sorted, n, IDS).or_raise();
        sorted.extend(0..n as u32);
        let datums = &self.datums;
        let compare = &self.compare;
        let order =
            |x: &u32, y: &u32| compare_ids(compare, datums[*x as usize], datums[*y as usize]);
        sort_by(&mut sorted, order, check_interrupts).or_raise();
        let equal = sorted.windows(2).enumerate().find(|(i, w)| {
            if i % 65_536 == 0 {
                check_interrupts();
            }
            order(&w[0], &w[1]).is_eq()
        });
        if let Some((_, pair)) = equal {
            raise(
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                format!(
                    "ids must be distinct, but {} appears more than once",
                    self.text_of(datums[pair[0] as usize])
                ),
                None,
            );
        }
        let mut ranks = Vec::new();
        reserve(&mut ranks, n, IDS).or_raise();
        ranks.resize(n, 0i64);
        for (rank, &position) in sorted.iter().enumerate() {
            ranks[position as usize] = rank as i64;
        }
        self.sorted = sorted;
        ranks
    }

    /// The id of rank `rank` (see [`Ids::rank`]).
    pub fn get(&self, rank: i64) -> AnyElement {
        let datum = self.datums[self.sorted[rank as usize] as usize];
        // SAFETY: a value of type `typ`, valid while the list's memory context lives.
        unsafe { AnyElement::from_polymorphic_datum(datum, false, self.typ) }.expect("not NULL")
    }

    /// An id as its type's output function prints it.
    fn text_of(&self, datum: pg_sys::Datum) -> String {
        let (mut output, mut varlena) = (pg_sys::InvalidOid, false);
        // SAFETY: the output function of the ids' type, given one of its values; the result
        // is a palloc'd C string.
        unsafe {
            pg_sys::getTypeOutputInfo(self.typ, &mut output, &mut varlena);
            std::ffi::CStr::from_ptr(pg_sys::OidOutputFunctionCall(output, datum))
                .to_string_lossy()
                .into_owned()
        }
    }
}

/// Orders two ids the way `compare` says.
fn compare_ids(compare: &Compare, x: pg_sys::Datum, y: pg_sys::Datum) -> std::cmp::Ordering {
    match *compare {
        Compare::Integer { bytes } => {
            let value = |d: pg_sys::Datum| match bytes {
                2 => d.value() as i16 as i64,
                4 => d.value() as i32 as i64,
                _ => d.value() as i64,
            };
            value(x).cmp(&value(y))
        }
        Compare::Btree {
            function,
            collation,
        } => {
            // SAFETY: the B-tree comparison function of the ids' type, given two of its values;
            // it returns an int4 below, at or above zero.
            let result = unsafe { pg_sys::FunctionCall2Coll(function, collation, x, y) };
            (result.value() as i32).cmp(&0)
        }
    }
}

/// The rows of a typed pair search, `(id_a, id_b, similarity)`, and of a typed cluster search,
/// `(id, cluster_id)` (each `#[pg_extern]` names the columns).
pub(crate) type PairRows = TableIterator<'static, (AnyElement, AnyElement, f64)>;
pub(crate) type ClusterRows = TableIterator<'static, (AnyElement, AnyElement)>;

/// Makes the corpus's ids (the positions `ids` gave) the ranks of the ids in their ordering.
pub(crate) fn by_rank(corpus: &mut Corpus, ids: &mut Ids) {
    let ranks = ids.rank(&mut interrupts);
    corpus.rename(|position| ranks[position as usize]);
}

/// The pairs of `corpus` (ids ranked by [`by_rank`]) as the ids of `ids`.
pub(crate) fn keyed_pairs(corpus: Corpus, ids: Ids) -> PairRows {
    let pairs = corpus.duplicates(interrupts).or_raise();
    TableIterator::new(pairs.map(move |(a, b, similarity)| (ids.get(a), ids.get(b), similarity)))
}

/// The clusters of `corpus` (ids ranked by [`by_rank`]) in `mode`, as the ids of `ids`.
pub(crate) fn keyed_clusters(corpus: Corpus, ids: Ids, mode: ClusterMode) -> ClusterRows {
    let clusters = corpus.clusters_in(mode, &mut interrupts).or_raise();
    TableIterator::new(
        clusters
            .into_iter()
            .map(move |(id, cluster)| (ids.get(id), ids.get(cluster))),
    )
}
