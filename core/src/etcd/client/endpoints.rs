//! The endpoints of a connection: `http(s)://HOST:PORT` (several) or one `unix:PATH`.

use crate::error::{Error, Result};

/// The socket path of a `unix:PATH` (or `unix://PATH`) endpoint, as `tenure serve --listen`
/// spells it.
pub(super) fn unix_path(endpoint: &str) -> Option<&str> {
    let rest = endpoint.strip_prefix("unix:")?;
    Some(rest.strip_prefix("//").unwrap_or(rest))
}

/// Parses `http://h:p` or `https://h:p` (several, comma-separated) or one `unix:PATH` into
/// endpoints; TLS options (`tls`) need every endpoint to be `https://`.
pub(crate) fn parse_endpoints<S: AsRef<str>>(urls: &[S], tls: bool) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for url in urls {
        for e in url
            .as_ref()
            .split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty())
        {
            if let Some(path) = unix_path(e) {
                if path.is_empty() {
                    return Err(Error::invalid(format!("{e}: expected unix:PATH")));
                }
                if tls {
                    return Err(Error::invalid(format!(
                        "{e}: a unix socket is plain text (its file mode guards it); TLS options \
                         need https:// endpoints"
                    )));
                }
                out.push(e.to_string());
                continue;
            }
            let rest = match (e.strip_prefix("http://"), e.strip_prefix("https://")) {
                (Some(_), _) if tls => {
                    return Err(Error::invalid(format!(
                        "{e}: a CA, client certificate or server name is given, so every \
                         endpoint must be https://"
                    )))
                }
                (Some(rest), _) | (_, Some(rest)) => rest,
                _ => {
                    return Err(Error::invalid(format!(
                        "{e}: expected http://HOST:PORT, https://HOST:PORT or unix:PATH"
                    )))
                }
            };
            if rest.is_empty() || rest.contains('/') {
                return Err(Error::invalid(format!("{e}: expected http(s)://HOST:PORT")));
            }
            out.push(e.to_string());
        }
    }
    if out.is_empty() {
        return Err(Error::invalid("connect needs at least one endpoint"));
    }
    if out.len() > 1 && out.iter().any(|e| unix_path(e).is_some()) {
        return Err(Error::invalid(format!(
            "{}: a unix socket is the only endpoint of a connection",
            out.join(",")
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(urls: &[&str], tls: bool) -> String {
        match parse_endpoints(urls, tls) {
            Err(Error::InvalidArgument(m)) => m,
            other => panic!("{urls:?}: {other:?}"),
        }
    }

    #[test]
    fn several_http_endpoints_in_one_string_or_many() {
        let one = parse_endpoints(&["http://a:1, https://b:2,"], false).unwrap();
        assert_eq!(one, ["http://a:1", "https://b:2"]);
        let many = parse_endpoints(&["http://a:1", "https://b:2"], false).unwrap();
        assert_eq!(one, many);
    }

    #[test]
    fn a_unix_socket_is_alone_and_plain() {
        assert_eq!(
            parse_endpoints(&["unix:///run/t.sock"], false).unwrap(),
            ["unix:///run/t.sock"]
        );
        assert_eq!(unix_path("unix:///run/t.sock"), Some("/run/t.sock"));
        assert_eq!(unix_path("unix:rel.sock"), Some("rel.sock"));
        assert_eq!(unix_path("http://a:1"), None);
        assert!(refused(&["unix:"], false).contains("expected unix:PATH"));
        assert!(refused(&["unix:/t.sock"], true).contains("plain text"));
        assert!(refused(&["unix:/t.sock,http://a:1"], false).contains("only endpoint"));
    }

    #[test]
    fn tls_options_need_https_and_urls_need_a_host_and_port_only() {
        assert!(refused(&["http://a:1"], true).contains("must be https://"));
        assert!(parse_endpoints(&["https://a:1"], true).is_ok());
        assert!(refused(&["a:1"], false).contains("expected http://HOST:PORT"));
        assert!(refused(&["http://a:1/v3"], false).contains("expected http(s)://HOST:PORT"));
        assert!(refused(&["http://"], false).contains("expected http(s)://HOST:PORT"));
        assert!(refused(&[" , "], false).contains("at least one endpoint"));
        assert!(refused(&[], false).contains("at least one endpoint"));
    }
}
