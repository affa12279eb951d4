//! `server.N` values as member address text: errors, canonical form, and the round trip
//! (property-tested: random addresses, and random spellings of them).

use proptest::prelude::*;

use super::*;

#[test]
fn parse_value_names_the_value_and_the_reason() {
    let err = ServerAddr::parse_value("h:1:x").unwrap_err();
    assert_eq!(err.value, "h:1:x");
    assert_eq!(err.reason, "bad election port `x`");
    assert_eq!(
        err.to_string(),
        "bad server address `h:1:x`: bad election port `x`"
    );
    let err = ServerAddr::parse_value("h:7:7").unwrap_err();
    assert_eq!(err.reason, "quorum and election ports must differ");
}

#[test]
fn spellings_of_one_address_have_one_canonical_value() {
    let canon = |v: &str| ServerAddr::parse_value(v).unwrap().to_value();
    assert_eq!(canon(" h : 01 :2:participant ; 2181 "), "h:1:2;2181");
    assert_eq!(canon("h:1:2:observer"), "h:1:2:observer");
    assert_eq!(canon("[::1]:1:2;[::1]:3"), "[::1]:1:2;[::1]:3");
    // Brackets around a host without `:` are not needed, so not canonical.
    assert_eq!(canon("[h]:1:2;[c]:3"), "h:1:2;c:3");
    assert_eq!(
        canon("10.0.0.4:2888:3888;0.0.0.0:2181"),
        "10.0.0.4:2888:3888;0.0.0.0:2181"
    );
}

fn host() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z][a-z0-9-]{0,12}(\\.[a-z][a-z0-9-]{0,8}){0,3}",
        any::<[u8; 4]>().prop_map(|b| std::net::Ipv4Addr::from(b).to_string()),
        any::<[u16; 8]>().prop_map(|s| std::net::Ipv6Addr::from(s).to_string()),
    ]
}

prop_compose! {
    fn server_addr()(
        host in host(),
        (quorum_port, election_port) in (any::<u16>(), any::<u16>())
            .prop_filter("ports differ", |(q, e)| q != e),
        observer in any::<bool>(),
        client in proptest::option::of((proptest::option::of(host()), any::<u16>())),
    ) -> ServerAddr {
        ServerAddr {
            host,
            quorum_port,
            election_port,
            learner_type: if observer { LearnerType::Observer } else { LearnerType::Participant },
            client: client.map(|(host, port)| ClientAddr { host, port }),
        }
    }
}

/// Another way to write `a`'s value: spaces around parts, leading zeros, `:participant`,
/// brackets around the host.
fn respell(a: &ServerAddr, spaces: bool, zeros: bool, explicit: bool, brackets: bool) -> String {
    let sp = if spaces { " " } else { "" };
    let port = |p: u16| {
        if zeros {
            format!("{p:05}")
        } else {
            p.to_string()
        }
    };
    let host = |h: &str| {
        if brackets || h.contains(':') {
            format!("[{h}]")
        } else {
            h.to_string()
        }
    };
    let mut v = format!(
        "{sp}{}{sp}:{sp}{}{sp}:{}",
        host(&a.host),
        port(a.quorum_port),
        port(a.election_port)
    );
    match a.learner_type {
        LearnerType::Observer => v.push_str(&format!(":{sp}observer")),
        LearnerType::Participant if explicit => v.push_str(":participant"),
        LearnerType::Participant => {}
    }
    if let Some(c) = &a.client {
        v.push(';');
        v.push_str(sp);
        if let Some(h) = &c.host {
            v.push_str(&format!("{}:", host(h)));
        }
        v.push_str(&port(c.port));
        v.push_str(sp);
    }
    v
}

proptest! {
    #[test]
    fn to_value_parses_back_to_the_same_address(a in server_addr()) {
        let value = a.to_value();
        prop_assert_eq!(ServerAddr::parse_value(&value).unwrap(), a.clone(), "{}", value);
    }

    #[test]
    fn every_spelling_has_the_canonical_value(
        a in server_addr(),
        (spaces, zeros, explicit, brackets) in any::<(bool, bool, bool, bool)>(),
    ) {
        let spelled = respell(&a, spaces, zeros, explicit, brackets);
        let parsed = ServerAddr::parse_value(&spelled);
        prop_assert_eq!(parsed.as_ref().ok(), Some(&a), "{}", spelled);
        prop_assert_eq!(parsed.unwrap().to_value(), a.to_value());
    }

    #[test]
    fn any_text_that_parses_is_canonical_after_one_round(text in "[ a-c0-9:;\\[\\].]{1,30}") {
        if let Ok(a) = ServerAddr::parse_value(&text) {
            let value = a.to_value();
            let again = ServerAddr::parse_value(&value);
            prop_assert_eq!(again.as_ref().ok(), Some(&a), "{} -> {}", text, value);
            prop_assert_eq!(again.unwrap().to_value(), value);
        }
    }
}
