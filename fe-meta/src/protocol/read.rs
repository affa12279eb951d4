//! Answers to the reads that need nothing but a catalog version, and the bounded encoding of
//! answers. The server adds what needs the running node (sync, staleness, STATUS,
//! SHOW_FRONTENDS liveness).
//!
//! INV-1: an answer reflects exactly one catalog version, whose journal id it carries.
//! INV-2: [`encode_response_bounded`] never yields a payload over [`FRAME_LEN_MAX`].

use super::{
    encode_response, ErrorReply, RequestBody, Response, ResponseBody, Status, FRAME_LEN_MAX,
};
use crate::state::catalog::Catalog;
use crate::state::image;

/// The answer to `body` from `catalog`, if `body` is a read that needs only the catalog
/// (DIGEST, SHOW_BACKENDS, SHOW_DATABASES, SHOW_TABLES, GET_VAR, SHOW_VARS); `None` otherwise.
/// The caller has already applied the sync flag and the staleness guard.
pub fn answer_catalog_read(
    catalog: &Catalog,
    body: &RequestBody,
) -> Option<Result<ResponseBody, ErrorReply>> {
    let journal_id = catalog.journal_id();
    Some(Ok(match body {
        RequestBody::Digest(_) => match image::digest(catalog) {
            Ok(digest) => ResponseBody::Digest {
                journal_id,
                digest,
                entry_count: catalog.entry_count(),
            },
            Err(e) => return Some(Err(ErrorReply::new(Status::Internal, e.to_string()))),
        },
        RequestBody::ShowBackends(_) => ResponseBody::Backends {
            journal_id,
            backends: catalog.backends().cloned().collect(),
        },
        RequestBody::ShowDatabases(_) => ResponseBody::Databases {
            journal_id,
            databases: catalog.databases().cloned().collect(),
        },
        RequestBody::ShowTables { db, .. } => match catalog.database_by_name(db) {
            Some(d) => ResponseBody::Tables {
                journal_id,
                tables: catalog.tables_of(d.id).cloned().collect(),
            },
            None => {
                return Some(Err(ErrorReply::new(
                    Status::NotFound,
                    format!("unknown database {db:?}"),
                )))
            }
        },
        RequestBody::GetVar { name, .. } => ResponseBody::Var {
            journal_id,
            value: catalog.var(name).map(str::to_owned),
        },
        RequestBody::ShowVars(_) => ResponseBody::Vars {
            journal_id,
            vars: catalog
                .vars()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
        },
        _ => return None,
    }))
}

/// Encodes `resp`; if the payload would exceed [`FRAME_LEN_MAX`], encodes instead an INTERNAL
/// error for the same request saying so (INV-2).
pub fn encode_response_bounded(resp: &Response) -> Vec<u8> {
    let bytes = encode_response(resp);
    if bytes.len() <= FRAME_LEN_MAX {
        return bytes;
    }
    encode_response(&Response {
        id: resp.id,
        kind: resp.kind,
        result: Err(ErrorReply::new(
            Status::Internal,
            format!(
                "the answer is {} bytes, over the {FRAME_LEN_MAX}-byte frame limit",
                bytes.len()
            ),
        )),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ReadOptions;
    use crate::state::journal::Op;
    use crate::state::replay::apply;
    use zab_net::Zxid;

    #[test]
    fn catalog_reads_answer_from_one_version() {
        let mut c = Catalog::new();
        let db = crate::state::catalog::Database {
            id: 10_000,
            name: "d".into(),
        };
        apply(&mut c, Zxid(3), &Op::CreateDb(db).to_entry()).unwrap();
        let o = ReadOptions::default();
        let dbs = answer_catalog_read(&c, &RequestBody::ShowDatabases(o))
            .unwrap()
            .unwrap();
        assert!(
            matches!(dbs, ResponseBody::Databases { journal_id: Zxid(3), ref databases } if databases.len() == 1)
        );
        let missing = RequestBody::ShowTables {
            opts: o,
            db: "x".into(),
        };
        let err = answer_catalog_read(&c, &missing).unwrap().unwrap_err();
        assert_eq!(err.status, Status::NotFound);
        let var = RequestBody::GetVar {
            opts: o,
            name: "v".into(),
        };
        let got = answer_catalog_read(&c, &var).unwrap().unwrap();
        assert_eq!(
            got,
            ResponseBody::Var {
                journal_id: Zxid(3),
                value: None
            }
        );
        assert!(answer_catalog_read(&c, &RequestBody::Sync).is_none());
        assert!(answer_catalog_read(&c, &RequestBody::ShowFrontends(o)).is_none());
    }
}
