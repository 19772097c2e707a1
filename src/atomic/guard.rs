//! Issue 55: what a command may write. [`OutputGuard`], the one check of a command's
//! outputs against its inputs, each other, stores and what is there; [`written`], the
//! recognisers of the files saintflow writes; the CLI's writes to stdout and stderr.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The file that marks a graph store's directory (`store::format::HEADER_FILE`, named here
/// because this module is a leaf below the store layer; a test checks they agree).
pub const STORE_MARKER: &str = "header.sf";

/// Why a command's output was refused before anything was written (issue 55, item 2), or
/// a standard stream that could not be written (item 4). The messages name the flag and
/// the path: `<flag> <path>: <what>, expected <x>, got <y>`.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// The output names a file the same command reads.
    #[error("{flag} {}: is the file {input_flag} {} this command reads; an output never replaces an input, expected another path, got the input itself", path.display(), input.display())]
    IsInput {
        /// The output's flag (`-o`, `--log`, …).
        flag: String,
        /// The output's path as given.
        path: PathBuf,
        /// The input's flag or argument name.
        input_flag: String,
        /// The input's path as given.
        input: PathBuf,
    },
    /// Two outputs of one command name the same file.
    #[error("{flag} {}: is also {other_flag} {}; two outputs of one command never share a file, expected two different paths, got one", path.display(), other.display())]
    SameFile {
        /// The later output's flag.
        flag: String,
        /// Its path.
        path: PathBuf,
        /// The earlier output's flag.
        other_flag: String,
        /// Its path.
        other: PathBuf,
    },
    /// The output lies inside a graph store's directory.
    #[error("{flag} {}: is inside the graph store {}; saintflow never writes into a store, expected a path outside it", path.display(), store.display())]
    InStore {
        /// The output's flag.
        flag: String,
        /// Its path.
        path: PathBuf,
        /// The store's directory.
        store: PathBuf,
    },
    /// Something other than a regular file is at the output path.
    #[error("{flag} {}: exists and is {kind}, which saintflow never replaces or writes through (not even with --force); expected {expected}, got {kind}", path.display())]
    NotRegular {
        /// The output's flag.
        flag: String,
        /// Its path.
        path: PathBuf,
        /// What is there (`a symbolic link`, `a character device`, …).
        kind: &'static str,
        /// What may be there (`a regular file or no file`).
        expected: &'static str,
    },
    /// A regular file is at the output path that saintflow does not write there (the
    /// user's notes, a file of another program): not replaced, even with `--force`.
    #[error("{flag} {}: exists and is not {what} (not a file saintflow writes there); not replaced, even with --force: expected {what} or no file, got other content", path.display())]
    Foreign {
        /// The output's flag.
        flag: String,
        /// Its path.
        path: PathBuf,
        /// What saintflow writes there (`a .safetensors file`).
        what: &'static str,
    },
    /// A regular file is at the output path and replacing it was not asked for.
    #[error("{flag} {}: exists; {hint}", path.display())]
    Exists {
        /// The output's flag.
        flag: String,
        /// Its path.
        path: PathBuf,
        /// What replaces (or continues) it: `pass --force to replace it`.
        hint: String,
    },
    /// An output's path could not be examined.
    #[error("{flag} {}: cannot examine it: {source}", path.display())]
    Stat {
        /// The output's flag.
        flag: String,
        /// Its path.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// stdout or stderr could not be written (a full disk behind a redirection, `/dev/full`);
    /// a closed pipe is not this: SIGPIPE ends the command quietly, as it ends `cat`.
    #[error("{stream}: cannot write the command's output: {source}")]
    Stream {
        /// `stdout` or `stderr`.
        stream: &'static str,
        /// The OS error.
        source: io::Error,
    },
}

/// The one check of a command's outputs before it writes any (issue 55, item 2). Every
/// command names its inputs and its outputs; [`OutputGuard::check`] then refuses an output
/// that
///
/// * is one of the inputs (the same `(device, inode)`, or for a path that does not exist
///   yet, the same canonical path),
/// * is the same file as another output of the command,
/// * lies inside a graph store's directory (one holding [`STORE_MARKER`]),
/// * exists and is not a regular file: a symbolic link, a directory, a device, a FIFO or a
///   socket. saintflow publishes a file by renaming a temporary over its path, which would
///   replace the link or the device node rather than write through it, so these are
///   refused, never written through (redirect stdout for a stream: `--json > FILE`),
/// * exists as a regular file, unless the command was asked to replace it (`--force`) or
///   to continue it (`train --resume` for its checkpoint and log).
///
/// A directory output (a partition, a store) is checked for the first three only; its
/// writer decides whether an existing directory may be replaced.
#[derive(Debug, Default)]
pub struct OutputGuard {
    inputs: Vec<(String, PathBuf)>,
    outputs: Vec<GuardedOutput>,
}

