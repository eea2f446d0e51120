//! Function search: golden rankings of the library's search on a catalog of real-looking
//! functions, and registry search over loopback HTTP (`ranking`); the worker's search functions,
//! the pre-generate hint and the `iii-directory search` command, with the real binary against
//! the loopback fake engine (`wire`); sentence embeddings, their quantized vectors and the
//! model's download (`embed`).

mod embed;
mod hybrid;
mod quality;
mod ranking;
mod wire;
