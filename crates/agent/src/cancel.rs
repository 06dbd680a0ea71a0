//! A cancel button that can be pressed from another thread (Ctrl-C, the
//! window's Stop, the night's Cancel) before or during a generation.
//!
//! One type for every cancellable thing: a turn, a practice run, a night.
//! A turn clears its flag when it starts, so work that runs turns on
//! behalf of a longer job (a night's practice and verify stages) passes
//! them a [`CancelFlag::child`]: pressing the parent presses every child,
//! and a child's reset never clears the parent.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

type Hook = Box<dyn Fn() + Send + Sync>;

#[derive(Clone, Default)]
pub struct CancelFlag {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    pressed: AtomicBool,
    hook: Mutex<Option<Hook>>,
    parent: Option<Arc<Inner>>,
    children: Mutex<Vec<Weak<Inner>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Inner {
    fn is_cancelled(&self) -> bool {
        self.pressed.load(Ordering::SeqCst)
            || self.parent.as_ref().is_some_and(|p| p.is_cancelled())
    }

    fn cancel(&self) {
        self.pressed.store(true, Ordering::SeqCst);
        if let Some(h) = lock(&self.hook).as_ref() {
            h();
        }
        let children: Vec<Arc<Inner>> = lock(&self.children)
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        for c in children {
            c.cancel();
        }
    }
}

impl CancelFlag {
    pub fn cancel(&self) {
        self.inner.cancel();
    }

    pub fn is_cancelled(&self) -> bool {
        self.inner.is_cancelled()
    }

    /// A flag pressed whenever this one is (already, or later), whose own
    /// reset leaves this one alone.
    pub fn child(&self) -> CancelFlag {
        let child = Arc::new(Inner {
            parent: Some(self.inner.clone()),
            ..Inner::default()
        });
        let mut children = lock(&self.inner.children);
        children.retain(|c| c.strong_count() > 0);
        children.push(Arc::downgrade(&child));
        CancelFlag { inner: child }
    }

    /// Clears the flag for the next turn (a pressed parent stays pressed).
    pub fn reset(&self) {
        self.inner.pressed.store(false, Ordering::SeqCst);
        *lock(&self.inner.hook) = None;
    }

    /// Forgets the hook of a finished generation; a press stays pressed.
    pub(crate) fn disarm(&self) {
        *lock(&self.inner.hook) = None;
    }

    pub(crate) fn arm(&self, hook: Hook) {
        *lock(&self.inner.hook) = Some(hook);
        if self.is_cancelled() {
            self.cancel();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::CancelFlag;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[test]
    fn a_pressed_parent_presses_its_children_and_their_hooks() {
        let night = CancelFlag::default();
        let turn = night.child();
        let fired = Arc::new(AtomicUsize::new(0));
        let f = fired.clone();
        turn.arm(Box::new(move || {
            f.fetch_add(1, Ordering::SeqCst);
        }));
        assert!(!turn.is_cancelled());
        night.cancel();
        assert!(turn.is_cancelled());
        assert_eq!(
            fired.load(Ordering::SeqCst),
            1,
            "the running generation was stopped"
        );
        turn.reset();
        assert!(
            turn.is_cancelled(),
            "a turn's reset cannot clear the night's cancel"
        );
        assert!(
            night.child().is_cancelled(),
            "a child made after the press is pressed"
        );
    }

    #[test]
    fn a_child_pressed_or_reset_leaves_its_parent_alone() {
        let night = CancelFlag::default();
        let turn = night.child();
        turn.cancel();
        assert!(turn.is_cancelled() && !night.is_cancelled());
        turn.reset();
        assert!(!turn.is_cancelled());
    }
}
