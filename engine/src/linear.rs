//! The model's projections and its embedding table, dense or quantized.
//!
//! A dense projection is one f32 matrix stored pre-transposed (`[in, out]`), the fastest CPU
//! path for small models. A quantized one keeps a GGUF file's blocks (Q8_0, Q4_K, Q6_K, ...) and
//! multiplies through redraft's own kernel (`redraft_kernels::q8`, Q8_0/Q5_0/Q4_K/Q6_K on CPUs
//! with AVX-512 VNNI or AVX2, repacked into its panels at load) or else candle's `QMatMul`; both
//! quantize the activations once per call and run block dot products in integers. A fused
//! projection (q|k|v, gate|up) whose parts share a block type is one quantized matrix (the
//! parts' rows concatenated; quantized rows are independent); parts of different types (a
//! Q4_K_M file mixes Q4_K and Q6_K) are separate matrices whose outputs are concatenated.

use std::borrow::Cow;
use std::sync::Arc;

use candle_core::quantized::{GgmlDType, QMatMul, QStorage, QTensor};
use candle_core::{CpuStorage, DType, Device, Module, Storage, Tensor};

use redraft_kernels::half::{HalfKind, HalfMatrix};
use redraft_kernels::q8::{BlockType, Q8Matrix};

use crate::error::{Error, Result};

/// One weight as a checkpoint holds it: dense (f32 on the model's device, or a matrix kept in
/// the file's f16/bf16 where [`HalfMatrix`] multiplies it: see [`keeps_half`]), quantized
/// blocks in memory, or a GGUF tensor still in the file's bytes ([`Mapped`]).
#[derive(Clone)]
pub enum Stored {
    Dense(Tensor),
    Quantized(Arc<QTensor>),
    Mapped(Arc<Mapped>),
}

/// The bytes of a GGUF file whose tensors are read in place ([`Mapped`]): a read-only map of
/// the file, or a file compiled into the binary (the embedded default model).
pub enum FileBytes {
    Map(memmap2::Mmap),
    Static(&'static [u8]),
}

impl std::ops::Deref for FileBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            FileBytes::Map(map) => map,
            FileBytes::Static(bytes) => bytes,
        }
    }
}

/// A GGUF tensor where it lies in the file's memory map, for the CPU: its blocks (quantized,
/// or f16/bf16 [kept half](keeps_half)) go straight from the page cache into the kernels'
/// panels when the model is built, with no copy of the file on the way (reading the file into
/// buffers and copying them into candle's tensors was most of a 0.5B model's load), and the
/// pages are given back once packed, so the file never sits in memory next to its panels.
pub struct Mapped {
    map: Arc<FileBytes>,
    start: usize,
    len: usize,
    dtype: GgmlDType,
    dims: Vec<usize>,
}

/// Why a GGUF tensor's bytes cannot be read where they lie ([`Mapped::new`]); shown after the
/// tensor's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Misplaced {
    /// Its dimensions multiply past any size a file can have.
    TooLarge,
    /// Its elements are not whole blocks of its type.
    PartialBlock { elems: usize, block: usize },
    /// Its first byte is not at a multiple of what its type is read in (4 for f32, 2 for f16
    /// and the blocks' f16 scales): candle reads it in place and asserts that.
    Misaligned { start: usize, align: usize },
    /// Its bytes run past the end of the file.
    PastEnd { file: usize },
}

impl std::fmt::Display for Misplaced {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Misplaced::TooLarge => write!(f, "has more elements than any file can hold"),
            Misplaced::PartialBlock { elems, block } => write!(
                f,
                "has {elems} elements, not whole blocks of {block} (its type's block size)"
            ),
            Misplaced::Misaligned { start, align } => write!(
                f,
                "starts at byte {start} of the file, not a multiple of the {align} bytes its type is read in"
            ),
            Misplaced::PastEnd { file } => {
                write!(f, "runs past the end of the file's {file} bytes")
            }
        }
    }
}

/// The alignment candle reads a `dtype` tensor's bytes in (`as_t_slice`): f32 and Q8_K's f32
/// scale 4, f16, bf16 and every other block (f16 scales) 2.
fn read_alignment(dtype: GgmlDType) -> usize {
    match dtype {
        GgmlDType::F32 | GgmlDType::Q8K => 4,
        _ => 2,
    }
}

