//! Loopback servers: a minimal HTTP/1.1 reader and writer (`http`), a stand-in for the workers
//! registry on it (`registry`, used by the download, search and real-engine tests and by the
//! benchmarks' registry search), git repositories served over HTTPS (`git`, for repo
//! downloads), and files served with ranges (`files`, for the embedding model's download).

pub mod files;
pub mod git;
pub mod http;
pub mod registry;
