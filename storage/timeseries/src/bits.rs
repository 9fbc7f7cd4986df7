//! Bit-level writer and reader, most significant bit first.

use crate::error::TsError;

/// Appends bits to a byte vector.
#[derive(Debug, Clone, Default)]
pub(crate) struct BitWriter {
    buf: Vec<u8>,
    /// Number of bits written.
    len: u64,
}

impl BitWriter {
    pub fn write_bit(&mut self, bit: bool) {
        self.write_bits(bit as u64, 1);
    }

    /// Write the low `n` bits of `v` (n ≤ 64), most significant first.
    pub fn write_bits(&mut self, v: u64, n: u32) {
        let mut n = n.min(64);
        while n > 0 {
            let used = (self.len % 8) as u32;
            if used == 0 {
                self.buf.push(0);
            }
            let free = 8 - used;
            let take = free.min(n);
            let chunk = (v >> (n - take)) & ((1u64 << take) - 1);
            if let Some(last) = self.buf.last_mut() {
                *last |= (chunk as u8) << (free - take);
            }
            n -= take;
            self.len += take as u64;
        }
    }

    pub fn byte_len(&self) -> usize {
        self.buf.len()
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }
}

/// Reads bits from a byte slice.
#[derive(Debug, Clone)]
pub(crate) struct BitReader<'a> {
    buf: &'a [u8],
    pos: u64,
}

impl<'a> BitReader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        BitReader { buf, pos: 0 }
    }

    pub fn remaining(&self) -> u64 {
        (self.buf.len() as u64 * 8).saturating_sub(self.pos)
    }

    pub fn read_bit(&mut self) -> Result<bool, TsError> {
        Ok(self.read_bits(1)? == 1)
    }

    /// Read `n` bits (n ≤ 64) as the low bits of a u64.
    pub fn read_bits(&mut self, n: u32) -> Result<u64, TsError> {
        if n > 64 || (n as u64) > self.remaining() {
            return Err(TsError::CorruptChunk("unexpected end of data".into()));
        }
        let mut out: u64 = 0;
        let mut n = n;
        while n > 0 {
            let byte = self.buf.get((self.pos / 8) as usize).copied().unwrap_or(0);
            let offset = (self.pos % 8) as u32;
            let avail = 8 - offset;
            let take = avail.min(n);
            let chunk = ((byte as u64) >> (avail - take)) & ((1u64 << take) - 1);
            out = (out << take) | chunk;
            n -= take;
            self.pos += take as u64;
        }
        Ok(out)
    }

    /// Bytes touched so far (partially read bytes count).
    pub fn bytes_consumed(&self) -> usize {
        self.pos.div_ceil(8) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_mixed_widths() {
        let items: Vec<(u64, u32)> =
            vec![(1, 1), (0, 1), (0b101, 3), (u64::MAX, 64), (0x1234, 14), (0, 64), (7, 5), (0xdead_beef, 32), (1, 2)];
        let mut w = BitWriter::default();
        for (v, n) in &items {
            w.write_bits(*v, *n);
        }
        let bytes = w.into_bytes();
        let mut r = BitReader::new(&bytes);
        for (v, n) in &items {
            assert_eq!(r.read_bits(*n).unwrap(), *v, "width {n}");
        }
        assert!(r.remaining() < 8);
        assert!(r.read_bits(8).is_err());
    }
}
