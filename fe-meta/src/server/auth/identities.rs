//! The identities file (`auth.identitiesFile`): who may use the client port and with which
//! role. One identity per line, `#` starts a comment:
//!
//! ```text
//! # name      role   proof
//! ops         admin  sha256:<64 hex digits: SHA-256 of the secret>
//! doris-fe    write  sha256:<...>
//! dashboards  read   sha256:<...>
//! fe-node-2   admin  cert        # a verified client certificate that names fe-node-2
//! ```
//!
//! INV-1: the file holds no secret, only SHA-256 digests of them; a secret is compared by its
//! digest in constant time (no early exit on the first differing byte).
//! INV-2: a file that loaded names every identity once, with a known role and proof; every
//! error names the file and the line.

use std::collections::BTreeMap;
use std::path::Path;

use sha2::{Digest, Sha256};
use thiserror::Error;

use crate::protocol::{valid_identity_name, AuthRequest, Role, IDENTITY_LEN_MAX};

/// How an identity proves itself.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Proof {
    /// AUTH with the secret whose SHA-256 this is.
    Secret([u8; 32]),
    /// A client certificate, verified by the TLS layer, that names the identity.
    Certificate,
}

/// The identities the client port accepts (module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identities {
    by_name: BTreeMap<String, (Role, Proof)>,
}

/// Why an identities or credentials file is refused.
#[derive(Debug, Error)]
pub enum AuthFileError {
    /// The file cannot be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A line does not parse.
    #[error("{path} line {line}: {reason}")]
    Line {
        /// The file.
        path: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// The file names no identity.
    #[error("{path} names no identity (each line: NAME ROLE sha256:HEX or NAME ROLE cert)")]
    Empty {
        /// The file.
        path: String,
    },
}

/// SHA-256 of `secret`.
pub fn secret_digest(secret: &[u8]) -> [u8; 32] {
    Sha256::digest(secret).into()
}

fn same_digest(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn parse_hex32(hex: &str) -> Option<[u8; 32]> {
    if hex.len() != 64 || !hex.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

impl Identities {
    /// Reads and parses `path` (INV-2).
    pub fn load(path: &Path) -> Result<Identities, AuthFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| AuthFileError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Identities::parse(&text, &path.display().to_string())
    }

    /// Parses the text of an identities file read from `path` (INV-2).
    pub fn parse(text: &str, path: &str) -> Result<Identities, AuthFileError> {
        let mut by_name = BTreeMap::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let bad = |reason: String| AuthFileError::Line {
                path: path.to_owned(),
                line: i + 1,
                reason,
            };
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [name, role, proof] = fields[..] else {
                return Err(bad(format!(
                    "expected `NAME ROLE sha256:HEX` or `NAME ROLE cert`, found {} field(s)",
                    fields.len()
                )));
            };
            if !valid_identity_name(name) {
                return Err(bad(format!(
                    "`{name}` is not an identity name (1-{IDENTITY_LEN_MAX} letters, digits, \
                     `.`, `_`, `-`, `@`)"
                )));
            }
            let role = Role::from_name(role)
                .ok_or_else(|| bad(format!("unknown role `{role}` (read, write or admin)")))?;
            let proof = match proof.strip_prefix("sha256:") {
                Some(hex) => {
                    Proof::Secret(parse_hex32(hex).ok_or_else(|| {
                        bad("sha256: must be followed by 64 hex digits (the SHA-256 of the secret, \
                         e.g. `printf %s \"$SECRET\" | sha256sum`)"
                        .to_owned())
                    })?)
                }
                None if proof == "cert" => Proof::Certificate,
                None => return Err(bad(format!("unknown proof `{proof}` (sha256:HEX or cert)"))),
            };
            if by_name.insert(name.to_owned(), (role, proof)).is_some() {
                return Err(bad(format!("identity `{name}` is named twice")));
            }
        }
        if by_name.is_empty() {
            return Err(AuthFileError::Empty {
                path: path.to_owned(),
            });
        }
        Ok(Identities { by_name })
    }

    /// The role of the identity AUTH names, if its secret is right (INV-1); `None` for an
    /// unknown identity, a certificate identity or a wrong secret (the caller does not tell
    /// which, so a guesser learns nothing about the names).
    pub fn authenticate(&self, req: &AuthRequest) -> Option<Role> {
        let given = secret_digest(req.secret.expose());
        match self.by_name.get(&req.identity) {
            Some((role, Proof::Secret(want))) if same_digest(want, &given) => Some(*role),
            _ => None,
        }
    }

    /// The role of a client whose verified certificate names `name`, if the file lists it
    /// with proof `cert`.
    pub fn certificate(&self, name: &str) -> Option<Role> {
        match self.by_name.get(name) {
            Some((role, Proof::Certificate)) => Some(*role),
            _ => None,
        }
    }

    /// How many identities the file names.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// Whether the file names none (never true for a loaded file).
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Secret;

    fn hex(d: [u8; 32]) -> String {
        d.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn auth(identity: &str, secret: &str) -> AuthRequest {
        AuthRequest {
            identity: identity.into(),
            secret: Secret::new(secret),
        }
    }

    #[test]
    fn secrets_and_certificates_map_to_their_roles() {
        let text = format!(
            "# comment\nops admin sha256:{}\n\n  app write sha256:{}  # trailing\nfe-2 admin cert\n",
            hex(secret_digest(b"s3cret")),
            hex(secret_digest(b"app-token")),
        );
        let ids = Identities::parse(&text, "ids").unwrap();
        assert_eq!(ids.len(), 3);
        assert_eq!(ids.authenticate(&auth("ops", "s3cret")), Some(Role::Admin));
        assert_eq!(
            ids.authenticate(&auth("app", "app-token")),
            Some(Role::Write)
        );
        assert_eq!(ids.authenticate(&auth("ops", "s3cret ")), None);
        assert_eq!(ids.authenticate(&auth("nobody", "s3cret")), None);
        assert_eq!(
            ids.authenticate(&auth("fe-2", "")),
            None,
            "a cert identity has no secret"
        );
        assert_eq!(ids.certificate("fe-2"), Some(Role::Admin));
        assert_eq!(
            ids.certificate("ops"),
            None,
            "a secret identity is not a certificate"
        );
    }

    #[test]
    fn every_bad_line_is_refused_with_its_number() {
        let digest = hex(secret_digest(b"x"));
        let cases = [
            ("ops admin".to_owned(), "found 2 field(s)"),
            (format!("ops root sha256:{digest}"), "unknown role `root`"),
            ("ops admin sha256:abc".to_owned(), "64 hex digits"),
            (format!("ops admin md5:{digest}"), "unknown proof"),
            (
                format!("o/ps admin sha256:{digest}"),
                "not an identity name",
            ),
            (
                format!("ops admin sha256:{digest}\nops read cert"),
                "named twice",
            ),
        ];
        for (text, want) in cases {
            let err = Identities::parse(&text, "ids.txt").unwrap_err().to_string();
            assert!(
                err.contains(want) && err.contains("ids.txt line"),
                "{text:?}: {err}"
            );
        }
        let err = Identities::parse("# only a comment\n", "ids.txt").unwrap_err();
        assert!(err.to_string().contains("names no identity"), "{err}");
    }
}