impl Mapped {
    /// The `dims`-shaped `dtype` tensor at byte `start` of `map`, or why its bytes cannot be
    /// read there: more elements than fit in memory, not whole blocks, a start its type cannot
    /// be read at, or bytes past the map's end (a truncated file).
    pub fn new(
        map: Arc<FileBytes>,
        start: usize,
        dtype: GgmlDType,
        dims: &[usize],
    ) -> std::result::Result<Mapped, Misplaced> {
        let elems = dims
            .iter()
            .try_fold(1usize, |n, &d| n.checked_mul(d))
            .ok_or(Misplaced::TooLarge)?;
        let block = dtype.block_size();
        if !elems.is_multiple_of(block) {
            return Err(Misplaced::PartialBlock { elems, block });
        }
        let len = (elems / block)
            .checked_mul(dtype.type_size())
            .ok_or(Misplaced::TooLarge)?;
        let align = read_alignment(dtype);
        if !start.is_multiple_of(align) {
            return Err(Misplaced::Misaligned { start, align });
        }
        if start.checked_add(len).is_none_or(|end| end > map.len()) {
            return Err(Misplaced::PastEnd { file: map.len() });
        }
        Ok(Mapped {
            map,
            start,
            len,
            dtype,
            dims: dims.to_vec(),
        })
    }

    /// Its number of elements.
    pub fn elem_count(&self) -> usize {
        self.len / self.dtype.type_size() * self.dtype.block_size()
    }

    pub fn bytes(&self) -> &[u8] {
        &self.map[self.start..self.start + self.len]
    }

    pub fn dtype(&self) -> GgmlDType {
        self.dtype
    }

    pub fn dims(&self) -> &[usize] {
        &self.dims
    }

    /// A copy in candle's quantized tensor (for its kernels, or a lookup table).
    pub(crate) fn qtensor(&self, device: &Device) -> Result<QTensor> {
        let storage = QStorage::from_data(Cow::Borrowed(self.bytes()), device, self.dtype)?;
        Ok(QTensor::new(storage, self.dims.as_slice())?)
    }

    /// The tensor as a dense one: f32 for quantized blocks, the file's type otherwise.
    pub(crate) fn tensor(&self, device: &Device) -> Result<Tensor> {
        let dtype = match self.dtype {
            GgmlDType::F32 => DType::F32,
            GgmlDType::F16 => DType::F16,
            GgmlDType::BF16 => DType::BF16,
            _ => return self.qtensor(device)?.dequantize(device).map_err(Into::into),
        };
        Ok(Tensor::from_raw_buffer(
            self.bytes(),
            dtype,
            &self.dims,
            device,
        )?)
    }

    /// Row `row` of a matrix, in f32 (`[cols]`).
    fn row(&self, row: usize) -> Result<Tensor> {
        let [rows, cols] = self.dims[..] else {
            unreachable!("an embedding table is a matrix")
        };
        if row >= rows {
            return Err(candle_core::Error::Msg(format!("token id {row} of {rows}")).into());
        }
        let width = self.len / rows;
        let bytes = &self.bytes()[row * width..][..width];
        Ok(match self.dtype {
            GgmlDType::F32 => Tensor::from_raw_buffer(bytes, DType::F32, &[cols], &Device::Cpu)?,
            GgmlDType::F16 | GgmlDType::BF16 => {
                let dtype = if self.dtype == GgmlDType::F16 {
                    DType::F16
                } else {
                    DType::BF16
                };
                Tensor::from_raw_buffer(bytes, dtype, &[cols], &Device::Cpu)?
                    .to_dtype(DType::F32)?
            }
            dtype => {
                let storage = QStorage::from_data(Cow::Borrowed(bytes), &Device::Cpu, dtype)?;
                QTensor::new(storage, &[cols][..])?.dequantize(&Device::Cpu)?
            }
        })
    }

    /// Tells the kernel the pages are not needed now: they leave this process's resident set
    /// (a later read faults them in again from the page cache, unchanged).
    fn release(&self) {
        #[cfg(unix)]
        self.release_pages();
    }

    #[cfg(unix)]
    fn release_pages(&self) {
        // Whole pages inside the tensor only: a neighbour may still be unpacked.
        let page = 4096;
        let first = self.start.next_multiple_of(page);
        let end = (self.start + self.len) / page * page;
        // The binary's own pages are the loader's, not ours to advise.
        let FileBytes::Map(map) = &*self.map else {
            return;
        };
        if end > first {
            // SAFETY: the map is a read-only shared mapping of a file, so dropping its pages
            // loses nothing: a later read sees the file's bytes again.
            let _ = unsafe {
                map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, first, end - first)
            };
        }
    }
}

