//! Binary encoding of catalog entities, shared by journal payloads, image records and protocol
//! bodies (layouts in `docs/PROTOCOL.md` §6).
//!
//! ```text
//! Database  id u64 | name str
//! Table     id u64 | db_id u64 | name str | column count u32 | Column* (held as [`Columns`])
//! Column    name str | type | nullable bool | is_key bool | default opt<str>
//! type      tag u8 (1 BOOLEAN 2 TINYINT 3 SMALLINT 4 INT 5 BIGINT 6 LARGEINT 7 FLOAT 8 DOUBLE
//!           9 DECIMAL + precision u8 + scale u8, 10 DATE, 11 DATETIME, 12 CHAR + len u16,
//!           13 VARCHAR + len u32, 14 STRING)
//! Backend   id u64 | host str | heartbeat_port u16 | state u8 | capacity_bytes u64
//! Frontend  sid u64 | name str | host str | client_port u16 | role u8
//! ```
//! INV-1: `decode(encode(x)) == x` for every entity within the limits of `types`, and decode
//! rejects anything outside them (INV-1 of `types`).

use bytes::BufMut;

use super::columns::Columns;
use super::types::{
    Backend, BackendState, Column, ColumnType, Database, Frontend, FrontendRole, Table,
    HOST_LEN_MAX, NAME_LEN_MAX, VALUE_LEN_MAX,
};
use crate::wire::{Put, Reader, WireError};

/// An entity with a binary encoding.
pub trait Codec: Sized {
    /// Appends the encoding to `out`.
    fn encode(&self, out: &mut Vec<u8>);
    /// Reads one value.
    fn decode(r: &mut Reader<'_>) -> Result<Self, WireError>;
}

impl Codec for Database {
    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u64(self.id);
        out.put_str(&self.name);
    }

    fn decode(r: &mut Reader<'_>) -> Result<Database, WireError> {
        Ok(Database {
            id: r.u64("database id")?,
            name: r.str("database name", NAME_LEN_MAX)?,
        })
    }
}

impl Codec for ColumnType {
    fn encode(&self, out: &mut Vec<u8>) {
        match *self {
            ColumnType::Boolean => out.put_u8(1),
            ColumnType::TinyInt => out.put_u8(2),
            ColumnType::SmallInt => out.put_u8(3),
            ColumnType::Int => out.put_u8(4),
            ColumnType::BigInt => out.put_u8(5),
            ColumnType::LargeInt => out.put_u8(6),
            ColumnType::Float => out.put_u8(7),
            ColumnType::Double => out.put_u8(8),
            ColumnType::Decimal { precision, scale } => {
                out.put_u8(9);
                out.put_u8(precision);
                out.put_u8(scale);
            }
            ColumnType::Date => out.put_u8(10),
            ColumnType::DateTime => out.put_u8(11),
            ColumnType::Char(n) => {
                out.put_u8(12);
                out.put_u16(n);
            }
            ColumnType::Varchar(n) => {
                out.put_u8(13);
                out.put_u32(n);
            }
            ColumnType::String => out.put_u8(14),
        }
    }

    fn decode(r: &mut Reader<'_>) -> Result<ColumnType, WireError> {
        let tag = r.u8("column type")?;
        let ty = match tag {
            1 => ColumnType::Boolean,
            2 => ColumnType::TinyInt,
            3 => ColumnType::SmallInt,
            4 => ColumnType::Int,
            5 => ColumnType::BigInt,
            6 => ColumnType::LargeInt,
            7 => ColumnType::Float,
            8 => ColumnType::Double,
            9 => ColumnType::Decimal {
                precision: r.u8("decimal precision")?,
                scale: r.u8("decimal scale")?,
            },
            10 => ColumnType::Date,
            11 => ColumnType::DateTime,
            12 => ColumnType::Char(r.u16("char length")?),
            13 => ColumnType::Varchar(r.u32("varchar length")?),
            14 => ColumnType::String,
            _ => {
                return Err(WireError::BadValue {
                    field: "column type",
                    value: u64::from(tag),
                })
            }
        };
        if !ty.is_valid() {
            return Err(WireError::BadValue {
                field: "column type parameters",
                value: u64::from(tag),
            });
        }
        Ok(ty)
    }
}

impl Codec for Column {
    fn encode(&self, out: &mut Vec<u8>) {
        out.put_str(&self.name);
        self.ty.encode(out);
        out.put_bool(self.nullable);
        out.put_bool(self.is_key);
        out.put_opt_str(self.default.as_deref());
    }

    fn decode(r: &mut Reader<'_>) -> Result<Column, WireError> {
        Ok(Column {
            name: r.str("column name", NAME_LEN_MAX)?,
            ty: ColumnType::decode(r)?,
            nullable: r.bool("column nullable")?,
            is_key: r.bool("column is_key")?,
            default: r.opt_str("column default", VALUE_LEN_MAX)?,
        })
    }
}

impl Codec for Table {
    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u64(self.id);
        out.put_u64(self.db_id);
        out.put_str(&self.name);
        self.columns.encode(out);
    }

    fn decode(r: &mut Reader<'_>) -> Result<Table, WireError> {
        Ok(Table {
            id: r.u64("table id")?,
            db_id: r.u64("table db_id")?,
            name: r.str("table name", NAME_LEN_MAX)?,
            columns: Columns::decode(r)?,
        })
    }
}

impl Codec for Backend {
    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u64(self.id);
        out.put_str(&self.host);
        out.put_u16(self.heartbeat_port);
        out.put_u8(self.state.tag());
        out.put_u64(self.capacity_bytes);
    }

    fn decode(r: &mut Reader<'_>) -> Result<Backend, WireError> {
        let id = r.u64("backend id")?;
        let host = r.str("backend host", HOST_LEN_MAX)?;
        let heartbeat_port = r.u16("backend heartbeat_port")?;
        let tag = r.u8("backend state")?;
        let state = BackendState::from_tag(tag).ok_or(WireError::BadValue {
            field: "backend state",
            value: u64::from(tag),
        })?;
        Ok(Backend {
            id,
            host,
            heartbeat_port,
            state,
            capacity_bytes: r.u64("backend capacity_bytes")?,
        })
    }
}

impl Codec for Frontend {
    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u64(self.sid);
        out.put_str(&self.name);
        out.put_str(&self.host);
        out.put_u16(self.client_port);
        out.put_u8(self.role.tag());
    }

    fn decode(r: &mut Reader<'_>) -> Result<Frontend, WireError> {
        let sid = r.u64("frontend sid")?;
        let name = r.str("frontend name", NAME_LEN_MAX)?;
        let host = r.str("frontend host", HOST_LEN_MAX)?;
        let client_port = r.u16("frontend client_port")?;
        let tag = r.u8("frontend role")?;
        let role = FrontendRole::from_tag(tag).ok_or(WireError::BadValue {
            field: "frontend role",
            value: u64::from(tag),
        })?;
        Ok(Frontend {
            sid,
            name,
            host,
            client_port,
            role,
        })
    }
}
