//! `GraphStore`: a store directory opened by memory-mapping its section files.
//!
//! Opening reads only the header and performs checks whose cost is at most O(N) sequential
//! bytes: header checksum and consistency, every file's length, CSR offsets (first = 0,
//! last = nnz, monotone), role bytes and counts, labels (class ids < C, no bits past C−1,
//! a label on every split node) and the checksums of those O(N) sections
//! ([`SMALL_SECTIONS`]): nothing whose damage can make training panic or silently use a
//! wrong label or split gets past it. After that, every accessor below is panic-free for
//! in-range node ids. What opening does not check (the large sections: index range, sorted
//! rows, symmetry, finite features, their checksums) is what `check` verifies; readers that
//! follow neighbour ids treat an id ≥ N as corruption via [`Csr::checked_neighbors`].
//!
//! Safety of the mapping: files are opened read-only and mapped private; the store is
//! immutable once committed, and saintflow never modifies a store in place. Truncating a
//! store's file from another process while it is mapped makes later reads fault (SIGBUS);
//! that is outside what any mmap-based reader can prevent and is documented in FORMAT.md.

use std::fs::File;
use std::path::{Path, PathBuf};

use memmap2::{Advice, MmapMut, MmapOptions};

use crate::store::format::{
    decode_header, Header, LabelKind, LinkSectionId, Role, SectionId, SplitCounts, HEADER_FILE,
    NO_LABEL, TIME_SECTION,
};
use crate::store::StoreError;

use super::section::{check_offsets, map_section, Backing};
use super::typed_maps::TypedMaps;

/// The sections `open` reads whole (O(N) bytes) and verifies with their checksums; the
/// others (indices O(nnz), features O(N·F)) only `check` reads whole.
pub const SMALL_SECTIONS: [SectionId; 4] = [
    SectionId::FullOffsets,
    SectionId::TrainOffsets,
    SectionId::Labels,
    SectionId::Roles,
];

/// A section mapped copy-on-write by [`GraphStore::map_private`].
pub struct PrivateSection {
    map: Option<MmapMut>,
}

impl std::fmt::Debug for PrivateSection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PrivateSection({} bytes)", self.bytes().len())
    }
}

impl PrivateSection {
    /// The section's bytes.
    pub fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }

    /// The section's bytes, writable: a write changes this process's copy of the page
    /// only, never the file.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        self.map.as_deref_mut().unwrap_or(&mut [])
    }

    /// The section as values of `T` (empty for an empty section). Cannot fail for a
    /// section of `T`s: the map is page-aligned and its length was checked.
    pub fn as_slice<T: bytemuck::Pod>(&self) -> Result<&[T], StoreError> {
        match &self.map {
            None => Ok(&[]),
            Some(m) => bytemuck::try_cast_slice(m).map_err(|e| {
                StoreError::argument(format!("a section of {} bytes as values: {e}", m.len()))
            }),
        }
    }
}

/// How a run is going to read mapped sections: a hint to the kernel (madvise), for
/// [`GraphStore::advise`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// The kernel's default: a page fault reads the pages around the faulting one too.
    Normal,
    /// Scattered reads (sampled training): a fault reads its own page only, so a store
    /// larger than memory is not read 32 pages per touched row and the page cache keeps
    /// what is actually used.
    Random,
    /// One pass front to back (full-graph passes): aggressive read-ahead.
    Sequential,
    /// Read often and at random, and small enough to stay in the page cache (a sampled
    /// graph's CSR beside a memory budget it fits well within): the whole section is
    /// asked for at once (MADV_WILLNEED: its reads go out together, front to back, at the
    /// disk's sequential rate) and read-ahead is left on. Issue 56: with `Random`, the
    /// frontier sampler's page faults one at a time cost 0.5 s a subgraph on Kronecker
    /// scale 27's training graph (5.6 GB) under an 8 GiB cap.
    Resident,
}

/// The offsets and indices of the CSR whose row `u` is `rows[u]` (as given: not sorted or
/// checked), for [`Csr::new`]: small graphs in tests and examples.
pub fn csr_arrays<R: AsRef<[u32]>>(rows: &[R]) -> (Vec<u64>, Vec<u32>) {
    let mut offsets = vec![0u64];
    let mut indices = Vec::new();
    for r in rows {
        indices.extend_from_slice(r.as_ref());
        offsets.push(indices.len() as u64);
    }
    (offsets, indices)
}

