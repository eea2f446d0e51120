//! One GET against the registry: the shared client (rustls, our User-Agent, a bounded redirect
//! policy), the live timeout, the status rules and a body read that stops at the size cap.
//! Transport details never reach an error: a failure is only ever one of [`RegistryError`]'s
//! kinds, so no message can carry the registry's URL or what it answered.

use serde_json::Value;

use super::admission::{self, Turn};
use super::{Endpoint, RegistryError};

/// `iii-directory/<crate version>` (contract).
pub const USER_AGENT: &str = concat!("iii-directory/", env!("CARGO_PKG_VERSION"));

/// Redirects followed per request: enough for a moved API, not a loop.
const MAX_REDIRECTS: usize = 5;

/// The reqwest client, built once; `None` when the TLS backend could not start (every
/// request then fails as unreachable, and the reason is logged once).
pub struct Http {
    client: Option<reqwest::Client>,
}

impl Http {
    pub fn new() -> Http {
        let client = reqwest::Client::builder()
            .user_agent(USER_AGENT)
            .redirect(reqwest::redirect::Policy::limited(MAX_REDIRECTS))
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
