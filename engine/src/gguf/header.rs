//! A GGUF file's header (its metadata and tensor table), read by redraft itself into candle's
//! [`Content`]: every lie a header can tell is an error naming the file and the lie, found before
//! anything is sized from it or could panic on it. The checks are llama.cpp's (`gguf.cpp`): a key
//! or a tensor named twice, counts and lengths past the end of the file, an alignment that is
//! not a power of two, more than 4 dimensions, a type ggml does not define. candle's reader
//! (which redraft used before) takes the last of two keys or tensors of one name, divides by an
//! alignment of 0, and says "failed to fill whole buffer" for a file cut short.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::path::Path;

use candle_core::quantized::gguf_file::{Content, TensorInfo, Value, VersionedMagic};
use candle_core::quantized::GgmlDType;

use crate::error::{Error, Result};

/// The most metadata values (array elements included) a header may hold. A value takes 32 bytes
/// in memory however few it takes in the file (a `u8` takes 1), so a file's bytes alone do not
/// bound the memory of its metadata. The largest vocabularies (tokens, merges, token types) are
/// about a million values.
const MAX_VALUES: u64 = 1 << 24;

/// ggml's most dimensions (`GGML_MAX_DIMS`).
const MAX_DIMS: u32 = 4;

/// The header of the GGUF file `bytes` (named `path` in errors), and the alignment of its tensors'
/// offsets (`general.alignment`).
pub(super) fn read_header(bytes: &[u8], path: &Path) -> Result<(Content, u64)> {
    let mut r = Reader {
        bytes,
        at: 0,
        path,
        wide: true,
        inside: "the magic bytes".into(),
        values: 0,
    };
    if r.take(4)? != b"GGUF" {
        return Err(r.corrupt("it does not start with the GGUF magic bytes".into()));
    }
    r.inside = "the version".into();
    let version = r.u32()?;
    let magic = match version {
        1 => VersionedMagic::GgufV1,
        2 => VersionedMagic::GgufV2,
        3 => VersionedMagic::GgufV3,
        // A big-endian file's 3 read as little-endian: 0x03000000.
        v if v & 0xffff == 0 => {
            return Err(r.corrupt(format!(
                "GGUF version {v:#010x}: a big-endian file, which redraft does not read; \
                 use the little-endian file llama.cpp's converter writes by default"
            )))
        }
        v => {
            return Err(r.corrupt(format!(
                "GGUF version {v}, which redraft does not read (it reads 1 to 3)"
            )))
        }
    };
    r.wide = magic != VersionedMagic::GgufV1;
    r.inside = "the tensor and key counts".into();
    let tensor_count = r.length()?;
    let key_count = r.length()?;
    // The least bytes of a key (its name's length, a value type, one byte) and of a tensor's
    // record (its name's length, a dimension count, a type, an offset).
    let prefix = if r.wide { 8 } else { 4 };
    let least = key_count
        .saturating_mul(prefix + 4 + 1)
        .saturating_add(tensor_count.saturating_mul(prefix + 4 + 4 + 8));
    if least > r.left() {
        return Err(r.corrupt(format!(
            "the header lists {tensor_count} tensors and {key_count} metadata keys, which run \
             past the end of the file's {} bytes",
            bytes.len()
        )));
    }

    let mut metadata = HashMap::new();
    for i in 0..key_count {
        r.inside = format!("metadata key {i}");
        let key = r.string(&format!("metadata key {i}'s name"))?;
        r.inside = format!("metadata `{key}`");
        let kind = r.u32()?;
        let value = r.value(&key, kind)?;
        match metadata.entry(key) {
            Entry::Occupied(e) => {
                return Err(r.corrupt(format!("metadata key `{}` appears twice", e.key())))
            }
            Entry::Vacant(e) => e.insert(value),
        };
    }
    let alignment = alignment(&metadata, path)?;

    let mut tensor_infos = HashMap::new();
    for i in 0..tensor_count {
        r.inside = format!("tensor {i}'s record");
        let name = r.string(&format!("tensor {i}'s name"))?;
        r.inside = format!("tensor `{name}`'s record");
        let rank = r.u32()?;
        if rank > MAX_DIMS {
            return Err(r.corrupt(format!(
                "tensor `{name}` has {rank} dimensions (at most {MAX_DIMS})"
            )));
        }
        // llama.cpp's order is innermost first, candle's outermost first.
        let mut dims = (0..rank)
            .map(|_| r.length())
            .collect::<Result<Vec<u64>>>()?;
        dims.reverse();
        // llama.cpp counts elements in an i64.
        if dims
            .iter()
            .try_fold(1u64, |n, &d| n.checked_mul(d))
            .is_none_or(|n| n > i64::MAX as u64 || usize::try_from(n).is_err())
        {
            return Err(r.corrupt(format!(
                "tensor `{name}` ({dims:?}) has more elements than any file can hold"
            )));
        }
        if dims.contains(&0) {
            return Err(r.corrupt(format!(
                "tensor `{name}` ({dims:?}) has a dimension of 0; no model has one"
            )));
        }
        let ggml_dtype = block_type(r.u32()?).map_err(|why| {
            r.corrupt(format!(
                "tensor `{name}` has {why}; quantize the model again with llama.cpp's \
                 `llama-quantize` to one redraft reads (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, \
                 Q8_0, Q2_K to Q6_K)"
            ))
        })?;
        let offset = r.u64()?;
        let info = TensorInfo {
            ggml_dtype,
            // Each dimension fits in a usize: their product does.
            shape: dims.iter().map(|&d| d as usize).collect::<Vec<_>>().into(),
            offset,
        };
        match tensor_infos.entry(name) {
            Entry::Occupied(e) => {
                return Err(r.corrupt(format!(
                    "tensor `{}` appears twice in the tensor table",
                    e.key()
                )))
            }
            Entry::Vacant(e) => e.insert(info),
        };
    }

    // The tensors' data starts at the first multiple of the alignment after the table.
    let tensor_data_offset = (r.at as u64).div_ceil(alignment) * alignment;
    if tensor_count > 0 && tensor_data_offset > bytes.len() as u64 {
        return Err(r.corrupt(format!(
            "the file ends at byte {}, before its tensor data (at byte {tensor_data_offset}); \
             was it copied or downloaded in full?",
            bytes.len()
        )));
    }
    Ok((
        Content {
            magic,
            metadata,
            tensor_infos,
            tensor_data_offset,
        },
        alignment,
    ))
}

