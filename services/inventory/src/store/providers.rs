//! Resource providers and their trees.