/// Gives `access`'s advice for one mapped section; whether it was taken.
fn advise_backing(b: &Backing, access: Access) -> bool {
    let advice = match access {
        Access::Normal | Access::Resident => Advice::Normal,
        Access::Random => Advice::Random,
        Access::Sequential => Advice::Sequential,
    };
    match b {
        Backing::Map(m) => {
            m.advise(advice).is_ok()
                && (access != Access::Resident || m.advise(Advice::WillNeed).is_ok())
        }
        Backing::Empty => false,
    }
}

/// An opened, memory-mapped graph store. Cheap to share by reference across threads.
pub struct GraphStore {
    dir: PathBuf,
    header: Header,
    identity: u64,
    sections: Vec<Backing>,
    /// The link sections in [`LinkSectionId::ALL`] order; empty without a link split.
    link: Vec<Backing>,
    /// The edge-time section (`full.time`), when the store has one.
    time: Option<Backing>,
    /// A typed store's per-type and per-relation sections (issue 57; `store::typed`).
    pub(super) typed: Option<TypedMaps>,
}

/// A CSR adjacency view: `offsets` has N+1 monotone entries ending at `indices.len()`.
#[derive(Clone, Copy)]
pub struct Csr<'a> {
    offsets: &'a [u64],
    indices: &'a [u32],
}

impl<'a> Csr<'a> {
    /// Builds a view over raw arrays, checking the offset invariants (O(N)).
    pub fn new(offsets: &'a [u64], indices: &'a [u32]) -> Result<Self, String> {
        check_offsets(offsets, indices.len() as u64)?;
        Ok(Csr { offsets, indices })
    }

    /// Number of rows (nodes).
    pub fn n_nodes(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Number of directed entries (nnz).
    pub fn n_entries(&self) -> usize {
        self.indices.len()
    }

    /// The row offsets (N+1).
    pub fn offsets(&self) -> &'a [u64] {
        self.offsets
    }

    /// The column indices (nnz).
    pub fn indices(&self) -> &'a [u32] {
        self.indices
    }

    /// Degree of `v`. Panics if `v ≥ N` (a caller bug); see [`Csr::try_neighbors`].
    pub fn degree(&self, v: u32) -> usize {
        let v = v as usize;
        (self.offsets[v + 1] - self.offsets[v]) as usize
    }

    /// Neighbours of `v` as stored. Panics if `v ≥ N` (a caller bug).
    pub fn neighbors(&self, v: u32) -> &'a [u32] {
        let v = v as usize;
        // In bounds: offsets were checked monotone and ending at nnz when opened.
        &self.indices[self.offsets[v] as usize..self.offsets[v + 1] as usize]
    }

    /// Neighbours of `v`, or an error if `v ≥ N`.
    pub fn try_neighbors(&self, v: u32) -> Result<&'a [u32], StoreError> {
        if (v as usize) < self.n_nodes() {
            Ok(self.neighbors(v))
        } else {
            Err(StoreError::argument(format!(
                "node id {v} out of range, expected < {}",
                self.n_nodes()
            )))
        }
    }

    /// Neighbours of `v`, verified to be `< N` (O(degree)); for readers that index arrays
    /// by neighbour id on a store that has not been through `check`.
    pub fn checked_neighbors(&self, v: u32) -> Result<&'a [u32], StoreError> {
        let row = self.try_neighbors(v)?;
        let n = self.n_nodes() as u64;
        if let Some(&bad) = row.iter().find(|&&u| u64::from(u) >= n) {
            return Err(StoreError::neighbor_out_of_range(v, bad, n));
        }
        Ok(row)
    }
}

/// Labels of all nodes.
#[derive(Clone, Copy)]
pub enum Labels<'a> {
    /// One class id per node; [`NO_LABEL`] for none.
    Single(&'a [u32]),
    /// Bit rows of `row_bytes` bytes per node.
    Multi {
        /// N × row_bytes bytes.
        bits: &'a [u8],
        /// ⌈C/8⌉.
        row_bytes: usize,
    },
}

