//! File-system helpers.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::StoreError;

/// Distinguishes temporary files of concurrent writes within one process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Writes `bytes` to `path` atomically: the data goes to a temporary file in
/// the same folder, is flushed to disk, then renamed over `path`. Readers see
/// either the old file or the complete new one, never a partial file; on
/// failure the temporary file is removed and `path` is untouched.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let file_name = path.file_name().ok_or_else(|| {
        StoreError::io(path, std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a file path"))
    })?;
    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let mut temp_name = std::ffi::OsString::from(".");
    temp_name.push(file_name);
    temp_name.push(format!(".{}.{}.tmp", std::process::id(), TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)));
    let temp = dir.join(temp_name);

    let written = write_synced(&temp, bytes).and_then(|()| std::fs::rename(&temp, path));
    if let Err(source) = written {
        // Best effort: the temporary file may not exist.
        let _ = std::fs::remove_file(&temp);
        return Err(StoreError::io(path, source));
    }
    // Make the rename itself durable; not every platform can sync a folder.
    if let Ok(folder) = File::open(&dir) {
        let _ = folder.sync_all();
    }
    Ok(())
}

/// Creates `path` (which must not exist), writes `bytes` and syncs them.
fn write_synced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = OpenOptions::new().write(true).create_new(true).open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_file_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plan.json");
        write_atomic(&path, b"old").unwrap();
        write_atomic(&path, b"new contents").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new contents");
        let entries: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(entries.len(), 1);
    }

    #[test]
    fn fails_cleanly_naming_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing-folder").join("plan.json");
        let message = write_atomic(&path, b"x").unwrap_err().to_string();
        assert!(message.contains("missing-folder"), "{message}");
        // Renaming onto a folder fails after the temporary file was written.
        let folder = dir.path().join("taken");
        std::fs::create_dir(&folder).unwrap();
        std::fs::write(folder.join("inside"), b"keep").unwrap();
        assert!(write_atomic(&folder, b"x").is_err());
        let entries: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(entries.len(), 1, "{entries:?}");
    }
}
