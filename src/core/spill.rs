//! Columns of bytes a whole-table search keeps in memory while they fit its budget and in a
//! temporary file after: the rows' texts and their band keys (see `core::dedup`).
//!
//! A column is appended to while the rows are read and only read afterwards. Once it moves to
//! a file, appends go through a write buffer, and reads take positioned reads (`pread`), which
//! the search's threads may make at once. The file is unlinked as soon as it is made: it has
//! no name to leave behind, whatever way the process ends, and its blocks go back when the
//! column is dropped.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::{DirBuilderExt, FileExt, OpenOptionsExt};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use super::capacity::{reserve, CapacityError};

/// Bytes a column collects before writing them to its file.
const WRITE_BUFFER: usize = 1 << 20;

/// Where the temporary files of a process go: `dir/prefix.minhash.N`, and how many bytes the
/// files of one search may hold (`None`: no limit).
#[derive(Clone, Debug)]
pub struct SpillDir {
    pub dir: PathBuf,
    pub prefix: String,
    pub limit: Option<u64>,
}

/// Files made by this process so far, for unique names.
static FILES_MADE: AtomicU64 = AtomicU64::new(0);

impl SpillDir {
    /// A new empty file, already unlinked, open for reading and writing by this process only.
    fn new_file(&self) -> Result<File, CapacityError> {
        match DirBuilder::new().mode(0o700).create(&self.dir) {
            Err(e) if e.kind() != ErrorKind::AlreadyExists => return Err(temp_file_error(&e)),
            _ => {}
        }
        let n = FILES_MADE.fetch_add(1, Ordering::Relaxed);
        let path = self.dir.join(format!("{}.minhash.{n}", self.prefix));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| temp_file_error(&e))?;
        std::fs::remove_file(&path).map_err(|e| temp_file_error(&e))?;
        Ok(file)
    }
}

fn temp_file_error(e: &std::io::Error) -> CapacityError {
    CapacityError::TempFile {
        errno: e.raw_os_error().unwrap_or(0),
    }
}

/// What a column's memory holds; named in out-of-memory errors.
const COLUMN: &str = "the rows being searched";

/// An append-only column of bytes, in memory or in an unlinked temporary file.
#[derive(Default)]
pub struct Column {
    /// The bytes, while in memory; after a move to a file, the bytes not yet written to it.
    buffer: Vec<u8>,
    file: Option<File>,
    /// Bytes in the file.
    on_file: u64,
}

impl Column {
    /// Bytes held in memory.
    pub fn in_memory(&self) -> usize {
        if self.file.is_some() {
            0
        } else {
            self.buffer.len()
        }
    }

