//! Writing a store atomically: every section goes to a temporary directory beside the
//! destination, each file is fsynced, the header is written last, and one `rename` makes
//! the store appear. A failure at any point (full disk, bad input, a panic) leaves no
//! directory that looks like a valid store: the temporary one is removed on drop.

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use xxhash_rust::xxh3::Xxh3;

use crate::atomic::AtomicDir;
use crate::store::format::{
    encode_header, Dtype, Header, LinkSectionId, SectionEntry, SectionId, HEADER_FILE, TIME_SECTION,
};
use crate::store::mmap::GraphStore;
use crate::store::StoreError;

#[cfg(target_endian = "big")]
compile_error!("saintflow's store format is little-endian and is mapped in place; big-endian targets are not supported");

/// Streams one section's elements to its file while hashing them.
pub struct SectionWriter {
    name: String,
    file: String,
    dtype: Dtype,
    path: PathBuf,
    out: BufWriter<File>,
    hasher: Xxh3,
    bytes: u64,
}

impl SectionWriter {
    fn create(
        dir: &Path,
        (name, file_name): (&str, &str),
        dtype: Dtype,
    ) -> Result<Self, StoreError> {
        let path = dir.join(file_name);
        let file = File::create(&path).map_err(|e| StoreError::io(&path, "create", e))?;
        Ok(SectionWriter {
            name: name.to_string(),
            file: file_name.to_string(),
            dtype,
            path,
            out: BufWriter::with_capacity(1 << 20, file),
            hasher: Xxh3::new(),
            bytes: 0,
        })
    }

    /// Appends raw bytes; the caller keeps them a whole number of elements overall.
    pub fn write_bytes(&mut self, bytes: &[u8]) -> Result<(), StoreError> {
        self.hasher.update(bytes);
        self.bytes += bytes.len() as u64;
        self.out
            .write_all(bytes)
            .map_err(|e| StoreError::io(&self.path, "write", e))
    }

    /// Appends u32 elements.
    pub fn write_u32s(&mut self, v: &[u32]) -> Result<(), StoreError> {
        debug_assert_eq!(self.dtype, Dtype::U32);
        self.write_bytes(bytemuck::cast_slice(v))
    }

    /// Appends u64 elements.
    pub fn write_u64s(&mut self, v: &[u64]) -> Result<(), StoreError> {
        debug_assert_eq!(self.dtype, Dtype::U64);
        self.write_bytes(bytemuck::cast_slice(v))
    }

    /// Appends i64 elements.
    pub fn write_i64s(&mut self, v: &[i64]) -> Result<(), StoreError> {
        debug_assert_eq!(self.dtype, Dtype::I64);
        self.write_bytes(bytemuck::cast_slice(v))
    }

    /// Appends f32 elements.
    pub fn write_f32s(&mut self, v: &[f32]) -> Result<(), StoreError> {
        debug_assert_eq!(self.dtype, Dtype::F32);
        self.write_bytes(bytemuck::cast_slice(v))
    }

    /// Bytes written so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Flushes and fsyncs the file and returns its header entry.
    pub fn finish(self) -> Result<SectionEntry, StoreError> {
        let SectionWriter {
            name,
            file: file_name,
            dtype,
            path,
            out,
            hasher,
            bytes,
        } = self;
        let file = out
            .into_inner()
            .map_err(|e| StoreError::io(&path, "write", e.into_error()))?;
        file.sync_all()
            .map_err(|e| StoreError::io(&path, "fsync", e))?;
        Ok(SectionEntry {
            name,
            file: file_name,
            dtype,
            len: bytes / dtype.size(),
            bytes,
            xxh3: format!("{:016x}", hasher.digest()),
        })
    }
}

/// A store being written: a temporary directory that becomes the store on [`commit`].
///
/// [`commit`]: StoreWriter::commit
pub struct StoreWriter {
    /// The temporary directory (`flock`ed while this writer lives, so a later writer of
    /// the same destination leaves it alone) and its publication.
    dir: AtomicDir,
    tmp: PathBuf,
}

impl StoreWriter {
    /// Starts writing a store at `dest`. Fails if `dest` exists, unless `force`.
    pub fn create(dest: &Path, force: bool) -> Result<Self, StoreError> {
        // First what killed writers of this destination left (a `.old` store moved aside
        // is put back if nothing took its place), so that even a refused run cleans up.
        crate::atomic::remove_stale_temps(dest, &is_store_temp);
        if dest.exists() && !force {
            return Err(StoreError::Exists {
                path: dest.to_path_buf(),
            });
        }
        // `force` replaces a store, never anything else (a directory of the user's, a file),
        // nor a store with the user's files kept inside it (issue 28, item 12).
        if dest.exists() && !is_store_dir(dest) {
            return Err(StoreError::NotAStore {
                path: dest.to_path_buf(),
            });
        }
        if dest.exists() {
            let foreign = foreign_entries(dest);
            if !foreign.is_empty() {
                return Err(StoreError::argument(format!(
                    "{}: --force would delete what the store did not write: {}; move them out of the store first",
                    dest.display(),
                    foreign.join(", ")
                )));
            }
        }
        if dest.file_name().is_none() {
            return Err(StoreError::argument(format!(
                "{}: not a valid store path",
                dest.display()
            )));
        }
        let dir = AtomicDir::create(dest, force).map_err(StoreError::from)?;
        let tmp = dir.path().to_path_buf();
        Ok(StoreWriter { dir, tmp })
    }