/// Checkpoints of fewer parameters are widened to f32 whatever their files hold: their weights
/// fit the caches, where f32 matrix multiplication (gemm) beats widening every weight again on
/// each call (the shipped 2M model is stored f16 and runs f32). Past it, memory and the bytes a
/// decoding step reads matter more.
pub const HALF_FROM_PARAMS: usize = 8 << 20;

/// Whether a loader should keep a `dims`-shaped f16/bf16 weight of a checkpoint of `params`
/// parameters half on `device` rather than widen it to f32: matrices of checkpoints of at least
/// [`HALF_FROM_PARAMS`], on a CPU whose kernel multiplies them (vectors feed f32 ops).
pub fn keeps_half(params: usize, dims: &[usize], device: &Device) -> bool {
    params >= HALF_FROM_PARAMS && dims.len() == 2 && device.is_cpu() && HalfMatrix::available()
}

impl Stored {
    pub fn dims(&self) -> &[usize] {
        match self {
            Stored::Dense(t) => t.dims(),
            Stored::Quantized(q) => q.shape().dims(),
            Stored::Mapped(m) => &m.dims,
        }
    }

    /// The weight in f32.
    pub fn dense(&self, device: &Device) -> Result<Tensor> {
        Ok(match self {
            Stored::Dense(t) => t.to_dtype(DType::F32)?,
            Stored::Quantized(q) => q.dequantize(device)?,
            Stored::Mapped(m) => m.tensor(device)?.to_dtype(DType::F32)?,
        })
    }

    pub fn device(&self) -> Device {
        match self {
            Stored::Dense(t) => t.device().clone(),
            Stored::Quantized(q) => q.device(),
            Stored::Mapped(_) => Device::Cpu,
        }
    }

    /// The half format of a weight kept half.
    fn half_kind(&self) -> Option<HalfKind> {
        let dtype = match self {
            Stored::Dense(t) => t.dtype(),
            Stored::Mapped(m) if m.dtype == GgmlDType::F16 => DType::F16,
            Stored::Mapped(m) if m.dtype == GgmlDType::BF16 => DType::BF16,
            _ => return None,
        };
        match dtype {
            DType::F16 => Some(HalfKind::F16),
            DType::BF16 => Some(HalfKind::Bf16),
            _ => None,
        }
    }

    /// Quantized blocks' type, in memory or mapped.
    fn block_dtype(&self) -> Option<GgmlDType> {
        match self {
            Stored::Dense(_) => None,
            Stored::Quantized(q) => Some(q.dtype()),
            Stored::Mapped(m) => Some(m.dtype),
        }
    }

    /// Quantized blocks as candle's tensor (mapped ones copied out of the map).
    fn qtensor(&self, device: &Device) -> Result<Arc<QTensor>> {
        match self {
            Stored::Quantized(q) => Ok(Arc::clone(q)),
            Stored::Mapped(m) => Ok(Arc::new(m.qtensor(device)?)),
            Stored::Dense(_) => unreachable!("a dense weight has no blocks"),
        }
    }
}

/// `x @ W` for a `[rows, in]` input, giving `[rows, out]`.
pub enum Linear {
    /// `[in, out]`, f32.
    Dense(Tensor),
    /// f16 or bf16 weights, multiplied as they are ([`HalfMatrix`]).
    Half(HalfMatrix),
    /// Parts whose outputs, side by side, are the projection's output.
    Quantized(Vec<Part>),
}

/// The block type [`Q8Matrix`] calls `dtype`, if it multiplies it.
fn own_kernel_type(dtype: GgmlDType) -> Option<BlockType> {
    match dtype {
        GgmlDType::Q8_0 => Some(BlockType::Q8_0),
        GgmlDType::Q5_0 => Some(BlockType::Q5_0),
        GgmlDType::Q4K => Some(BlockType::Q4K),
        GgmlDType::Q6K => Some(BlockType::Q6K),
        _ => None,
    }
}

