//! Message-size bins: a call's size in bytes to the bin its search keys on,
//! with a bit-indexed lookup on the hot path.

/// Message-size bins: bin `i` holds sizes from `bounds[i]` up to the next
/// bound (the last one is open).
#[derive(Clone, PartialEq, Eq)]
pub struct Bins {
    pub(super) bounds: Vec<u64>,
    /// The bin of every size of `j` significant bits, at index `j` (0 to
    /// 64), or [`SPLIT`] where a bound falls among those sizes: one load
    /// per call instead of a binary search, for bounds that are powers of
    /// two (the default's and most policies').
    pub(super) by_bits: [u8; 65],
}

/// A [`Bins::by_bits`] entry whose sizes span two bins.
const SPLIT: u8 = u8::MAX;

impl std::fmt::Debug for Bins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bins")
            .field("bounds", &self.bounds)
            .finish()
    }
}

impl Bins {
    /// Bins from lower bounds in bytes (0 is added, duplicates dropped).
    pub fn new(mut bounds: Vec<u64>) -> Bins {
        bounds.push(0);
        bounds.sort_unstable();
        bounds.dedup();
        let mut bins = Bins {
            bounds,
            by_bits: [SPLIT; 65],
        };
        for bits in 0..=64u32 {
            // The sizes of `bits` significant bits: [2^(bits-1), 2^bits).
            let (lo, hi) = match bits {
                0 => (0, 0),
                64 => (1 << 63, u64::MAX),
                _ => (1 << (bits - 1), (1 << bits) - 1),
            };
            let bin = bins.search(lo);
            if bin == bins.search(hi) {
                bins.by_bits[bits as usize] = u8::try_from(bin).unwrap_or(SPLIT);
            }
        }
        bins
    }

    /// How many bins.
    pub fn len(&self) -> usize {
        self.bounds.len()
    }

    /// Never empty (0 is always a bound).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The bin of a message of `bytes` bytes.
    #[inline]
    pub fn of(&self, bytes: u64) -> usize {
        match self.by_bits[(64 - bytes.leading_zeros()) as usize] {
            SPLIT => self.search(bytes),
            bin => usize::from(bin),
        }
    }

    /// [`Bins::of`] by binary search over the bounds.
    fn search(&self, bytes: u64) -> usize {
        self.bounds
            .partition_point(|&b| b <= bytes)
            .saturating_sub(1)
    }

    /// The sizes bin `i` holds: `[lo, hi)`, `hi` `None` for the last.
    pub fn range(&self, i: usize) -> (u64, Option<u64>) {
        (self.bounds[i], self.bounds.get(i + 1).copied())
    }
}

/// A size bin for people: `[4 KiB, 64 KiB)`, `>= 1 MiB`.
pub fn bin_text(lo: u64, hi: Option<u64>) -> String {
    let size = |b: u64| match b {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    };
    match hi {
        Some(hi) => format!("[{}, {})", size(lo), size(hi)),
        None => format!(">= {}", size(lo)),
    }
}

impl Default for Bins {
    /// 0, 256 B, 4 KiB, 64 KiB, 1 MiB.
    fn default() -> Bins {
        Bins::new(vec![256, 4 << 10, 64 << 10, 1 << 20])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_by_bits_agree_with_the_bounds() {
        for bounds in [
            vec![],
            vec![256, 4 << 10, 64 << 10, 1 << 20],
            vec![1, 2, 3, 1000, 1024, 1025, 5 << 20],
            vec![u64::MAX, 1 << 63, 7],
            (1..300).map(|i| i * 3).collect(),
        ] {
            let bins = Bins::new(bounds.clone());
            let mut sizes: Vec<u64> = vec![0, 1, u64::MAX];
            for b in &bins.bounds {
                sizes.extend([b.saturating_sub(1), *b, b.saturating_add(1)]);
            }
            sizes.extend((0..64).map(|j| 1u64 << j));
            sizes.extend((1..64).map(|j| (1u64 << j) - 1));
            for size in sizes {
                assert_eq!(bins.of(size), bins.search(size), "{bounds:?}: {size} bytes");
            }
        }
        // Powers of two never need the search.
        let bins = Bins::default();
        assert!(
            bins.by_bits.iter().all(|&b| b != SPLIT),
            "{:?}",
            bins.by_bits
        );
        assert_eq!(bins.of(8), 0);
        assert_eq!(bins.of(1 << 20), 4);
    }
}