    /// Opens the file of section `id` for streaming.
    pub fn section(&self, id: SectionId, dtype: Dtype) -> Result<SectionWriter, StoreError> {
        SectionWriter::create(&self.tmp, (id.name(), id.file_name()), dtype)
    }

    /// Opens the file of link section `id` (u32 elements) for streaming.
    pub fn link_section(&self, id: LinkSectionId) -> Result<SectionWriter, StoreError> {
        SectionWriter::create(&self.tmp, (id.name(), id.file_name()), Dtype::U32)
    }

    /// Opens the edge-time section's file (`full.time`, i64 elements) for streaming.
    pub fn time_section(&self) -> Result<SectionWriter, StoreError> {
        SectionWriter::create(&self.tmp, TIME_SECTION, Dtype::I64)
    }

    /// Opens a section named at run time (a typed store's `type<t>.features`,
    /// `rel<r>.offsets`, `rel<r>.indices`: [`format::type_features_section`],
    /// [`format::relation_sections`]) for streaming.
    ///
    /// [`format::type_features_section`]: crate::store::format::type_features_section
    /// [`format::relation_sections`]: crate::store::format::relation_sections
    pub fn named_section(
        &self,
        (name, file): (&str, &str),
        dtype: Dtype,
    ) -> Result<SectionWriter, StoreError> {
        SectionWriter::create(&self.tmp, (name, file), dtype)
    }

    /// The path file `name` has inside the temporary store (a section written and
    /// finished, read back by a later pass: the edge times map the CSR's files).
    pub fn file_path(&self, name: &str) -> PathBuf {
        self.tmp.join(name)
    }

    /// Creates file `name` inside the temporary store (beside the sections; not in the
    /// header): it is published with the store by [`commit`](Self::commit)'s rename, so it
    /// appears exactly when the store does. The caller writes and fsyncs it.
    pub fn aux_file(&self, name: &str) -> Result<(PathBuf, File), StoreError> {
        let path = self.tmp.join(name);
        let f = File::create(&path).map_err(|e| StoreError::io(&path, "create", e))?;
        Ok((path, f))
    }

    /// A scratch directory inside the temporary store, removed before commit.
    pub fn scratch_dir(&self) -> Result<PathBuf, StoreError> {
        let dir = self.tmp.join("scratch");
        fs::create_dir_all(&dir).map_err(|e| StoreError::io(&dir, "create directory", e))?;
        Ok(dir)
    }

    /// Writes `header` (whose sections the caller filled from the writers' entries), checks
    /// it against the counts, opens the result (the checks of [`GraphStore::open`]), runs
    /// `verify` on it, fsyncs, and renames the directory into place. Nothing appears at the
    /// destination unless all of that succeeds.
    pub fn commit(
        self,
        header: &Header,
        verify: impl FnOnce(&GraphStore) -> Result<(), StoreError>,
    ) -> Result<PathBuf, StoreError> {
        let scratch = self.tmp.join("scratch");
        if scratch.exists() {
            fs::remove_dir_all(&scratch).map_err(|e| StoreError::io(&scratch, "remove", e))?;
        }
        let hpath = self.tmp.join(HEADER_FILE);
        // A writer that produced lengths inconsistent with its counts is a bug; refuse to
        // publish such a store rather than let `open` find out later.
        header.validate(&hpath)?;
        let bytes = encode_header(header);
        let mut f = File::create(&hpath).map_err(|e| StoreError::io(&hpath, "create", e))?;
        f.write_all(&bytes)
            .map_err(|e| StoreError::io(&hpath, "write", e))?;
        f.sync_all()
            .map_err(|e| StoreError::io(&hpath, "fsync", e))?;
        sync_dir(&self.tmp)?;
        verify(&GraphStore::open(&self.tmp)?)?;
        Ok(self.dir.commit()?)
    }
}

/// The entries of store directory `dir` that no store writer makes (the header, section
/// files, the id maps, `scratch`), by name, sorted.
fn foreign_entries(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| {
            !(is_store_file(name)
                || name == crate::store::format::PART_MAP_FILE
                || name == crate::store::format::IDS_FILE)
        })
        .collect();
    out.sort();
    out
}

/// The header, a section file (the link sections' included) or `scratch`.
fn is_store_file(name: &str) -> bool {
    name == HEADER_FILE
        || name == "scratch"
        || SectionId::ALL.iter().any(|id| id.file_name() == name)
        || LinkSectionId::ALL.iter().any(|id| id.file_name() == name)
        || name == TIME_SECTION.1
        || crate::store::format::is_typed_section_file(name)
}

/// Whether `path` is what a store writer leaves behind (a half-written store, or a store
/// moved aside by a replace): a directory, not a symlink, holding only store files (the
/// header, section files) and the `scratch` directory. Anything else under a temporary's
/// name is not ours.
pub fn is_store_temp(path: &Path) -> bool {
    crate::atomic::dir_holds_only(path, is_store_file)
}

/// Whether `path` is a store directory, recognised by its header file's magic (a store
/// damaged past the magic is still one: `--force` may replace it).
pub fn is_store_dir(path: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 8];
    path.is_dir()
        && File::open(path.join(HEADER_FILE))
            .and_then(|mut f| f.read_exact(&mut magic))
            .is_ok()
        && magic == crate::store::format::MAGIC
}

fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    crate::atomic::sync_dir(dir).map_err(|e| StoreError::io(dir, "fsync directory", e))
}
