//! One GET against the registry: the shared client (rustls, our User-Agent, a redirect policy
//! bounded and never leaving TLS), the live timeout, the status rules and a body read that stops at the size cap.
//! Transport details never reach an error: a failure is only ever one of [`RegistryError`]'s
//! kinds, so no message can carry the registry's URL or what it answered.

use serde_json::Value;

use super::admission::{self, Turn};
use super::{Endpoint, RegistryError};

/// `iii-directory/<crate version>` (contract).
pub const USER_AGENT: &str = concat!("iii-directory/", env!("CARGO_PKG_VERSION"));

/// Redirects followed per request: enough for a moved API, not a loop.
const MAX_REDIRECTS: usize = 5;

/// Whether a request that went through `previous` (its first URL included) may follow a
/// redirect to `next`: at most [`MAX_REDIRECTS`] of them, and never from `https` to plain
/// `http`. Why: a registry reached over TLS that sends its answer over plain HTTP lets anyone
/// on the way rewrite the bundle a download lands (the lock records what arrived, it cannot
/// tell it was changed); a registry configured as `http://` was trusted so from the start.
fn next_hop(previous: &[reqwest::Url], next: &reqwest::Url) -> Result<(), &'static str> {
    if previous.len() > MAX_REDIRECTS {
        return Err("the registry redirected too many times");
    }
    let was_tls = previous.iter().any(|url| url.scheme() == "https");
    if was_tls && next.scheme() != "https" {
        tracing::warn!(
            "the registry redirected a request made over https to plain {}; refused (set registry_url to the address it serves over https)",
            next.scheme()
        );
        return Err("the registry redirected from https to plain http");
    }
    Ok(())
}

/// The reqwest client, built once; `None` when the TLS backend could not start (every
/// request then fails as unreachable, and the reason is logged once).
pub struct Http {
    client: Option<reqwest::Client>,
}

impl Http {
    pub fn new() -> Http {
        let client = reqwest::Client::builder()
            .user_agent(USER_AGENT)
            .redirect(reqwest::redirect::Policy::custom(|attempt| match next_hop(
                attempt.previous(),
                attempt.url(),
            ) {
                Ok(()) => attempt.follow(),
                Err(why) => attempt.error(why),
            }))
            .build();
        match client {
            Ok(client) => Http {
                client: Some(client),
            },
            Err(e) => {
                tracing::error!("cannot build the registry HTTP client: {e}");
                Http { client: None }
            }
        }
    }

    /// The body of a GET, as bytes: 404 is `NotFound`, other non-2xx statuses `Status`, a
    /// body over `cap` bytes `TooLarge`, and anything that kept the answer from arriving
    /// (within the timeout) `Unreachable`.
    pub async fn get_bytes(
        &self,
        endpoint: &Endpoint,
        url: &str,
        query: &[(&str, &str)],
        cap: u64,
    ) -> Result<Vec<u8>, RegistryError> {
        let response = self.answered(endpoint, url, query, cap).await?;
        body(response, cap).await
    }

    /// [`Http::get_bytes`] of a body that carries a bundle's files, with the turn it was read
    /// in (`admission`): taken once the registry answered, so a registry that never does
    /// holds no turn while the others wait.
    pub async fn get_files(
        &self,
        endpoint: &Endpoint,
        url: &str,
        query: &[(&str, &str)],
        cap: u64,
    ) -> Result<(Vec<u8>, Turn<'static>), RegistryError> {
        let response = self.answered(endpoint, url, query, cap).await?;
        let turn = admission::take_turn(cap).await?;
        Ok((body(response, cap).await?, turn))
    }

    /// [`Http::get_bytes`], decoded as JSON.
    pub async fn get_json(
        &self,
        endpoint: &Endpoint,
        url: &str,
        query: &[(&str, &str)],
        cap: u64,
    ) -> Result<Value, RegistryError> {
        decode(self.get_bytes(endpoint, url, query, cap).await?).await
    }

