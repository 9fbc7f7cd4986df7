//! Distance metrics and vector preparation.
//!
//! Kernels accumulate into eight independent lanes so the compiler can
//! vectorize them, and never use fused multiply-add: the same binary yields
//! bit-identical distances on every replica.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::VectorError;

/// Distance function of an index. Smaller distance means more similar.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Metric {
    /// Vectors are normalized on insert; distance = 1 − cosine similarity (0..=2).
    Cosine,
    /// Squared Euclidean distance (no square root).
    L2,
    /// Negative inner product.
    Dot,
}

impl Metric {
    /// Lower-case wire name: `"cosine"`, `"l2"` or `"dot"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Metric::Cosine => "cosine",
            Metric::L2 => "l2",
            Metric::Dot => "dot",
        }
    }

    /// Distance between two prepared vectors of equal length.
    ///
    /// For [`Metric::Cosine`] both inputs must already be unit length
    /// (as produced by [`Metric::prepare`]).
    #[inline]
    pub fn distance(self, a: &[f32], b: &[f32]) -> f32 {
        match self {
            Metric::Cosine => 1.0 - dot(a, b),
            Metric::L2 => l2_squared(a, b),
            Metric::Dot => -dot(a, b),
        }
    }

    /// Validates `v` against `dim` and returns it as stored by the index:
    /// unit length for cosine, unchanged otherwise.
    pub fn prepare(self, v: &[f32], dim: usize) -> Result<Vec<f32>, VectorError> {
        if v.len() != dim {
            return Err(VectorError::DimensionMismatch { expected: dim, got: v.len() });
        }
        if let Some(index) = v.iter().position(|x| !x.is_finite()) {
            return Err(VectorError::NonFinite { index });
        }
        let mut out = v.to_vec();
        if self == Metric::Cosine {
            // Accumulate in f64 so huge or tiny components neither overflow nor underflow.
            let norm = v.iter().map(|&x| f64::from(x) * f64::from(x)).sum::<f64>().sqrt();
            if norm == 0.0 || !norm.is_finite() {
                return Err(VectorError::ZeroVector);
            }
            for x in &mut out {
                *x = (f64::from(*x) / norm) as f32;
            }
        }
        Ok(out)
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Metric {
    type Err = VectorError;

    /// Parses `"cosine"`, `"l2"` or `"dot"` (case-insensitive).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "cosine" => Ok(Metric::Cosine),
            "l2" => Ok(Metric::L2),
            "dot" => Ok(Metric::Dot),
            _ => Err(VectorError::InvalidParams(format!("unknown metric {s:?}"))),
        }
    }
}

/// Similarity score for a raw distance: higher is more similar.
///
/// * cosine: `1 − distance`, i.e. the cosine similarity in `[-1, 1]`;
/// * l2: `1 / (1 + distance)`, in `(0, 1]` (1 for identical vectors);
/// * dot: `−distance`, i.e. the inner product.
pub fn score(metric: Metric, distance: f32) -> f32 {
    match metric {
        Metric::Cosine => 1.0 - distance,
        Metric::L2 => 1.0 / (1.0 + distance),
        Metric::Dot => -distance,
    }
}

const LANES: usize = 8;

/// Inner product of two equal-length slices.
#[inline]
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0.0f32; LANES];
    let (ca, cb) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..LANES {
            acc[i] += x[i] * y[i];
        }
    }
    let mut tail = 0.0f32;
    for (x, y) in ra.iter().zip(rb) {
        tail += x * y;
    }
    reduce(acc) + tail
}

/// Squared Euclidean distance of two equal-length slices.
#[inline]
pub(crate) fn l2_squared(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0.0f32; LANES];
    let (ca, cb) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..LANES {
            let d = x[i] - y[i];
            acc[i] += d * d;
        }
    }
    let mut tail = 0.0f32;
    for (x, y) in ra.iter().zip(rb) {
        let d = x - y;
        tail += d * d;
    }
    reduce(acc) + tail
}

#[inline]
fn reduce(acc: [f32; LANES]) -> f32 {
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_match_naive() {
        let a: Vec<f32> = (0..19).map(|i| i as f32 * 0.5 - 3.0).collect();
        let b: Vec<f32> = (0..19).map(|i| (i * i) as f32 * 0.1 - 1.0).collect();
        let d: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        let l: f32 = a.iter().zip(&b).map(|(x, y)| (x - y) * (x - y)).sum();
        assert!((dot(&a, &b) - d).abs() < 1e-3);
        assert!((l2_squared(&a, &b) - l).abs() < 1e-3);
    }

    #[test]
    fn prepare_normalizes_cosine() {
        let v = Metric::Cosine.prepare(&[3.0, 4.0], 2).unwrap();
        assert_eq!(v, vec![0.6, 0.8]);
        assert!(Metric::Cosine.distance(&v, &v).abs() < 1e-6);
        assert_eq!(Metric::L2.prepare(&[3.0, 4.0], 2).unwrap(), vec![3.0, 4.0]);
    }
}
