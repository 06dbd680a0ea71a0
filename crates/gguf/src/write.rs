//! Streaming GGUF v3 writer: header first, then tensors one at a time, into a
//! temporary file that becomes the destination only when complete.

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::types::{GgmlType, TensorInfo, Value};
use crate::DEFAULT_ALIGNMENT;

/// Writes a GGUF file whose tensor table is known up front and whose tensor
/// bytes arrive one tensor at a time, in table order.
///
/// Nothing appears at the destination until [`GgufWriter::finish`]: the bytes
/// go to `<dest>.partial`, which is fsynced and renamed. Dropping an
/// unfinished writer removes the partial file.
pub struct GgufWriter {
    out: Option<BufWriter<File>>,
    tmp: PathBuf,
    dest: PathBuf,
    tensors: Vec<TensorInfo>,
    next: usize,
    alignment: u64,
    pos: u64,
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

impl GgufWriter {
    /// Starts a file with `metadata` and the tensors `(name, dims, type)`.
    pub fn create(
        dest: impl AsRef<Path>,
        metadata: &[(String, Value)],
        tensors: &[(String, Vec<u64>, GgmlType)],
    ) -> io::Result<GgufWriter> {
        let dest = dest.as_ref().to_path_buf();
        let alignment = metadata
            .iter()
            .find(|(k, _)| k == "general.alignment")
            .and_then(|(_, v)| v.as_u64())
            .unwrap_or(DEFAULT_ALIGNMENT);
        let mut infos = Vec::with_capacity(tensors.len());
        let mut offset = 0u64;
        for (name, dims, dtype) in tensors {
            let mut info = TensorInfo {
                name: name.clone(),
                dims: dims.clone(),
                dtype: *dtype,
                offset,
            };
            let len = info
                .byte_len()
                .ok_or_else(|| invalid(format!("tensor {name}: row not a whole block")))?;
            info.offset = offset;
            offset = (offset + len).div_ceil(alignment) * alignment;
            infos.push(info);
        }
        let mut tmp = dest.clone().into_os_string();
        tmp.push(".partial");
        let tmp = PathBuf::from(tmp);
        let mut w = GgufWriter {
            out: Some(BufWriter::with_capacity(1 << 20, File::create(&tmp)?)),
            tmp,
            dest,
            tensors: infos,
            next: 0,
            alignment,
            pos: 0,
        };
        w.header(metadata)?;
        Ok(w)
    }

    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.out.as_mut().expect("writer open").write_all(bytes)?;
        self.pos += bytes.len() as u64;
        Ok(())
    }

    fn put_str(&mut self, s: &str) -> io::Result<()> {
        self.put(&(s.len() as u64).to_le_bytes())?;
        self.put(s.as_bytes())
    }

    fn put_value(&mut self, v: &Value) -> io::Result<()> {
        match v {
            Value::U8(x) => self.put(&[*x]),
            Value::I8(x) => self.put(&x.to_le_bytes()),
            Value::U16(x) => self.put(&x.to_le_bytes()),
            Value::I16(x) => self.put(&x.to_le_bytes()),
            Value::U32(x) => self.put(&x.to_le_bytes()),
            Value::I32(x) => self.put(&x.to_le_bytes()),
            Value::F32(x) => self.put(&x.to_le_bytes()),
            Value::Bool(x) => self.put(&[*x as u8]),
            Value::String(s) => self.put_str(s),
            Value::U64(x) => self.put(&x.to_le_bytes()),
            Value::I64(x) => self.put(&x.to_le_bytes()),
            Value::F64(x) => self.put(&x.to_le_bytes()),
            Value::Array(ty, items) => {
                self.put(&(*ty as u32).to_le_bytes())?;
                self.put(&(items.len() as u64).to_le_bytes())?;
                for item in items {
                    if item.value_type() != *ty {
                        return Err(invalid(format!(
                            "array of {ty:?} holds a {:?}",
                            item.value_type()
                        )));
                    }
                    self.put_value(item)?;
                }
                Ok(())
            }
        }
    }

    fn pad(&mut self) -> io::Result<()> {
        let target = self.pos.div_ceil(self.alignment) * self.alignment;
        let zeros = vec![0u8; (target - self.pos) as usize];
        self.put(&zeros)
    }

