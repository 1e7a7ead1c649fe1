//! Exact Jaccard similarity of two documents' shingle sets.

use std::collections::HashMap;

use super::capacity::{copy_str, reserve, reserve_map, CapacityError};
use super::hash::{shingle_hash, window_hashes};
use super::normalize::normalize_into;
use super::params::Shingling;
use super::shingle::{byte_windows, for_each_shingle};
use super::sort::{sort_by, sort_u64};

/// Windows hashed between interrupt checks.
/// Bytes of shingle sets a verification cache keeps (per backend for `jaccard`, per search for
/// `minhash_duplicates` and `minhash_clusters`) before it starts over.
pub const SHINGLE_CACHE_BYTES: usize = 256 << 20;
const HASH_BATCH: usize = 1 << 16;

/// A document's distinct shingles, ordered by (hash, bytes) so two sets intersect in one merge.
/// Ordering by hash first makes the sort cheap; comparing bytes keeps the result exact even if
/// two different shingles share a hash.
#[derive(Default)]
pub struct ShingleSet {
    norm: String,
    /// (hash, start, end) of each distinct shingle; offsets fit u32 as PostgreSQL text < 1 GB.
    items: Vec<(u32, u32, u32)>,
    /// Two different shingles of this document share a hash.
    repeats_hash: bool,
    /// Buffers kept for the next `rebuild`.
    scratch: Scratch,
}

#[derive(Default)]
struct Scratch {
    /// Sort keys: the hash in the high half, the shingle's ordinal in the low half.
    keys: Vec<u64>,
    /// One batch of window hashes.
    hashes: Vec<u32>,
    /// The span of each shingle, when shingles are not simply the n-byte windows.
    spans: Vec<(u32, u32)>,
}

impl ShingleSet {
    /// The set of `doc`; an error if the memory it needs cannot be had.
    pub fn try_new(
        doc: &str,
        shingling: Shingling,
        check_interrupts: &mut dyn FnMut(),
    ) -> Result<ShingleSet, CapacityError> {
        let mut set = ShingleSet::default();
        set.try_rebuild(doc, shingling, check_interrupts)?;
        // a set kept (e.g. in a cache) holds no scratch space
        set.scratch = Scratch::default();
        Ok(set)
    }

    /// [`ShingleSet::try_new`], reporting an error through [`CapacityError::fail`].
    pub fn new(doc: &str, shingling: Shingling, check_interrupts: &mut dyn FnMut()) -> ShingleSet {
        Self::try_new(doc, shingling, check_interrupts).unwrap_or_else(|e| e.fail())
    }

    /// [`ShingleSet::try_new`] for a caller with a limit on the result: `refuse` is given a
    /// lower bound on the number of distinct shingles (the number of distinct hashes) before
    /// the set is built, and an error it returns is returned without taking the memory the set
    /// would need.
    pub fn try_new_bounded(
        doc: &str,
        shingling: Shingling,
        refuse: &mut dyn FnMut(usize) -> Result<(), CapacityError>,
        check_interrupts: &mut dyn FnMut(),
    ) -> Result<ShingleSet, CapacityError> {
        let mut set = ShingleSet::default();
        set.build(doc, shingling, Some(refuse), check_interrupts)?;
        Ok(set)
    }

    /// Makes this the set of `doc`, reusing the buffers of the set it was: verifying many
    /// candidates against one query allocates nothing once the buffers have grown. On an error
    /// the set is left empty.
    pub fn try_rebuild(
        &mut self,
        doc: &str,
        shingling: Shingling,
        check_interrupts: &mut dyn FnMut(),
    ) -> Result<(), CapacityError> {
        self.build(doc, shingling, None, check_interrupts)
    }