impl Labels<'_> {
    /// Whether node `v` has class `c`. Panics if `v ≥ N`.
    pub fn has_class(&self, v: u32, c: u32) -> bool {
        match *self {
            Labels::Single(l) => l[v as usize] == c,
            Labels::Multi { bits, row_bytes } => {
                let c = c as usize;
                if c / 8 >= row_bytes {
                    return false;
                }
                bits[v as usize * row_bytes + c / 8] >> (c % 8) & 1 == 1
            }
        }
    }

    /// Whether node `v` has at least one label. Panics if `v ≥ N`.
    pub fn is_labelled(&self, v: u32) -> bool {
        match *self {
            Labels::Single(l) => l[v as usize] != NO_LABEL,
            Labels::Multi { bits, row_bytes } => {
                let r = v as usize * row_bytes;
                bits[r..r + row_bytes].iter().any(|&b| b != 0)
            }
        }
    }
}

impl GraphStore {
    /// The store directory `dir` mapped, its header, lengths, offsets and roles checked,
    /// but not yet its link split's and typed sections' cheap checks: what
    /// [`GraphStore::open`] (store/open.rs, above the link and typed modules) adds.
    pub(super) fn open_mapped(dir: &Path) -> Result<Self, StoreError> {
        let dir = dir.to_path_buf();
        let hpath = dir.join(HEADER_FILE);
        // Not a store (a dataset to import, an edge list, nothing): say which command makes
        // one of it (issue 54, item 8).
        if !hpath.exists() {
            if let Some(e) = super::not_a_store::diagnose(&dir) {
                return Err(e);
            }
        }
        let hbytes = read_header_bytes(&hpath)?;
        let header = decode_header(&hbytes, &hpath)?;
        let mut sections = Vec::with_capacity(SectionId::ALL.len());
        for id in SectionId::ALL {
            let e = header.section(id);
            sections.push(map_section(&dir, e, id.name(), id.file_name())?);
        }
        let mut link = Vec::new();
        if let Some(meta) = &header.link {
            for id in LinkSectionId::ALL {
                link.push(map_section(
                    &dir,
                    meta.section(id),
                    id.name(),
                    id.file_name(),
                )?);
            }
        }
        // The edge times are O(nnz), like the indices: `open` checks their file's length
        // only; `check` reads them whole (checksum, both directions equal, min and max).
        let time = match &header.edge_time {
            Some(t) => {
                let (name, file) = TIME_SECTION;
                Some(map_section(&dir, &t.section, name, file)?)
            }
            None => None,
        };
        let typed = match &header.types {
            Some(meta) => Some(TypedMaps::open(&dir, meta)?),
            None => None,
        };
        let store = GraphStore {
            dir,
            identity: xxhash_rust::xxh3::xxh3_64(&hbytes),
            header,
            sections,
            link,
            time,
            typed,
        };
        store.check_cheap()?;
        Ok(store)
    }

    fn check_cheap(&self) -> Result<(), StoreError> {
        for (off, idx) in [
            (SectionId::FullOffsets, SectionId::FullIndices),
            (SectionId::TrainOffsets, SectionId::TrainIndices),
        ] {
            let offsets: &[u64] = self.slice(off);
            check_offsets(offsets, self.header.section(idx).len)
                .map_err(|what| StoreError::corrupt(self.section_path(off), off.name(), what))?;
        }
        let roles = self.roles_raw();
        let mut counts = [0u64; 4];
        for (v, &b) in roles.iter().enumerate() {
            match Role::from_byte(b) {
                Some(r) => counts[r as usize] += 1,
                None => {
                    return Err(StoreError::corrupt(
                        self.section_path(SectionId::Roles),
                        "roles",
                        format!("node {v}: role byte expected 0..=3, got {b}"),
                    ))
                }
            }
        }
        let got = SplitCounts {
            train: counts[1],
            val: counts[2],
            test: counts[3],
        };
        if got != self.header.split {
            return Err(StoreError::corrupt(
                self.section_path(SectionId::Roles),
                "roles",
                format!(
                    "role counts expected {:?} (header), got {got:?}",
                    self.header.split
                ),
            ));
        }
        self.check_labels()?;
        // The O(N) sections are read whole anyway: their checksums cost as much as the
        // scans above and catch damage that leaves values in range (a label 1 → 2).
        for id in SMALL_SECTIONS {
            let want = &self.header.section(id).xxh3;
            let got = format!(
                "{:016x}",
                xxhash_rust::xxh3::xxh3_64(self.section_bytes(id))
            );
            if *want != got {
                return Err(StoreError::corrupt(
                    self.section_path(id),
                    id.name(),
                    format!("checksum mismatch, expected {want}, got {got}"),
                ));
            }
        }
        Ok(())
    }

