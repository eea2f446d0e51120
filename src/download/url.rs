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

/// Whether two URLs name the same repository, however they are spelled: the same host (in any
/// case, with any user or credentials) and the same path (with or without a trailing `/` or
/// `.git`), over any transport (`https://host/a/b`, `ssh://git@host/a/b.git` and
/// `git@host:a/b` are one repository). A bundle locked from one spelling may be updated from
/// another; a different host or path is another repository.
pub fn same_repository(a: &str, b: &str) -> bool {
    repository_key(a) == repository_key(b)
}

/// A URL's host (lower case, with its port when it names one) and path, normalized as
/// [`same_repository`] compares them.
fn repository_key(repo: &str) -> (String, String) {
    let (authority, path) = match repo.split_once("://") {
        Some((_, rest)) => {
            let rest = rest.split(['?', '#']).next().unwrap_or_default();
            let end = rest.find('/').unwrap_or(rest.len());
            (&rest[..end], &rest[end..])
        }
        // scp-like: `[user@]host:path`.
        None => repo.split_once(':').unwrap_or((repo, "")),
    };
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let path = path.trim_matches('/');
    let path = path
        .strip_suffix(".git")
        .unwrap_or(path)
        .trim_end_matches('/');
    (host.to_ascii_lowercase(), path.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_repository_spelled_many_ways_is_one_repository() {
        let spellings = [
            "https://github.com/acme/skills",
            "https://github.com/acme/skills/",
            "https://github.com/acme/skills.git",
            "https://GitHub.com/acme/skills.git/",
            "https://user:token@github.com/acme/skills",
            "ssh://git@github.com/acme/skills.git",
            "git@github.com:acme/skills.git",
            "github.com:acme/skills",
        ];
        for a in spellings {
            for b in spellings {
                assert!(same_repository(a, b), "{a} {b}");
            }
        }
        for other in [
            "https://github.com/acme/skills-2",
            "https://github.com/Acme/skills",
            "https://gitlab.com/acme/skills",
            "https://github.com/acme",
            "ssh://git@github.com:2222/acme/skills.git",
        ] {
            assert!(
                !same_repository("https://github.com/acme/skills", other),
                "{other}"
            );
        }
    }

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
