//! What llama.cpp calls a model's weights: a file's type (`general.file_type`, llama.cpp's
//! `llama_ftype`) and a tensor's type (ggml's `ggml_type_name`), the names llama.cpp prints on
//! load and Ollama shows as a model's quantization level (`Q4_K_M`, `Q8_0`, `F16`).

use candle_core::quantized::GgmlDType;

/// The name of a `general.file_type` (`LLAMA_FTYPE_MOSTLY_*` without its prefix); `None` for a
/// number llama.cpp never gave (some were retired, like 4 to 6 of the old Q4 variants).
pub fn file_type_name(file_type: u64) -> Option<&'static str> {
    Some(match file_type {
        0 => "F32",
        1 => "F16",
        2 => "Q4_0",
        3 => "Q4_1",
        7 => "Q8_0",
        8 => "Q5_0",
        9 => "Q5_1",
        10 => "Q2_K",
        11 => "Q3_K_S",
        12 => "Q3_K_M",
        13 => "Q3_K_L",
        14 => "Q4_K_S",
        15 => "Q4_K_M",
        16 => "Q5_K_S",
        17 => "Q5_K_M",
        18 => "Q6_K",
        19 => "IQ2_XXS",
        20 => "IQ2_XS",
        21 => "Q2_K_S",
        22 => "IQ3_XS",
        23 => "IQ3_XXS",
        24 => "IQ1_S",
        25 => "IQ4_NL",
        26 => "IQ3_S",
        27 => "IQ3_M",
        28 => "IQ2_S",
        29 => "IQ2_M",
        30 => "IQ4_XS",
        31 => "IQ1_M",
        32 => "BF16",
        36 => "TQ1_0",
        37 => "TQ2_0",
        38 => "MXFP4",
        _ => return None,
    })
}

/// The `general.file_type` of a file whose matrices are mostly `dtype`, as llama.cpp guesses it
/// for a file that states none (a K type as its `_M` mix); `None` for a type no file is of
/// (Q8_1 and Q8_K are the dot products' scratch types).
pub fn file_type_of(dtype: GgmlDType) -> Option<u32> {
    Some(match dtype {
        GgmlDType::F32 => 0,
        GgmlDType::F16 => 1,
        GgmlDType::Q4_0 => 2,
        GgmlDType::Q4_1 => 3,
        GgmlDType::Q8_0 => 7,
        GgmlDType::Q5_0 => 8,
        GgmlDType::Q5_1 => 9,
        GgmlDType::Q2K => 10,
        GgmlDType::Q3K => 12,
        GgmlDType::Q4K => 15,
        GgmlDType::Q5K => 17,
        GgmlDType::Q6K => 18,
        GgmlDType::BF16 => 32,
        GgmlDType::Q8_1 | GgmlDType::Q8K => return None,
    })
}

/// A tensor type's name (a safetensors checkpoint's `F32`, `F16` and `BF16` are these too).
pub fn type_name(dtype: GgmlDType) -> &'static str {
    match dtype {
        GgmlDType::F32 => "F32",
        GgmlDType::F16 => "F16",
        GgmlDType::BF16 => "BF16",
        GgmlDType::Q4_0 => "Q4_0",
        GgmlDType::Q4_1 => "Q4_1",
        GgmlDType::Q5_0 => "Q5_0",
        GgmlDType::Q5_1 => "Q5_1",
        GgmlDType::Q8_0 => "Q8_0",
        GgmlDType::Q8_1 => "Q8_1",
        GgmlDType::Q2K => "Q2_K",
        GgmlDType::Q3K => "Q3_K",
        GgmlDType::Q4K => "Q4_K",
        GgmlDType::Q5K => "Q5_K",
        GgmlDType::Q6K => "Q6_K",
        GgmlDType::Q8K => "Q8_K",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// llama.cpp's `llama_model_ftype_name`: a Q4_K_M file mixes Q4_K and Q6_K matrices, so
    /// only its stated type says Q4_K_M.
    #[test]
    fn file_types_are_named_as_llama_cpp_names_them() {
        for (file_type, name) in [
            (0, Some("F32")),
            (1, Some("F16")),
            (7, Some("Q8_0")),
            (15, Some("Q4_K_M")),
            (18, Some("Q6_K")),
            (32, Some("BF16")),
            (38, Some("MXFP4")),
            (4, None),
            (999, None),
        ] {
            assert_eq!(file_type_name(file_type), name, "{file_type}");
        }
        assert_eq!(type_name(GgmlDType::Q4K), "Q4_K");
        for (dtype, name) in [
            (GgmlDType::F32, "F32"),
            (GgmlDType::Q8_0, "Q8_0"),
            (GgmlDType::Q4K, "Q4_K_M"),
            (GgmlDType::BF16, "BF16"),
        ] {
            let file_type = file_type_of(dtype).unwrap();
            assert_eq!(file_type_name(u64::from(file_type)), Some(name));
        }
        assert_eq!(file_type_of(GgmlDType::Q8K), None);
        assert_eq!(type_name(GgmlDType::Q8_0), "Q8_0");
    }
}
