//! Array and per-CPU array maps (and global data sections, which are
//! one-entry arrays). Value `k` of CPU `c` lives at `(k * ncpus + c) *
//! stride` in one buffer.

#![forbid(unsafe_code)]

use super::{stride, MapError, BPF_EXIST, BPF_NOEXIST};
use crate::mem::GuardedBuf;
use nfkit_object::MapSpec;
use std::sync::Arc;

#[derive(Debug)]
pub struct ArrayMap {
    pub buf: Arc<GuardedBuf>,
    pub stride: usize,
    pub value_size: usize,
    pub max: u32,
    pub ncpus: u32,
}

impl ArrayMap {
    pub fn new(spec: &MapSpec, ncpus: u32) -> Result<ArrayMap, String> {
        let max = spec.max_entries.max(1);
        let stride = stride(spec.value_size);
        let bytes = (max as usize)
            .checked_mul(ncpus as usize)
            .and_then(|n| n.checked_mul(stride))
            .filter(|&b| b <= 1 << 31)
            .ok_or_else(|| format!("{max} entries of {} bytes are too large", spec.value_size))?;
        let buf = GuardedBuf::pooled(bytes).map_err(|e| e.to_string())?;
        Ok(ArrayMap {
            buf: Arc::new(buf),
            stride,
            value_size: spec.value_size as usize,
            max,
            ncpus,
        })
    }

    /// Sets the values of entries 0, 1, ... (CPU 0) from `data`, their
    /// values back to back (a prefix; what it does not cover stays).
    pub fn init(&self, data: &[u8]) {
        for (k, chunk) in data.chunks(self.value_size.max(1)).enumerate() {
            if let Some(off) = self.offset(k as u32, 0) {
                let _ = self.buf.write(off, chunk);
            }
        }
    }

    /// Byte offset of value `k` on `cpu`.
    #[inline]
    pub fn offset(&self, k: u32, cpu: u32) -> Option<usize> {
        if k >= self.max || cpu >= self.ncpus {
            return None;
        }
        Some((k as usize * self.ncpus as usize + cpu as usize) * self.stride)
    }

    pub fn read_value(&self, off: usize) -> Vec<u8> {
        let mut v = vec![0u8; self.value_size];
        let _ = self.buf.read(off, &mut v);
        v
    }

    /// The value (per-CPU: every CPU's, each padded to 8 bytes).
    pub fn read_all(&self, k: u32) -> Result<Option<Vec<u8>>, MapError> {
        if k >= self.max {
            return Ok(None);
        }
        if self.ncpus == 1 {
            return Ok(self.offset(k, 0).map(|o| self.read_value(o)));
        }
        let mut out = vec![0u8; self.stride * self.ncpus as usize];
        for c in 0..self.ncpus {
            if let Some(o) = self.offset(k, c) {
                let s = c as usize * self.stride;
                let _ = self.buf.read(o, &mut out[s..s + self.value_size]);
            }
        }
        Ok(Some(out))
    }

    /// Updates value `k` on `cpu` (program side) or on every CPU.
    pub fn update(
        &self,
        k: u32,
        value: &[u8],
        flags: u64,
        cpu: Option<u32>,
    ) -> Result<(), MapError> {
        if flags > BPF_EXIST {
            return Err(MapError::Invalid(format!("flags {flags:#x}")));
        }
        if k >= self.max {
            return Err(MapError::Full);
        }
        if flags == BPF_NOEXIST {
            return Err(MapError::Exists);
        }
        let vs = self.value_size;
        match cpu {
            Some(c) => {
                let o = self.offset(k, c).ok_or(MapError::Full)?;
                let v = value
                    .get(..vs)
                    .ok_or_else(|| MapError::Invalid("value too short".into()))?;
                let _ = self.buf.write(o, v);
            }
            None if value.len() == vs => {
                for c in 0..self.ncpus {
                    if let Some(o) = self.offset(k, c) {
                        let _ = self.buf.write(o, value);
                    }
                }
            }
            None if self.ncpus > 1 && value.len() == self.stride * self.ncpus as usize => {
                for c in 0..self.ncpus {
                    let s = c as usize * self.stride;
                    if let Some(o) = self.offset(k, c) {
                        let _ = self.buf.write(o, &value[s..s + vs]);
                    }
                }
            }
            None => {
                return Err(MapError::Invalid(format!(
                    "value is {} bytes, expected {vs}",
                    value.len()
                )))
            }
        }
        Ok(())
    }
}
