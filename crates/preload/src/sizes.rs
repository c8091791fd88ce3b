//! The sizes and classes of the predefined datatypes, and the predefined
//! reduction operations, asked of the library once after `MPI_Init` and
//! looked up by handle on the hot path.
//!
//! Every counted call with a message asks the size of its datatype, and a
//! tuned collective needs it for its size bin. `PMPI_Type_size` costs 3.2-3.5
//! ns a call on MPICH 4.0.2 (2 ns on Open MPI 4.1.4), half of what the
//! counting wrapper adds to a call; a predefined datatype's size never
//! changes, so it is asked once. A lookup here is a multiply, a shift and a
//! compare or two; a derived datatype misses and the caller asks the
//! library at the call. The same lookup gives the datatype's class: whether
//! a reduction of it with a predefined operation gives the same bits
//! whatever the algorithm (integers, logicals, bytes: "exact"; floating
//! point is not). Which datatypes and operations and their handles come
//! from the header (`mpit_sys::predefined_datatypes`, `predefined_ops`),
//! never from this crate; which names are exact,
//! from `tuner_core::collectives::exact_datatype`.

use std::sync::OnceLock;

/// Slots of the open-addressing table: a power of two, at most three
/// quarters full (the headers here define about 60 predefined datatypes).
const SLOTS: usize = 128;
const MASK: usize = SLOTS - 1;
/// A free slot's size (no datatype is 4 GiB).
const FREE: u32 = u32::MAX;
/// The size of a datatype the library would not size: asked at each call
/// (its class is still kept, so that every rank classes it alike).
const UNSIZED: u32 = u32::MAX - 1;

/// Datatype handles (as bits), their sizes and classes; read-only once
/// built.
pub(crate) struct Sizes {
    keys: [u64; SLOTS],
    sizes: [u32; SLOTS],
    exact: [bool; SLOTS],
    len: usize,
}

impl Sizes {
    pub(crate) fn new() -> Sizes {
        Sizes {
            keys: [0; SLOTS],
            sizes: [FREE; SLOTS],
            exact: [false; SLOTS],
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

    /// Keeps `size` (`None`: the library would not say; asked at each
    /// call) and the class for the datatype `bits`; false when the table
    /// is full (that datatype is then decoded at each call, as a derived
    /// one is).
    pub(crate) fn insert(&mut self, bits: u64, size: Option<u32>, exact: bool) -> bool {
        let size = match size {
            Some(s) if s < UNSIZED => s,
            _ => UNSIZED,
        };
        let mut i = Self::home(bits);
        loop {
            if self.sizes[i] == FREE {
                if self.len >= SLOTS * 3 / 4 {
                    return false;
                }
                self.keys[i] = bits;
                self.sizes[i] = size;
                self.exact[i] = exact;
                self.len += 1;
                return true;
            }
            if self.keys[i] == bits {
                // The same handle under two names (MPI_LONG_LONG_INT).
                self.sizes[i] = size;
                self.exact[i] = exact;
                return true;
            }
            i = (i + 1) & MASK;
        }
    }

    /// The slot of the datatype `bits`, if it is one of the table's. Ends
    /// at a free slot, which a table at most three quarters full has.
    #[inline(always)]
    fn slot(&self, bits: u64) -> Option<usize> {
        let mut i = Self::home(bits);
        loop {
            let size = self.sizes[i];
            if size == FREE {
                return None;
            }
            if self.keys[i] == bits {
                return Some(i);
            }
            i = (i + 1) & MASK;
        }
    }

    /// The size of the datatype `bits`, if it is one of the table's and
    /// the library sized it.
    #[inline(always)]
    pub(crate) fn get(&self, bits: u64) -> Option<u32> {
        self.find(bits)?.size()
    }

    /// The size and class of the predefined datatype `bits`, from one
    /// probe of the table (`None`: not a predefined datatype).
    #[inline(always)]
    pub(crate) fn find(&self, bits: u64) -> Option<Found> {
        self.slot(bits).map(|i| Found {
            size: self.sizes[i],
            exact: self.exact[i],
        })
    }

    /// Whether the datatype `bits` is exact (see the module), if it is one
    /// of the table's.
    #[inline(always)]
    pub(crate) fn exact(&self, bits: u64) -> Option<bool> {
        self.find(bits).map(Found::exact)
    }
}

/// What the table keeps of a predefined datatype.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Found {
    size: u32,
    exact: bool,
}

impl Found {
    /// Its size, unless the library would not give it.
    #[inline(always)]
    pub(crate) fn size(self) -> Option<u32> {
        (self.size != UNSIZED).then_some(self.size)
    }

