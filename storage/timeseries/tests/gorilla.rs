//! Round-trip property tests for the Gorilla chunk codec, with a small
//! deterministic PRNG (no extra dependencies).

use tessera_timeseries::{ChunkEncoder, TsError, decode_chunk, encode_chunk};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn normal(&mut self) -> f64 {
        // Box-Muller
        let u1 = self.unit().max(1e-300);
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

fn assert_roundtrip(points: &[(i64, f64)]) -> usize {
    let bytes = encode_chunk(points).expect("encode");
    let back = decode_chunk(&bytes).unwrap_or_else(|e| panic!("decode failed: {e}"));
    assert_eq!(back.len(), points.len());
    for (i, (a, b)) in points.iter().zip(back.iter()).enumerate() {
        assert_eq!(a.0, b.0, "timestamp {i}");
        assert_eq!(a.1.to_bits(), b.1.to_bits(), "value {i}: {} vs {}", a.1, b.1);
    }
    bytes.len()
}

const T0: i64 = 1_714_566_600_000;

fn regular(n: usize, step: i64, mut value: impl FnMut(usize) -> f64) -> Vec<(i64, f64)> {
    (0..n).map(|i| (T0 + i as i64 * step, value(i))).collect()
}

#[test]
fn empty_and_single() {
    assert_eq!(assert_roundtrip(&[]), 5);
    assert_roundtrip(&[(T0, 1.5)]);
    assert_roundtrip(&[(i64::MIN, f64::MIN), (i64::MAX, f64::MAX)]);
    assert_roundtrip(&[(i64::MAX, 0.0), (i64::MIN, -0.0), (0, f64::INFINITY), (i64::MAX, f64::NEG_INFINITY)]);
}

#[test]
fn regular_series_bytes_per_point() {
    let n = 10_000;
    let mut rng = Rng(42);
    let constant = regular(n, 10_000, |_| 42.0);
    let mut level = 50.0f64;
    let gauge = regular(n, 10_000, |_| {
        level = (level + rng.normal()).clamp(0.0, 100.0);
        (level * 10.0).round() / 10.0 // one decimal, like a CPU % gauge
    });
    let mut counter = 0.0f64;
    let mut rng2 = Rng(7);
    let counter_series = regular(n, 10_000, |_| {
        counter += rng2.below(100) as f64;
        counter
    });
    let mut rng3 = Rng(9);
    let mut walk = 0.0f64;
    let random_walk = regular(n, 10_000, |_| {
        walk += rng3.normal();
        walk
    });
    for (name, series) in [
        ("constant value", &constant),
        ("gauge, 1 decimal", &gauge),
        ("integer counter", &counter_series),
        ("full-precision random walk", &random_walk),
    ] {
        let bytes = assert_roundtrip(series);
        let bpp = bytes as f64 / n as f64;
        println!("regular 10 s series, {name}: {n} points -> {bytes} bytes = {bpp:.3} bytes/point (raw 16)");
        assert!(bpp < 16.0);
    }
    // timestamps of a regular series cost 1 bit each: a constant series is ~2 bits/point
    assert!(assert_roundtrip(&constant) < n / 4 + 64);
}

#[test]
fn jittered_timestamps() {
    let mut rng = Rng(1);
    for _ in 0..20 {
        let mut t = T0;
        let mut v = 100.0;
        let pts: Vec<_> = (0..2_000)
            .map(|_| {
                t += 10_000 + rng.below(201) as i64 - 100; // ±100 ms
                v += rng.normal() * 0.1;
                (t, v)
            })
            .collect();
        assert_roundtrip(&pts);
    }
}

#[test]
fn random_property_roundtrips() {
    let mut rng = Rng(0xdead_beef);
    for case in 0..300 {
        let n = rng.below(300) as usize;
        let mut t = rng.next() as i64;
        let mut v = rng.normal() * 1e3;
        let mode = case % 6;
        let pts: Vec<_> = (0..n)
            .map(|_| {
                // timestamps: mix of every delta-of-delta bucket, out-of-order and duplicates
                let step: i64 = match rng.below(8) {
                    0 => 0,
                    1 => -(rng.below(1 << 20) as i64),
                    2 => rng.below(1 << 13) as i64,
                    3 => rng.below(1 << 16) as i64,
                    4 => rng.below(1 << 19) as i64,
                    5 => rng.next() as i64,
                    _ => 1000,
                };
                t = t.wrapping_add(step);
                v = match mode {
                    0 => f64::from_bits(rng.next()), // any bit pattern, NaNs included
                    1 => v + rng.normal(),
                    2 => (rng.below(5) as f64) * 0.5,
                    3 => v,
                    4 => {
                        if rng.below(2) == 0 {
                            rng.normal() * 1e300
                        } else {
                            rng.normal() * 1e-300
                        }
                    }
                    _ => rng.below(1_000_000) as f64,
                };
                (t, v)
            })
            .collect();
        assert_roundtrip(&pts);
    }
}

#[test]
fn encoder_metadata() {
    let mut e = ChunkEncoder::new();
    assert!(e.is_empty());
    assert_eq!(e.time_range(), None);
    for (t, v) in [(30, 1.0), (10, 2.0), (20, 3.0)] {
        e.push(t, v).unwrap();
    }
    assert_eq!(e.len(), 3);
    assert_eq!(e.time_range(), Some((10, 30)));
    let predicted = e.byte_len();
    let bytes = e.finish();
    assert_eq!(bytes.len(), predicted);
    assert_eq!(decode_chunk(&bytes).unwrap(), vec![(30, 1.0), (10, 2.0), (20, 3.0)]);
}

#[test]
fn corrupt_input_is_an_error_not_a_panic() {
    let good = encode_chunk(&regular(100, 10_000, |i| i as f64 * 0.5)).unwrap();
    assert!(matches!(decode_chunk(&[]), Err(TsError::CorruptChunk(_))));
    assert!(matches!(decode_chunk(&[2, 0, 0, 0, 0]), Err(TsError::CorruptChunk(_))));
    assert!(matches!(decode_chunk(&[1, 0, 0]), Err(TsError::CorruptChunk(_))));
    assert!(decode_chunk(&[1, 0, 0, 0, 0]).unwrap().is_empty());
    assert!(decode_chunk(&[1, 0, 0, 0, 0, 0]).is_err(), "trailing byte");
    assert!(decode_chunk(&[1, 255, 255, 255, 255]).is_err(), "huge count, no data");
    for cut in 0..good.len() {
        assert!(decode_chunk(&good[..cut]).is_err(), "truncated at {cut}");
    }
    let mut extra = good.clone();
    extra.push(0);
    assert!(decode_chunk(&extra).is_err());
    // random garbage and bit flips never panic
    let mut rng = Rng(3);
    for _ in 0..20_000 {
        let len = rng.below(64) as usize;
        let mut b: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        if let Some(first) = b.first_mut() {
            *first = 1;
        }
        if b.len() >= 5 && rng.below(2) == 0 {
            b[1] = rng.below(40) as u8;
            b[2..5].fill(0);
        }
        let _ = decode_chunk(&b);
    }
    for i in 0..good.len() * 8 {
        let mut b = good.clone();
        b[i / 8] ^= 0x80 >> (i % 8);
        let _ = decode_chunk(&b);
    }
}
