//! The system catalogs that clients read to learn a database's shape:
//! `pg_catalog` and `information_schema`, as virtual tables built at query time
//! from this database's own catalog (tables, columns, indexes, constraints,
//! views), so `psql`'s `\dt`, `\di`, `\dv`, `\d name` and `\l`, and the
//! introspection queries of drivers and ORMs (SQLAlchemy's reflection), run
//! unchanged. Nothing here is stored: each query sees the catalog as it is.
//!
//! What Tessera reports where PostgreSQL has more: one schema, `public`; one
//! role, `tessera`, owns every relation (Tessera's users and grants are not
//! relation owners); the database list holds the connected database only;
//! catalogs PostgreSQL keeps for features Tessera does not have (policies,
//! publications, inheritance, extended statistics, triggers, enums, sequences,
//! comments) exist and are empty.
use crate::catalog::{self, IndexDef, IndexMethod, TableDef, ViewDef};
use crate::error::{Result, table_not_found};
use crate::exec::{Exec, RowSet, ident};
use crate::types::SqlType;
use crate::value::Value;
use sqlparser::ast::{ObjectName, ObjectNamePart};

/// The namespaces Tessera reports, with PostgreSQL's own oids for the first two.
pub const PG_CATALOG_OID: i64 = 11;
pub const PUBLIC_OID: i64 = 2200;
pub const INFORMATION_SCHEMA_OID: i64 = 13_000;
/// The one role, as oid and name.
pub const OWNER_OID: i64 = 10;
pub const OWNER: &str = "tessera";
/// `pg_am`: heap tables, btree and hash indexes.
const HEAP_AM: i64 = 2;
const BTREE_AM: i64 = 403;
const HASH_AM: i64 = 405;
/// `pg_tablespace`'s one row, `pg_default`.
const DEFAULT_TABLESPACE: i64 = 1663;
/// Oids of user relations start where PostgreSQL's do.
const FIRST_USER_OID: i64 = 16_384;
/// Each table owns a block of oids: itself, its indexes and its constraints.
const OIDS_PER_TABLE: i64 = 1024;

/// The oid of table `t`.
pub fn table_oid(t: &TableDef) -> i64 {
    FIRST_USER_OID + i64::from(t.id) * OIDS_PER_TABLE
}

/// The oid of the index backing `t`'s primary key.
fn pkey_oid(t: &TableDef) -> i64 {
    table_oid(t) + OIDS_PER_TABLE - 1
}

fn index_oid(t: &TableDef, i: &IndexDef) -> i64 {
    table_oid(t) + 1 + i64::from(i.id) % 500
}

fn check_oid(t: &TableDef, n: usize) -> i64 {
    table_oid(t) + 512 + (n as i64) % 200
}

fn foreign_key_oid(t: &TableDef, n: usize) -> i64 {
    table_oid(t) + 768 + (n as i64) % 200
}

/// Views have no id: an oid from their name (FNV-1a), above the tables' range.
fn view_oid(name: &str) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    2_000_000_000 + (h % 1_000_000_000) as i64
}

/// A column type as PostgreSQL describes it: type oid, type modifier, the
/// name `format_type` gives, and `information_schema`'s data type.
struct PgType {
    oid: i64,
    typmod: i64,
}

fn pg_type(ty: &SqlType) -> PgType {
    let (oid, typmod) = match ty {
        SqlType::TinyInt | SqlType::SmallInt => (21, -1),
        SqlType::Int => (23, -1),
        SqlType::BigInt => (20, -1),
        SqlType::Real => (700, -1),
        SqlType::Double => (701, -1),
        SqlType::Decimal(None) => (1700, -1),
        SqlType::Decimal(Some((p, s))) => (1700, ((i64::from(*p) << 16) | i64::from(*s)) + 4),
        SqlType::Char(n) => (1042, n.map_or(-1, |n| i64::from(n) + 4)),
        SqlType::Varchar(n) => (1043, n.map_or(-1, |n| i64::from(n) + 4)),
        SqlType::Text => (25, -1),
        SqlType::Date => (1082, -1),
        SqlType::Time => (1083, -1),
        SqlType::Timestamp => (1114, -1),
        SqlType::Boolean => (16, -1),
        SqlType::Blob => (17, -1),
        SqlType::Json => (114, -1),
        SqlType::Uuid => (2950, -1),
    };
    PgType { oid, typmod }
}

/// Built-in types: oid, `typname`, `format_type` name, length, array type,
/// category.
const TYPES: &[(i64, &str, &str, i64, i64, &str)] = &[
    (16, "bool", "boolean", 1, 1000, "B"),
    (17, "bytea", "bytea", -1, 1001, "U"),
    (18, "char", "\"char\"", 1, 1002, "Z"),
    (19, "name", "name", 64, 1003, "S"),
    (20, "int8", "bigint", 8, 1016, "N"),
    (21, "int2", "smallint", 2, 1005, "N"),
    (22, "int2vector", "int2vector", -1, 1006, "A"),
    (23, "int4", "integer", 4, 1007, "N"),
    (25, "text", "text", -1, 1009, "S"),
    (26, "oid", "oid", 4, 1028, "N"),
    (114, "json", "json", -1, 199, "U"),
    (700, "float4", "real", 4, 1021, "N"),
    (701, "float8", "double precision", 8, 1022, "N"),
    (1042, "bpchar", "character", -1, 1014, "S"),
    (1043, "varchar", "character varying", -1, 1015, "S"),
    (1082, "date", "date", 4, 1182, "D"),
    (1083, "time", "time without time zone", 8, 1183, "D"),
    (1114, "timestamp", "timestamp without time zone", 8, 1115, "D"),
    (1184, "timestamptz", "timestamp with time zone", 8, 1185, "D"),
    (1700, "numeric", "numeric", -1, 1231, "N"),
    (2205, "regclass", "regclass", 4, 2210, "N"),
    (2950, "uuid", "uuid", 16, 2951, "U"),
    (3802, "jsonb", "jsonb", -1, 3807, "U"),
];