    /// Labels: single-label class ids < C (or [`NO_LABEL`]), multi-label rows without bits
    /// past class C−1, a label on every node of the split. O(N·label row).
    fn check_labels(&self) -> Result<(), StoreError> {
        let bad = |what: String| {
            Err(StoreError::corrupt(
                self.section_path(SectionId::Labels),
                SectionId::Labels.name(),
                what,
            ))
        };
        let c = self.header.n_classes;
        let labels = self.labels();
        match labels {
            Labels::Single(l) => {
                if let Some(v) = l.iter().position(|&x| x != NO_LABEL && u64::from(x) >= c) {
                    return bad(format!(
                        "node {v}: class id expected < C = {c}, got {}",
                        l[v]
                    ));
                }
            }
            Labels::Multi { bits, row_bytes } => {
                let spare = row_bytes as u64 * 8 - c;
                if spare > 0 && row_bytes > 0 {
                    let mask = !(0xffu8 >> spare);
                    let mut last = bits.chunks_exact(row_bytes).map(|r| r[row_bytes - 1]);
                    if let Some(v) = last.position(|b| b & mask != 0) {
                        return bad(format!("node {v}: bits set past class C-1 = {}", c - 1));
                    }
                }
            }
        }
        let roles = self.roles_raw();
        if let Some(v) = (0..roles.len())
            .find(|&v| roles[v] != Role::None as u8 && !labels.is_labelled(v as u32))
        {
            return bad(format!(
                "node {v} is in the split ({:?}) but has no label",
                self.role(v as u32)
            ));
        }
        Ok(())
    }

    /// The store directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The graph's identity: the xxh3-64 of its header file, which holds the counts and
    /// every section's checksum, so two stores share it only if their contents are equal
    /// (as far as the checksums tell) — whatever their paths. Checkpoints record it.
    pub fn identity(&self) -> u64 {
        self.identity
    }

    /// The parsed header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Number of nodes N.
    pub fn n_nodes(&self) -> usize {
        self.header.n_nodes as usize
    }

    /// Feature width F.
    pub fn n_features(&self) -> usize {
        self.header.n_features as usize
    }

    /// Number of classes C.
    pub fn n_classes(&self) -> usize {
        self.header.n_classes as usize
    }

    /// Path of a section's file.
    pub fn section_path(&self, id: SectionId) -> PathBuf {
        self.dir.join(id.file_name())
    }

    /// A section's raw bytes (mapped).
    pub fn section_bytes(&self, id: SectionId) -> &[u8] {
        self.sections[id.index()].bytes()
    }

    /// A link section's raw bytes (mapped), or `None` when the store has no link split.
    pub fn link_section_bytes(&self, id: LinkSectionId) -> Option<&[u8]> {
        self.link.get(id.index()).map(Backing::bytes)
    }

    /// Path of a link section's file.
    pub fn link_section_path(&self, id: LinkSectionId) -> PathBuf {
        self.dir.join(id.file_name())
    }

    /// The edge times, one per entry of the full graph (`full.indices`' order), or `None`
    /// for a store without times. Not read at `open` (O(nnz)): their checksum and the
    /// equal time of an edge's two entries are `check`'s.
    pub fn edge_times(&self) -> Option<&[i64]> {
        let b = self.time.as_ref()?.bytes();
        if b.is_empty() {
            // An empty section has no mapping, and `&[]` of u8 need not be aligned.
            return Some(&[]);
        }
        // Cannot fail: the mapping is page-aligned and its length n_entries × 8 bytes was
        // checked against the validated header.
        Some(bytemuck::cast_slice(b))
    }

    /// The time of entry `(u, v)` of the full graph: `None` without times, for u ≥ N or
    /// when the edge is not stored (binary search of row u, sorted after `check`).
    pub fn edge_time(&self, u: u32, v: u32) -> Option<i64> {
        let times = self.edge_times()?;
        let full = self.full();
        if u as usize >= full.n_nodes() {
            return None;
        }
        let at = full.neighbors(u).binary_search(&v).ok()?;
        times.get(full.offsets()[u as usize] as usize + at).copied()
    }

