//! SHOW FRONTENDS as a table with Doris' columns and as a JSON document.
//!
//! INV-1: a table row and a JSON item are built from the same [`MemberRow`], one per member,
//! in the order the answer gives them (by sid).
//! INV-2: the table's cells line up with [`HEADERS`]; unknown values print as `-` in the table
//! and as `null` in JSON.

use fe_meta::client::{Members, Read};
use fe_meta::protocol::MemberRow;
use serde_json::{json, Value};

use super::{hex, opt, table, utc, Output};

/// The table's columns, in Doris' order.
const HEADERS: [&str; 16] = [
    "SID",
    "NAME",
    "HOST",
    "CLIENT_PORT",
    "QUORUM_PORT",
    "ELECTION_PORT",
    "ROLE",
    "IS_LEADER",
    "ALIVE",
    "LAST_HEARTBEAT",
    "REPLAYED_JOURNAL_ID",
    "LAST_START_TIME",
    "VERSION",
    "LAG_ENTRIES",
    "LAG_MS",
    "ERR_MSG",
];

/// Explains the JOINING role; printed under the table when a member has it.
const JOINING_NOTE: &str =
    "JOINING: added as a follower, not yet synced; it votes once the leader promoted it\n";

/// SHOW FRONTENDS, with Doris' columns: the members of the committed configuration as the
/// leader sees them (ROLE LEADER / FOLLOWER / OBSERVER / JOINING); times in UTC.
pub(crate) fn frontends(r: Read<Members>) -> Output {
    let members = &r.value.rows;
    let rows: Vec<Vec<String>> = members.iter().map(table_row).collect();
    let items: Vec<Value> = members.iter().map(json_item).collect();
    let mut human = table(&HEADERS, &rows);
    human += &format!(
        "({} frontend{}, configuration version {}, journal id {}; times UTC)\n",
        rows.len(),
        if rows.len() == 1 { "" } else { "s" },
        hex(r.value.config_version),
        hex(r.journal_id)
    );
    if members.iter().any(|m| m.joining) {
        human += JOINING_NOTE;
    }
    Output {
        human,
        json: json!({ "journal_id": r.journal_id.0, "config_version": r.value.config_version.0,
                      "frontends": items }),
    }
}

/// One member's table cells, in [`HEADERS`] order.
fn table_row(m: &MemberRow) -> Vec<String> {
    let f = &m.row;
    vec![
        f.sid.to_string(),
        f.name.clone(),
        f.host.clone(),
        f.client_port.to_string(),
        opt(f.quorum_port),
        opt(f.election_port),
        f.role_name(m.joining).to_owned(),
        f.is_leader.to_string(),
        f.alive.to_string(),
        f.last_heartbeat_ms.map_or("-".to_owned(), utc),
        f.replayed_journal_id.map_or("-".to_owned(), hex),
        f.last_start_time_ms.map_or("-".to_owned(), utc),
        f.version.clone().unwrap_or_else(|| "-".to_owned()),
        opt(f.lag_entries),
        opt(f.lag_ms),
        f.err_msg.clone(),
    ]
}

