//! [`Columns`]: a table's column list, kept compact in memory.
//!
//! A table's columns never change once the table exists, and a large catalog holds hundreds of
//! thousands of tables, so the list is one byte buffer instead of a `Vec<Column>` holding a
//! `String` per name: one allocation per table instead of one plus one per column, and about
//! 5 bytes for a short-named column without default instead of 64 plus a 32-byte name
//! allocation.
//!
//! ```text
//! Columns  count varint | Column*
//! Column   name_len varint | name | type (as in `codec`) | flags u8 (1 nullable, 2 is_key,
//!          4 has a default) | [default_len varint | default]
//! varint   7 bits per byte, low bits first, high bit set on every byte but the last
//! ```
//! INV-1: a buffer is only ever built from `Column`s ([`Columns::from`], [`Columns::decode`]
//! after the same checks as `Column`'s decoder), so it always parses: iterating yields exactly
//! the columns it was built from, in order.
//! INV-2: the layout is canonical (one encoding per list), so equal lists have equal buffers
//! and the derived equality is equality of the lists.
//! The wire and image layout of a table's columns (`codec`: count u32 | Column*) is unchanged.

use std::fmt;

use bytes::BufMut;

use super::codec::Codec;
use super::types::{Column, ColumnType, COLUMNS_MAX, NAME_LEN_MAX, VALUE_LEN_MAX};
use crate::wire::{Put, Reader, WireError};

const NULLABLE: u8 = 1;
const IS_KEY: u8 = 2;
const HAS_DEFAULT: u8 = 4;

/// A table's columns, in order (see the module docs).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Columns(Box<[u8]>);

impl Columns {
    /// The number of columns.
    pub fn len(&self) -> usize {
        let mut at = 0;
        varint(&self.0, &mut at).unwrap_or(0)
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The columns, in order.
    pub fn iter(&self) -> ColumnsIter<'_> {
        let mut at = 0;
        let left = varint(&self.0, &mut at).unwrap_or(0);
        ColumnsIter {
            buf: &self.0,
            at,
            left,
        }
    }

    /// The columns as a vector.
    pub fn to_vec(&self) -> Vec<Column> {
        self.iter().collect()
    }

    /// Heap bytes held (for size estimates).
    pub fn heap_len(&self) -> usize {
        self.0.len()
    }

    /// Appends the wire layout (count u32 | Column*, `codec`).
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        out.put_len(self.len());
        for c in self.iter() {
            c.encode(out);
        }
    }

    /// Reads the wire layout straight into the compact one, with the checks of `Column`'s
    /// decoder (INV-1) and without building the columns.
    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Columns, WireError> {
        let n = r.len("column count", COLUMNS_MAX)?;
        // A wire column takes at least 8 bytes and at most 8 more here than on the wire.
        let mut out = Vec::with_capacity(r.remaining().min(n.saturating_mul(16)) + 2);
        put_varint(&mut out, n);
        for _ in 0..n {
            let name = r.len("column name", NAME_LEN_MAX)?;
            let name = r.take("column name", name)?;
            std::str::from_utf8(name).map_err(|_| WireError::BadUtf8 {
                field: "column name",
            })?;
            put_varint(&mut out, name.len());
            out.extend_from_slice(name);
            ColumnType::decode(r)?.encode(&mut out);
            let mut flags = 0;
            if r.bool("column nullable")? {
                flags |= NULLABLE;
            }
            if r.bool("column is_key")? {
                flags |= IS_KEY;
            }
            let default = match r.bool("column default")? {
                true => {
                    let len = r.len("column default", VALUE_LEN_MAX)?;
                    let bytes = r.take("column default", len)?;
                    std::str::from_utf8(bytes).map_err(|_| WireError::BadUtf8 {
                        field: "column default",
                    })?;
                    flags |= HAS_DEFAULT;
                    Some(bytes)
                }
                false => None,
            };
            out.put_u8(flags);
            if let Some(d) = default {
                put_varint(&mut out, d.len());
                out.extend_from_slice(d);
            }
        }
        Ok(Columns(out.into_boxed_slice()))
    }
}

impl Default for Columns {
    fn default() -> Columns {
        Columns::from(Vec::new())
    }
}

impl From<&[Column]> for Columns {
    fn from(cols: &[Column]) -> Columns {
        let mut out = Vec::with_capacity(1 + cols.len() * 8);
        put_varint(&mut out, cols.len());
        for c in cols {
            put_varint(&mut out, c.name.len());
            out.extend_from_slice(c.name.as_bytes());
            c.ty.encode(&mut out);
            let mut flags = 0;
            if c.nullable {
                flags |= NULLABLE;
            }
            if c.is_key {
                flags |= IS_KEY;
            }
            if c.default.is_some() {
                flags |= HAS_DEFAULT;
            }
            out.put_u8(flags);
            if let Some(d) = &c.default {
                put_varint(&mut out, d.len());
                out.extend_from_slice(d.as_bytes());
            }
        }
        Columns(out.into_boxed_slice())
    }
}

impl From<Vec<Column>> for Columns {
    fn from(cols: Vec<Column>) -> Columns {
        Columns::from(&cols[..])
    }
}

impl FromIterator<Column> for Columns {
    fn from_iter<I: IntoIterator<Item = Column>>(iter: I) -> Columns {
        Columns::from(iter.into_iter().collect::<Vec<_>>())
    }
}

