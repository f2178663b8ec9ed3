//! Config files as every KARL program reads them: TOML, optional unless named on the
//! command line, with errors that name the file.

use std::path::Path;

use serde::Deserialize;

/// Where karl-coord listens by default, and where karl-ctl dials by default.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7400";

#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("config file {path}: {message}")]
    Parse { path: String, message: String },
}

/// Reads and parses a TOML file into `T`; a missing optional file is `Ok(None)`.
pub fn read_toml<T: for<'de> Deserialize<'de>>(
    path: &Path,
    required: bool,
) -> Result<Option<T>, FileError> {
    match std::fs::read_to_string(path) {
        Ok(text) => toml::from_str(&text)
            .map(Some)
            .map_err(|e| FileError::Parse {
                path: path.display().to_string(),
                message: e.to_string(),
            }),
        Err(e) if !required && e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(FileError::Read {
            path: path.display().to_string(),
            source,
        }),
    }
}
