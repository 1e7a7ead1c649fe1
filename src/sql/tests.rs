//! In-database tests of every SQL function and every error path.

#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    /// Runs `sql` and returns "SQLSTATE: message" of the error it raises, or "ok".
    fn outcome(sql: &str) -> String {
        Spi::run(
            "CREATE OR REPLACE FUNCTION pg_temp.outcome(q text) RETURNS text LANGUAGE plpgsql AS $$
             BEGIN EXECUTE q; RETURN 'ok';
             EXCEPTION WHEN others THEN RETURN SQLSTATE || ': ' || SQLERRM; END $$",
        )
        .unwrap();
        Spi::get_one_with_args::<String>("SELECT pg_temp.outcome($1)", &[sql.into()])
            .unwrap()
            .unwrap()
    }

    fn one<T: IntoDatum + FromDatum>(sql: &str) -> Option<T> {
        Spi::get_one::<T>(sql).unwrap()
    }

    /// Table-driven: each case is (SQL, expected outcome prefix).
    macro_rules! outcomes {
        ($name:ident, $($sql:expr => $want:expr),+ $(,)?) => {
            #[pg_test]
            fn $name() {
                $(
                    let got = outcome($sql);
                    assert!(got.starts_with($want), "{}\n  got:  {}\n  want: {}", $sql, got, $want);
                )+
            }
        };
    }

    outcomes!(minhash_argument_errors,
        "SELECT minhash('x', 0)" => "22023: k must be between 1 and 1024, got 0",
        "SELECT minhash('x', 1025)" => "22023: k must be between 1 and 1024, got 1025",
        "SELECT minhash('x', -5)" => "22023: k must be between 1 and 1024",
        "SELECT minhash('x', 128, 0)" => "22023: ngram must be between 1 and 64 for unit 'char', got 0",
        "SELECT minhash('x', 128, 65)" => "22023: ngram must be between 1 and 64 for unit 'char'",
        "SELECT minhash('x', 128, 17, 'word')" => "22023: ngram must be between 1 and 16 for unit 'word', got 17",
        "SELECT minhash('x', unit => 'byte')" => "22023: unit must be 'char' or 'word', not 'byte'",
        "SELECT minhash('x', 1024, 64)" => "ok",
        "SELECT minhash('x', 1, 16, 'word')" => "ok",
    );

    outcomes!(shingle_and_jaccard_argument_errors,
        "SELECT shingles('x', 0)" => "22023: ngram must be between 1 and 64",
        "SELECT shingles('x', unit => 'Char')" => "22023: unit must be 'char' or 'word'",
        "SELECT jaccard('a', 'b', 65)" => "22023: ngram must be between 1 and 64",
        "SELECT jaccard('a', 'b', unit => 'line')" => "22023: unit must be 'char' or 'word'",
    );

    outcomes!(lsh_bands_argument_errors,
        "SELECT lsh_bands(minhash('x'), 0)" => "22023: b must be between 1 and 1024, got 0",
        "SELECT lsh_bands(minhash('x'), 20)" => "22023: signature length 128 is not divisible by b = 20",
        "SELECT lsh_bands(minhash('x'), 20, 7)" => "22023: b * r = 140 exceeds the signature length 128",
        "SELECT lsh_bands(minhash('x'), 4, 0)" => "22023: r must be at least 1, got 0",
        "SELECT lsh_bands(minhash('x'), 4, -1)" => "22023: r must be at least 1",
        "SELECT lsh_bands(minhash('x', 1024), 1025, 1)" => "22023: b must be between 1 and 1024",
        "SELECT lsh_bands('{1,NULL,3,4}'::int4[], 2)" => "22004: signature must not contain NULL elements",
        "SELECT lsh_bands('{{1,2},{3,4}}'::int4[], 2)" => "2202E: signature must be a one-dimensional array, not 2-dimensional",
        "SELECT lsh_bands('{}'::int4[], 1)" => "22023: signature must not be empty",
        "SELECT lsh_bands('[5:8]={1,2,3,4}'::int4[], 2)" => "ok",
    );

    outcomes!(similarity_and_probability_errors,
        "SELECT minhash_similarity(minhash('a', 64), minhash('a', 128))" => "2202E: signatures have different lengths 64 and 128",
        "SELECT minhash_similarity('{1,NULL}'::int4[], '{1,2}'::int4[])" => "22004: a must not contain NULL elements",
        "SELECT minhash_similarity('{1,2}'::int4[], '{1,NULL}'::int4[])" => "22004: b must not contain NULL elements",
        "SELECT minhash_similarity('{{1},{2}}'::int4[], '{1,2}'::int4[])" => "2202E: a must be a one-dimensional array",
        "SELECT minhash_similarity('{}'::int4[], '{}'::int4[])" => "22023: a must not be empty",
        "SELECT lsh_probability(1.5, 4, 4)" => "22023: similarity must be between 0 and 1, got 1.5",
        "SELECT lsh_probability(-0.1, 4, 4)" => "22023: similarity must be between 0 and 1",
        "SELECT lsh_probability('NaN', 4, 4)" => "22023: similarity must be between 0 and 1, got NaN",
        "SELECT lsh_probability(0.5, 0, 4)" => "22023: b must be at least 1, got 0",
        "SELECT lsh_probability(0.5, 4, 0)" => "22023: r must be at least 1, got 0",
        "SELECT lsh_params(0)" => "22023: threshold must be greater than 0 and at most 1, got 0",
        "SELECT lsh_params(1.01)" => "22023: threshold must be greater than 0 and at most 1",
        "SELECT lsh_params(0.8, 2000)" => "22023: k must be between 1 and 1024, got 2000",
        "SELECT lsh_params(0.8, 128, 1.5)" => "22023: min_recall must be between 0 and 1, got 1.5",
    );

    #[pg_test]
    fn minhash_shape_and_edge_cases() {
        let sig = one::<Vec<i32>>("SELECT minhash('The quick brown fox')").unwrap();
        assert_eq!(sig.len(), 128);
        assert_eq!(
            one::<Vec<i32>>("SELECT minhash('', 16)").unwrap(),
            vec![-1; 16]
        );
        assert_eq!(
            one::<Vec<i32>>("SELECT minhash(E' \\t\\n', 4)").unwrap(),
            vec![-1; 4]
        );
        assert_eq!(one::<Vec<i32>>("SELECT minhash(NULL)"), None);
        assert_eq!(
            one::<i32>("SELECT array_length(minhash('x', k => 1024), 1)"),
            Some(1024)
        );
        let same = "SELECT minhash('Hello,   WORLD') = minhash(E'hello,\\u00a0world')";
        assert_eq!(one::<bool>(same), Some(true));
        let prefix = "SELECT (minhash('abcdefgh', 256))[1:64] = minhash('abcdefgh', 64)";
        assert_eq!(one::<bool>(prefix), Some(true));
        // same result as the core computes
        let core = crate::core::signature::signature(
            "The quick brown fox",
            128,
            crate::core::params::Shingling::new(5, "char").unwrap(),
        );
        assert_eq!(sig, core.iter().map(|&v| v as i32).collect::<Vec<_>>());
    }

    #[pg_test]
    fn jaccard_values() {
        let cases: [(&str, f64); 7] = [
            ("SELECT jaccard('', '')", 1.0),
            ("SELECT jaccard('', 'x')", 0.0),
            ("SELECT jaccard('abc', 'ABC')", 1.0),
            ("SELECT jaccard('Who was the first king of Poland', 'Who was the first ruler of Poland', unit => 'word', ngram => 1)", 0.75),
            ("SELECT jaccard('a b c d', 'a b c e', 2, 'word')", 0.5),
            ("SELECT jaccard('abc', 'bcd', 2)", 1.0 / 3.0),
            ("SELECT jaccard('日本語です', '日本語だよ', 2)", 2.0 / 6.0),
        ];
        for (sql, want) in cases {
            assert_eq!(one::<f64>(sql), Some(want), "{sql}");
        }
        assert_eq!(one::<f64>("SELECT jaccard(NULL, 'x')"), None);
    }

    #[pg_test]
    fn shingles_show_what_is_hashed() {
        let got = |sql: &str| one::<Vec<String>>(sql).unwrap();
        assert_eq!(
            got("SELECT shingles('Abcd  E', 3)"),
            ["abc", "bcd", "cd ", "d e"]
        );
        assert_eq!(
            got("SELECT shingles('the cat the cat', 1, 'word')"),
            ["cat", "the"]
        );
        assert_eq!(got("SELECT shingles('Hi', 5)"), ["hi"]);
        assert!(got("SELECT shingles('  ')").is_empty());
        assert_eq!(got("SELECT shingles('Ωmega', 4)"), ["mega", "ωmeg"]);
    }

    #[pg_test]
    fn similarity_estimates() {
        assert_eq!(
            one::<f64>("SELECT minhash_similarity(minhash('some text'), minhash('some text'))"),
            Some(1.0)
        );
        assert_eq!(
            one::<f64>("SELECT minhash_similarity('{1,2,3,4}', '{1,2,0,0}')"),
            Some(0.5)
        );
        let est = one::<f64>(
            "SELECT minhash_similarity(minhash(a, 1024), minhash(b, 1024)) - jaccard(a, b)
             FROM (SELECT 'the quick brown fox jumps over the lazy dog' a,
                          'the quick brown fox jumped over the lazy dogs' b) t",
        )
        .unwrap();
        // standard error sqrt(J(1-J)/1024) <= 0.016; this fixed pair is within 3 of them
        assert!(est.abs() < 0.05, "{est}");
    }

    #[pg_test]
    fn lsh_bands_keys() {
        assert_eq!(
            one::<i32>("SELECT array_length(lsh_bands(minhash('x'), 32), 1)"),
            Some(32)
        );
        assert_eq!(
            one::<i32>("SELECT array_length(lsh_bands(minhash('x'), 20, 6), 1)"),
            Some(20)
        );
        assert_eq!(one::<Vec<i64>>("SELECT lsh_bands(NULL, 4)"), None);
        assert_eq!(
            one::<Vec<i64>>("SELECT lsh_bands(minhash('x'), NULL)"),
            None
        );
        assert_eq!(
            one::<bool>("SELECT lsh_bands(minhash('same'), 16) = lsh_bands(minhash('SAME'), 16)"),
            Some(true)
        );
        // the band index sits in the top 10 bits, so every band's keys are distinct
        assert_eq!(
            one::<Vec<i64>>("SELECT array_agg(k >> 54 ORDER BY ord) FROM unnest(lsh_bands(minhash(''), 8)) WITH ORDINALITY u(k, ord)"),
            Some((0..8).collect())
        );
        assert_eq!(
            one::<bool>("SELECT lsh_bands(minhash('abc', 100), 3, 30) = lsh_bands((minhash('abc', 100))[1:90], 3)"),
            Some(true)
        );
    }

    #[pg_test]
    fn probability_and_params() {
        assert_eq!(one::<f64>("SELECT lsh_probability(0, 4, 4)"), Some(0.0));
        assert_eq!(one::<f64>("SELECT lsh_probability(1, 4, 4)"), Some(1.0));
        let p = one::<f64>("SELECT lsh_probability(0.5, 32, 4)").unwrap();
        assert!((p - (1.0 - (1.0 - 0.0625f64).powi(32))).abs() < 1e-12);
        let (b, r, recall) = Spi::get_three::<i32, i32, f64>(
            "SELECT bands, rows_per_band, recall_at_threshold FROM lsh_params(0.8) LIMIT 1",
        )
        .unwrap();
        let (b, r, recall) = (b.unwrap(), r.unwrap(), recall.unwrap());
        assert!(b * r <= 128 && recall >= 0.99, "{b} {r} {recall}");
        assert_eq!(
            one::<i64>("SELECT count(*) FROM lsh_params(0.8, 128, 0.99) WHERE bands * rows_per_band > 128 OR recall_at_threshold < 0.99"),
            Some(0)
        );
        assert_eq!(one::<i32>("SELECT minhash_format_version()"), Some(1));
    }

    /// Rust functions are IMMUTABLE, PARALLEL SAFE and (but lsh_bands, minhash_similar,
    /// minhash_matches, _minhash_threshold, _minhash_as_owner and the whole-table searches,
    /// whose NULL arguments mean something, and the maintenance functions of an index and the
    /// internal ones they share, which refuse a NULL argument with 22004 as their PL/pgSQL did)
    /// STRICT, except those that read a table or a setting (STABLE), those that write one or
    /// keep an index (VOLATILE, PARALLEL UNSAFE), those that read a sketch store's pages as
    /// they are, outside any snapshot, or time themselves (VOLATILE), and the trigger, event
    /// trigger and access method handler
    /// functions; the managed-index functions that only read as the caller are STABLE, and none
    /// is SECURITY DEFINER.
    #[pg_test]
    fn functions_are_marked_for_what_they_are() {
        let members = "FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid
             JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'pg_minhash'
             AND p.pronamespace IN (e.extnamespace, 'minhash_internal'::regnamespace)";
        let table_readers =
            "'_minhash_search_pairs', '_minhash_search_clusters', 'minhash_similar',
             'minhash_matches', '_minhash_lookup_sql', '_minhash_direct_reads',
             '_minhash_search_keyed_pairs', '_minhash_search_keyed_clusters',
             '_minhash_text_expression', '_minhash_row_text', '_minhash_row_text_sql',
             '_minhash_check_indexable', '_minhash_index', '_minhash_citus_table',
             '_minhash_citus_worker', '_minhash_check_format'";
        let table_writers =
            "'_minhash_as_owner', '_minhash_link_band_table', '_minhash_sync_stores',
             '_minhash_band_fill', 'minhash_index_create', 'minhash_index_check', 'minhash_index_stats',
             'minhash_index_rebuild', 'minhash_index_drop', '_minhash_drop_objects',
             '_minhash_relink', '_minhash_backfill', '_minhash_sync_triggers',
             '_minhash_band_reshape', '_minhash_band_indexes', '_minhash_citus_distribute'";
        // (progress: volatile, its counter kept by the one backend that reads)
        let counters = "'_minhash_progress'";
        // (a lookup that reports its own timing, as EXPLAIN ANALYZE does, and a sketch store's
        // pages read as they are, dead entries too: volatile)
        let timed = "'minhash_explain', '_minhash_sketch_scan_ms', '_minhash_sketch_entries',
                     '_minhash_sketch_stats'";
        let wrong_c = one::<Vec<String>>(&format!(
            "SELECT coalesce(array_agg(p.proname::text), '{{}}') {members}
             WHERE p.prolang = (SELECT oid FROM pg_language WHERE lanname = 'c')
               AND p.prorettype NOT IN ('trigger'::regtype, 'event_trigger'::regtype,
                                        'index_am_handler'::regtype)
               AND (p.provolatile <> CASE WHEN p.proname IN ({table_readers}) THEN 's'
                                          WHEN p.proname IN ({table_writers}, {counters}, {timed}) THEN 'v'
                                          ELSE 'i' END
                    OR p.proparallel <> CASE WHEN p.proname IN ({table_writers}) THEN 'u'
                                             WHEN p.proname IN ({counters}) THEN 'r'
                                             ELSE 's' END
                    OR (NOT p.proisstrict AND p.proname NOT IN
                        ('lsh_bands', 'minhash_similar', 'minhash_matches', 'minhash_explain',
                         'minhash_index_create',
                         '_minhash_threshold', '_minhash_as_owner', '_minhash_search_pairs',
                         '_minhash_search_clusters', '_minhash_search_keyed_pairs',
                         '_minhash_search_keyed_clusters', '_minhash_row_text',
                         'minhash_index_check', 'minhash_index_stats', 'minhash_index_rebuild',
                         'minhash_index_drop', '_minhash_drop_objects', '_minhash_relink',
                         '_minhash_index', '_minhash_citus_table', '_minhash_check_format',
                         '_minhash_backfill', '_minhash_sync_triggers', '_minhash_band_reshape',
                         '_minhash_band_indexes', '_minhash_citus_distribute')))"
        ));
        assert_eq!(wrong_c, Some(vec![]));
        let readers = one::<Vec<String>>(&format!(
            "SELECT array_agg(DISTINCT p.proname::text ORDER BY p.proname::text) {members}
             WHERE p.provolatile = 's' AND p.proname NOT LIKE '\\_%'"
        ));
        let expected = [
            "minhash_clusters",
            "minhash_duplicates",
            "minhash_matches",
            "minhash_similar",
        ];
        assert_eq!(readers, Some(expected.map(String::from).to_vec()));
        let definers = one::<i64>(&format!("SELECT count(*) {members} WHERE p.prosecdef"));
        assert_eq!(definers, Some(0));
    }

    /// `\df` of the extension's schema lists only what users call, each with a comment; the
    /// internal functions (names starting with `_minhash_`) are all in `minhash_internal`.
    #[pg_test]
    fn public_functions_are_commented_and_internals_kept_apart() {
        let members = "FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid
             AND d.classid = 'pg_proc'::regclass AND d.deptype = 'e'
             JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'pg_minhash'";
        let misplaced = one::<Vec<String>>(&format!(
            "SELECT coalesce(array_agg(p.oid::regprocedure::text), '{{}}') {members}
             WHERE (p.proname LIKE '\\_minhash\\_%') <>
                   (p.pronamespace = 'minhash_internal'::regnamespace)"
        ));
        assert_eq!(misplaced, Some(vec![]));
        let uncommented = one::<Vec<String>>(&format!(
            "SELECT coalesce(array_agg(p.oid::regprocedure::text), '{{}}') {members}
             WHERE p.pronamespace = e.extnamespace
               AND obj_description(p.oid, 'pg_proc') IS NULL"
        ));
        assert_eq!(uncommented, Some(vec![]));
        let public = one::<i64>(&format!(
            "SELECT count(*) {members} WHERE p.pronamespace = e.extnamespace"
        ));
        assert_eq!(public, Some(28));
        // a role without any grant can still reach the internals the public functions call
        let usage =
            one::<bool>("SELECT has_schema_privilege('public', 'minhash_internal', 'USAGE')");
        assert_eq!(usage, Some(true));
    }

    #[pg_test]
    fn large_documents_work() {
        // 50 MB of text: signatures and shingling stay linear and do not fail
        let sig = one::<Vec<i32>>(
            "SELECT minhash(repeat('All work and no play makes Jack a dull boy. ', 1200000), 16)",
        )
        .unwrap();
        assert_eq!(sig.len(), 16);
        let twice = "SELECT minhash(repeat('All work and no play makes Jack a dull boy. ', 2), 16)";
        assert_eq!(
            sig,
            one::<Vec<i32>>(twice).unwrap(),
            "both have the same shingle set"
        );
    }
}
