//! Recall of the managed index against brute-force truth on a generated corpus.

#[pgrx::pg_schema]
mod tests {
    use std::collections::HashSet;

    use pgrx::prelude::*;

    use crate::core::components::components;
    use crate::core::jaccard::ShingleSet;
    use crate::core::params::Shingling;
    use crate::core::testing::Rng;

    /// Base documents of random words, each with near-duplicates made by a few word edits, and
    /// some edits of edits: pairs spread from clearly different to identical.
    fn corpus() -> Vec<String> {
        let mut rng = Rng(7);
        let vocabulary: Vec<String> = (0..3000)
            .map(|_| {
                let len = 3 + rng.below(7);
                rng.word(len)
            })
            .collect();
        let word = |rng: &mut Rng| vocabulary[rng.below(3000) as usize].clone();
        let mut docs: Vec<Vec<String>> = Vec::new();
        for _ in 0..500 {
            let len = 30 + rng.below(40);
            docs.push((0..len).map(|_| word(&mut rng)).collect());
        }
        // variant i goes to index 500 + i: docs[i] is base document i for i < 500, and an
        // earlier variant after that
        for i in 0..700 {
            let mut doc = docs[i].clone();
            for _ in 0..rng.below(7) {
                let at = rng.below(doc.len() as u64) as usize;
                match rng.below(3) {
                    0 => doc[at] = word(&mut rng),
                    1 => doc.insert(at, word(&mut rng)),
                    _ if doc.len() > 5 => {
                        doc.remove(at);
                    }
                    _ => {}
                }
            }
            docs.push(doc);
        }
        docs.into_iter().map(|d| d.join(" ")).collect()
    }

    /// The table `corpus (id bigint, body text)` of [`corpus`], ids from 1, with an index.
    fn corpus_table() -> (Vec<i64>, Vec<String>) {
        let docs = corpus();
        let ids: Vec<i64> = (1..=docs.len() as i64).collect();
        Spi::run("SET LOCAL client_min_messages = warning").unwrap();
        Spi::run("CREATE TABLE corpus (id bigint PRIMARY KEY, body text)").unwrap();
        Spi::run_with_args(
            "INSERT INTO corpus SELECT * FROM unnest($1::bigint[], $2::text[])",
            &[ids.clone().into(), docs.clone().into()],
        )
        .unwrap();
        Spi::run("SELECT minhash_index_create('corpus', 'id', 'body')").unwrap();
        (ids, docs)
    }

    /// Rows of `query` as two int8 columns, in the order it returns them.
    fn id_pairs(query: &str) -> Vec<(i64, i64)> {
        Spi::connect(|client| {
            client
                .select(query, None, &[])
                .unwrap()
                .map(|row| (row.get(1).unwrap().unwrap(), row.get(2).unwrap().unwrap()))
                .collect()
        })
    }

    /// The bigint, typed and array forms find the same pairs and clusters, in the same order;
    /// array ids of another type (zero-padded text, whose order is the numbers') come back in
    /// it; keep-one groups hold only rows at the threshold to their kept row.
    #[pg_test]
    fn every_form_of_the_search_agrees() {
        let (_, docs) = corpus_table();
        let arrays = |mode: &str| {
            format!(
                "SELECT ltrim(id, '0')::bigint, ltrim(cluster_id, '0')::bigint
                 FROM (SELECT array_agg(lpad(id::text, 8, '0') ORDER BY id) ids,
                              array_agg(body ORDER BY id) texts FROM corpus) c,
                      minhash_clusters(c.ids, c.texts, mode => '{mode}')"
            )
        };
        let pairs = id_pairs("SELECT id_a, id_b FROM minhash_duplicates('corpus')");
        assert!(pairs.len() >= 300, "{} pairs", pairs.len());
        assert!(pairs.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(
            pairs,
            id_pairs("SELECT id_a, id_b FROM minhash_duplicates('corpus', id_type => NULL::int8)")
        );
        assert_eq!(
            pairs,
            id_pairs(
                "SELECT ltrim(id_a, '0')::bigint, ltrim(id_b, '0')::bigint
                 FROM (SELECT array_agg(lpad(id::text, 8, '0') ORDER BY id DESC) ids,
                              array_agg(body ORDER BY id DESC) texts FROM corpus) c,
                      minhash_duplicates(c.ids, c.texts)"
            )
        );
        for mode in ["connected", "representative"] {
            let clusters = id_pairs(&format!(
                "SELECT id, cluster_id FROM minhash_clusters('corpus', mode => '{mode}')"
            ));
            assert!(clusters
                .windows(2)
                .all(|w| (w[0].1, w[0].0) < (w[1].1, w[1].0)));
            assert_eq!(
                clusters,
                id_pairs(&format!(
                    "SELECT id, cluster_id FROM minhash_clusters('corpus', id_type => NULL::int8,
                                                                 mode => '{mode}')"
                )),
                "{mode}"
            );
            assert_eq!(clusters, id_pairs(&arrays(mode)), "{mode}");
        }
        let shingling = Shingling::new(5, "char").unwrap();
        let kept = id_pairs(
            "SELECT id, cluster_id FROM minhash_clusters('corpus', mode => 'representative')",
        );
        assert!(kept.len() >= 300, "{} rows in groups", kept.len());
        for (id, cluster) in kept {
            let set = |id: i64| ShingleSet::new(&docs[id as usize - 1], shingling, &mut || {});
            let j = set(id).jaccard(&set(cluster));
            assert!(j >= 0.8, "{id} kept with {cluster} at {j}");
        }
    }