/// One quantized matrix of a projection.
pub enum Part {
    /// Candle's kernels (every block type, every device).
    Candle(QMatMul),
    /// Q8_0, Q5_0, Q4_K or Q6_K blocks on a CPU with AVX-512 VNNI: [`Q8Matrix`], redraft's own
    /// kernel.
    Q8(Q8Matrix),
}

impl Linear {
    /// The projection whose output is `parts`' outputs side by side; each part is a `[out_i, in]`
    /// weight (the checkpoint's layout).
    pub fn fused(parts: &[Stored], device: &Device) -> Result<Linear> {
        if let Some(kind) = parts[0].half_kind() {
            if parts.iter().all(|p| p.half_kind() == Some(kind))
                && device.is_cpu()
                && HalfMatrix::available()
            {
                return Linear::half(parts, kind);
            }
        }
        if parts.iter().all(|p| matches!(p, Stored::Dense(_))) {
            let dense: Vec<Tensor> = parts
                .iter()
                .map(|p| p.dense(device))
                .collect::<Result<_>>()?;
            let w = if dense.len() == 1 {
                dense[0].clone()
            } else {
                Tensor::cat(&dense, 0)?
            };
            return Ok(Linear::Dense(w.t()?.contiguous()?));
        }
        // Q8_0, Q5_0, Q4_K and Q6_K run on redraft's own kernel where the CPU has it;
        // elsewhere Q5_0 runs as Q8_0 through candle (see `q5_0_as_q8_0`).
        let own_kernel = device.is_cpu() && Q8Matrix::available();
        let parts: Vec<Stored> = parts
            .iter()
            .map(|part| match part.block_dtype() {
                Some(GgmlDType::Q5_0) if !own_kernel => Ok(Stored::Quantized(Arc::new(
                    q5_0_as_q8_0(&*part.qtensor(device)?, device)?,
                ))),
                _ => Ok(part.clone()),
            })
            .collect::<Result<_>>()?;
        let mut matrices = Vec::new();
        let mut run: Vec<&Stored> = Vec::new();
        let flush = |run: &mut Vec<&Stored>, matrices: &mut Vec<Part>| -> Result<()> {
            let Some(dtype) = run.first().and_then(|p| p.block_dtype()) else {
                return Ok(());
            };
            if let Some(block_type) = own_kernel_type(dtype).filter(|_| own_kernel) {
                let data: Vec<Cow<'_, [u8]>> = run
                    .iter()
                    .map(|part| match part {
                        Stored::Quantized(q) => q.data().map_err(Into::into),
                        Stored::Mapped(m) => Ok(Cow::Borrowed(m.bytes())),
                        Stored::Dense(_) => unreachable!("a run holds blocks"),
                    })
                    .collect::<Result<_>>()?;
                let slices: Vec<&[u8]> = data.iter().map(|d| &d[..]).collect();
                let cols = run[0].dims()[1];
                if let Some(part) = run.iter().find(|p| p.dims()[1] != cols) {
                    return Err(mismatched(cols, part.dims()[1]));
                }
                let matrix = Q8Matrix::from_blocks(block_type, &slices, cols)
                    .map_err(|e| Error::InvalidRequest(e.to_string()))?;
                matrices.push(Part::Q8(matrix));
                for part in run.iter() {
                    if let Stored::Mapped(m) = part {
                        m.release();
                    }
                }
            } else {
                let tensors: Vec<Arc<QTensor>> = run
                    .iter()
                    .map(|p| p.qtensor(device))
                    .collect::<Result<_>>()?;
                matrices.push(Part::Candle(QMatMul::from_arc(concat_rows(
                    &tensors, device,
                )?)?));
            }
            run.clear();
            Ok(())
        };
        for part in &parts {
            match part {
                Stored::Quantized(_) | Stored::Mapped(_) => {
                    if run
                        .last()
                        .is_some_and(|last| last.block_dtype() != part.block_dtype())
                    {
                        flush(&mut run, &mut matrices)?;
                    }
                    run.push(part);
                }
                Stored::Dense(t) => {
                    flush(&mut run, &mut matrices)?;
                    // QMatMul's dense form multiplies by the transpose of a `[out, in]` weight.
                    matrices.push(Part::Candle(QMatMul::Tensor(
                        t.to_dtype(DType::F32)?.contiguous()?,
                    )));
                }
            }
        }
        flush(&mut run, &mut matrices)?;
        Ok(Linear::Quantized(matrices))
    }

