"""Direct heap/index writes against a prepared SPI INSERT for the band rows of the sync and flag
triggers (`pg_minhash.write_path` = 'direct' or 'spi'), in one run, interleaved: each round
runs every workload once with each path, the order of the two paths alternating from round to
round; each figure is the median over the rounds, with the range of the per-round ratios.

Expects PGHOST/PGPORT/PGUSER of a running cluster with this build of pg_minhash installed
(benches/write_path.sh does that). Stdlib only.
"""

import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time

WORDS = ("sort reverse parse merge split join format filter encode decode cache index query "
         "render deploy compile test debug profile log string list dictionary array table file "
         "column row number date image request response socket thread process module package "
         "function class python rust java go postgres linux docker excel bash react json csv xml "
         "yaml regex unicode pandas numpy spark kafka quickly safely lazily twice recursively "
         "manually efficiently correctly").split() + [
    "in place", "by value", "by key", "by date", "with a lambda", "without a loop",
    "in parallel", "on windows", "on mac", "in a test", "in production", "at scale",
    "from a url", "from stdin", "into a map", "into bytes", "as utf-8", "as json", "as csv",
    "with nulls", "with duplicates", "without errors", "with a timeout", "after an update",
    "before commit", "on startup", "on shutdown", "per user", "per day", "per row",
    "per column"]

PATHS = ("direct", "spi")


def say(text):
    print(text, flush=True)


def question(n):
    """The bench's generated questions: every tenth a near-duplicate of the one before it."""
    base = n - 1 if n % 10 == 0 else n
    rng = random.Random(base)
    w = [rng.choice(WORDS) for _ in range(5)]
    return (f"How do I {w[0]} a {w[1]} {w[2]} in {w[3]} {w[4]}"
            f"{' please' if n % 10 == 0 else ''}?")


def psql(sql, db="bench", path=None, timing=False):
    env = dict(os.environ)
    if path:
        env["PGOPTIONS"] = f"-c pg_minhash.write_path={path}"
    args = ["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-d", db]
    if timing:
        args += ["-c", "\\timing on"]
    args += ["-c", sql]
    out = subprocess.run(args, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"psql failed: {sql[:200]}\n{out.stderr}")
    if timing:
        return float(re.findall(r"Time: ([0-9.]+) ms", out.stdout)[-1]) / 1000
    return out.stdout.strip()


