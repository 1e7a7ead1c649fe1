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

/// Distinct shingles a candidate may have for [`JaccardProbe`] to count them in a table; a longer
/// text (and a query this long) is verified through [`ShingleSet`], which needs less memory
/// per shingle.
const PROBE_MAX_SHINGLES: usize = 1 << 16;
/// Bytes of a normalized text [`JaccardProbe`] walks the shingles of (a text of more has more
/// than [`PROBE_MAX_SHINGLES`] shingles unless its words are long).
const PROBE_MAX_BYTES: usize = 16 * PROBE_MAX_SHINGLES;

/// A text's distinct shingles, held for verifying many candidate texts against it one after
/// another (a lookup's candidates, a duplicate check's): [`JaccardProbe::jaccard`] is
/// exactly [`ShingleSet::jaccard`] of the candidate's set and this one, without sorting the
/// candidate's shingles. Each shingle of the candidate is hashed once, made distinct in a
/// scratch table (open addressing; a new candidate starts a new generation instead of clearing
/// it) and, when first seen, looked up in the query's table; equal hashes are confirmed byte
/// for byte, so a collision never counts two shingles as one. (Sorting each candidate's
/// shingles and merging took a third of a lookup's time at thresholds 0.3-0.4.) A probe that
/// runs long, as many shingles sharing a hash would make it, gives the candidate to
/// [`ShingleSet`] instead, whose cost does not depend on the hashes.
pub struct JaccardProbe {
    shingling: Shingling,
    query: ShingleSet,
    /// The query's distinct shingles by hash (empty for a query verified through `ShingleSet`).
    table: Vec<Place>,
    /// The candidate being verified: its normalized text, and its shingles' hashes and spans.
    norm: String,
    hashes: Vec<u32>,
    spans: Vec<(u32, u32)>,
    /// The candidate's distinct shingles so far: places of the current generation.
    seen: Vec<Place>,
    generation: u32,
    /// Steps past a taken place allowed per shingle before a candidate goes to `ShingleSet`.
    max_steps_per_shingle: usize,
    fallback: ShingleSet,
}

/// A place of a probe's tables: a shingle's hash and span, and for the candidate's table the
/// generation that put it there (0: never; in the query's table, `end == 0` marks a free place,
/// as every shingle has at least one byte).
#[derive(Clone, Copy, Default)]
struct Place {
    generation: u32,
    hash: u32,
    start: u32,
    end: u32,
}

/// The place of `hash` in a table of `1 << bits` places (Fibonacci hashing: every bit of the
/// hash moves the place).
fn home(hash: u32, bits: u32) -> usize {
    (hash.wrapping_mul(0x9E37_79B9) >> (32 - bits)) as usize
}

/// The bytes of `bytes` from `start` to `end`.
fn text(bytes: &[u8], start: u32, end: u32) -> &[u8] {
    &bytes[start as usize..end as usize]
}

/// Bits of a table with room for `len` shingles at most half full (at least 16 places).
fn table_bits(len: usize) -> u32 {
    (2 * len).next_power_of_two().max(16).trailing_zeros()
}

impl JaccardProbe {
    /// The probe of `doc`; an error if the memory it needs cannot be had.
    pub fn try_new(
        doc: &str,
        shingling: Shingling,
        check_interrupts: &mut dyn FnMut(),
    ) -> Result<JaccardProbe, CapacityError> {
        let mut probe = JaccardProbe {
            shingling,
            query: ShingleSet::default(),
            table: Vec::new(),
            norm: String::new(),
            hashes: Vec::new(),
            spans: Vec::new(),
            seen: Vec::new(),
            generation: 0,
            max_steps_per_shingle: 8,
            fallback: ShingleSet::default(),
        };
        probe.try_reset(doc, check_interrupts)?;
        Ok(probe)
    }

    /// Makes this the probe of `doc` (shingled alike), keeping the memory it has.
    pub fn try_reset(
        &mut self,
        doc: &str,
        check_interrupts: &mut dyn FnMut(),
    ) -> Result<(), CapacityError> {
        self.query
            .try_rebuild(doc, self.shingling, check_interrupts)?;
        self.table.clear();
        if self.query.len() <= PROBE_MAX_SHINGLES {
            let bits = table_bits(self.query.len());
            reserve(
                &mut self.table,
                1 << bits,
                "the shingles of a lookup's text",
            )?;
            self.table.resize(1 << bits, Place::default());
            let mask = self.table.len() - 1;
            for &(hash, start, end) in &self.query.items {
                let mut at = home(hash, bits);
                while self.table[at].end != 0 {
                    at = (at + 1) & mask;
                }
                self.table[at] = Place {
                    generation: 0,
                    hash,
                    start,
                    end,
                };
            }
        }
        Ok(())
    }

