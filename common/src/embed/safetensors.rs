//! The safetensors container, as far as a one-tensor embedding table needs: an 8-byte
//! little-endian header length, a JSON header naming each tensor's dtype, shape and byte
//! range, then the raw data. F16 rows are widened to f32 once, at load.

use std::collections::HashMap;

use serde::Deserialize;

use super::EmbedError;

#[derive(Deserialize)]
struct Tensor {
    dtype: String,
    shape: Vec<usize>,
    data_offsets: (usize, usize),
}

fn err(s: impl Into<String>) -> EmbedError {
    EmbedError::Weights(s.into())
}

/// The file's one 2-D tensor as (row-major f32 data, rows, columns).
pub fn single_matrix(bytes: &[u8]) -> Result<(Vec<f32>, usize, usize), EmbedError> {
    let len = bytes
        .get(..8)
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map(u64::from_le_bytes)
        .ok_or_else(|| err("shorter than its header"))?;
    let end = usize::try_from(len)
        .ok()
        .and_then(|l| l.checked_add(8))
        .filter(|&e| e <= bytes.len())
        .ok_or_else(|| err("header length runs past the end of the file"))?;
    let header: HashMap<String, serde_json::Value> = serde_json::from_slice(&bytes[8..end])
        .map_err(|e| err(format!("unreadable header: {e}")))?;
    let mut tensors = header
        .into_iter()
        .filter(|(k, _)| k != "__metadata__")
        .map(|(k, v)| {
            serde_json::from_value::<Tensor>(v)
                .map(|t| (k.clone(), t))
                .map_err(|e| err(format!("tensor {k}: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if tensors.len() != 1 {
        return Err(err(format!(
            "expected one embedding table, found {} tensors",
            tensors.len()
        )));
    }
    let (name, t) = tensors.remove(0);
    let [rows, cols] = t.shape[..] else {
        return Err(err(format!(
            "{name} has shape {:?}, not [tokens, dim]",
            t.shape
        )));
    };
    let width = match t.dtype.as_str() {
        "F16" => 2,
        "F32" => 4,
        other => return Err(err(format!("{name} is {other}; only F16 and F32 are read"))),
    };
    let data = bytes
        .get(end..)
        .and_then(|d| d.get(t.data_offsets.0..t.data_offsets.1))
        .ok_or_else(|| err(format!("{name}'s data lies outside the file")))?;
    let want = rows
        .checked_mul(cols)
        .and_then(|n| n.checked_mul(width))
        .ok_or_else(|| err("shape overflows"))?;
    if data.len() != want || cols == 0 {
        return Err(err(format!(
            "{name}: {} bytes of data for shape [{rows}, {cols}]",
            data.len()
        )));
    }
    let table = if width == 2 {
        data.chunks_exact(2)
            .map(|c| f16_to_f32(u16::from_le_bytes([c[0], c[1]])))
            .collect()
    } else {
        data.chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    };
    Ok((table, rows, cols))
}

/// IEEE 754 half to single precision, subnormals and specials included.
fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h >> 15) as u32) << 31;
    let exp = ((h >> 10) & 0x1f) as u32;
    let frac = (h & 0x3ff) as u32;
    let bits = match (exp, frac) {
        (0, 0) => sign,
        (0, f) => {
            // Subnormal: value = f × 2^-24.
            let v = f as f32 * f32::from_bits(0x3380_0000);
            return if sign != 0 { -v } else { v };
        }
        (0x1f, f) => sign | 0x7f80_0000 | (f << 13),
        (e, f) => sign | ((e + 112) << 23) | (f << 13),
    };
    f32::from_bits(bits)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn file(dtype: &str, shape: &str, data: &[u8]) -> Vec<u8> {
        let header = format!(
            r#"{{"w":{{"dtype":"{dtype}","shape":{shape},"data_offsets":[0,{}]}}}}"#,
            data.len()
        );
        let mut out = (header.len() as u64).to_le_bytes().to_vec();
        out.extend(header.as_bytes());
        out.extend(data);
        out
    }

    #[test]
    fn halves_widen_exactly() {
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc000), -2.0);
        assert_eq!(f16_to_f32(0x3555), 0.333_251_95);
        assert_eq!(f16_to_f32(0x0001), 5.960_464_5e-8);
        assert!(f16_to_f32(0x7c00).is_infinite());
    }

    #[test]
    fn reads_one_matrix() {
        let data: Vec<u8> = [0x3c00u16, 0xc000, 0, 0x3c00]
            .iter()
            .flat_map(|h| h.to_le_bytes())
            .collect();
        let (t, r, c) = single_matrix(&file("F16", "[2,2]", &data)).unwrap();
        assert_eq!((r, c), (2, 2));
        assert_eq!(t, vec![1.0, -2.0, 0.0, 1.0]);
    }

    #[test]
    fn refuses_what_it_cannot_read() {
        assert!(single_matrix(b"").is_err());
        assert!(single_matrix(&file("F16", "[2,2]", &[0; 6])).is_err());
        assert!(single_matrix(&file("I8", "[2,2]", &[0; 4])).is_err());
        assert!(single_matrix(&file("F16", "[8]", &[0; 16])).is_err());
        let mut huge = file("F16", "[1,1]", &[0; 2]);
        huge[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(single_matrix(&huge).is_err());
    }
}