/// `format_type(oid, typmod)`: `integer`, `character varying(20)`, `numeric(10,2)`.
pub fn format_type(oid: i64, typmod: i64) -> Option<String> {
    let (_, _, name, ..) = TYPES.iter().find(|t| t.0 == oid)?;
    Some(match (oid, typmod) {
        (1042 | 1043, m) if m >= 4 => format!("{name}({})", m - 4),
        (1700, m) if m >= 4 => format!("numeric({},{})", (m - 4) >> 16, (m - 4) & 0xffff),
        _ => name.to_string(),
    })
}

/// The type name `information_schema.columns.data_type` gives.
fn data_type_name(oid: i64) -> String {
    match oid {
        1042 => "character".into(),
        1043 => "character varying".into(),
        other => format_type(other, -1).unwrap_or_else(|| "USER-DEFINED".into()),
    }
}

fn text(s: impl Into<String>) -> Value {
    Value::Text(s.into())
}

fn int(i: i64) -> Value {
    Value::Int(i)
}

fn boolean(b: bool) -> Value {
    Value::Bool(b)
}

fn cols(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

/// A constraint of a table, as `pg_constraint` lists it.
struct Constraint {
    oid: i64,
    name: String,
    kind: char,
    columns: Vec<String>,
    /// The index behind a primary key or unique constraint.
    index: i64,
    /// Foreign keys: referenced table and columns.
    references: Option<(String, Vec<String>)>,
    /// Checks: the expression.
    check: Option<String>,
}

/// Everything the catalogs describe, read once per catalog query.
struct Snapshot {
    database: String,
    tables: Vec<TableDef>,
    views: Vec<ViewDef>,
}

impl Snapshot {
    fn table(&self, name: &str) -> Option<&TableDef> {
        self.tables.iter().find(|t| t.name == name)
    }

    fn attnum(t: &TableDef, column: &str) -> i64 {
        t.col(column).map_or(0, |i| i as i64 + 1)
    }

    fn constraints(&self, t: &TableDef) -> Vec<Constraint> {
        let mut out = Vec::new();
        if !t.primary_key.is_empty() {
            let name = if t.pk_name.is_empty() { format!("{}_pkey", t.name) } else { t.pk_name.clone() };
            let oid = pkey_oid(t);
            out.push(Constraint { oid, name, kind: 'p', columns: t.primary_key.clone(), index: oid, references: None, check: None });
        }
        for i in t.indexes.iter().filter(|i| i.constraint) {
            let oid = index_oid(t, i);
            out.push(Constraint {
                oid,
                name: i.name.clone(),
                kind: 'u',
                columns: i.columns.clone(),
                index: oid,
                references: None,
                check: None,
            });
        }
        for (n, c) in t.checks.iter().enumerate() {
            out.push(Constraint {
                oid: check_oid(t, n),
                name: c.name.clone(),
                kind: 'c',
                columns: Vec::new(),
                index: 0,
                references: None,
                check: Some(c.expr.clone()),
            });
        }
        for (n, f) in t.foreign_keys.iter().enumerate() {
            out.push(Constraint {
                oid: foreign_key_oid(t, n),
                name: f.name.clone(),
                kind: 'f',
                columns: f.columns.clone(),
                index: 0,
                references: Some((f.ref_table.clone(), f.ref_columns.clone())),
                check: None,
            });
        }
        out
    }

    /// Indexes of `t` as (oid, name, columns, unique, primary, method).
    fn indexes(t: &TableDef) -> Vec<(i64, String, Vec<String>, bool, bool, IndexMethod)> {
        let mut out = Vec::new();
        if !t.primary_key.is_empty() {
            let name = if t.pk_name.is_empty() { format!("{}_pkey", t.name) } else { t.pk_name.clone() };
            out.push((pkey_oid(t), name, t.primary_key.clone(), true, true, IndexMethod::BTree));
        }
        for i in &t.indexes {
            out.push((index_oid(t, i), i.name.clone(), i.columns.clone(), i.unique, false, i.method));
        }
        out
    }

    fn constraint_def(&self, c: &Constraint) -> String {
        let list = |cols: &[String]| cols.join(", ");
        match c.kind {
            'p' => format!("PRIMARY KEY ({})", list(&c.columns)),
            'u' => format!("UNIQUE ({})", list(&c.columns)),
            'c' => format!("CHECK ({})", c.check.clone().unwrap_or_default()),
            _ => {
                let (table, columns) = c.references.clone().unwrap_or_default();
                format!("FOREIGN KEY ({}) REFERENCES {table}({})", list(&c.columns), list(&columns))
            }
        }
    }

    fn rows(&self, name: &str) -> Option<RowSet> {
        Some(match name {
            "pg_namespace" => RowSet {
                cols: cols(&["oid", "nspname", "nspowner", "nspacl"]),
                rows: [(PG_CATALOG_OID, "pg_catalog"), (PUBLIC_OID, "public"), (INFORMATION_SCHEMA_OID, "information_schema")]
                    .into_iter()
                    .map(|(oid, n)| vec![int(oid), text(n), int(OWNER_OID), Value::Null])
                    .collect(),
            },
            "pg_class" => self.pg_class(),
            "pg_attribute" => self.pg_attribute(),
            "pg_attrdef" => {
                let mut rows = Vec::new();
                for t in &self.tables {
                    for (i, c) in t.columns.iter().enumerate() {
                        let default = match (&c.default, c.serial) {
                            (Some(d), _) => d.clone(),
                            (None, true) => format!("nextval('{}_{}_seq'::regclass)", t.name, c.name),
                            (None, false) => continue,
                        };
                        rows.push(vec![int(table_oid(t) + 600 + i as i64), int(table_oid(t)), int(i as i64 + 1), text(default)]);
                    }
                }
                RowSet { cols: cols(&["oid", "adrelid", "adnum", "adbin"]), rows }
            }
            "pg_type" => RowSet {
                cols: cols(&[
                    "oid",
                    "typname",
                    "typnamespace",
                    "typowner",
                    "typlen",
                    "typbyval",
                    "typtype",
                    "typcategory",
                    "typispreferred",
                    "typisdefined",
                    "typdelim",
                    "typrelid",
                    "typelem",
                    "typarray",
                    "typnotnull",
                    "typbasetype",
                    "typtypmod",
                    "typndims",
                    "typcollation",
                    "typdefault",
                ]),
                rows: TYPES
                    .iter()
                    .map(|(oid, name, _, len, array, category)| {
                        let collation = if *category == "S" { 100 } else { 0 };
                        vec![
                            int(*oid),
                            text(*name),
                            int(PG_CATALOG_OID),
                            int(OWNER_OID),
                            int(*len),
                            boolean((1..=8).contains(len)),
                            text("b"),
                            text(*category),
                            boolean(false),
                            boolean(true),
                            text(","),
                            int(0),
                            int(0),
                            int(*array),
                            boolean(false),
                            int(0),
                            int(-1),
                            int(0),
                            int(collation),
                            Value::Null,
                        ]
                    })
                    .collect(),
            },
            "pg_index" => {
                let mut rows = Vec::new();
                for t in &self.tables {
                    for (oid, _, columns, unique, primary, _) in Self::indexes(t) {
                        let keys: Vec<String> = columns.iter().map(|c| Self::attnum(t, c).to_string()).collect();
                        rows.push(vec![
                            int(oid),
                            int(table_oid(t)),
                            int(columns.len() as i64),
                            int(columns.len() as i64),
                            boolean(unique),
                            boolean(primary),
                            boolean(false),
                            boolean(true),
                            boolean(false),
                            boolean(true),
                            boolean(true),
                            boolean(true),
                            boolean(false),
                            text(keys.join(" ")),
                            text(vec!["0"; columns.len()].join(" ")),
                            Value::Null,
                            Value::Null,
                        ]);
                    }
                }
                RowSet {
                    cols: cols(&[
                        "indexrelid",
                        "indrelid",
                        "indnatts",
                        "indnkeyatts",
                        "indisunique",
                        "indisprimary",
                        "indisexclusion",
                        "indimmediate",
                        "indisclustered",
                        "indisvalid",
                        "indisready",
                        "indislive",
                        "indisreplident",
                        "indkey",
                        "indoption",
                        "indexprs",
                        "indpred",
                    ]),
                    rows,
                }
            }
            "pg_constraint" => {
                let mut rows = Vec::new();
                for t in &self.tables {
                    for c in self.constraints(t) {
                        // Arrays travel as JSON arrays (drivers decode them as lists).
                        let keys = |t: &TableDef, cols: &[String]| {
                            Value::Json(format!("[{}]", cols.iter().map(|c| Self::attnum(t, c).to_string()).collect::<Vec<_>>().join(",")))
                        };
                        let (foreign, foreign_keys) = match &c.references {
                            Some((table, columns)) => match self.table(table) {
                                Some(r) => (table_oid(r), keys(r, columns)),
                                None => (0, Value::Null),
                            },
                            None => (0, Value::Null),
                        };
                        let conkey = if c.columns.is_empty() { Value::Null } else { keys(t, &c.columns) };
                        rows.push(vec![
                            int(c.oid),
                            text(c.name.clone()),
                            int(PUBLIC_OID),
                            text(c.kind.to_string()),
                            boolean(false),
                            boolean(false),
                            boolean(true),
                            int(table_oid(t)),
                            int(0),
                            int(c.index),
                            int(0),
                            int(foreign),
                            text("a"),
                            text("a"),
                            text("s"),
                            boolean(true),
                            int(0),
                            boolean(false),
                            conkey,
                            foreign_keys,
                            c.check.clone().map_or(Value::Null, Value::Text),
                        ]);
                    }
                }
                RowSet {
                    cols: cols(&[
                        "oid",
                        "conname",
                        "connamespace",
                        "contype",
                        "condeferrable",
                        "condeferred",
                        "convalidated",
                        "conrelid",
                        "contypid",
                        "conindid",
                        "conparentid",
                        "confrelid",
                        "confupdtype",
                        "confdeltype",
                        "confmatchtype",
                        "conislocal",
                        "coninhcount",
                        "connoinherit",
                        "conkey",
                        "confkey",
                        "conbin",
                    ]),
                    rows,
                }
            }
            "pg_am" => RowSet {
                cols: cols(&["oid", "amname", "amtype"]),
                rows: [(HEAP_AM, "heap", "t"), (BTREE_AM, "btree", "i"), (HASH_AM, "hash", "i")]
                    .into_iter()
                    .map(|(oid, n, t)| vec![int(oid), text(n), text(t)])
                    .collect(),
            },
            "pg_database" => RowSet {
                cols: cols(&[
                    "oid",
                    "datname",
                    "datdba",
                    "encoding",
                    "datlocprovider",
                    "datistemplate",
                    "datallowconn",
                    "datconnlimit",
                    "datcollate",
                    "datctype",
                    "daticulocale",
                    "datacl",
                    "dattablespace",
                ]),
                rows: vec![vec![
                    int(FIRST_USER_OID - 1),
                    text(self.database.clone()),
                    int(OWNER_OID),
                    int(6),
                    text("c"),
                    boolean(false),
                    boolean(true),
                    int(-1),
                    text("C"),
                    text("C"),
                    Value::Null,
                    Value::Null,
                    int(DEFAULT_TABLESPACE),
                ]],
            },
            "pg_roles" | "pg_user" | "pg_authid" => RowSet {
                cols: cols(&[
                    "oid",
                    "rolname",
                    "usename",
                    "rolsuper",
                    "rolinherit",
                    "rolcreaterole",
                    "rolcreatedb",
                    "rolcanlogin",
                    "rolreplication",
                    "rolconnlimit",
                    "rolvaliduntil",
                    "rolbypassrls",
                ]),
                rows: vec![vec![
                    int(OWNER_OID),
                    text(OWNER),
                    text(OWNER),
                    boolean(true),
                    boolean(true),
                    boolean(true),
                    boolean(true),
                    boolean(true),
                    boolean(false),
                    int(-1),
                    Value::Null,
                    boolean(false),
                ]],
            },
            "pg_tablespace" => {
                RowSet { cols: cols(&["oid", "spcname", "spcowner"]), rows: vec![vec![int(1663), text("pg_default"), int(OWNER_OID)]] }
            }
            "pg_settings" => RowSet { cols: cols(&["name", "setting", "unit", "category", "short_desc"]), rows: Vec::new() },
            // Catalogs of features Tessera does not have: the columns their
            // readers name, no rows.
            "pg_auth_members" => empty(&["oid", "roleid", "member", "grantor", "admin_option"]),
            "pg_proc" => empty(&[
                "oid",
                "proname",
                "pronamespace",
                "proowner",
                "prolang",
                "prokind",
                "prorettype",
                "proargtypes",
                "proretset",
                "prosrc",
            ]),
            "pg_description" => empty(&["objoid", "classoid", "objsubid", "description"]),
            "pg_collation" => empty(&["oid", "collname", "collnamespace", "collprovider", "collcollate", "collctype"]),
            "pg_enum" => empty(&["oid", "enumtypid", "enumsortorder", "enumlabel"]),
            "pg_inherits" => empty(&["inhrelid", "inhparent", "inhseqno", "inhdetachpending"]),
            "pg_policy" => empty(&["oid", "polname", "polrelid", "polcmd", "polpermissive", "polroles", "polqual", "polwithcheck"]),
            "pg_statistic_ext" => empty(&["oid", "stxrelid", "stxname", "stxnamespace", "stxowner", "stxstattarget", "stxkeys", "stxkind"]),
            "pg_publication" => {
                empty(&["oid", "pubname", "pubowner", "puballtables", "pubinsert", "pubupdate", "pubdelete", "pubtruncate", "pubviaroot"])
            }
            "pg_publication_rel" => empty(&["oid", "prpubid", "prrelid", "prqual", "prattrs"]),
            "pg_publication_namespace" => empty(&["oid", "pnpubid", "pnnspid"]),
            "pg_trigger" => empty(&["oid", "tgrelid", "tgparentid", "tgname", "tgfoid", "tgtype", "tgenabled", "tgisinternal"]),
            "pg_rewrite" => empty(&["oid", "rulename", "ev_class", "ev_type", "ev_enabled", "is_instead"]),
            "pg_sequence" => empty(&["seqrelid", "seqtypid", "seqstart", "seqincrement", "seqmax", "seqmin", "seqcache", "seqcycle"]),
            "pg_depend" => empty(&["classid", "objid", "objsubid", "refclassid", "refobjid", "refobjsubid", "deptype"]),
            "pg_extension" => empty(&["oid", "extname", "extowner", "extnamespace", "extrelocatable", "extversion"]),
            "pg_foreign_table" => empty(&["ftrelid", "ftserver", "ftoptions"]),
            "pg_partitioned_table" => empty(&["partrelid", "partstrat", "partnatts", "partdefid", "partattrs"]),
            "pg_matviews" => empty(&["schemaname", "matviewname", "matviewowner", "definition"]),
            "pg_tables" => RowSet {
                cols: cols(&[
                    "schemaname",
                    "tablename",
                    "tableowner",
                    "tablespace",
                    "hasindexes",
                    "hasrules",
                    "hastriggers",
                    "rowsecurity",
                ]),
                rows: self
                    .tables
                    .iter()
                    .map(|t| {
                        let indexed = !t.primary_key.is_empty() || !t.indexes.is_empty();
                        vec![
                            text("public"),
                            text(t.name.clone()),
                            text(OWNER),
                            Value::Null,
                            boolean(indexed),
                            boolean(false),
                            boolean(false),
                            boolean(false),
                        ]
                    })
                    .collect(),
            },
            "pg_views" => RowSet {
                cols: cols(&["schemaname", "viewname", "viewowner", "definition"]),
                rows: self.views.iter().map(|v| vec![text("public"), text(v.name.clone()), text(OWNER), text(v.query.clone())]).collect(),
            },
            _ => return None,
        })
    }

    fn pg_class(&self) -> RowSet {
        let mut rows = Vec::new();
        let row = |oid: i64, name: &str, kind: &str, am: i64, natts: i64, checks: i64, has_index: bool| {
            vec![
                int(oid),
                text(name),
                int(PUBLIC_OID),
                int(0),
                int(0),
                int(OWNER_OID),
                int(am),
                int(oid),
                int(0),
                int(0),
                Value::Float(-1.0),
                int(0),
                int(0),
                boolean(has_index),
                boolean(false),
                text("p"),
                text(kind),
                int(natts),
                int(checks),
                boolean(false),
                boolean(false),
                boolean(false),
                boolean(false),
                boolean(false),
                boolean(true),
                text("d"),
                boolean(false),
                int(0),
                Value::Null,
                Value::Null,
                Value::Null,
            ]
        };
        for t in &self.tables {
            let has_index = !t.primary_key.is_empty() || !t.indexes.is_empty();
            rows.push(row(table_oid(t), &t.name, "r", HEAP_AM, t.columns.len() as i64, t.checks.len() as i64, has_index));
            for (oid, name, columns, _, _, method) in Self::indexes(t) {
                let am = if method == IndexMethod::Hash { HASH_AM } else { BTREE_AM };
                rows.push(row(oid, &name, "i", am, columns.len() as i64, 0, false));
            }
        }
        for v in &self.views {
            rows.push(row(view_oid(&v.name), &v.name, "v", 0, v.columns.len() as i64, 0, false));
        }
        RowSet {
            cols: cols(&[
                "oid",
                "relname",
                "relnamespace",
                "reltype",
                "reloftype",
                "relowner",
                "relam",
                "relfilenode",
                "reltablespace",
                "relpages",
                "reltuples",
                "relallvisible",
                "reltoastrelid",
                "relhasindex",
                "relisshared",
                "relpersistence",
                "relkind",
                "relnatts",
                "relchecks",
                "relhasrules",
                "relhastriggers",
                "relhassubclass",
                "relrowsecurity",
                "relforcerowsecurity",
                "relispopulated",
                "relreplident",
                "relispartition",
                "relrewrite",
                "relacl",
                "reloptions",
                "relpartbound",
            ]),
            rows,
        }
    }

    fn pg_attribute(&self) -> RowSet {
        let mut rows = Vec::new();
        let row = |rel: i64, name: &str, ty: &PgType, num: i64, not_null: bool, has_default: bool| {
            let collation = if matches!(ty.oid, 25 | 1042 | 1043) { 100 } else { 0 };
            vec![
                int(rel),
                text(name),
                int(ty.oid),
                int(num),
                int(ty.typmod),
                boolean(not_null),
                boolean(has_default),
                boolean(false),
                text(""),
                text(""),
                boolean(false),
                boolean(true),
                int(0),
                int(collation),
                int(0),
                Value::Null,
                Value::Null,
                text(if matches!(ty.oid, 25 | 1042 | 1043 | 17 | 114 | 1700) { "x" } else { "p" }),
                text(""),
                int(-1),
            ]
        };
        for t in &self.tables {
            for (i, c) in t.columns.iter().enumerate() {
                let not_null = !c.nullable || t.primary_key.contains(&c.name);
                rows.push(row(table_oid(t), &c.name, &pg_type(&c.ty), i as i64 + 1, not_null, c.default.is_some() || c.serial));
            }
        }
        for v in &self.views {
            for (i, c) in v.columns.iter().enumerate() {
                rows.push(row(view_oid(&v.name), c, &PgType { oid: 25, typmod: -1 }, i as i64 + 1, false, false));
            }
        }
        RowSet {
            cols: cols(&[
                "attrelid",
                "attname",
                "atttypid",
                "attnum",
                "atttypmod",
                "attnotnull",
                "atthasdef",
                "atthasmissing",
                "attidentity",
                "attgenerated",
                "attisdropped",
                "attislocal",
                "attinhcount",
                "attcollation",
                "attndims",
                "attacl",
                "attoptions",
                "attstorage",
                "attcompression",
                "attstattarget",
            ]),
            rows,
        }
    }

    fn information_schema(&self, name: &str) -> Option<RowSet> {
        let db = || text(self.database.clone());
        Some(match name {
            "schemata" => RowSet {
                cols: cols(&["catalog_name", "schema_name", "schema_owner"]),
                rows: ["pg_catalog", "public", "information_schema"].into_iter().map(|s| vec![db(), text(s), text(OWNER)]).collect(),
            },
            "tables" => RowSet {
                cols: cols(&["table_catalog", "table_schema", "table_name", "table_type", "is_insertable_into", "is_typed"]),
                rows: self
                    .tables
                    .iter()
                    .map(|t| (t.name.clone(), "BASE TABLE", "YES"))
                    .chain(self.views.iter().map(|v| (v.name.clone(), "VIEW", "NO")))
                    .map(|(n, kind, insertable)| vec![db(), text("public"), text(n), text(kind), text(insertable), text("NO")])
                    .collect(),
            },
            "views" => RowSet {
                cols: cols(&["table_catalog", "table_schema", "table_name", "view_definition", "check_option", "is_updatable"]),
                rows: self
                    .views
                    .iter()
                    .map(|v| vec![db(), text("public"), text(v.name.clone()), text(v.query.clone()), text("NONE"), text("NO")])
                    .collect(),
            },
            "columns" => {
                let mut rows = Vec::new();
                for t in &self.tables {
                    for (i, c) in t.columns.iter().enumerate() {
                        let ty = pg_type(&c.ty);
                        let nullable = c.nullable && !t.primary_key.contains(&c.name);
                        let default = match (&c.default, c.serial) {
                            (Some(d), _) => text(d.clone()),
                            (None, true) => text(format!("nextval('{}_{}_seq'::regclass)", t.name, c.name)),
                            (None, false) => Value::Null,
                        };
                        let length = match &c.ty {
                            SqlType::Char(Some(n)) | SqlType::Varchar(Some(n)) => int(i64::from(*n)),
                            _ => Value::Null,
                        };
                        let (precision, scale) = match &c.ty {
                            SqlType::TinyInt | SqlType::SmallInt => (int(16), int(0)),
                            SqlType::Int => (int(32), int(0)),
                            SqlType::BigInt => (int(64), int(0)),
                            SqlType::Real => (int(24), Value::Null),
                            SqlType::Double => (int(53), Value::Null),
                            SqlType::Decimal(Some((p, s))) => (int(i64::from(*p)), int(i64::from(*s))),
                            _ => (Value::Null, Value::Null),
                        };
                        let udt = TYPES.iter().find(|x| x.0 == ty.oid).map_or("text", |x| x.1);
                        rows.push(vec![
                            db(),
                            text("public"),
                            text(t.name.clone()),
                            text(c.name.clone()),
                            int(i as i64 + 1),
                            default,
                            text(if nullable { "YES" } else { "NO" }),
                            text(data_type_name(ty.oid)),
                            length,
                            precision,
                            scale,
                            db(),
                            text("pg_catalog"),
                            text(udt),
                            text("NO"),
                            text("NEVER"),
                            text("YES"),
                        ]);
                    }
                }
                RowSet {
                    cols: cols(&[
                        "table_catalog",
                        "table_schema",
                        "table_name",
                        "column_name",
                        "ordinal_position",
                        "column_default",
                        "is_nullable",
                        "data_type",
                        "character_maximum_length",
                        "numeric_precision",
                        "numeric_scale",
                        "udt_catalog",
                        "udt_schema",
                        "udt_name",
                        "is_identity",
                        "is_generated",
                        "is_updatable",
                    ]),
                    rows,
                }
            }
            "table_constraints" => {
                let mut rows = Vec::new();
                for t in &self.tables {
                    for c in self.constraints(t) {
                        let kind = match c.kind {
                            'p' => "PRIMARY KEY",
                            'u' => "UNIQUE",
                            'c' => "CHECK",
                            _ => "FOREIGN KEY",
                        };
                        rows.push(vec![
                            db(),
                            text("public"),
                            text(c.name.clone()),
                            db(),
                            text("public"),
                            text(t.name.clone()),
                            text(kind),
                            text("NO"),
                            text("NO"),
                            text("YES"),
                        ]);
                    }
                }
                RowSet {
                    cols: cols(&[
                        "constraint_catalog",
                        "constraint_schema",
                        "constraint_name",
                        "table_catalog",
                        "table_schema",
                        "table_name",
                        "constraint_type",
                        "is_deferrable",
                        "initially_deferred",
                        "enforced",
                    ]),
                    rows,
                }
            }
            "key_column_usage" => {
                let mut rows = Vec::new();
                for t in &self.tables {
                    for c in self.constraints(t).into_iter().filter(|c| c.kind != 'c') {
                        for (i, column) in c.columns.iter().enumerate() {
                            let in_unique = if c.references.is_some() { int(i as i64 + 1) } else { Value::Null };
                            rows.push(vec![
                                db(),
                                text("public"),
                                text(c.name.clone()),
                                db(),
                                text("public"),
                                text(t.name.clone()),
                                text(column.clone()),
                                int(i as i64 + 1),
                                in_unique,
                            ]);
                        }
                    }
                }
                RowSet {
                    cols: cols(&[
                        "constraint_catalog",
                        "constraint_schema",
                        "constraint_name",
                        "table_catalog",
                        "table_schema",
                        "table_name",
                        "column_name",
                        "ordinal_position",
                        "position_in_unique_constraint",
                    ]),
                    rows,
                }
            }
            _ => return None,
        })
    }

    /// A relation's oid by name (tables, their indexes, views).
    fn relation_oid(&self, name: &str) -> Option<i64> {
        for t in &self.tables {
            if t.name == name {
                return Some(table_oid(t));
            }
            if let Some((oid, ..)) = Self::indexes(t).into_iter().find(|i| i.1 == name) {
                return Some(oid);
            }
        }
        self.views.iter().find(|v| v.name == name).map(|v| view_oid(&v.name))
    }
}

fn empty(names: &[&str]) -> RowSet {
    RowSet { cols: cols(names), rows: Vec::new() }
}

/// Names that resolve to `pg_catalog` unqualified too (PostgreSQL searches it
/// first).
fn is_pg_catalog_name(name: &str) -> bool {
    name.starts_with("pg_")
}

impl Exec<'_> {
    fn system_snapshot(&self) -> Result<Snapshot> {
        let tables = catalog::all_tables(&self.kv)?;
        let mut views = Vec::new();
        for (_, v) in self.kv.scan_prefix(b"c/v/")? {
            if let Ok(view) = serde_json::from_slice::<ViewDef>(&v) {
                views.push(view);
            }
        }
        Ok(Snapshot { database: self.ctx.database.clone(), tables, views })
    }

    /// The rows of system catalog `name` (`pg_catalog.pg_class`,
    /// `information_schema.columns`, an unqualified `pg_class`), if it names one.
    pub(crate) fn system_table(&self, name: &ObjectName) -> Result<Option<RowSet>> {
        let parts: Vec<String> = name
            .0
            .iter()
            .map(|p| match p {
                ObjectNamePart::Identifier(i) => ident(i),
                other => other.to_string().to_lowercase(),
            })
            .collect();
        let (schema, table) = match parts.as_slice() {
            [table] => (None, table.as_str()),
            [.., schema, table] => (Some(schema.as_str()), table.as_str()),
            [] => return Ok(None),
        };
        match schema {
            Some("information_schema") => {
                let rows = self.system_snapshot()?.information_schema(table);
                match rows {
                    Some(rows) => Ok(Some(rows)),
                    None => Err(table_not_found(format!("relation \"information_schema.{table}\" does not exist"))),
                }
            }
            Some("pg_catalog") => match self.system_snapshot()?.rows(table) {
                Some(rows) => Ok(Some(rows)),
                None => Err(table_not_found(format!("relation \"pg_catalog.{table}\" is not available in Tessera"))),
            },
            None if is_pg_catalog_name(table) && catalog::get_table(&self.kv, table)?.is_none() => Ok(self.system_snapshot()?.rows(table)),
            _ => Ok(None),
        }
    }

    /// Catalog functions of PostgreSQL that clients call in their
    /// introspection queries; `None` when `name` is not one of them.
    pub(crate) fn system_function(&self, name: &str, args: &[Value]) -> Result<Option<Value>> {
        let oid = |i: usize| match args.get(i) {
            Some(Value::Int(n)) => Some(*n),
            Some(Value::Text(s)) => s.trim().parse().ok(),
            _ => None,
        };
        Ok(Some(match name {
            "pg_table_is_visible" | "pg_type_is_visible" | "pg_function_is_visible" => boolean(true),
            "pg_relation_is_publishable" => boolean(false),
            "pg_get_userbyid" => text(OWNER),
            "pg_encoding_to_char" => text(if oid(0) == Some(6) { "UTF8" } else { "" }),
            // No build number: a write may store it, and every replica (of
            // whichever build, in a rolling update) must store the same.
            "version" => text("PostgreSQL 16.0 (Tessera) on a Tessera cluster"),
            "current_schema" => text("public"),
            "current_schemas" => text("{public}"),
            "current_database" | "current_catalog" => text(self.ctx.database.clone()),
            "format_type" => match oid(0) {
                Some(t) => format_type(t, oid(1).unwrap_or(-1)).map_or(Value::Null, Value::Text),
                None => Value::Null,
            },
            // Tessera keeps defaults, checks and definitions as SQL text: the
            // stored text is the expression.
            "pg_get_expr" => args.first().cloned().unwrap_or(Value::Null),
            "pg_get_serial_sequence" | "obj_description" | "col_description" | "shobj_description" => Value::Null,
            "pg_get_indexdef" | "pg_get_constraintdef" | "pg_get_viewdef" => {
                let Some(target) = oid(0) else { return Ok(Some(Value::Null)) };
                let snapshot = self.system_snapshot()?;
                let found = match name {
                    "pg_get_indexdef" => snapshot.tables.iter().find_map(|t| {
                        Snapshot::indexes(t).into_iter().find(|i| i.0 == target).map(|(_, index, columns, unique, _, method)| {
                            let method = if method == IndexMethod::Hash { "hash" } else { "btree" };
                            let unique = if unique { "UNIQUE " } else { "" };
                            format!("CREATE {unique}INDEX {index} ON public.{} USING {method} ({})", t.name, columns.join(", "))
                        })
                    }),
                    "pg_get_constraintdef" => snapshot
                        .tables
                        .iter()
                        .find_map(|t| snapshot.constraints(t).into_iter().find(|c| c.oid == target).map(|c| snapshot.constraint_def(&c))),
                    _ => snapshot.views.iter().find(|v| view_oid(&v.name) == target).map(|v| v.query.clone()),
                };
                found.map_or(Value::Null, Value::Text)
            }
            "has_table_privilege" | "has_schema_privilege" | "has_database_privilege" | "has_column_privilege" => boolean(true),
            "array_to_string" => match args.first() {
                None | Some(Value::Null) => Value::Null,
                Some(array) => {
                    let separator = args.get(1).map(Value::to_text).unwrap_or_default();
                    let null_as = args.get(2).filter(|v| !v.is_null()).map(Value::to_text);
                    let parts: Vec<String> = array_elements(array)
                        .iter()
                        .filter_map(|e| if e.is_null() { null_as.clone() } else { Some(e.to_text()) })
                        .collect();
                    text(parts.join(&separator))
                }
            },
            "array_upper" | "array_length" | "cardinality" => match args.first() {
                None | Some(Value::Null) => Value::Null,
                Some(array) => match array_elements(array).len() {
                    0 if name != "cardinality" => Value::Null,
                    n => int(n as i64),
                },
            },
            // Sizes are not tracked per relation (a group's key space holds
            // every table of its database): NULL, which psql shows as blank.
            "pg_table_size" | "pg_relation_size" | "pg_total_relation_size" | "pg_indexes_size" | "pg_database_size" => Value::Null,
            "pg_size_pretty" => match args.first() {
                Some(Value::Int(n)) => text(size_pretty(*n)),
                _ => Value::Null,
            },
            "pg_get_function_result" | "pg_get_function_arguments" | "pg_get_statisticsobjdef_columns" => Value::Null,
            _ => return Ok(None),
        }))
    }

    /// Casts to PostgreSQL's object identifier types: `'t'::regclass` is the
    /// oid of relation `t`; `oid`, `regtype`, `regnamespace` and `regproc` keep
    /// a number as it is; `::text` of a `regclass` number is not tracked (the
    /// number's text). `None` when `type_name` is none of them.
    pub(crate) fn system_cast(&self, v: &Value, type_name: &str) -> Result<Option<Value>> {
        let target = type_name.rsplit('.').next().unwrap_or(type_name).trim_matches('"').to_ascii_lowercase();
        Ok(Some(match (target.as_str(), v) {
            (_, Value::Null) if matches!(target.as_str(), "regclass" | "oid" | "regtype" | "regnamespace" | "regproc" | "name") => {
                Value::Null
            }
            ("regclass", Value::Text(name)) => {
                let bare = name.rsplit('.').next().unwrap_or(name).trim_matches('"').to_string();
                match self.system_snapshot()?.relation_oid(&bare) {
                    Some(oid) => int(oid),
                    None => return Err(table_not_found(format!("relation \"{name}\" does not exist"))),
                }
            }
            ("regclass" | "oid" | "regtype" | "regnamespace" | "regproc", Value::Int(n)) => int(*n),
            ("oid", Value::Text(s)) => match s.trim().parse::<i64>() {
                Ok(n) => int(n),
                Err(_) => return Err(crate::error::type_mismatch(format!("invalid input syntax for type oid: \"{s}\""))),
            },
            ("name", other) => text(other.to_text()),
            _ => return Ok(None),
        }))
    }
}