    /// Half parts' rows, stacked, as one [`HalfMatrix`]: mapped parts read in place, in-memory
    /// ones copied out of their tensors.
    fn half(parts: &[Stored], kind: HalfKind) -> Result<Linear> {
        let cols = parts[0].dims()[1];
        let mut bits: Vec<Cow<'_, [u16]>> = Vec::with_capacity(parts.len());
        for part in parts {
            let [_, c] = part.dims() else {
                unreachable!("half weights are matrices")
            };
            if *c != cols {
                return Err(mismatched(cols, *c));
            }
            bits.push(match part {
                // GGUF aligns tensor data (32 bytes by default), so this is the map itself.
                Stored::Mapped(m) => match bytemuck::try_cast_slice::<u8, u16>(m.bytes()) {
                    Ok(bits) if cfg!(target_endian = "little") => Cow::Borrowed(bits),
                    _ => Cow::Owned(
                        m.bytes()
                            .chunks_exact(2)
                            .map(|b| u16::from_le_bytes([b[0], b[1]]))
                            .collect(),
                    ),
                },
                Stored::Dense(t) => {
                    let flat = t.flatten_all()?;
                    Cow::Owned(match kind {
                        HalfKind::F16 => flat
                            .to_vec1::<half::f16>()?
                            .iter()
                            .map(|h| h.to_bits())
                            .collect(),
                        HalfKind::Bf16 => flat
                            .to_vec1::<half::bf16>()?
                            .iter()
                            .map(|h| h.to_bits())
                            .collect(),
                    })
                }
                Stored::Quantized(_) => unreachable!("half parts are dense or mapped"),
            });
        }
        let slices: Vec<&[u16]> = bits.iter().map(|b| &b[..]).collect();
        let matrix = HalfMatrix::new(&slices, cols, kind);
        for part in parts {
            if let Stored::Mapped(m) = part {
                m.release();
            }
        }
        Ok(Linear::Half(matrix))
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(match self {
            Linear::Dense(w) => x.matmul(w)?,
            Linear::Half(m) => {
                let x = x.contiguous()?;
                let rows = x.dim(0)?;
                let out = with_rows(&x, |data| m.matmul(data, rows))?;
                Tensor::from_vec(out, (rows, m.rows()), x.device())?
            }
            Linear::Quantized(parts) => {
                let x = x.contiguous()?;
                let outs: Vec<Tensor> = parts
                    .iter()
                    .map(|part| part.forward(&x))
                    .collect::<Result<_>>()?;
                if outs.len() == 1 {
                    outs.into_iter().next().expect("one part")
                } else {
                    Tensor::cat(&outs, 1)?
                }
            }
        })
    }

    pub fn is_quantized(&self) -> bool {
        matches!(self, Linear::Quantized(_))
    }

    /// Whether the weights are kept in f16/bf16.
    pub fn is_half(&self) -> bool {
        matches!(self, Linear::Half(_))
    }

    /// Bytes the weights take in memory.
    pub fn bytes(&self) -> usize {
        let dense = |t: &Tensor| t.elem_count() * t.dtype().size_in_bytes();
        match self {
            Linear::Dense(w) => dense(w),
            Linear::Half(m) => m.bytes(),
            Linear::Quantized(parts) => parts
                .iter()
                .map(|part| match part {
                    Part::Candle(QMatMul::QTensor(q)) => q.storage_size_in_bytes(),
                    Part::Candle(QMatMul::Tensor(t) | QMatMul::TensorF16(t)) => dense(t),
                    Part::Q8(m) => m.bytes(),
                })
                .sum(),
        }
    }
}

impl Part {
    /// `[rows, in]` -> `[rows, out]`.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        match self {
            Part::Candle(m) => Ok(m.forward(x)?),
            Part::Q8(m) => {
                let rows = x.dim(0)?;
                let out = with_rows(x, |data| m.matmul(data, rows))?;
                Ok(Tensor::from_vec(out, (rows, m.rows()), x.device())?)
            }
        }
    }
}

/// `f` of a contiguous f32 tensor's values, straight from its memory: a copy per call is a cost
/// a decoding step would pay ~70 times.
fn with_rows<T>(x: &Tensor, f: impl FnOnce(&[f32]) -> T) -> Result<T> {
    let (storage, layout) = x.storage_and_layout();
    Ok(match (&*storage, layout.contiguous_offsets()) {
        (Storage::Cpu(CpuStorage::F32(data)), Some((start, end))) => f(&data[start..end]),
        _ => {
            drop(storage);
            f(&x.flatten_all()?.to_vec1::<f32>()?)
        }
    })
}

