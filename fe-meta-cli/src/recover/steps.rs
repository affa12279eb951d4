//! What `fe-meta recover` prints after the rewrite (or, with `--plan`, instead of it): where the
//! old files went, the zoo.cfg line to keep, and the operator's next steps — start this node,
//! then add every other old member back, one at a time, from a wiped data dir with `--helper`.

use zab_core::{MemberRole, Membership, ServerId};

use super::local::Local;

/// The `server.N` line of `sid` in `m`, if it is a member.
fn line(m: &Membership, sid: ServerId) -> Option<String> {
    m.members
        .get(&sid)
        .map(|member| format!("server.{}={}", sid.0, member.address))
}

/// The zoo.cfg advice and the next steps; `config` is the zoo.cfg path as given.
pub(crate) fn next_steps(local: &Local, new: &Membership, config: &str) -> String {
    let me = ServerId(local.sid);
    let own = line(new, me).unwrap_or_default();
    let via = &local.client_addr;
    let mut t = format!(
        "zoo.cfg: the data dir's configuration wins over zoo.cfg's server.N lines; to avoid a \
         warning at every start, keep only this server's line in {config}:\n  {own}\n\
         (clusterId stays the same.)\n\nNext steps:\n\
         1. Make sure every other old member is stopped: none may run with its old data.\n\
         2. Start this node as usual (no --bootstrap, no --helper); it leads alone and serves \
         writes:\n     fe-meta server --config {config}\n"
    );
    if local.node.cluster_id.is_none() {
        if let Some(id) = local.held.cluster_id {
            t += &format!(
                "   zoo.cfg has no clusterId: add `clusterId={id}` (the data dir's VERSION) \
                 before starting it without --helper.\n"
            );
        }
    }
    let others: Vec<(&ServerId, MemberRole)> = local
        .in_force
        .members
        .iter()
        .filter(|(sid, _)| **sid != me)
        .map(|(sid, m)| (sid, m.role))
        .collect();
    if others.is_empty() {
        return t;
    }
    t += "3. Add the other members back, one at a time (the next one once `fe-meta \
          show-frontends` lists the previous one as a follower, not joining). For each, on its \
          host: stop it, wipe its data dir (keep only myid), then:\n";
    for (sid, role) in others {
        let add = match role {
            MemberRole::Observer => "add-observer",
            _ => "add-follower",
        };
        let l = line(&local.in_force, *sid).unwrap_or_default();
        t += &format!(
            "     fe-meta {add} \"{l}\" --server {via}\n     \
             fe-meta server --config zoo.cfg --helper {via}      # on server {}'s host\n",
            sid.0
        );
    }
    t
}
