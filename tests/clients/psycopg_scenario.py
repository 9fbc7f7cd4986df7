"""Scenario for tests/tests/pgwire_psycopg.rs: psycopg 3 (over libpq) against
Tessera's PostgreSQL listener.

Usage: psycopg_scenario.py PORT USER PASSWORD. Prints one line per step and
exits non-zero (with a traceback) at the first failed check.
"""

import datetime
import sys

import psycopg
from psycopg import errors

port, user, password = sys.argv[1], sys.argv[2], sys.argv[3]
dsn = dict(host="127.0.0.1", port=port, user=user, password=password, dbname="postgres", connect_timeout=20)


def check(ok, what):
    if not ok:
        raise AssertionError(what)
    print("ok:", what, flush=True)


# psycopg's default: every statement runs in a transaction until commit().
with psycopg.connect(**dsn) as conn:
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE people (id INT PRIMARY KEY, name TEXT NOT NULL, born DATE, score FLOAT)")
    conn.commit()

    # Parameters bound by the server (the extended protocol), several rows at once.
    with conn.cursor() as cur:
        rows = [(1, "Ada", datetime.date(1815, 12, 10), 9.5), (2, "Alan", datetime.date(1912, 6, 23), None), (3, "Grace", None, 8.25)]
        cur.executemany("INSERT INTO people (id, name, born, score) VALUES (%s, %s, %s, %s)", rows)
        cur.execute("SELECT id, name, born, score FROM people WHERE id >= %s ORDER BY id", (1,))
        got = cur.fetchall()
        check(got == rows, f"rows read back with their types inside the transaction: {got}")
    conn.commit()

    # A rollback undoes what the transaction wrote.
    with conn.cursor() as cur:
        cur.execute("DELETE FROM people WHERE id = %s", (1,))
        check(cur.rowcount == 1, "a delete counts its row")
    conn.rollback()
    with conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM people")
        check(cur.fetchone()[0] == 3, "the rolled-back delete left every row")
    conn.commit()

    # Errors arrive as psycopg's exception classes, by SQLSTATE.
    with conn.cursor() as cur:
        try:
            cur.execute("INSERT INTO people (id, name) VALUES (%s, %s)", (2, "again"))
            raise AssertionError("a duplicate key was accepted")
        except errors.UniqueViolation as e:
            check(e.sqlstate == "23505", f"a duplicate key is UniqueViolation: {e}")
    conn.rollback()
    with conn.cursor() as cur:
        try:
            cur.execute("SELECT nope FROM people")
            raise AssertionError("an unknown column was accepted")
        except errors.UndefinedColumn as e:
            check(e.sqlstate == "42703", f"an unknown column is UndefinedColumn: {e}")
    conn.rollback()

    # COPY inside the transaction: write_row() in the text format.
    with conn.cursor() as cur:
        with cur.copy("COPY people (id, name, score) FROM STDIN") as copy:
            for i in range(100, 2100):
                copy.write_row((i, f"person {i}\twith a tab", i / 4 if i % 3 else None))
        cur.execute("SELECT count(*), sum(id) FROM people WHERE id >= 100")
        check(cur.fetchone() == (2000, sum(range(100, 2100))), "COPY rows seen inside the transaction")
    conn.commit()

# Autocommit: each statement commits on its own; a new connection sees the rows.
with psycopg.connect(**dsn, autocommit=True) as conn:
    with conn.cursor() as cur:
        cur.execute("SELECT name FROM people WHERE id = %s", (150,))
        check(cur.fetchone()[0] == "person 150\twith a tab", "a copied row kept its tab")
        with cur.copy("COPY people (id, name) FROM STDIN") as copy:
            for i in range(10000, 15000):
                copy.write_row((i, f"bulk {i}"))
        cur.execute("SELECT count(*) FROM people WHERE id >= 10000")
        check(cur.fetchone()[0] == 5000, "5,000 rows copied outside a transaction")
    # A transaction block on an autocommit connection.
    with conn.transaction():
        conn.execute("UPDATE people SET score = %s WHERE id = %s", (1.0, 2))
    check(conn.execute("SELECT score FROM people WHERE id = 2").fetchone()[0] == 1.0, "conn.transaction() committed")

print("psycopg scenario passed", flush=True)