    /// [`JaccardProbe::try_new`], reporting an error through [`CapacityError::fail`].
    pub fn new(
        doc: &str,
        shingling: Shingling,
        check_interrupts: &mut dyn FnMut(),
    ) -> JaccardProbe {
        Self::try_new(doc, shingling, check_interrupts).unwrap_or_else(|e| e.fail())
    }

    /// The exact Jaccard similarity of `doc`'s shingles and the query's (shingled alike).
    pub fn try_jaccard(
        &mut self,
        doc: &str,
        check_interrupts: &mut dyn FnMut(),
    ) -> Result<f64, CapacityError> {
        if self.table.is_empty() || !self.shingle(doc, check_interrupts)? {
            return self.through_sorted(doc, check_interrupts);
        }
        self.new_generation()?;
        match self.count() {
            Some(common) => Ok(common),
            None => self.through_sorted(doc, check_interrupts),
        }
    }

    /// [`JaccardProbe::try_jaccard`], reporting an error through [`CapacityError::fail`].
    pub fn jaccard(&mut self, doc: &str, check_interrupts: &mut dyn FnMut()) -> f64 {
        self.try_jaccard(doc, check_interrupts)
            .unwrap_or_else(|e| e.fail())
    }

    fn through_sorted(
        &mut self,
        doc: &str,
        check_interrupts: &mut dyn FnMut(),
    ) -> Result<f64, CapacityError> {
        self.fallback
            .try_rebuild(doc, self.shingling, check_interrupts)?;
        Ok(self.fallback.jaccard(&self.query))
    }

    /// Normalizes `doc` and hashes its shingles into `hashes` (and, when they are not simply
    /// its n-byte windows, their spans into `spans`); false for a text with more shingles than
    /// a probe counts.
    fn shingle(
        &mut self,
        doc: &str,
        check_interrupts: &mut dyn FnMut(),
    ) -> Result<bool, CapacityError> {
        let shingling = self.shingling;
        let ascii = normalize_into(doc, &mut self.norm, check_interrupts)?;
        // (a text this long goes to the sorted sets before its shingles are walked: the walk
        // below stops counting, not walking, at the limit, and checks no interrupts)
        if self.norm.len() > PROBE_MAX_BYTES {
            return Ok(false);
        }
        let bytes = self.norm.as_bytes();
        self.hashes.clear();
        self.spans.clear();
        if let Some(windows) = byte_windows(&self.norm, ascii, shingling) {
            if windows > PROBE_MAX_SHINGLES {
                return Ok(false);
            }
            reserve(&mut self.hashes, windows, "the shingles of a text")?;
            window_hashes(bytes, shingling.ngram, 0..windows, &mut self.hashes);
            return Ok(true);
        }
        let (hashes, spans) = (&mut self.hashes, &mut self.spans);
        let mut fits = Ok(true);
        for_each_shingle(&self.norm, shingling, |(s, e)| {
            if !matches!(fits, Ok(true)) {
                return;
            }
            if spans.len() == PROBE_MAX_SHINGLES {
                fits = Ok(false);
                return;
            }
            if spans.len() == spans.capacity() {
                let more = spans.len().max(64);
                if let Err(e) = reserve(hashes, more, "the shingles of a text")
                    .and_then(|()| reserve(spans, more, "the shingles of a text"))
                {
                    fits = Err(e);
                    return;
                }
            }
            hashes.push(shingle_hash(&bytes[s..e]));
            spans.push((s as u32, e as u32));
        });
        check_interrupts();
        fits
    }

