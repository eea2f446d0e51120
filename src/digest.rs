//! Short digests: the first 8 bytes of a blake3 hash as a number, where a fingerprint (of a
//! model's name, of a list's rows, of a skill's listed texts) is compared or stored, never
//! trusted as a whole hash.

/// The first 8 bytes of `hash`, little-endian.
pub fn u64_of(hash: &blake3::Hash) -> u64 {
    let mut first = [0; 8];
    first.copy_from_slice(&hash.as_bytes()[..8]);
    u64::from_le_bytes(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_eight_bytes_little_endian() {
        let hash = blake3::hash(b"abc");
        let bytes = hash.as_bytes();
        assert_eq!(u64_of(&hash) & 0xff, u64::from(bytes[0]));
        assert_eq!(u64_of(&hash) >> 56, u64::from(bytes[7]));
    }
}