/// The file's `general.alignment` (32 where it says none): what every tensor's offset is a
/// multiple of. llama.cpp requires a power of two, stored as an unsigned 32-bit integer; the
/// integer types candle's reader took it from are accepted too, and a 64-bit 32 (the default,
/// stated: files candle read as such).
fn alignment(metadata: &HashMap<String, Value>, path: &Path) -> Result<u64> {
    const KEY: &str = "general.alignment";
    let bad = |message: String| Error::CorruptGguf {
        path: path.to_path_buf(),
        message: format!("`{KEY}` {message}"),
    };
    let n = match metadata.get(KEY) {
        None => return Ok(32),
        Some(Value::U8(v)) => *v as i64,
        Some(Value::U16(v)) => *v as i64,
        Some(Value::U32(v)) => *v as i64,
        Some(Value::I8(v)) => *v as i64,
        Some(Value::I16(v)) => *v as i64,
        Some(Value::I32(v)) => *v as i64,
        Some(Value::U64(32) | Value::I64(32)) => return Ok(32),
        Some(other) => {
            return Err(bad(format!(
                "is a {:?}, not an unsigned 32-bit integer",
                other.value_type()
            )))
        }
    };
    match u64::try_from(n) {
        Ok(n) if n.is_power_of_two() => Ok(n),
        _ => Err(bad(format!("is {n}, not a power of two"))),
    }
}

/// The block type ggml numbers `id`, or why redraft cannot read it (ggml's `ggml_type`).
fn block_type(id: u32) -> std::result::Result<GgmlDType, String> {
    use GgmlDType::*;
    Ok(match id {
        0 => F32,
        1 => F16,
        2 => Q4_0,
        3 => Q4_1,
        6 => Q5_0,
        7 => Q5_1,
        8 => Q8_0,
        9 => Q8_1,
        10 => Q2K,
        11 => Q3K,
        12 => Q4K,
        13 => Q5K,
        14 => Q6K,
        15 => Q8K,
        30 => BF16,
        _ => {
            let name = match id {
                16 => "IQ2_XXS",
                17 => "IQ2_XS",
                18 => "IQ3_XXS",
                19 => "IQ1_S",
                20 => "IQ4_NL",
                21 => "IQ3_S",
                22 => "IQ2_S",
                23 => "IQ4_XS",
                24 => "I8",
                25 => "I16",
                26 => "I32",
                27 => "I64",
                28 => "F64",
                29 => "IQ1_M",
                34 => "TQ1_0",
                35 => "TQ2_0",
                39 => "MXFP4",
                40 => "NVFP4",
                41 => "Q1_0",
                42 => "Q2_0",
                // 4, 5, 31 to 33, 36 to 38: types llama.cpp no longer reads.
                _ => {
                    return Err(format!(
                        "ggml type {id}, which llama.cpp does not read either"
                    ))
                }
            };
            return Err(format!(
                "ggml type {id} ({name}), which redraft cannot read"
            ));
        }
    })
}

