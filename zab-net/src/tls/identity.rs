//! The identity a certificate carries: its subject's common name (CN), or, without one, its
//! first DNS subject alternative name. Read with a minimal DER walker over the certificate
//! rustls already verified.
//!
//! INV-1: never panics on any input; a certificate it cannot read has no identity (`None`).

use rustls_pki_types::CertificateDer;

/// OID 2.5.4.3 (commonName), DER content bytes.
const OID_CN: &[u8] = &[0x55, 0x04, 0x03];
/// OID 2.5.29.17 (subjectAltName), DER content bytes.
const OID_SAN: &[u8] = &[0x55, 0x1d, 0x11];
const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
const OID: u8 = 0x06;
/// `[3]` EXPLICIT: the extensions of a v3 certificate.
const EXTENSIONS: u8 = 0xa3;
/// `[0]` EXPLICIT: the version.
const VERSION: u8 = 0xa0;
/// `[2]` IMPLICIT IA5String: a dNSName in GeneralNames.
const DNS_NAME: u8 = 0x82;
const OCTET_STRING: u8 = 0x04;

/// The identity of `cert` (see the module docs), `None` if it has neither a CN nor a DNS SAN.
pub fn cert_identity(cert: &CertificateDer<'_>) -> Option<String> {
    let (subject, extensions) = parts(cert.as_ref())?;
    common_name(subject).or_else(|| extensions.and_then(first_dns_san))
}

/// One DER TLV: (tag, content, rest).
fn tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
        (len, &rest[n..])
    };
    if rest.len() < len {
        return None;
    }
    Some((tag, &rest[..len], &rest[len..]))
}

/// The subject Name's content and the extensions' content (if any).
fn parts(der: &[u8]) -> Option<(&[u8], Option<&[u8]>)> {
    let (tag, cert, _) = tlv(der)?;
    (tag == SEQUENCE).then_some(())?;
    let (tag, tbs, _) = tlv(cert)?;
    (tag == SEQUENCE).then_some(())?;
    let mut rest = tbs;
    let (tag, _, after) = tlv(rest)?;
    if tag == VERSION {
        rest = after;
    }
    // serialNumber, signature, issuer, validity, then subject.
    for _ in 0..4 {
        rest = tlv(rest)?.2;
    }
    let (tag, subject, mut rest) = tlv(rest)?;
    (tag == SEQUENCE).then_some(())?;
    let mut extensions = None;
    // subjectPublicKeyInfo, then optional [1], [2], [3]; bounded by the input's length.
    while let Some((tag, content, after)) = tlv(rest) {
        if tag == EXTENSIONS {
            extensions = Some(content);
        }
        rest = after;
    }
    Some((subject, extensions))
}

/// The first CN value of a Name.
fn common_name(mut name: &[u8]) -> Option<String> {
    while let Some((tag, set, rest)) = tlv(name) {
        name = rest;
        if tag != SET {
            continue;
        }
        let mut attrs = set;
        while let Some((_, attr, more)) = tlv(attrs) {
            attrs = more;
            let Some((OID, oid, value)) = tlv(attr) else {
                continue;
            };
            if oid == OID_CN {
                let (_, text, _) = tlv(value)?;
                return String::from_utf8(text.to_vec()).ok();
            }
        }
    }
    None
}

/// The first dNSName of the subjectAltName extension.
fn first_dns_san(extensions: &[u8]) -> Option<String> {
    let (_, mut list, _) = tlv(extensions)?;
    while let Some((_, ext, rest)) = tlv(list) {
        list = rest;
        let Some((OID, oid, mut fields)) = tlv(ext) else {
            continue;
        };
        if oid != OID_SAN {
            continue;
        }
        // Skip the optional `critical` BOOLEAN up to the OCTET STRING.
        while let Some((tag, content, more)) = tlv(fields) {
            fields = more;
            if tag != OCTET_STRING {
                continue;
            }
            let (_, mut names, _) = tlv(content)?;
            while let Some((tag, name, more)) = tlv(names) {
                names = more;
                if tag == DNS_NAME {
                    return String::from_utf8(name.to_vec()).ok();
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cert(cn: Option<&str>, sans: &[&str]) -> CertificateDer<'static> {
        let mut params =
            rcgen::CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        if let Some(cn) = cn {
            params
                .distinguished_name
                .push(rcgen::DnType::CommonName, cn);
        }
        let key = rcgen::KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().clone()
    }

    #[test]
    fn common_name_first_then_dns_san() {
        assert_eq!(
            cert_identity(&cert(Some("app-7"), &["a.example"])).as_deref(),
            Some("app-7")
        );
        assert_eq!(
            cert_identity(&cert(None, &["127.0.0.1", "b.example"])).as_deref(),
            Some("b.example")
        );
        assert_eq!(cert_identity(&cert(None, &["127.0.0.1"])), None);
    }

    #[test]
    fn garbage_has_no_identity() {
        for bytes in [
            &[][..],
            &[0x30],
            &[0x30, 0x84, 0xff, 0xff, 0xff, 0xff],
            &[0x30, 0x02, 0x30, 0x00],
        ] {
            assert_eq!(cert_identity(&CertificateDer::from(bytes.to_vec())), None);
        }
    }
}