/// One member as a JSON object keyed by the protocol's field names.
fn json_item(m: &MemberRow) -> Value {
    let f = &m.row;
    json!({"sid": f.sid, "name": f.name, "host": f.host, "client_port": f.client_port,
           "quorum_port": f.quorum_port, "election_port": f.election_port,
           "role": f.role_name(m.joining), "joining": m.joining,
           "is_leader": f.is_leader, "alive": f.alive,
           "last_heartbeat_ms": f.last_heartbeat_ms,
           "replayed_journal_id": f.replayed_journal_id.map(|z| z.0),
           "last_start_time_ms": f.last_start_time_ms, "version": f.version,
           "err_msg": f.err_msg, "lag_entries": f.lag_entries, "lag_ms": f.lag_ms})
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use fe_meta::protocol::FrontendRow;
    use fe_meta::state::catalog::FrontendRole;
    use fe_meta::Zxid;

    fn leader() -> MemberRow {
        let row = FrontendRow {
            sid: 1,
            name: "fe1".into(),
            host: "10.0.0.1".into(),
            client_port: 9010,
            quorum_port: Some(2888),
            election_port: Some(3888),
            role: FrontendRole::Follower,
            is_leader: true,
            alive: true,
            last_heartbeat_ms: Some(1_709_210_096_000),
            replayed_journal_id: Some(Zxid(0x3_0000_0007)),
            last_start_time_ms: Some(1_709_210_000_000),
            version: Some("0.1.0".into()),
            err_msg: String::new(),
            lag_entries: Some(0),
            lag_ms: Some(0),
        };
        MemberRow {
            row,
            joining: false,
        }
    }

    /// A joining member nobody has heard from: every optional cell unknown.
    fn silent_joiner() -> MemberRow {
        let row = FrontendRow {
            sid: 4,
            name: "fe4".into(),
            host: "10.0.0.4".into(),
            client_port: 9010,
            quorum_port: None,
            election_port: None,
            role: FrontendRole::Follower,
            is_leader: false,
            alive: false,
            last_heartbeat_ms: None,
            replayed_journal_id: None,
            last_start_time_ms: None,
            version: None,
            err_msg: "not answering".into(),
            lag_entries: None,
            lag_ms: None,
        };
        MemberRow { row, joining: true }
    }

    fn render(rows: Vec<MemberRow>) -> Output {
        let value = Members {
            config_version: Zxid(0x3_0000_0002),
            rows,
        };
        frontends(Read {
            journal_id: Zxid(0x3_0000_0009),
            value,
        })
    }

    #[test]
    fn the_table_has_doris_columns_a_footer_and_the_joining_note() {
        let out = render(vec![leader(), silent_joiner()]);
        let expected = [
            "SID  NAME  HOST      CLIENT_PORT  QUORUM_PORT  ELECTION_PORT  ROLE     IS_LEADER  \
             ALIVE  LAST_HEARTBEAT       REPLAYED_JOURNAL_ID  LAST_START_TIME      VERSION  \
             LAG_ENTRIES  LAG_MS  ERR_MSG",
            "1    fe1   10.0.0.1  9010         2888         3888           LEADER   true       \
             true   2024-02-29 12:34:56  0x300000007          2024-02-29 12:33:20  0.1.0    \
             0            0",
            "4    fe4   10.0.0.4  9010         -            -              JOINING  false      \
             false  -                    -                    -                    -        \
             -            -       not answering",
            "(2 frontends, configuration version 0x300000002, journal id 0x300000009; times UTC)",
            "JOINING: added as a follower, not yet synced; it votes once the leader promoted it",
        ];
        assert_eq!(out.human, expected.join("\n") + "\n");
    }

    #[test]
    fn one_member_without_joiners_has_no_note() {
        let out = render(vec![leader()]);
        let last = out.human.lines().last().unwrap();
        assert_eq!(
            last,
            "(1 frontend, configuration version 0x300000002, journal id 0x300000009; times UTC)"
        );
    }

    #[test]
    fn json_items_carry_the_same_values_with_nulls_for_unknowns() {
        let out = render(vec![leader(), silent_joiner()]);
        let expected = r#"{"config_version":12884901890,"frontends":[{"alive":true,"client_port":9010,"election_port":3888,"err_msg":"","host":"10.0.0.1","is_leader":true,"joining":false,"lag_entries":0,"lag_ms":0,"last_heartbeat_ms":1709210096000,"last_start_time_ms":1709210000000,"name":"fe1","quorum_port":2888,"replayed_journal_id":12884901895,"role":"LEADER","sid":1,"version":"0.1.0"},{"alive":false,"client_port":9010,"election_port":null,"err_msg":"not answering","host":"10.0.0.4","is_leader":false,"joining":true,"lag_entries":null,"lag_ms":null,"last_heartbeat_ms":null,"last_start_time_ms":null,"name":"fe4","quorum_port":null,"replayed_journal_id":null,"role":"JOINING","sid":4,"version":null}],"journal_id":12884901897}"#;
        assert_eq!(serde_json::to_string(&out.json).unwrap(), expected);
    }
}
