#!/usr/bin/env python3
"""Static check: no SQL of the extension resolves an operator, function or relation through a
schema a role can write (docs/security.md, "Names").

PostgreSQL resolves an unqualified operator or function through the search path, and picks
the best match on the argument types: pg_catalog comes first, but where it has no exact match
for the types (`oid = regclass`), an exact one planted in a schema further on wins. Install
and upgrade scripts run as a superuser with the installer's schema first on the path, and
SQL run by a function without a pinned path runs with the caller's. So this check parses
(with PostgreSQL's own parser, through pglast) every script in sql/, the install script pgrx
generates (given with --generated), and the SQL strings in src/, and requires:

- in a *resolving* context (a statement of a script, including policies, defaults and
  constraints, which PostgreSQL binds when it runs it; a DO block; the body of a SQL or
  PL/pgSQL function without a pinned search path; an SQL string in Rust): every function
  call, operator and relation schema-qualified (`pg_catalog.f()`, `OPERATOR(pg_catalog.=)`,
  `@extschema@.t`), and no construct that resolves an operator by name and cannot be
  qualified (`IN (...)` lists, `LIKE`, `BETWEEN`, `IS DISTINCT FROM`, `NULLIF`, a simple
  `CASE x WHEN`, `JOIN ... USING`, `NATURAL JOIN`);
- every function written in SQL or PL/pgSQL either carries `SET search_path = pg_catalog,
  pg_temp` (then its body resolves only in pg_catalog: pg_temp is never searched for
  functions and operators, and is searched last for relations and types), or its body is
  checked as above.

Types are not required to be qualified: a type name has no overloads, and pg_catalog is
searched before the installer's schema (and pg_temp last) in scripts and pinned bodies.

Usage: scripts/sqlcheck.py [--generated FILE] [FILE ...]   (default: sql/**/*.sql, src/**/*.sql, src/**/*.rs)
Exits 1 and lists each problem as FILE:LINE: message.
"""

import argparse
import json
import os
import pathlib
import re
import sys

try:
    from pglast import parse_plpgsql, parser
except ImportError:  # pragma: no cover
    # (scripts/setup.sh installs pglast in a virtual environment of its own)
    VENV = "/opt/pg_minhash/sqlcheck"
    if os.path.exists(f"{VENV}/bin/python") and sys.prefix != VENV:
        os.execv(f"{VENV}/bin/python", [f"{VENV}/bin/python", *sys.argv])
    sys.exit("sqlcheck: pglast is not installed (scripts/setup.sh installs it)")

ROOT = pathlib.Path(__file__).resolve().parent.parent
PINNED = ["pg_catalog", "pg_temp"]
# A_Expr kinds whose operator the syntax cannot qualify
UNQUALIFIABLE = {
    "AEXPR_IN": "IN (...) compares with an unqualified =: write x OPERATOR(pg_catalog.=) ANY (ARRAY[...])",
    "AEXPR_LIKE": "LIKE resolves ~~ by name: write OPERATOR(pg_catalog.~~)",
    "AEXPR_ILIKE": "ILIKE resolves ~~* by name: write OPERATOR(pg_catalog.~~*)",
    "AEXPR_SIMILAR": "SIMILAR TO resolves ~ by name",
    "AEXPR_BETWEEN": "BETWEEN resolves <= and >= by name",
    "AEXPR_NOT_BETWEEN": "BETWEEN resolves <= and >= by name",
    "AEXPR_BETWEEN_SYM": "BETWEEN resolves <= and >= by name",
    "AEXPR_NOT_BETWEEN_SYM": "BETWEEN resolves <= and >= by name",
    "AEXPR_DISTINCT": "IS DISTINCT FROM resolves = by name",
    "AEXPR_NOT_DISTINCT": "IS NOT DISTINCT FROM resolves = by name",
    "AEXPR_NULLIF": "NULLIF resolves = by name",
}


# Expressions the grammar spells like calls: unqualified they are syntax, which no role can shadow.
SYNTAX_NOT_FUNCTIONS = {"coalesce", "greatest", "least", "nullif"}


