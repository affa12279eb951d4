//! The catalog's entities and the limits on their sizes.
//!
//! INV-1: every limit here is enforced twice: by command validation before anything is logged,
//! and by the decoders (journal payloads, image records, protocol bodies), so no entity that
//! violates one can enter a catalog.

use std::fmt;
use std::str::FromStr;

use super::columns::Columns;

/// Longest database, table, column or variable name, in bytes.
pub const NAME_LEN_MAX: usize = 256;
/// Longest host name, in bytes.
pub const HOST_LEN_MAX: usize = 255;
/// Longest global variable value or column default, in bytes.
pub const VALUE_LEN_MAX: usize = 64 * 1024;
/// Most columns in one table.
pub const COLUMNS_MAX: usize = 4096;

/// A database.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Database {
    /// Its id, from the id allocator.
    pub id: u64,
    /// Its name, unique among databases.
    pub name: String,
}

/// A table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Table {
    /// Its id, from the id allocator.
    pub id: u64,
    /// The database it belongs to.
    pub db_id: u64,
    /// Its name, unique within the database.
    pub name: String,
    /// Its columns, in order; names unique within the table (kept compact: [`Columns`]).
    pub columns: Columns,
}

/// A table column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Column {
    /// Its name.
    pub name: String,
    /// Its type.
    pub ty: ColumnType,
    /// Whether it may hold NULL.
    pub nullable: bool,
    /// Whether it is part of the key.
    pub is_key: bool,
    /// Its default value, as text.
    pub default: Option<String>,
}

/// A column type. The wire tag of each is given in `docs/PROTOCOL.md`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColumnType {
    /// BOOLEAN
    Boolean,
    /// TINYINT
    TinyInt,
    /// SMALLINT
    SmallInt,
    /// INT
    Int,
    /// BIGINT
    BigInt,
    /// LARGEINT
    LargeInt,
    /// FLOAT
    Float,
    /// DOUBLE
    Double,
    /// DECIMAL(precision, scale), 1 ≤ precision ≤ 38, scale ≤ precision
    Decimal {
        /// Total digits.
        precision: u8,
        /// Digits after the point.
        scale: u8,
    },
    /// DATE
    Date,
    /// DATETIME
    DateTime,
    /// CHAR(n), 1 ≤ n ≤ 255
    Char(u16),
    /// VARCHAR(n), 1 ≤ n ≤ 1048576
    Varchar(u32),
    /// STRING
    String,
}

impl ColumnType {
    /// Whether the parameters are in range.
    pub fn is_valid(&self) -> bool {
        match *self {
            ColumnType::Decimal { precision, scale } => {
                (1..=38).contains(&precision) && scale <= precision
            }
            ColumnType::Char(n) => (1..=255).contains(&n),
            ColumnType::Varchar(n) => (1..=1_048_576).contains(&n),
            _ => true,
        }
    }
}

impl fmt::Display for ColumnType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ColumnType::Boolean => f.write_str("BOOLEAN"),
            ColumnType::TinyInt => f.write_str("TINYINT"),
            ColumnType::SmallInt => f.write_str("SMALLINT"),
            ColumnType::Int => f.write_str("INT"),
            ColumnType::BigInt => f.write_str("BIGINT"),
            ColumnType::LargeInt => f.write_str("LARGEINT"),
            ColumnType::Float => f.write_str("FLOAT"),
            ColumnType::Double => f.write_str("DOUBLE"),
            ColumnType::Decimal { precision, scale } => write!(f, "DECIMAL({precision},{scale})"),
            ColumnType::Date => f.write_str("DATE"),
            ColumnType::DateTime => f.write_str("DATETIME"),
            ColumnType::Char(n) => write!(f, "CHAR({n})"),
            ColumnType::Varchar(n) => write!(f, "VARCHAR({n})"),
            ColumnType::String => f.write_str("STRING"),
        }
    }
}

/// Why a column type does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("bad column type {0:?}: expected BOOLEAN, TINYINT, SMALLINT, INT, BIGINT, LARGEINT, FLOAT, DOUBLE, DECIMAL(p,s), DATE, DATETIME, CHAR(n), VARCHAR(n) or STRING")]
pub struct ColumnTypeError(pub String);

impl FromStr for ColumnType {
    type Err = ColumnTypeError;

