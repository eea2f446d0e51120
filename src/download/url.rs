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
/// case) and the same path (with or without a trailing `/` or `.git`), over any transport
/// (`https://host/a/b`, `https://user:token@host/a/b.git/` and `ssh://git@host/a/b` are one
/// repository). A path relative to the ssh user's home (`git@host:a/b`, `ssh://git@host/~/a`)
/// is that user's: another user, or the same path from the root, is another repository. A
/// bundle locked from one spelling may be updated from another; nothing else is the same.
pub fn same_repository(a: &str, b: &str) -> bool {
    repository_key(a) == repository_key(b)
}

/// What [`same_repository`] compares: the host (lower case, with its port when the URL names
/// one), the user whose home a relative path starts in (`None` for a path from the root), and
/// the path without slashes or `.git` around it.
fn repository_key(repo: &str) -> (String, Option<String>, String) {
    let (authority, path, relative) = match repo.split_once("://") {
        Some((_, rest)) => {
            let rest = rest.split(['?', '#']).next().unwrap_or_default();
            let end = rest.find('/').unwrap_or(rest.len());
            let path = &rest[end..];
            (&rest[..end], path, path.starts_with("/~"))
        }
        // scp-like, `[user@]host:path`: relative unless the path starts at the root.
        None => {
            let (authority, path) = repo.split_once(':').unwrap_or((repo, ""));
            (authority, path, !path.starts_with('/'))
        }
    };
    let (user, host) = match authority.rsplit_once('@') {
        // The user's name, never a password after it.
        Some((user, host)) => (user.split(':').next().unwrap_or_default(), host),
        None => ("", authority),
    };
    let path = path.trim_matches('/');
    let path = path
        .strip_suffix(".git")
        .unwrap_or(path)
        .trim_end_matches('/');
    let home = relative.then(|| user.to_string());
    (host.to_ascii_lowercase(), home, path.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_repository_spelled_many_ways_is_one_repository() {
        let groups: [&[&str]; 2] = [
            &[
                "https://github.com/acme/skills",
                "https://github.com/acme/skills/",
                "https://github.com/acme/skills.git",
                "https://GitHub.com/acme/skills.git/",
                "https://user:token@github.com/acme/skills",
                "ssh://git@github.com/acme/skills.git",
            ],
            &[
                "git@github.com:acme/skills.git",
                "git@GitHub.com:acme/skills/",
            ],
        ];
        for group in groups {
            for a in group {
                for b in group {
                    assert!(same_repository(a, b), "{a} {b}");
                }
            }
        }
        for (a, b) in [
            (
                "https://github.com/acme/skills",
                "https://github.com/acme/skills-2",
            ),
            (
                "https://github.com/acme/skills",
                "https://github.com/Acme/skills",
            ),
            (
                "https://github.com/acme/skills",
                "https://gitlab.com/acme/skills",
            ),
            ("https://github.com/acme/skills", "https://github.com/acme"),
            (
                "https://github.com/acme/skills",
                "ssh://git@github.com:2222/acme/skills",
            ),
            // Paths from a user's home: each user's own.
            ("alice@host:skills.git", "bob@host:skills.git"),
            ("ssh://alice@host/~/skills", "ssh://bob@host/~/skills"),
            ("git@host:skills", "git@host:/skills"),
            ("git@host:skills", "ssh://git@host/skills"),
        ] {
            assert!(!same_repository(a, b), "{a} {b}");
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