def pgbench(pgbench_bin, script, seconds, path, clients=1):
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
        f.write(script)
    env = dict(os.environ, PGOPTIONS=f"-c pg_minhash.write_path={path}")
    args = [pgbench_bin, "-n", "-M", "prepared", "-c", str(clients), "-j", str(min(clients, 2)),
            "-T", str(seconds), "-f", f.name, "bench"]
    out = subprocess.run(args, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(out.stdout + out.stderr)
    return float(re.search(r"tps = ([0-9.]+)", out.stdout).group(1))


def write_csv(path, first, count):
    with open(path, "w") as f:
        for n in range(first, first + count):
            f.write(f"{n},\"{question(n)}\"\n")
    os.chmod(path, 0o644)


def report(name, unit, results, higher_is_better):
    """results: {path: [per-round figure]}; ratio = how many times faster direct is."""
    d, s = results["direct"], results["spi"]
    ratios = [(a / b) if higher_is_better else (b / a) for a, b in zip(d, s)]
    fmt = (lambda v: f"{v:,.0f}") if unit == "rows/s" else (lambda v: f"{v:.2f}")
    say(f"  {name}: direct {fmt(statistics.median(d))} {unit} (rounds {', '.join(map(fmt, d))}); "
        f"spi {fmt(statistics.median(s))} {unit} (rounds {', '.join(map(fmt, s))}); "
        f"direct/spi speed ratio median {statistics.median(ratios):.3f}, "
        f"range {min(ratios):.3f}-{max(ratios):.3f}")
    return statistics.median(ratios)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--pgbench", required=True)
    parser.add_argument("--base-rows", type=int, default=1_000_000)
    parser.add_argument("--bulk-rows", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--data", default="/tmp/pg_minhash-write-path")
    parser.add_argument("--only", action="append",
                        choices=["flagged", "writers", "bulk", "copy", "populated"])
    args = parser.parse_args()
    only = args.only or ["flagged", "writers", "bulk", "copy", "populated"]
    os.makedirs(args.data, exist_ok=True)
    os.chmod(args.data, 0o755)
    base, bulk = args.base_rows, args.bulk_rows
    fresh = 1_500_000

    say(f"PostgreSQL {psql('SHOW server_version', 'postgres')}; {os.cpu_count()} cores; "
        f"load average {os.getloadavg()[0]:.2f}")
    started = time.perf_counter()
    psql("DROP DATABASE IF EXISTS bench", "postgres")
    psql("CREATE DATABASE bench", "postgres")
    psql("SET client_min_messages = warning; CREATE EXTENSION pg_minhash")
    base_csv, pending_csv, bulk_csv = (os.path.join(args.data, f) for f in
                                       ("base.csv", "pending.csv", "bulk.csv"))
    write_csv(base_csv, 1, base)
    write_csv(pending_csv, base + 1, fresh)
    # the bulk rows: texts of their own, loaded as ids 10M+ so they never meet the others' ids
    write_csv(bulk_csv, 10_000_001, bulk)
    psql("CREATE TABLE questions (id bigint PRIMARY KEY, body text NOT NULL, duplicate_of bigint);"
         f"COPY questions (id, body) FROM '{base_csv}' WITH (FORMAT csv);"
         "CREATE TABLE pending (n bigint PRIMARY KEY, body text NOT NULL);"
         f"COPY pending FROM '{pending_csv}' WITH (FORMAT csv);"
         f"CREATE SEQUENCE pending_next START {base + 1};"
         "CREATE TABLE bulk_src (id bigint PRIMARY KEY, body text NOT NULL);"
         f"COPY bulk_src FROM '{bulk_csv}' WITH (FORMAT csv)")
    for table in ("questions", "pending", "bulk_src"):
        psql(f"VACUUM ANALYZE {table}")
    t_create = psql("SET client_min_messages = warning; "
                    "SELECT minhash_index_create('questions', 'id', 'body')", timing=True)
    psql("VACUUM ANALYZE questions_minhash_bands")
    say(f"setup: {base:,} base rows, index created in {t_create:.1f} s (same for both paths: "
        f"the backfill is SQL); setup {time.perf_counter() - started:.0f} s")
    next_script = ("INSERT INTO questions (id, body) SELECT p.n, p.body FROM pending p "
                   "WHERE p.n = (SELECT nextval('pending_next'));\n")
    flagged = {p: [] for p in PATHS}
    writers = {p: [] for p in PATHS}
    plain_bulk, plain_copy = [], []
    bulk_t = {p: [] for p in PATHS}
    copy_t = {p: [] for p in PATHS}
    populated = {p: [] for p in PATHS}
    populated_plain = []

    def fresh_table(name, indexed):
        psql(f"DROP TABLE IF EXISTS {name}; "
             f"CREATE TABLE {name} (id bigint PRIMARY KEY, body text NOT NULL, duplicate_of bigint)")
        if indexed:
            psql(f"SET client_min_messages = warning; SELECT minhash_index_create('{name}', 'id', 'body')")
        psql("CHECKPOINT")

    for r in range(args.rounds):
        order = PATHS if r % 2 == 0 else PATHS[::-1]
        say(f"round {r + 1}, order {'/'.join(order)}, load average {os.getloadavg()[0]:.2f}")
        if "flagged" in only or "writers" in only:
            psql("DROP TRIGGER IF EXISTS flag ON questions; "
                 "CREATE TRIGGER flag BEFORE INSERT ON questions FOR EACH ROW "
                 "EXECUTE FUNCTION minhash_flag_duplicate('duplicate_of')")
        if "flagged" in only:
            for path in order:
                psql("CHECKPOINT")
                flagged[path].append(pgbench(args.pgbench, next_script, args.seconds, path))
        if "writers" in only:
            for path in order:
                psql("CHECKPOINT")
                writers[path].append(pgbench(args.pgbench, next_script, args.seconds, path, 8))
        psql("DROP TRIGGER IF EXISTS flag ON questions")
        if "bulk" in only:
            fresh_table("bulk_plain", False)
            plain_bulk.append(psql("INSERT INTO bulk_plain (id, body) SELECT id, body FROM bulk_src",
                                   timing=True))
            for path in order:
                fresh_table("bulk_t", True)
                bulk_t[path].append(psql("INSERT INTO bulk_t (id, body) SELECT id, body FROM bulk_src",
                                         path=path, timing=True))
        if "copy" in only:
            fresh_table("copy_plain", False)
            plain_copy.append(psql(f"COPY copy_plain (id, body) FROM '{bulk_csv}' WITH (FORMAT csv)",
                                   timing=True))
            for path in order:
                fresh_table("copy_t", True)
                copy_t[path].append(psql(f"COPY copy_t (id, body) FROM '{bulk_csv}' WITH (FORMAT csv)",
                                         path=path, timing=True))
        if "populated" in only:
            # the same rows into the indexed table of base rows, then deleted again (untimed)
            for path in order:
                psql("CHECKPOINT")
                populated[path].append(psql("INSERT INTO questions (id, body) SELECT id, body FROM bulk_src",
                                            path=path, timing=True))
                psql("DELETE FROM questions WHERE id > 10000000")
                psql("VACUUM questions")
                psql("VACUUM questions_minhash_bands")
        say(f"  after round {r + 1}: {time.perf_counter() - started:.0f} s")

    say(f"\n== results over {args.rounds} rounds (median; ratio = direct speed / spi speed, per round)")
    ratios = {}
    if "flagged" in only:
        ratios["flagged"] = report("single-row flagged inserts, 1 session", "rows/s", flagged, True)
    if "writers" in only:
        ratios["writers"] = report("single-row flagged inserts, 8 sessions", "rows/s", writers, True)
    if "bulk" in only:
        ratios["bulk"] = report(f"INSERT ... SELECT of {bulk:,} rows into a new indexed table", "s",
                                bulk_t, False)
        say(f"    (the same INSERT into a table without index: {statistics.median(plain_bulk):.2f} s; "
            f"rounds {', '.join(f'{v:.2f}' for v in plain_bulk)})")
        inc = {p: [t - b for t, b in zip(bulk_t[p], plain_bulk)] for p in PATHS}
        ratios["bulk sync"] = report("  sync trigger's share (indexed minus plain, same round)", "s",
                                     inc, False)
    if "copy" in only:
        ratios["copy"] = report(f"COPY of {bulk:,} rows into a new indexed table", "s", copy_t, False)
        say(f"    (the same COPY into a table without index: {statistics.median(plain_copy):.2f} s; "
            f"rounds {', '.join(f'{v:.2f}' for v in plain_copy)})")
        inc = {p: [t - b for t, b in zip(copy_t[p], plain_copy)] for p in PATHS}
        ratios["copy sync"] = report("  sync trigger's share (indexed minus plain, same round)", "s",
                                     inc, False)
    if "populated" in only:
        ratios["populated"] = report(f"INSERT ... SELECT of {bulk:,} rows into the {base:,}-row table",
                                     "s", populated, False)
    say(f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    sys.exit(main())
