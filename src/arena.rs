//! The answer arena: a bump region that the SDK's value of a large answer is built in.
//!
//! The SDK turns every answer into a `serde_json::Value` before writing it out, and frees it
//! once sent. For a whole `skills::list` of 50,000 skills that value is about a million small
//! allocations. glibc's malloc pays for them twice: a header and rounding on each (the value
//! took ~55 MB), and a free that walks them one by one, then defers merging the freed chunks
//! to the next large request, so the calls right after such an answer waited milliseconds for
//! the allocator (issue 31).
//!
//! [`building_large`] marks the current thread while such a value is built: every allocation
//! it makes goes to one reserved region, bump-allocated and unpadded. Freeing one only counts
//! it down; when none is left, the next answer starts again at the region's start, on pages
//! that are already resident, and [`give_back`] returns them to the system when idle.
//!
//! Only the binary installs [`AnswerAllocator`] as its global allocator; elsewhere (tests,
//! other users of the library) [`building_large`] still runs its closure, and every
//! allocation goes to the system allocator as usual. Whatever is allocated in the region and
//! outlives the answer (a lazily built static, say) only keeps the region from rewinding: the
//! next values are built after it, and once that reaches a quarter of the region they go to
//! the system allocator instead, so at most that much stays resident for it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The address space reserved for the region. Only the pages written are resident; the
/// largest answer the engine carries (16 MiB of JSON) builds a value of well under this.
const CAPACITY: usize = 512 << 20;

/// A value still alive in the region when the next one starts is built after it; past this
/// offset the next one goes to the system allocator instead. This bounds what a block that is
/// never freed (a static made lazily inside a scope) could keep resident.
const STACK_LIMIT: usize = CAPACITY / 4;

thread_local! {
    /// Set while this thread builds a large answer's value.
    static BUILDING: Cell<bool> = const { Cell::new(false) };
}

/// The region behind the global allocator (see the module doc).
static REGION: Region = Region::new();

/// A global allocator that puts what a thread allocates inside [`building_large`] in the
/// answer arena, and everything else in the system allocator.
pub struct AnswerAllocator;

/// Runs `build` with the current thread's allocations in the answer arena. Another thread
/// already building one, or a nested call, runs `build` on the system allocator.
pub fn building_large<R>(build: impl FnOnce() -> R) -> R {
    if BUILDING.get() || !REGION.claim() {
        return build();
    }
    /// Ends the scope even if `build` unwinds.
    struct Scope;
    impl Drop for Scope {
        fn drop(&mut self) {
            BUILDING.set(false);
            REGION.release_claim();
        }
    }
    let _scope = Scope;
    BUILDING.set(true);
    build()
}

/// Returns the region's pages to the system once no value in it is alive (after a burst of
/// large answers, with the allocator's own trim). False when a value in it was still alive (or
/// being built), so nothing could be given back yet.
pub fn give_back() -> bool {
    if !REGION.claim() {
        return false;
    }
    let given = REGION.discard_pages();
    REGION.release_claim();
    given
}

/// How much of the region is in use (bytes up to its bump pointer) and how many of its
/// allocations are alive.
#[cfg(test)]
fn usage() -> (usize, usize) {
    (
        REGION.next.load(Ordering::Relaxed),
        REGION.live.load(Ordering::Relaxed),
    )
}

/// One reserved range of addresses, bump-allocated by the one thread that holds the claim and
/// freed from any thread.
struct Region {
    /// Start of the mapping; 0 until first used.
    base: AtomicUsize,
    /// Offset of the next free byte. Only the claim's holder moves it.
    next: AtomicUsize,
    /// How far blocks have reached since the pages were last given back: the rewind in
    /// [`Region::claim`] moves `next` back to the start, not the pages it wrote.
    touched: AtomicUsize,
    /// Allocations made in the region and not yet freed.
    live: AtomicUsize,
    /// Held by the thread building a value (or giving pages back).
    claimed: AtomicBool,
}

impl Region {
    const fn new() -> Region {
        Region {
            base: AtomicUsize::new(0),
            next: AtomicUsize::new(0),
            touched: AtomicUsize::new(0),
            live: AtomicUsize::new(0),
            claimed: AtomicBool::new(false),
        }
    }

    /// Takes the claim, and rewinds the bump pointer when nothing in the region is alive; with
    /// something alive past [`STACK_LIMIT`], leaves the region alone.
    fn claim(&self) -> bool {
        if self.claimed.swap(true, Ordering::Acquire) {
            return false;
        }
        // Frees count down with `Release`: once this reads 0, every earlier value is gone.
        if self.live.load(Ordering::Acquire) == 0 {
            self.next.store(0, Ordering::Relaxed);
        } else if self.next.load(Ordering::Relaxed) >= STACK_LIMIT {
            self.release_claim();
            return false;
        }
        true
    }

