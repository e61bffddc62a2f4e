//! [`DisjointOutput`]: one output buffer written by parallel tasks, each in its own elements.
//!
//! rayon's `par_chunks_mut` splits a buffer into contiguous pieces, and most kernels use it.
//! Two do not fit it: fused attention, whose task writes one head's columns of a block of rows
//! (a strided area, through `gemm`), and the panel matrices ([`crate::q8`], [`crate::half`]),
//! whose task writes a band of columns of every row. Both share the buffer through this type,
//! so the `unsafe impl Send`/`Sync` that sharing a raw pointer needs is written once, here.

use std::marker::PhantomData;

/// A mutable buffer lent to parallel tasks that write disjoint sets of its elements.
///
/// The contract, which the type cannot check (the sets are strided) and every write site's
/// `SAFETY` comment argues for: while any copy exists, no element is written by one task and
/// read or written by another, and nothing is written outside the buffer (the pointers come
/// from [`DisjointOutput::at`], whose offsets are checked; a write past an offset must stay
/// within the buffer's `len`). The buffer stays mutably borrowed for `'a`, so its owner cannot
/// read, move or free it while the tasks hold copies; writing is only through raw pointers,
/// so every write is an `unsafe` operation at its site.
#[derive(Debug)]
pub struct DisjointOutput<'a, T> {
    ptr: *mut T,
    len: usize,
    _buffer: PhantomData<&'a mut [T]>,
}

impl<T> Clone for DisjointOutput<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for DisjointOutput<'_, T> {}

// SAFETY: a copy sent to another thread carries only the pointer and the length; elements are
// reached only through raw pointers, and the type's contract (each write site's obligation)
// keeps two threads off the same element. `T: Send` because elements are written from the
// threads the copies reach.
unsafe impl<T: Send> Send for DisjointOutput<'_, T> {}

// SAFETY: `&DisjointOutput` gives nothing but a copy of the pointer and the length: the same
// as sending a copy (see `Send`).
unsafe impl<T: Send> Sync for DisjointOutput<'_, T> {}

impl<'a, T> DisjointOutput<'a, T> {
    /// Lends `buffer` to the tasks for as long as this value (and its copies) live.
    pub fn new(buffer: &'a mut [T]) -> Self {
        DisjointOutput {
            ptr: buffer.as_mut_ptr(),
            len: buffer.len(),
            _buffer: PhantomData,
        }
    }

    /// Elements in the buffer.
    pub fn len(self) -> usize {
        self.len
    }

    pub fn is_empty(self) -> bool {
        self.len == 0
    }

    /// The pointer `offset` elements in; `offset == len` (one past the end) is allowed, as for
    /// a slice. Panics past that.
    pub fn at(self, offset: usize) -> *mut T {
        assert!(
            offset <= self.len,
            "offset {offset} past a buffer of {}",
            self.len
        );
        // SAFETY: `offset <= len`: the result points into the buffer's allocation or one past
        // its end, which `add` allows.
        unsafe { self.ptr.add(offset) }
    }
}

#[cfg(test)]
mod tests {
    use rayon::prelude::*;

    use super::*;

    #[test]
    fn tasks_write_their_own_strided_elements() {
        // 8 columns of 100 rows; task c writes column c of every row.
        let mut buffer = vec![0usize; 800];
        let out = DisjointOutput::new(&mut buffer);
        assert_eq!(out.len(), 800);
        (0..8).into_par_iter().for_each(|c| {
            for row in 0..100 {
                // SAFETY: element row * 8 + c < 800 belongs to task c alone.
                unsafe { *out.at(row * 8 + c) = row * 10 + c };
            }
        });
        assert!(buffer
            .iter()
            .enumerate()
            .all(|(i, &v)| v == i / 8 * 10 + i % 8));
    }

    #[test]
    fn an_offset_past_the_end_panics_before_any_write() {
        let mut buffer = [0f32; 4];
        let out = DisjointOutput::new(&mut buffer);
        let end = out.at(4);
        assert_eq!(end as usize - out.at(0) as usize, 16);
        let past = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| out.at(5)));
        assert!(past.is_err(), "offset 5 of 4 elements");
    }
}