/// `pg_size_pretty`: bytes in the largest unit that keeps the number at 10,240
/// or more below it, as PostgreSQL rounds.
fn size_pretty(bytes: i64) -> String {
    const UNITS: [&str; 6] = ["bytes", "kB", "MB", "GB", "TB", "PB"];
    let (mut value, mut unit) = (i128::from(bytes), 0);
    while value.abs() >= 10 * 1024 && unit < UNITS.len() - 1 {
        value = (value + 512) / 1024;
        unit += 1;
    }
    format!("{value} {}", UNITS[unit])
}

/// A table function in FROM: `unnest(array)` (one column, `unnest`) or
/// `generate_series(start, stop [, step])` over integers.
pub(crate) fn table_function(name: &str, args: &[Value]) -> Result<RowSet> {
    match name {
        "unnest" => {
            let rows = args.first().map(array_elements).unwrap_or_default().into_iter().map(|v| vec![v]).collect();
            Ok(RowSet { cols: cols(&["unnest"]), rows })
        }
        "generate_series" => {
            let number = |i: usize| match args.get(i) {
                Some(Value::Int(n)) => Ok(Some(*n)),
                Some(Value::Null) => Ok(None),
                None if i == 2 => Ok(Some(1)),
                Some(Value::Text(s)) if s.trim().parse::<i64>().is_ok() => Ok(s.trim().parse().ok()),
                _ => Err(crate::error::type_mismatch("generate_series() takes integers")),
            };
            let (Some(start), Some(stop), Some(step)) = (number(0)?, number(1)?, number(2)?) else {
                return Ok(RowSet { cols: cols(&["generate_series"]), rows: Vec::new() });
            };
            if step == 0 {
                return Err(crate::error::SqlError::new(crate::error::ErrorCode::Invalid, "step size cannot equal zero"));
            }
            const MAX_ROWS: i64 = 100_000;
            let (start, stop, step) = (i128::from(start), i128::from(stop), i128::from(step));
            let count = if (step > 0 && start > stop) || (step < 0 && start < stop) { 0 } else { (stop - start) / step + 1 };
            if count > i128::from(MAX_ROWS) {
                return Err(crate::error::unsupported(format!("generate_series() gives at most {MAX_ROWS} rows")));
            }
            let rows = (0..count).map(|i| vec![int((start + i * step) as i64)]).collect();
            Ok(RowSet { cols: cols(&["generate_series"]), rows })
        }
        other => Err(crate::error::unsupported(format!("table function {other}() is not supported"))),
    }
}