    fn release_claim(&self) {
        self.claimed.store(false, Ordering::Release);
    }

    /// Whether `ptr` lies in the region.
    fn holds(&self, ptr: *mut u8) -> bool {
        let base = self.base.load(Ordering::Relaxed);
        base != 0 && (ptr as usize).wrapping_sub(base) < CAPACITY
    }

    /// Maps the region on first use; `None` if the system refuses.
    fn base(&self) -> Option<usize> {
        let base = self.base.load(Ordering::Acquire);
        if base != 0 {
            return Some(base);
        }
        let mapped = map(CAPACITY)?;
        self.base.store(mapped, Ordering::Release);
        Some(mapped)
    }

    /// A block for `layout` at the bump pointer, or `None` when the region is full. Only the
    /// claim's holder calls this.
    fn bump(&self, layout: Layout) -> Option<*mut u8> {
        let base = self.base()?;
        let next = self.next.load(Ordering::Relaxed);
        let start = (base + next).checked_next_multiple_of(layout.align())? - base;
        let end = start.checked_add(layout.size())?;
        if end > CAPACITY {
            return None;
        }
        self.next.store(end, Ordering::Relaxed);
        self.touched.fetch_max(end, Ordering::Relaxed);
        self.live.fetch_add(1, Ordering::Relaxed);
        Some((base + start) as *mut u8)
    }

    /// Grows the last block in place when it ends at the bump pointer (a vector or string
    /// growing while the value is built). Only the claim's holder calls this.
    fn grow_last(&self, ptr: *mut u8, old: usize, new: usize) -> bool {
        let base = self.base.load(Ordering::Relaxed);
        let start = ptr as usize - base;
        let next = self.next.load(Ordering::Relaxed);
        if start + old != next || start + new > CAPACITY {
            return false;
        }
        self.next.store(start + new, Ordering::Relaxed);
        self.touched.fetch_max(start + new, Ordering::Relaxed);
        true
    }

    fn free(&self) {
        self.live.fetch_sub(1, Ordering::Release);
    }

    /// Returns the pages blocks reached since the last time to the system if nothing in them is
    /// alive (true), or leaves them (false). Only the claim's holder calls this.
    fn discard_pages(&self) -> bool {
        let base = self.base.load(Ordering::Relaxed);
        if self.live.load(Ordering::Acquire) != 0 {
            return false;
        }
        if base != 0 {
            self.next.store(0, Ordering::Relaxed);
            discard(base, self.touched.swap(0, Ordering::Relaxed));
        }
        true
    }
}

