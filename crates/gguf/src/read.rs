//! Header reader and validator.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};

use crate::types::{GgmlType, TensorInfo, Value, ValueType};
use crate::{DEFAULT_ALIGNMENT, MAGIC};

/// Why a file is not a usable GGUF model. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    #[error("model file {path} does not exist; pass a path to a .gguf file or run `reverie model fetch`")]
    Missing { path: PathBuf },
    #[error("cannot read model file {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{path} is not a GGUF file (it starts with {found:02x?}, not \"GGUF\"); is it a safetensors or PyTorch file? Convert it with llama.cpp's convert_hf_to_gguf.py")]
    NotGguf { path: PathBuf, found: Vec<u8> },
    #[error("{path} is GGUF version {version}; only versions 2 and 3 are supported")]
    UnsupportedVersion { path: PathBuf, version: u32 },
    #[error("{path} is truncated: {what} needs {needed} bytes but the file has {size}; the download or copy was cut short, fetch it again")]
    Truncated {
        path: PathBuf,
        what: String,
        needed: u64,
        size: u64,
    },
    #[error("{path} is corrupt: {reason}")]
    Corrupt { path: PathBuf, reason: String },
    #[error("{path}: tensor {tensor} has type id {type_id}, which Reverie does not know")]
    UnsupportedTensorType {
        path: PathBuf,
        tensor: String,
        type_id: u32,
    },
}

/// A parsed GGUF header: metadata and the tensor table. Tensor bytes are not
/// read; use [`GgufFile::data_offset`] with a tensor's offset to find them.
#[derive(Debug, Clone)]
pub struct GgufFile {
    pub path: PathBuf,
    pub version: u32,
    pub metadata: Vec<(String, Value)>,
    pub tensors: Vec<TensorInfo>,
    pub data_offset: u64,
    pub file_size: u64,
}

/// Largest data alignment accepted (llama.cpp writes 32).
const MAX_ALIGNMENT: u64 = 1 << 20;
/// Most tensors a file may declare.
const MAX_TENSORS: u64 = 1 << 20;
/// Most metadata entries a file may declare.
const MAX_METADATA: u64 = 1 << 20;
/// Most items in one metadata array (vocabularies have about 10^5–10^6).
const MAX_ARRAY_ITEMS: u64 = 1 << 23;

struct Cursor<R> {
    inner: R,
    pos: u64,
    size: u64,
    path: PathBuf,
}

impl<R: Read> Cursor<R> {
    fn bytes(&mut self, n: u64, what: &str) -> Result<Vec<u8>, GgufError> {
        let end = self.pos.checked_add(n).filter(|end| *end <= self.size);
        if end.is_none() {
            return Err(GgufError::Truncated {
                path: self.path.clone(),
                what: what.to_string(),
                needed: self.pos.saturating_add(n),
                size: self.size,
            });
        }
        let mut buf = vec![0u8; n as usize];
        self.inner
            .read_exact(&mut buf)
            .map_err(|source| GgufError::Io {
                path: self.path.clone(),
                source,
            })?;
        self.pos += n;
        Ok(buf)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], GgufError> {
        let v = self.bytes(N as u64, what)?;
        Ok(v.try_into().expect("length checked"))
    }

