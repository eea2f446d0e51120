//! One GET against the registry: the shared client (rustls, our User-Agent, a bounded redirect
//! policy), the live timeout, the status rules and a body read that stops at the size cap.
//! Transport details never reach an error: a failure is only ever one of [`RegistryError`]'s
//! kinds, so no message can carry the registry's URL or what it answered.

use serde_json::Value;

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
        let client = self.client.as_ref().ok_or(RegistryError::Unreachable)?;
        let mut response = client
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
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(unreachable)? {
            if body.len() as u64 + chunk.len() as u64 > cap {
                return Err(RegistryError::TooLarge(cap));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    /// [`Http::get_bytes`], decoded as JSON on the blocking pool: a body of megabytes takes
    /// a runtime thread long enough to hold up other calls.
    pub async fn get_json(
        &self,
        endpoint: &Endpoint,
        url: &str,
        query: &[(&str, &str)],
        cap: u64,
    ) -> Result<Value, RegistryError> {
        let bytes = self.get_bytes(endpoint, url, query, cap).await?;
        tokio::task::spawn_blocking(move || serde_json::from_slice(&bytes))
            .await
            .map_err(|_| RegistryError::Decode)?
            .map_err(|_| RegistryError::Decode)
    }
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