/// A Q5_0 matrix as Q8_0, value for value: a Q5_0 block is 32 five-bit integers in -16..=15
/// and one f16 scale, which a Q8_0 block (32 eight-bit integers, one f16 scale) holds exactly.
/// Candle multiplies Q5_0 with a scalar loop and Q8_0 with AVX2, about 25x faster here; the
/// price is 34 bytes per block instead of 22. (llama.cpp's Q4_K_M files store every matrix
/// whose width is not a multiple of 256 as Q5_0: all of a 0.5B Qwen2's but `ffn_down`.)
pub fn q5_0_as_q8_0(q: &QTensor, device: &Device) -> Result<QTensor> {
    const Q5: usize = 22;
    const Q8: usize = 34;
    let data = q.data()?;
    if data.len() % Q5 != 0 {
        return Err(candle_core::Error::Msg(format!(
            "Q5_0 data of {} bytes is not whole blocks",
            data.len()
        ))
        .into());
    }
    let mut out = Vec::with_capacity(data.len() / Q5 * Q8);
    for block in data.chunks_exact(Q5) {
        let (scale, rest) = block.split_at(2);
        let (high, low) = rest.split_at(4);
        let high = u32::from_le_bytes([high[0], high[1], high[2], high[3]]);
        out.extend_from_slice(scale);
        let value = |nibble: u8, bit: u32| ((nibble | (((high >> bit) & 1) << 4) as u8) as i8) - 16;
        out.extend(
            low.iter()
                .enumerate()
                .map(|(j, &b)| value(b & 0x0F, j as u32) as u8),
        );
        out.extend(
            low.iter()
                .enumerate()
                .map(|(j, &b)| value(b >> 4, j as u32 + 16) as u8),
        );
    }
    let storage = QStorage::from_data(Cow::Owned(out), device, GgmlDType::Q8_0)?;
    Ok(QTensor::new(storage, q.shape().clone())?)
}

/// Fused projection parts that are not one matrix's rows.
fn mismatched(width: usize, other: usize) -> crate::error::Error {
    candle_core::Error::Msg(format!(
        "fused projection parts of widths {width} and {other}"
    ))
    .into()
}

/// One quantized matrix holding `parts`' rows in order (all of one block type and width).
fn concat_rows(parts: &[Arc<QTensor>], device: &Device) -> Result<Arc<QTensor>> {
    if let [one] = parts {
        return Ok(Arc::clone(one));
    }
    let dtype: GgmlDType = parts[0].dtype();
    let width = parts[0].shape().dims()[1];
    let mut rows = 0;
    let mut data = Vec::new();
    for part in parts {
        let (r, w) = part.shape().dims2()?;
        if w != width || part.dtype() != dtype {
            return Err(mismatched(width, w));
        }
        rows += r;
        data.extend_from_slice(&part.data()?);
    }
    let storage = QStorage::from_data(Cow::Owned(data), device, dtype)?;
    Ok(Arc::new(QTensor::new(storage, (rows, width))?))
}

/// The token embedding table: rows looked up by id (a quantized table is dequantized a row at
/// a time, so a 150k-token vocabulary stays in its blocks; a mapped one is read where it lies in
/// the file's map, so only the rows a text uses are ever resident).
pub enum Embedding {
    Dense(Tensor),
    Quantized(Arc<QTensor>),
    Mapped(Arc<Mapped>),
}

impl Embedding {
    pub fn new(stored: Stored) -> Embedding {
        match stored {
            Stored::Dense(t) => Embedding::Dense(t),
            Stored::Quantized(q) => Embedding::Quantized(q),
            Stored::Mapped(m) => Embedding::Mapped(m),
        }
    }

    /// `[ids.len(), hidden]`.
    pub fn lookup(&self, ids: &Tensor) -> Result<Tensor> {
        Ok(match self {
            Embedding::Dense(t) => t.embedding(ids)?.to_dtype(DType::F32)?,
            Embedding::Quantized(q) => q.embedding(ids)?,
            Embedding::Mapped(m) => {
                let rows: Vec<Tensor> = ids
                    .to_vec1::<u32>()?
                    .into_iter()
                    .map(|id| m.row(id as usize))
                    .collect::<Result<_>>()?;
                Tensor::stack(&rows, 0)?.to_device(ids.device())?
            }
        })
    }

