//! The memory manager: per-buffer residency (bytes resident, bytes in
//! flight, dirty, being written back, pinned) and the GPU's byte count.
//! Memory is taken when a copy starts and given back when a clean buffer
//! is evicted or a write-back ends.

use crate::policy::Eviction;
use crate::workload::Workload;

/// Residency of one buffer.
#[derive(Debug, Clone, Default)]
struct Residency {
    resident_bytes: u64,
    in_flight_bytes: u64,
    dirty: bool,
    writing_back: bool,
    pinned: bool,
    tick: u64,
}

/// All buffers' residency and the memory they take.
#[derive(Debug, Clone)]
pub(crate) struct Memory {
    capacity_bytes: u64,
    used_bytes: u64,
    writing_back_bytes: u64,
    buffers: Vec<Residency>,
    /// The buffers with resident bytes (the only eviction candidates), in
    /// no particular order, and each one's index there.
    resident: Vec<usize>,
    slot: Vec<usize>,
}

impl Memory {
    /// Empty memory of `capacity_bytes` for `buffers` buffers.
    pub fn new(capacity_bytes: u64, buffers: usize) -> Memory {
        Memory {
            capacity_bytes,
            used_bytes: 0,
            writing_back_bytes: 0,
            buffers: vec![Residency::default(); buffers],
            resident: Vec::new(),
            slot: vec![usize::MAX; buffers],
        }
    }

    /// Bytes not held by anything.
    pub fn free_bytes(&self) -> u64 {
        self.capacity_bytes - self.used_bytes
    }

    /// Bytes of `buffer` neither resident nor on their way, or 0 while it
    /// is being written back (it must leave before it can come back).
    pub fn missing_bytes(&self, workload: &Workload<'_>, buffer: usize) -> u64 {
        let r = &self.buffers[buffer];
        if r.writing_back {
            0
        } else {
            workload.bytes(buffer) - r.resident_bytes - r.in_flight_bytes
        }
    }

    /// Whether `buffer` is wholly resident and staying.
    pub fn is_ready(&self, workload: &Workload<'_>, buffer: usize) -> bool {
        let r = &self.buffers[buffer];
        !r.writing_back && r.resident_bytes == workload.bytes(buffer)
    }

    /// Whether `buffer` is being written back.
    pub fn is_writing_back(&self, buffer: usize) -> bool {
        self.buffers[buffer].writing_back
    }

    /// Takes memory for scratch (ephemeral) bytes.
    pub fn take(&mut self, bytes: u64) {
        self.used_bytes += bytes;
    }

    /// Gives scratch bytes back.
    pub fn give(&mut self, bytes: u64) {
        self.used_bytes -= bytes;
    }

    /// A copy of `bytes` of `buffer` starts: its memory is taken now.
    pub fn start_fetch(&mut self, buffer: usize, bytes: u64) {
        self.buffers[buffer].in_flight_bytes += bytes;
        self.used_bytes += bytes;
    }

    /// A copy of `bytes` of `buffer` arrived at logical time `tick`.
    pub fn end_fetch(&mut self, buffer: usize, bytes: u64, tick: u64) {
        let r = &mut self.buffers[buffer];
        r.in_flight_bytes -= bytes;
        r.resident_bytes += bytes;
        r.tick = tick;
        if self.slot[buffer] == usize::MAX {
            self.slot[buffer] = self.resident.len();
            self.resident.push(buffer);
        }
    }

    /// `buffer` has no resident bytes any more.
    fn gone(&mut self, buffer: usize) {
        let slot = std::mem::replace(&mut self.slot[buffer], usize::MAX);
        self.resident.swap_remove(slot);
        if let Some(&moved) = self.resident.get(slot) {
            self.slot[moved] = slot;
        }
    }

    /// Pins (or unpins) `buffer` for a running operation and stamps the use.
    pub fn set_pinned(&mut self, buffer: usize, pinned: bool, tick: u64) {
        let r = &mut self.buffers[buffer];
        r.pinned = pinned;
        r.tick = tick;
    }

    /// Marks `buffer` as written on the device.
    pub fn mark_dirty(&mut self, buffer: usize) {
        self.buffers[buffer].dirty = true;
    }

    /// Drops `buffer` from the device. A clean one leaves at once (returns
    /// false); a dirty one starts leaving and returns true: the caller must
    /// copy it back and then call [`Memory::end_write_back`].
    pub fn evict(&mut self, buffer: usize) -> bool {
        let r = &mut self.buffers[buffer];
        if r.dirty {
            r.writing_back = true;
            self.writing_back_bytes += r.resident_bytes;
            true
        } else {
            self.used_bytes -= r.resident_bytes;
            r.resident_bytes = 0;
            self.gone(buffer);
            false
        }
    }

    /// The copy back of `buffer` ended: its memory is free.
    pub fn end_write_back(&mut self, buffer: usize) {
        let r = &mut self.buffers[buffer];
        self.used_bytes -= r.resident_bytes;
        self.writing_back_bytes -= r.resident_bytes;
        *r = Residency { tick: r.tick, ..Residency::default() };
        self.gone(buffer);
    }

    /// Resident bytes of `buffer` (what a write-back copies).
    pub fn resident_bytes(&self, buffer: usize) -> u64 {
        self.buffers[buffer].resident_bytes
    }

    /// Evicts, in the policy's order (ties by `tie`, smaller first), buffers for which `allowed` holds
    /// until `need_bytes` are free or being freed by write-backs. Evicts
    /// nothing unless that target can be reached. Returns the victims in
    /// eviction order, each with whether it is dirty (to copy back).
    pub fn make_room(
        &mut self,
        need_bytes: u64,
        policy: Eviction,
        mut next_use: impl FnMut(usize) -> Option<usize>,
        allowed: impl Fn(usize) -> bool,
        tie: impl Fn(usize) -> usize,
    ) -> Vec<(usize, bool)> {
        let mut available = self.free_bytes() + self.writing_back_bytes;
        if available >= need_bytes {
            return vec![];
        }
        let candidates: Vec<(u64, usize, usize)> = self
            .resident
            .iter()
            .copied()
            .filter(|&b| {
                let r = &self.buffers[b];
                r.resident_bytes > 0 && r.in_flight_bytes == 0 && !r.pinned && !r.writing_back && allowed(b)
            })
            .map(|b| (policy.key(self.buffers[b].tick, next_use(b)), tie(b), b))
            .collect();
        let reachable: u64 = candidates.iter().map(|&(_, _, b)| self.buffers[b].resident_bytes).sum();
        if available + reachable < need_bytes {
            return vec![];
        }
        // Usually a few victims: take the smallest keys from a heap rather
        // than sorting every candidate (the same order).
        let mut candidates =
            std::collections::BinaryHeap::from(candidates.into_iter().map(std::cmp::Reverse).collect::<Vec<_>>());
        let mut victims = Vec::new();
        while let Some(std::cmp::Reverse((_, _, b))) = candidates.pop() {
            if available >= need_bytes {
                break;
            }
            available += self.buffers[b].resident_bytes;
            victims.push((b, self.evict(b)));
        }
        victims
    }
}
