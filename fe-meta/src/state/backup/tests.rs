use std::io::Cursor;

use super::*;
use crate::state::catalog::Database;
use crate::state::journal::Op;
use crate::state::replay::apply;

fn catalog(dbs: u64) -> Catalog {
    let mut c = Catalog::new();
    for i in 0..dbs {
        let db = Database {
            id: 10_000 + i,
            name: format!("db{i}"),
        };
        apply(
            &mut c,
            Zxid(0x1_0000_0000 + i + 1),
            &Op::CreateDb(db).to_entry(),
        )
        .unwrap();
    }
    c
}

fn file(c: &Catalog) -> (BackupHeader, Vec<u8>) {
    let mut out = Vec::new();
    let h = write_backup(c, 0xabc, 17, &mut out).unwrap();
    (h, out)
}

#[test]
fn a_backup_round_trips_with_its_header() {
    let c = catalog(50);
    let (h, bytes) = file(&c);
    assert_eq!(bytes.len() as u64, h.file_len());
    assert_eq!(h.journal_id, c.journal_id());
    assert_eq!(h.entry_count, 50);
    assert_eq!(h.cluster_id, 0xabc);
    assert_eq!(h.created_ms, 17);
    assert_eq!(h.digest, crate::state::image::digest(&c).unwrap());
    let (back, restored) = verify_backup(Cursor::new(&bytes)).unwrap();
    assert_eq!(back, h);
    assert_eq!(restored.journal_id(), c.journal_id());
    assert_eq!(
        crate::state::image::digest(&restored).unwrap(),
        h.digest,
        "equal digest after restore"
    );
    assert_eq!(read_header(Cursor::new(&bytes)).unwrap(), h);
    let (_, empty) = file(&Catalog::new());
    assert!(verify_backup(Cursor::new(&empty)).is_ok());
}

#[test]
fn a_truncated_file_is_refused_at_every_length() {
    let (_, bytes) = file(&catalog(20));
    let len = bytes.len();
    for cut in [0, 1, 7, 8, 50, 87, 88, 89, 200, len - 5, len - 4, len - 1] {
        let e = verify_backup(Cursor::new(&bytes[..cut])).unwrap_err();
        assert!(
            matches!(e, BackupError::Truncated { found, .. } if found == cut as u64),
            "cut at {cut}: {e}"
        );
        assert!(e.to_string().contains("truncated"), "{e}");
    }
    let mut longer = bytes.clone();
    longer.push(0);
    let e = verify_backup(Cursor::new(&longer)).unwrap_err();
    assert!(matches!(e, BackupError::TrailingBytes { .. }), "{e}");
}

#[test]
fn a_flipped_byte_is_refused_with_the_right_error() {
    let (h, bytes) = file(&catalog(20));
    let flip = |at: usize| {
        let mut b = bytes.clone();
        b[at] ^= 0x40;
        verify_backup(Cursor::new(b)).unwrap_err()
    };
    assert!(matches!(flip(0), BackupError::BadMagic { .. }));
    assert!(matches!(
        flip(11),
        BackupError::UnsupportedVersion { found: 0x41 }
    ));
    for at in [12, 20, 40, 70, 80, 85] {
        let e = flip(at);
        assert!(matches!(e, BackupError::HeaderCrc { .. }), "at {at}: {e}");
    }
    let body = HEADER_LEN as usize;
    let end = bytes.len() - TRAILER_LEN as usize;
    for at in [
        body,
        body + 10,
        (body + end) / 2,
        end - 1,
        end,
        bytes.len() - 1,
    ] {
        let e = flip(at);
        assert!(matches!(e, BackupError::CrcMismatch { .. }), "at {at}: {e}");
        assert!(e.to_string().contains("damaged"), "{e}");
    }
    assert_eq!(bytes.len() as u64, h.file_len());
}

#[test]
fn a_header_that_lies_about_the_digest_or_journal_id_is_refused() {
    let c = catalog(5);
    let good = header_of(&c, 1, 0).unwrap();
    let mut out = Vec::new();
    let lie = BackupHeader {
        digest: [7; 32],
        ..good
    };
    write_with_header(&c, &lie, &mut out).unwrap();
    let e = verify_backup(Cursor::new(&out)).unwrap_err();
    assert!(matches!(e, BackupError::DigestMismatch { .. }), "{e}");
    assert!(e.to_string().contains(&good.digest_hex()), "{e}");

    out.clear();
    let lie = BackupHeader {
        journal_id: Zxid(1),
        ..good
    };
    write_with_header(&c, &lie, &mut out).unwrap();
    let e = verify_backup(Cursor::new(&out)).unwrap_err();
    assert!(
        matches!(
            e,
            BackupError::HeaderMismatch {
                what: "journal id",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn not_a_backup_is_refused_by_its_magic() {
    let e = verify_backup(Cursor::new(b"FEMETAIM and then some bytes".to_vec())).unwrap_err();
    assert!(matches!(e, BackupError::BadMagic { .. }), "{e}");
    assert!(e.to_string().contains("not an fe-meta backup"), "{e}");
}
