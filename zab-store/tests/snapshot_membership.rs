//! The committed configuration a snapshot carries (format version 2): round trip with and
//! without one, version-1 files, and every malformed configuration section refused with a
//! clear error, never a panic.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests may fail loudly

use std::collections::BTreeMap;
use std::fs;
use std::io::{Read, Write};
use std::path::Path;

use proptest::prelude::*;
use zab_core::{Member, MemberRole, Membership, ServerId, Zxid};
use zab_store::{
    DataDir, LogOptions, SnapDir, SnapshotReader, SnapshotWriter, StoreError,
    MAX_MEMBERSHIP_SECTION_LEN,
};

fn membership(version: Zxid, roles: &[(u64, MemberRole)]) -> Membership {
    let members = roles
        .iter()
        .map(|&(sid, role)| {
            let address = format!("host{sid}:2888:3888;host{sid}:2181");
            (ServerId(sid), Member { role, address })
        })
        .collect::<BTreeMap<_, _>>();
    Membership { version, members }
}

fn three_and_an_observer() -> Membership {
    membership(
        Zxid(0x2_0000_0007),
        &[
            (1, MemberRole::Participant),
            (2, MemberRole::Participant),
            (3, MemberRole::Joining),
            (6, MemberRole::Observer),
        ],
    )
}

fn read_body(r: &mut SnapshotReader) -> std::io::Result<Vec<u8>> {
    let mut v = vec![];
    r.read_to_end(&mut v)?;
    Ok(v)
}

/// Opens `path` and reads it to the end, as a load does.
fn open_and_read(path: &Path, zxid: Zxid) -> zab_store::Result<(Option<Membership>, Vec<u8>)> {
    let mut r = SnapshotReader::open(path, Some(zxid))?;
    let body = read_body(&mut r).map_err(|e| StoreError::from_io("read", path, e))?;
    let info = r.finish()?;
    Ok((info.membership, body))
}

/// A snapshot file built by hand: the 32-byte header of `version`, then (version 2) the
/// configuration section `section` under its length field `section_len`, the body and a
/// trailer whose CRC matches, so that only the section itself can be wrong.
fn hand_built(version: u32, zxid: Zxid, section_len: u32, section: &[u8], body: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(b"ZSNP");
    f.extend_from_slice(&version.to_be_bytes());
    f.extend_from_slice(&zxid.0.to_be_bytes());
    f.extend_from_slice(&42u64.to_be_bytes());
    f.extend_from_slice(&[0; 4]);
    let hcrc = crc32c::crc32c(&f);
    f.extend_from_slice(&hcrc.to_be_bytes());
    if version >= 2 {
        f.extend_from_slice(&section_len.to_be_bytes());
        f.extend_from_slice(section);
    }
    f.extend_from_slice(body);
    let crc = crc32c::crc32c(&f);
    f.extend_from_slice(&(body.len() as u64).to_be_bytes());
    f.extend_from_slice(&crc.to_be_bytes());
    f.extend_from_slice(b"ZEND");
    f
}

/// The section `Some(m)` is written as: its version, then `Membership::encode()`.
fn section_of(m: &Membership) -> Vec<u8> {
    let mut s = m.version.0.to_be_bytes().to_vec();
    s.extend_from_slice(&m.encode());
    s
}

fn write_snap(snaps: &SnapDir, zxid: Zxid, m: Option<&Membership>, body: &[u8]) {
    let mut w = snaps.create(zxid, 42, m).unwrap();
    w.write_all(body).unwrap();
    let info = w.finish().unwrap();
    assert_eq!(
        info.membership.as_ref(),
        m,
        "the writer reports what it wrote"
    );
}

