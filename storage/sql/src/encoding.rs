//! Byte encodings: order-preserving key encoding of values, and compact row encoding.
//!
//! Key layout over the database's key space:
//! - `c/t/<table name>`            → table definition (JSON)
//! - `c/i/<index name>`            → owning table name
//! - `c/v/<view name>`             → view definition (JSON)
//! - `c/next_table_id`             → counter (decimal text)
//! - `t/<id:4 BE>/r/<pk key>`      → encoded row
//! - `t/<id:4 BE>/i/<idx:4 BE>/<index values key><pk key>` → row key
//! - `t/<id:4 BE>/q/<column>`      → SERIAL / hidden rowid counters (decimal text)
use crate::error::{Result, internal};
use crate::value::Value;
use rust_decimal::Decimal;

pub fn table_prefix(id: u32) -> Vec<u8> {
    let mut k = b"t/".to_vec();
    k.extend_from_slice(&id.to_be_bytes());
    k.push(b'/');
    k
}
pub fn rows_prefix(id: u32) -> Vec<u8> {
    let mut k = table_prefix(id);
    k.extend_from_slice(b"r/");
    k
}
pub fn index_prefix(id: u32, idx: u32) -> Vec<u8> {
    let mut k = table_prefix(id);
    k.extend_from_slice(b"i/");
    k.extend_from_slice(&idx.to_be_bytes());
    k.push(b'/');
    k
}
pub fn counter_key(id: u32, name: &str) -> Vec<u8> {
    let mut k = table_prefix(id);
    k.extend_from_slice(b"q/");
    k.extend_from_slice(name.as_bytes());
    k
}

/// Smallest key greater than every key starting with `p`.
pub fn prefix_end(p: &[u8]) -> Vec<u8> {
    let mut k = p.to_vec();
    while let Some(last) = k.pop() {
        if last < 0xFF {
            k.push(last + 1);
            return k;
        }
    }
    vec![0xFF; p.len() + 1]
}

fn put_escaped(out: &mut Vec<u8>, b: &[u8]) {
    for &x in b {
        out.push(x);
        if x == 0 {
            out.push(0xFF);
        }
    }
    out.extend_from_slice(&[0, 1]);
}

fn put_decimal(out: &mut Vec<u8>, d: &Decimal) {
    let d = d.normalize();
    if d.is_zero() {
        out.push(0x80);
        return;
    }
    let neg = d.is_sign_negative();
    let digits = d.mantissa().unsigned_abs().to_string();
    let exp = digits.len() as i64 - d.scale() as i64; // in -28..=29
    let mut body = vec![(exp + 128) as u8];
    for c in digits.trim_end_matches('0').bytes() {
        body.push(c - b'0' + 1);
    }
    body.push(0);
    if neg {
        out.push(0x7F);
        out.extend(body.iter().map(|b| 255 - b));
    } else {
        out.push(0x81);
        out.extend(body);
    }
}

/// Appends the order-preserving encoding of `v` (NULL sorts first).
pub fn encode_key(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Null => out.push(0x00),
        Value::Bool(b) => {
            out.push(0x01);
            out.push(*b as u8);
        }
        Value::Int(i) => {
            out.push(0x02);
            out.extend_from_slice(&((*i as u64) ^ (1 << 63)).to_be_bytes());
        }
        Value::Float(f) => {
            out.push(0x03);
            // As PostgreSQL: -0 equals 0, every NaN is one value above all numbers.
            let f = if *f == 0.0 {
                0.0
            } else if f.is_nan() {
                f64::NAN
            } else {
                *f
            };
            let bits = f.to_bits();
            let k = if bits >> 63 == 1 { !bits } else { bits ^ (1 << 63) };
            out.extend_from_slice(&k.to_be_bytes());
        }
        Value::Decimal(d) => {
            out.push(0x04);
            put_decimal(out, d);
        }
        Value::Text(s) => {
            out.push(0x05);
            put_escaped(out, s.as_bytes());
        }
        Value::Blob(b) => {
            out.push(0x06);
            put_escaped(out, b);
        }
        Value::Date(d) => {
            out.push(0x07);
            out.extend_from_slice(&((*d as u32) ^ (1 << 31)).to_be_bytes());
        }
        Value::Time(t) => {
            out.push(0x08);
            out.extend_from_slice(&((*t as u64) ^ (1 << 63)).to_be_bytes());
        }
        Value::Timestamp(t) => {
            out.push(0x09);
            out.extend_from_slice(&((*t as u64) ^ (1 << 63)).to_be_bytes());
        }
        Value::Uuid(u) => {
            out.push(0x0A);
            out.extend_from_slice(u);
        }
        Value::Json(s) => {
            out.push(0x0B);
            put_escaped(out, s.as_bytes());
        }
    }
}

