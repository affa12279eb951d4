//! Durable state of one ZAB peer.
