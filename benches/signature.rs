//! Signature kernel throughput on the Debian package descriptions: text in, signature out,
//! normalization and shingling included. `benches/run.sh` fetches the corpus and runs this next
//! to rensa; `PG_MINHASH_CORPUS` names another CSV of (name, text) rows.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use pg_minhash::core::jaccard::ShingleSet;
use pg_minhash::core::params::Shingling;
use pg_minhash::core::signature::Signer;

fn corpus() -> Vec<String> {
    let path = std::env::var("PG_MINHASH_CORPUS")
        .unwrap_or_else(|_| ".demo-data/debian-descriptions.csv".to_string());
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .from_path(&path)
        .unwrap_or_else(|e| panic!("{path}: {e} (benches/run.sh fetches the corpus)"));
    reader
        .records()
        .map(|r| r.expect("a CSV record")[1].to_string())
        .collect()
}

fn signatures(c: &mut Criterion) {
    let docs = corpus();
    let bytes: usize = docs.iter().map(String::len).sum();
    let chars = Shingling::new(5, "char").unwrap();
    let mut group = c.benchmark_group(format!("debian/{}-docs", docs.len()));
    group.throughput(Throughput::Bytes(bytes as u64));
    group.sample_size(10);

    let mut signer = Signer::default();
    group.bench_function("minhash k=128 char-5", |b| {
        b.iter(|| {
            for doc in &docs {
                black_box(signer.signature(doc, 128, chars, &mut || {}));
            }
        })
    });
    group.bench_function("shingle set for jaccard, char-5", |b| {
        b.iter(|| {
            for doc in &docs {
                black_box(ShingleSet::new(doc, chars, &mut || {}));
            }
        })
    });
    group.finish();

    // verification: exact Jaccard of every document with its successor, sets built once
    let sets: Vec<ShingleSet> = docs
        .iter()
        .map(|d| ShingleSet::new(d, chars, &mut || {}))
        .collect();
    let mut pairs = c.benchmark_group(format!("debian/{}-pairs", sets.len() - 1));
    pairs.throughput(Throughput::Elements(sets.len() as u64 - 1));
    pairs.sample_size(10);
    pairs.bench_function("jaccard of prepared sets", |b| {
        b.iter(|| sets.windows(2).map(|w| w[0].jaccard(&w[1])).sum::<f64>())
    });
    pairs.finish();
}

criterion_group!(benches, signatures);
criterion_main!(benches);
