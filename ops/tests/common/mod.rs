//! Deterministic test inputs shared by the kernel tests.
#![allow(dead_code)]

/// A xorshift64 stream of u64 from `seed` (any seed; 0 is mapped to 1).
pub fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    }
}

/// `n` values uniform in [−1, 1) from `seed`.
pub fn uniform(n: usize, seed: u64) -> Vec<f64> {
    let mut next = xorshift(seed);
    (0..n)
        .map(|_| (next() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0)
        .collect()
}