    fn header(&mut self, metadata: &[(String, Value)]) -> io::Result<()> {
        self.put(b"GGUF")?;
        self.put(&3u32.to_le_bytes())?;
        self.put(&(self.tensors.len() as u64).to_le_bytes())?;
        self.put(&(metadata.len() as u64).to_le_bytes())?;
        for (key, value) in metadata {
            self.put_str(key)?;
            self.put(&(value.value_type() as u32).to_le_bytes())?;
            self.put_value(value)?;
        }
        for t in self.tensors.clone() {
            self.put_str(&t.name)?;
            self.put(&(t.dims.len() as u32).to_le_bytes())?;
            for d in &t.dims {
                self.put(&d.to_le_bytes())?;
            }
            self.put(&t.dtype.as_u32().to_le_bytes())?;
            self.put(&t.offset.to_le_bytes())?;
        }
        self.pad()
    }

    /// The tensor whose bytes are expected next, if any.
    pub fn next_tensor(&self) -> Option<&TensorInfo> {
        self.tensors.get(self.next)
    }

    /// Writes the bytes of the next tensor; `name` must match the table.
    pub fn write_tensor(&mut self, name: &str, data: &[u8]) -> io::Result<()> {
        let info = self
            .tensors
            .get(self.next)
            .ok_or_else(|| invalid(format!("tensor {name}: all tensors already written")))?;
        if info.name != name {
            return Err(invalid(format!(
                "tensor {name} written out of order; expected {}",
                info.name
            )));
        }
        let want = info.byte_len().expect("checked at create");
        if data.len() as u64 != want {
            return Err(invalid(format!(
                "tensor {name}: {} bytes given, {want} expected",
                data.len()
            )));
        }
        self.put(data)?;
        self.pad()?;
        self.next += 1;
        Ok(())
    }

    /// Flushes, fsyncs and renames the file into place.
    pub fn finish(mut self) -> io::Result<PathBuf> {
        if self.next != self.tensors.len() {
            return Err(invalid(format!(
                "{} of {} tensors written",
                self.next,
                self.tensors.len()
            )));
        }
        let out = self.out.take().expect("writer open");
        let written = out
            .into_inner()
            .map_err(|e| e.into_error())
            .and_then(|file| file.sync_all())
            .and_then(|()| fs::rename(&self.tmp, &self.dest));
        if let Err(e) = written {
            // The last bytes did not fit (a full disk): nothing half-written
            // stays behind.
            let _ = fs::remove_file(&self.tmp);
            return Err(e);
        }
        if let Some(dir) = self.dest.parent().filter(|d| !d.as_os_str().is_empty()) {
            File::open(dir)?.sync_all()?;
        }
        Ok(self.dest.clone())
    }
}

impl Drop for GgufWriter {
    fn drop(&mut self) {
        if self.out.take().is_some() {
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GgufFile;

    #[test]
    fn round_trip_and_atomicity() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("a.gguf");
        let meta = vec![
            (
                "general.architecture".to_string(),
                Value::String("x".into()),
            ),
            ("list".to_string(), Value::strings(["a", "b"])),
        ];
        let tensors = vec![
            ("t0".to_string(), vec![3], GgmlType::F32),
            ("t1".to_string(), vec![32, 2], GgmlType::Q8_0),
        ];
        let mut w = GgufWriter::create(&dest, &meta, &tensors).unwrap();
        w.write_tensor("t0", &[0u8; 12]).unwrap();
        assert!(!dest.exists(), "destination must not exist before finish");
        assert!(w.write_tensor("t0", &[0u8; 12]).is_err());
        w.write_tensor("t1", &[1u8; 68]).unwrap();
        w.finish().unwrap();
        let f = GgufFile::open(&dest).unwrap();
        assert_eq!(f.metadata, meta);
        assert_eq!(f.tensors.len(), 2);
        assert_eq!(f.tensors[1].offset % 32, 0);
        assert_eq!(f.data_offset % 32, 0);
    }

    #[test]
    fn abandoned_writer_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("b.gguf");
        let tensors = vec![("t".to_string(), vec![4], GgmlType::F32)];
        let w = GgufWriter::create(&dest, &[], &tensors).unwrap();
        drop(w);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
