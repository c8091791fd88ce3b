//! The sizes of the predefined datatypes, asked of the library once after
//! `MPI_Init` and looked up by handle on the hot path.
//!
//! Every counted call with a message asks the size of its datatype, and a
//! tuned collective needs it for its size bin. `PMPI_Type_size` costs 3.2-3.5
//! ns a call on MPICH 4.0.2 (2 ns on Open MPI 4.1.4), half of what the
//! counting wrapper adds to a call; a predefined datatype's size never
//! changes, so it is asked once. A lookup here is a multiply, a shift and a
//! compare or two; a derived datatype misses and the caller asks the
//! library at the call. Which datatypes and their handles come from the
//! header (`mpit_sys::predefined_datatypes`), never from this crate.

use std::sync::OnceLock;

/// Slots of the open-addressing table: a power of two, at most three
/// quarters full (the headers here define about 60 predefined datatypes).
const SLOTS: usize = 128;
const MASK: usize = SLOTS - 1;
/// A free slot's size (no datatype is 4 GiB).
const FREE: u32 = u32::MAX;

/// Datatype handles (as bits) and their sizes; read-only once built.
pub(crate) struct Sizes {
    keys: [u64; SLOTS],
    sizes: [u32; SLOTS],
    len: usize,
}

impl Sizes {
    pub(crate) fn new() -> Sizes {
        Sizes {
            keys: [0; SLOTS],
            sizes: [FREE; SLOTS],
            len: 0,
        }
    }

    #[inline(always)]
    fn home(bits: u64) -> usize {
        // Fibonacci hashing: handles are small integers with a few
        // meaningful bits (MPICH, the standard ABI) or addresses of static
        // objects a few dozen bytes apart (Open MPI); the multiply spreads
        // both over the top bits.
        (bits.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SLOTS.trailing_zeros())) as usize
    }

    /// Keeps `size` for the datatype `bits`; false when the table is full
    /// (that datatype's size is then asked at each call).
    pub(crate) fn insert(&mut self, bits: u64, size: u32) -> bool {
        if size == FREE {
            return false;
        }
        let mut i = Self::home(bits);
        loop {
            if self.sizes[i] == FREE {
                if self.len >= SLOTS * 3 / 4 {
                    return false;
                }
                self.keys[i] = bits;
                self.sizes[i] = size;
                self.len += 1;
                return true;
            }
            if self.keys[i] == bits {
                // The same handle under two names (MPI_LONG_LONG_INT).
                self.sizes[i] = size;
                return true;
            }
            i = (i + 1) & MASK;
        }
    }

    /// The size of the datatype `bits`, if it is one of the table's. Ends
    /// at a free slot, which a table at most three quarters full has.
    #[inline(always)]
    pub(crate) fn get(&self, bits: u64) -> Option<u32> {
        let mut i = Self::home(bits);
        loop {
            let size = self.sizes[i];
            if size == FREE {
                return None;
            }
            if self.keys[i] == bits {
                return Some(size);
            }
            i = (i + 1) & MASK;
        }
    }
}

static SIZES: OnceLock<Sizes> = OnceLock::new();

/// Publishes the table (once per process; a second call changes nothing).
pub(crate) fn install(sizes: Sizes) {
    let _ = SIZES.set(sizes);
}

/// The size of a predefined datatype, or `None` (a derived datatype, or
/// before the table is built): the caller asks the library.
#[inline(always)]
pub(crate) fn of(bits: u64) -> Option<u32> {
    SIZES.get()?.get(bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_sizes_and_misses_what_it_was_not_given() {
        let mut t = Sizes::new();
        // MPICH-like integer handles, Open MPI-like addresses 0x48 apart.
        let ints = (0..40u64).map(|i| 0x4c00_0000 | (i << 8) | i);
        let addresses = (0..40u64).map(|i| 0x7f12_3456_0000 + 0x48 * i);
        for (n, bits) in ints.clone().chain(addresses.clone()).enumerate() {
            assert!(t.insert(bits, n as u32 % 17));
        }
        assert_eq!(t.len, 80);
        for (n, bits) in ints.chain(addresses).enumerate() {
            assert_eq!(t.get(bits), Some(n as u32 % 17), "{bits:#x}");
        }
        assert_eq!(t.get(0x4c00_ff00), None);
        assert_eq!(t.get(0), None);
        assert_eq!(t.get(0x7f12_3456_0008), None);
    }

    #[test]
    fn the_same_handle_twice_is_one_entry_and_a_full_table_refuses() {
        let mut t = Sizes::new();
        assert!(t.insert(7, 8));
        assert!(t.insert(7, 8));
        assert_eq!(t.len, 1);
        for bits in 100..(100 + SLOTS as u64 * 3 / 4 - 1) {
            assert!(t.insert(bits, 4));
        }
        assert_eq!(t.len, SLOTS * 3 / 4);
        assert!(!t.insert(99_999, 4), "over three quarters full");
        assert_eq!(t.get(99_999), None);
        assert_eq!(t.get(7), Some(8));
        assert!(!t.insert(5, FREE), "a size that reads as a free slot");
    }
}
