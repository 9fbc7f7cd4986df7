"""Scenario for tests/tests/pgwire_catalog.rs: SQLAlchemy (Debian's
python3-sqlalchemy 1.4 over psycopg2) connects to Tessera's PostgreSQL listener,
creates tables with its own DDL, and reflects them back from pg_catalog: table
names, columns with their types, nullability and defaults, primary keys.

Usage: sqlalchemy_reflection.py PORT USER PASSWORD. Prints one line per step and
exits non-zero (with a traceback) at the first failed check.
"""

import sys

import sqlalchemy as sa

port, user, password = sys.argv[1], sys.argv[2], sys.argv[3]
url = f"postgresql+psycopg2://{user}:{password}@127.0.0.1:{port}/postgres"


def check(ok, what):
    if not ok:
        raise AssertionError(what)
    print("ok:", what, flush=True)


engine = sa.create_engine(url, future=True)

# SQLAlchemy's own DDL.
md = sa.MetaData()
sa.Table(
    "authors",
    md,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("name", sa.String(40), nullable=False),
    sa.Column("born", sa.Date),
)
sa.Table(
    "books",
    md,
    sa.Column("isbn", sa.String(13), primary_key=True),
    sa.Column("author_id", sa.Integer, sa.ForeignKey("authors.id"), nullable=False),
    sa.Column("price", sa.Numeric(8, 2)),
    sa.Column("title", sa.Text, server_default="untitled"),
    sa.Column("slug", sa.String(60)),
    sa.UniqueConstraint("slug", name="books_slug_key"),
    sa.Index("books_by_title", "title"),
)
md.create_all(engine)
check(True, "created tables with SQLAlchemy's DDL")

inspector = sa.inspect(engine)
names = sorted(inspector.get_table_names())
check({"authors", "books"} <= set(names), f"table names reflected: {names}")
check(inspector.has_table("books") and not inspector.has_table("nope"), "has_table")

cols = {c["name"]: c for c in inspector.get_columns("books")}
check(list(cols) == ["isbn", "author_id", "price", "title", "slug"], f"columns in order: {list(cols)}")
check(isinstance(cols["isbn"]["type"], sa.String) and cols["isbn"]["type"].length == 13, f"isbn type: {cols['isbn']['type']!r}")
check(isinstance(cols["price"]["type"], sa.Numeric) and (cols["price"]["type"].precision, cols["price"]["type"].scale) == (8, 2), f"price type: {cols['price']['type']!r}")
check(cols["author_id"]["nullable"] is False and cols["price"]["nullable"] is True, "nullability")
check("untitled" in (cols["title"]["default"] or ""), f"server default: {cols['title']['default']!r}")

pk = inspector.get_pk_constraint("books")
check(pk["constrained_columns"] == ["isbn"], f"primary key: {pk}")

fks = inspector.get_foreign_keys("books")
check(
    [(f["constrained_columns"], f["referred_table"], f["referred_columns"]) for f in fks] == [(["author_id"], "authors", ["id"])],
    f"foreign keys: {fks}",
)
indexes = {i["name"]: i for i in inspector.get_indexes("books")}
check(indexes.get("books_by_title", {}).get("column_names") == ["title"], f"indexes: {indexes}")
uniques = inspector.get_unique_constraints("books")
check([(u["name"], u["column_names"]) for u in uniques] == [("books_slug_key", ["slug"])], f"unique constraints: {uniques}")

# The reflected table works for reads and writes.
reflected = sa.MetaData()
books = sa.Table("books", reflected, autoload_with=engine)
authors = reflected.tables["authors"]  # followed through the foreign key
with engine.begin() as conn:
    conn.execute(authors.insert(), [{"id": 1, "name": "Ursula"}])
    conn.execute(books.insert(), [{"isbn": "9780000000001", "author_id": 1, "price": "12.50"}])
with engine.connect() as conn:
    row = conn.execute(sa.select(books.c.isbn, books.c.title).where(books.c.author_id == 1)).one()
check(tuple(row) == ("9780000000001", "untitled"), f"a reflected table reads and writes: {tuple(row)}")

md.drop_all(engine)
check("books" not in sa.inspect(engine).get_table_names(), "dropped")
print("sqlalchemy scenario passed")
