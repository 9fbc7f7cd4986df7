//! Table catalog stored in the key space as JSON under `c/t/<name>`.
use crate::error::{Result, internal};
use crate::store::Overlay;
use crate::types::SqlType;
use serde::{Deserialize, Serialize};

/// Index access method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum IndexMethod {
    BTree,
    Hash,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ColumnDef {
    pub name: String,
    pub ty: SqlType,
    pub nullable: bool,
    /// Default expression as SQL text.
    pub default: Option<String>,
    pub serial: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndexDef {
    pub id: u32,
    pub name: String,
    pub columns: Vec<String>,
    pub unique: bool,
    pub method: IndexMethod,
    /// Created by a UNIQUE constraint (dropped with DROP CONSTRAINT).
    pub constraint: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckDef {
    pub name: String,
    pub expr: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ForeignKeyDef {
    pub name: String,
    pub columns: Vec<String>,
    pub ref_table: String,
    pub ref_columns: Vec<String>,
}

/// A table definition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TableDef {
    pub id: u32,
    pub name: String,
    pub columns: Vec<ColumnDef>,
    /// Primary key columns; empty means rows are keyed by a hidden rowid counter.
    pub primary_key: Vec<String>,
    pub pk_name: String,
    pub indexes: Vec<IndexDef>,
    pub checks: Vec<CheckDef>,
    pub foreign_keys: Vec<ForeignKeyDef>,
    pub next_index_id: u32,
}

impl TableDef {
    pub fn col(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }
    pub fn cols_idx(&self, names: &[String]) -> Result<Vec<usize>> {
        names
            .iter()
            .map(|n| {
                self.col(n)
                    .ok_or_else(|| crate::error::column_not_found(format!("column \"{n}\" of table \"{}\" does not exist", self.name)))
            })
            .collect()
    }
    pub fn pk_idx(&self) -> Result<Vec<usize>> {
        self.cols_idx(&self.primary_key)
    }
}

pub fn table_key(name: &str) -> Vec<u8> {
    format!("c/t/{name}").into_bytes()
}
pub fn index_key(name: &str) -> Vec<u8> {
    format!("c/i/{name}").into_bytes()
}

/// A view: a stored query and the names of its columns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ViewDef {
    pub name: String,
    /// The defining query, as SQL text (parsed again at each use).
    pub query: String,
    pub columns: Vec<String>,
}

pub fn view_key(name: &str) -> Vec<u8> {
    format!("c/v/{name}").into_bytes()
}

pub fn get_view(kv: &Overlay, name: &str) -> Result<Option<ViewDef>> {
    match kv.get(&view_key(name))? {
        Some(b) => serde_json::from_slice(&b).map(Some).map_err(|e| internal(format!("corrupt view entry for {name}: {e}"))),
        None => Ok(None),
    }
}

pub fn put_view(kv: &mut Overlay, v: &ViewDef) -> Result<()> {
    let b = serde_json::to_vec(v).map_err(|e| internal(e.to_string()))?;
    kv.put(view_key(&v.name), b);
    Ok(())
}

/// Table definitions decoded from their stored bytes, by those bytes: a
/// statement reads its tables' entries every time, and decoding one costs more
/// than the read. Keyed by the bytes themselves, so an entry is never stale.
static DECODED_TABLES: std::sync::LazyLock<quick_cache::sync::Cache<Vec<u8>, TableDef>> =
    std::sync::LazyLock::new(|| quick_cache::sync::Cache::new(DECODED_TABLES_KEPT));

/// Table definitions [`DECODED_TABLES`] keeps.
const DECODED_TABLES_KEPT: usize = 1024;

pub fn get_table(kv: &Overlay, name: &str) -> Result<Option<TableDef>> {
    let Some(b) = kv.get(&table_key(name))? else { return Ok(None) };
    if let Some(t) = DECODED_TABLES.get(&b) {
        return Ok(Some(t));
    }
    let t: TableDef = serde_json::from_slice(&b).map_err(|e| internal(format!("corrupt catalog entry for {name}: {e}")))?;
    DECODED_TABLES.insert(b, t.clone());
    Ok(Some(t))
}

pub fn put_table(kv: &mut Overlay, t: &TableDef) -> Result<()> {
    let b = serde_json::to_vec(t).map_err(|e| internal(e.to_string()))?;
    kv.put(table_key(&t.name), b);
    Ok(())
}

pub fn all_tables(kv: &Overlay) -> Result<Vec<TableDef>> {
    let mut out = Vec::new();
    for (k, v) in kv.scan_prefix(b"c/t/")? {
        let t: TableDef =
            serde_json::from_slice(&v).map_err(|e| internal(format!("corrupt catalog entry {}: {e}", String::from_utf8_lossy(&k))))?;
        out.push(t);
    }
    Ok(out)
}

/// Index name → owning table name.
pub fn index_owner(kv: &Overlay, index: &str) -> Result<Option<String>> {
    Ok(kv.get(&index_key(index))?.map(|b| String::from_utf8_lossy(&b).into_owned()))
}

/// Reads a decimal counter (0 when absent).
pub fn read_counter(kv: &Overlay, key: &[u8]) -> Result<i64> {
    match kv.get(key)? {
        Some(b) => String::from_utf8_lossy(&b).parse().map_err(|_| internal("corrupt counter")),
        None => Ok(0),
    }
}

pub fn write_counter(kv: &mut Overlay, key: &[u8], v: i64) {
    kv.put(key.to_vec(), v.to_string().into_bytes());
}

/// Allocates a new table id.
pub fn next_table_id(kv: &mut Overlay) -> Result<u32> {
    let k = b"c/next_table_id";
    let n = read_counter(kv, k)? + 1;
    write_counter(kv, k, n);
    u32::try_from(n).map_err(|_| internal("table id space exhausted"))
}
