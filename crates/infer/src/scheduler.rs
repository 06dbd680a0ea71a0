//! The fair queue between callers and worker slots.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};

use reverie_core::{ChannelId, SamplingParams, StopReason};

use crate::engine::GenEvent;
use crate::sampler::Constraint;

/// Shared between a job's caller, its worker and the watchdog.
pub struct JobControl {
    stop_strings: Vec<String>,
    stop: AtomicU8,
    finished: AtomicBool,
    tx: Mutex<Option<Sender<GenEvent>>>,
}

const RUN: u8 = 0;
const CANCELLED: u8 = 1;
const STALLED: u8 = 2;

impl JobControl {
    pub fn new(tx: Sender<GenEvent>, stop_strings: Vec<String>) -> JobControl {
        JobControl {
            stop_strings,
            stop: AtomicU8::new(RUN),
            finished: AtomicBool::new(false),
            tx: Mutex::new(Some(tx)),
        }
    }

    pub fn request_stop(&self, reason: StopReason) {
        let code = if reason == StopReason::Stalled {
            STALLED
        } else {
            CANCELLED
        };
        let _ = self
            .stop
            .compare_exchange(RUN, code, Ordering::SeqCst, Ordering::SeqCst);
    }

    pub fn stop_reason(&self) -> Option<StopReason> {
        match self.stop.load(Ordering::SeqCst) {
            RUN => None,
            STALLED => Some(StopReason::Stalled),
            _ => Some(StopReason::Cancelled),
        }
    }

    /// Sends an intermediate event; false when nobody listens any more (the
    /// caller dropped its handle), which the worker treats as a cancel.
    pub fn send(&self, ev: GenEvent) -> bool {
        let guard = self.tx.lock().unwrap_or_else(|e| e.into_inner());
        match guard.as_ref() {
            Some(tx) => tx.send(ev).is_ok(),
            None => false,
        }
    }

    /// Sends the final event, once; later calls do nothing.
    pub fn finish(&self, ev: GenEvent) {
        if self.finished.swap(true, Ordering::SeqCst) {
            return;
        }
        let tx = self.tx.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(tx) = tx {
            let _ = tx.send(ev);
        }
    }

    /// `text` without a stop string it ends with.
    pub fn strip_stop<'t>(&self, text: &'t str) -> &'t str {
        self.stop_strings
            .iter()
            .find_map(|s| text.strip_suffix(s.as_str()))
            .unwrap_or(text)
    }

    pub fn is_finished(&self) -> bool {
        self.finished.load(Ordering::SeqCst)
    }
}

pub struct Job {
    pub channel: ChannelId,
    pub prompt: Vec<i32>,
    pub sampling: SamplingParams,
    pub constraint: Option<Constraint>,
    pub ignore_eog: bool,
    pub stop: Vec<String>,
    pub control: Arc<JobControl>,
}

/// Pending jobs per channel, served round robin; a channel never runs on two
/// slots at once, so its turns stay in order.
#[derive(Default)]
pub struct Queue {
    pending: HashMap<ChannelId, VecDeque<Job>>,
    order: VecDeque<ChannelId>,
    running: HashSet<ChannelId>,
    affinity: HashMap<ChannelId, usize>,
    /// Slots waiting for work.
    idle: HashSet<usize>,
    len: usize,
}

impl Queue {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn push(&mut self, job: Job) {
        let ch = job.channel;
        let q = self.pending.entry(ch).or_default();
        if q.is_empty() {
            self.order.push_back(ch);
        }
        q.push_back(job);
        self.len += 1;
    }

    /// The next job for `slot`: among the first `window` runnable channels,
    /// one whose KV cache lives in this slot; else the oldest one whose cache
    /// is not in another idle slot (that slot will take it).
    pub fn pop(&mut self, slot: usize, window: usize) -> Option<Job> {
        let runnable: Vec<usize> = self
            .order
            .iter()
            .enumerate()
            .filter(|(_, c)| !self.running.contains(c))
            .map(|(i, _)| i)
            .take(window.max(1))
            .collect();
        let home = |i: usize| self.affinity.get(&self.order[i]).copied();
        let pick = runnable
            .iter()
            .copied()
            .find(|&i| home(i) == Some(slot))
            .or_else(|| {
                runnable
                    .iter()
                    .copied()
                    .find(|&i| home(i).is_none_or(|s| s == slot || !self.idle.contains(&s)))
            })?;
        let ch = self.order.remove(pick)?;
        let q = self.pending.get_mut(&ch)?;
        let job = q.pop_front()?;
        if q.is_empty() {
            self.pending.remove(&ch);
        } else {
            self.order.push_back(ch);
        }
        self.len -= 1;
        self.running.insert(ch);
        self.affinity.insert(ch, slot);
        self.idle.remove(&slot);
        Some(job)
    }

    /// Marks `slot` as waiting for work.
    pub fn set_idle(&mut self, slot: usize, idle: bool) {
        if idle {
            self.idle.insert(slot);
        } else {
            self.idle.remove(&slot);
        }
    }

    pub fn finish(&mut self, channel: ChannelId) {
        self.running.remove(&channel);
    }

    pub fn forget_slot(&mut self, slot: usize) {
        self.affinity.retain(|_, s| *s != slot);
    }

    pub fn drain(&mut self) -> Vec<Job> {
        self.order.clear();
        self.len = 0;
        self.pending.drain().flat_map(|(_, q)| q).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(ch: i64) -> Job {
        let (tx, _rx) = std::sync::mpsc::channel();
        Job {
            channel: ChannelId(ch),
            prompt: vec![1],
            sampling: SamplingParams::default(),
            constraint: None,
            ignore_eog: false,
            stop: vec![],
            control: Arc::new(JobControl::new(tx, vec![])),
        }
    }

    #[test]
    fn round_robin_and_one_job_per_channel() {
        let mut q = Queue::default();
        for ch in [1, 1, 1, 2, 3] {
            q.push(job(ch));
        }
        let a = q.pop(0, 4).unwrap();
        assert_eq!(a.channel, ChannelId(1));
        // channel 1 is running: the next slot gets channel 2, then 3
        assert_eq!(q.pop(1, 4).unwrap().channel, ChannelId(2));
        assert_eq!(q.pop(2, 4).unwrap().channel, ChannelId(3));
        assert!(
            q.pop(3, 4).is_none(),
            "channel 1 must not run twice at once"
        );
        q.finish(ChannelId(1));
        assert_eq!(q.pop(0, 4).unwrap().channel, ChannelId(1));
        assert_eq!(q.len(), 1);
    }

    #[test]
    fn prefers_the_slot_holding_the_cache() {
        let mut q = Queue::default();
        q.push(job(1));
        q.push(job(2));
        assert_eq!(q.pop(0, 4).unwrap().channel, ChannelId(1));
        assert_eq!(q.pop(1, 4).unwrap().channel, ChannelId(2));
        q.finish(ChannelId(1));
        q.finish(ChannelId(2));
        q.push(job(1));
        q.push(job(2));
        assert_eq!(q.pop(1, 4).unwrap().channel, ChannelId(2));
        assert_eq!(q.pop(0, 4).unwrap().channel, ChannelId(1));
    }

    #[test]
    fn finish_sends_once() {
        let (tx, rx) = std::sync::mpsc::channel();
        let c = JobControl::new(tx, vec![]);
        c.finish(GenEvent::Failed("a".into()));
        c.finish(GenEvent::Failed("b".into()));
        assert!(!c.send(GenEvent::Failed("c".into())));
        assert_eq!(rx.iter().count(), 1);
    }
}