    fn build(
        &mut self,
        doc: &str,
        shingling: Shingling,
        refuse: Option<&mut dyn FnMut(usize) -> Result<(), CapacityError>>,
        check_interrupts: &mut dyn FnMut(),
    ) -> Result<(), CapacityError> {
        self.items.clear();
        self.repeats_hash = false;
        let ascii = normalize_into(doc, &mut self.norm, check_interrupts)?;
        let bytes = self.norm.as_bytes();
        let Scratch {
            keys,
            hashes,
            spans,
        } = &mut self.scratch;
        keys.clear();
        spans.clear();
        let n = shingling.ngram;
        let windows = byte_windows(&self.norm, ascii, shingling);
        if let Some(windows) = windows {
            reserve(keys, windows, "the shingles of a text")?;
            for first in (0..windows).step_by(HASH_BATCH) {
                hashes.clear();
                window_hashes(bytes, n, first..windows.min(first + HASH_BATCH), hashes);
                keys.extend(
                    hashes
                        .iter()
                        .zip(first..)
                        .map(|(&h, i)| (u64::from(h) << 32) | i as u64),
                );
                check_interrupts();
            }
        } else {
            let mut grown = Ok(());
            for_each_shingle(&self.norm, shingling, |(s, e)| {
                if keys.len() == keys.capacity() || spans.len() == spans.capacity() {
                    let more = keys.len().max(1024);
                    grown = grown
                        .and_then(|()| reserve(keys, more, "the shingles of a text"))
                        .and_then(|()| reserve(spans, more, "the shingles of a text"));
                    if grown.is_err() {
                        return;
                    }
                }
                keys.push((u64::from(shingle_hash(&bytes[s..e])) << 32) | spans.len() as u64);
                spans.push((s as u32, e as u32));
                if spans.len() % HASH_BATCH == 0 {
                    check_interrupts();
                }
            });
            grown?;
        }
        // one u64 sort orders by hash; equal hashes end up adjacent, and their bytes decide
        // whether they are one shingle (kept once) or a collision
        sort_u64(keys, check_interrupts);
        if let Some(refuse) = refuse {
            let hashes = keys.chunk_by(|x, y| x >> 32 == y >> 32).count();
            refuse(hashes)?;
        }
        reserve(&mut self.items, keys.len(), "the shingles of a text")?;
        match windows {
            Some(_) => {
                self.repeats_hash = distinct(
                    keys,
                    bytes,
                    &mut self.items,
                    |i| (i as u32, (i + n) as u32),
                    check_interrupts,
                )
            }
            None => {
                self.repeats_hash =
                    distinct(keys, bytes, &mut self.items, |i| spans[i], check_interrupts)
            }
        }
        if self.repeats_hash {
            // a collision inside this document (rare): the ordered merge needs (hash, bytes)
            // order, with each shingle once in a run of equal hashes
            if let Err(e) = dedup_collisions(&mut self.items, bytes, check_interrupts) {
                self.items.clear();
                return Err(e);
            }
        }
        Ok(())
    }

    /// [`ShingleSet::try_rebuild`], reporting an error through [`CapacityError::fail`].
    pub fn rebuild(&mut self, doc: &str, shingling: Shingling, check_interrupts: &mut dyn FnMut()) {
        self.try_rebuild(doc, shingling, check_interrupts)
            .unwrap_or_else(|e| e.fail())
    }

    /// The distinct shingles, in no particular order.
    pub fn shingles(&self) -> impl ExactSizeIterator<Item = &str> {
        self.items
            .iter()
            .map(|&(_, s, e)| &self.norm[s as usize..e as usize])
    }

    /// The distinct shingles sorted by code point (UTF-8 byte order), as `shingles()` returns
    /// them.
    pub fn try_into_sorted(
        mut self,
        check_interrupts: &mut dyn FnMut(),
    ) -> Result<SortedShingles, CapacityError> {
        let bytes = self.norm.as_bytes();
        let text = |&(_, s, e): &(u32, u32, u32)| &bytes[s as usize..e as usize];
        sort_by(
            &mut self.items,
            |x, y| text(x).cmp(text(y)),
            check_interrupts,
        )?;
        Ok(SortedShingles {
            norm: self.norm,
            items: self.items,
        })
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    fn key(&self, i: usize) -> (u32, &[u8]) {
        let (h, s, e) = self.items[i];
        (h, &self.norm.as_bytes()[s as usize..e as usize])
    }

    /// Heap bytes held, for cache accounting.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.norm.capacity() + self.items.capacity() * std::mem::size_of::<(u32, u32, u32)>()
    }

