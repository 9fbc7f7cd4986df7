//! Shared test-data helpers: a small seeded PRNG (no external crates) and
//! recall measurement. Also included by `examples/bench.rs`.
#![allow(dead_code)]

use std::collections::BTreeSet;

use tessera_vector::Hit;

/// xoshiro256** seeded through SplitMix64.
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        Rng { s: [next(), next(), next(), next()] }
    }

    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [-1, 1).
    pub fn uniform(&mut self) -> f32 {
        (self.unit() * 2.0 - 1.0) as f32
    }

    /// Standard normal (Box–Muller).
    pub fn gaussian(&mut self) -> f32 {
        let u1 = 1.0 - self.unit();
        let u2 = self.unit();
        ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()) as f32
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

pub fn gaussian_vectors(rng: &mut Rng, n: usize, dim: usize) -> Vec<Vec<f32>> {
    (0..n).map(|_| (0..dim).map(|_| rng.gaussian()).collect()).collect()
}

pub fn uniform_vectors(rng: &mut Rng, n: usize, dim: usize) -> Vec<Vec<f32>> {
    (0..n).map(|_| (0..dim).map(|_| rng.uniform()).collect()).collect()
}

/// `(id, vector)` pairs with ids `0..n`, for `brute_force`.
pub fn records(vectors: &[Vec<f32>]) -> impl Iterator<Item = (u64, &[f32])> {
    vectors.iter().enumerate().map(|(i, v)| (i as u64, v.as_slice()))
}

/// |found ∩ truth| / |truth|.
pub fn recall(found: &[Hit], truth: &[Hit]) -> f64 {
    if truth.is_empty() {
        return 1.0;
    }
    let truth: BTreeSet<u64> = truth.iter().map(|h| h.id).collect();
    found.iter().filter(|h| truth.contains(&h.id)).count() as f64 / truth.len() as f64
}

/// Vectors of intrinsic dimension `latent` embedded in `dim` dimensions
/// (gaussian latent × fixed random basis, plus 5% isotropic noise): closer
/// to real embeddings than i.i.d. noise. Returns `n` data and `q` query vectors.
pub fn lowrank_vectors(rng: &mut Rng, n: usize, q: usize, dim: usize, latent: usize) -> (Vec<Vec<f32>>, Vec<Vec<f32>>) {
    let basis = gaussian_vectors(rng, latent, dim);
    let scale = 1.0 / (latent as f32).sqrt();
    let sample = |rng: &mut Rng| -> Vec<f32> {
        let z: Vec<f32> = (0..latent).map(|_| rng.gaussian()).collect();
        (0..dim).map(|j| z.iter().zip(&basis).map(|(zi, b)| zi * b[j]).sum::<f32>() * scale + 0.05 * rng.gaussian()).collect()
    };
    let data = (0..n).map(|_| sample(rng)).collect();
    let queries = (0..q).map(|_| sample(rng)).collect();
    (data, queries)
}