#[derive(Debug)]
struct GuardedOutput {
    flag: String,
    path: PathBuf,
    dir: bool,
    /// None: an existing regular file may be replaced; Some(hint): refused, saying how.
    refuse_existing: Option<String>,
    /// What saintflow writes at this output and how to recognise it from a file's first
    /// bytes: an existing file that is not one is never replaced.
    ours: Option<(&'static str, Recognise)>,
}

/// Recognisers of the files saintflow writes at each single-file output
/// ([`OutputGuard::ours`]): `--force` replaces one of these, never a file
/// of the user's (issue 55, item 2).
pub mod written {
    /// A `.safetensors` file: an 8-byte little-endian header length, then a JSON object.
    pub fn safetensors(head: &[u8]) -> bool {
        head.len() > 8 && head[8] == b'{'
    }

    /// A `.npy` file.
    pub fn npy(head: &[u8]) -> bool {
        head.starts_with(b"\x93NUMPY")
    }

    /// A PNG or SVG image (`plot`, `--plot`).
    pub fn image(head: &[u8]) -> bool {
        let text = head.trim_ascii_start();
        head.starts_with(b"\x89PNG\r\n\x1a\n")
            || text.starts_with(b"<svg")
            || text.starts_with(b"<?xml")
    }

    /// A training log: its first record is the run's.
    pub fn log(head: &[u8]) -> bool {
        head.starts_with(b"{\"kind\":\"run\"")
    }

    /// A checkpoint (any version: a newer saintflow's too).
    pub fn checkpoint(head: &[u8]) -> bool {
        head.starts_with(b"SFCKPT")
    }

    /// Normalisation counts (`sample --save-norm`).
    pub fn norm(head: &[u8]) -> bool {
        head.starts_with(b"SFNORM")
    }

    /// A METIS graph file: its first line is two or three whole numbers.
    pub fn metis(head: &[u8]) -> bool {
        let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
        let fields: Vec<&[u8]> = line
            .split(|&b| b == b' ')
            .filter(|f| !f.is_empty())
            .collect();
        (2..=3).contains(&fields.len()) && fields.iter().all(|f| f.iter().all(u8::is_ascii_digit))
    }
}

/// Recognises a file saintflow writes from its first bytes (at most [`HEAD_BYTES`]).
pub type Recognise = fn(&[u8]) -> bool;

/// How many bytes of an existing output a [`Recognise`] sees.
pub const HEAD_BYTES: usize = 4096;

impl OutputGuard {
    /// A guard with no inputs and no outputs yet.
    pub fn new() -> OutputGuard {
        OutputGuard::default()
    }

    /// An input of the command, named by its flag or argument (`--plan`, `CHECKPOINT`). A
    /// directory input (a store) covers every file inside it.
    pub fn input(&mut self, flag: &str, path: &Path) -> &mut Self {
        self.inputs.push((flag.to_string(), path.to_path_buf()));
        self
    }

    /// A single-file output that an existing regular file may be replaced at only with
    /// `force` (the message says "pass --force to replace it").
    pub fn file(&mut self, flag: &str, path: &Path, force: bool) -> &mut Self {
        self.file_or(flag, path, force, "pass --force to replace it")
    }

    /// A single-file output that may replace an existing regular file when `replace` is
    /// true; otherwise one is refused with `hint` (how to replace or continue it).
    pub fn file_or(&mut self, flag: &str, path: &Path, replace: bool, hint: &str) -> &mut Self {
        self.outputs.push(GuardedOutput {
            flag: flag.to_string(),
            path: path.to_path_buf(),
            dir: false,
            refuse_existing: (!replace).then(|| hint.to_string()),
            ours: None,
        });
        self
    }

    /// The last output added holds `what` (`"a .safetensors file"`), which `recognise`
    /// tells from a file's first bytes: an existing file it does not recognise is refused
    /// even when replacing was asked for (issue 55, item 2: `--force` replaces what
    /// saintflow wrote, never a file of the user's). An empty file is anyone's.
    pub fn ours(&mut self, what: &'static str, recognise: Recognise) -> &mut Self {
        if let Some(out) = self.outputs.last_mut() {
            out.ours = Some((what, recognise));
        }
        self
    }

    /// A directory output (its writer decides about an existing directory).
    pub fn dir(&mut self, flag: &str, path: &Path) -> &mut Self {
        self.outputs.push(GuardedOutput {
            flag: flag.to_string(),
            path: path.to_path_buf(),
            dir: true,
            refuse_existing: None,
            ours: None,
        });
        self
    }

