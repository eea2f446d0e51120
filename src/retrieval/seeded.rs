//! The retrieval tests' source of random inputs: a xorshift generator from a fixed seed, so
//! that every run draws the same texts and lists and a failure can be replayed.

pub struct Xorshift(u64);

impl Xorshift {
    /// A generator from `seed` (not 0: xorshift would stay at 0).
    pub fn new(seed: u64) -> Xorshift {
        assert_ne!(seed, 0, "xorshift stays at 0");
        Xorshift(seed)
    }

    /// The next 64 bits.
    pub fn draw(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// The next draw below `bound`.
    pub fn below(&mut self, bound: u64) -> u64 {
        self.draw() % bound
    }
}