/// A cursor over the header's bytes whose every read is checked against the file's end.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    path: &'a Path,
    /// Lengths and counts in 64 bits (GGUF 2 and 3), not 32 (GGUF 1).
    wide: bool,
    /// What is being read, for an error where the file ends.
    inside: String,
    /// Metadata values read so far ([`MAX_VALUES`]).
    values: u64,
}

impl Reader<'_> {
    fn corrupt(&self, message: String) -> Error {
        Error::CorruptGguf {
            path: self.path.to_path_buf(),
            message,
        }
    }

    fn left(&self) -> u64 {
        (self.bytes.len() - self.at) as u64
    }

    fn take(&mut self, n: usize) -> Result<&[u8]> {
        if n as u64 > self.left() {
            return Err(self.corrupt(format!(
                "the file ends at byte {}, inside {}; was it copied or downloaded in full?",
                self.bytes.len(),
                self.inside
            )));
        }
        let bytes = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(bytes)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// A length or count: 64 bits, or 32 in GGUF 1.
    fn length(&mut self) -> Result<u64> {
        if self.wide {
            self.u64()
        } else {
            self.u32().map(u64::from)
        }
    }

    /// A string (`what`, in errors): its length, then its bytes. As candle's reader and
    /// llama.cpp's converters have it, bytes that are not UTF-8 are replaced and trailing NULs
    /// dropped.
    fn string(&mut self, what: &str) -> Result<String> {
        let len = self.length()?;
        if len > self.left() {
            return Err(self.corrupt(format!(
                "{what} is a string of {len} bytes, which runs past the end of the file's {} bytes",
                self.bytes.len()
            )));
        }
        let bytes = self.take(len as usize)?;
        let end = bytes.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
        Ok(String::from_utf8_lossy(&bytes[..end]).into_owned())
    }

    /// Metadata `key`'s value (or an element of it) of GGUF value type `kind`.
    fn value(&mut self, key: &str, kind: u32) -> Result<Value> {
        self.values += 1;
        if self.values > MAX_VALUES {
            return Err(self.corrupt(format!(
                "the metadata holds more than {MAX_VALUES} values (at `{key}`), more than any \
                 model's vocabulary needs"
            )));
        }
        Ok(match kind {
            0 => Value::U8(self.array::<1>()?[0]),
            1 => Value::I8(i8::from_le_bytes(self.array()?)),
            2 => Value::U16(u16::from_le_bytes(self.array()?)),
            3 => Value::I16(i16::from_le_bytes(self.array()?)),
            4 => Value::U32(self.u32()?),
            5 => Value::I32(i32::from_le_bytes(self.array()?)),
            6 => Value::F32(f32::from_le_bytes(self.array()?)),
            7 => match self.array::<1>()?[0] {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                b => {
                    return Err(self.corrupt(format!("metadata `{key}` is a boolean stored as {b}")))
                }
            },
            8 => Value::String(self.string(&format!("metadata `{key}`"))?),
            9 => {
                let of = self.u32()?;
                let len = self.length()?;
                // The least bytes one element takes.
                let least: u64 = match of {
                    0 | 1 | 7 => 1,
                    2 | 3 => 2,
                    4..=6 => 4,
                    8 if !self.wide => 4,
                    8 | 10..=12 => 8,
                    9 => {
                        return Err(self.corrupt(format!(
                            "metadata `{key}` is an array of arrays, which llama.cpp does not \
                             read either"
                        )))
                    }
                    other => return Err(self.unknown_type(key, other)),
                };
                if len.saturating_mul(least) > self.left() {
                    return Err(self.corrupt(format!(
                        "metadata `{key}` is an array of {len} elements, which runs past the end \
                         of the file's {} bytes",
                        self.bytes.len()
                    )));
                }
                let values = (0..len)
                    .map(|_| self.value(key, of))
                    .collect::<Result<Vec<_>>>()?;
                Value::Array(values)
            }
            10 => Value::U64(self.u64()?),
            11 => Value::I64(i64::from_le_bytes(self.array()?)),
            12 => Value::F64(f64::from_le_bytes(self.array()?)),
            other => return Err(self.unknown_type(key, other)),
        })
    }

    fn unknown_type(&self, key: &str, kind: u32) -> Error {
        self.corrupt(format!(
            "metadata `{key}` has value type {kind}, which GGUF does not define"
        ))
    }
}