/// Whether `e` is a call of a set-returning function Tessera has
/// (`unnest(array)`, `generate_subscripts(array, 1)`), allowed at the top of a
/// select list.
pub(crate) fn is_set_returning(e: &sqlparser::ast::Expr) -> bool {
    matches!(e, sqlparser::ast::Expr::Function(f) if matches!(crate::eval::func_name(f).as_str(), "unnest" | "generate_subscripts"))
}

/// The elements of an array value: a JSON array, PostgreSQL's array text
/// `{1,2}` or an `int2vector`'s `1 2`. Numbers come back as integers.
pub(crate) fn array_elements(v: &Value) -> Vec<Value> {
    let element = |s: &str| match s.trim().parse::<i64>() {
        Ok(n) => int(n),
        Err(_) => text(s.trim().trim_matches('"')),
    };
    match v {
        Value::Null => Vec::new(),
        Value::Json(j) => match serde_json::from_str::<serde_json::Value>(j) {
            Ok(serde_json::Value::Array(items)) => items
                .into_iter()
                .map(|x| match x {
                    serde_json::Value::Number(n) if n.is_i64() => int(n.as_i64().unwrap_or(0)),
                    serde_json::Value::Null => Value::Null,
                    serde_json::Value::String(s) => text(s),
                    other => text(other.to_string()),
                })
                .collect(),
            _ => vec![v.clone()],
        },
        other => {
            let s = other.to_text();
            let s = s.trim();
            match s.strip_prefix('{').and_then(|x| x.strip_suffix('}')) {
                Some("") => Vec::new(),
                Some(inner) => inner.split(',').map(element).collect(),
                None => s.split_whitespace().map(element).collect(),
            }
        }
    }
}