    /// Parses the [`Display`](fmt::Display) form, case-insensitively.
    fn from_str(s: &str) -> Result<ColumnType, ColumnTypeError> {
        let err = || ColumnTypeError(s.to_owned());
        let upper = s.trim().to_ascii_uppercase();
        let (name, args) = match upper.split_once('(') {
            Some((name, rest)) => {
                let args = rest.strip_suffix(')').ok_or_else(err)?;
                let args: Vec<&str> = args.split(',').map(str::trim).collect();
                (name.trim().to_owned(), args)
            }
            None => (upper.clone(), Vec::new()),
        };
        let num = |i: usize| -> Result<u32, ColumnTypeError> {
            args.get(i).and_then(|a| a.parse().ok()).ok_or_else(err)
        };
        let ty = match (name.as_str(), args.len()) {
            ("BOOLEAN", 0) => ColumnType::Boolean,
            ("TINYINT", 0) => ColumnType::TinyInt,
            ("SMALLINT", 0) => ColumnType::SmallInt,
            ("INT", 0) => ColumnType::Int,
            ("BIGINT", 0) => ColumnType::BigInt,
            ("LARGEINT", 0) => ColumnType::LargeInt,
            ("FLOAT", 0) => ColumnType::Float,
            ("DOUBLE", 0) => ColumnType::Double,
            ("DECIMAL", 2) => ColumnType::Decimal {
                precision: u8::try_from(num(0)?).map_err(|_| err())?,
                scale: u8::try_from(num(1)?).map_err(|_| err())?,
            },
            ("DATE", 0) => ColumnType::Date,
            ("DATETIME", 0) => ColumnType::DateTime,
            ("CHAR", 1) => ColumnType::Char(u16::try_from(num(0)?).map_err(|_| err())?),
            ("VARCHAR", 1) => ColumnType::Varchar(num(0)?),
            ("STRING", 0) => ColumnType::String,
            _ => return Err(err()),
        };
        if ty.is_valid() {
            Ok(ty)
        } else {
            Err(err())
        }
    }
}

/// A backend (a storage/compute node; metadata only here, nothing connects to it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Backend {
    /// Its id, from the id allocator.
    pub id: u64,
    /// Its host; (host, heartbeat_port) is unique among backends.
    pub host: String,
    /// Its heartbeat port.
    pub heartbeat_port: u16,
    /// Its administrative state.
    pub state: BackendState,
    /// Its storage capacity in bytes (0 = unknown).
    pub capacity_bytes: u64,
}

/// A backend's administrative state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendState {
    /// In service.
    Normal,
    /// Being drained before removal.
    Decommissioning,
    /// Taken out of service by an operator.
    Offline,
}

impl BackendState {
    /// The wire tag.
    pub fn tag(self) -> u8 {
        match self {
            BackendState::Normal => 0,
            BackendState::Decommissioning => 1,
            BackendState::Offline => 2,
        }
    }

    /// The state with wire tag `tag`.
    pub fn from_tag(tag: u8) -> Option<BackendState> {
        match tag {
            0 => Some(BackendState::Normal),
            1 => Some(BackendState::Decommissioning),
            2 => Some(BackendState::Offline),
            _ => None,
        }
    }

    /// The upper-case name shown to users.
    pub fn name(self) -> &'static str {
        match self {
            BackendState::Normal => "NORMAL",
            BackendState::Decommissioning => "DECOMMISSIONING",
            BackendState::Offline => "OFFLINE",
        }
    }
}

/// A frontend (a fe-meta node).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frontend {
    /// Its ZAB server id.
    pub sid: u64,
    /// Its name (e.g. `fe1`); informational.
    pub name: String,
    /// Its host.
    pub host: String,
    /// Its client port.
    pub client_port: u16,
    /// Follower (votes) or observer.
    pub role: FrontendRole,
}

/// Whether a frontend votes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrontendRole {
    /// Votes; one follower is the leader.
    Follower,
    /// Replicates, never votes.
    Observer,
}

impl FrontendRole {
    /// The wire tag.
    pub fn tag(self) -> u8 {
        match self {
            FrontendRole::Follower => 0,
            FrontendRole::Observer => 1,
        }
    }

    /// The role with wire tag `tag`.
    pub fn from_tag(tag: u8) -> Option<FrontendRole> {
        match tag {
            0 => Some(FrontendRole::Follower),
            1 => Some(FrontendRole::Observer),
            _ => None,
        }
    }

    /// `FOLLOWER` or `OBSERVER`, as in the ROLE file.
    pub fn name(self) -> &'static str {
        match self {
            FrontendRole::Follower => "FOLLOWER",
            FrontendRole::Observer => "OBSERVER",
        }
    }

    /// Parses [`FrontendRole::name`] (case-insensitive).
    pub fn parse(s: &str) -> Option<FrontendRole> {
        match s.trim().to_ascii_uppercase().as_str() {
            "FOLLOWER" => Some(FrontendRole::Follower),
            "OBSERVER" => Some(FrontendRole::Observer),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_types_parse_and_print() {
        for s in [
            "INT",
            "DECIMAL(10,2)",
            "VARCHAR(32)",
            "CHAR(8)",
            "STRING",
            "DATETIME",
        ] {
            let ty: ColumnType = s.parse().unwrap();
            assert_eq!(ty.to_string(), s);
        }
        assert_eq!(
            "varchar( 7 )".parse::<ColumnType>().unwrap(),
            ColumnType::Varchar(7)
        );
        for bad in [
            "",
            "INT(3)",
            "DECIMAL(0,0)",
            "DECIMAL(5,6)",
            "CHAR(0)",
            "CHAR(300)",
            "BLOB",
        ] {
            assert!(bad.parse::<ColumnType>().is_err(), "{bad}");
        }
    }
}
