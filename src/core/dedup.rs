//! Whole-table near-duplicate search in memory: every pair of rows that shares a band key and
//! whose exact Jaccard similarity reaches the threshold, the clusters those pairs form, and
//! keep-one groups around representative rows ([`Corpus::representatives`]).
//!
//! This is what `minhash_duplicates` and `minhash_clusters` run. It gives the same pairs as
//! joining the band table with itself and verifying every candidate, but faster:
//! - identical texts are stored once; copies of a text are pairs of similarity 1 and share all
//!   its other pairs, so n copies cost one signature and one set of candidates;
//! - candidate pairs are formed band by band from sorted keys (no set of candidate pairs is
//!   ever built; a pair found is kept once, in a set of the pairs found);
//! - before the exact check, a candidate must agree on enough low nibbles of its signature slots
//!   (see [`min_sketch_matches`]), which throws away unrelated texts that collide in a crowded
//!   bucket for a few nanoseconds each;
//! - clustering needs the clusters, not every pair: it compares no two texts of one cluster and
//!   joins two clusters at the first verified pair between them, so a crowded bucket of
//!   near-duplicates costs about one verification per text (see [`Corpus::connect`]).
//!
//! Memory is proportional to the rows, never to the number of candidate pairs, and kept within
//! a budget where it can be (see [`Corpus::spill_to`]): `k / 2 + 16` bytes per distinct text (its
//! sketch, first row and text offset) and 16 per further copy stay in memory; the texts and
//! their band keys (`8 * bands` bytes) go to temporary files once they pass half the budget;
//! the bands searched at once and the failed pairs remembered share what is left.

use std::cmp::Reverse;
use std::collections::hash_map::RandomState;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use super::bands::band_keys;
use super::capacity::{
    filled, push, reserve, reserve_map, reserve_set, return_freed_memory, CapacityError,
};
use super::components::SharedUnionFind;
use super::jaccard::JaccardProbe;
use super::parallel;
use super::params::{Banding, ClusterMode, Shingling};
use super::signature::{Signer, EMPTY_SLOT};
use super::sketch::{binomial_lower_quantile, SEARCH_SKETCH_MISS_PROBABILITY};
use super::slots::{Kernel, SketchForm};
use super::sort::{sort_by, sort_by_key_in_place};
use super::spill::{Column, SpillDir};

/// Candidate pairs looked at, rows or pairs handled, between calls of `check_interrupts`.
const INTERRUPT_EVERY: u32 = 1 << 16;

/// Parameters of a search: the index's signature and banding, and the similarity threshold.
#[derive(Clone, Copy, Debug)]
pub struct Search {
    pub k: usize,
    pub shingling: Shingling,
    pub banding: Banding,
    pub threshold: f64,
    /// Threads the search may run on at once (see `core::parallel`); 1 keeps it on the
    /// calling thread.
    pub threads: usize,
}

/// The smallest number of equal sketch nibbles (out of `k`) a pair of similarity `threshold` or
/// more shows except with probability at most `miss`.
///
/// Each slot of two signatures is equal with probability J (the Jaccard similarity), and its low
/// 4 bits are equal at least as often; slots are independent, so the number of equal nibbles is
/// at least Binomial(k, J) in distribution, and for J >= threshold at least Binomial(k,
/// threshold). The largest m with P[Binomial(k, threshold) < m] <= miss is returned. Being a
/// candidate (one band of slots all equal) only makes more slots equal.
pub fn min_sketch_matches(k: usize, threshold: f64, miss: f64) -> usize {
    binomial_lower_quantile(k, threshold, miss)
}

/// Sketch bytes past which a search's sketches take 4 bits per slot: a quarter of its budget.
fn packs_sketches(sketch_bytes: usize, budget: usize) -> bool {
    sketch_bytes > budget / 4
}

/// The rows of a table, ready to search: each distinct text once with its band keys and the
/// low 4 bits of each signature slot.
pub struct Corpus {
    search: Search,
    /// Equal sketch slots a candidate needs to be verified: [`min_sketch_matches`], and in
    /// nibbles the padding half of an odd `k`, which is always equal.
    min_matches: usize,
    form: SketchForm,
    /// The instructions sketches are compared with on this CPU.
    kernel: Kernel,
    /// Distinct texts, concatenated; `ends[t]` is where text `t` ends.
    text: Column,
    ends: Vec<u64>,
    /// `keys[i]`: band key `i` of each text in text order, 8 bytes (little-endian) each.
    keys: Vec<Column>,
    /// Text `t`'s sketch, `form.len(k)` bytes from `t * form.len(k)`: the low byte of each
    /// signature slot, or its low 4 bits once the sketches pass a quarter of the budget
    /// (a byte filters candidates a little better; see [`Corpus::pack_sketches`]).
    sketch: Vec<u8>,
    /// The first row of each distinct text, and `(text, row)` for every further copy.
    first_row: Vec<i64>,
    copies: Vec<(u32, i64)>,
    /// Called on the calling thread as the bands of a search finish: `(bands done, bands)`.
    progress: Option<fn(usize, usize)>,
    /// Distinct texts by 32 bits of a hash of the text keyed at random for this search (so no
    /// input can be made to collide), from which they are probed in turn (`h`, `h + 1`, ...);
    /// a hit is confirmed byte for byte.
    seen: HashMap<u32, u32>,
    hasher: RandomState,
    /// Where the texts and keys go past half of `budget` bytes; `None` keeps them in memory.
    spill: Option<SpillDir>,
    budget: usize,
    /// [`BAND_PART_BYTES`], less in tests.
    band_part_bytes: usize,
    /// Called on the calling thread as the keys, then the texts, move to the files, with what
    /// moved.
    spilled: Option<fn(&str)>,
}

/// A verified pair of distinct texts, `(a, b, similarity)` with `a < b`.
type TextPair = (u32, u32, f64);

/// Rows signed by one task of [`Corpus::add_rows`].
const SIGN_CHUNK: usize = 256;

/// What the corpus's memory holds; named in out-of-memory errors.
const CORPUS: &str = "the rows being searched";

/// Counts calls down and checks for interrupts every [`INTERRUPT_EVERY`] of them.
struct Countdown(u32);

impl Countdown {
    fn new() -> Countdown {
        Countdown(INTERRUPT_EVERY)
    }

    #[inline(always)]
    fn tick(&mut self, check_interrupts: &mut dyn FnMut()) {
        self.tick_by(1, check_interrupts);
    }

    /// Counts `n` calls at once.
    #[inline(always)]
    fn tick_by(&mut self, n: usize, check_interrupts: &mut dyn FnMut()) {
        match self.0.checked_sub(u32::try_from(n).unwrap_or(u32::MAX)) {
            Some(left) if left > 0 => self.0 = left,
            _ => {
                self.0 = INTERRUPT_EVERY;
                check_interrupts();
            }
        }
    }
}

/// The band keys of a block of a band's column, 8 bytes each, with their texts from `first`.
fn keyed(block: &[u8], first: u32) -> impl Iterator<Item = (u64, u32)> + '_ {
    block
        .chunks_exact(8)
        .zip(first..)
        .map(|(key, t)| (u64::from_le_bytes(key.try_into().unwrap()), t))
}

/// Two slots' low 4 bits in one byte.
fn pack(low: u8, high: u8) -> u8 {
    (low & 0x0F) | (high << 4)
}

impl Corpus {
    pub fn new(search: Search) -> Corpus {
        Corpus {
            search,
            min_matches: min_sketch_matches(
                search.k,
                search.threshold,
                SEARCH_SKETCH_MISS_PROBABILITY,
            ),
            form: SketchForm::Bytes,
            kernel: Kernel::detect(),
            text: Column::default(),
            ends: Vec::new(),
            keys: (0..search.banding.bands)
                .map(|_| Column::default())
                .collect(),
            sketch: Vec::new(),
            first_row: Vec::new(),
            copies: Vec::new(),
            progress: None,
            seen: HashMap::new(),
            hasher: RandomState::new(),
            spill: None,
            budget: usize::MAX,
            band_part_bytes: BAND_PART_BYTES,
            spilled: None,
        }
    }

    /// Keeps the search within `budget` bytes where it can: once the texts and band keys held
    /// pass half of it, they move to temporary files of `dir`, the keys first, the texts past a
    /// quarter of it (see
    /// [`Corpus::keep_within_budget`]), and are read back from there;
    /// the bands searched at once and the failed pairs remembered are sized to what the budget
    /// leaves. What stays in memory whatever the budget is the sketch, first row and text
    /// offset of each distinct text, the copies, and one band's sort of the texts by key.
    /// `spilled` is called as they move.
    pub fn spill_to(&mut self, dir: SpillDir, budget: usize, spilled: Option<fn(&str)>) {
        self.spill = Some(dir);
        self.budget = budget;
        self.spilled = spilled;
    }

    /// Whether the keys and whether the texts are in temporary files.
    fn spilled(&self) -> (bool, bool) {
        (
            self.keys.first().is_some_and(Column::on_disk),
            self.text.on_disk(),
        )
    }

    /// Bytes held whatever the budget: per distinct text its sketch, first row and end, and
    /// per copy its text and row.
    fn fixed_bytes(&self) -> usize {
        let n = self.distinct_texts();
        n * (self.form.len(self.search.k) + 16)
            + self.copies.len() * std::mem::size_of::<(u32, i64)>()
    }

    /// Bytes of texts and keys held in memory.
    fn held_bytes(&self) -> usize {
        self.text.in_memory() + self.keys.iter().map(Column::in_memory).sum::<usize>()
    }

    /// Moves the keys to temporary files once the texts and keys pass half the budget, and the
    /// texts once they alone pass a quarter of it. The keys go first: a band reads its keys once, in order, and a
    /// verification reads texts at random.
    fn keep_within_budget(&mut self) -> Result<(), CapacityError> {
        if self.form == SketchForm::Bytes && packs_sketches(self.sketch.len(), self.budget) {
            self.pack_sketches();
        }
        let Some(dir) = &self.spill else {
            return Ok(());
        };
        let half = self.budget / 2;
        let (keys_on_disk, _) = self.spilled();
        if !keys_on_disk && self.held_bytes() > half {
            for column in &mut self.keys {
                column.spill(dir)?;
            }
            if let Some(spilled) = self.spilled {
                spilled("band keys");
            }
        }
        if !self.text.on_disk() && self.text.in_memory() > self.budget / 4 {
            self.text.spill(dir)?;
            if let Some(spilled) = self.spilled {
                spilled("texts");
            }
        }
        // (checked once per batch of rows added)
        let on_disk: u64 = std::iter::once(&self.text)
            .chain(&self.keys)
            .filter(|c| c.on_disk())
            .map(Column::len)
            .sum();
        match dir.limit {
            Some(limit) if on_disk > limit => Err(CapacityError::TempFileLimit {
                kilobytes: limit / 1024,
            }),
            _ => Ok(()),
        }
    }

    /// Equal sketch slots a candidate needs to be verified.
    fn min_matches(&self) -> usize {
        match self.form {
            SketchForm::Bytes => self.min_matches,
            SketchForm::Nibbles => self.min_matches + self.search.k % 2,
        }
    }

