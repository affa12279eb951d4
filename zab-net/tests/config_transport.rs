//! From a zoo.cfg to a transport configuration and a core configuration.

// Test helpers fail loudly on purpose.
#![allow(clippy::unwrap_used)]

use zab_core::{LearnerType, ServerId};
use zab_net::config::{parse_with, ConfigError};
use zab_net::transport::{NetError, TransportConfig};

const CFG: &str = "\
tickTime=500
initLimit=10
syncLimit=4
dataDir=/tmp/zab-node
clusterId=0x2a
meta_delay_toleration_second=300
server.1=127.0.0.1:2888:3888
server.2=127.0.0.1:2889:3889
server.3=127.0.0.1:2890:3890:observer
";

#[test]
fn a_zoo_cfg_configures_transport_and_core() {
    let node = parse_with(CFG, &["meta_delay_toleration_second"]).unwrap();
    let cluster_id = node.cluster_id.unwrap();
    let t = TransportConfig::from_node(&node, ServerId(2), cluster_id).unwrap();
    assert_eq!(t.sid, ServerId(2));
    assert_eq!(t.cluster_id, 0x2a);
    assert_eq!(t.listen.quorum.to_string(), "127.0.0.1:2889");
    assert_eq!(t.listen.election.to_string(), "127.0.0.1:3889");
    assert_eq!(
        t.peers.keys().copied().collect::<Vec<_>>(),
        vec![ServerId(1), ServerId(3)]
    );
    assert_eq!(t.peers[&ServerId(3)].election.port(), 3890);

    let core = node.to_core(ServerId(3)).unwrap();
    assert_eq!(core.tick_ms, 500);
    assert_eq!(core.members[&ServerId(3)], LearnerType::Observer);
    assert_eq!(
        node.extra_value::<u64>("meta_delay_toleration_second")
            .unwrap(),
        Some(300)
    );

    assert!(matches!(
        TransportConfig::from_node(&node, ServerId(4), cluster_id),
        Err(NetError::NotAMember { sid: ServerId(4) })
    ));
    assert!(matches!(
        node.to_core(ServerId(4)),
        Err(ConfigError::NotAMember { sid: 4 })
    ));
}
