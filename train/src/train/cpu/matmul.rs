//! A checked front for `gemm::gemm`: matrices are slices with an offset and row/column strides,
//! so a transpose or a head's columns inside a wider buffer are views, never copies. Every
//! view is bounds-checked before the one `unsafe` call, which then only reads and writes
//! inside the slices it was handed.

use gemm::Parallelism;

use redraft_engine::{Error, Result};

/// A read-only matrix view: element `(i, j)` is `data[offset + i * rs + j * cs]`.
#[derive(Clone, Copy)]
pub(crate) struct Mat<'a> {
    data: &'a [f32],
    offset: usize,
    rows: usize,
    cols: usize,
    rs: usize,
    cs: usize,
}

impl<'a> Mat<'a> {
    /// `rows x cols` at `offset`, rows `rs` apart, columns adjacent.
    pub(crate) fn at(data: &'a [f32], offset: usize, rows: usize, cols: usize, rs: usize) -> Self {
        Mat {
            data,
            offset,
            rows,
            cols,
            rs,
            cs: 1,
        }
    }

    /// A contiguous row-major `rows x cols` matrix at the start of `data`.
    pub(crate) fn rows(data: &'a [f32], rows: usize, cols: usize) -> Self {
        Mat::at(data, 0, rows, cols, cols)
    }

    /// The transpose, as a view.
    pub(crate) fn t(self) -> Self {
        Mat {
            rows: self.cols,
            cols: self.rows,
            rs: self.cs,
            cs: self.rs,
            ..self
        }
    }

    fn check(&self, what: &str) -> Result<()> {
        if self.rows == 0 || self.cols == 0 {
            return Ok(());
        }
        let last = (self.rows - 1)
            .checked_mul(self.rs)
            .and_then(|r| r.checked_add((self.cols - 1).checked_mul(self.cs)?))
            .and_then(|r| r.checked_add(self.offset));
        match last {
            Some(last) if last < self.data.len() => Ok(()),
            _ => Err(out_of_bounds(what, self.rows, self.cols, self.data.len())),
        }
    }
}

/// A writable row-major view: element `(i, j)` is `data[offset + i * rs + j]`, with
/// `rs >= cols` so no two elements share memory (gemm writes tiles from several threads).
pub(crate) struct MatMut<'a> {
    data: &'a mut [f32],
    offset: usize,
    rows: usize,
    cols: usize,
    rs: usize,
}

impl<'a> MatMut<'a> {
    pub(crate) fn at(
        data: &'a mut [f32],
        offset: usize,
        rows: usize,
        cols: usize,
        rs: usize,
    ) -> Self {
        MatMut {
            data,
            offset,
            rows,
            cols,
            rs,
        }
    }

    pub(crate) fn rows(data: &'a mut [f32], rows: usize, cols: usize) -> Self {
        MatMut::at(data, 0, rows, cols, cols)
    }
}

fn out_of_bounds(what: &str, rows: usize, cols: usize, len: usize) -> Error {
    Error::InvalidRequest(format!(
        "matmul {what}: a {rows}x{cols} view does not fit in {len} values"
    ))
}

/// How many threads a matmul may use: the big projections spread over the pool, the small
/// per-head products inside an already parallel loop run on their own thread.
#[derive(Clone, Copy)]
pub(crate) enum Threads {
    Pool,
    One,
}