#[test]
fn a_configuration_round_trips_through_the_file_and_the_data_dir() {
    let d = tempfile::tempdir().unwrap();
    let m = three_and_an_observer();
    let zxid = Zxid(0x2_0000_0010);
    {
        let dd = DataDir::open(d.path(), d.path(), LogOptions::default()).unwrap();
        write_snap(&dd.snaps, zxid, Some(&m), b"state under four members");
    }
    let path = d.path().join("snapshot.0000000200000010");
    let mut r = SnapshotReader::open(&path, Some(zxid)).unwrap();
    assert_eq!(r.info().membership.as_ref(), Some(&m));
    assert_eq!(r.info().cluster_id, 42);
    assert_eq!(r.body_start(), 32 + 4 + section_of(&m).len() as u64);
    assert_eq!(read_body(&mut r).unwrap(), b"state under four members");
    assert_eq!(r.finish().unwrap().membership, Some(m.clone()));

    let mut dd = DataDir::open(d.path(), d.path(), LogOptions::default()).unwrap();
    let mut restored = vec![];
    let st = dd
        .load(|r| r.read_to_end(&mut restored).map(|_| ()))
        .unwrap();
    assert_eq!(restored, b"state under four members");
    assert_eq!(st.snapshot_zxid, zxid);
    assert_eq!(st.membership, Some(m));
}

#[test]
fn no_configuration_round_trips_as_none() {
    let d = tempfile::tempdir().unwrap();
    let snaps = SnapDir::open(d.path(), false).unwrap();
    write_snap(&snaps, Zxid(9), None, b"before any configuration");
    let path = snaps.path(Zxid(9));
    let bytes = fs::read(&path).unwrap();
    assert_eq!(&bytes[4..8], &2u32.to_be_bytes(), "format version 2");
    assert_eq!(&bytes[32..36], &[0; 4], "an empty configuration section");
    assert_eq!(
        open_and_read(&path, Zxid(9)).unwrap(),
        (None, b"before any configuration".to_vec())
    );
    let (info, ()) = snaps.load_newest(|_| Ok(())).unwrap().unwrap();
    assert_eq!(info.membership, None);
}

#[test]
fn the_bootstrap_configuration_version_zero_round_trips() {
    let d = tempfile::tempdir().unwrap();
    let snaps = SnapDir::open(d.path(), false).unwrap();
    let m = membership(Zxid::ZERO, &[(1, MemberRole::Participant)]);
    write_snap(&snaps, Zxid(3), Some(&m), b"");
    assert_eq!(
        open_and_read(&snaps.path(Zxid(3)), Zxid(3)).unwrap(),
        (Some(m), vec![])
    );
}

#[test]
fn a_version_1_file_reads_with_no_configuration() {
    let d = tempfile::tempdir().unwrap();
    let snaps = SnapDir::open(d.path(), false).unwrap();
    let zxid = Zxid(0x1_0000_0005);
    fs::write(
        snaps.path(zxid),
        hand_built(1, zxid, 0, &[], b"written by an older build"),
    )
    .unwrap();
    let r = SnapshotReader::open(&snaps.path(zxid), Some(zxid)).unwrap();
    assert_eq!(r.body_start(), 32);
    assert_eq!(r.info().cluster_id, 42);
    assert_eq!(
        open_and_read(&snaps.path(zxid), zxid).unwrap(),
        (None, b"written by an older build".to_vec())
    );
    let mut dd = DataDir::open(d.path(), d.path(), LogOptions::default()).unwrap();
    let st = dd.load(|r| read_body(r).map(|_| ())).unwrap();
    assert_eq!((st.snapshot_zxid, st.membership), (zxid, None));
}

#[test]
fn the_hand_built_layout_is_what_the_writer_writes() {
    let d = tempfile::tempdir().unwrap();
    let snaps = SnapDir::open(d.path(), false).unwrap();
    let m = three_and_an_observer();
    let zxid = Zxid(0x2_0000_0010);
    write_snap(&snaps, zxid, Some(&m), b"body");
    let section = section_of(&m);
    assert_eq!(
        fs::read(snaps.path(zxid)).unwrap(),
        hand_built(2, zxid, section.len() as u32, &section, b"body")
    );
}

