//! In-database tests of the sketch store's read API, and the timing function of its scan
//! benchmark (built with the `pg_test` feature only).

use pgrx::prelude::*;

use super::read::scan_entries;
use crate::pg::names::Regclass;

/// Milliseconds of the fastest of `runs` scans of the store `index` (for the benchmark in
/// docs/internals.md, "The sketch store"); with `touch`, the visitor reads every sketch word
/// (an XOR of them all), as a comparison would, else it only counts entries.
#[pg_extern(volatile, strict, parallel_safe, schema = "minhash_internal")]
fn _minhash_sketch_scan_ms(index: Regclass, runs: i32, touch: bool) -> f64 {
    // SAFETY: opened and closed here under AccessShareLock.
    let rel = unsafe { pg_sys::index_open(index.0, pg_sys::AccessShareLock as i32) };
    let mut best = f64::INFINITY;
    let mut check = 0u64;
    for _ in 0..runs.max(1) {
        let start = std::time::Instant::now();
        scan_entries(rel, |tids, sketches, _| {
            check += tids.len() as u64;
            if touch {
                check ^= sketches
                    .chunks_exact(8)
                    .map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes")))
                    .fold(0, |a, b| a ^ b);
            }
        });
        best = best.min(start.elapsed().as_secs_f64() * 1000.0);
    }
    // SAFETY: opened above.
    unsafe { pg_sys::index_close(rel, pg_sys::AccessShareLock as i32) };
    std::hint::black_box(check);
    best
}

#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::am::read::{fetch_visible, scan_entries, summary, HeapFetch};

    /// Opens the index named `name` and calls `f` with it.
    fn with_index<T>(name: &str, f: impl FnOnce(pg_sys::Relation) -> T) -> T {
        let oid = Spi::get_one::<pg_sys::Oid>(&format!("SELECT '{name}'::regclass::oid"))
            .unwrap()
            .unwrap();
        // SAFETY: an index of this test, opened and closed here.
        unsafe {
            let rel = pg_sys::index_open(oid, pg_sys::AccessShareLock as i32);
            let result = f(rel);
            pg_sys::index_close(rel, pg_sys::AccessShareLock as i32);
            result
        }
    }

    /// Every entry the scan visits, as (block, offset, sketch).
    fn entries(name: &str) -> Vec<(u32, u16, Vec<u8>)> {
        with_index(name, |rel| {
            let mut out = Vec::new();
            scan_entries(rel, |tids, sketches, width| {
                assert_eq!(sketches.len(), tids.len() * width);
                for (tid, sketch) in tids.iter().zip(sketches.chunks_exact(width)) {
                    let (block, offset) = pgrx::itemptr::item_pointer_get_both(*tid);
                    out.push((block, offset, sketch.to_vec()));
                }
            });
            out
        })
    }

    #[pg_test]
    fn scan_visits_every_live_row_once_with_its_value() {
        Spi::run(
            "CREATE TABLE docs (id int, body text);
             INSERT INTO docs SELECT g, 'doc ' || g FROM generate_series(1, 1000) g;
             CREATE INDEX docs_sketch ON docs USING minhash_sketch
                 ((pg_catalog.decode(pg_catalog.repeat(pg_catalog.md5(body), 4), 'hex')));
             INSERT INTO docs SELECT g, 'doc ' || g FROM generate_series(1001, 1500) g;
             INSERT INTO docs VALUES (0, NULL);",
        )
        .unwrap();
        let summary = with_index("docs_sketch", summary);
        assert_eq!((summary.width, summary.entries), (64, 1500));
        // 116 entries of 64 bytes to a page: 13 data pages and the metapage
        assert_eq!(summary.pages, 14);
        let mut got = entries("docs_sketch");
        got.sort();
        let mut want: Vec<(u32, u16, Vec<u8>)> = Spi::connect(|client| {
            client
                .select(
                    "SELECT ctid, pg_catalog.decode(pg_catalog.repeat(pg_catalog.md5(body), 4), 'hex')
                     FROM docs WHERE body IS NOT NULL",
                    None,
                    &[],
                )
                .unwrap()
                .map(|row| {
                    let tid = row.get::<pg_sys::ItemPointerData>(1).unwrap().unwrap();
                    let (block, offset) = pgrx::itemptr::item_pointer_get_both(tid);
                    (block, offset, row.get::<Vec<u8>>(2).unwrap().unwrap())
                })
                .collect()
        });
        want.sort();
        assert_eq!(got, want);
    }

    #[pg_test]
    fn an_empty_store_has_no_width_until_its_first_value() {
        Spi::run(
            "CREATE TABLE e (v bytea);
             CREATE INDEX e_sketch ON e USING minhash_sketch (v);",
        )
        .unwrap();
        let s = with_index("e_sketch", summary);
        assert_eq!((s.width, s.entries, s.pages), (0, 0, 1));
        assert!(entries("e_sketch").is_empty());
        Spi::run("INSERT INTO e VALUES ('\\x0102'), (NULL), ('\\x0304')").unwrap();
        let s = with_index("e_sketch", summary);
        assert_eq!((s.width, s.entries, s.pages), (2, 2, 2));
    }

    #[pg_test]
    fn fetch_visible_follows_hot_chains_and_skips_dead_rows() {
        Spi::run(
            "CREATE TABLE f (id int, body text, note text) WITH (fillfactor = 50);
             INSERT INTO f SELECT g, 'row ' || g FROM generate_series(1, 6) g;
             CREATE INDEX f_sketch ON f USING minhash_sketch
                 ((pg_catalog.decode(pg_catalog.md5(body), 'hex')));
             UPDATE f SET note = 'hot' WHERE id = 1;
             DELETE FROM f WHERE id = 2;",
        )
        .unwrap();
        let heap_oid = Spi::get_one::<pg_sys::Oid>("SELECT 'f'::regclass::oid")
            .unwrap()
            .unwrap();
        let mut tids = Vec::new();
        with_index("f_sketch", |rel| {
            scan_entries(rel, |page_tids, _, _| tids.extend_from_slice(page_tids));
        });
        assert_eq!(tids.len(), 6);
        // SAFETY: the test's table, opened and closed here; the latest snapshot sees the
        // test's own writes (the statement's snapshot predates them).
        let visible: Vec<(u32, u16)> = unsafe {
            let snapshot = pg_sys::GetLatestSnapshot();
            let heap = pg_sys::table_open(heap_oid, pg_sys::AccessShareLock as i32);
            let mut fetch = HeapFetch::begin(heap);
            let mut visible = Vec::new();
            for tid in tids {
                if fetch_visible(&mut fetch, tid, snapshot) {
                    visible.push(pgrx::itemptr::item_pointer_get_both((*fetch.slot).tts_tid));
                }
            }
            fetch.end();
            pg_sys::table_close(heap, pg_sys::AccessShareLock as i32);
            visible
        };
        let mut rows: Vec<(u32, u16)> = Spi::connect(|client| {
            client
                .select("SELECT ctid FROM f", None, &[])
                .unwrap()
                .map(|row| {
                    let tid = row.get::<pg_sys::ItemPointerData>(1).unwrap().unwrap();
                    pgrx::itemptr::item_pointer_get_both(tid)
                })
                .collect()
        });
        rows.sort();
        let mut visible = visible;
        visible.sort();
        // five rows, the HOT-updated one at its new version (0,7)
        assert_eq!(visible, rows);
        assert!(visible.contains(&(0, 7)));
    }
}
