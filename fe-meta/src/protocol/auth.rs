//! AUTH (kind 27): the first request of a session on a node that requires authentication
//! (`docs/PROTOCOL.md` §11). Request body: `identity str | secret str`; success body:
//! `identity str | role u8` (1 read, 2 write, 3 admin).
//!
//! INV-1: a [`Secret`] never shows its bytes in `Debug` or `Display` output, so a request
//! logged or printed in a test failure does not leak it.
//! INV-2: decoding never panics; an unknown role byte is a [`WireError::BadValue`].

use std::fmt;

use crate::wire::{Put, Reader, WireError};

/// Longest identity name, bytes.
pub const IDENTITY_LEN_MAX: usize = 128;
/// Longest secret, bytes.
pub const SECRET_LEN_MAX: usize = 1024;

/// Whether `name` is a valid identity name: 1..=128 bytes of letters, digits, `.`, `_`, `-`,
/// `@`.
pub fn valid_identity_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= IDENTITY_LEN_MAX
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'@'))
}

/// What an identity may do (each role includes the ones before it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// Catalog and cluster reads: SHOW_*, GET_VAR, DIGEST, STATUS, SYNC, GET_CONFIG,
    /// RECOVERY_INFO.
    Read = 1,
    /// Reads and catalog writes.
    Write = 2,
    /// Everything: membership changes, leader transfer and backups too.
    Admin = 3,
}

impl Role {
    /// Every role, weakest first.
    pub const ALL: [Role; 3] = [Role::Read, Role::Write, Role::Admin];

    /// The role's name as the identities file and the CLI spell it.
    pub fn name(self) -> &'static str {
        match self {
            Role::Read => "read",
            Role::Write => "write",
            Role::Admin => "admin",
        }
    }

    /// The role named `name` (`read`, `write`, `admin`).
    pub fn from_name(name: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.name() == name)
    }

    fn from_code(code: u8) -> Option<Role> {
        Role::ALL.into_iter().find(|r| *r as u8 == code)
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A shared secret (INV-1).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps `secret`.
    pub fn new(secret: impl Into<String>) -> Secret {
        Secret(secret.into())
    }

    /// The secret's bytes (to hash or send; never to log).
    pub fn expose(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// An AUTH request's body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthRequest {
    /// The identity's name.
    pub identity: String,
    /// Its secret.
    pub secret: Secret,
}

pub(super) fn put_auth(o: &mut Vec<u8>, auth: &AuthRequest) {
    o.put_str(&auth.identity);
    o.put_str(&auth.secret.0);
}

pub(super) fn get_auth(r: &mut Reader<'_>) -> Result<AuthRequest, WireError> {
    Ok(AuthRequest {
        identity: r.str("identity", IDENTITY_LEN_MAX)?,
        secret: Secret(r.str("secret", SECRET_LEN_MAX)?),
    })
}

pub(super) fn put_authenticated(o: &mut Vec<u8>, identity: &str, role: Role) {
    o.put_str(identity);
    o.push(role as u8);
}

pub(super) fn get_authenticated(r: &mut Reader<'_>) -> Result<(String, Role), WireError> {
    let identity = r.str("identity", IDENTITY_LEN_MAX)?;
    let code = r.u8("role")?;
    let role = Role::from_code(code).ok_or(WireError::BadValue {
        field: "role",
        value: u64::from(code),
    })?;
    Ok((identity, role))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_is_never_printed() {
        let req = AuthRequest {
            identity: "ops".into(),
            secret: Secret::new("hunter2"),
        };
        let shown = format!("{req:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("ops"), "{shown}");
    }

    #[test]
    fn roles_round_trip_by_name_and_code() {
        for role in Role::ALL {
            assert_eq!(Role::from_name(role.name()), Some(role));
            assert_eq!(Role::from_code(role as u8), Some(role));
        }
        assert_eq!(Role::from_name("root"), None);
        assert_eq!(Role::from_code(0), None);
        assert!(Role::Read < Role::Write && Role::Write < Role::Admin);
    }
}