/// Asserts that reading a file holding `bytes` fails with a `BadSnapshot` naming the file and
/// mentioning `needle`.
fn assert_refused(dir: &Path, zxid: Zxid, bytes: &[u8], needle: &str) {
    let path = dir.join(zab_store::snapshot_name(zxid));
    fs::write(&path, bytes).unwrap();
    let e = open_and_read(&path, zxid).expect_err("a bad configuration section was accepted");
    assert!(matches!(e, StoreError::BadSnapshot { .. }), "{e}");
    let text = e.to_string();
    assert!(text.contains(&path.display().to_string()), "{text}");
    assert!(text.contains(needle), "{text} lacks {needle:?}");
}

#[test]
fn a_corrupt_configuration_is_a_clear_error() {
    let d = tempfile::tempdir().unwrap();
    let zxid = Zxid(0x2_0000_0010);
    let good = section_of(&three_and_an_observer());

    // A role code no build knows (the CRC matches: only decoding can tell).
    let mut bad_role = good.clone();
    bad_role[8 + 1 + 4 + 8] = 9;
    let f = hand_built(2, zxid, bad_role.len() as u32, &bad_role, b"x");
    assert_refused(d.path(), zxid, &f, "unknown role 9");

    // Trailing garbage after the last member.
    let mut trailing = good.clone();
    trailing.push(0);
    let f = hand_built(2, zxid, trailing.len() as u32, &trailing, b"x");
    assert_refused(d.path(), zxid, &f, "after the last member");

    // Shorter than the version field.
    let f = hand_built(2, zxid, 5, &good[..5], b"x");
    assert_refused(d.path(), zxid, &f, "shorter than its version field");

    // A configuration from after the snapshot's own zxid.
    let newer = section_of(&membership(
        Zxid(zxid.0 + 1),
        &[(1, MemberRole::Participant)],
    ));
    let f = hand_built(2, zxid, newer.len() as u32, &newer, b"x");
    assert_refused(d.path(), zxid, &f, "newer than the snapshot");

    // A byte flipped inside an address still decodes: the whole-file CRC catches it.
    let path = d.path().join(zab_store::snapshot_name(zxid));
    let mut f = hand_built(2, zxid, good.len() as u32, &good, b"x");
    let address_byte = 32 + 4 + 8 + 1 + 4 + 8 + 1 + 2;
    f[address_byte] ^= 0x01;
    fs::write(&path, &f).unwrap();
    let e = open_and_read(&path, zxid).unwrap_err();
    assert!(e.to_string().contains("checksum mismatch"), "{e}");
}

#[test]
fn a_truncated_or_oversized_section_is_a_clear_error() {
    let d = tempfile::tempdir().unwrap();
    let zxid = Zxid(0x2_0000_0010);
    let good = section_of(&three_and_an_observer());
    let whole = hand_built(2, zxid, good.len() as u32, &good, b"");

    // The file cut inside the section (and so without a trailer).
    for cut in [33, 36, 40, 32 + 4 + good.len() - 1] {
        let path = d.path().join(zab_store::snapshot_name(zxid));
        fs::write(&path, &whole[..cut]).unwrap();
        assert!(
            matches!(
                open_and_read(&path, zxid),
                Err(StoreError::BadSnapshot { .. })
            ),
            "cut at {cut} went unnoticed"
        );
    }
    // A length field promising more than the file holds.
    let f = hand_built(2, zxid, good.len() as u32 + 100, &good, b"");
    assert_refused(d.path(), zxid, &f, "does not fit");
    // A length beyond the bound, whatever the file size.
    let f = hand_built(2, zxid, u32::MAX, &good, b"");
    assert_refused(d.path(), zxid, &f, "more than the");
    // A header too short for the length field at all.
    let f = hand_built(2, zxid, 0, &[], b"");
    assert_refused(d.path(), zxid, &f[..f.len() - 1], "truncated");
}

