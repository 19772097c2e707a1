//! Gzip-compressed text read as a stream of lines (`GzLines`: a thread inflates ahead while
//! the caller parses), OGB's one-count files (`read_count`) and node ids checked (`node_id`).

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek};
use std::path::{Path, PathBuf};

use flate2::read::MultiGzDecoder;

use crate::store::import::limits;
use crate::store::StoreError;

/// The lines of a gzip-compressed text file, decoded as a stream: a thread inflates the
/// file ahead in [`INFLATE_BLOCK`] blocks (at most [`INFLATE_AHEAD`] waiting) while the
/// caller parses, so decoding and parsing take a core each. Memory stays bounded by the
/// blocks in flight, whatever the file's size.
pub(crate) struct GzLines {
    path: PathBuf,
    reader: BufReader<Inflated>,
    buf: String,
    line_no: u64,
}

/// Reads until `buf` is full or the end; the count read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Bytes per block the inflating thread hands over.
const INFLATE_BLOCK: usize = 1 << 20;

/// Blocks decoded ahead of the parser at most.
const INFLATE_AHEAD: usize = 4;

/// The decoded bytes of a gzip file, produced by a thread (see [`GzLines`]). Dropped early
/// (an error in a line), it closes the channel and the thread ends at its next block;
/// dropped at all, it waits for the thread, so no import leaves a decoder running behind
/// it (the 10-minute `ogb` fuzz run caught one still holding its buffers at the leak check).
struct Inflated {
    /// None once dropped (the thread's next send fails).
    rx: Option<std::sync::mpsc::Receiver<std::io::Result<Vec<u8>>>>,
    thread: Option<std::thread::JoinHandle<()>>,
    block: Vec<u8>,
    at: usize,
    /// The end of the stream was read (every later read is the end again).
    ended: bool,
}

impl Inflated {
    fn spawn(file: File) -> Inflated {
        let (tx, rx) = std::sync::mpsc::sync_channel(INFLATE_AHEAD);
        let thread = std::thread::spawn(move || {
            let mut gz = MultiGzDecoder::new(BufReader::with_capacity(1 << 20, file));
            loop {
                let mut block = vec![0u8; INFLATE_BLOCK];
                let mut len = 0;
                let result = loop {
                    match gz.read(&mut block[len..]) {
                        Ok(0) => break Ok(()),
                        Ok(k) => {
                            len += k;
                            if len == block.len() {
                                break Ok(());
                            }
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) => break Err(e),
                    }
                };
                block.truncate(len);
                let sent = match result {
                    Ok(()) if len == 0 => {
                        let _ = tx.send(Ok(Vec::new()));
                        return;
                    }
                    Ok(()) => tx.send(Ok(block)),
                    Err(e) => {
                        // The bytes before the error first, so line numbers stay right;
                        // but never an empty block, which the reader takes for the end
                        // (issue 55: an error at a block's start read as end of input).
                        if len > 0 && tx.send(Ok(block)).is_err() {
                            return;
                        }
                        let _ = tx.send(Err(e));
                        return;
                    }
                };
                if sent.is_err() {
                    return;
                }
            }
        });
        Inflated {
            rx: Some(rx),
            thread: Some(thread),
            block: Vec::new(),
            at: 0,
            ended: false,
        }
    }
}