    /// Keeps 4 bits of each sketch slot instead of a byte, in place: half the memory, for a
    /// filter that lets a pair at 0.5 through about 3 times as often (0.21 against 0.07 at
    /// the defaults; from 0.6 up both let nearly every pair through).
    fn pack_sketches(&mut self) {
        let k = self.search.k;
        let len = SketchForm::Nibbles.len(k);
        for t in 0..self.distinct_texts() {
            for i in 0..len {
                // (byte `t * len + i` is written after bytes `t * k + 2i` and on were read)
                let low = self.sketch[t * k + 2 * i];
                let high = if 2 * i + 1 < k {
                    self.sketch[t * k + 2 * i + 1]
                } else {
                    0
                };
                self.sketch[t * len + i] = pack(low, high);
            }
        }
        self.sketch.truncate(self.distinct_texts() * len);
        self.sketch.shrink_to_fit();
        self.form = SketchForm::Nibbles;
    }

    /// Ends the loading: what is buffered for the files is written, and the map of distinct
    /// texts, which only loading needs, is freed.
    fn finish_loading(&mut self) -> Result<(), CapacityError> {
        self.seen = HashMap::new();
        return_freed_memory();
        self.text.flush()?;
        for column in &mut self.keys {
            column.flush()?;
        }
        Ok(())
    }

    /// Frees what only the search needs (texts, keys, sketches) before the results are made.
    fn free_search_data(&mut self) {
        self.text = Column::default();
        self.keys = Vec::new();
        self.sketch = Vec::new();
    }

    /// The budget left for the search once the rows are held: what the bands searched at once
    /// and the failed pairs remembered may take.
    fn budget_left(&self) -> usize {
        self.budget
            .saturating_sub(self.budget / UNCOUNTED_SHARE)
            .saturating_sub(self.fixed_bytes())
            .saturating_sub(self.held_bytes())
    }

    /// The parts a band is searched in (see [`Corpus::band_part_order`]): as few as hold at
    /// most [`BAND_PART_BYTES`] of sorted texts each (a band reads its keys once per part).
    fn band_parts(&self) -> usize {
        let bytes = self.distinct_texts() * std::mem::size_of::<(u64, u32)>();
        bytes
            .div_ceil(self.band_part_bytes)
            .next_power_of_two()
            .min(MAX_BAND_PARTS)
    }

    /// Bytes one band's sort of the texts of a part takes.
    fn band_sort_bytes(&self) -> usize {
        (self.distinct_texts() * std::mem::size_of::<(u64, u32)>()).div_ceil(self.band_parts())
    }

    /// Threads the bands are searched on: the search's, fewer if the budget left holds fewer
    /// bands' sorts (and the failed pairs' least), one at the least.
    fn band_threads(&self) -> usize {
        let room = self.budget_left().saturating_sub(MIN_PAIR_ROOM);
        (room / self.band_sort_bytes().max(1)).clamp(1, self.search.threads.max(1))
    }

    /// What the budget gives the failed pairs remembered once `threads` bands' sorts are
    /// held, in bytes (at least [`MIN_PAIR_ROOM`]).
    fn pair_room(&self, threads: usize) -> usize {
        self.budget_left()
            .saturating_sub(threads * self.band_sort_bytes())
            .max(MIN_PAIR_ROOM)
    }

    /// Has `report(bands done, bands)` called as the bands of [`Corpus::duplicates`] and
    /// [`Corpus::clusters`] finish (keep-one groups walk the texts, not the bands, and do not
    /// report).
    pub fn report_progress(&mut self, report: fn(usize, usize)) {
        self.progress = Some(report);
    }

    /// Number of distinct texts held.
    pub fn distinct_texts(&self) -> usize {
        self.ends.len()
    }

    /// Text `t`, borrowed from memory or read into `scratch`.
    fn text_of<'a>(&'a self, t: usize, scratch: &'a mut Vec<u8>) -> Result<&'a str, CapacityError> {
        let start = if t == 0 { 0 } else { self.ends[t - 1] };
        let bytes = self
            .text
            .read(start, (self.ends[t] - start) as usize, scratch)?;
        if !self.text.on_disk() {
            // SAFETY: in memory, the column holds exactly what `insert` appended: whole `&str`
            // texts, of which `start..ends[t]` is one.
            return Ok(unsafe { std::str::from_utf8_unchecked(bytes) });
        }
        // a file changed under the search is an error, not undefined behaviour
        std::str::from_utf8(bytes).map_err(|_| CapacityError::TempFile { errno: 0 })
    }

    /// Adds a row. Texts without a single shingle are left out, as the band table leaves them
    /// out: they have no band keys. On an error the corpus is unchanged.
    pub fn add(
        &mut self,
        id: i64,
        text: &str,
        check_interrupts: &mut dyn FnMut(),
    ) -> Result<(), CapacityError> {
        self.add_rows(&[(id, text)], check_interrupts)
    }

    /// Adds rows, in order, as [`Corpus::add`] adds each: the texts not seen before are signed
    /// on the search's threads, [`SIGN_CHUNK`] rows to a task. On an error the rows before the
    /// failing one are added.
    pub fn add_rows(
        &mut self,
        rows: &[(i64, &str)],
        check_interrupts: &mut dyn FnMut(),
    ) -> Result<(), CapacityError> {
        let Search {
            k,
            shingling,
            threads,
            ..
        } = self.search;
        // a copy of a text seen before needs no signature
        let mut hashes: Vec<u32> = Vec::new();
        let mut fresh: Vec<usize> = Vec::new();
        reserve(&mut hashes, rows.len(), CORPUS)?;
        reserve(&mut fresh, rows.len(), CORPUS)?;
        for (i, &(_, text)) in rows.iter().enumerate() {
            hashes.push(self.hasher.hash_one(text) as u32);
            if self.copy_of(hashes[i], text)?.is_none() {
                fresh.push(i);
            }
        }
        let signed = parallel::run(
            threads,
            fresh.len().div_ceil(SIGN_CHUNK),
            check_interrupts,
            &mut |_| {},
            Signer::default,
            |signer, chunk, check| {
                // the chunk's signatures side by side, `k` slots each
                let mut signatures = Vec::new();
                for &i in fresh[chunk * SIGN_CHUNK..].iter().take(SIGN_CHUNK) {
                    let signature = signer.sign(rows[i].1, k, shingling, check)?;
                    reserve(&mut signatures, k, CORPUS)?;
                    signatures.extend_from_slice(signature);
                }
                Ok(signatures)
            },
        )?;
        let mut signatures = fresh
            .iter()
            .copied()
            .zip(signed.iter().flat_map(|chunk| chunk.chunks_exact(k)))
            .peekable();
        for (i, &(id, text)) in rows.iter().enumerate() {
            let signature = signatures.next_if(|(at, _)| *at == i).map(|(_, s)| s);
            if let Some(t) = self.copy_of(hashes[i], text)? {
                // (a text first seen twice in one batch was signed for each; the first is kept)
                push(&mut self.copies, (t, id), CORPUS)?;
                continue;
            }
            let signature = signature.expect("a row not seen before was signed");
            self.insert(id, text, hashes[i], signature)?;
        }
        self.keep_within_budget()
    }

    /// The distinct text `text` (of hash `hash`) is stored as, if it is.
    fn copy_of(&self, hash: u32, text: &str) -> Result<Option<u32>, CapacityError> {
        let mut scratch = Vec::new();
        let mut key = hash;
        while let Some(&t) = self.seen.get(&key) {
            if self.text_of(t as usize, &mut scratch)? == text {
                return Ok(Some(t));
            }
            key = key.wrapping_add(1);
        }
        Ok(None)
    }

    /// Stores a text not seen before with its signature and first row. On an error the corpus
    /// is unchanged.
    fn insert(
        &mut self,
        id: i64,
        text: &str,
        hash: u32,
        signature: &[u32],
    ) -> Result<(), CapacityError> {
        let Search { k, banding, .. } = self.search;
        if signature.iter().all(|&v| v == EMPTY_SLOT) {
            return Ok(());
        }
        let t = u32::try_from(self.ends.len()).map_err(|_| CapacityError::TooLarge {
            what: "the number of distinct texts",
            bytes: self.ends.len(),
            limit: u32::MAX as usize,
        })?;
        // room for everything first, so that a failure leaves nothing half-added (a column may
        // hold bytes past its texts' end, which nothing reads)
        reserve(&mut self.ends, 1, CORPUS)?;
        reserve(&mut self.sketch, self.form.len(k), CORPUS)?;
        reserve(&mut self.first_row, 1, CORPUS)?;
        reserve_map(&mut self.seen, 1, CORPUS)?;
        let keys = band_keys(signature, banding);
        let lens: Vec<u64> = self.keys.iter().map(Column::len).collect();
        let appended = self.text.append(text.as_bytes()).and_then(|()| {
            self.keys
                .iter_mut()
                .zip(&keys)
                .try_for_each(|(column, key)| column.append(&key.to_le_bytes()))
        });
        if let Err(e) = appended {
            // the bytes appended to the key columns so far are taken back
            for (column, len) in self.keys.iter_mut().zip(lens) {
                column.truncate(len);
            }
            let end = self.ends.last().copied().unwrap_or(0);
            self.text.truncate(end);
            return Err(e);
        }
        self.ends.push(self.text.len());
        match self.form {
            SketchForm::Bytes => self.sketch.extend(signature.iter().map(|&v| v as u8)),
            SketchForm::Nibbles => self.sketch.extend(signature.chunks(2).map(|pair| {
                let high = pair.get(1).map_or(0, |&v| v as u8);
                pack(pair[0] as u8, high)
            })),
        }
        self.first_row.push(id);
        let mut key = hash;
        while self.seen.contains_key(&key) {
            key = key.wrapping_add(1);
        }
        self.seen.insert(key, t);
        Ok(())
    }

    /// Every verified pair of distinct texts once, as `(text a, text b, similarity)` with
    /// `a < b`: a list per band, the pairs whose first shared band it is.
    ///
    /// A pair sharing several bands is a candidate in each; the band that finds it first (in
    /// time, as the bands run at once) keeps it, and the others skip it unverified, as they
    /// skip a pair that failed while the budget holds the failures (`BandWork::looked`).
    fn verified_pairs(
        &self,
        check_interrupts: &mut dyn FnMut(),
    ) -> Result<Vec<Vec<TextPair>>, CapacityError> {
        let Search {
            shingling,
            threshold,
            ..
        } = self.search;
        self.for_each_bucket(check_interrupts, |work, found, _, bucket, check| {
            let BandWork {
                near,
                sets,
                looked,
                countdown,
                ..
            } = work;
            near.gather(self, bucket.iter().map(|&(_, t)| t))?;
            for (j, &(_, y)) in bucket.iter().enumerate().skip(1) {
                countdown.tick_by(j, check);
                for &i in near.candidates(j, 0..j, self.min_matches()) {
                    let x = bucket[i as usize].1;
                    let (a, b) = (x.min(y), x.max(y));
                    if looked.contains(a, b) {
                        continue;
                    }
                    let similarity =
                        sets.jaccard(self, x as usize, y as usize, shingling, check)?;
                    if similarity < threshold {
                        looked.remember(a, b)?;
                    } else if looked.insert(a, b)? {
                        push(found, (a, b, similarity), CORPUS)?;
                    }
                }
            }
            Ok(())
        })
    }

