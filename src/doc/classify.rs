//! Which family a path under a skills root belongs to.