impl Drop for Inflated {
    fn drop(&mut self) {
        // Closing the channel first makes a thread blocked in `send` return; one decoding
        // a block finishes it (at most INFLATE_BLOCK bytes) and then finds it closed.
        drop(self.rx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Read for Inflated {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.at == self.block.len() {
            if self.ended {
                return Ok(0);
            }
            let Some(rx) = &self.rx else {
                return Ok(0);
            };
            match rx.recv() {
                Ok(Ok(b)) if b.is_empty() => {
                    self.ended = true;
                    return Ok(0);
                }
                Ok(Ok(b)) => (self.block, self.at) = (b, 0),
                Ok(Err(e)) => return Err(e),
                // The thread sends the end (an empty block) or an error before it ends; a
                // channel closed without either is a thread that died: not the end.
                Err(_) => {
                    return Err(std::io::Error::other(
                        "the decoding thread ended without reaching the end of the stream",
                    ))
                }
            }
        }
        let k = out.len().min(self.block.len() - self.at);
        out[..k].copy_from_slice(&self.block[self.at..self.at + k]);
        self.at += k;
        Ok(k)
    }
}

impl GzLines {
    /// Opens a gzip file: a regular file (a directory or a device is refused) that starts
    /// with gzip's magic bytes (an empty or plain-text file is refused: issue 55, a split
    /// file saved as plain text read as zero nodes).
    pub(crate) fn open(path: &Path) -> Result<Self, StoreError> {
        let mut f = File::open(path).map_err(|e| StoreError::io(path, "open", e))?;
        let meta = f.metadata().map_err(|e| StoreError::io(path, "stat", e))?;
        if !meta.is_file() {
            let kind = if meta.is_dir() {
                "a directory"
            } else {
                "not a regular file"
            };
            return Err(StoreError::input(
                path,
                format!("{kind}, expected a gzip-compressed file"),
            ));
        }
        let mut magic = [0u8; 2];
        let got = read_full(&mut f, &mut magic).map_err(|e| StoreError::io(path, "read", e))?;
        if got < 2 || magic != [0x1f, 0x8b] {
            let what = match got {
                0 => "an empty file".to_string(),
                _ => format!(
                    "not gzip-compressed (starts with {:?}; a plain-text file?)",
                    String::from_utf8_lossy(&magic[..got])
                ),
            };
            return Err(StoreError::input(
                path,
                format!("{what}, expected a gzip stream (magic 1f 8b)"),
            ));
        }
        f.rewind().map_err(|e| StoreError::io(path, "seek", e))?;
        Ok(GzLines {
            path: path.to_path_buf(),
            reader: BufReader::with_capacity(1 << 16, Inflated::spawn(f)),
            buf: String::with_capacity(1 << 12),
            line_no: 0,
        })
    }

    /// Reads the next line; false at the end. [`line`](Self::line) then holds it. A line
    /// longer than [`MAX_LINE_BYTES`](limits::MAX_LINE_BYTES) is an error (read no further than the bound), and
    /// so is every decoding error: a damaged, truncated or garbage-followed stream is
    /// never taken for the end of the input.
    pub(crate) fn advance(&mut self) -> Result<bool, StoreError> {
        self.buf.clear();
        let got = (&mut self.reader)
            .take(limits::MAX_LINE_BYTES as u64 + 1)
            .read_line(&mut self.buf)
            .map_err(|e| {
                let what = if e.kind() == std::io::ErrorKind::InvalidData {
                    "not valid UTF-8 text".to_string()
                } else {
                    format!("not a valid gzip stream: {e}")
                };
                StoreError::input(&self.path, format!("line {}: {what}", self.line_no + 1))
            })?;
        if got == 0 {
            return Ok(false);
        }
        self.line_no += 1;
        if got > limits::MAX_LINE_BYTES {
            return Err(self.err(format!(
                "a line longer than {} bytes, expected shorter lines (the longest row the importer reads)",
                limits::MAX_LINE_BYTES
            )));
        }
        Ok(true)
    }

    /// The current line without its line ending.
    pub(crate) fn line(&self) -> &str {
        self.buf.trim_end_matches(['\n', '\r'])
    }

    /// An error at the current line.
    pub(crate) fn err(&self, what: impl std::fmt::Display) -> StoreError {
        StoreError::input(&self.path, format!("line {}: {what}", self.line_no))
    }
}

/// A node id field: a non-negative integer below `n`.
pub(crate) fn node_id(lines: &GzLines, s: &str, n: u64, what: &str) -> Result<u32, StoreError> {
    let s = s.trim();
    let v: u64 = s.parse().map_err(|_| {
        lines.err(format!(
            "{what} {s:?} is not a node id (a non-negative integer)"
        ))
    })?;
    if v >= n {
        return Err(lines.err(format!(
            "{what} {v} out of range, expected < N = {n} (num-node-list)"
        )));
    }
    Ok(v as u32)
}

/// The one count in `raw/num-node-list.csv.gz` / `raw/num-edge-list.csv.gz`.
pub(crate) fn read_count(path: &Path) -> Result<u64, StoreError> {
    let mut lines = GzLines::open(path)?;
    // The first count and how many: a file of a billion counts holds no table.
    let (mut first, mut count) = (None, 0u64);
    while lines.advance()? {
        let t = lines.line().trim();
        if t.is_empty() {
            continue;
        }
        let c: u64 = t
            .parse()
            .map_err(|_| lines.err(format!("expected a count, got {t:?}")))?;
        first.get_or_insert(c);
        count += 1;
    }
    match (first, count) {
        (Some(c), 1) => Ok(c),
        (None, _) => Err(StoreError::input(path, "empty, expected one count")),
        (_, k) => Err(StoreError::input(
            path,
            format!(
                "{k} counts: a graph-property dataset of several graphs; import ogb reads node-property datasets (one graph)"
            ),
        )),
    }
}