impl fmt::Debug for Columns {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<'a> IntoIterator for &'a Columns {
    type Item = Column;
    type IntoIter = ColumnsIter<'a>;

    fn into_iter(self) -> ColumnsIter<'a> {
        self.iter()
    }
}

/// The columns of a [`Columns`], decoded one by one.
#[derive(Clone, Debug)]
pub struct ColumnsIter<'a> {
    buf: &'a [u8],
    at: usize,
    left: usize,
}

impl Iterator for ColumnsIter<'_> {
    type Item = Column;

    fn next(&mut self) -> Option<Column> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        // INV-1: the buffer always parses; a failure would end the iteration, never panic.
        let col = self.column();
        if col.is_none() {
            self.left = 0;
        }
        col
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.left))
    }
}

impl ColumnsIter<'_> {
    fn column(&mut self) -> Option<Column> {
        let name = self.text()?;
        let mut r = Reader::new(self.buf.get(self.at..)?);
        let before = r.remaining();
        let ty = ColumnType::decode(&mut r).ok()?;
        self.at += before - r.remaining();
        let flags = *self.buf.get(self.at)?;
        self.at += 1;
        let default = match flags & HAS_DEFAULT {
            0 => None,
            _ => Some(self.text()?),
        };
        Some(Column {
            name,
            ty,
            nullable: flags & NULLABLE != 0,
            is_key: flags & IS_KEY != 0,
            default,
        })
    }

    fn text(&mut self) -> Option<String> {
        let len = varint(self.buf, &mut self.at)?;
        let bytes = self.buf.get(self.at..self.at.checked_add(len)?)?;
        self.at += len;
        String::from_utf8(bytes.to_vec()).ok()
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: usize) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn varint(buf: &[u8], at: &mut usize) -> Option<usize> {
    let mut v = 0usize;
    for shift in (0..35).step_by(7) {
        let b = *buf.get(*at)?;
        *at += 1;
        v |= usize::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Column> {
        let long = "x".repeat(NAME_LEN_MAX);
        vec![
            Column {
                name: "id".into(),
                ty: ColumnType::BigInt,
                nullable: false,
                is_key: true,
                default: None,
            },
            Column {
                name: long,
                ty: ColumnType::Decimal {
                    precision: 10,
                    scale: 2,
                },
                nullable: true,
                is_key: false,
                default: Some("0.00".into()),
            },
            Column {
                name: "é".into(),
                ty: ColumnType::Varchar(1_048_576),
                nullable: true,
                is_key: false,
                default: Some("d".repeat(VALUE_LEN_MAX)),
            },
            Column {
                name: String::new(),
                ty: ColumnType::Char(3),
                nullable: false,
                is_key: false,
                default: Some(String::new()),
            },
        ]
    }

    #[test]
    fn columns_give_back_what_they_were_built_from() {
        let cols = sample();
        let c = Columns::from(cols.clone());
        assert_eq!(c.to_vec(), cols);
        assert_eq!(c.len(), 4);
        assert_eq!(Columns::default().len(), 0);
        assert!(Columns::default().is_empty());
        assert_eq!(format!("{c:?}"), format!("{cols:?}"));
    }

    #[test]
    fn equal_lists_have_equal_buffers_and_different_lists_differ() {
        let cols = sample();
        assert_eq!(Columns::from(cols.clone()), cols.iter().cloned().collect());
        let mut other = cols.clone();
        other[0].nullable = true;
        assert_ne!(Columns::from(cols.clone()), Columns::from(other));
        assert_ne!(Columns::from(cols[..1].to_vec()), Columns::from(cols));
    }

    #[test]
    fn the_wire_layout_is_that_of_a_vec_of_columns() {
        let cols = sample();
        let mut wire = Vec::new();
        wire.put_len(cols.len());
        for c in &cols {
            c.encode(&mut wire);
        }
        let mut ours = Vec::new();
        Columns::from(cols.clone()).encode(&mut ours);
        assert_eq!(ours, wire);
        let mut r = Reader::new(&wire);
        assert_eq!(Columns::decode(&mut r).unwrap(), Columns::from(cols));
        r.finish().unwrap();
    }

    #[test]
    fn bad_wire_columns_are_refused() {
        let mut wire = Vec::new();
        wire.put_len(1);
        wire.put_len(2);
        wire.extend_from_slice(&[0xff, 0xfe]);
        wire.put_u8(4);
        wire.extend_from_slice(&[0, 0, 0]);
        assert!(Columns::decode(&mut Reader::new(&wire)).is_err());
        let mut long = Vec::new();
        long.put_len(COLUMNS_MAX + 1);
        assert!(Columns::decode(&mut Reader::new(&long)).is_err());
        let mut bad_type = Vec::new();
        bad_type.put_len(1);
        bad_type.put_str("a");
        bad_type.put_u8(12);
        bad_type.put_u16(0);
        bad_type.extend_from_slice(&[0, 0, 0]);
        assert!(Columns::decode(&mut Reader::new(&bad_type)).is_err());
        for cut in 0..20 {
            let mut w = Vec::new();
            Columns::from(sample()).encode(&mut w);
            w.truncate(cut);
            assert!(Columns::decode(&mut Reader::new(&w)).is_err());
        }
    }
}