    /// Calls `f(work, out, band, bucket, check)` for every bucket of two or more texts (the
    /// texts sharing one band key, as `(key, text)` in text order) and returns each band's `out`
    /// in band order. The bands are spread over the search's threads (see `core::parallel`);
    /// each thread has its own `work` and `check`, and `out` is the band's own.
    fn for_each_bucket<T: Send + Default>(
        &self,
        check_interrupts: &mut dyn FnMut(),
        f: impl Fn(
                &mut BandWork,
                &mut T,
                usize,
                &[(u64, u32)],
                &mut dyn FnMut(),
            ) -> Result<(), CapacityError>
            + Sync,
    ) -> Result<Vec<T>, CapacityError> {
        let bands = self.search.banding.bands;
        let parts = self.band_parts();
        let threads = self.band_threads();
        let looked = PairSet::new(self.pair_room(threads));
        let progress = self.progress;
        parallel::run(
            threads,
            bands,
            check_interrupts,
            &mut |done| {
                if let Some(report) = progress {
                    report(done, bands);
                }
            },
            || BandWork::new(&looked),
            |work, band, check| {
                let mut order = std::mem::take(&mut work.order);
                let mut out = T::default();
                for part in 0..parts {
                    self.band_part_order(band, part, parts, &mut order, check)?;
                    check();
                    for bucket in order.chunk_by(|x, y| x.0 == y.0) {
                        work.countdown.tick(check);
                        if bucket.len() >= 2 {
                            f(work, &mut out, band, bucket, check)?;
                        }
                    }
                }
                work.order = order;
                Ok(out)
            },
        )
    }

    /// Every text as `(key of band, text)`, sorted, into `order`.
    fn band_order(
        &self,
        band: usize,
        order: &mut Vec<(u64, u32)>,
        check_interrupts: &mut dyn FnMut(),
    ) -> Result<(), CapacityError> {
        self.band_part_order(band, 0, 1, order, check_interrupts)
    }

    /// The texts whose key of `band` is in part `part` of `parts` (a power of two) equal
    /// ranges of keys, as `(key of band, text)`, sorted, into `order`. A bucket is in one part,
    /// and the parts in turn give the buckets in key order, as the whole band does; a band
    /// searched a part at a time holds about `1 / parts` of its texts at once (all of them in
    /// one part if they share a key).
    fn band_part_order(
        &self,
        band: usize,
        part: usize,
        parts: usize,
        order: &mut Vec<(u64, u32)>,
        check_interrupts: &mut dyn FnMut(),
    ) -> Result<(), CapacityError> {
        let n = self.distinct_texts();
        order.clear();
        // (a part holds about n / parts texts: room for a little more, then for what comes)
        let expected = n / parts;
        reserve(order, expected + expected / 16, CORPUS)?;
        let mut t = 0u32;
        let mut failed = Ok(());
        if parts == 1 {
            self.keys[band]
                .for_each_block(8, |block| order.extend(keyed(block, order.len() as u32)))?;
        } else {
            let shift = 64 - parts.trailing_zeros();
            self.keys[band].for_each_block(8, |block| {
                for entry in keyed(block, t).filter(|&(key, _)| (key >> shift) as usize == part) {
                    if failed.is_ok() {
                        failed = push(order, entry, CORPUS);
                    }
                }
                t += (block.len() / 8) as u32;
            })?;
        }
        failed?;
        // (in place: a merge through a copy would hold two of these per band searched)
        sort_by_key_in_place(
            order,
            |&(key, t)| (u128::from(key) << 32) | u128::from(t),
            96,
            check_interrupts,
        );
        Ok(())
    }

    /// Whether the signatures of texts `x` and `y` agree on enough low nibbles to be verified
    /// (see [`min_sketch_matches`]).
    #[inline]
    fn sketches_agree(&self, x: usize, y: usize) -> bool {
        let len = self.form.len(self.search.k);
        self.kernel.equal(
            self.form,
            &self.sketch[x * len..][..len],
            &self.sketch[y * len..][..len],
        ) >= self.min_matches()
    }

