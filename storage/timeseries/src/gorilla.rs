//! Gorilla-style chunk compression for one series.
//!
//! Chunk layout (all multi-byte header fields little-endian):
//!
//! | bytes | content |
//! |---|---|
//! | 0 | format version, `1` |
//! | 1..5 | number of points, u32 |
//! | 5.. | bit stream, most significant bit first, zero-padded to a byte |
//!
//! Bit stream: the first point is stored raw (64-bit timestamp, 64-bit IEEE
//! value). Every following point stores
//!
//! * the **delta-of-delta** of its timestamp (`(t[i]-t[i-1]) - (t[i-1]-t[i-2])`,
//!   with the delta before the first point taken as 0), in Gorilla's bucket
//!   scheme scaled for millisecond timestamps (as Prometheus does):
//!   `0` → 0; `10` + 14 bits; `110` + 17 bits; `1110` + 20 bits; `1111` + 64 bits
//!   (two's complement; arithmetic wraps, so any `i64` sequence round-trips);
//! * the **XOR** of its value's bits with the previous value's: `0` when equal;
//!   `10` + the meaningful bits when they fit the previous leading/trailing-zero
//!   window and that costs no more than a fresh window; otherwise `11` + 5 bits leading-zero count (capped at 31) + 6 bits
//!   meaningful length (64 stored as 0) + the meaningful bits.
//!
//! Points are stored in the order pushed (the storage layer should push them
//! sorted by time; out-of-order or duplicate timestamps still round-trip, they
//! only cost more bits). Values round-trip bit-exactly, NaN payloads included.

use crate::Point;
use crate::bits::{BitReader, BitWriter};
use crate::error::TsError;

const VERSION: u8 = 1;
const HEADER_LEN: usize = 5;

/// Streaming encoder for one chunk.
#[derive(Debug, Clone, Default)]
pub struct ChunkEncoder {
    w: BitWriter,
    count: u32,
    prev_ts: i64,
    prev_delta: i64,
    prev_bits: u64,
    /// Leading/trailing zeros of the current XOR window; `None` before the first window.
    window: Option<(u32, u32)>,
    min_ts: i64,
    max_ts: i64,
}

/// Whether `v` fits an `n`-bit two's complement field.
fn fits(v: i64, n: u32) -> bool {
    let lim = 1i64 << (n - 1);
    v >= -lim && v < lim
}

fn mask(n: u32) -> u64 {
    if n >= 64 { u64::MAX } else { (1u64 << n) - 1 }
}

fn sign_extend(v: u64, n: u32) -> i64 {
    if n >= 64 {
        return v as i64;
    }
    let shift = 64 - n;
    ((v << shift) as i64) >> shift
}

impl ChunkEncoder {
    /// Empty encoder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of points pushed.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// True when no point was pushed.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Size in bytes the chunk would have if finished now (to cut chunks at a target size).
    pub fn byte_len(&self) -> usize {
        HEADER_LEN + self.w.byte_len()
    }

    /// Smallest and largest timestamp pushed, if any.
    pub fn time_range(&self) -> Option<(i64, i64)> {
        (self.count > 0).then_some((self.min_ts, self.max_ts))
    }

    /// Append one point. Fails only when the chunk already holds `u32::MAX` points.
    pub fn push(&mut self, ts: i64, value: f64) -> Result<(), TsError> {
        if self.count == u32::MAX {
            return Err(TsError::ChunkFull);
        }
        let bits = value.to_bits();
        if self.count == 0 {
            self.w.write_bits(ts as u64, 64);
            self.w.write_bits(bits, 64);
            self.min_ts = ts;
            self.max_ts = ts;
        } else {
            let delta = ts.wrapping_sub(self.prev_ts);
            let dod = delta.wrapping_sub(self.prev_delta);
            self.write_dod(dod);
            self.write_value(bits);
            self.prev_delta = delta;
            self.min_ts = self.min_ts.min(ts);
            self.max_ts = self.max_ts.max(ts);
        }
        self.prev_ts = ts;
        self.prev_bits = bits;
        self.count += 1;
        Ok(())
    }

    fn write_dod(&mut self, dod: i64) {
        let w = &mut self.w;
        if dod == 0 {
            w.write_bit(false);
        } else if fits(dod, 14) {
            w.write_bits(0b10, 2);
            w.write_bits(dod as u64 & mask(14), 14);
        } else if fits(dod, 17) {
            w.write_bits(0b110, 3);
            w.write_bits(dod as u64 & mask(17), 17);
        } else if fits(dod, 20) {
            w.write_bits(0b1110, 4);
            w.write_bits(dod as u64 & mask(20), 20);
        } else {
            w.write_bits(0b1111, 4);
            w.write_bits(dod as u64, 64);
        }
    }

