//! Seeded level assignment.
//!
//! A node's top layer is a pure function of `(seed, id)`, so every replica that
//! applies the same inserts builds the same graph.

/// Highest layer a node can be assigned to.
pub(crate) const MAX_LEVEL: usize = 32;

/// SplitMix64 finalizer: a fast, well-mixed 64-bit hash.
#[inline]
pub(crate) fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Geometric level for `id`: `floor(−ln(u) · mL)` with `u ∈ (0, 1]` drawn from
/// `hash(seed, id)` and `mL = 1 / ln(m)`; capped at [`MAX_LEVEL`].
pub(crate) fn level_for(seed: u64, id: u64, m: usize) -> usize {
    let h = splitmix64(seed ^ splitmix64(id));
    // 53 random bits → u in (0, 1].
    let u = ((h >> 11) + 1) as f64 / (1u64 << 53) as f64;
    let ml = 1.0 / (m.max(2) as f64).ln();
    let level = (-u.ln() * ml).floor();
    if level.is_finite() && level >= 0.0 { (level as usize).min(MAX_LEVEL) } else { 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_are_pure_and_geometric() {
        assert_eq!(level_for(7, 42, 16), level_for(7, 42, 16));
        let n = 200_000u64;
        let above0 = (0..n).filter(|&id| level_for(1, id, 16) > 0).count() as f64 / n as f64;
        // P(level ≥ 1) = 1/m.
        assert!((above0 - 1.0 / 16.0).abs() < 0.005, "{above0}");
        let differs = (0..1000u64).any(|id| level_for(1, id, 16) != level_for(2, id, 16));
        assert!(differs, "seed must influence levels");
    }
}