    /// Joins in `clusters` the texts of every verified pair, up to connectivity: the clusters
    /// come out as the connected components of all verified pairs, but a pair is verified only
    /// where it could join two clusters that are still apart.
    ///
    /// Each bucket is taken as groups, its texts by the cluster they are in when it starts:
    /// texts of one group are connected already and never compared. The groups then join the
    /// parts found so far one at a time: group g merges with part P if a text of g and a text
    /// of P make a verified pair, and the search stops at the first such pair. So a bucket of n
    /// near-duplicate texts costs about n verifications in the first band they share and n
    /// root look-ups in every later one; only a text that joins no part is compared with every
    /// text of the parts, which is what verifying every pair costs.
    ///
    /// Once a bucket is done, any two of its texts are connected or were verified and failed;
    /// a connected pair is skipped in a further band it shares, and so is a failed one while
    /// the budget holds the failures (`BandWork::looked`; past it, it is verified again).
    ///
    /// The bands run at once on the search's threads, joining one shared union-find: a band
    /// groups its buckets by the clusters joined so far by every band, which only saves it
    /// verifications, and the argument above holds whatever the order. A candidate pair that another band has
    /// joined since the bucket was split joins its group and part without a verification, so
    /// bands that start together on a crowded bucket do not verify it once each. Returns the
    /// number of pairs verified exactly.
    fn connect(
        &self,
        clusters: &SharedUnionFind,
        check_interrupts: &mut dyn FnMut(),
    ) -> Result<usize, CapacityError> {
        let Search {
            shingling,
            threshold,
            ..
        } = self.search;
        let n = self.distinct_texts();
        let verified = self.for_each_bucket(
            check_interrupts,
            |work, verified: &mut usize, _, bucket, check| {
                let BandWork {
                    near,
                    sets,
                    looked,
                    groups,
                    countdown,
                    ..
                } = work;
                let groups = match groups {
                    Some(groups) => groups,
                    None => groups.insert(Groups::try_new(n)?),
                };
                if !groups.split(bucket, clusters, countdown, check)? {
                    return Ok(());
                }
                // the bucket's texts in group order: group g is `near`'s texts `groups.start[g]..`
                near.gather(self, groups.texts.iter().copied())?;
                // parts as (first group, last group) of a list linked through `groups.next`
                for g in 0..groups.count() {
                    let (mut last, mut kept) = (g, 0);
                    for p in 0..groups.parts.len() {
                        let (first, part_last) = groups.parts[p];
                        let mut pair = None;
                        'search: for j in groups.positions(g) {
                            let mut h = first;
                            loop {
                                let range = groups.positions(h);
                                countdown.tick_by(range.len(), check);
                                for &i in near.candidates(j, range, self.min_matches()) {
                                    let (x, y) = (
                                        groups.texts[i as usize] as usize,
                                        groups.texts[j] as usize,
                                    );
                                    // joined since the bucket was split (by another band's
                                    // thread): connected, no verification needed
                                    if clusters.root(x) == clusters.root(y) {
                                        pair = Some((x, y));
                                        break 'search;
                                    }
                                    let (a, b) = (x.min(y) as u32, x.max(y) as u32);
                                    if looked.contains(a, b) {
                                        continue;
                                    }
                                    *verified += 1;
                                    if sets.jaccard(self, x, y, shingling, check)? >= threshold {
                                        pair = Some((x, y));
                                        break 'search;
                                    }
                                    looked.remember(a, b)?;
                                }
                                if h == part_last {
                                    break;
                                }
                                h = groups.next[h] as usize;
                            }
                        }
                        if let Some((x, y)) = pair {
                            clusters.union(x, y);
                            groups.next[last] = first as u32;
                            last = part_last;
                        } else {
                            groups.parts[kept] = groups.parts[p];
                            kept += 1;
                        }
                    }
                    groups.parts.truncate(kept);
                    // room for every group was reserved by `split`
                    groups.parts.push((g, last));
                }
                Ok(())
            },
        )?;
        Ok(verified.into_iter().sum())
    }

    /// Gives every row the id `new_id(id)`. The search's order stays the order rows were added
    /// in; pairs and clusters come out in the order of the new ids.
    pub fn rename(&mut self, mut new_id: impl FnMut(i64) -> i64) {
        self.first_row.iter_mut().for_each(|id| *id = new_id(*id));
        self.copies.iter_mut().for_each(|(_, id)| *id = new_id(*id));
    }

    /// The clusters of `mode`: [`Corpus::clusters`] or [`Corpus::representatives`].
    pub fn clusters_in(
        self,
        mode: ClusterMode,
        check_interrupts: &mut dyn FnMut(),
    ) -> Result<Vec<(i64, i64)>, CapacityError> {
        match mode {
            ClusterMode::Connected => self.clusters(check_interrupts),
            ClusterMode::Representative => self.representatives(check_interrupts),
        }
    }

    /// Keep-one groups in the order the rows were added: each row not yet in a group is kept,
    /// and every row not yet in a group whose verified similarity to it reaches the threshold
    /// (among the rows sharing a band key with it) joins its group. Every row of a group of two
    /// or more, as `(id, id of the kept row)`, ordered by `(kept id, id)`. Unlike connected
    /// components, every member is at the threshold or above to its group's kept row.
    ///
    /// Copies of a text go together: the first row of a text is reached before its copies, and
    /// a text joins a group with all its rows. So the walk is over distinct texts in the order
    /// of their first rows, which is text order. A kept text looks at the ungrouped texts of
    /// its buckets through an index of the buckets (two `u32` per text and band, in place of
    /// the band keys, which are freed), and drops from each bucket the texts found in a group,
    /// so a crowded bucket of near-duplicates is read about once per group formed in it. A
    /// pair sharing an earlier band was looked at there already.
    pub fn representatives(
        mut self,
        check_interrupts: &mut dyn FnMut(),
    ) -> Result<Vec<(i64, i64)>, CapacityError> {
        let Search {
            shingling,
            threshold,
            banding,
            ..
        } = self.search;
        let (n, bands) = (self.distinct_texts(), banding.bands);
        self.finish_loading()?;
        let mut buckets = BucketIndex::try_new(&self, check_interrupts)?;
        self.keys = Vec::new();
        let mut sets = Verifier::new();
        let mut kept_by = filled(n, NONE, CORPUS)?;
        let mut countdown = Countdown::new();
        for t in 0..n {
            countdown.tick(check_interrupts);
            if kept_by[t] != NONE {
                continue;
            }
            kept_by[t] = t as u32;
            for band in 0..bands {
                let bucket = buckets.bucket(t, band);
                // the texts still ungrouped after this one move to the front of the bucket
                let mut live = bucket.start;
                for i in bucket.clone() {
                    let u = buckets.texts[i] as usize;
                    countdown.tick(check_interrupts);
                    if kept_by[u] != NONE {
                        continue;
                    }
                    let joins = !buckets.share_earlier_band(t, u, band)
                        && self.sketches_agree(t, u)
                        && sets.jaccard(&self, u, t, shingling, check_interrupts)? >= threshold;
                    if joins {
                        kept_by[u] = t as u32;
                    } else {
                        buckets.texts[live] = u as u32;
                        live += 1;
                    }
                }
                if live < bucket.end {
                    buckets.texts[live] = NONE;
                }
            }
        }
        drop((buckets, sets));
        self.free_search_data();
        // rows per group, then every row of a group of two or more
        let mut size = filled(n, 0usize, CORPUS)?;
        for t in 0..n {
            size[kept_by[t] as usize] += 1;
        }
        for &(t, _) in &self.copies {
            size[kept_by[t as usize] as usize] += 1;
        }
        let group = |t: usize| kept_by[t] as usize;
        let mut out = Vec::new();
        for t in 0..n {
            if size[group(t)] >= 2 {
                push(
                    &mut out,
                    (self.first_row[t], self.first_row[group(t)]),
                    CORPUS,
                )?;
            }
        }
        for &(t, id) in &self.copies {
            let t = t as usize;
            if size[group(t)] >= 2 {
                push(&mut out, (id, self.first_row[group(t)]), CORPUS)?;
            }
        }
        sort_by(
            &mut out,
            |x, y| (x.1, x.0).cmp(&(y.1, y.0)),
            check_interrupts,
        )?;
        Ok(out)
    }

    /// Every row as `(id, text)` in id order, and the rows of each distinct text in id order as
    /// `(offsets, ids)`: text `t` has rows `ids[offsets[t]..offsets[t + 1]]`. Also frees what
    /// only loading needed.
    #[allow(clippy::type_complexity)]
    fn rows_by_text(
        &mut self,
        check_interrupts: &mut dyn FnMut(),
    ) -> Result<(Vec<(i64, u32)>, Vec<usize>, Vec<i64>), CapacityError> {
        let n = self.distinct_texts();
        // every row as (id, text), in id order
        let mut rows: Vec<(i64, u32)> = Vec::new();
        reserve(&mut rows, n + self.copies.len(), CORPUS)?;
        rows.extend(self.first_row.iter().zip(0..).map(|(&id, t)| (id, t)));
        rows.extend(self.copies.iter().map(|&(t, id)| (id, t)));
        self.copies = Vec::new();
        sort_by(&mut rows, Ord::cmp, check_interrupts)?;
        let mut offsets = filled(n + 1, 0usize, CORPUS)?;
        for &(_, t) in &rows {
            offsets[t as usize + 1] += 1;
        }
        for t in 0..n {
            offsets[t + 1] += offsets[t];
        }
        let mut ids = filled(rows.len(), 0i64, CORPUS)?;
        let mut fill = filled(n, 0usize, CORPUS)?;
        fill.copy_from_slice(&offsets[..n]);
        let mut countdown = Countdown::new();
        for &(id, t) in &rows {
            ids[fill[t as usize]] = id;
            fill[t as usize] += 1;
            countdown.tick(check_interrupts);
        }
        Ok((rows, offsets, ids))
    }

    /// Every pair of rows with similarity at least the threshold, as `(id_a, id_b, similarity)`
    /// with `id_a < id_b`, ordered by `(id_a, id_b)`. The pairs are made as they are read: memory
    /// stays proportional to the rows and to the verified pairs of distinct texts, however many
    /// copies of a text there are (n copies alone make n(n-1)/2 pairs). The returned iterator
    /// calls `check_interrupts` every 65,536 pairs.
    pub fn duplicates<F: FnMut()>(
        mut self,
        mut check_interrupts: F,
    ) -> Result<Pairs<F>, CapacityError> {
        let n = self.distinct_texts();
        self.finish_loading()?;
        // the verified pairs of distinct texts, as an adjacency list per text
        let verified = self.verified_pairs(&mut check_interrupts)?;
        self.free_search_data();
        let mut neighbour_offsets = filled(n + 1, 0usize, CORPUS)?;
        for &(x, y, _) in verified.iter().flatten() {
            neighbour_offsets[x as usize + 1] += 1;
            neighbour_offsets[y as usize + 1] += 1;
        }
        for t in 0..n {
            neighbour_offsets[t + 1] += neighbour_offsets[t];
        }
        let mut neighbours = filled(neighbour_offsets[n], (0u32, 0f64), CORPUS)?;
        let mut fill = filled(n, 0usize, CORPUS)?;
        fill.copy_from_slice(&neighbour_offsets[..n]);
        for &(x, y, s) in verified.iter().flatten() {
            for (from, to) in [(x, y), (y, x)] {
                neighbours[fill[from as usize]] = (to, s);
                fill[from as usize] += 1;
            }
        }
        drop((verified, fill));
        let most_neighbours = (0..n)
            .map(|t| neighbour_offsets[t + 1] - neighbour_offsets[t])
            .max()
            .unwrap_or(0);
        let (order, offsets, ids) = self.rows_by_text(&mut check_interrupts)?;
        let mut heap = BinaryHeap::new();
        heap.try_reserve(most_neighbours + 1)
            .map_err(|_| CapacityError::OutOfMemory {
                what: CORPUS,
                bytes: (most_neighbours + 1).saturating_mul(24),
            })?;
        let mut sources = Vec::new();
        reserve(&mut sources, most_neighbours + 1, CORPUS)?;
        Ok(Pairs {
            offsets,
            ids,
            neighbour_offsets,
            neighbours,
            order,
            next_row: 0,
            current: 0,
            heap,
            sources,
            countdown: Countdown::new(),
            check_interrupts,
        })
    }

    /// Every row of a cluster of two or more rows, as `(id, cluster id)` where the cluster id is
    /// the smallest id of the cluster, ordered by `(cluster id, id)`. Clusters are the connected
    /// components of the pairs [`Corpus::duplicates`] returns.
    pub fn clusters(
        mut self,
        check_interrupts: &mut dyn FnMut(),
    ) -> Result<Vec<(i64, i64)>, CapacityError> {
        let n = self.distinct_texts();
        self.finish_loading()?;
        let uf = SharedUnionFind::try_new(n)?;
        self.connect(&uf, check_interrupts)?;
        self.free_search_data();
        let (_, offsets, ids) = self.rows_by_text(check_interrupts)?;
        let rows = |t: usize| &ids[offsets[t]..offsets[t + 1]];
        // per root: smallest id and number of rows in the cluster
        let mut smallest = filled(n, (i64::MAX, 0usize), CORPUS)?;
        for t in 0..n {
            let entry = &mut smallest[uf.root(t)];
            // a text's rows are in id order
            entry.0 = entry.0.min(rows(t)[0]);
            entry.1 += rows(t).len();
        }
        let mut out = Vec::new();
        let mut countdown = Countdown::new();
        for t in 0..n {
            let (cluster, size) = smallest[uf.root(t)];
            if size >= 2 {
                reserve(&mut out, rows(t).len(), CORPUS)?;
                out.extend(rows(t).iter().map(|&id| (id, cluster)));
            }
            countdown.tick(check_interrupts);
        }
        sort_by(
            &mut out,
            |x, y| (x.1, x.0).cmp(&(y.1, y.0)),
            check_interrupts,
        )?;
        Ok(out)
    }
}

/// The pairs of [`Corpus::duplicates`], made one at a time: for each row `a` in id order, the
/// rows `b > a` of its own text (similarity 1) and of the texts verified similar to it, merged in
/// id order.
pub struct Pairs<F> {
    /// Text `t` has rows `ids[offsets[t]..offsets[t + 1]]`, in id order.
    offsets: Vec<usize>,
    ids: Vec<i64>,
    /// Text `t`'s verified neighbours and similarities:
    /// `neighbours[neighbour_offsets[t]..neighbour_offsets[t + 1]]`.
    neighbour_offsets: Vec<usize>,
    neighbours: Vec<(u32, f64)>,
    /// Every row as `(id, text)`, in id order, and the next one to pair.
    order: Vec<(i64, u32)>,
    next_row: usize,
    /// The row being paired, and its sources (a text's rows from some position, and their
    /// similarity to it), merged through a heap of `(next id, source)`.
    current: i64,
    heap: BinaryHeap<Reverse<(i64, usize)>>,
    sources: Vec<(usize, usize, f64)>,
    countdown: Countdown,
    check_interrupts: F,
}

impl<F: FnMut()> Pairs<F> {
    /// Makes `a` (of text `t`) the row being paired: one source per text its pairs come from,
    /// starting after `a`. `heap` and `sources` were reserved for the most a text has.
    fn start_row(&mut self, a: i64, t: usize) {
        self.current = a;
        self.heap.clear();
        self.sources.clear();
        let neighbours = &self.neighbours[self.neighbour_offsets[t]..self.neighbour_offsets[t + 1]];
        let texts =
            std::iter::once((t, 1.0)).chain(neighbours.iter().map(|&(u, s)| (u as usize, s)));
        for (u, similarity) in texts {
            let rows = &self.ids[self.offsets[u]..self.offsets[u + 1]];
            let from = self.offsets[u] + rows.partition_point(|&id| id <= a);
            if from < self.offsets[u + 1] {
                self.heap
                    .push(Reverse((self.ids[from], self.sources.len())));
                self.sources.push((from, self.offsets[u + 1], similarity));
            }
        }
    }
}

impl<F: FnMut()> Iterator for Pairs<F> {
    type Item = (i64, i64, f64);

    fn next(&mut self) -> Option<(i64, i64, f64)> {
        loop {
            self.countdown.tick(&mut self.check_interrupts);
            if let Some(Reverse((b, source))) = self.heap.pop() {
                let (at, end, similarity) = &mut self.sources[source];
                *at += 1;
                if *at < *end {
                    self.heap.push(Reverse((self.ids[*at], source)));
                }
                return Some((self.current, b, *similarity));
            }
            let &(a, t) = self.order.get(self.next_row)?;
            self.next_row += 1;
            self.start_row(a, t as usize);
        }
    }
}

/// No group, or the end of a part's list of groups.
const NONE: u32 = u32::MAX;

/// The texts of one bucket by the cluster they are in when it starts, and the parts those groups
/// have joined into so far (see [`Corpus::connect`]); the space is reused from bucket to bucket
/// and grows to the largest bucket.
struct Groups {
    /// `of_root[r]`: the group of the bucket's texts whose cluster root is `r`; `NONE` for
    /// every root between buckets.
    of_root: Vec<u32>,
    /// The root of each group, in order of first appearance in the bucket.
    roots: Vec<u32>,
    /// The group of each text of the bucket, in bucket order.
    group_of: Vec<u32>,
    /// The bucket's texts by group: group `g` is `texts[start[g]..start[g + 1]]`.
    start: Vec<usize>,
    texts: Vec<u32>,
    /// The group after `g` in its part's list; read only where a merge has set it.
    next: Vec<u32>,
    /// The parts, as the first and last group of their list.
    parts: Vec<(usize, usize)>,
}

impl Groups {
    fn try_new(n: usize) -> Result<Groups, CapacityError> {
        Ok(Groups {
            of_root: filled(n, NONE, CORPUS)?,
            roots: Vec::new(),
            group_of: Vec::new(),
            start: Vec::new(),
            texts: Vec::new(),
            next: Vec::new(),
            parts: Vec::new(),
        })
    }