def names(lst):
    return [n["String"]["sval"] for n in lst or [] if "String" in n]


class Checker:
    def __init__(self):
        self.problems = []

    def report(self, where, message):
        self.problems.append(f"{where}: {message}")

    # -- node walking -------------------------------------------------------------------
    def strict(self, tree, where, ctes=frozenset()):
        """Every name in `tree` (a parse tree as JSON) must resolve without the search path."""
        ctes = set(ctes) | self.cte_names(tree)
        for node_type, node in self.nodes(tree):
            if node_type == "FuncCall":
                fn = names(node["funcname"])
                if len(fn) < 2:
                    self.report(where, f"unqualified function {'.'.join(fn)}(): write pg_catalog.{fn[-1]}() or @extschema@.{fn[-1]}()")
                elif fn[-1].lower() in SYNTAX_NOT_FUNCTIONS:
                    # (the parser reads COALESCE(...) and its kind as expressions, not calls:
                    # qualified, they name a function that does not exist, 42883 at run time)
                    self.report(where, f"{'.'.join(fn)}() is no function: {fn[-1].upper()} is syntax, write it unqualified")
            elif node_type == "A_Expr":
                kind = node.get("kind", "AEXPR_OP")
                op = names(node.get("name"))
                if kind in UNQUALIFIABLE:
                    if len(op) < 2:
                        self.report(where, UNQUALIFIABLE[kind])
                elif len(op) < 2:
                    self.report(where, f"unqualified operator {'.'.join(op)}: write OPERATOR(pg_catalog.{op[-1]})")
            elif node_type == "SubLink":
                op = names(node.get("operName"))
                if op and len(op) < 2:
                    self.report(where, f"unqualified operator {op[-1]} of a subquery comparison (IN (SELECT ...) included): write OPERATOR(pg_catalog.{op[-1]}) ANY (SELECT ...)")
            elif node_type == "JoinExpr":
                if node.get("usingClause") or node.get("isNatural"):
                    self.report(where, "JOIN ... USING / NATURAL JOIN compare with an unqualified =: write ON a.x OPERATOR(pg_catalog.=) b.x")
            elif node_type == "SortBy":
                op = names(node.get("useOp"))
                if op and len(op) < 2:
                    self.report(where, f"ORDER BY ... USING {op[-1]} is unqualified")
            elif node_type == "CaseExpr":
                if node.get("arg"):
                    self.report(where, "a simple CASE x WHEN compares with an unqualified =: write CASE WHEN x OPERATOR(pg_catalog.=) ...")
            elif node_type == "RangeVar":
                # (ph_*: a placeholder of a Rust format string, filled with a qualified name)
                relname = node.get("relname", "")
                if not node.get("schemaname") and relname not in ctes and not relname.startswith("ph_"):
                    self.report(where, f"unqualified relation {relname}")
            elif node_type in ("CreateTrigStmt", "CreateEventTrigStmt"):
                fn = names(node.get("funcname"))
                if len(fn) < 2:
                    self.report(where, f"trigger function {'.'.join(fn)} is unqualified")

    @staticmethod
    def nodes(tree):
        stack = [tree]
        while stack:
            item = stack.pop()
            if isinstance(item, dict):
                for key, value in item.items():
                    if isinstance(value, dict) and key[:1].isupper():
                        yield key, value
                    stack.append(value)
            elif isinstance(item, list):
                stack.extend(item)

    def cte_names(self, tree):
        return {node.get("ctename") for t, node in self.nodes(tree) if t == "CommonTableExpr"}

    # -- statements ---------------------------------------------------------------------
    def script(self, text, path, substitute=True):
        if substitute:
            text = text.replace("@extschema@", "extschema")
        # psql meta-commands (an upgrade script's \echo ... \quit guard)
        text = re.sub(r"^\\.*$", "", text, flags=re.M)
        try:
            stmts = json.loads(parser.parse_sql_json(text))["stmts"]
        except parser.ParseError as e:
            self.report(path, f"does not parse: {e}")
            return
        for raw in stmts:
            location = raw.get("stmt_location", 0)
            line = text.count("\n", 0, location) + 1
            where = f"{path}:{line}"
            stmt_type, stmt = next(iter(raw["stmt"].items()))
            if stmt_type == "CreateFunctionStmt":
                self.function(stmt, where)
            elif stmt_type == "DoStmt":
                body = next(names([a["DefElem"]["arg"]])[0] for a in stmt["args"]
                            if a["DefElem"]["defname"] == "as")
                self.plpgsql(body, where, "DO block")
            else:
                self.strict(raw["stmt"], where)

    def function(self, stmt, where):
        fname = ".".join(names(stmt["funcname"]))
        where = f"{where} ({fname})"
        options = {o["DefElem"]["defname"]: o["DefElem"] for o in stmt.get("options", [])}
        language = names([options["language"]["arg"]])[0].lower() if "language" in options else "sql"
        # argument defaults and the return type are bound when the function is created
        for p in stmt.get("parameters", []):
            self.strict(p.get("FunctionParameter", {}).get("defexpr"), where)
        if language in ("c", "internal"):
            return
        pinned = False
        if "set" in options:
            var = options["set"]["arg"]["VariableSetStmt"]
            if var.get("name") == "search_path":
                path = [a["A_Const"].get("sval", {}).get("sval") for a in var.get("args", [])]
                pinned = path == PINNED
                if not pinned:
                    self.report(where, f"search_path pinned to {path}, not pg_catalog, pg_temp")
        if stmt.get("sql_body"):
            # BEGIN ATOMIC: bound at creation, under the script's search path
            self.strict(stmt["sql_body"], where)
            return
        body = names(options["as"]["arg"]["List"]["items"])[0] if "as" in options else ""
        if pinned:
            return
        if language == "sql":
            try:
                tree = json.loads(parser.parse_sql_json(body))
            except parser.ParseError as e:
                self.report(where, f"body does not parse: {e}")
                return
            self.strict(tree, where)
        elif language == "plpgsql":
            self.plpgsql(body, where, "function")
        else:
            self.report(where, f"a {language} function without SET search_path = pg_catalog, pg_temp")

    def plpgsql(self, body, where, what):
        wrapped = f"CREATE FUNCTION sqlcheck_do() RETURNS void LANGUAGE plpgsql AS $sqlcheck${body}$sqlcheck$"
        try:
            tree = parse_plpgsql(wrapped)
        except parser.ParseError as e:
            self.report(where, f"{what} does not parse: {e}")
            return
        for node_type, node in self.nodes(tree):
            if node_type != "PLpgSQL_expr":
                continue
            query, mode = node["query"], node.get("parseMode", 0)
            if mode >= 3:  # an assignment: target := expression
                query = re.sub(r"^[^:=]*:?=", "", query, count=1)
            if mode >= 2:
                query = f"SELECT {query}"
            try:
                expr = json.loads(parser.parse_sql_json(query))
            except parser.ParseError as e:
                self.report(where, f"{what}: cannot parse {query!r}: {e}")
                continue
            self.strict(expr, f"{where} ({what}: {node['query'].strip()[:60]!r})")

    # -- SQL strings in Rust ------------------------------------------------------------
    RUST_STRING = re.compile(r'r(#*)"(.*?)"\1|"((?:[^"\\]|\\.)*)"', re.S)
    SQL_START = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE|WITH|CREATE|ALTER|DROP|COMMENT|GRANT|REVOKE|TRUNCATE|LOCK|DO|CALL)\b", re.S)

    def rust(self, text, path):
        # test code runs in throwaway test databases, never in a user's
        cut = re.search(r"^#\[cfg\([^\n]*\btest\b[^\n]*\)\]\n(#\[[^\n]*\]\n)*(pub )?mod \w+ \{", text, re.M)
        if cut:
            text = text[: cut.start()]
        for m in self.RUST_STRING.finditer(text):
            literal = m.group(2) if m.group(2) is not None else m.group(3)
            if not self.SQL_START.match(literal) or "sqlcheck: skip" in text[max(0, m.start() - 200):m.start()]:
                continue
            line = text.count("\n", 0, m.start()) + 1
            sql = literal.replace("\\\n", " ")
            sql = re.sub(r"\\[nt]", " ", sql)
            # format! placeholders: {name} of a qualified name or operator in our code; a
            # bare identifier for the parser
            sql = sql.replace("{{", "(").replace("}}", ")")
            sql = re.sub(r"\{(\w*)(:[^}]*)?\}", lambda g: f"ph_{g.group(1) or 'x'}", sql)
            sql = sql.replace("ph_schema.", "extschema.")
            try:
                parser.parse_sql_json(sql)
            except parser.ParseError:
                self.fragment(sql, f"{path}:{line}")
                continue
            # (statements as in a script: DO blocks and function bodies included)
            self.script(sql, f"{path}:{line}+", substitute=False)
        # pieces of SQL (conditions, expressions) that the statements above are built of
        for m in self.RUST_STRING.finditer(text):
            literal = m.group(2) if m.group(2) is not None else m.group(3)
            if not self.SQL_START.match(literal) and ("OPERATOR(" in literal or "pg_catalog." in literal):
                self.fragment(literal, f"{path}:{text.count(chr(10), 0, m.start()) + 1}")

    FRAGMENT_OPERATOR = re.compile(r"(?<![<>!=:~])(=|<>|!=|<=|>=|<|>|\|\||~~)(?![=>])|\b(IN \(|LIKE|BETWEEN|DISTINCT FROM|NULLIF)\b")
    # (not an alias with column names: `AS o(id, key)`, `WITH ORDINALITY a(arg, n)`)
    FRAGMENT_CALL = re.compile(r"(?<![.\w])(?<!AS )(?<!ORDINALITY )([a-z_][a-z0-9_]*)\(", re.I)
    KEYWORDS = {"in", "any", "all", "exists", "values", "array", "as", "from", "on", "using", "and",
                "or", "not", "where", "select", "over", "filter", "cast", "coalesce", "greatest",
                "least", "row", "into", "operator", "conflict", "lateral", "join", "by", "set",
                "table", "returning", "with", "k", "u", "q", "s", "x", "c", "n", "bit", "numeric"}

    def fragment(self, sql, where):
        """A piece of SQL that does not parse alone: no bare operator or unqualified call."""
        sql = re.sub(r"'(?:[^']|'')*'", "''", sql)
        sql = re.sub(r"OPERATOR\([^)]*\)", " ", sql)
        sql = re.sub(r"\{[^}]*\}", "ph", sql)
        for m in self.FRAGMENT_OPERATOR.finditer(sql):
            self.report(where, f"bare operator {m.group(0)!r} in an SQL piece: write OPERATOR(pg_catalog.…)")
        for m in self.FRAGMENT_CALL.finditer(sql):
            if m.group(1).lower() not in self.KEYWORDS:
                self.report(where, f"unqualified call {m.group(1)}() in an SQL piece")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--generated", action="append", default=[], help="an install script pgrx generated")
    ap.add_argument("files", nargs="*")
    args = ap.parse_args()
    files = [pathlib.Path(f) for f in args.files] or sorted(ROOT.glob("sql/**/*.sql")) + sorted(ROOT.glob("src/**/*.sql")) + sorted(
        f for f in ROOT.glob("src/**/*.rs") if f.name != "tests.rs")
    checker = Checker()
    checked = 0
    for f in files + [pathlib.Path(g) for g in args.generated]:
        text = f.read_text()
        rel = f.resolve().relative_to(ROOT) if f.resolve().is_relative_to(ROOT) else f
        if f.suffix == ".rs":
            checker.rust(text, rel)
        else:
            checker.script(text, rel)
        checked += 1
    for p in checker.problems:
        print(p)
    print(f"sqlcheck: {checked} files, {len(checker.problems)} problems")
    return 1 if checker.problems else 0


if __name__ == "__main__":
    sys.exit(main())
