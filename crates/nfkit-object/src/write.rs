//! Writing an [`Image`] as an eBPF relocatable ELF object (in progress).

use crate::error::WriteError;
use crate::image::Image;

/// Writes `image` as an ELF object.
pub fn write_object(_image: &Image) -> Result<Vec<u8>, WriteError> {
    Err(WriteError::Elf("not written yet".into()))
}