    fn u32(&mut self, what: &str) -> Result<u32, GgufError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &str) -> Result<u64, GgufError> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    fn corrupt(&self, reason: String) -> GgufError {
        GgufError::Corrupt {
            path: self.path.clone(),
            reason,
        }
    }

    /// A count of items of at least `item_bytes` each, at most `max`. One
    /// that claims more than the bytes left, or more than any real model
    /// has, is corrupt; checking first avoids huge allocations on garbage.
    fn count(&mut self, what: &str, item_bytes: u64, max: u64) -> Result<u64, GgufError> {
        let n = self.u64(what)?;
        let left = self.size.saturating_sub(self.pos);
        if n.saturating_mul(item_bytes) > left {
            return Err(self.corrupt(format!(
                "{what} is {n}, more than the {left} bytes left in the file can hold"
            )));
        }
        if n > max {
            return Err(self.corrupt(format!("{what} is {n}; no model has more than {max}")));
        }
        Ok(n)
    }

    fn string(&mut self, what: &str) -> Result<String, GgufError> {
        let n = self.count(what, 1, u64::MAX)?;
        let raw = self.bytes(n, what)?;
        String::from_utf8(raw).map_err(|_| self.corrupt(format!("{what} is not valid UTF-8")))
    }

    fn value(&mut self, ty: ValueType, key: &str) -> Result<Value, GgufError> {
        Ok(match ty {
            ValueType::U8 => Value::U8(self.array::<1>(key)?[0]),
            ValueType::I8 => Value::I8(self.array::<1>(key)?[0] as i8),
            ValueType::U16 => Value::U16(u16::from_le_bytes(self.array(key)?)),
            ValueType::I16 => Value::I16(i16::from_le_bytes(self.array(key)?)),
            ValueType::U32 => Value::U32(self.u32(key)?),
            ValueType::I32 => Value::I32(i32::from_le_bytes(self.array(key)?)),
            ValueType::F32 => Value::F32(f32::from_le_bytes(self.array(key)?)),
            ValueType::Bool => Value::Bool(self.array::<1>(key)?[0] != 0),
            ValueType::String => Value::String(self.string(key)?),
            ValueType::U64 => Value::U64(self.u64(key)?),
            ValueType::I64 => Value::I64(i64::from_le_bytes(self.array(key)?)),
            ValueType::F64 => Value::F64(f64::from_le_bytes(self.array(key)?)),
            ValueType::Array => {
                let raw = self.u32(key)?;
                let item = ValueType::from_u32(raw)
                    .filter(|t| *t != ValueType::Array)
                    .ok_or_else(|| self.corrupt(format!("{key}: bad array item type {raw}")))?;
                let n = self.count(key, item.min_bytes(), MAX_ARRAY_ITEMS)?;
                // Capacity is never taken from the file: it grows as items
                // are actually read.
                let mut items = Vec::new();
                for _ in 0..n {
                    items.push(self.value(item, key)?);
                }
                Value::Array(item, items)
            }
        })
    }
}