    fn write_value(&mut self, bits: u64) {
        let xor = bits ^ self.prev_bits;
        if xor == 0 {
            self.w.write_bit(false);
            return;
        }
        self.w.write_bit(true);
        let lz = xor.leading_zeros().min(31);
        let tz = xor.trailing_zeros();
        // Reuse the previous window when it holds the XOR, unless a fresh window
        // (11 header bits) is cheaper: a window stretched by an outlier would
        // otherwise cost its full width for the rest of the chunk.
        let fresh_cost = 11 + 64 - lz - tz;
        if let Some((plz, ptz)) = self.window.filter(|(plz, ptz)| lz >= *plz && tz >= *ptz && 64 - plz - ptz <= fresh_cost) {
            self.w.write_bit(false);
            let sig = 64 - plz - ptz;
            self.w.write_bits(xor >> ptz, sig);
        } else {
            let sig = 64 - lz - tz;
            self.w.write_bit(true);
            self.w.write_bits(lz as u64, 5);
            self.w.write_bits((sig % 64) as u64, 6);
            self.w.write_bits(xor >> tz, sig);
            self.window = Some((lz, tz));
        }
    }

    /// Finish the chunk and return its bytes.
    pub fn finish(self) -> Vec<u8> {
        let body = self.w.into_bytes();
        let mut out = Vec::with_capacity(HEADER_LEN + body.len());
        out.push(VERSION);
        out.extend_from_slice(&self.count.to_le_bytes());
        out.extend_from_slice(&body);
        out
    }
}

/// Encode a slice of points into one chunk.
pub fn encode_chunk(points: &[Point]) -> Result<Vec<u8>, TsError> {
    let mut e = ChunkEncoder::new();
    for &(t, v) in points {
        e.push(t, v)?;
    }
    Ok(e.finish())
}

fn corrupt(msg: &str) -> TsError {
    TsError::CorruptChunk(msg.to_string())
}

/// Decode a chunk produced by [`ChunkEncoder`]. Any malformed input (bad version,
/// truncated stream, impossible window, trailing bytes) is a [`TsError::CorruptChunk`].
pub fn decode_chunk(bytes: &[u8]) -> Result<Vec<Point>, TsError> {
    let (&version, rest) = bytes.split_first().ok_or_else(|| corrupt("empty input"))?;
    if version != VERSION {
        return Err(TsError::CorruptChunk(format!("unsupported chunk version {version}")));
    }
    let count_bytes: [u8; 4] = rest.get(..4).and_then(|s| s.try_into().ok()).ok_or_else(|| corrupt("truncated header"))?;
    let count = u32::from_le_bytes(count_bytes) as usize;
    let body = &rest[4..];
    let mut r = BitReader::new(body);
    // Every point after the first takes at least 2 bits: cap the allocation by the data.
    let cap = count.min((r.remaining() / 2) as usize + 1);
    let mut out = Vec::with_capacity(cap);
    if count > 0 {
        let mut ts = r.read_bits(64)? as i64;
        let mut bits = r.read_bits(64)?;
        out.push((ts, f64::from_bits(bits)));
        let mut delta: i64 = 0;
        let mut window: Option<(u32, u32)> = None;
        for _ in 1..count {
            // timestamp
            let dod = if !r.read_bit()? {
                0
            } else if !r.read_bit()? {
                sign_extend(r.read_bits(14)?, 14)
            } else if !r.read_bit()? {
                sign_extend(r.read_bits(17)?, 17)
            } else if !r.read_bit()? {
                sign_extend(r.read_bits(20)?, 20)
            } else {
                r.read_bits(64)? as i64
            };
            delta = delta.wrapping_add(dod);
            ts = ts.wrapping_add(delta);
            // value
            if r.read_bit()? {
                let (lz, tz) = if !r.read_bit()? {
                    window.ok_or_else(|| corrupt("XOR window reused before being set"))?
                } else {
                    let lz = r.read_bits(5)? as u32;
                    let sig = match r.read_bits(6)? as u32 {
                        0 => 64,
                        s => s,
                    };
                    if lz + sig > 64 {
                        return Err(corrupt("XOR window out of range"));
                    }
                    let w = (lz, 64 - lz - sig);
                    window = Some(w);
                    w
                };
                let sig = 64 - lz - tz;
                let xor = r.read_bits(sig)? << tz;
                bits ^= xor;
            }
            out.push((ts, f64::from_bits(bits)));
        }
    }
    if r.bytes_consumed() != body.len() {
        return Err(corrupt("trailing bytes after the last point"));
    }
    Ok(out)
}