#[test]
fn the_writer_refuses_a_configuration_it_could_not_read_back() {
    let d = tempfile::tempdir().unwrap();
    let newer = membership(Zxid(11), &[(1, MemberRole::Participant)]);
    let e = SnapshotWriter::create(d.path(), Zxid(10), 1, Some(&newer), false).unwrap_err();
    assert!(e.to_string().contains("newer than the snapshot"), "{e}");
    let address = "a".repeat(1000);
    let huge = Membership {
        version: Zxid(1),
        members: (1..=MAX_MEMBERSHIP_SECTION_LEN as u64 / 1000)
            .map(|sid| {
                let role = MemberRole::Participant;
                let address = address.clone();
                (ServerId(sid), Member { role, address })
            })
            .collect(),
    };
    let e = SnapshotWriter::create(d.path(), Zxid(10), 1, Some(&huge), false).unwrap_err();
    assert!(e.to_string().contains("more than the"), "{e}");
    assert!(
        fs::read_dir(d.path()).unwrap().next().is_none(),
        "no file is left behind"
    );
}

fn arb_membership() -> impl Strategy<Value = Membership> {
    let role = prop_oneof![
        Just(MemberRole::Participant),
        Just(MemberRole::Observer),
        Just(MemberRole::Joining),
    ];
    (
        0u64..=0x2_0000_0010,
        proptest::collection::btree_map(any::<u64>(), (role, "[ -~]{0,40}"), 0..8),
        any::<u64>(),
    )
        .prop_map(|(version, members, first)| {
            let mut members: BTreeMap<ServerId, Member> = members
                .into_iter()
                .map(|(sid, (role, address))| (ServerId(sid), Member { role, address }))
                .collect();
            // INV-1 of a configuration: at least one participant.
            members.insert(
                ServerId(first),
                Member {
                    role: MemberRole::Participant,
                    address: "leader:2888:3888".into(),
                },
            );
            Membership {
                version: Zxid(version),
                members,
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Whatever the section's bytes (under a matching CRC), opening and reading never panics;
    /// what is accepted is exactly what `Membership::decode` accepts.
    #[test]
    fn any_section_bytes_decode_or_fail_cleanly(
        section in prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..64),
            arb_membership().prop_map(|m| section_of(&m)).prop_flat_map(|s| {
                let n = s.len();
                (Just(s), 0..n, any::<u8>()).prop_map(|(mut s, i, b)| { s[i] = b; s })
            }),
        ],
        len_delta in prop_oneof![Just(0i64), -4i64..4],
    ) {
        let d = tempfile::tempdir().unwrap();
        let zxid = Zxid(0x2_0000_0010);
        let len = (section.len() as i64 + len_delta).clamp(0, u32::MAX as i64) as u32;
        let path = d.path().join(zab_store::snapshot_name(zxid));
        fs::write(&path, hand_built(2, zxid, len, &section, b"body")).unwrap();
        let got = open_and_read(&path, zxid);
        if len_delta != 0 {
            // A shifted boundary: section, body and trailer no longer line up; any clean
            // outcome (no panic) will do.
        } else if section.is_empty() {
            prop_assert_eq!(got.unwrap(), (None, b"body".to_vec()));
        } else {
            let want = (section.len() >= 8)
                .then(|| {
                    let version = Zxid(u64::from_be_bytes(section[..8].try_into().unwrap()));
                    Membership::decode(version, &section[8..]).ok().filter(|m| m.version <= zxid)
                })
                .flatten();
            match (&got, want) {
                (Ok((Some(m), body)), Some(w)) => {
                    prop_assert_eq!(m, &w);
                    prop_assert_eq!(body.as_slice(), b"body");
                }
                (Err(StoreError::BadSnapshot { .. }), None) => {}
                (other, w) => prop_assert!(false, "read {other:?}, decode says {w:?}"),
            }
        }
    }

    /// Any valid configuration round-trips through a snapshot file.
    #[test]
    fn any_configuration_round_trips(m in arb_membership(), body in proptest::collection::vec(any::<u8>(), 0..300)) {
        let d = tempfile::tempdir().unwrap();
        let snaps = SnapDir::open(d.path(), false).unwrap();
        let zxid = Zxid(0x2_0000_0010);
        write_snap(&snaps, zxid, Some(&m), &body);
        prop_assert_eq!(open_and_read(&snaps.path(zxid), zxid).unwrap(), (Some(m), body));
    }
}