impl GgufFile {
    /// Reads and validates the header of `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<GgufFile, GgufError> {
        let path = path.as_ref().to_path_buf();
        let file = File::open(&path).map_err(|source| match source.kind() {
            io::ErrorKind::NotFound => GgufError::Missing { path: path.clone() },
            _ => GgufError::Io {
                path: path.clone(),
                source,
            },
        })?;
        let size = file
            .metadata()
            .map_err(|source| GgufError::Io {
                path: path.clone(),
                source,
            })?
            .len();
        GgufFile::read_from(path, BufReader::with_capacity(1 << 20, file), size)
    }

    /// Reads and validates a header from `reader`, which holds `size`
    /// bytes; `path` names it in errors.
    pub fn read_from<R: Read>(
        path: impl Into<PathBuf>,
        reader: R,
        size: u64,
    ) -> Result<GgufFile, GgufError> {
        let path = path.into();
        let mut c = Cursor {
            inner: reader,
            pos: 0,
            size,
            path: path.clone(),
        };
        let magic = if size >= 4 {
            c.array::<4>("magic")?
        } else {
            return Err(GgufError::NotGguf {
                path,
                found: Vec::new(),
            });
        };
        if magic != MAGIC {
            return Err(GgufError::NotGguf {
                path,
                found: magic.to_vec(),
            });
        }
        let version = c.u32("version")?;
        if !(2..=3).contains(&version) {
            return Err(GgufError::UnsupportedVersion { path, version });
        }
        // A tensor entry is at least 8 (name length) + 4 + 8 + 4 + 8 bytes; a
        // metadata entry at least 8 + 4 + 1.
        let n_tensors = c.count("tensor count", 32, MAX_TENSORS)?;
        let n_kv = c.count("metadata count", 13, MAX_METADATA)?;
        let mut metadata = Vec::new();
        for _ in 0..n_kv {
            let key = c.string("metadata key")?;
            let raw = c.u32(&key)?;
            let ty = ValueType::from_u32(raw)
                .ok_or_else(|| c.corrupt(format!("metadata {key} has unknown type {raw}")))?;
            let value = c.value(ty, &key)?;
            metadata.push((key, value));
        }
        let mut tensors = Vec::new();
        for _ in 0..n_tensors {
            let name = c.string("tensor name")?;
            let n_dims = c.u32(&name)?;
            if n_dims == 0 || n_dims > 4 {
                return Err(c.corrupt(format!("tensor {name} has {n_dims} dimensions")));
            }
            let dims = (0..n_dims)
                .map(|_| c.u64(&name))
                .collect::<Result<Vec<_>, _>>()?;
            let type_id = c.u32(&name)?;
            let dtype =
                GgmlType::from_u32(type_id).ok_or_else(|| GgufError::UnsupportedTensorType {
                    path: path.clone(),
                    tensor: name.clone(),
                    type_id,
                })?;
            let offset = c.u64(&name)?;
            if dims
                .iter()
                .try_fold(1u64, |a, d| a.checked_mul(*d))
                .is_none()
            {
                return Err(c.corrupt(format!(
                    "tensor {name} has dimensions {dims:?}, whose product overflows"
                )));
            }
            tensors.push(TensorInfo {
                name,
                dims,
                dtype,
                offset,
            });
        }
        let alignment = metadata
            .iter()
            .find(|(k, _)| k == "general.alignment")
            .and_then(|(_, v)| v.as_u64())
            .unwrap_or(DEFAULT_ALIGNMENT);
        if alignment == 0 || !alignment.is_power_of_two() || alignment > MAX_ALIGNMENT {
            return Err(c.corrupt(format!("general.alignment is {alignment}")));
        }
        let data_offset = c
            .pos
            .div_ceil(alignment)
            .checked_mul(alignment)
            .ok_or_else(|| c.corrupt(format!("general.alignment is {alignment}")))?;
        let file = GgufFile {
            path,
            version,
            metadata,
            tensors,
            data_offset,
            file_size: size,
        };
        file.check_tensor_bounds()?;
        Ok(file)
    }

    fn check_tensor_bounds(&self) -> Result<(), GgufError> {
        for t in &self.tensors {
            let len = t.byte_len().ok_or_else(|| GgufError::Corrupt {
                path: self.path.clone(),
                reason: format!(
                    "tensor {} has row length {} that is not a multiple of its {:?} block",
                    t.name, t.dims[0], t.dtype
                ),
            })?;
            let end = self
                .data_offset
                .checked_add(t.offset)
                .and_then(|e| e.checked_add(len));
            match end {
                Some(end) if end <= self.file_size => {}
                _ => {
                    return Err(GgufError::Truncated {
                        path: self.path.clone(),
                        what: format!("tensor {}", t.name),
                        needed: end.unwrap_or(u64::MAX),
                        size: self.file_size,
                    })
                }
            }
        }
        Ok(())
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    pub fn architecture(&self) -> Option<&str> {
        self.get("general.architecture").and_then(Value::as_str)
    }

    pub fn name(&self) -> Option<&str> {
        self.get("general.name").and_then(Value::as_str)
    }

    pub fn chat_template(&self) -> Option<&str> {
        self.get("tokenizer.chat_template").and_then(Value::as_str)
    }

    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::{self, Arch, SynthConfig};
    use std::io::Write;

    fn tiny(dir: &Path) -> PathBuf {
        let p = dir.join("m.gguf");
        synth::write(&p, &SynthConfig::tiny(Arch::Llama)).unwrap();
        p
    }

    #[test]
    fn synthetic_model_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let f = GgufFile::open(tiny(dir.path())).unwrap();
        assert_eq!(f.version, 3);
        assert_eq!(f.architecture(), Some("llama"));
        assert!(f.chat_template().unwrap().contains("<|im_start|>"));
        assert!(f.tensor("blk.0.attn_q.weight").is_some());
    }

    #[test]
    fn missing_file_says_so() {
        let err = GgufFile::open("/nonexistent/model.gguf").unwrap_err();
        assert!(matches!(err, GgufError::Missing { .. }));
        assert!(err.to_string().contains("/nonexistent/model.gguf"));
    }

    #[test]
    fn truncated_file_names_the_tensor() {
        let dir = tempfile::tempdir().unwrap();
        let p = tiny(dir.path());
        let len = std::fs::metadata(&p).unwrap().len();
        let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
        f.set_len(len - 100).unwrap();
        let err = GgufFile::open(&p).unwrap_err().to_string();
        assert!(err.contains("truncated") && err.contains("m.gguf"), "{err}");
    }

    #[test]
    fn garbage_is_not_gguf() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.gguf");
        std::fs::File::create(&p)
            .unwrap()
            .write_all(b"PK\x03\x04 definitely a zip")
            .unwrap();
        let err = GgufFile::open(&p).unwrap_err().to_string();
        assert!(err.contains("not a GGUF file"), "{err}");
    }

    #[test]
    fn absurd_counts_are_corrupt_not_oom() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.gguf");
        let mut bytes = b"GGUF".to_vec();
        bytes.extend(3u32.to_le_bytes());
        bytes.extend(u64::MAX.to_le_bytes());
        bytes.extend(0u64.to_le_bytes());
        std::fs::write(&p, bytes).unwrap();
        let err = GgufFile::open(&p).unwrap_err().to_string();
        assert!(
            err.contains("corrupt") && err.contains("tensor count"),
            "{err}"
        );
    }
}