#[cfg(test)]
mod tests {
    use candle_core::quantized::{gguf_file, QTensor};
    use candle_core::{Device, Tensor};

    use super::*;

    /// A file of every value type (arrays of each, a string with trailing NULs) and tensors of
    /// several block types, written by candle's writer with `alignment` stated (or not).
    fn every_kind(alignment: Option<u32>) -> Vec<u8> {
        let scalars = [
            Value::U8(7),
            Value::I8(-7),
            Value::U16(700),
            Value::I16(-700),
            Value::U32(70_000),
            Value::I32(-70_000),
            Value::F32(0.5),
            Value::Bool(true),
            Value::String("qwen2\0\0".into()),
            Value::U64(1 << 40),
            Value::I64(-(1 << 40)),
            Value::F64(-0.25),
        ];
        let mut metadata: Vec<(String, Value)> = scalars
            .iter()
            .enumerate()
            .flat_map(|(i, v)| {
                [
                    (format!("scalar.{i}"), v.clone()),
                    (format!("array.{i}"), Value::Array(vec![v.clone(); 3])),
                ]
            })
            .collect();
        metadata.push(("array.empty".into(), Value::Array(vec![])));
        if let Some(n) = alignment {
            metadata.push(("general.alignment".into(), Value::U32(n)));
        }
        let ramp = |n: usize| Tensor::arange(0f32, n as f32, &Device::Cpu).unwrap();
        let tensors = [
            ("a.weight", GgmlDType::F32, ramp(6).reshape((2, 3)).unwrap()),
            (
                "b.weight",
                GgmlDType::F16,
                ramp(64).reshape((2, 32)).unwrap(),
            ),
            (
                "c.weight",
                GgmlDType::Q8_0,
                ramp(64).reshape((2, 32)).unwrap(),
            ),
            (
                "d.weight",
                GgmlDType::Q4K,
                ramp(512).reshape((2, 256)).unwrap(),
            ),
            (
                "e.weight",
                GgmlDType::F32,
                ramp(24).reshape((2, 3, 2, 2)).unwrap(),
            ),
        ]
        .map(|(name, dtype, t)| (name, QTensor::quantize(&t, dtype).unwrap()));
        let metadata: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
        let tensors: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (*k, v)).collect();
        let mut out = std::io::Cursor::new(Vec::new());
        gguf_file::write(&mut out, &metadata, &tensors).unwrap();
        out.into_inner()
    }

    /// What a header says, comparably (`Value` has no `PartialEq`): its keys and values, tensors
    /// and data offset, in name order.
    fn said(content: &Content) -> String {
        let mut metadata: Vec<_> = content.metadata.iter().collect();
        metadata.sort_by_key(|(k, _)| *k);
        let mut tensors: Vec<_> = content.tensor_infos.iter().collect();
        tensors.sort_by_key(|(k, _)| *k);
        format!(
            "{:?} {metadata:?} {tensors:?} {}",
            content.magic, content.tensor_data_offset
        )
    }

    /// On a well-formed file redraft's reader reads what candle's does, with the default
    /// alignment and a stated one.
    #[test]
    fn a_well_formed_header_reads_as_candle_reads_it() {
        for alignment in [None, Some(32), Some(64), Some(1)] {
            let bytes = every_kind(alignment);
            let (ours, aligned) = read_header(&bytes, Path::new("m.gguf")).unwrap();
            let candle = Content::read(&mut std::io::Cursor::new(&bytes)).unwrap();
            assert_eq!(said(&ours), said(&candle), "alignment {alignment:?}");
            assert_eq!(aligned, alignment.map_or(32, u64::from));
            assert!(matches!(
                &ours.metadata["scalar.8"],
                Value::String(s) if s == "qwen2"
            ));
        }
    }
}
