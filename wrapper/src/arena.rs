//! The allocator: a fixed arena in .bss handed out front to back and never
//! reused, then the system allocator once it is used up.
//!
//! The wrapper lives for a fraction of a millisecond between two `execve`s
//! and allocates a few KiB; musl's allocator maps and unmaps a page per size
//! class on the way (a system call and a page fault each), which was a third
//! of the wrapper's own start-up time. A long `--wait` that outgrows the
//! arena goes on with the system allocator.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicUsize, Ordering};

const SIZE: usize = 256 << 10;

#[repr(C, align(4096))]
pub struct Arena {
    memory: UnsafeCell<[u8; SIZE]>,
    used: AtomicUsize,
}

// The arena hands out disjoint ranges: `used` only grows, atomically.
unsafe impl Sync for Arena {}

impl Arena {
    pub const fn new() -> Arena {
        Arena {
            memory: UnsafeCell::new([0; SIZE]),
            used: AtomicUsize::new(0),
        }
    }

    fn contains(&self, ptr: *mut u8) -> bool {
        let start = self.memory.get() as usize;
        (start..start + SIZE).contains(&(ptr as usize))
    }
}

unsafe impl GlobalAlloc for Arena {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let start = self.memory.get() as usize;
        let mut used = self.used.load(Ordering::Relaxed);
        loop {
            let offset = (start + used).next_multiple_of(layout.align()) - start;
            let end = match offset.checked_add(layout.size()) {
                Some(end) if end <= SIZE => end,
                _ => return System.alloc(layout),
            };
            match self
                .used
                .compare_exchange_weak(used, end, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return (start + offset) as *mut u8,
                Err(now) => used = now,
            }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if !self.contains(ptr) {
            System.dealloc(ptr, layout);
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if !self.contains(ptr) {
            return System.realloc(ptr, layout, new_size);
        }
        // The last allocation grows (or shrinks) where it is: a growing
        // String or Vec then neither copies nor leaves its old copy behind.
        let offset = ptr as usize - self.memory.get() as usize;
        let end = offset + layout.size();
        if offset + new_size <= SIZE
            && self
                .used
                .compare_exchange(end, offset + new_size, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            return ptr;
        }
        let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
        let new = self.alloc(new_layout);
        if !new.is_null() {
            std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
        }
        new
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static ARENA: Arena = Arena::new();

    #[test]
    fn hands_out_aligned_disjoint_blocks_grows_the_last_in_place_then_falls_back() {
        unsafe {
            let a = ARENA.alloc(Layout::from_size_align(3, 1).unwrap());
            let b = ARENA.alloc(Layout::from_size_align(16, 16).unwrap());
            assert!(ARENA.contains(a) && ARENA.contains(b));
            assert_eq!(b as usize % 16, 0);
            assert!(b as usize >= a as usize + 3);
            b.write_bytes(7, 16);

            // The last block grows where it is, keeping its bytes.
            let grown = ARENA.realloc(b, Layout::from_size_align(16, 16).unwrap(), 64);
            assert_eq!(grown, b);
            assert_eq!(*grown.add(15), 7);
            // Any other block moves, and its bytes move with it.
            a.write_bytes(9, 3);
            let moved = ARENA.realloc(a, Layout::from_size_align(3, 1).unwrap(), 100);
            assert_ne!(moved, a);
            assert_eq!(std::slice::from_raw_parts(moved, 3), &[9, 9, 9]);

            // Past the end: the system allocator, freed by it too.
            let big = Layout::from_size_align(SIZE, 8).unwrap();
            let outside = ARENA.alloc(big);
            assert!(!outside.is_null() && !ARENA.contains(outside));
            outside.write_bytes(1, SIZE);
            ARENA.dealloc(outside, big);
        }
    }
}