/// `dst = scale * lhs @ rhs`, or `dst += scale * lhs @ rhs` when `accumulate`.
pub(crate) fn matmul(
    dst: MatMut<'_>,
    lhs: Mat<'_>,
    rhs: Mat<'_>,
    accumulate: bool,
    scale: f32,
    threads: Threads,
) -> Result<()> {
    let (m, n, k) = (dst.rows, dst.cols, lhs.cols);
    if lhs.rows != m || rhs.cols != n || rhs.rows != k {
        return Err(Error::InvalidRequest(format!(
            "matmul of {}x{} by {}x{} into {m}x{n}",
            lhs.rows, lhs.cols, rhs.rows, rhs.cols
        )));
    }
    if m == 0 || n == 0 {
        return Ok(());
    }
    lhs.check("left operand")?;
    rhs.check("right operand")?;
    let dst_fits = dst.rs >= n
        && (m - 1)
            .checked_mul(dst.rs)
            .and_then(|r| r.checked_add(dst.offset + n))
            .is_some_and(|end| end <= dst.data.len());
    if !dst_fits {
        return Err(out_of_bounds("destination", m, n, dst.data.len()));
    }
    if k == 0 {
        if !accumulate {
            for i in 0..m {
                let start = dst.offset + i * dst.rs;
                dst.data[start..start + n].fill(0.0);
            }
        }
        return Ok(());
    }
    let parallelism = match threads {
        Threads::Pool => Parallelism::Rayon(0),
        Threads::One => Parallelism::None,
    };
    let dst_ptr = dst.data[dst.offset..].as_mut_ptr();
    // SAFETY: the three views were checked above to address only elements inside their slices
    // (the last element of each lies in bounds, strides are non-negative); the destination's
    // rows do not overlap (`rs >= n`, unit column stride), so gemm's threads write disjoint
    // elements; `dst` is borrowed mutably and the operands immutably, so they cannot alias.
    // All strides fit in `isize` because they address elements of live slices.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst_ptr,
            1,
            dst.rs as isize,
            accumulate,
            lhs.data[lhs.offset..].as_ptr(),
            lhs.cs as isize,
            lhs.rs as isize,
            rhs.data[rhs.offset..].as_ptr(),
            rhs.cs as isize,
            rhs.rs as isize,
            1.0,
            scale,
            false,
            false,
            false,
            parallelism,
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Vec<f32> {
        let mut out = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                out[i * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
            }
        }
        out
    }

    /// Transposed and offset views give the products of the matrices they stand for.
    #[test]
    fn strided_views_multiply_like_the_matrices_they_view() {
        let (m, k, n) = (5, 7, 3);
        let a: Vec<f32> = (0..m * k).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..k * n).map(|i| (i as f32 * 0.71).cos()).collect();
        let expected = naive(&a, &b, m, k, n);
        // a^T stored as k x m, read back through a transposed view.
        let a_t: Vec<f32> = (0..k * m).map(|i| a[(i % m) * k + i / m]).collect();
        let mut wide = vec![9.0; 2 + m * 8];
        matmul(
            MatMut::at(&mut wide, 2, m, n, 8),
            Mat::rows(&a_t, k, m).t(),
            Mat::rows(&b, k, n),
            false,
            1.0,
            Threads::One,
        )
        .unwrap();
        for i in 0..m {
            for j in 0..n {
                let got = wide[2 + i * 8 + j];
                assert!((got - expected[i * n + j]).abs() < 1e-5);
            }
            // Columns past the view are untouched.
            assert_eq!(wide[2 + i * 8 + n], 9.0);
        }
        // Accumulating with a scale adds to what is there.
        let mut dst = expected.clone();
        matmul(
            MatMut::rows(&mut dst, m, n),
            Mat::rows(&a, m, k),
            Mat::rows(&b, k, n),
            true,
            -2.0,
            Threads::Pool,
        )
        .unwrap();
        for (got, want) in dst.iter().zip(&expected) {
            assert!((got + want).abs() < 1e-5);
        }
    }

    #[test]
    fn views_past_their_slices_are_errors() {
        let a = vec![0.0; 6];
        let mut dst = vec![0.0; 4];
        let err = matmul(
            MatMut::rows(&mut dst, 2, 2),
            Mat::rows(&a, 2, 4),
            Mat::rows(&a, 4, 2),
            false,
            1.0,
            Threads::One,
        )
        .unwrap_err();
        assert!(err.to_string().contains("does not fit"), "{err}");
        let err = matmul(
            MatMut::rows(&mut dst, 2, 2),
            Mat::rows(&a, 2, 3),
            Mat::rows(&a, 2, 3),
            false,
            1.0,
            Threads::One,
        )
        .unwrap_err();
        assert!(err.to_string().contains("matmul of 2x3 by 2x3"), "{err}");
    }
}