    /// Number of shingles in both sets, exactly: a hash collision never counts two different
    /// shingles as one. The fast merge advances on hashes without branching; where hashes are
    /// equal it compares the shingles' bytes, and if they ever differ (a collision, about one
    /// pair in 40,000 for typical documents) the ordered (hash, bytes) merge decides.
    pub fn intersection(&self, other: &ShingleSet) -> usize {
        let (a, b) = (&self.items, &other.items);
        let (mut i, mut j, mut common) = (0, 0, 0);
        let mut collided = false;
        while i < a.len() && j < b.len() {
            let (x, y) = (a[i].0, b[j].0);
            if x == y {
                collided |= self.key(i).1 != other.key(j).1;
            }
            common += usize::from(x == y);
            i += usize::from(x <= y);
            j += usize::from(y <= x);
        }
        if collided || self.repeats_hash || other.repeats_hash {
            return self.intersection_ordered(other);
        }
        common
    }

    fn intersection_ordered(&self, other: &ShingleSet) -> usize {
        let (mut i, mut j, mut common) = (0, 0, 0);
        while i < self.len() && j < other.len() {
            match self.key(i).cmp(&other.key(j)) {
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
                std::cmp::Ordering::Equal => {
                    common += 1;
                    i += 1;
                    j += 1;
                }
            }
        }
        common
    }

    /// |A ∩ B| / |A ∪ B|; two empty sets are identical (1).
    pub fn jaccard(&self, other: &ShingleSet) -> f64 {
        let common = self.intersection(other);
        let union = self.len() + other.len() - common;
        if union == 0 {
            1.0
        } else {
            common as f64 / union as f64
        }
    }
}

/// The distinct shingles of a document in code-point order (see [`ShingleSet::try_into_sorted`]).
pub struct SortedShingles {
    norm: String,
    items: Vec<(u32, u32, u32)>,
}

impl SortedShingles {
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &str> {
        self.items
            .iter()
            .map(|&(_, s, e)| &self.norm[s as usize..e as usize])
    }
}

/// Puts each run of equal hashes of `items` (in hash order) in byte order, with each shingle
/// once: runs are a few items long, unless someone made many shingles collide on purpose.
fn dedup_collisions(
    items: &mut Vec<(u32, u32, u32)>,
    bytes: &[u8],
    check_interrupts: &mut dyn FnMut(),
) -> Result<(), CapacityError> {
    let text = |&(_, s, e): &(u32, u32, u32)| &bytes[s as usize..e as usize];
    let (mut start, mut kept) = (0, 0);
    while start < items.len() {
        let hash = items[start].0;
        let end = start + items[start..].iter().take_while(|x| x.0 == hash).count();
        if end - start > 1 {
            sort_by(
                &mut items[start..end],
                |x, y| text(x).cmp(text(y)),
                check_interrupts,
            )?;
        }
        for i in start..end {
            if i == start || text(&items[i]) != text(&items[kept - 1]) {
                items[kept] = items[i];
                kept += 1;
            }
        }
        start = end;
    }
    items.truncate(kept);
    Ok(())
}

/// Appends to `items` each distinct shingle of the sorted `keys` once, as (hash, start, end),
/// where `span(ordinal)` is the span of a key's shingle in `bytes`; returns whether two
/// different shingles share a hash. `items` has room for every key. Interrupts are checked
/// every [`HASH_BATCH`] keys: a repeated shingle is compared with the one kept, which lies
/// anywhere in the text, so a long repetitive text takes seconds here.
#[inline(always)]
fn distinct(
    keys: &[u64],
    bytes: &[u8],
    items: &mut Vec<(u32, u32, u32)>,
    span: impl Fn(usize) -> (u32, u32),
    check_interrupts: &mut dyn FnMut(),
) -> bool {
    let text = |&(_, s, e): &(u32, u32, u32)| &bytes[s as usize..e as usize];
    let mut repeats_hash = false;
    for batch in keys.chunks(HASH_BATCH) {
        for &key in batch {
            let (s, e) = span(key as u32 as usize);
            let item = ((key >> 32) as u32, s, e);
            if let Some(last) = items.last() {
                if last.0 == item.0 {
                    if text(last) == text(&item) {
                        continue;
                    }
                    repeats_hash = true;
                }
            }
            items.push(item);
        }
        if batch.len() == HASH_BATCH {
            check_interrupts();
        }
    }
    repeats_hash
}

