//! Repository URLs as they are shown and kept. A leaf: it imports nothing of `download`.

/// A repository URL as it is shown and kept (answers, progress, messages, the bundles lock,
/// which is meant to be committed): without the credentials a URL may carry for the clone
/// (`https://user:token@host/…`: the whole user part; `ssh://user:secret@host/…`: the secret,
/// the ssh user being no secret). A URL without them (`git@host:path`) is itself.
pub fn without_credentials(repo: &str) -> std::borrow::Cow<'_, str> {
    let Some((scheme, rest)) = repo.split_once("://") else {
        return repo.into();
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let Some((user_part, host)) = authority.rsplit_once('@') else {
        return repo.into();
    };
    let path = &rest[authority.len()..];
    match scheme.eq_ignore_ascii_case("ssh") {
        true => match user_part.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}@{host}{path}").into(),
            None => repo.into(),
        },
        false => format!("{scheme}://{host}{path}").into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_shown_without_its_credentials() {
        for (url, shown) in [
            (
                "https://alice:tok@github.com/a/b.git",
                "https://github.com/a/b.git",
            ),
            ("https://ghp_tok@github.com/a/b", "https://github.com/a/b"),
            ("https://github.com/a/b", "https://github.com/a/b"),
            ("https://a@b:c@host:8443/x?y#z", "https://host:8443/x?y#z"),
            ("ssh://git:secret@host/x.git", "ssh://git@host/x.git"),
            ("ssh://git@host/x.git", "ssh://git@host/x.git"),
            ("git@github.com:a/b.git", "git@github.com:a/b.git"),
            ("https://host/path@with/at", "https://host/path@with/at"),
        ] {
            assert_eq!(without_credentials(url), shown, "{url}");
        }
    }
}
