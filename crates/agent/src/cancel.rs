//! A cancel button that can be pressed from another thread (Ctrl-C, the
//! window's Stop) before or during a generation.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

type Hook = Box<dyn Fn() + Send + Sync>;

#[derive(Clone, Default)]
pub struct CancelFlag {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    pressed: AtomicBool,
    hook: Mutex<Option<Hook>>,
}

impl CancelFlag {
    pub fn cancel(&self) {
        self.inner.pressed.store(true, Ordering::SeqCst);
        if let Some(h) = self
            .inner
            .hook
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            h();
        }
    }

    pub fn is_cancelled(&self) -> bool {
        self.inner.pressed.load(Ordering::SeqCst)
    }

    /// Clears the flag for the next turn.
    pub fn reset(&self) {
        self.inner.pressed.store(false, Ordering::SeqCst);
        *self.inner.hook.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// Forgets the hook of a finished generation; a press stays pressed.
    pub(crate) fn disarm(&self) {
        *self.inner.hook.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    pub(crate) fn arm(&self, hook: Hook) {
        let pressed = self.is_cancelled();
        *self.inner.hook.lock().unwrap_or_else(|e| e.into_inner()) = Some(hook);
        if pressed {
            self.cancel();
        }
    }
}