/// Encodes several values as one key.
pub fn key_of(vals: &[Value]) -> Vec<u8> {
    let mut out = Vec::new();
    for v in vals {
        encode_key(&mut out, v);
    }
    out
}

// ---------- row encoding ----------

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

/// Serializes a row (version byte, then tagged values).
pub fn encode_row(row: &[Value]) -> Vec<u8> {
    let mut out = vec![1u8];
    out.extend_from_slice(&(row.len() as u32).to_le_bytes());
    for v in row {
        match v {
            Value::Null => out.push(0),
            Value::Bool(b) => out.extend_from_slice(&[1, *b as u8]),
            Value::Int(i) => {
                out.push(2);
                out.extend_from_slice(&i.to_le_bytes());
            }
            Value::Float(f) => {
                out.push(3);
                out.extend_from_slice(&f.to_le_bytes());
            }
            Value::Decimal(d) => {
                out.push(4);
                out.extend_from_slice(&d.serialize());
            }
            Value::Text(s) => {
                out.push(5);
                put_bytes(&mut out, s.as_bytes());
            }
            Value::Blob(b) => {
                out.push(6);
                put_bytes(&mut out, b);
            }
            Value::Date(d) => {
                out.push(7);
                out.extend_from_slice(&d.to_le_bytes());
            }
            Value::Time(t) => {
                out.push(8);
                out.extend_from_slice(&t.to_le_bytes());
            }
            Value::Timestamp(t) => {
                out.push(9);
                out.extend_from_slice(&t.to_le_bytes());
            }
            Value::Uuid(u) => {
                out.push(10);
                out.extend_from_slice(u);
            }
            Value::Json(s) => {
                out.push(11);
                put_bytes(&mut out, s.as_bytes());
            }
        }
    }
    out
}

struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}
impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|e| *e <= self.b.len()).ok_or_else(|| internal("corrupt row encoding"))?;
        let s = &self.b[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn arr<const N: usize>(&mut self) -> Result<[u8; N]> {
        let s = self.take(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }
    fn bytes(&mut self) -> Result<&'a [u8]> {
        let n = u32::from_le_bytes(self.arr()?) as usize;
        self.take(n)
    }
}

/// Deserializes a row written by [`encode_row`].
pub fn decode_row(b: &[u8]) -> Result<Vec<Value>> {
    let mut r = Reader { b, pos: 0 };
    if r.arr::<1>()?[0] != 1 {
        return Err(internal("unknown row encoding version"));
    }
    let n = u32::from_le_bytes(r.arr()?) as usize;
    let mut row = Vec::with_capacity(n.min(4096));
    for _ in 0..n {
        let tag = r.arr::<1>()?[0];
        let v = match tag {
            0 => Value::Null,
            1 => Value::Bool(r.arr::<1>()?[0] != 0),
            2 => Value::Int(i64::from_le_bytes(r.arr()?)),
            3 => Value::Float(f64::from_le_bytes(r.arr()?)),
            4 => Value::Decimal(Decimal::deserialize(r.arr()?)),
            5 => Value::Text(String::from_utf8_lossy(r.bytes()?).into_owned()),
            6 => Value::Blob(r.bytes()?.to_vec()),
            7 => Value::Date(i32::from_le_bytes(r.arr()?)),
            8 => Value::Time(i64::from_le_bytes(r.arr()?)),
            9 => Value::Timestamp(i64::from_le_bytes(r.arr()?)),
            10 => Value::Uuid(r.arr()?),
            11 => Value::Json(String::from_utf8_lossy(r.bytes()?).into_owned()),
            _ => return Err(internal("corrupt row encoding")),
        };
        row.push(v);
    }
    Ok(row)
}
