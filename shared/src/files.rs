//! Reading files a user (or a compromised inventory) names, without being stalled or fooled by
//! what stands at the path: [`read_regular`] never blocks on a FIFO or a device, and [`kind`]
//! names a file type for error messages.

use std::fs::FileType;
use std::io::Read as _;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// "a FIFO", "a directory", …: what a path is, for "X is not a regular file (it is a FIFO)".
pub fn kind(file_type: FileType) -> &'static str {
    if file_type.is_file() {
        "a regular file"
    } else if file_type.is_dir() {
        "a directory"
    } else if file_type.is_symlink() {
        "a symbolic link"
    } else if file_type.is_fifo() {
        "a FIFO"
    } else if file_type.is_socket() {
        "a socket"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else {
        "not a file"
    }
}

/// Reads the whole file at `path`, refusing anything but a regular file (symlinks to one are
/// fine). Opening a FIFO for reading blocks until a writer appears, and reading a device may never
/// end; so the file is opened non-blocking and its type checked on the open descriptor, which
/// also leaves no window for the path to be swapped between the check and the read.
///
/// A refusal is an [`std::io::ErrorKind::InvalidInput`] error reading "not a regular file (it is
/// a FIFO)"; callers add the path as they do for every other read error.
pub fn read_regular(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path)?;
    let meta = file.metadata()?;
    if !meta.file_type().is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("not a regular file (it is {})", kind(meta.file_type())),
        ));
    }
    // O_NONBLOCK has no effect on regular files, so the read below is an ordinary one.
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regular_file_and_a_symlink_to_one_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"content").unwrap();
        assert_eq!(read_regular(&file).unwrap(), b"content");
        let link = dir.path().join("l");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert_eq!(read_regular(&link).unwrap(), b"content");
    }

    #[test]
    fn a_fifo_is_refused_at_once_instead_of_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let name = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: mkfifo reads the NUL-terminated path we own.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        // Without a writer, a blocking open would never return; the test would hang, not fail.
        let err = read_regular(&fifo).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
        assert_eq!(err.to_string(), "not a regular file (it is a FIFO)");
    }

    #[test]
    fn a_directory_and_a_device_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let err = read_regular(dir.path()).unwrap_err().to_string();
        assert_eq!(err, "not a regular file (it is a directory)");
        let err = read_regular(Path::new("/dev/zero")).unwrap_err().to_string();
        assert_eq!(err, "not a regular file (it is a character device)");
        let missing = read_regular(&dir.path().join("missing")).unwrap_err();
        assert_eq!(missing.kind(), std::io::ErrorKind::NotFound);
    }
}