    fn count(&self) -> usize {
        self.roots.len()
    }

    /// Where group `g`'s texts are in `texts`.
    fn positions(&self, g: usize) -> std::ops::Range<usize> {
        self.start[g]..self.start[g + 1]
    }

    /// Groups the texts of `bucket` by their cluster in `clusters`, and makes room for as many
    /// parts as groups. False if they are all in one cluster: nothing to join.
    fn split(
        &mut self,
        bucket: &[(u64, u32)],
        clusters: &SharedUnionFind,
        countdown: &mut Countdown,
        check_interrupts: &mut dyn FnMut(),
    ) -> Result<bool, CapacityError> {
        self.roots.clear();
        self.group_of.clear();
        reserve(&mut self.roots, bucket.len(), CORPUS)?;
        reserve(&mut self.group_of, bucket.len(), CORPUS)?;
        for &(_, t) in bucket {
            countdown.tick(check_interrupts);
            let root = clusters.root(t as usize);
            if self.of_root[root] == NONE {
                self.of_root[root] = self.roots.len() as u32;
                self.roots.push(root as u32);
            }
            self.group_of.push(self.of_root[root]);
        }
        for &root in &self.roots {
            self.of_root[root as usize] = NONE;
        }
        let groups = self.count();
        if groups < 2 {
            return Ok(false);
        }
        // a counting sort of the texts by group, with `next` as the fill positions
        self.start.clear();
        self.next.clear();
        self.texts.clear();
        self.parts.clear();
        reserve(&mut self.start, groups + 1, CORPUS)?;
        reserve(&mut self.next, groups, CORPUS)?;
        reserve(&mut self.texts, bucket.len(), CORPUS)?;
        reserve(&mut self.parts, groups, CORPUS)?;
        self.start.resize(groups + 1, 0);
        for &g in &self.group_of {
            self.start[g as usize + 1] += 1;
        }
        for g in 0..groups {
            self.start[g + 1] += self.start[g];
        }
        self.next
            .extend(self.start[..groups].iter().map(|&s| s as u32));
        self.texts.resize(bucket.len(), 0);
        for (&(_, t), &g) in bucket.iter().zip(&self.group_of) {
            let at = &mut self.next[g as usize];
            self.texts[*at as usize] = t;
            *at += 1;
        }
        Ok(true)
    }
}

/// The buckets of every band, for looking up the bucket of one text: band `b` lists the texts
/// by `(key, text)` in `texts[b * n..(b + 1) * n]`, and text `t`'s bucket in band `b` starts at
/// `start[t * bands + b]` there. Two texts share a band exactly where their starts are equal.
/// [`Corpus::representatives`] drops texts from their buckets as they join groups.
struct BucketIndex {
    n: usize,
    bands: usize,
    texts: Vec<u32>,
    start: Vec<u32>,
}

impl BucketIndex {
    fn try_new(
        corpus: &Corpus,
        check_interrupts: &mut dyn FnMut(),
    ) -> Result<BucketIndex, CapacityError> {
        let (n, bands) = (corpus.distinct_texts(), corpus.search.banding.bands);
        let mut index = BucketIndex {
            n,
            bands,
            texts: filled(n * bands, 0u32, CORPUS)?,
            start: filled(n * bands, 0u32, CORPUS)?,
        };
        let mut order: Vec<(u64, u32)> = Vec::new();
        let mut countdown = Countdown::new();
        for band in 0..bands {
            corpus.band_order(band, &mut order, check_interrupts)?;
            let texts = &mut index.texts[band * n..(band + 1) * n];
            let mut start = 0;
            for (i, &(key, t)) in order.iter().enumerate() {
                countdown.tick(check_interrupts);
                if key != order[start].0 {
                    start = i;
                }
                texts[i] = t;
                index.start[t as usize * bands + band] = start as u32;
            }
        }
        Ok(index)
    }

    /// Where in `texts` the texts sharing text `t`'s key of `band` are that were not in a group
    /// when the bucket was last looked at. A kept text moves the texts that stay ungrouped to
    /// the front of each of its buckets and ends the bucket after them with [`NONE`]; a text in
    /// a group never looks its buckets up again.
    fn bucket(&self, t: usize, band: usize) -> std::ops::Range<usize> {
        let start = self.start[t * self.bands + band];
        let first = band * self.n + start as usize;
        let len = self.texts[first..(band + 1) * self.n]
            .iter()
            .position(|&u| u == NONE || self.start[u as usize * self.bands + band] != start)
            .unwrap_or((band + 1) * self.n - first);
        first..first + len
    }

    /// Whether texts `x` and `y` share a key of a band before `band`.
    fn share_earlier_band(&self, x: usize, y: usize, band: usize) -> bool {
        let (sx, sy) = (&self.start[x * self.bands..], &self.start[y * self.bands..]);
        (0..band).any(|i| sx[i] == sy[i])
    }
}

/// The texts of one bucket with their sketches copied side by side. A text's sketch is a cache
/// miss or two away in a large corpus; copied once per bucket, the m(m-1)/2 pairs of a crowded
/// bucket of m texts are compared in cache, a few nanoseconds each, where reading the sketches
/// in place cost a miss or more per pair. Nearly every pair of a crowded bucket is told apart
/// by its sketch. The space is reused from bucket to bucket.
#[derive(Default)]
struct Bucket {
    /// Sketch bytes, `k` per text.
    sketch: Vec<u8>,
    k: usize,
    /// How the sketches hold a slot, and the instructions that compare them.
    form: SketchForm,
    kernel: Kernel,
    /// The positions [`Bucket::agreeing`] found last.
    agree: Vec<u32>,
}

impl Bucket {
    /// Copies in the sketches of `texts`, a bucket, in the order given.
    fn gather(
        &mut self,
        corpus: &Corpus,
        texts: impl ExactSizeIterator<Item = u32> + Clone,
    ) -> Result<(), CapacityError> {
        let k = corpus.form.len(corpus.search.k);
        let m = texts.len();
        self.sketch.clear();
        reserve(&mut self.agree, m, CORPUS)?;
        reserve(&mut self.sketch, m.saturating_mul(k), CORPUS)?;
        // the texts of a bucket lie anywhere in the corpus: their lines are asked for a few
        // texts ahead, so that the misses overlap instead of following one another
        let mut ahead = texts.clone().skip(GATHER_AHEAD);
        for t in texts {
            if let Some(u) = ahead.next() {
                prefetch(&corpus.sketch[u as usize * k..][..k]);
            }
            self.sketch
                .extend_from_slice(&corpus.sketch[t as usize * k..][..k]);
        }
        (self.k, self.form, self.kernel) = (k, corpus.form, corpus.kernel);
        Ok(())
    }

    /// The positions `i` in `range` whose text and position `j`'s are a candidate pair to
    /// verify: their sketches agree on at least `min_matches` slots (see
    /// [`min_sketch_matches`]), compared a row at a time in cache.
    fn candidates(
        &mut self,
        j: usize,
        range: std::ops::Range<usize>,
        min_matches: usize,
    ) -> &[u32] {
        let k = self.k;
        self.agree.clear();
        let (probe, rows) = (
            &self.sketch[j * k..][..k],
            &self.sketch[range.start * k..range.end * k],
        );
        // (within the room `gather` reserved in `agree`)
        self.kernel.agreeing(
            self.form,
            probe,
            rows,
            min_matches,
            range.start,
            &mut self.agree,
        );
        &self.agree
    }
}

/// How many texts ahead [`Bucket::gather`] asks for the memory of the text it will copy.
const GATHER_AHEAD: usize = 16;

/// Asks the CPU to start loading the cache lines of `data` (a hint: it reads nothing and cannot
/// fault).
#[inline(always)]
fn prefetch<T>(data: &[T]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let bytes = std::mem::size_of_val(data);
        let start = data.as_ptr().cast::<i8>();
        for line in (0..bytes).step_by(64) {
            // SAFETY: a prefetch of any address is allowed; these are inside `data`.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(start.wrapping_add(line)) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = data;
}

/// What one thread of a bucket pass keeps from bucket to bucket (see
/// [`Corpus::for_each_bucket`]): the band's texts by key, the bucket being decided, its
/// verification, and for clustering the groups of a bucket.
struct BandWork<'a> {
    order: Vec<(u64, u32)>,
    near: Bucket,
    /// This thread's exact verification.
    sets: Verifier,
    /// The pairs found, and the pairs verified and failed while the budget holds them: a pair
    /// sharing several bands is looked at in one.
    looked: &'a PairSet,
    groups: Option<Groups>,
    countdown: Countdown,
}

impl BandWork<'_> {
    fn new(looked: &PairSet) -> BandWork<'_> {
        BandWork {
            order: Vec::new(),
            near: Bucket::default(),
            sets: Verifier::new(),
            looked,
            groups: None,
            countdown: Countdown::new(),
        }
    }
}

/// The least the failed pairs remembered get, whatever the budget.
const MIN_PAIR_ROOM: usize = 16 << 20;

/// Bytes of sorted texts a band holds at once while the search holds more texts than that
/// (see [`Corpus::band_parts`]); sorting a part this size takes a few hundred milliseconds.
const BAND_PART_BYTES: usize = 64 << 20;

/// The most parts a band is searched in.
const MAX_BAND_PARTS: usize = 64;

/// The search leaves one part in this many of its budget to what it does not count: the
/// pairs found, its threads' scratch, the allocator's slack and the backend's own memory.
const UNCOUNTED_SHARE: usize = 4;

/// Pairs of texts `(a, b)`, `a < b`, shared by the threads of a search, in shards, each behind
/// its own lock, held for a hash probe or two: the pairs found ([`PairSet::insert`], always
/// kept), and the pairs verified and failed ([`PairSet::remember`], kept while their sets
/// take no more than the room the search gives them).
struct PairSet {
    shards: Vec<Mutex<PairShard>>,
    /// Bytes the sets of failed pairs may still take.
    room: AtomicUsize,
}

#[derive(Default)]
struct PairShard {
    found: HashSet<u64>,
    failed: HashSet<u64>,
}

/// Bytes a place of a set of pairs takes: the pair and a control byte.
const PAIR_PLACE_BYTES: usize = 9;

/// Shards of a [`PairSet`]: enough that threads rarely wait on one another.
const PAIR_SHARDS: usize = 64;

impl PairSet {
    /// A set whose failed pairs take at most `room` bytes.
    fn new(room: usize) -> PairSet {
        PairSet {
            shards: (0..PAIR_SHARDS).map(|_| Mutex::default()).collect(),
            room: AtomicUsize::new(room),
        }
    }

