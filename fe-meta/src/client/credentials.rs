//! [`Credentials`]: the identity and secret a client authenticates with (AUTH, the first
//! request on every connection it opens). The credentials file holds one line
//! `IDENTITY:SECRET` (ZooKeeper's digest form `user:password`); `#` lines and blank lines are
//! skipped, and surrounding whitespace is trimmed.
//!
//! INV-1: the secret is a [`Secret`]: never shown by `Debug`; errors name the file and the
//! line, never the secret.

use std::path::Path;

use thiserror::Error;

use crate::protocol::{valid_identity_name, AuthRequest, Secret, IDENTITY_LEN_MAX, SECRET_LEN_MAX};

/// An identity and its secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credentials {
    /// The identity's name.
    pub identity: String,
    /// Its secret.
    pub secret: Secret,
}

/// Why a credentials file is refused (INV-1).
#[derive(Debug, Error)]
pub enum CredentialsError {
    /// It cannot be read.
    #[error("cannot read the credentials file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// Its content is not one `IDENTITY:SECRET` line.
    #[error("credentials file {path}: {reason} (expected one line IDENTITY:SECRET)")]
    Malformed {
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },
}

impl Credentials {
    /// Reads `path` (module docs).
    pub fn load(path: &Path) -> Result<Credentials, CredentialsError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| CredentialsError::Read {
            path: shown.clone(),
            source,
        })?;
        Credentials::parse(&text, &shown)
    }

    /// Parses a credentials file's text (read from `path`, for the errors).
    pub fn parse(text: &str, path: &str) -> Result<Credentials, CredentialsError> {
        let bad = |reason: String| CredentialsError::Malformed {
            path: path.to_owned(),
            reason,
        };
        let mut lines = text
            .lines()
            .enumerate()
            .map(|(i, l)| (i + 1, l.trim()))
            .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'));
        let Some((n, line)) = lines.next() else {
            return Err(bad("it is empty".to_owned()));
        };
        if let Some((extra, _)) = lines.next() {
            return Err(bad(format!("line {extra} is a second credential")));
        }
        let Some((identity, secret)) = line.split_once(':') else {
            return Err(bad(format!("line {n} has no `:`")));
        };
        if !valid_identity_name(identity) {
            return Err(bad(format!(
                "line {n}: the identity is not a name (1-{IDENTITY_LEN_MAX} letters, digits, \
                 `.`, `_`, `-`, `@`)"
            )));
        }
        if secret.is_empty() || secret.len() > SECRET_LEN_MAX {
            return Err(bad(format!(
                "line {n}: the secret must be 1-{SECRET_LEN_MAX} bytes"
            )));
        }
        Ok(Credentials {
            identity: identity.to_owned(),
            secret: Secret::new(secret),
        })
    }

    /// The AUTH request body for these credentials.
    pub fn auth_request(&self) -> AuthRequest {
        AuthRequest {
            identity: self.identity.clone(),
            secret: self.secret.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_identity_colon_secret() {
        let c = Credentials::parse("# ops\n\n  ops:pa:ss  \n", "c").unwrap();
        assert_eq!(c.identity, "ops");
        assert_eq!(c.secret, Secret::new("pa:ss"), "only the first `:` splits");
        for (text, want) in [
            ("", "empty"),
            ("ops", "no `:`"),
            ("ops:", "1-1024 bytes"),
            (":x", "not a name"),
            ("a:b\nc:d", "second credential"),
        ] {
            let err = Credentials::parse(text, "creds").unwrap_err().to_string();
            assert!(
                err.contains(want) && err.contains("creds"),
                "{text:?}: {err}"
            );
        }
        let err = Credentials::parse("ops:hunter2\nx:y", "c").unwrap_err();
        assert!(!format!("{err} {err:?}").contains("hunter2"));
    }
}
