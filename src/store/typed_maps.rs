//! The mapped sections of a typed store ([`TypedMaps`]): what `GraphStore` holds for the
//! typed reader API (typed.rs), apart from that API so that the store (mmap.rs) can hold
//! it without naming the module that reads through the store.

use std::path::Path;

use crate::store::format::{relation_sections, type_features_section, TypesMeta};
use crate::store::StoreError;

use super::section::{map_section, Backing};

/// The mapped sections of a typed store.
pub(crate) struct TypedMaps {
    /// First global id of each type, then N.
    pub(super) starts: Vec<u64>,
    /// Per type: its features (empty for a type without).
    pub(super) features: Vec<Backing>,
    /// Per relation: offsets and indices.
    pub(super) offsets: Vec<Backing>,
    pub(super) indices: Vec<Backing>,
}

impl TypedMaps {
    /// Maps every typed section, each file's length checked against the header.
    pub(super) fn open(dir: &Path, meta: &TypesMeta) -> Result<TypedMaps, StoreError> {
        let mut features = Vec::with_capacity(meta.node_types.len());
        for (t, ty) in meta.node_types.iter().enumerate() {
            features.push(match &ty.features {
                Some(e) => {
                    let (name, file) = type_features_section(t);
                    map_section(dir, e, &name, &file)?
                }
                None => Backing::Empty,
            });
        }
        let (mut offsets, mut indices) = (Vec::new(), Vec::new());
        for (r, rel) in meta.relations.iter().enumerate() {
            let [(on, of), (iname, ifile)] = relation_sections(r);
            offsets.push(map_section(dir, &rel.offsets, &on, &of)?);
            indices.push(map_section(dir, &rel.indices, &iname, &ifile)?);
        }
        Ok(TypedMaps {
            starts: meta.starts(),
            features,
            offsets,
            indices,
        })
    }
}