/// Shingle sets of recently seen documents, so that verifying many candidate pairs shingles
/// each document once rather than once per pair. Keyed by a hash of the raw text and the
/// shingling; a hit is confirmed by comparing the whole text, so results stay exact. Bounded:
/// when an insertion would pass `capacity` bytes the cache starts over, and a document larger
/// than the whole cache is used without being kept.
pub struct ShingleCache {
    entries: HashMap<(u64, Shingling), (String, ShingleSet)>,
    bytes: usize,
    capacity: usize,
}

impl ShingleCache {
    pub fn new(capacity: usize) -> ShingleCache {
        ShingleCache {
            entries: HashMap::new(),
            bytes: 0,
            capacity,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn clear(&mut self) {
        self.entries = HashMap::new();
        self.bytes = 0;
    }

    /// Exact Jaccard similarity of two documents, through the cache.
    pub fn try_jaccard(
        &mut self,
        a: &str,
        b: &str,
        shingling: Shingling,
        check_interrupts: &mut dyn FnMut(),
    ) -> Result<f64, CapacityError> {
        // any good 64-bit hash of the text serves as a key; hits are confirmed byte for byte
        let key = |doc: &str| (mur3::murmurhash3_x64_128(doc.as_bytes(), 0).0, shingling);
        let mut uncached = [None, None];
        for (slot, doc) in [a, b].into_iter().enumerate() {
            if self.entries.contains_key(&key(doc)) {
                continue;
            }
            let set = ShingleSet::try_new(doc, shingling, check_interrupts)?;
            let size = set.heap_bytes() + doc.len();
            if size > self.capacity {
                uncached[slot] = Some(set);
                continue;
            }
            if self.bytes + size > self.capacity {
                self.clear();
            }
            reserve_map(&mut self.entries, 1, "the shingle cache")?;
            let text = copy_str(doc, "the shingle cache")?;
            self.bytes += size;
            self.entries.insert(key(doc), (text, set));
        }
        let cached = |doc: &str| {
            self.entries
                .get(&key(doc))
                .filter(|(text, _)| text == doc)
                .map(|(_, set)| set)
        };
        let [ua, ub] = &uncached;
        Ok(
            match (
                ua.as_ref().or_else(|| cached(a)),
                ub.as_ref().or_else(|| cached(b)),
            ) {
                (Some(x), Some(y)) => x.jaccard(y),
                // a different text with the same 64-bit hash, or evicted by the other insertion
                _ => ShingleSet::try_new(a, shingling, check_interrupts)?
                    .jaccard(&ShingleSet::try_new(b, shingling, check_interrupts)?),
            },
        )
    }
}

/// Exact Jaccard similarity of the shingle sets of two documents.
#[cfg(test)]
pub fn jaccard(a: &str, b: &str, shingling: Shingling) -> f64 {
    let mut none = || {};
    ShingleSet::new(a, shingling, &mut none).jaccard(&ShingleSet::new(b, shingling, &mut none))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::normalize::normalize;

    /// Different shingles with equal hashes, within and across documents, are never merged.
    #[test]
    fn hash_collisions_stay_exact() {
        let chars = Shingling::new(2, "char").unwrap();
        let set = |items: &[(u32, &str)]| {
            let norm: String = items.iter().map(|(_, t)| *t).collect();
            let mut at = 0;
            let items = items
                .iter()
                .map(|&(h, t)| {
                    at += t.len();
                    (h, (at - t.len()) as u32, at as u32)
                })
                .collect::<Vec<_>>();
            let repeats_hash = items.windows(2).any(|w| w[0].0 == w[1].0);
            ShingleSet {
                norm,
                items,
                repeats_hash,
                scratch: Scratch::default(),
            }
        };
        // "ab" and "zz" collide on hash 7 across the two sets
        let a = set(&[(1, "xy"), (7, "ab"), (9, "cd")]);
        let b = set(&[(1, "xy"), (7, "zz"), (9, "cd")]);
        assert_eq!(a.intersection(&b), 2);
        // "ab" and "ba" collide inside one set
        let c = set(&[(7, "ab"), (7, "ba"), (9, "cd")]);
        let d = set(&[(7, "ba"), (9, "cd")]);
        assert_eq!(c.intersection(&d), 2);
        assert_eq!(d.intersection(&c), 2);
        assert_eq!(
            ShingleSet::new("abcd", chars, &mut || {}).jaccard(&ShingleSet::new(
                "bcde",
                chars,
                &mut || {}
            )),
            0.5
        );
    }

    /// Real 32-bit collisions between 5-grams (found by a birthday search), inside one
    /// document and across two: the sets still count shingles, not hashes.
    #[test]
    fn real_collisions_stay_exact() {
        let mut seen = HashMap::new();
        let mut found = None;
        for i in 0u64.. {
            let gram: String = (0..5)
                .map(|d| (b'a' + (i / 26u64.pow(d) % 26) as u8) as char)
                .collect();
            if let Some(other) = seen.insert(shingle_hash(gram.as_bytes()), gram.clone()) {
                found = Some((other, gram));
                break;
            }
        }
        let (x, y) = found.expect("a collision among 26^5 strings");
        assert_ne!(x, y);
        let chars = Shingling::new(5, "char").unwrap();
        let exact = |a: &str, b: &str| {
            let set = |d: &str| -> std::collections::HashSet<String> {
                let d = normalize(d);
                (0..=d.len() - 5).map(|i| d[i..i + 5].to_string()).collect()
            };
            let (a, b) = (set(a), set(b));
            a.intersection(&b).count() as f64 / a.union(&b).count() as f64
        };
        let docs = [
            format!("{x} {y} {x}"),
            format!("{y} zz {y}"),
            format!("{x} qq"),
            format!("{x}{y}{x}{y}"),
        ];
        let mut reused = ShingleSet::default();
        for a in &docs {
            for b in &docs {
                reused.rebuild(a, chars, &mut || {});
                let want = exact(a, b);
                assert_eq!(
                    reused.jaccard(&ShingleSet::new(b, chars, &mut || {})),
                    want,
                    "{a} / {b}"
                );
                assert_eq!(jaccard(a, b, chars), want, "{a} / {b}");
            }
        }
    }

    #[test]
    fn cache_gives_the_same_values_and_stays_bounded() {
        let chars = Shingling::new(3, "char").unwrap();
        let docs = [
            "the quick brown fox",
            "the quick brown fix",
            "",
            "lazy dog",
            "THE QUICK brown fox",
        ];
        let mut cache = ShingleCache::new(600);
        for _ in 0..3 {
            for a in docs {
                for b in docs {
                    assert_eq!(
                        cache.try_jaccard(a, b, chars, &mut || {}).unwrap(),
                        jaccard(a, b, chars)
                    );
                    assert!(cache.bytes <= 600, "{}", cache.bytes);
                }
            }
        }
        let words = Shingling::new(1, "word").unwrap();
        assert_eq!(
            cache
                .try_jaccard(docs[0], docs[1], words, &mut || {})
                .unwrap(),
            jaccard(docs[0], docs[1], words)
        );
        // a capacity below one document still answers, uncached
        let mut tiny = ShingleCache::new(1);
        assert_eq!(
            tiny.try_jaccard(docs[0], docs[1], chars, &mut || {})
                .unwrap(),
            jaccard(docs[0], docs[1], chars)
        );
        assert!(tiny.is_empty());
    }

    fn words(n: i32) -> Shingling {
        Shingling::new(n, "word").unwrap()
    }

    #[test]
    fn exact_values() {
        let chars = Shingling::new(5, "char").unwrap();
        assert_eq!(jaccard("", "", chars), 1.0);
        assert_eq!(jaccard("", "x", chars), 0.0);
        assert_eq!(jaccard("x", "", chars), 0.0);
        assert_eq!(jaccard("Same text", "same   TEXT", chars), 1.0);
        assert_eq!(
            jaccard(
                "Who was the first king of Poland",
                "Who was the first ruler of Poland",
                words(1)
            ),
            0.75
        );
        // bigrams: {a b, b c, c d} vs {a b, b c, c e}: 2 / 4
        assert_eq!(jaccard("a b c d", "a b c e", words(2)), 0.5);
        // char 2-grams: {ab, bc} vs {bc, cd}: 1 / 3
        assert_eq!(
            jaccard("abc", "bcd", Shingling::new(2, "char").unwrap()),
            1.0 / 3.0
        );
    }
}