    /// Checks every output (see the type's documentation); the first refusal is the error.
    pub fn check(&self) -> Result<(), OutputError> {
        let inputs: Vec<(&str, &Path, Option<Ident>)> = self
            .inputs
            .iter()
            .map(|(f, p)| (f.as_str(), p.as_path(), Ident::of(p)))
            .collect();
        let mut seen: Vec<(&GuardedOutput, Option<Ident>)> = Vec::new();
        for out in &self.outputs {
            let id = Ident::of(&out.path);
            for (flag, path, input) in &inputs {
                if let (Some(a), Some(b)) = (&id, input) {
                    if a.same(b) {
                        return Err(OutputError::IsInput {
                            flag: out.flag.clone(),
                            path: out.path.clone(),
                            input_flag: flag.to_string(),
                            input: path.to_path_buf(),
                        });
                    }
                }
            }
            for (other, other_id) in &seen {
                if let (Some(a), Some(b)) = (&id, other_id) {
                    if a.same(b) {
                        return Err(OutputError::SameFile {
                            flag: out.flag.clone(),
                            path: out.path.clone(),
                            other_flag: other.flag.clone(),
                            other: other.path.clone(),
                        });
                    }
                }
            }
            if let Some(store) = id.as_ref().and_then(|i| enclosing_store(&i.canonical)) {
                return Err(OutputError::InStore {
                    flag: out.flag.clone(),
                    path: out.path.clone(),
                    store,
                });
            }
            match out.path.symlink_metadata() {
                Ok(m) => {
                    let t = m.file_type();
                    let kind = file_kind(&t);
                    if !(t.is_file() || (out.dir && t.is_dir())) {
                        return Err(OutputError::NotRegular {
                            flag: out.flag.clone(),
                            path: out.path.clone(),
                            kind,
                            expected: if out.dir {
                                "a directory or no file"
                            } else {
                                "a regular file or no file"
                            },
                        });
                    }
                    if let (Some(hint), false) = (&out.refuse_existing, out.dir) {
                        return Err(OutputError::Exists {
                            flag: out.flag.clone(),
                            path: out.path.clone(),
                            hint: hint.clone(),
                        });
                    }
                    if let Some((what, recognise)) = out.ours.filter(|_| m.len() > 0) {
                        let head = read_head(&out.path).map_err(|source| OutputError::Stat {
                            flag: out.flag.clone(),
                            path: out.path.clone(),
                            source,
                        })?;
                        if !recognise(&head) {
                            return Err(OutputError::Foreign {
                                flag: out.flag.clone(),
                                path: out.path.clone(),
                                what,
                            });
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(source) => {
                    return Err(OutputError::Stat {
                        flag: out.flag.clone(),
                        path: out.path.clone(),
                        source,
                    })
                }
            }
            seen.push((out, id));
        }
        Ok(())
    }
}

/// The first [`HEAD_BYTES`] of a regular file (opened without following a link: the
/// caller has seen a regular file there).
fn read_head(path: &Path) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let mut head = Vec::with_capacity(HEAD_BYTES);
    File::open(path)?
        .take(HEAD_BYTES as u64)
        .read_to_end(&mut head)?;
    Ok(head)
}

/// What an existing path is, in words.
fn file_kind(t: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_symlink() {
        "a symbolic link"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_file() {
        "a regular file"
    } else {
        "not a regular file"
    }
}

/// A path's identity: its `(device, inode)` when it exists (followed through links), and
/// its canonical path (the parent's, joined with the name, when it does not exist).
#[derive(Debug)]
struct Ident {
    node: Option<(u64, u64)>,
    canonical: PathBuf,
}

impl Ident {
    fn of(path: &Path) -> Option<Ident> {
        use std::os::unix::fs::MetadataExt;
        let node = std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()));
        let canonical = match std::fs::canonicalize(path) {
            Ok(c) => c,
            Err(_) => {
                // Not there (yet): the nearest existing ancestor's canonical path and the
                // rest as written, `.` and `..` resolved lexically.
                let abs = if path.is_absolute() {
                    path.to_path_buf()
                } else {
                    std::env::current_dir().ok()?.join(path)
                };
                let mut rest = Vec::new();
                let mut base = abs.as_path();
                let found = loop {
                    if let Ok(c) = std::fs::canonicalize(base) {
                        break c;
                    }
                    rest.push(base.file_name()?.to_os_string());
                    base = base.parent()?;
                };
                let mut c = found;
                for part in rest.iter().rev() {
                    match part.to_str() {
                        Some(".") => {}
                        Some("..") => {
                            c.pop();
                        }
                        _ => c.push(part),
                    }
                }
                c
            }
        };
        Some(Ident { node, canonical })
    }

    fn same(&self, other: &Ident) -> bool {
        match (self.node, other.node) {
            (Some(a), Some(b)) => a == b,
            _ => self.canonical == other.canonical,
        }
    }
}

/// The graph store whose directory holds `path` (canonical), if any.
fn enclosing_store(path: &Path) -> Option<PathBuf> {
    path.ancestors()
        .skip(1)
        .find(|d| d.join(STORE_MARKER).is_file())
        .map(Path::to_path_buf)
}

/// Writes `text` to stdout, flushed: a failure (a full disk behind `> FILE`, `/dev/full`)
/// is an error for the command to end with (exit 1), never a panic (issue 55, item 4). A
/// closed pipe never gets here: SIGPIPE ends the process quietly first (the CLI restores
/// its default action).
pub fn stdout_write(text: &str) -> Result<(), OutputError> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|source| OutputError::Stream {
            stream: "stdout",
            source,
        })
}

/// Writes `text` and a newline to stderr, ignoring a failure: a note or a warning that
/// cannot be shown must not end (or panic) the command whose result it comments on.
pub fn stderr_line(text: &str) {
    let mut err = io::stderr().lock();
    let _ = err.write_all(text.as_bytes());
    let _ = err.write_all(b"\n");
    let _ = err.flush();
}