    /// Whether a reduction of it with a predefined operation gives the
    /// same bits whatever the algorithm.
    #[inline(always)]
    pub(crate) fn exact(self) -> bool {
        self.exact
    }
}

/// The predefined reduction operations that are exact on exact datatypes
/// (as handle bits; at most 16, the header has 12).
pub(crate) struct Ops {
    bits: [u64; 16],
    len: usize,
}

impl Ops {
    pub(crate) fn new() -> Ops {
        Ops {
            bits: [0; 16],
            len: 0,
        }
    }

    /// Keeps `bits`; false when full.
    pub(crate) fn insert(&mut self, bits: u64) -> bool {
        if self.len == self.bits.len() {
            return false;
        }
        self.bits[self.len] = bits;
        self.len += 1;
        true
    }

    #[inline(always)]
    pub(crate) fn contains(&self, bits: u64) -> bool {
        self.bits[..self.len].contains(&bits)
    }
}

/// Both tables, behind one `OnceLock`: a reduction's wrapper, which needs
/// both, loads it once ([`tables`]).
pub(crate) struct Tables {
    sizes: Sizes,
    ops: Ops,
}

impl Tables {
    /// The size and class of the predefined datatype `bits`
    /// ([`Sizes::find`]).
    #[inline(always)]
    pub(crate) fn find(&self, bits: u64) -> Option<Found> {
        self.sizes.find(bits)
    }

    /// Whether `bits` is a predefined reduction operation.
    #[inline(always)]
    pub(crate) fn exact_op(&self, bits: u64) -> bool {
        self.ops.contains(bits)
    }
}

static TABLES: OnceLock<Tables> = OnceLock::new();

/// Publishes the tables (once per process; a second call changes nothing).
pub(crate) fn install(sizes: Sizes, ops: Ops) {
    let _ = TABLES.set(Tables { sizes, ops });
}

/// The size of a predefined datatype, or `None` (a derived datatype, or
/// before the table is built): the caller asks the library.
#[inline(always)]
pub(crate) fn of(bits: u64) -> Option<u32> {
    TABLES.get()?.sizes.get(bits)
}

/// The tables, once kept (after `MPI_Init`, when the tuner runs).
#[inline(always)]
pub(crate) fn tables() -> Option<&'static Tables> {
    TABLES.get()
}

/// Whether a predefined datatype is exact; `None` for a derived datatype
/// (or before the table is built): the caller decodes it.
#[inline(always)]
pub(crate) fn exact(bits: u64) -> Option<bool> {
    TABLES.get()?.sizes.exact(bits)
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
            assert!(t.insert(bits, Some(n as u32 % 17), n % 2 == 0));
        }
        assert_eq!(t.len, 80);
        for (n, bits) in ints.chain(addresses).enumerate() {
            assert_eq!(t.get(bits), Some(n as u32 % 17), "{bits:#x}");
            assert_eq!(t.exact(bits), Some(n % 2 == 0), "{bits:#x}");
        }
        assert_eq!(t.get(0x4c00_ff00), None);
        assert_eq!(t.get(0), None);
        assert_eq!(t.exact(0), None);
        assert_eq!(t.get(0x7f12_3456_0008), None);
    }

    #[test]
    fn the_same_handle_twice_is_one_entry_and_a_full_table_refuses() {
        let mut t = Sizes::new();
        assert!(t.insert(7, Some(8), true));
        assert!(t.insert(7, Some(8), true));
        assert_eq!(t.len, 1);
        for bits in 100..(100 + SLOTS as u64 * 3 / 4 - 1) {
            assert!(t.insert(bits, Some(4), false));
        }
        assert_eq!(t.len, SLOTS * 3 / 4);
        assert!(!t.insert(99_999, Some(4), true), "over three quarters full");
        assert_eq!(t.get(99_999), None);
        assert_eq!(t.exact(99_999), None);
        assert_eq!(t.get(7), Some(8));
    }

    #[test]
    fn an_unsized_datatype_keeps_its_class() {
        let mut t = Sizes::new();
        assert!(t.insert(5, None, true));
        assert!(
            t.insert(6, Some(FREE), false),
            "a size that reads as a free slot"
        );
        assert_eq!((t.get(5), t.exact(5)), (None, Some(true)));
        assert_eq!((t.get(6), t.exact(6)), (None, Some(false)));
        assert_eq!(t.get(7), None);
    }

    #[test]
    fn ops_hold_what_they_were_given() {
        let mut ops = Ops::new();
        for b in 0..16u64 {
            assert!(ops.insert(0x5800_0000 + b));
        }
        assert!(!ops.insert(1), "full");
        assert!(ops.contains(0x5800_0003));
        assert!(!ops.contains(1));
    }
}