    /// Makes room in `seen` for the shingles `shingle` hashed and starts a generation there.
    fn new_generation(&mut self) -> Result<(), CapacityError> {
        let places = 1 << table_bits(self.hashes.len());
        if self.seen.len() < places {
            self.seen = Vec::new();
            reserve(&mut self.seen, places, "the shingles of a text")?;
            self.seen.resize(places, Place::default());
            self.generation = 0;
        }
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.seen.fill(Place::default());
            self.generation = 1;
        }
        Ok(())
    }

    /// The similarity of the shingles `shingle` hashed with the query's, or None where the
    /// probes took too many steps.
    fn count(&mut self) -> Option<f64> {
        let n = self.shingling.ngram as u32;
        let shingles = self.hashes.len();
        let bits = table_bits(shingles);
        let generation = self.generation;
        let seen = &mut self.seen[..1 << bits];
        let mask = seen.len() - 1;
        let (cand, query) = (self.norm.as_bytes(), self.query.norm.as_bytes());
        let (table, qbits) = (&self.table, self.table.len().trailing_zeros());
        let qmask = table.len() - 1;
        let mut steps_left = self.max_steps_per_shingle * shingles + 64;
        let (mut distinct, mut common) = (0usize, 0usize);
        for (i, &hash) in self.hashes.iter().enumerate() {
            let (start, end) = match self.spans.get(i) {
                Some(&span) => span,
                None => (i as u32, i as u32 + n),
            };
            let shingle = text(cand, start, end);
            let mut at = home(hash, bits);
            loop {
                let place = &mut seen[at];
                if place.generation != generation {
                    *place = Place {
                        generation,
                        hash,
                        start,
                        end,
                    };
                    distinct += 1;
                    let mut q = home(hash, qbits);
                    while table[q].end != 0 {
                        if table[q].hash == hash
                            && text(query, table[q].start, table[q].end) == shingle
                        {
                            common += 1;
                            break;
                        }
                        q = (q + 1) & qmask;
                        steps_left = steps_left.checked_sub(1)?;
                    }
                    break;
                }
                if place.hash == hash && text(cand, place.start, place.end) == shingle {
                    break;
                }
                at = (at + 1) & mask;
                steps_left = steps_left.checked_sub(1)?;
            }
        }
        let union = self.query.len() + distinct - common;
        Some(if union == 0 {
            1.0
        } else {
            common as f64 / union as f64
        })
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

    /// Texts for comparing a probe with sorted sets: few letters (so shingles repeat, inside a
    /// text and across texts), words, non-ASCII, empty and one-shingle texts.
    fn probe_docs() -> Vec<String> {
        let mut rng = crate::core::testing::Rng(0x5eed_cafe);
        let mut docs = vec![
            String::new(),
            "a".into(),
            "ab".into(),
            "Zürich über alles, Zürich".into(),
            "the quick brown fox jumps over the lazy dog".into(),
            "the quick brown fox jumped over a lazy dog".into(),
        ];
        for _ in 0..60 {
            let len = rng.below(120);
            let text: String = (0..len)
                .map(|_| match rng.below(12) {
                    0 => ' ',
                    1 => 'é',
                    x => (b'a' + (x % 5) as u8) as char,
                })
                .collect();
            docs.push(text);
        }
        docs
    }

    /// A probe gives bit for bit what the sorted sets give, for every shingling, over many
    /// candidates in turn (each a new generation of its table), and with a probe forced to give
    /// every candidate to the sorted sets after its first step past a taken place.
    #[test]
    fn probe_equals_sorted_sets() {
        let docs = probe_docs();
        let shinglings = (1..=6)
            .map(|n| Shingling::new(n, "char").unwrap())
            .chain((1..=3).map(words));
        for shingling in shinglings {
            for (i, a) in docs.iter().enumerate() {
                let mut probe = JaccardProbe::new(a, shingling, &mut || {});
                if i % 3 == 0 {
                    probe.max_steps_per_shingle = 0;
                }
                for b in &docs {
                    let want = jaccard(b, a, shingling);
                    assert_eq!(
                        probe.jaccard(b, &mut || {}).to_bits(),
                        want.to_bits(),
                        "{a:?} / {b:?} ({shingling:?})"
                    );
                }
                // (short texts: only a forced probe leaves its table)
                assert!(i % 3 == 0 || probe.fallback.is_empty());
            }
        }
    }

    /// Real 32-bit collisions of 5-grams, texts past the probe's table size (as candidate and
    /// as query), and the wrap of the generation count: still the sorted sets' values.
    #[test]
    fn probe_stays_exact_at_its_limits() {
        let chars = Shingling::new(5, "char").unwrap();
        let mut seen = HashMap::new();
        let (x, y) = (0u64..)
            .find_map(|i| {
                let gram: String = (0..5)
                    .map(|d| (b'a' + (i / 26u64.pow(d) % 26) as u8) as char)
                    .collect();
                seen.insert(shingle_hash(gram.as_bytes()), gram.clone())
                    .map(|other| (other, gram))
            })
            .expect("a collision among 26^5 strings");
        let mut rng = crate::core::testing::Rng(7);
        let long: String = (0..PROBE_MAX_SHINGLES + 100)
            .map(|_| (b'a' + rng.below(26) as u8) as char)
            .collect();
        let longer = format!("{long} and more");
        let docs = [
            format!("{x} {y} {x}"),
            format!("{y} zz {y}"),
            format!("{x} qq"),
            format!("{x}{y}{x}{y}"),
            long,
            longer,
        ];
        // a text past the bytes a probe walks, in words: to the sorted sets, either way round
        let words1 = words(1);
        let huge = "lorem ipsum dolor ".repeat(PROBE_MAX_BYTES / 18 + 1);
        for (a, b) in [(&docs[2], &huge), (&huge, &docs[2])] {
            assert_eq!(
                JaccardProbe::new(a, words1, &mut || {})
                    .jaccard(b, &mut || {})
                    .to_bits(),
                jaccard(b, a, words1).to_bits()
            );
        }
        for a in &docs {
            let mut probe = JaccardProbe::new(a, chars, &mut || {});
            probe.generation = u32::MAX - 2;
            for _ in 0..3 {
                for b in &docs {
                    assert_eq!(
                        probe.jaccard(b, &mut || {}).to_bits(),
                        jaccard(b, a, chars).to_bits(),
                        "{} / {}",
                        &a[..a.len().min(40)],
                        &b[..b.len().min(40)]
                    );
                }
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
