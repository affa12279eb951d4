//! A tiny XML well-formedness check for the tests of the SVG writer ([`super::svg`]): tags
//! balance and nest, attribute values are quoted, `&` starts one of the five predefined
//! entities, and there is one root element. Not a parser: no comments, CDATA or DTDs, which
//! the writer never produces.

/// The index of the `>` that ends the tag `tail` starts with, skipping quoted values.
fn tag_end(tail: &str) -> Result<usize, String> {
    let mut quote: Option<char> = None;
    for (j, c) in tail.char_indices().skip(1) {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (_, '<') => return Err("< inside a tag".to_owned()),
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '>') => return Ok(j),
            _ => {}
        }
    }
    Err("unclosed tag".to_owned())
}

/// A small well-formedness check: tags balance and nest, attribute values are quoted,
/// `&` starts an entity, one root element. Returns the element names in document order.
pub fn check_xml(doc: &str) -> Result<Vec<String>, String> {
    let mut stack: Vec<String> = Vec::new();
    let mut names = Vec::new();
    let mut roots = 0;
    let mut rest = doc;
    while let Some(i) = rest.find(['<', '&']) {
        let (text, tail) = rest.split_at(i);
        if stack.is_empty() && !text.trim().is_empty() {
            return Err(format!("text outside the root: {text:?}"));
        }
        if let Some(after) = tail.strip_prefix('&') {
            let ok = ["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"]
                .iter()
                .any(|e| tail.starts_with(e));
            if !ok {
                return Err(format!("bare & at {:?}", &tail[..tail.len().min(20)]));
            }
            rest = after;
            continue;
        }
        if let Some(pi) = tail.strip_prefix("<?") {
            let end = pi.find("?>").ok_or("unclosed <?")?;
            rest = &pi[end + 2..];
            continue;
        }
        let end = tag_end(tail)?;
        let tag = &tail[1..end];
        rest = &tail[end + 1..];
        if let Some(name) = tag.strip_prefix('/') {
            let open = stack
                .pop()
                .ok_or(format!("</{name}> without an open tag"))?;
            if open != name.trim() {
                return Err(format!("<{open}> closed by </{name}>"));
            }
            continue;
        }
        let name: String = tag
            .chars()
            .take_while(|c| !c.is_whitespace() && *c != '/')
            .collect();
        if name.is_empty() {
            return Err(format!("a tag without a name: <{tag}>"));
        }
        // Every attribute is name="value".
        let attrs = tag[name.len()..].trim().trim_end_matches('/');
        let mut chunks = attrs.split('"').step_by(2);
        if chunks.any(|chunk| chunk.split_whitespace().any(|a| !a.ends_with('='))) {
            return Err(format!("an unquoted attribute in <{tag}>"));
        }
        if stack.is_empty() {
            roots += 1;
        }
        names.push(name.clone());
        if !tag.ends_with('/') {
            stack.push(name);
        }
    }
    if !rest.trim().is_empty() || !stack.is_empty() || roots != 1 {
        return Err(format!("unbalanced: open {stack:?}, roots {roots}"));
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_check_accepts_well_formed_documents_and_refuses_broken_ones() {
        let names = check_xml(r#"<?xml version="1.0"?><a x="1"><b/><c>t &amp; u</c></a>"#);
        assert_eq!(
            names,
            Ok(vec!["a".to_owned(), "b".to_owned(), "c".to_owned()])
        );
        assert!(check_xml("<svg><g></svg>").is_err());
        assert!(check_xml("<svg a=b></svg>").is_err());
        assert!(check_xml("<svg>a & b</svg>").is_err());
        assert!(check_xml("<a/><b/>").is_err());
        assert!(check_xml("<a x=\"<\"/>").is_err());
    }
}