    /// Path of the edge-time section's file.
    pub fn time_section_path(&self) -> PathBuf {
        self.dir.join(TIME_SECTION.1)
    }

    /// A section mapped again, copy-on-write (`MAP_PRIVATE`, readable and writable): what
    /// the Python package hands out as numpy views (issue 55 item 11). A write through
    /// such a view (`torch.from_numpy` ignores numpy's read-only flag) lands in this
    /// process's private copy of the page, never in the store's file, and cannot fault as
    /// a write to the store's own read-only map does. Costs nothing until a page is
    /// written; the map lives as long as the returned value, independent of `self`.
    pub fn map_private(&self, id: SectionId) -> Result<PrivateSection, StoreError> {
        let entry = self.header.section(id);
        if entry.bytes == 0 {
            return Ok(PrivateSection { map: None });
        }
        let path = self.section_path(id);
        let file = File::open(&path).map_err(|e| StoreError::io(&path, "open section", e))?;
        // SAFETY: MAP_PRIVATE: writes go to private pages, never to the file. The length is
        // checked against the header below (as `map_section` does), so the typed views
        // cover exactly the validated section.
        let map = unsafe { MmapOptions::new().map_copy(&file) }
            .map_err(|e| StoreError::io(&path, "mmap", e))?;
        if map.len() as u64 != entry.bytes {
            return Err(StoreError::corrupt(
                &path,
                id.name(),
                format!(
                    "file length expected {} bytes, got {} (changed since the store was opened)",
                    entry.bytes,
                    map.len()
                ),
            ));
        }
        Ok(PrivateSection { map: Some(map) })
    }

    pub(super) fn slice<T: bytemuck::Pod>(&self, id: SectionId) -> &[T] {
        let bytes = self.section_bytes(id);
        if bytes.is_empty() {
            // An empty section has no mapping, and `&[]` of u8 need not be aligned for T.
            return &[];
        }
        // Cannot fail: mappings are page-aligned and the length was checked to be
        // len × size_of::<T>() against the validated header when the section was mapped.
        bytemuck::cast_slice(bytes)
    }