// SAFETY: blocks handed out by the region never overlap (the bump pointer only moves forward
// while a value is built, and rewinds only when no block is alive) and are aligned as asked;
// every other request goes to `System`, and a pointer is returned to whichever of the two gave it.
unsafe impl GlobalAlloc for AnswerAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if BUILDING.get()
            && let Some(ptr) = REGION.bump(layout)
        {
            return ptr;
        }
        // SAFETY: forwarded unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if BUILDING.get()
            && let Some(ptr) = REGION.bump(layout)
        {
            // SAFETY: the block is `layout.size()` bytes of the region; a reused page is dirty.
            unsafe { ptr.write_bytes(0, layout.size()) };
            return ptr;
        }
        // SAFETY: forwarded unchanged.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if REGION.holds(ptr) {
            REGION.free();
        } else {
            // SAFETY: `ptr` came from `System` with this layout.
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let in_region = REGION.holds(ptr);
        if !in_region && !BUILDING.get() {
            // SAFETY: forwarded unchanged.
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        // A region block shrinks where it is (its free does not depend on its size).
        if in_region && new_size <= layout.size() {
            return ptr;
        }
        if in_region && BUILDING.get() && REGION.grow_last(ptr, layout.size(), new_size) {
            return ptr;
        }
        // Moved: into the region while building, out of it otherwise.
        // SAFETY: the caller guarantees `new_size` is valid for `layout.align()`.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: a non-zero size, as `realloc`'s contract guarantees.
        let moved = unsafe { self.alloc(new_layout) };
        if !moved.is_null() {
            // SAFETY: both blocks are at least this long and distinct.
            unsafe {
                std::ptr::copy_nonoverlapping(ptr, moved, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
        }
        moved
    }
}

/// Reserves `len` bytes of address space, readable and writable, backed only where written.
fn map(len: usize) -> Option<usize> {
    // SAFETY: a fresh anonymous private mapping; no existing memory is touched.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    (ptr != libc::MAP_FAILED).then_some(ptr as usize)
}

/// Drops the pages of `base..base + len`; they read as zeros when next written.
fn discard(base: usize, len: usize) {
    if len == 0 {
        return;
    }
    // SAFETY: the range is inside the region's own mapping and nothing in it is alive.
    unsafe {
        libc::madvise(base as *mut libc::c_void, len, libc::MADV_DONTNEED);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The test binary's global allocator is the system's: these call the arena's allocator
    // directly. Every block is freed once, with the size it was made with.
    fn layout(size: usize) -> Layout {
        Layout::from_size_align(size, 8).expect("layout")
    }

    fn alloc(size: usize) -> *mut u8 {
        // SAFETY: a non-zero size.
        unsafe { AnswerAllocator.alloc(layout(size)) }
    }

    fn alloc_zeroed(size: usize) -> *mut u8 {
        // SAFETY: a non-zero size.
        unsafe { AnswerAllocator.alloc_zeroed(layout(size)) }
    }

    fn grow(ptr: *mut u8, size: usize, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` is a live block of `size` bytes from this allocator.
        unsafe { AnswerAllocator.realloc(ptr, layout(size), new_size) }
    }

    fn free(ptr: *mut u8, size: usize) {
        // SAFETY: `ptr` is a live block of `size` bytes from this allocator.
        unsafe { AnswerAllocator.dealloc(ptr, layout(size)) }
    }

    fn bytes<'a>(ptr: *mut u8, size: usize) -> &'a mut [u8] {
        // SAFETY: `ptr` is a live block of at least `size` bytes, used by no one else.
        unsafe { std::slice::from_raw_parts_mut(ptr, size) }
    }

    // The region is one static, hence one test.
    #[test]
    fn a_value_built_in_the_region_is_freed_back_to_an_empty_region() {
        let (a, b) = building_large(|| (alloc(24), alloc(24)));
        assert!(REGION.holds(a) && REGION.holds(b), "built in the region");
        assert_eq!(b as usize - a as usize, 24, "packed, no header between");
        assert_eq!(usage().1, 2);
        assert!(!give_back(), "nothing is given back while a value is alive");

        // Outside the scope: the system allocator, and a grown block moves out of the region.
        let outside = alloc(24);
        assert!(!REGION.holds(outside));
        bytes(a, 24).fill(7);
        let moved = grow(a, 24, 64);
        assert!(!REGION.holds(moved));
        assert_eq!(bytes(moved, 24)[23], 7, "the contents moved with it");
        assert_eq!(usage().1, 1);

        // The last block grows in place while building.
        let (last, grown) = building_large(|| {
            let c = alloc(24);
            (c, grow(c, 24, 4096))
        });
        assert_eq!(last, grown);

        // Someone else's claim is not taken over.
        assert!(REGION.claim());
        let elsewhere = building_large(|| alloc(24));
        assert!(!REGION.holds(elsewhere), "another claim holds the region");
        REGION.release_claim();

        free(b, 24);
        free(moved, 64);
        free(outside, 24);
        free(elsewhere, 24);
        bytes(grown, 4096).fill(9);
        free(grown, 4096);
        assert_eq!(usage().1, 0, "every block freed");
        // Nothing alive: the pages go back (a block made there again without zeroing reads the
        // zeros of a fresh page, not what was written before; the claim `give_back` takes
        // rewinds the bump pointer first, so what goes back is how far blocks reached), and the
        // next value starts at the region's start again.
        assert!(give_back());
        assert_eq!(usage().0, 0);
        let reused = building_large(|| alloc(4096 + 48));
        assert_eq!(reused, a, "rewound");
        assert!(
            bytes(reused, 4096 + 48).iter().all(|&x| x == 0),
            "pages given back"
        );
        free(reused, 4096 + 48);
        let again = building_large(|| alloc_zeroed(24));
        assert_eq!(again, a, "rewound");
        assert!(bytes(again, 24).iter().all(|&x| x == 0));

        // A block never freed does not make the region grow without bound: once what is alive
        // reaches past the stacking limit, new values go to the system allocator.
        let pinned = building_large(|| alloc(STACK_LIMIT));
        assert!(REGION.holds(pinned), "only reserved, never written");
        let after = building_large(|| alloc(24));
        assert!(!REGION.holds(after), "built beside the region");
        free(after, 24);
        free(pinned, STACK_LIMIT);
        free(again, 24);
        assert_eq!(usage().1, 0);
    }
}