    /// Bytes in the column.
    pub fn len(&self) -> u64 {
        self.on_file + self.buffer.len() as u64
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the column is in a file.
    pub fn on_disk(&self) -> bool {
        self.file.is_some()
    }

    /// Appends `bytes`. On an error the column is unchanged or holds a prefix of them past its
    /// old length that no read asks for.
    pub fn append(&mut self, bytes: &[u8]) -> Result<(), CapacityError> {
        if self.file.is_some() && self.buffer.len() + bytes.len() > WRITE_BUFFER {
            self.flush()?;
        }
        reserve(&mut self.buffer, bytes.len(), COLUMN)?;
        self.buffer.extend_from_slice(bytes);
        Ok(())
    }

    /// Takes the column back to its first `len` bytes.
    pub fn truncate(&mut self, len: u64) {
        if self.file.is_none() {
            self.buffer.truncate(len as usize);
        } else if len >= self.on_file {
            self.buffer.truncate((len - self.on_file) as usize);
        } else {
            // (the file's bytes past `len` are written over by the next flush)
            self.on_file = len;
            self.buffer.clear();
        }
    }

    /// Moves the column to a new file of `dir`; later appends go there too.
    pub fn spill(&mut self, dir: &SpillDir) -> Result<(), CapacityError> {
        if self.file.is_none() {
            self.file = Some(dir.new_file()?);
            self.flush()?;
            self.buffer = Vec::new();
        }
        Ok(())
    }

    /// Writes the write buffer to the file.
    pub fn flush(&mut self) -> Result<(), CapacityError> {
        if let Some(file) = &self.file {
            file.write_all_at(&self.buffer, self.on_file)
                .map_err(|e| temp_file_error(&e))?;
            self.on_file += self.buffer.len() as u64;
            self.buffer.clear();
        }
        Ok(())
    }

    /// The bytes `start..start + len`, borrowed from memory or read into `scratch`.
    pub fn read<'a>(
        &'a self,
        start: u64,
        len: usize,
        scratch: &'a mut Vec<u8>,
    ) -> Result<&'a [u8], CapacityError> {
        let end = start + len as u64;
        let Some(file) = &self.file else {
            return Ok(&self.buffer[start as usize..end as usize]);
        };
        if start >= self.on_file {
            let at = (start - self.on_file) as usize;
            return Ok(&self.buffer[at..at + len]);
        }
        scratch.clear();
        reserve(scratch, len, COLUMN)?;
        let from_file = (end.min(self.on_file) - start) as usize;
        scratch.resize(from_file, 0);
        file.read_exact_at(scratch, start)
            .map_err(|e| temp_file_error(&e))?;
        // (a range past the file's end goes on in the write buffer)
        scratch.extend_from_slice(&self.buffer[..len - from_file]);
        Ok(scratch)
    }

    /// Calls `f` on the column's bytes in order, a block of at most `block` bytes at a time
    /// (a multiple of `unit`, which the column's length is a multiple of).
    pub fn for_each_block(
        &self,
        unit: usize,
        mut f: impl FnMut(&[u8]),
    ) -> Result<(), CapacityError> {
        let block = (WRITE_BUFFER / unit).max(1) * unit;
        let mut scratch = Vec::new();
        let mut at = 0;
        while at < self.len() {
            let len = block.min((self.len() - at) as usize);
            f(self.read(at, len, &mut scratch)?);
            at += len as u64;
        }
        Ok(())
    }
}

/// The temporary directory of a test, under the system's.
#[cfg(test)]
pub fn test_dir() -> SpillDir {
    SpillDir {
        dir: std::env::temp_dir().join("pg_minhash_spill_tests"),
        prefix: format!("test{}", std::process::id()),
        limit: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_column_reads_the_same_in_memory_and_on_disk() {
        let mut memory = Column::default();
        let mut disk = Column::default();
        disk.spill(&test_dir()).unwrap();
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
        for chunk in data.chunks(9_999) {
            memory.append(chunk).unwrap();
            disk.append(chunk).unwrap();
            // reads straddling the file and the write buffer
            let (start, len) = (disk.len() - 12_345.min(disk.len()), 12_345.min(disk.len()));
            let mut scratch = Vec::new();
            assert_eq!(
                disk.read(start, len as usize, &mut scratch).unwrap(),
                &data[start as usize..(start + len) as usize]
            );
        }
        assert_eq!(memory.in_memory(), data.len());
        assert_eq!(disk.in_memory(), 0);
        for column in [&memory, &disk] {
            let mut read = Vec::new();
            column
                .for_each_block(8, |b| read.extend_from_slice(b))
                .unwrap();
            assert_eq!(read, data);
        }
        // moved to a file half-way: the same bytes
        let mut moved = Column::default();
        moved.append(&data[..1000]).unwrap();
        moved.spill(&test_dir()).unwrap();
        moved.append(&data[1000..]).unwrap();
        moved.flush().unwrap();
        let mut scratch = Vec::new();
        assert_eq!(moved.read(0, data.len(), &mut scratch).unwrap(), &data[..]);
        // the file has no name
        let left = std::fs::read_dir(&test_dir().dir)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with(&test_dir().prefix)
            })
            .count();
        assert_eq!(left, 0);
    }

    #[test]
    fn a_directory_that_cannot_be_made_is_an_error() {
        let dir = SpillDir {
            dir: PathBuf::from("/proc/pg_minhash/none"),
            prefix: "x".into(),
            limit: None,
        };
        let mut c = Column::default();
        assert!(matches!(
            c.spill(&dir),
            Err(CapacityError::TempFile { errno }) if errno != 0
        ));
    }
}
