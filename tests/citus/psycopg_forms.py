"""Lookups of a Citus table through psycopg's prepared statements, as an application makes
them, against the same lookups of its plain copy (tests/citus/run.sh).

Each query runs six times with `prepare=True` (psycopg prepares it on the server at the first
use and then executes the prepared statement, PostgreSQL's generic plan from the sixth), with
the table name, texts, ids and thresholds as parameters.

    python psycopg_forms.py CONNINFO
"""

import sys

import psycopg

QUERIES = {
    "similar": ("SELECT id, similarity FROM minhash_similar(%s::regclass, %s, %s) ORDER BY id",
                lambda t, text: (t, text, 0.6)),
    "similar, k": ("SELECT id, similarity FROM minhash_similar(%s::regclass, %s, k => %s) ORDER BY id",
                   lambda t, text: (t, text, 3)),
    "matches": ("SELECT probe, id, similarity FROM minhash_matches(%s::regclass, %s) ORDER BY 1, 2",
                lambda t, text: (t, [text, text + " w9", None])),
    "text of a row": ("SELECT s.id, s.similarity FROM minhash_similar('{t}', "
                      "(SELECT body FROM {t} WHERE id = %s)) s ORDER BY 1",
                      lambda t, text: (29,)),
}


def main(conninfo):
    with psycopg.connect(conninfo, autocommit=True) as conn:
        probe = conn.execute("SELECT body FROM docs_local WHERE id = 29").fetchone()[0]
        for name, (sql, params) in QUERIES.items():
            got = {}
            for table in ("docs", "docs_local"):
                query = sql.replace("{t}", table)
                for _ in range(6):
                    rows = conn.execute(query, params(table, probe), prepare=True).fetchall()
                got[table] = rows
            if got["docs"] != got["docs_local"] or not got["docs"]:
                print(f"psycopg {name}: {got['docs']} on Citus, {got['docs_local']} plain")
                return 1
    print(f"ok: psycopg prepared lookups ({', '.join(QUERIES)}) equal the plain table's")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
