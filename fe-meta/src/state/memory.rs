//! Returning the memory of a replaced catalog to the operating system.
//!
//! A restore (a SNAP from the leader) builds the new catalog while the old one is still
//! published, then drops the old one: for a moment the process holds both, and a global
//! allocator that keeps freed pages for a while (mimalloc purges them after a delay, and only
//! when the thread that owns them allocates again) leaves the process at twice its catalog
//! for seconds, or until that thread runs again. The binary that picks the allocator can set
//! a hook ([`set_release_hook`]) that tells it to give freed memory back now; the state
//! machine calls it ([`release_freed`]) on the restoring thread right after the old version
//! was dropped there.
//!
//! INV-1: the hook is set at most once per process (a second call changes nothing and
//! returns false); without one, [`release_freed`] does nothing.
//! INV-2: [`crate::state::machine::MetaState::restore`] calls [`release_freed`] after the
//! replaced version was dropped, on the thread that restored (thread-local allocator caches
//! can only be collected by their own thread).

use std::sync::OnceLock;

static RELEASE: OnceLock<fn()> = OnceLock::new();

/// Sets the process's hook that returns freed heap memory to the OS (INV-1); call it once,
/// before the server starts. Returns false if one was already set.
pub fn set_release_hook(hook: fn()) -> bool {
    RELEASE.set(hook).is_ok()
}

/// Runs the release hook, if one is set (INV-2).
pub(crate) fn release_freed() {
    if let Some(hook) = RELEASE.get() {
        hook();
    }
}
