//! The large catalog's entry mix, the same as `--workload memory`'s: of every 5 entries, 2
//! backends, 2 tables of 8 columns (1,000 tables per database) and 1 variable.
//!
//! INV-1: entry `i` is a pure function of `i`: every backend host:port, table and variable
//! name is distinct for distinct `i` (hosts up to 2^24 backends per port, ports from 9050).
//! INV-2: [`Counts::of`]`(n)` counts exactly what `entry(0..n)` makes, and every table's
//! database is below `Counts::dbs`, so making databases `0..dbs` first is enough.

/// Tables per database.
pub const TABLES_PER_DB: usize = 1000;

/// One catalog entry to write.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Entry {
    /// `add-backend host heartbeat_port`.
    Backend {
        /// Its host.
        host: String,
        /// Its heartbeat port.
        port: u16,
    },
    /// `create-table db table` with 8 columns.
    Table {
        /// Its database.
        db: String,
        /// Its name.
        table: String,
    },
    /// `set-var name`.
    Var {
        /// Its name.
        name: String,
    },
}

/// The database name of database number `d`.
pub fn db_name(d: usize) -> String {
    format!("db{d}")
}

/// Entry number `i` (INV-1).
pub fn entry(i: usize) -> Entry {
    let (round, slot) = (i / 5, i % 5);
    match slot {
        0 | 1 => {
            let n = round * 2 + slot;
            Entry::Backend {
                host: format!("10.{}.{}.{}", n >> 16 & 255, n >> 8 & 255, n & 255),
                port: 9050u16.saturating_add(u16::try_from(n >> 24).unwrap_or(u16::MAX - 9050)),
            }
        }
        2 | 3 => {
            let n = round * 2 + slot - 2;
            Entry::Table {
                db: db_name(n / TABLES_PER_DB),
                table: format!("t{}", n % TABLES_PER_DB),
            }
        }
        _ => Entry::Var {
            name: format!("bench.large.v{round}"),
        },
    }
}

/// What `entry(0..n)` makes (INV-2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counts {
    /// Backends.
    pub backends: usize,
    /// Tables.
    pub tables: usize,
    /// Variables.
    pub vars: usize,
    /// Databases the tables need.
    pub dbs: usize,
}

impl Counts {
    /// The counts of the first `n` entries.
    pub fn of(n: usize) -> Counts {
        let (rounds, rest) = (n / 5, n % 5);
        let tables = rounds * 2 + rest.saturating_sub(2).min(2);
        Counts {
            backends: rounds * 2 + rest.min(2),
            tables,
            vars: rounds,
            dbs: tables.div_ceil(TABLES_PER_DB),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn counts_match_the_entries_and_names_are_distinct() {
        for n in (0..40).chain([4_999, 5_000, 5_001, 5_003, 12_345]) {
            let mut c = Counts {
                backends: 0,
                tables: 0,
                vars: 0,
                dbs: 0,
            };
            let mut seen = HashSet::new();
            for i in 0..n {
                let e = entry(i);
                match &e {
                    Entry::Backend { .. } => c.backends += 1,
                    Entry::Table { db, .. } => {
                        c.tables += 1;
                        let d: usize = db[2..].parse().unwrap();
                        c.dbs = c.dbs.max(d + 1);
                    }
                    Entry::Var { .. } => c.vars += 1,
                }
                assert!(seen.insert(e), "entry {i} repeats an earlier one");
            }
            assert_eq!(Counts::of(n), c, "n={n}");
            assert_eq!(c.backends + c.tables + c.vars, n);
        }
    }

    #[test]
    fn the_mix_is_two_fifths_backends_two_fifths_tables_one_fifth_variables() {
        let c = Counts::of(5_000_000);
        assert_eq!(
            (c.backends, c.tables, c.vars),
            (2_000_000, 2_000_000, 1_000_000)
        );
        assert_eq!(c.dbs, 2_000);
        // Hosts stay distinct past 2^16 and 2^24 backends (the port changes then).
        assert_ne!(entry(5 * (1 << 23)), entry(0));
        assert_eq!(
            entry(5 * (1 << 23)),
            Entry::Backend {
                host: "10.0.0.0".to_owned(),
                port: 9051
            }
        );
    }
}