    /// The full graph.
    pub fn full(&self) -> Csr<'_> {
        Csr {
            offsets: self.slice(SectionId::FullOffsets),
            indices: self.slice(SectionId::FullIndices),
        }
    }

    /// The training graph (edges between training nodes, or as given by the dataset).
    pub fn train(&self) -> Csr<'_> {
        Csr {
            offsets: self.slice(SectionId::TrainOffsets),
            indices: self.slice(SectionId::TrainIndices),
        }
    }

    /// All features, N×F row-major.
    pub fn features(&self) -> &[f32] {
        self.slice(SectionId::Features)
    }

    /// Feature row of `v`, or an error if `v ≥ N`.
    pub fn feature_row(&self, v: u32) -> Result<&[f32], StoreError> {
        let f = self.n_features();
        if (v as usize) < self.n_nodes() {
            Ok(&self.features()[v as usize * f..(v as usize + 1) * f])
        } else {
            Err(StoreError::argument(format!(
                "node id {v} out of range, expected < {}",
                self.n_nodes()
            )))
        }
    }

    /// Copies the feature rows of `ids` into `out` (|ids| × F, row-major), straight from
    /// the mapping. Errors on an id ≥ N or a wrongly sized `out`.
    pub fn gather_features(&self, ids: &[u32], out: &mut [f32]) -> Result<(), StoreError> {
        let f = self.n_features();
        if out.len() != ids.len() * f {
            return Err(StoreError::argument(format!(
                "gather_features: output expected {} × {f} = {} floats, got {}",
                ids.len(),
                ids.len() * f,
                out.len()
            )));
        }
        if f == 0 {
            return ids
                .iter()
                .try_for_each(|&v| self.feature_row(v).map(|_| ()));
        }
        // Rows a few ids ahead are asked for while this one is copied: the rows lie at
        // scattered addresses, and one miss at a time bound the gather (1.3× faster on the
        // Python sampler's batches, docs/bench/python.md, "Recycled batch buffers"); as data read
        // once, so that they leave the shared cache to what other threads keep there.
        const AHEAD: usize = 8;
        for (i, (&v, dst)) in ids.iter().zip(out.chunks_exact_mut(f)).enumerate() {
            if let Some(Ok(row)) = ids.get(i + AHEAD).map(|&w| self.feature_row(w)) {
                saintflow_ops::cache::prefetch_once(row);
            }
            dst.copy_from_slice(self.feature_row(v)?);
        }
        Ok(())
    }

    /// The fraction of nonzero feature values, counted on up to 4,096 rows spread evenly
    /// over the store (every row of a smaller one): what the planner reads to run the
    /// products by the features sparse. 1 for a store without features.
    pub fn feature_density(&self) -> f64 {
        sampled_density(self.features(), self.n_nodes(), self.n_features())
    }

    /// The labels.
    pub fn labels(&self) -> Labels<'_> {
        match self.header.label_kind {
            LabelKind::Single => Labels::Single(self.slice(SectionId::Labels)),
            LabelKind::Multi => Labels::Multi {
                bits: self.slice(SectionId::Labels),
                row_bytes: self.header.label_row_bytes() as usize,
            },
        }
    }

    fn roles_raw(&self) -> &[u8] {
        self.slice(SectionId::Roles)
    }

    /// Role of `v` (validated at open). Panics if `v ≥ N`.
    pub fn role(&self, v: u32) -> Role {
        Role::from_byte(self.roles_raw()[v as usize]).unwrap_or(Role::None)
    }

    /// The role bytes, one per node (values 0..=3, see [`Role`]).
    pub fn roles(&self) -> &[u8] {
        self.roles_raw()
    }

    /// Number of nodes with role `role`, from the header's split counts (checked against
    /// the role bytes at open), so no scan.
    pub fn role_count(&self, role: Role) -> usize {
        let s = &self.header.split;
        (match role {
            Role::Train => s.train,
            Role::Val => s.val,
            Role::Test => s.test,
            Role::None => self.header.n_nodes - s.train - s.val - s.test,
        }) as usize
    }

    /// Advises the kernel how `sections` will be read (see [`Access`]); empty sections are
    /// skipped. A hint: a kernel refusing it changes speed, not results, so it is not an
    /// error (the count of sections it applied to is returned).
    pub fn advise(&self, sections: &[SectionId], access: Access) -> usize {
        sections
            .iter()
            .filter(|id| advise_backing(&self.sections[id.index()], access))
            .count()
    }

    /// The offsets and indices sections of the training graph (`train`) or the full one.
    pub fn csr_sections(train: bool) -> [SectionId; 2] {
        if train {
            [SectionId::TrainOffsets, SectionId::TrainIndices]
        } else {
            [SectionId::FullOffsets, SectionId::FullIndices]
        }
    }

    /// The advice for sampling from the training graph (`train`) or the full one, and
    /// reading the sampled nodes' features: the CSR [`Access::Resident`] when it fits
    /// three quarters of the memory this process may use (the machine's, or its cgroup's
    /// when lower; unknown counts as not fitting: a step's own memory and the feature rows
    /// in flight need the rest), else [`Access::Random`]; the features `Random`. Training,
    /// `saintflow sample` and the Python sampler ask for it.
    /// A typed store's relations count with the CSR (a typed step reads the subgraph's
    /// relation rows) and its types' features are `Random` too.
    pub fn advise_sampling(&self, train: bool) {
        let csr = Self::csr_sections(train);
        let len = |b: &Backing| match b {
            Backing::Map(m) => m.len() as u64,
            Backing::Empty => 0,
        };
        let relations: Vec<&Backing> = self
            .typed
            .iter()
            .flat_map(|t| t.offsets.iter().chain(&t.indices))
            .collect();
        let bytes: u64 = csr
            .iter()
            .map(|&id| self.section_bytes(id).len() as u64)
            .chain(relations.iter().map(|b| len(b)))
            .sum();
        let fits = crate::machine::MemoryLimit::Detect
            .resolve()
            .is_some_and(|(limit, _)| bytes <= crate::machine::working_share(limit));
        let access = if fits {
            Access::Resident
        } else {
            Access::Random
        };
        self.advise(&csr, access);
        for b in relations {
            advise_backing(b, access);
        }
        self.advise(&[SectionId::Features], Access::Random);
        for b in self.typed.iter().flat_map(|t| &t.features) {
            advise_backing(b, Access::Random);
        }
    }

    /// Asks the kernel to start reading the pages holding the feature rows of `ids`
    /// (MADV_WILLNEED) and returns at once: issued for a sampled subgraph ahead of its
    /// step, the reads are in flight together (deep I/O queue) instead of one page fault
    /// at a time during the gather. With `ids` ascending, rows on the same or adjacent
    /// pages share one call. Ids ≥ N are ignored (the gather reports them). Returns the
    /// number of madvise calls made.
    pub fn will_need_features(&self, ids: &[u32]) -> usize {
        let Backing::Map(map) = &self.sections[SectionId::Features.index()] else {
            return 0;
        };
        let row = self.n_features() * 4;
        let n = self.n_nodes() as u64;
        const PAGE: usize = 4096;
        let mut calls = 0;
        let mut run: Option<(usize, usize)> = None; // [first page, end page)
        let mut flush = |r: (usize, usize)| {
            let (at, len) = (r.0 * PAGE, ((r.1 - r.0) * PAGE).min(map.len() - r.0 * PAGE));
            calls += usize::from(map.advise_range(Advice::WillNeed, at, len).is_ok());
        };
        for &v in ids {
            if u64::from(v) >= n || row == 0 {
                continue;
            }
            let (start, end) = (v as usize * row, (v as usize + 1) * row);
            let (p0, p1) = (start / PAGE, end.div_ceil(PAGE));
            run = match run {
                Some((a, b)) if p0 <= b && p0 >= a => Some((a, b.max(p1))),
                Some(r) => {
                    flush(r);
                    Some((p0, p1))
                }
                None => Some((p0, p1)),
            };
        }
        if let Some(r) = run {
            flush(r);
        }
        calls
    }

    /// Asks the kernel to start reading feature rows `rows` (MADV_WILLNEED) and returns
    /// at once: a pass that streams the features in parts asks for the next part while it
    /// folds one. Whether the advice was taken (a hint: refused, it changes speed only).
    pub fn will_need_feature_rows(&self, rows: std::ops::Range<usize>) -> bool {
        let Backing::Map(map) = &self.sections[SectionId::Features.index()] else {
            return false;
        };
        let row = self.n_features() * 4;
        let (at, end) = (rows.start * row, (rows.end * row).min(map.len()));
        end > at && map.advise_range(Advice::WillNeed, at, end - at).is_ok()
    }

    /// Ascending ids of the nodes with role `role`.
    pub fn nodes_with_role(&self, role: Role) -> Vec<u32> {
        self.nodes_with_roles(&[role])
    }

    /// Ascending ids of the nodes with any of `roles` (an evaluation's scored nodes).
    pub fn nodes_with_roles(&self, roles: &[Role]) -> Vec<u32> {
        self.roles_raw()
            .iter()
            .enumerate()
            .filter(|&(_, &b)| roles.iter().any(|&r| b == r as u8))
            .map(|(v, _)| v as u32)
            .collect()
    }
}