    #[pg_test]
    fn duplicates_recall_against_brute_force() {
        let (ids, docs) = corpus_table();

        let shingling = Shingling::new(5, "char").unwrap();
        let sets: Vec<ShingleSet> = docs
            .iter()
            .map(|d| ShingleSet::new(d, shingling, &mut || {}))
            .collect();
        let mut truth = HashSet::new();
        let mut near_threshold = 0;
        for a in 0..sets.len() {
            for b in a + 1..sets.len() {
                let j = sets[a].jaccard(&sets[b]);
                if j >= 0.8 {
                    truth.insert((ids[a], ids[b]));
                    near_threshold += usize::from(j < 0.9);
                }
            }
        }

        let found: Vec<(i64, i64, f64)> = Spi::connect(|client| {
            client
                .select(
                    "SELECT id_a, id_b, similarity FROM minhash_duplicates('corpus')",
                    None,
                    &[],
                )
                .unwrap()
                .map(|row| {
                    (
                        row.get(1).unwrap().unwrap(),
                        row.get(2).unwrap().unwrap(),
                        row.get(3).unwrap().unwrap(),
                    )
                })
                .collect()
        });
        // precision: every reported pair is a true pair with its exact similarity
        for &(a, b, s) in &found {
            assert!(
                truth.contains(&(a, b)),
                "({a}, {b}) reported with {s} but is not a true pair"
            );
            let exact = sets[a as usize - 1].jaccard(&sets[b as usize - 1]);
            assert_eq!(s, exact);
        }
        let recall = found.len() as f64 / truth.len() as f64;
        // lsh_params promises >= 0.99 per pair at the threshold itself and more above it
        assert!(
            truth.len() >= 300 && near_threshold >= 50,
            "{} true pairs, {near_threshold} below 0.9",
            truth.len()
        );
        assert!(
            recall >= 0.98,
            "recall {recall}: {} of {} pairs",
            found.len(),
            truth.len()
        );

        // a lookup of every row finds the same pairs: its sketch filter drops none of them
        let looked_up: HashSet<(i64, i64)> = Spi::connect(|client| {
            client
                .select(
                    "SELECT c.id, s.id FROM corpus c
                     CROSS JOIN LATERAL minhash_similar('corpus', c.body) s WHERE s.id <> c.id",
                    None,
                    &[],
                )
                .unwrap()
                .map(|row| {
                    let (a, b): (i64, i64) =
                        (row.get(1).unwrap().unwrap(), row.get(2).unwrap().unwrap());
                    (a.min(b), a.max(b))
                })
                .collect()
        });
        let batch: HashSet<(i64, i64)> = found.iter().map(|&(a, b, _)| (a, b)).collect();
        assert_eq!(looked_up, batch);

        // clusters are exactly the connected components of those pairs
        let clusters: Vec<(i64, i64)> = Spi::connect(|client| {
            client
                .select(
                    "SELECT id, cluster_id FROM minhash_clusters('corpus')",
                    None,
                    &[],
                )
                .unwrap()
                .map(|row| (row.get(1).unwrap().unwrap(), row.get(2).unwrap().unwrap()))
                .collect()
        });
        assert_eq!(clusters, components(found.iter().map(|&(a, b, _)| (a, b))));
        let check =
            Spi::get_two::<i64, i64>("SELECT * FROM minhash_index_check('corpus')").unwrap();
        assert_eq!(check, (Some(0), Some(0)));
    }
}