/// The set-returning calls of the select list being projected: each call's
/// elements (by the address of its AST node) and the output row's position.
pub struct SetReturning {
    pub row: usize,
    pub elements: std::collections::HashMap<usize, std::rc::Rc<Vec<Value>>>,
}

fn call_key(f: &sqlparser::ast::Function) -> usize {
    f as *const sqlparser::ast::Function as usize
}

impl Exec<'_> {
    /// The elements set-returning call `e` gives for the row of `env`, keyed
    /// by the call.
    pub(crate) fn set_returning_elements(&self, e: &sqlparser::ast::Expr, env: &crate::exec::Env) -> Result<(usize, Vec<Value>)> {
        let sqlparser::ast::Expr::Function(f) = e else { return Ok((0, Vec::new())) };
        let (args, _) = crate::eval::func_args(f)?;
        let elements = match args.first() {
            Some(sqlparser::ast::FunctionArgExpr::Expr(x)) => array_elements(&self.eval(x, env)?),
            _ => Vec::new(),
        };
        Ok((call_key(f), elements))
    }

    /// `unnest(a)` / `generate_subscripts(a, 1)` for the output row being
    /// projected: its element, or its subscript (from 1), NULL past the end.
    pub(crate) fn set_returning_value(&self, f: &sqlparser::ast::Function, name: &str) -> Result<Value> {
        let current = self.set_returning.borrow();
        let Some((row, elements)) = current.as_ref().and_then(|c| c.elements.get(&call_key(f)).map(|e| (c.row, e))) else {
            return Err(crate::error::unsupported(format!(
                "set-returning function {name}() is only supported at the top of a select list"
            )));
        };
        Ok(match name {
            "unnest" => elements.get(row).cloned().unwrap_or(Value::Null),
            _ if row < elements.len() => int(row as i64 + 1),
            _ => Value::Null,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_print_as_pg_size_pretty_does() {
        assert_eq!(size_pretty(8192), "8192 bytes");
        assert_eq!(size_pretty(10 * 1024), "10 kB");
        assert_eq!(size_pretty(123_456_789), "118 MB");
    }

    #[test]
    fn format_type_names_types_as_postgresql_does() {
        assert_eq!(format_type(23, -1).as_deref(), Some("integer"));
        assert_eq!(format_type(1043, 24).as_deref(), Some("character varying(20)"));
        assert_eq!(format_type(1700, ((10 << 16) | 2) + 4).as_deref(), Some("numeric(10,2)"));
        assert_eq!(format_type(424242, -1), None);
        let t = pg_type(&SqlType::Decimal(Some((10, 2))));
        assert_eq!(format_type(t.oid, t.typmod).as_deref(), Some("numeric(10,2)"));
    }
}