    /// The response to a GET once its status and headers arrived, checked (see
    /// [`Http::get_bytes`]); its body not read yet.
    async fn answered(
        &self,
        endpoint: &Endpoint,
        url: &str,
        query: &[(&str, &str)],
        cap: u64,
    ) -> Result<reqwest::Response, RegistryError> {
        let client = self.client.as_ref().ok_or(RegistryError::Unreachable)?;
        let response = client
            .get(url)
            .query(query)
            .timeout(endpoint.timeout)
            .send()
            .await
            .map_err(unreachable)?;
        let status = response.status();
        if status == reqwest::StatusCode::NOT_FOUND {
            return Err(RegistryError::NotFound);
        }
        if !status.is_success() {
            return Err(RegistryError::Status(status.as_u16()));
        }
        if response.content_length().is_some_and(|length| length > cap) {
            return Err(RegistryError::TooLarge(cap));
        }
        Ok(response)
    }
}

/// A response's body, read no further than `cap` bytes (`TooLarge` past it). A body whose
/// length is announced is read into a buffer of that length (at most `cap`) rather than one
/// grown by doubling, which could hold up to twice the body.
async fn body(mut response: reqwest::Response, cap: u64) -> Result<Vec<u8>, RegistryError> {
    let announced = response.content_length().unwrap_or(0).min(cap);
    let mut body = Vec::with_capacity(usize::try_from(announced).unwrap_or(0));
    while let Some(chunk) = response.chunk().await.map_err(unreachable)? {
        if body.len() as u64 + chunk.len() as u64 > cap {
            return Err(RegistryError::TooLarge(cap));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// `bytes` decoded as JSON on the blocking pool: a body of megabytes takes a runtime thread
/// long enough to hold up other calls.
pub async fn decode(bytes: Vec<u8>) -> Result<Value, RegistryError> {
    tokio::task::spawn_blocking(move || serde_json::from_slice(&bytes))
        .await
        .map_err(|_| RegistryError::Decode)?
        .map_err(|_| RegistryError::Decode)
}

/// Logs a transport failure without its URL (a `registry_url` may carry credentials) and
/// reports it as unreachable.
fn unreachable(e: reqwest::Error) -> RegistryError {
    let e = e.without_url();
    tracing::debug!(
        timeout = e.is_timeout(),
        connect = e.is_connect(),
        "registry request failed: {e}"
    );
    RegistryError::Unreachable
}

#[cfg(test)]
mod tests {
    use super::*;

    fn urls(list: &[&str]) -> Vec<reqwest::Url> {
        list.iter().map(|u| u.parse().unwrap()).collect()
    }

    #[test]
    fn a_redirect_never_leaves_tls_nor_goes_on_without_end() {
        let next = |previous: &[&str], to: &str| next_hop(&urls(previous), &to.parse().unwrap());
        // Another host over TLS (a moved API, a CDN) is followed.
        assert!(next(&["https://registry.example/w"], "https://cdn.example/w").is_ok());
        // A registry configured over plain HTTP may move to TLS or stay plain.
        assert!(next(&["http://127.0.0.1:1/w"], "https://registry.example/w").is_ok());
        assert!(next(&["http://127.0.0.1:1/w"], "http://127.0.0.1:2/w").is_ok());
        // Once over TLS, never back to plain HTTP, however far back TLS was.
        assert!(next(&["https://registry.example/w"], "http://registry.example/w").is_err());
        assert!(
            next(
                &["http://a.example/w", "https://b.example/w"],
                "http://c.example/w"
            )
            .is_err()
        );
        let hops = ["http://a.example/w"; MAX_REDIRECTS + 1];
        assert!(next(&hops[..MAX_REDIRECTS], "http://a.example/w").is_ok());
        assert!(next(&hops, "http://a.example/w").is_err());
    }
}