    /// Bytes the table takes in memory (a mapped one: its part of the file).
    pub fn bytes(&self) -> usize {
        match self {
            Embedding::Dense(t) => t.elem_count() * t.dtype().size_in_bytes(),
            Embedding::Quantized(q) => q.storage_size_in_bytes(),
            Embedding::Mapped(m) => m.len,
        }
    }

    /// Whether [`Embedding::as_head`] multiplies by this table's own memory (not by a copy in
    /// another layout: Q5_0 as Q8_0, or the panels of redraft's kernel).
    pub fn shares_blocks_with_head(&self, device: &Device) -> bool {
        let own = device.is_cpu() && Q8Matrix::available();
        matches!(self, Embedding::Quantized(q)
            if q.dtype() != GgmlDType::Q5_0 && !(own && own_kernel_type(q.dtype()).is_some()))
    }

    /// The table as an output head (`hidden -> vocab`), for tied embeddings.
    pub fn as_head(&self, device: &Device) -> Result<Linear> {
        Linear::fused(
            &[match self {
                Embedding::Dense(t) => Stored::Dense(t.clone()),
                Embedding::Quantized(q) => Stored::Quantized(Arc::clone(q)),
                Embedding::Mapped(m) => Stored::Mapped(Arc::clone(m)),
            }],
            device,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel_rms(a: &Tensor, b: &Tensor) -> f32 {
        let rms = |x: &Tensor| {
            x.sqr()
                .unwrap()
                .mean_all()
                .unwrap()
                .to_scalar::<f32>()
                .unwrap()
                .sqrt()
        };
        rms(&(a - b).unwrap()) / rms(b)
    }

    /// A GGUF tensor read where it lies in a file's memory map is the same weight as its blocks
    /// in memory: the same lookups and the same products, fused parts included; a tensor that
    /// runs past the end is refused, and so is a row past the table's end.
    #[test]
    fn mapped_tensors_are_their_blocks_in_memory() {
        let dev = Device::Cpu;
        let (rows, cols) = (40, 256);
        let w = Tensor::randn(0f32, 0.05, (rows, cols), &dev).unwrap();
        let x = Tensor::randn(0f32, 1.0, (3, cols), &dev).unwrap();
        for dtype in [
            GgmlDType::Q8_0,
            GgmlDType::Q5_0,
            GgmlDType::Q4K,
            GgmlDType::Q6K,
            GgmlDType::Q4_0,
            GgmlDType::F16,
        ] {
            let q = QTensor::quantize(&w, dtype).unwrap();
            let data = q.data().unwrap();
            // Two tensors after a 32-byte header, as a GGUF file's data section holds them.
            let mut file = tempfile::tempfile().unwrap();
            let mut bytes = vec![7u8; 32];
            bytes.extend_from_slice(&data);
            bytes.extend_from_slice(&data);
            std::io::Write::write_all(&mut file, &bytes).unwrap();
            // SAFETY: a private temporary file nothing else can reach, mapped read-only.
            let map = unsafe { memmap2::Mmap::map(&file) }.unwrap();
            let map = Arc::new(FileBytes::Map(map));
            let mapped = |start: usize| {
                Stored::Mapped(Arc::new(
                    Mapped::new(Arc::clone(&map), start, dtype, &[rows, cols]).unwrap(),
                ))
            };
            let (a, b) = (mapped(32), mapped(32 + data.len()));
            assert_eq!(
                Mapped::new(Arc::clone(&map), 34 + data.len(), dtype, &[rows, cols]).err(),
                Some(Misplaced::PastEnd { file: map.len() })
            );
            assert!(matches!(
                Mapped::new(Arc::clone(&map), 33, dtype, &[rows, cols]).err(),
                Some(Misplaced::Misaligned { start: 33, .. })
            ));
            let in_memory = if dtype == GgmlDType::F16 {
                Stored::Dense(w.to_dtype(DType::F16).unwrap())
            } else {
                Stored::Quantized(Arc::new(q))
            };

            let ids = Tensor::new(&[0u32, 39, 5, 5], &dev).unwrap();
            let expected = Embedding::new(in_memory.clone()).lookup(&ids).unwrap();
            let table = Embedding::new(a.clone());
            let got = table.lookup(&ids).unwrap();
            assert_eq!(rel_rms(&got, &expected), 0.0, "{dtype:?} lookups");
            assert!(table.lookup(&Tensor::new(&[40u32], &dev).unwrap()).is_err());

            let expected = Linear::fused(&[in_memory.clone(), in_memory], &dev)
                .unwrap()
                .forward(&x)
                .unwrap();
            let got = Linear::fused(&[a, b], &dev).unwrap().forward(&x).unwrap();
            assert_eq!(got.dims(), &[3, 2 * rows]);
            // f16 is kept half from the map and widened in memory: products in another order.
            let tolerance = if dtype == GgmlDType::F16 { 1e-5 } else { 0.0 };
            assert!(rel_rms(&got, &expected) <= tolerance, "{dtype:?} products");
        }
    }

    #[test]
    fn q5_0_becomes_q8_0_value_for_value() {
        let dev = Device::Cpu;
        let w = Tensor::randn(0f32, 1.0, (7, 64), &dev).unwrap();
        let q5 = QTensor::quantize(&w, GgmlDType::Q5_0).unwrap();
        let q8 = q5_0_as_q8_0(&q5, &dev).unwrap();
        assert_eq!(q8.dtype(), GgmlDType::Q8_0);
        let (a, b) = (q5.dequantize(&dev).unwrap(), q8.dequantize(&dev).unwrap());
        let diff: f32 = (a - b)
            .unwrap()
            .abs()
            .unwrap()
            .max_all()
            .unwrap()
            .to_scalar()
            .unwrap();
        assert_eq!(diff, 0.0);
    }

    /// A quantized projection is the matmul with its dequantized weights, up to the rounding
    /// of the activations (QMatMul quantizes them to 8 bits per call); fused parts, of one block
    /// type or several, are the parts side by side.
    #[test]
    fn quantized_projections_match_their_dequantized_weights() {
        let dev = Device::Cpu;
        let x = Tensor::randn(0f32, 1.0, (5, 256), &dev).unwrap();
        let w = |rows: usize, seed: f64| {
            (Tensor::randn(0f32, 0.02, (rows, 256), &dev).unwrap() + seed).unwrap()
        };
        let parts = [w(96, 0.0), w(32, 0.001), w(32, -0.001)];
        for dtypes in [
            [GgmlDType::Q8_0; 3],
            [GgmlDType::Q4K; 3],
            [GgmlDType::Q4K, GgmlDType::Q4K, GgmlDType::Q6K],
            [GgmlDType::Q5_0, GgmlDType::Q5_0, GgmlDType::Q8_0],
        ] {
            let stored: Vec<Stored> = parts
                .iter()
                .zip(dtypes)
                .map(|(p, d)| Stored::Quantized(Arc::new(QTensor::quantize(p, d).unwrap())))
                .collect();
            let linear = Linear::fused(&stored, &dev).unwrap();
            let Linear::Quantized(matrices) = &linear else {
                panic!("quantized parts make a quantized projection")
            };
            // Without redraft's kernel Q5_0 parts run as Q8_0 (exactly), so they fuse with
            // Q8_0 ones; with it they stay packed.
            let kind = |d: GgmlDType| match d {
                GgmlDType::Q5_0 if !Q8Matrix::available() => GgmlDType::Q8_0,
                d => d,
            };
            let distinct = 1 + dtypes
                .windows(2)
                .filter(|p| kind(p[0]) != kind(p[1]))
                .count();
            assert_eq!(
                matrices.len(),
                distinct,
                "{dtypes:?}: runs of one type are fused"
            );
            let dense: Vec<Tensor> = stored.iter().map(|s| s.dense(&dev).unwrap()).collect();
            let expected = x
                .matmul(&Tensor::cat(&dense, 0).unwrap().t().unwrap())
                .unwrap();
            let got = linear.forward(&x).unwrap();
            assert_eq!(got.dims(), &[5, 160]);
            let err = rel_rms(&got, &expected);
            assert!(err < 0.01, "{dtypes:?}: {err}");
        }
        let dense = Linear::fused(&parts.clone().map(Stored::Dense), &dev).unwrap();
        let expected = x
            .matmul(&Tensor::cat(&parts, 0).unwrap().t().unwrap())
            .unwrap();
        assert_eq!(rel_rms(&dense.forward(&x).unwrap(), &expected), 0.0);
    }
}