    fn shard(&self, pair: u64) -> std::sync::MutexGuard<'_, PairShard> {
        // (a multiplicative hash: the texts of a pair are near one another in number)
        let at = (pair.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) as usize % PAIR_SHARDS;
        // (nothing panics while holding it; a poisoned lock still holds a consistent set)
        self.shards[at].lock().unwrap_or_else(|e| e.into_inner())
    }

    fn contains(&self, a: u32, b: u32) -> bool {
        let pair = (u64::from(a) << 32) | u64::from(b);
        let shard = self.shard(pair);
        shard.found.contains(&pair) || shard.failed.contains(&pair)
    }

    /// Bytes `set` takes anew to add one more pair: none while it has a free place, else
    /// the table it moves to (twice the places, a power of two, at most 7 in 8 of them full)
    /// and the one it leaves, which stays the allocator's until the band ends.
    fn growth(set: &HashSet<u64>) -> usize {
        if set.len() < set.capacity() {
            0
        } else if set.capacity() == 0 {
            4 * PAIR_PLACE_BYTES
        } else {
            let places = (set.capacity() * 8).div_ceil(7).next_power_of_two();
            3 * places * PAIR_PLACE_BYTES
        }
    }

    /// Adds a pair found; false if it was there.
    fn insert(&self, a: u32, b: u32) -> Result<bool, CapacityError> {
        let pair = (u64::from(a) << 32) | u64::from(b);
        let mut shard = self.shard(pair);
        reserve_set(&mut shard.found, 1, CORPUS)?;
        Ok(shard.found.insert(pair))
    }

    /// Adds a failed pair if the room holds it.
    fn remember(&self, a: u32, b: u32) -> Result<(), CapacityError> {
        let pair = (u64::from(a) << 32) | u64::from(b);
        let mut shard = self.shard(pair);
        let bytes = Self::growth(&shard.failed);
        let taken = self
            .room
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                n.checked_sub(bytes)
            });
        if taken.is_ok() {
            reserve_set(&mut shard.failed, 1, CORPUS)?;
            shard.failed.insert(pair);
        }
        Ok(())
    }
}

/// Exact verification of pairs of texts, one thread's: through the probe of one text of the
/// pair (`core::jaccard::JaccardProbe`: its distinct shingles in a hash table), which hashes
/// the other's shingles and looks them up, sorting nothing of it. The probe is kept for the
/// next pair: a bucket pass compares one text with its candidates in turn, and a keep-one
/// group compares its kept text with every text of its buckets. (A cache of each text's sorted
/// shingle set cost more: at 4,000,000 rows the budget left it too little room, and building a
/// set sorts it.)
struct Verifier {
    /// A text read back from the file the texts moved to.
    text: Vec<u8>,
    /// The probe of the text last verified through one, and that text.
    probe: Option<(u32, JaccardProbe)>,
}

impl Verifier {
    fn new() -> Verifier {
        Verifier {
            text: Vec::new(),
            probe: None,
        }
    }