fn read_header_bytes(path: &Path) -> Result<Vec<u8>, StoreError> {
    use std::io::Read;
    let f = File::open(path).map_err(|e| StoreError::io(path, "open", e))?;
    // Never trust the file's size: read at most prefix + the body limit + 1.
    let limit = crate::store::format::PREFIX_BYTES as u64
        + u64::from(crate::store::format::MAX_BODY_BYTES)
        + 1;
    let mut buf = Vec::new();
    f.take(limit)
        .read_to_end(&mut buf)
        .map_err(|e| StoreError::io(path, "read", e))?;
    Ok(buf)
}

/// The fraction of nonzero values of an n × f row-major matrix, counted on up to 4,096 rows
/// spread evenly (every row of a smaller one); 1 for an empty one.
pub(crate) fn sampled_density(data: &[f32], n: usize, f: usize) -> f64 {
    if n == 0 || f == 0 {
        return 1.0;
    }
    let rows = n.min(4096);
    let nonzero: usize = (0..rows)
        .map(|i| {
            let v = (i as u64 * n as u64 / rows as u64) as usize;
            data[v * f..(v + 1) * f]
                .iter()
                .filter(|&&x| x != 0.0)
                .count()
        })
        .sum();
    nonzero as f64 / (rows * f) as f64
}
