//! A tiny deterministic random generator for synthetic inputs (benchmark
//! catalogues, property tests). Not for anything that needs real entropy.

/// SplitMix64 (Steele, Lea and Flood, 2014): fast, 64 bits of state, and
/// the same sequence for the same seed on every machine.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[low, high)`.
    pub fn uniform(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `0..n`, without the bias of a bare modulo: draws from
    /// the incomplete last block of `n` values at the top of the 64-bit
    /// range are rejected and drawn again. For small `n` a rejection almost
    /// never happens (probability below `n / 2^64`), so the sequence is the
    /// plain modulo's, seed for seed.
    ///
    /// # Panics
    /// If `n` is 0.
    pub fn below(&mut self, n: usize) -> usize {
        assert!(n > 0, "SplitMix64::below needs a positive bound");
        let n = n as u64;
        // 2^64 mod n values at the top would make small results likelier.
        let last_accepted = u64::MAX - (u64::MAX % n + 1) % n;
        loop {
            let draw = self.next_u64();
            if draw <= last_accepted {
                return (draw % n) as usize;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_deterministic_and_in_range() {
        let (mut a, mut b) = (SplitMix64::new(7), SplitMix64::new(7));
        for _ in 0..1000 {
            let x = a.uniform(0.2, 3.0);
            assert_eq!(x, b.uniform(0.2, 3.0));
            assert!((0.2..3.0).contains(&x));
            assert!(a.below(11) < 11);
            b.below(11);
        }
        assert_ne!(SplitMix64::new(1).next_u64(), SplitMix64::new(2).next_u64());
    }

    #[test]
    fn below_keeps_the_modulo_sequence_for_small_bounds() {
        // Stored figures (the GBM's shuffles, the GA, the planner's samples)
        // depend on these draws: they must not move.
        let (mut unbiased, mut plain) = (SplitMix64::new(42), SplitMix64::new(42));
        for n in (1..2000).cycle().take(20_000) {
            assert_eq!(unbiased.below(n) as u64, plain.next_u64() % n as u64);
        }
    }

    #[cfg(target_pointer_width = "64")]
    #[test]
    fn below_is_uniform_where_a_modulo_is_biased() {
        // With n = 3 · 2^62 a bare modulo maps the top quarter of the 64-bit
        // range onto [0, 2^62), which would then hold half the draws
        // instead of a third.
        let n = 3usize << 62;
        let mut rng = SplitMix64::new(3);
        let draws = 30_000;
        let low = (0..draws).filter(|_| rng.below(n) < 1 << 62).count();
        let share = low as f64 / draws as f64;
        // A third, within about six standard deviations (0.0027 each).
        assert!((share - 1.0 / 3.0).abs() < 0.016, "share below 2^62: {share}");
    }
}