    /// The exact Jaccard similarity of texts `x` and `y`, through the probe of `x` if it is
    /// the one held, else of `y`: `y` is the text the next pairs are to share (a bucket pass's
    /// text compared with its candidates, a keep-one group's kept text).
    fn jaccard(
        &mut self,
        corpus: &Corpus,
        x: usize,
        y: usize,
        shingling: Shingling,
        check: &mut dyn FnMut(),
    ) -> Result<f64, CapacityError> {
        let (of, other) = match self.probe {
            Some((t, _)) if t == x as u32 => (x, y),
            _ => (y, x),
        };
        let probe = match &mut self.probe {
            Some((t, probe)) if *t == of as u32 => probe,
            Some((t, probe)) => {
                probe.try_reset(corpus.text_of(of, &mut self.text)?, check)?;
                *t = of as u32;
                probe
            }
            None => {
                let text = corpus.text_of(of, &mut self.text)?;
                let probe = JaccardProbe::try_new(text, shingling, check)?;
                &mut self.probe.insert((of as u32, probe)).1
            }
        };
        probe.try_jaccard(corpus.text_of(other, &mut self.text)?, check)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::components::components;
    use crate::core::jaccard::{jaccard, ShingleSet};
    use crate::core::testing::Rng;

    fn search(threshold: f64) -> Search {
        Search {
            k: 128,
            shingling: Shingling::new(5, "char").unwrap(),
            banding: Banding::new(128, 16, Some(6)).unwrap(),
            threshold,
            threads: 1,
        }
    }

    /// Documents from a small vocabulary with planted edits, so that many pairs are candidates
    /// and many candidates are not near-duplicates.
    fn corpus_texts(n: usize, seed: u64) -> Vec<String> {
        let mut rng = Rng(seed);
        let words: Vec<String> = (0..60).map(|i| format!("w{}x{}", i, i * 7 % 13)).collect();
        let mut docs: Vec<String> = Vec::new();
        for i in 0..n {
            let doc = if i > 0 && rng.below(3) == 0 {
                let base = &docs[rng.below(i as u64) as usize];
                let mut w: Vec<&str> = base.split(' ').collect();
                let at = rng.below(w.len() as u64) as usize;
                w[at] = &words[rng.below(60) as usize];
                if rng.below(5) == 0 {
                    base.clone()
                } else {
                    w.join(" ")
                }
            } else {
                (0..12)
                    .map(|_| words[rng.below(60) as usize].as_str())
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            docs.push(doc);
        }
        docs
    }

    /// The pairs of the band-table method: every pair sharing a band key (searched by brute
    /// force over all pairs), verified exactly.
    fn reference_pairs(docs: &[String], s: Search) -> Vec<(i64, i64, f64)> {
        let keys: Vec<Option<Vec<u64>>> = docs
            .iter()
            .map(|d| {
                let sig = crate::core::signature::signature(d, s.k, s.shingling);
                (!sig.iter().all(|&v| v == EMPTY_SLOT)).then(|| band_keys(&sig, s.banding))
            })
            .collect();
        let sets: Vec<ShingleSet> = docs
            .iter()
            .map(|d| ShingleSet::new(d, s.shingling, &mut || {}))
            .collect();
        let mut out = Vec::new();
        for a in 0..docs.len() {
            for b in a + 1..docs.len() {
                let (Some(ka), Some(kb)) = (&keys[a], &keys[b]) else {
                    continue;
                };
                if ka.iter().zip(kb).any(|(x, y)| x == y) {
                    let j = sets[a].jaccard(&sets[b]);
                    if j >= s.threshold {
                        out.push((a as i64, b as i64, j));
                    }
                }
            }
        }
        out
    }

    /// Form letters: a few templates with a number in them (1 to 7 digits), some with a word
    /// changed, a few copies and a few unrelated texts. Nearly all texts of a template share
    /// most band keys, so buckets hold hundreds of distinct texts, and the short templates with
    /// long numbers fall below the threshold against one another: the clusters are not simply
    /// the templates.
    fn form_letters(n: usize, seed: u64) -> Vec<String> {
        let templates = [
            ("Dear customer, your order number", "has been shipped and will arrive within three to five working days. Thank you for shopping with us."),
            ("Ticket", "was closed because we did not hear back from you."),
            ("How do I fix error", "when I run the installer on Windows?"),
            ("Invoice", "is overdue; please pay it within 14 days to avoid a late fee, or contact our billing department if you believe this is a mistake."),
        ];
        let mut rng = Rng(seed);
        let mut docs: Vec<String> = Vec::new();
        for i in 0..n {
            let doc = match rng.below(50) {
                0 if i > 0 => docs[rng.below(i as u64) as usize].clone(),
                1 => format!(
                    "unrelated note {} about {}",
                    rng.below(1000),
                    rng.below(1000)
                ),
                r => {
                    let (before, after) = templates[rng.below(templates.len() as u64) as usize];
                    let digits = 1 + rng.below(7) as u32;
                    let number = rng.below(10u64.pow(digits));
                    let mut doc = format!("{before} {number} {after}");
                    if r < 8 {
                        doc = doc.replacen(" the ", " a ", 1);
                    }
                    doc
                }
            };
            docs.push(doc);
        }
        docs
    }

    fn load(docs: &[String], s: Search) -> Corpus {
        let mut corpus = Corpus::new(s);
        if s.threads <= 1 {
            for (id, d) in docs.iter().enumerate() {
                corpus.add(id as i64, d, &mut || {}).unwrap();
            }
        } else {
            // in batches, as the database layer adds them, signed on the threads
            let rows: Vec<(i64, &str)> = docs
                .iter()
                .enumerate()
                .map(|(id, d)| (id as i64, d.as_str()))
                .collect();
            for batch in rows.chunks(1000) {
                corpus.add_rows(batch, &mut || {}).unwrap();
            }
        }
        corpus
    }

    /// The search of `threshold` on `threads` threads.
    fn on_threads(threshold: f64, threads: usize) -> Search {
        Search {
            threads,
            ..search(threshold)
        }
    }

    #[test]
    fn same_pairs_as_verifying_every_candidate() {
        for (seed, threshold, threads) in [
            (1, 0.8, 1),
            (2, 0.5, 1),
            (3, 0.95, 1),
            (4, 1.0, 1),
            (1, 0.8, 3),
            (2, 0.5, 2),
        ] {
            let docs = corpus_texts(700, seed);
            let s = on_threads(threshold, threads);
            let ours = load(&docs, s)
                .duplicates(|| {})
                .unwrap()
                .collect::<Vec<_>>();
            let reference = reference_pairs(&docs, s);
            assert!(reference.len() > 40, "{} pairs", reference.len());
            assert_eq!(
                ours, reference,
                "seed {seed} threshold {threshold} threads {threads}"
            );
            let mut clusters = load(&docs, s).clusters(&mut || {}).unwrap();
            let expected = components(ours.iter().map(|&(a, b, _)| (a, b)));
            clusters.sort_unstable_by_key(|&(id, c)| (c, id));
            assert_eq!(
                clusters, expected,
                "seed {seed} threshold {threshold} threads {threads}"
            );
        }
    }

    #[test]
    fn copies_are_stored_once_and_paired_with_everything() {
        let s = search(0.8);
        let mut corpus = Corpus::new(s);
        let text = "the quick brown fox jumps over the lazy dog";
        for id in [10, 3, 7] {
            corpus.add(id, text, &mut || {}).unwrap();
        }
        corpus
            .add(
                5,
                "the quick brown fox jumps over the lazy dog!",
                &mut || {},
            )
            .unwrap();
        corpus
            .add(1, "entirely unrelated words here", &mut || {})
            .unwrap();
        corpus.add(2, "", &mut || {}).unwrap();
        corpus.add(4, "", &mut || {}).unwrap();
        assert_eq!(
            corpus.distinct_texts(),
            3,
            "copies and empty texts are not stored"
        );
        let clusters = corpus.clusters(&mut || {}).unwrap();
        assert_eq!(clusters, [(3, 3), (5, 3), (7, 3), (10, 3)]);
        let mut corpus = Corpus::new(s);
        for (id, text) in [
            (10, text),
            (3, text),
            (7, text),
            (5, "the quick brown fox jumps over the lazy dog!"),
        ] {
            corpus.add(id, text, &mut || {}).unwrap();
        }
        let pairs: Vec<(i64, i64)> = corpus
            .duplicates(|| {})
            .unwrap()
            .map(|(a, b, _)| (a, b))
            .collect();
        assert_eq!(pairs, [(3, 5), (3, 7), (3, 10), (5, 7), (5, 10), (7, 10)]);
    }

    #[test]
    fn ten_thousand_copies_cost_one_text() {
        let mut corpus = Corpus::new(search(0.8));
        for id in 0..10_000 {
            corpus
                .add(id, "How do I sort a list in place?", &mut || {})
                .unwrap();
        }
        assert_eq!(corpus.distinct_texts(), 1);
        let clusters = corpus.clusters(&mut || {}).unwrap();
        assert_eq!(clusters.len(), 10_000);
        assert!(clusters.iter().all(|&(_, c)| c == 0));
    }

    /// A text whose hash leads to another text's place is told apart byte for byte, stored
    /// at the next free place, and its copies found there.
    #[test]
    fn texts_whose_hashes_collide_are_told_apart_and_their_copies_found() {
        let mut corpus = Corpus::new(search(0.8));
        corpus
            .add(1, "the first text of the test", &mut || {})
            .unwrap();
        // the first text moved to where the second's hash leads, as a collision would put it
        let second = "a second text, another one";
        let (_, t) = corpus.seen.drain().next().unwrap();
        corpus.seen.insert(corpus.hasher.hash_one(second) as u32, t);
        for id in 2..6 {
            corpus.add(id, second, &mut || {}).unwrap();
        }
        assert_eq!(corpus.distinct_texts(), 2);
        assert_eq!(corpus.copies, vec![(1, 3), (1, 4), (1, 5)]);
    }

    /// Crowded buckets of distinct near-identical texts: the same pairs and clusters as brute
    /// force, and clusters verify about one pair per text, not one per pair of texts.
    #[test]
    fn crowded_buckets_of_form_letters_match_brute_force() {
        let docs = form_letters(3000, 11);
        for (threshold, ratio) in [(0.7, 100), (0.8, 5), (0.9, 2)] {
            let s = search(threshold);
            let corpus = load(&docs, s);
            let n = corpus.distinct_texts();
            // the largest bucket of the first band holds a good part of the texts
            let mut first_band = Vec::new();
            corpus.band_order(0, &mut first_band, &mut || {}).unwrap();
            let largest = first_band
                .chunk_by(|x, y| x.0 == y.0)
                .map(<[(u64, u32)]>::len)
                .max()
                .unwrap();
            assert!(largest >= n / 10, "largest bucket {largest} of {n} texts");

            let reference = reference_pairs(&docs, s);
            let pairs = corpus.duplicates(|| {}).unwrap().collect::<Vec<_>>();
            assert_eq!(pairs, reference, "threshold {threshold}");
            let expected = components(reference.iter().map(|&(a, b, _)| (a, b)));
            let mut clusters = load(&docs, s).clusters(&mut || {}).unwrap();
            clusters.sort_unstable_by_key(|&(id, c)| (c, id));
            assert_eq!(clusters, expected, "threshold {threshold}");
            // the same on three threads, whatever order the bands are taken in
            let parallel = on_threads(threshold, 3);
            let pairs = load(&docs, parallel)
                .duplicates(|| {})
                .unwrap()
                .collect::<Vec<_>>();
            assert_eq!(pairs, reference, "threshold {threshold} on threads");
            let mut clusters = load(&docs, parallel).clusters(&mut || {}).unwrap();
            clusters.sort_unstable_by_key(|&(id, c)| (c, id));
            assert_eq!(clusters, expected, "threshold {threshold} on threads");
            let distinct_clusters = expected.chunk_by(|x, y| x.1 == y.1).count();
            assert!(
                distinct_clusters > 4,
                "{distinct_clusters} clusters at {threshold}"
            );

            // clusters verify a fraction of the candidates that listing every pair verifies
            let corpus = load(&docs, s);
            let candidates: usize = corpus
                .for_each_bucket(&mut || {}, |work, candidates: &mut usize, _, bucket, _| {
                    work.near.gather(&corpus, bucket.iter().map(|&(_, t)| t))?;
                    for j in 0..bucket.len() {
                        *candidates += work.near.candidates(j, 0..j, corpus.min_matches()).len();
                    }
                    Ok(())
                })
                .unwrap()
                .into_iter()
                .sum();
            let uf = SharedUnionFind::try_new(n).unwrap();
            let verified = corpus.connect(&uf, &mut || {}).unwrap();
            assert!(
                verified * ratio <= candidates,
                "{verified} of {candidates} candidates verified at {threshold}"
            );
        }
    }

    /// The failed pairs a search remembers take no more than the room it was given, counting
    /// each shard's table and the one it left as it grew; the pairs found are all kept.
    #[test]
    fn remembered_pairs_keep_within_their_room() {
        for room in [0, 1 << 10, 1 << 16, 1 << 20] {
            let set = PairSet::new(room);
            for i in 0..200_000u32 {
                set.remember(i, i + 1).unwrap();
            }
            let places: usize = set
                .shards
                .iter()
                .map(|s| {
                    let cap = s.lock().unwrap().failed.capacity();
                    if cap == 0 {
                        0
                    } else {
                        (cap * 8).div_ceil(7).next_power_of_two()
                    }
                })
                .sum();
            assert!(places * PAIR_PLACE_BYTES <= room, "room {room}");
            let kept = (0..200_000u32).filter(|&i| set.contains(i, i + 1)).count();
            assert!(room < 1 << 20 || kept > 10_000, "room {room}: {kept} kept");
            for i in 0..1000u32 {
                assert!(set.insert(i, i + 7).unwrap());
            }
            assert!((0..1000u32).all(|i| set.contains(i, i + 7)));
        }
    }

    /// A search whose texts and keys pass its budget gives what the search in memory gives,
    /// from temporary files, on crowded and on random texts, on one thread and on three, in
    /// every mode; it moves them once they pass half the budget (the keys first), its sketches
    /// take 4 bits per slot past a quarter of it, and a budget too small for two bands' sorts
    /// searches one band at a time.
    #[test]
    fn a_search_over_its_budget_gives_the_same_results_from_files() {
        let mut docs = form_letters(1500, 21);
        docs.extend(corpus_texts(1500, 22));
        // copies, some of which come after the move to the files
        docs.extend(docs[..200].to_vec());
        for (threshold, threads) in [(0.8, 1), (0.7, 3), (0.5, 3)] {
            let s = on_threads(threshold, threads);
            let in_memory = load(&docs, s);
            assert_eq!(in_memory.spilled(), (false, false));
            let bounded = |budget: usize| {
                let mut corpus = Corpus::new(s);
                corpus.spill_to(crate::core::spill::test_dir(), budget, None);
                // (bands searched in parts of a sixteenth of the budget's sorted texts)
                corpus.band_part_bytes = budget / 16;
                let rows: Vec<(i64, &str)> = docs
                    .iter()
                    .enumerate()
                    .map(|(id, d)| (id as i64, d.as_str()))
                    .collect();
                for batch in rows.chunks(500) {
                    corpus.add_rows(batch, &mut || {}).unwrap();
                }
                corpus
            };
            // texts and keys of ~3,000 texts take ~600 kB: 64 kB keeps half of them in memory
            let corpus = bounded(64 << 10);
            assert_eq!(corpus.spilled(), (true, true));
            assert_eq!(corpus.form, SketchForm::Nibbles);
            assert_eq!(in_memory.form, SketchForm::Bytes);
            assert_eq!(corpus.held_bytes(), 0);
            assert_eq!(corpus.band_parts(), 16);
            assert_eq!(corpus.band_threads(), 1);
            assert_eq!(corpus.pair_room(1), MIN_PAIR_ROOM);
            let pairs: Vec<_> = corpus.duplicates(|| {}).unwrap().collect();
            let expected: Vec<_> = in_memory.duplicates(|| {}).unwrap().collect();
            assert!(expected.len() > 1000, "{} pairs", expected.len());
            assert_eq!(pairs, expected, "pairs at {threshold} on {threads}");
            for mode in [ClusterMode::Connected, ClusterMode::Representative] {
                let ours = bounded(64 << 10).clusters_in(mode, &mut || {}).unwrap();
                let theirs = load(&docs, s).clusters_in(mode, &mut || {}).unwrap();
                assert_eq!(ours, theirs, "{mode:?} at {threshold} on {threads}");
            }
            // ~220 kB of texts and ~410 kB of keys: 1 MB moves the keys only
            let keys_only = bounded(1 << 20);
            assert_eq!(keys_only.spilled(), (true, false));
            assert_eq!(keys_only.band_parts(), 1);
            // (~385 kB of sketches in bytes pass a quarter of 1 MB)
            assert_eq!(keys_only.form, SketchForm::Nibbles);
            let pairs: Vec<_> = keys_only.duplicates(|| {}).unwrap().collect();
            assert_eq!(
                pairs, expected,
                "pairs at {threshold} on {threads}, keys on disk"
            );
            // temp_file_limit
            let mut limited = Corpus::new(s);
            let mut dir = crate::core::spill::test_dir();
            dir.limit = Some(100 << 10);
            limited.spill_to(dir, 64 << 10, None);
            let rows: Vec<(i64, &str)> = docs
                .iter()
                .enumerate()
                .map(|(id, d)| (id as i64, d.as_str()))
                .collect();
            let refused = rows
                .chunks(500)
                .try_for_each(|batch| limited.add_rows(batch, &mut || {}));
            assert_eq!(
                refused,
                Err(CapacityError::TempFileLimit { kilobytes: 100 })
            );
            // a budget the texts and keys fit in half of stays in memory
            let roomy = bounded(64 << 20);
            assert_eq!(roomy.spilled(), (false, false));
            assert_eq!(roomy.form, SketchForm::Bytes);
            assert!(roomy.held_bytes() > 500_000);
            assert_eq!(roomy.band_threads(), threads);
        }
    }

    /// The bands searched are reported on the calling thread, each count once, up to all of
    /// them, on one thread and on three.
    #[test]
    fn bands_searched_are_reported() {
        static REPORTED: std::sync::Mutex<Vec<(usize, usize)>> = std::sync::Mutex::new(Vec::new());
        fn report(done: usize, total: usize) {
            REPORTED.lock().unwrap().push((done, total));
        }
        let docs = corpus_texts(300, 5);
        for threads in [1, 3] {
            for clusters in [false, true] {
                REPORTED.lock().unwrap().clear();
                let mut corpus = load(&docs, on_threads(0.8, threads));
                corpus.report_progress(report);
                if clusters {
                    corpus.clusters(&mut || {}).unwrap();
                } else {
                    corpus.duplicates(|| {}).unwrap();
                }
                let bands = search(0.8).banding.bands;
                let expected: Vec<_> = (1..=bands).map(|done| (done, bands)).collect();
                assert_eq!(*REPORTED.lock().unwrap(), expected, "{threads} threads");
            }
        }
    }

    /// The exact counts of one crowded corpus, pinned: 20,000 distinct texts of one template,
    /// all near-duplicates of each other, are one cluster found with one verification per text.
    #[test]
    fn one_template_is_one_cluster_at_one_verification_per_text() {
        let s = search(0.8);
        let mut corpus = Corpus::new(s);
        for id in 0..20_000 {
            let text = format!(
                "Dear customer, your order number {} has been shipped and will arrive within \
                 three to five working days.",
                100_000 + id
            );
            corpus.add(id, &text, &mut || {}).unwrap();
        }
        let n = corpus.distinct_texts();
        assert_eq!(n, 20_000);
        let uf = SharedUnionFind::try_new(n).unwrap();
        assert_eq!(corpus.connect(&uf, &mut || {}).unwrap(), n - 1);
        let clusters = corpus.clusters(&mut || {}).unwrap();
        assert_eq!(clusters.len(), 20_000);
        assert!(clusters.iter().all(|&(_, c)| c == 0));
    }

    /// The bound never drops more pairs at the threshold than it says, in a simulation at a
    /// loose miss rate (the quantile itself is checked in `sketch`).
    #[test]
    fn sketch_bound_holds_at_the_threshold() {
        assert_eq!(min_sketch_matches(128, 1.0, 1e-9), 128);
        let m = min_sketch_matches(128, 0.8, 1e-9);
        assert!((60..=80).contains(&m), "m = {m}");
        // at a miss rate of 1e-3, about one pair in a thousand at exactly the threshold drops
        let m = min_sketch_matches(128, 0.8, 1e-3);
        let mut rng = Rng(9);
        let trials = 20_000;
        let dropped = (0..trials)
            .filter(|_| (0..128).filter(|_| rng.below(1000) < 800).count() < m)
            .count();
        assert!(dropped <= 60, "dropped {dropped} of {trials}");
    }

    /// n copies of a text make n(n-1)/2 pairs, made one at a time in order: the search holds
    /// the rows, not the pairs, and checks for interrupts as it goes.
    #[test]
    fn pairs_of_copies_are_streamed_in_order() {
        let mut corpus = Corpus::new(search(0.8));
        let text = "the quick brown fox jumps over the lazy dog";
        let near = "the quick brown fox jumps over the lazy dog!";
        // ids interleaved between the two texts, in no order
        let ids: Vec<i64> = (0..1000).map(|i| (i * 7919) % 1000).collect();
        for &id in &ids {
            corpus
                .add(id, if id % 10 == 3 { near } else { text }, &mut || {})
                .unwrap();
        }
        corpus
            .add(5000, "entirely unrelated words here", &mut || {})
            .unwrap();
        let similarity = jaccard(text, near, search(0.8).shingling);
        let mut checks = 0;
        let pairs = corpus.duplicates(|| checks += 1).unwrap();
        let mut count = 0;
        let mut last = (-1, -1);
        for (a, b, s) in pairs {
            assert!(a < b && (a, b) > last, "{last:?} then {a} {b}");
            let same = (a % 10 == 3) == (b % 10 == 3);
            assert_eq!(s, if same { 1.0 } else { similarity }, "{a} {b}");
            last = (a, b);
            count += 1;
        }
        assert_eq!(count, 1000 * 999 / 2);
        assert!(checks >= count / INTERRUPT_EVERY as usize, "{checks}");
    }

    /// A search at `threshold` with 32 bands of 4 slots: pairs at 0.8 share a band except with
    /// probability (1 - 0.8^4)^32 < 1e-9, so the small corpora below find every pair.
    fn wide_search(threshold: f64) -> Search {
        Search {
            banding: Banding::new(128, 32, Some(4)).unwrap(),
            ..search(threshold)
        }
    }

    /// A 100-character text and two edits of it: `b` changes its last five characters and `c`
    /// changes `b`'s first five, so a~b and b~c are near-duplicates at 0.8 and a, c are not.
    fn chain() -> [String; 3] {
        let a: String = (0..100u32)
            .map(|i| char::from(b'a' + ((i * 7 + i / 26) % 26) as u8))
            .collect();
        let b = format!("{}ZQXJV", &a[..95]);
        let c = format!("VJXQZ{}", &b[5..]);
        [a, b, c]
    }

    #[test]
    fn representatives_keep_chains_apart_that_connected_components_join() {
        let s = wide_search(0.8);
        let [a, b, c] = chain();
        let (ab, bc, ac) = (
            jaccard(&a, &b, s.shingling),
            jaccard(&b, &c, s.shingling),
            jaccard(&a, &c, s.shingling),
        );
        assert!(ab >= 0.8 && bc >= 0.8 && ac < 0.8, "{ab} {bc} {ac}");
        let corpus = |rows: &[(i64, &str)]| {
            let mut corpus = Corpus::new(s);
            for &(id, text) in rows {
                corpus.add(id, text, &mut || {}).unwrap();
            }
            corpus
        };
        let rows = [(1, a.as_str()), (2, b.as_str()), (3, c.as_str())];
        let connected = corpus(&rows).clusters(&mut || {}).unwrap();
        assert_eq!(connected, [(1, 1), (2, 1), (3, 1)]);
        // a first: a keeps b; c is left alone (no group of one)
        let kept = corpus(&rows).representatives(&mut || {}).unwrap();
        assert_eq!(kept, [(1, 1), (2, 1)]);
        // b first: b keeps both
        let rows = [(2, b.as_str()), (1, a.as_str()), (3, c.as_str())];
        let kept = corpus(&rows).representatives(&mut || {}).unwrap();
        assert_eq!(kept, [(1, 2), (2, 2), (3, 2)]);
        // c first, with a copy of a: c keeps b, a and its copy keep each other
        let rows = [
            (3, c.as_str()),
            (9, a.as_str()),
            (1, a.as_str()),
            (2, b.as_str()),
            (4, ""),
        ];
        let kept = corpus(&rows)
            .clusters_in(ClusterMode::Representative, &mut || {})
            .unwrap();
        assert_eq!(kept, [(2, 3), (3, 3), (1, 9), (9, 9)]);
        // ids renamed after loading: the order is still the order of adding
        let mut renamed = corpus(&rows);
        renamed.rename(|id| 100 - id);
        let kept = renamed.representatives(&mut || {}).unwrap();
        assert_eq!(kept, [(91, 91), (99, 91), (97, 97), (98, 97)]);
    }

    /// Greedy keep-one grouping by brute force: rows in order; a row of a text with shingles
    /// not yet in a group is kept, and every row not yet in a group that shares a band key
    /// with it (every pair, looked at directly) and is at the threshold or above joins it.
    fn reference_representatives(rows: &[(i64, String)], s: Search) -> Vec<(i64, i64)> {
        let keys: Vec<Option<Vec<u64>>> = rows
            .iter()
            .map(|(_, d)| {
                let sig = crate::core::signature::signature(d, s.k, s.shingling);
                (!sig.iter().all(|&v| v == EMPTY_SLOT)).then(|| band_keys(&sig, s.banding))
            })
            .collect();
        let mut kept_by: Vec<Option<usize>> = vec![None; rows.len()];
        for i in 0..rows.len() {
            let Some(ki) = &keys[i] else { continue };
            if kept_by[i].is_some() {
                continue;
            }
            kept_by[i] = Some(i);
            for j in 0..rows.len() {
                let Some(kj) = &keys[j] else { continue };
                if kept_by[j].is_none()
                    && ki.iter().zip(kj).any(|(x, y)| x == y)
                    && jaccard(&rows[i].1, &rows[j].1, s.shingling) >= s.threshold
                {
                    kept_by[j] = Some(i);
                }
            }
        }
        let mut out: Vec<(i64, i64)> = (0..rows.len())
            .filter_map(|j| {
                let i = kept_by[j]?;
                let size = kept_by.iter().filter(|&&k| k == Some(i)).count();
                (size >= 2).then(|| (rows[j].0, rows[i].0))
            })
            .collect();
        out.sort_unstable_by_key(|&(id, c)| (c, id));
        out
    }

    /// Every member of a group is at the threshold or above to its kept row.
    fn assert_members_like_their_kept_row(
        groups: &[(i64, i64)],
        rows: &[(i64, String)],
        s: Search,
    ) {
        let text: HashMap<i64, &str> = rows.iter().map(|(id, t)| (*id, t.as_str())).collect();
        for &(id, kept) in groups {
            let j = jaccard(text[&id], text[&kept], s.shingling);
            assert!(j >= s.threshold, "{id} in the group of {kept} at {j}");
        }
    }

    #[test]
    fn representatives_match_brute_force_greedy() {
        for (seed, threshold) in [(5, 0.8), (6, 0.5), (7, 0.95), (8, 1.0)] {
            let docs = corpus_texts(700, seed);
            // a shuffled order, with ids not in that order
            let mut rng = Rng(seed);
            let mut rows: Vec<(i64, String)> = docs
                .into_iter()
                .enumerate()
                .map(|(i, d)| ((i as i64 * 7919) % 1000, d))
                .collect();
            for i in (1..rows.len()).rev() {
                rows.swap(i, rng.below(i as u64 + 1) as usize);
            }
            let s = search(threshold);
            let mut corpus = Corpus::new(s);
            for (id, d) in &rows {
                corpus.add(*id, d, &mut || {}).unwrap();
            }
            let ours = corpus.representatives(&mut || {}).unwrap();
            let reference = reference_representatives(&rows, s);
            assert!(reference.len() > 40, "{} rows in groups", reference.len());
            assert_eq!(ours, reference, "seed {seed} threshold {threshold}");
            assert_members_like_their_kept_row(&ours, &rows, s);
        }
        // crowded buckets of form letters
        let rows: Vec<(i64, String)> = form_letters(1500, 12)
            .into_iter()
            .enumerate()
            .map(|(i, d)| (i as i64, d))
            .collect();
        for threshold in [0.7, 0.9] {
            let s = search(threshold);
            let mut corpus = Corpus::new(s);
            for (id, d) in &rows {
                corpus.add(*id, d, &mut || {}).unwrap();
            }
            let ours = corpus.representatives(&mut || {}).unwrap();
            assert_eq!(ours, reference_representatives(&rows, s), "{threshold}");
            assert_members_like_their_kept_row(&ours, &rows, s);
        }
    }

    proptest::proptest! {
        /// Small corpora of edits of a few texts, copies and empty texts, in any order:
        /// keep-one groups equal brute-force greedy grouping.
        #[test]
        fn representatives_are_greedy_keep_one_groups(
            picks in proptest::collection::vec((0..6usize, 0..4usize, 0..40usize), 0..40),
            threshold in proptest::sample::select(vec![0.5, 0.7, 0.8, 0.9, 1.0]),
        ) {
            let bases = [
                "the quick brown fox jumps over the lazy dog near the river bank",
                "a stitch in time saves nine, or so the old saying goes",
                "how do i reverse a string in python without slicing it",
                "the quick brown fox leaps over the lazy cat near the river",
                "",
                "x",
            ];
            let rows: Vec<(i64, String)> = picks
                .iter()
                .enumerate()
                .map(|(i, &(b, edit, at))| {
                    let base = bases[b];
                    let text = match edit {
                        0 => base.to_string(),
                        1 => format!("{base} again"),
                        2 => base.chars().take(at).collect::<String>() + "!" + &base.chars().skip(at + 1).collect::<String>(),
                        _ => base.replacen("the", "a", 1),
                    };
                    ((i as i64 * 37) % 41, text)
                })
                .collect();
            // ids are distinct: 37 is invertible mod 41 and there are at most 40 rows
            let s = wide_search(threshold);
            let mut corpus = Corpus::new(s);
            for (id, d) in &rows {
                corpus.add(*id, d, &mut || {}).unwrap();
            }
            let ours = corpus.representatives(&mut || {}).unwrap();
            proptest::prop_assert_eq!(&ours, &reference_representatives(&rows, s));
            assert_members_like_their_kept_row(&ours, &rows, s);
        }
    }
}
