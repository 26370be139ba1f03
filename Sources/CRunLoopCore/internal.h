/*
 * internal.h - struct layouts and the contracts between the core's files. Not installed.
 *
 * The parts with an interface of their own have their own header, which a file includes when it
 * uses that part: alloc.h (allocation and fault points), containers.h (vectors and sets),
 * timer_heap.h (the timers' heap), wait.h (the backend seam: epoll, timerfd, eventfd),
 * fd_table.h (which sources watch which fd), wake.h (the wake protocol), lag.h (loop lag and
 * callout timing) and membership.h (items joining and leaving modes). This file includes the
 * first four for the layouts below; the others include it.
 *
 * Locks, and who may touch what (take them in this order; never hold one across a callout):
 *   source lock     one of a fixed set of striped mutexes (locks.c), chosen by the source's
 *                   address: guards source->links (which loops hold the source).
 *   loop->lock      guards the loop's modes, their item sets and heaps, the common-item sets,
 *                   the block queues, the deferred signalled links, the fd table, the run stack,
 *                   the loop's kernel objects once it is dead, the references handed to its
 *                   fire phase (phase_deferred), and every field of an item that its owning loop
 *                   reads (timer keys, observer and source memberships, obj.marks). It has
 *                   two halves (rl_loop_lock, below): the mutex, and on the loop's own thread a
 *                   fast section that excludes every other thread's hold of the mutex by a
 *                   handshake instead (timer and observer calls of the loop's thread: re-arm,
 *                   disarm, add, remove, invalidate, a fired timer's park). Other threads take
 *                   the mutex only through rl_loop_lock or rl_loop_lock_mutex, which make the
 *                   handshake; run.c, which only runs its own thread's loop, takes it bare.
 *   item lock       one of a second set of striped mutexes (locks.c), chosen by the address of a
 *                   timer or observer: taken only by a thread that reads the owner pointer of
 *                   an item another loop may own, or marks an unowned item BUSY (loop.c). To
 *                   find and lock an item's loop use rl_owner_lock().
 *   rl_loops_lock   (global, locks.c) guards the registry of live loops; taken only when a loop
 *                   is created or destroyed, and by fork.
 *   Atomics         wake state, signalled/valid/dead flags, fire dates as read by getters, counters.
 * fork() takes every one of these locks first (locks.c), so the child finds none held.
 */
#ifndef RL_INTERNAL_H
#define RL_INTERNAL_H

#include "crunloop.h"
#include "alloc.h"
#include "containers.h"
#include "timer_heap.h"
#include "wait.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#ifndef RL_HIDDEN
#define RL_HIDDEN __attribute__((visibility("hidden")))
#endif

/* ---- Objects ---- */

/* A 16-bit magic per type: rl_release checks it before it trusts the pointer. */
enum rl_type { RL_TYPE_LOOP = 0x4c50, RL_TYPE_SOURCE, RL_TYPE_TIMER, RL_TYPE_OBSERVER };

/* 8 bytes, the head of every object: a 32-bit count (2^31 - 1 references is far more than any
 * program holds, and every item is a few bytes smaller for it: a timer fits malloc's 80-byte
 * class), the type's magic, a byte of per-type bits, and a byte of per-type marks. The marks are
 * plain (no atomic): they are read and written only under the lock of the loop that owns the item,
 * and only while it owns it (timers: RL_TIMER_TAKEN, RL_TIMER_CALLOUT). They are a memory
 * location apart from bits, which other threads change by atomic operations with no lock. */
typedef struct rl_object {
    atomic_int refs;
    uint16_t type;
    atomic_uchar bits;  /* per type (timers: RL_TIMER_*) */
    uint8_t marks;      /* per type, owner loop's lock (timers: RL_TIMER_TAKEN, RL_TIMER_CALLOUT) */
} rl_object;
_Static_assert(sizeof(rl_object) == 8, "the head of every object grew");

static inline void rl_object_init(rl_object *object, uint16_t type) {
    atomic_init(&object->refs, 1);
    object->type = type;
    atomic_init(&object->bits, 0);
    object->marks = 0;
}
/* The end of rl_release once the count is read (before is the count before it): the object is
 * destroyed, or the process aborted if no reference was left. */
RL_HIDDEN void rl_object_last_release(rl_object *object, int before);

/* The core's own retain and release of an object it holds: no NULL or type check (it knows what
 * it holds), and only a release that may be the last leaves the inline path. */
static inline void rl_object_retain(rl_object *object) {
    atomic_fetch_add_explicit(&object->refs, 1, memory_order_relaxed);
}
static inline void rl_object_release(rl_object *object) {
    int before = atomic_fetch_sub_explicit(&object->refs, 1, memory_order_acq_rel);
    if (before > 1) return;
    rl_object_last_release(object, before);
}

/* ---- Modes (mode.c) ---- */

/* Blocks queued for one mode, or for the common modes; seq orders them across the two queues. */
typedef struct rl_block {
    void (*fn)(void *arg);
    void *arg;
    void (*release)(const void *arg); /* after fn, or when dropped; NULL for rl_loop_perform */
    uint64_t seq;
    struct rl_block *next;
} rl_block;

/* Spent blocks a loop keeps for reuse, so that steady-state queueing does not allocate. */
enum { RL_SPARE_BLOCKS = 256 };

typedef struct {
    rl_block *head, *tail;
    atomic_size_t count; /* written under the loop lock, read without it */
} rl_block_queue;

typedef struct rl_mode {
    char *name;
    bool common;
    uint32_t id;            /* its place in loop->modes, for good: a mode lives as long as its loop */
    rl_ptrset sources;      /* rl_source*, retained once per mode membership */
    rl_heap timers;         /* rl_timer_entry nodes, keyed by (fire date, order, seq) */
    rl_ptrvec observers;    /* rl_observer*, sorted by (order, seq) */
    atomic_uint observer_mask; /* union of the activities of observers (read unlocked) */
    rl_block_queue blocks;  /* blocks queued for this mode by name */
    /* Sources and live timers in the mode, and live timers alone, written under the loop lock,
     * read without it: every pass asks whether the mode is empty and whether it has timers, and
     * a busy loop should not take the lock for that (rl_mode_items_changed; rl_loop_verify
     * checks both against the sets). */
    atomic_size_t items, timer_items;
} rl_mode;

/* Find a mode by name; create it when create is set. NULL for RL_COMMON_MODES. loop locked.
 * The default mode, named by the RL_DEFAULT_MODE pointer, is found inline with no strcmp. */
RL_HIDDEN rl_mode *rl_mode_find_by_name(rl_loop_t *loop, const char *name, bool create);
static inline rl_mode *rl_mode_find(rl_loop_t *loop, const char *name, bool create);
/* Inline: the default mode, named by its pointer, needs no call and no strcmp. */
static inline bool rl_mode_name_is_common(const char *name) {
    if (name == RL_COMMON_MODES) return true;
    return name != RL_DEFAULT_MODE && strcmp(name, RL_COMMON_MODES) == 0;
}
static inline bool rl_mode_is_empty(const rl_mode *mode) {
    return mode->sources.count == 0 && rl_heap_size(&mode->timers) == 0;
}
/* Add delta to a count only the loop lock's holder writes: a plain load and store, no atomic
 * read-modify-write. */
static inline void rl_locked_count_add(atomic_size_t *count, int delta) {
    size_t n = atomic_load_explicit(count, memory_order_relaxed);
    atomic_store_explicit(count, n + (size_t)(ptrdiff_t)delta, memory_order_release);
}
/* A source or timer joined (+1) or left (-1) mode. Loop locked. */
static inline void rl_mode_items_changed(rl_mode *mode, int delta, bool timer) {
    rl_locked_count_add(&mode->items, delta);
    if (timer) rl_locked_count_add(&mode->timer_items, delta);
}
/* rl_mode_is_empty without the lock: as of the last change another thread made under it. */
static inline bool rl_mode_looks_empty(const rl_mode *mode) {
    return atomic_load_explicit(&mode->items, memory_order_acquire) == 0;
}
/* Whether source is in any mode of loop. loop locked. */
RL_HIDDEN bool rl_loop_holds_source(const rl_loop_t *loop, const rl_source_t *source);
RL_HIDDEN void rl_mode_free(rl_mode *mode);
/* 0 when name is a usable mode name, else -EINVAL. */
static inline int rl_mode_check_name(const char *name) { return name && name[0] ? 0 : -EINVAL; }

/* ---- Sources (source.c) ---- */

/* One loop holding a source (in at least one of its modes), created when the source joins the
 * loop, so that signalling never allocates. Signallers push links onto the loop's lock-free
 * stack holding only the source's lock; the loop drains the stack with one exchange into its
 * deferred list (links signalled for a mode that is not running). A queued link stays queued
 * until the loop performs its source: nothing drops it. A link removed while queued is marked
 * DEAD and freed by the loop when it meets it, else freed at once: the side that sees the
 * other's bit frees it. QUEUED is set under the source lock and cleared under loop->lock; DEAD
 * is set under both. */
enum { RL_LINK_QUEUED = 1u, RL_LINK_DEAD = 2u };

typedef struct rl_link {
    rl_source_t *source;
    rl_loop_t *loop;
    atomic_uint state;
    struct rl_link *next; /* in the loop's signalled stack, then in its deferred list */
} rl_link;

/* Bits of source->signalled. SET: signalled since the loop last performed it. PUBLISHED: a
 * signaller queued the links since SET was set, so one that finds SET need not queue them itself;
 * a hint, never needed for correctness (source.c). The loop clears both when it performs. */
enum { RL_SIGNAL_SET = 1u, RL_SIGNAL_PUBLISHED = 2u };

/* The source lock (a stripe shared with other sources; see locks.c). */
RL_HIDDEN void rl_source_lock(const rl_source_t *source);
RL_HIDDEN void rl_source_unlock(const rl_source_t *source);

struct rl_source {
    rl_object obj;
    long order;
    int version;               /* 0 or 1; immutable */
    int fd;                    /* version 1; immutable */
    atomic_uint events;        /* version 1 */
    rl_fd_callback_t callback; /* version 1 */
    rl_source_context_t context;
    atomic_bool valid;
    /* What a signalling thread touches, on a cache line apart from the reference count (which
     * the loop writes when it performs the source). RL_SIGNAL_* bits (source.c); 0 or both. */
    _Alignas(64) atomic_uint signalled;
    rl_ptrvec links;           /* rl_link*; the source lock */
    /* Signal and child-process sources (signal.c, process.c), in what would be padding; plain
     * sources leave them 0. A watching source is a version-0 one that the loop signals itself
     * when its signal was delivered (signo > 0); a process source with a pidfd is a version-1
     * one on it (the fd callback is process.c's), and one without watches SIGCHLD. */
    uint8_t kind;              /* RL_SOURCE_*; immutable */
    bool reaped;               /* process: its exit status was taken (source lock) */
    bool parked;               /* process: pidfd unwatched until a retry timer fires (source lock) */
    unsigned char parks;       /* process: how many times it was parked (source lock) */
    int signo;                 /* the signal watched, 0 for none; immutable */
    atomic_uint seen;          /* deliveries of signo accounted for (signal.c) */
    int pid;                   /* process; immutable */
    int owner;                 /* process: the process that made it (getpid()); immutable */
    int pidfd;                 /* process: its pidfd, -1 for none or once closed (source lock) */
    union {                    /* the user's callback; immutable */
        rl_signal_callback_t signal;
        rl_process_callback_t process;
    } on;
};

enum { RL_SOURCE_PLAIN = 0, RL_SOURCE_SIGNAL, RL_SOURCE_PROCESS };

/* A zeroed source with one reference (source.c), and a copy of context (retained) into it; for
 * the constructors of signal.c and process.c. */
RL_HIDDEN rl_source_t *rl_source_new(long order);
RL_HIDDEN void rl_source_take_context(rl_source_t *source, const rl_context_t *context);
/* Queue a link for its loop, once (source.c). Source locked, or loop locked. */
RL_HIDDEN void rl_link_enqueue(rl_link *link);

/* ---- Signals (signal.c): the process-wide handler, its counters and its eventfd ---- */

/* Bumped by the handler after each delivery's counter: a pass compares it with the value it last
 * saw (loop->signal_seen) to learn, in one load, whether any signal came. */
RL_HIDDEN extern atomic_uint rl_signal_generation;
/* Take a reference to signo's handler (installed by the first, with the process-wide eventfd
 * made by the first of all): 0, -EINVAL (sigaction refuses signo), -EMFILE, -ENFILE. */
RL_HIDDEN int rl_signal_acquire(int signo);
/* Drop it; the last restores the disposition found by the first (unless something replaced the
 * handler since), and the last of all closes the eventfd once no handler is using it. */
RL_HIDDEN void rl_signal_release(int signo);
/* How many times signo has been delivered since the process started (wraps). */
RL_HIDDEN unsigned rl_signal_deliveries(int signo);
/* Whether a watching source has deliveries it has not accounted for. */
static inline bool rl_source_watch_pending(rl_source_t *s);
/* The perform of a signal source: call back with the deliveries since the last callout; false
 * when there were none (another loop took them). */
RL_HIDDEN bool rl_signal_perform(rl_source_t *source);
/* A watching source joins loop (both locked): the loop watches the signal eventfd while it holds
 * one. 0, -ENOMEM, or epoll_ctl's error, with nothing changed. */
RL_HIDDEN int rl_signals_attach(rl_loop_t *loop, rl_link *link);
RL_HIDDEN void rl_signals_detach(rl_loop_t *loop, rl_link *link);
/* A pass saw the generation move: mark and queue every watching source of loop with deliveries
 * pending. Takes the lock. */
RL_HIDDEN void rl_signals_take(rl_loop_t *loop);
/* fork: the lock; in the child, an eventfd of its own at the same number. */
RL_HIDDEN void rl_signals_lock_for_fork(bool lock);
RL_HIDDEN void rl_signals_after_fork_child(void);

static inline bool rl_source_watch_pending(rl_source_t *s) {
    return rl_signal_deliveries(s->signo) != atomic_load(&s->seen);
}

/* ---- Child processes (process.c) ---- */

/* The perform of a process source without a pidfd (SIGCHLD came): reap and call back if the
 * child has exited; false otherwise. */
RL_HIDDEN bool rl_process_perform(rl_source_t *source);
/* Close its pidfd, or let go of SIGCHLD (rl_source_end_special). */
RL_HIDDEN void rl_process_end(rl_source_t *source);
/* Tests: make rl_source_create_process behave as if the kernel had no pidfd_open. */
RL_HIDDEN void rl_process_force_fallback(bool on);
/* Tests: make a readable pidfd yield nothing to reap, as for a child ptraced by another process. */
RL_HIDDEN void rl_process_force_unreapable(bool on);
/* An fd source's events, whatever its kind (source.c): rl_source_set_fd_events without checks. */
RL_HIDDEN int rl_source_watch_fd(rl_source_t *source, unsigned events);

/* What a signal or process source holds (its signal, its pidfd) goes when it is invalidated or
 * destroyed, whichever comes first (source.c calls it once). */
RL_HIDDEN void rl_source_end_special(rl_source_t *source);

/* ---- Timers (timer.c) ---- */

/* A timer's place in one mode: its heap node. node.user is the entry's mode and kind: (mode id +
 * 1) << RL_ENTRY_MODE_SHIFT, or no mode while the entry is unused; RL_ENTRY_CHAINED marks an
 * entry of the chain (timer.c), RL_ENTRY_MORE (the first entry only) a timer with a chain. The
 * first entry is inside the timer (one mode costs no allocation); a timer in more modes chains
 * further entries from its extras. */
typedef struct rl_timer_entry {
    rl_heap_node node;           /* first: the heap hands back nodes */
} rl_timer_entry;
enum { RL_ENTRY_CHAINED = 1, RL_ENTRY_MORE = 2, RL_ENTRY_MODE_SHIFT = 2 };

/* An entry of a timer in a second or further mode, allocated as it joins the mode. */
typedef struct rl_timer_chained {
    rl_timer_entry entry;
    struct rl_timer_chained *next; /* owner loop's lock */
    rl_timer_t *timer;
} rl_timer_chained;

/* What few timers need, allocated the first time one does: a repeating timer's interval (as it
 * is made), a tolerance other than 0 (rl_timer_set_tolerance), the entries of a second and
 * further modes (rl_mode_add_timer). Installed by compare-and-swap and kept until the timer is
 * destroyed, so a reader that found it may use it unlocked. */
typedef struct rl_timer_extras {
    double interval;           /* immutable; 0 unless the timer repeats (RL_TIMER_REPEATS) */
    _Atomic double tolerance;
    rl_timer_chained *more;    /* the further entries (owner loop's lock) */
} rl_timer_extras;

/* 72 bytes, which malloc serves from an 80-byte chunk: with the 16-byte heap slot, 96 bytes per
 * timer in one mode (a one-shot timer or timeout with no tolerance: no extras). */
struct rl_timer {
    /* What a re-arm reads and writes first, together (its validity, date, owner, heap place and
     * seq: the first 48 bytes), then what a callout needs besides. */
    rl_object obj;
    _Atomic double fire_date;
    _Atomic(rl_loop_t *) loop; /* owner: NULL, a loop or RL_OWNER_BUSY (loop.c) */
    rl_timer_entry first;      /* first.node.order is the timer's order (immutable) */
    const struct rl_timer_record *record; /* immutable: callback and context functions */
    void *info;                /* the context's: retained for the timer's life, or (HELD) while
                                * a loop owns the timer */
    _Atomic(rl_timer_extras *) extras; /* NULL until needed */
};

/* The entry after e among t's (the first, then the chain); NULL past the last. Owner loop's lock. */
static inline rl_timer_entry *rl_timer_entry_after(rl_timer_t *t, rl_timer_entry *e) {
    rl_timer_chained *c;
    if (e == &t->first)
        c = (e->node.user & RL_ENTRY_MORE) ? atomic_load_explicit(&t->extras, memory_order_acquire)->more : NULL;
    else
        c = ((rl_timer_chained *)e)->next;
    return c ? &c->entry : NULL;
}
static inline uint32_t rl_entry_mode_id1(const rl_timer_entry *e) { return e->node.user >> RL_ENTRY_MODE_SHIFT; }

/* What a timer was made with besides its info: its callback, its context's retain and release,
 * and the done of a timer in the caller's memory (rl_timer_create_in). A program makes its timers
 * with few such tuples, so a timer points at a record shared by every timer made with the same
 * one instead of holding four pointers: one record per distinct tuple in the process, never freed
 * (timer.c). retain is called through the record only for a HELD timer (as a loop claims it);
 * release for a HELD timer as a loop lets it go, for any other as it is destroyed. */
typedef struct rl_timer_record {
    rl_timer_callback_t callback;
    const void *(*retain)(const void *info);
    void (*release)(const void *info);
    void (*done)(void *memory); /* a timer in the caller's memory (IN_STORAGE): hands it back */
    const struct rl_timer_record *next;
    /* RL_RECORD_CONTEXT_OWNS: a held timer whose context owns a reference to it while a loop
     * holds the context (RL_TIMER_IN_OWNED_BY_CONTEXT), so that a loop's own references may go
     * before the context's release. */
    unsigned char flags;
} rl_timer_record;
enum { RL_RECORD_CONTEXT_OWNS = 1 };

/* obj.bits of a timer. VALID as named. FIRING: the timer's callout is running; set only once the
 * loop's thread is about to wait inside that callout (a nested run: rl_timers_publish_firing),
 * which is when another thread's reckoning of the wake date must pass it over, or, for a HELD
 * timer, when it is disowned during the callout (settle_held's handshake needs it then: the
 * callout's mark, RL_TIMER_CALLOUT, tells the disowning); until then the loop's own thread knows
 * it from its chain of callouts under way (loop->firing). HELD (immutable): the context is held only
 * while a loop owns the timer. RELEASE_DUE: a held timer was disowned and its context's release
 * is still to run; it is set under the owner's lock as the owner pointer is cleared, and taken
 * (cleared) exactly once: by the disowning thread once it has unlocked, unless the timer's callout
 * is running (FIRING), in which case by that callout's end; or by a claim, which then skips its
 * retain (the two cancel). So a held timer's info lives through every callout. IDLE: the timer
 * is in its owner's common set but in none of its modes (removed by name from the last one); it
 * stays the loop's, but fires in no pass, as CF's timer whose last mode went (set and cleared
 * under the owner's lock; read by fire(), unlocked). TIMEOUT (immutable): a one-shot timer that
 * its callout leaves valid and dormant, at INFINITY, unless the callout armed it again
 * (rl_timer_create_timeout). IN_STORAGE (immutable): the timer lives in the caller's memory
 * (rl_timer_create_in); its record says what to call as its last reference goes. REPEATS
 * (immutable): the interval is not 0 (it is in the extras), so that firing a one-shot timer
 * never loads them. */
enum { RL_TIMER_VALID = 1, RL_TIMER_FIRING = 2, RL_TIMER_HELD = 4, RL_TIMER_RELEASE_DUE = 8, RL_TIMER_IDLE = 16,
       RL_TIMER_TIMEOUT = 32, RL_TIMER_IN_STORAGE = 64, RL_TIMER_REPEATS = 128 };

/* obj.marks of a timer (owner loop's lock, while it owns the timer). TAKEN: the owner's outermost
 * fire phase took the timer as due, without a reference of its own: the references of the
 * timer's memberships keep it alive, and the first removal that drops any of them (clearing the
 * mark) hands one to the phase instead of releasing it (loop->phase_deferred), which the phase
 * releases as it ends. Set only by that phase as it takes its due timers; cleared by such a
 * removal, by fire() as it parks the timer after its callout, or by the phase's end. Never set
 * outside an outermost fire phase (rl_loop_verify). CALLOUT: a HELD timer's callout is under way
 * on the owner's thread (fire() sets it as the callout starts and takes it off as it ends); a
 * disowning meanwhile takes it off instead and leaves FIRING and RELEASE_DUE, so that the
 * context's release waits for the callout's end (timer_leave_if_unused). */
enum { RL_TIMER_TAKEN = 1, RL_TIMER_CALLOUT = 2 };

/* The timer a heap node of a mode belongs to. */
RL_HIDDEN rl_timer_t *rl_timer_of_node(rl_heap_node *node);

/* ---- Observers (observer.c) ---- */

struct rl_observer {
    rl_object obj;
    unsigned activities;
    bool repeats;
    long order;
    uint64_t seq;             /* ties in order go by creation */
    atomic_bool valid;
    atomic_bool firing;       /* its callout is running */
    rl_observer_callback_t callback;
    rl_context_t context;
    _Atomic(rl_loop_t *) loop;
    rl_ptrvec modes;          /* rl_mode*; owner loop's lock */
};

/* ---- Fd table (fd_table.c): which sources of a loop watch which fd; its functions: fd_table.h ---- */

/* One fd of a loop, stored by value in an array indexed by fd: a ready fd costs one cache line
 * to find its (usually single) source. Entries are rl_source_t pointers whose low bit marks a
 * stale source (its fd was closed while it was registered; see fd_table.c). */
typedef struct {
    void *first;         /* a source of this loop on this fd, or NULL */
    rl_ptrvec *more;     /* further sources on the same fd (rare: a reader and a writer), or NULL */
    unsigned registered; /* RL_FD_* the epoll set watches now (0: edge-triggered, errors only) */
    uint32_t gen;        /* of the set's registration for the file now at fd; 0: none */
    uint32_t last_wait;  /* the table's wait count when the fd was last reported */
    uint16_t streak;     /* how many waits in a row reported it (saturates) */
    bool parked;         /* narrowed to the current mode's interest */
} rl_fd_watch;

enum { RL_FD_STALE_TAGS = 8 };

typedef struct {
    rl_fd_watch *watches;  /* indexed by fd */
    size_t size;
    rl_ptrvec parked;      /* fds (as uintptr_t) narrowed to a mode */
    struct rl_mode *parked_mode; /* the mode they are narrowed for, while any is */
    /* How many fds the epoll set watches (rl_locked_count_add; read unlocked), plus one while
     * stale_seen: so that passes keep asking the kernel, and find the stale event again. */
    atomic_size_t in_set;
    bool stale_seen;       /* a host's query saw an event that matches no registration */
    bool deferred;         /* the last blocking wait left its fd events to the next pass */
    uint32_t next_gen;
    uint32_t waits;        /* waits that returned fd events */
    /* Tags of events that matched no registration, in the last wait and in this one. */
    uint64_t stale[RL_FD_STALE_TAGS], stale_next[RL_FD_STALE_TAGS];
    size_t stale_before, stale_now;
} rl_fd_table;

/* ---- Loops (loop.c, run.c, blocks.c) ---- */

/* One rl_run_in_mode() invocation; lives on its caller's stack. */
typedef struct rl_run_frame {
    rl_mode *mode;
    double deadline;      /* 0: poll; INFINITY: none */
    bool stop_after_handle;
    bool retry;           /* something ready could not be taken (out of memory): do not sleep */
    atomic_bool stopped;  /* set under loop->lock (which finds the frame), read without */
    /* While the pass performs version-0 sources, sources.items[unperformed..] are still held and
     * not performed yet; 0 otherwise. */
    size_t unperformed;
    struct rl_run_frame *outer;
    rl_ready_vec sources; /* sources taken for callouts: the signalled ones, then the ready fd ones */
    rl_ptrvec notify;     /* observers detached for the current activity */
} rl_run_frame;

typedef struct {
    _Atomic unsigned long long passes, waits, wakeups, wakeup_writes, timers_fired, sources_performed;
    _Atomic double time_waiting, time_in_callouts;
} rl_counters;

/* Lag figures (lag.c, lag.h; crunloop.h, "Loop lag"). The loop's thread writes the first part alone;
 * readers that reset write the second, on lines of its own. */
typedef struct {
    _Atomic unsigned long long late[RL_LAG_BUCKETS]; /* fired timers by lateness (rl_lag_late) */
    /* The longest callout, under a sequence lock: seq is odd while the loop's thread writes. */
    _Atomic unsigned long long seq;
    _Atomic double longest, longest_end;
    atomic_int kind;
    atomic_uint count;
    /* The zero of each bucket (its count at the last reset), and the seq whose record a reset
     * voided (equal to seq: no record since the reset; both start at 0, no record yet). Each
     * only grows (compare-and-swap). */
    _Alignas(64) _Atomic unsigned long long late_zero[RL_LAG_BUCKETS];
    _Atomic unsigned long long reset_seq;
} rl_lag;

struct rl_loop {
    rl_object obj;
    pthread_mutex_t lock;
    /* The fast section (rl_loop_lock): fast is set while the loop's thread is in one, fast_out
     * while another thread holds the mutex (or is taking it); fast_held (the loop's thread only)
     * says which of the two an rl_loop_lock of the loop's thread took. bias: the loop's thread
     * may enter with no fence (set by it under the mutex, cleared by another thread under the
     * mutex before a membarrier); cross_locks counts other threads' mutex sections (under the
     * mutex), which the loop's thread compares with cross_seen (its own) to re-bias once they
     * stop: bias_quiet checks in a row that found none; bias_revoked counts the revocations
     * (under the mutex; the tests read it). */
    atomic_bool fast, fast_out, bias;
    bool fast_held;
    unsigned bias_quiet;
    size_t cross_locks, cross_seen;
    /* Its thread exited (or is not in this process after fork): the loop takes no more items and,
     * once closed, holds no kernel object. Written under the lock; wakers read it without. */
    atomic_bool dead;
    /* What a timer's add and re-arm on the loop's thread read besides the fast section's flags,
     * on the cache line after theirs: the seq of the last scheduling, the default mode, and the
     * modes' list (its pointer and count; the inline items follow). */
    uint64_t timer_seq;
    rl_mode *default_mode;
    rl_ptrvec modes;             /* rl_mode* */
    rl_ptrset common_sources, common_timers, common_observers;
    rl_run_frame *run;           /* innermost run, NULL when not running */
    /* The mode a host last asked about (rl_loop_get_backend_timeout) while no run was under way:
     * the mode the host sleeps for, whose timer changes rearm the timerfd. NULL once a run
     * starts. Loop lock. */
    rl_mode *host_mode;
    rl_link *deferred, *deferred_tail; /* drained links not yet performed (loop lock) */
    rl_block_queue common_blocks; /* blocks queued for RL_COMMON_MODES */
    /* Bumped (under the lock) each time a mode becomes common: a block phase in a mode that was
     * not common when it began looks again after each callout (blocks.c). */
    atomic_uint common_modes_added;
    uint64_t block_seq;
    rl_block *spare_blocks;       /* spent blocks for reuse (loop lock), at most RL_SPARE_BLOCKS */
    size_t spare_count;
    rl_fd_table fds;
    rl_wait wait;
    size_t bias_revoked;         /* see fast, above (kept apart from the hot fields: seldom written) */
    /* The clock as the callout phase now running on the loop's thread began (rl_callouts_begin
     * reads it anyway), 0 between phases and once a nested phase ended: the base of
     * rl_timer_rearm. The loop's thread only. */
    double phase_time;
    /* The loop's time outside a callout phase (rl_loop_get_time): the clock as the loop last read
     * it for itself (a callout phase's start and end, a blocking wait's end) or as
     * rl_loop_update_time read it; the loop's creation to begin with. The loop's thread only
     * (and its creation). */
    double time;
    /* The last fire phase's list of due timers, kept for the next (timer.c), with its capacity.
     * The loop's thread only (and its destruction). */
    void *fire_spare;
    size_t fire_spare_cap;
    /* While the loop's outermost fire phase runs (timer.c), the references that removals of the
     * timers it took (RL_TIMER_TAKEN) handed to it, to release as it ends: room for cap, one per
     * timer it took; NULL between phases (and in a phase abandoned by fork or thread exit). The
     * array is set and taken back by the loop's thread, appended to by any thread; all under
     * the lock (the loop's thread reads the pointer without it: only it writes it). */
    struct rl_timer **phase_deferred;
    size_t phase_deferred_n, phase_deferred_cap;
    /* The timer callouts under way on the loop's thread, innermost first: frames on fire()'s
     * stack, so that a nested run fires none of them again (timer.c). The loop's thread only. */
    struct rl_firing *firing;
    /* A held timer that a disowning under the lock found invalid with no callout under way, whose
     * context's release it hands to the caller (timer.c: timer_leave_if_unused, take_handed):
     * set and taken back within one hold of the lock, NULL otherwise. */
    struct rl_timer *held_handed;
    struct rl_loop *registry_prev, *registry_next; /* rl_loops_lock */
    /* Bumped (under the lock) whenever a source leaves a mode: fd callouts re-check membership
     * under the lock only when it moved since they were collected. */
    atomic_ullong source_removals;
    /* What other threads write to signal or wake the loop, on one cache line of its own, so a
     * signal and its wakeup move one line between cores, and loop-only writes never evict it. */
    _Alignas(64) atomic_uint wake_state; /* RL_WAKE_* (wake.c) */
    atomic_uint wake_writers;     /* wakers writing to the eventfd (wake.c) */
    _Atomic(rl_link *) signalled; /* stack of links pushed by rl_source_signal */
    _Alignas(64) bool wake_spin;  /* the last pass was busy: spin before sleeping (wake.c; loop thread) */
    /* The loop holds a signal source (or a process source without a pidfd): each pass compares
     * rl_signal_generation with signal_seen. Written under the lock, read by the loop's thread. */
    atomic_bool signal_watch;
    unsigned signal_seen;         /* loop thread */
    rl_ptrvec signal_links;       /* the links of those sources (loop lock) */
    sigset_t signal_accept;       /* their signals, taken while the loop sleeps (loop lock) */
    _Atomic double spin;          /* the spin window in seconds (rl_loop_set_spin: any thread; relaxed) */
    rl_counters counters;
    rl_lag lag;
    /* The outermost fire phase parks the timers it took in its mode's heap before the first
     * callout (timer.c: taken timers), their dates kept in the timers: the timers of
     * taken[taken_at, taken_n) are still to fire or firing (the first, in a callout of the
     * phase), each parked unless something moved it since.
     * A run, a wait or a query of the next date on the loop's thread puts them back in the
     * heap's order first (rl_timers_restore_taken), the one whose callout runs included.
     * All written by the loop's thread only: taken, taken_n and taken_mode under the lock,
     * taken_at (atomic, relaxed) as each callout begins. Other threads read them under the lock
     * (verify; the mode's next fire date: the firing timer's, taken[taken_at], whose key stays
     * put until the phase ends). */
    const struct rl_due_timer *taken;
    atomic_size_t taken_at;
    size_t taken_n;
    struct rl_mode *taken_mode;
};

/* A spin-wait hint: lets the sibling hyperthread run, and costs the bus nothing. */
static inline void rl_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Initial-exec: one load from the thread pointer, no __tls_get_addr call, in the shared library
 * too; a pointer fits the static TLS glibc reserves for libraries loaded later. */
RL_HIDDEN extern _Thread_local rl_loop_t *rl_tls_loop __attribute__((tls_model("initial-exec")));

/*
 * The loop's lock, in two halves. The mutex is what every thread but the loop's own takes; the
 * loop's own thread takes, when no other thread holds the mutex, its fast section instead: two
 * flags and no mutex (about 10 instructions and one locked instruction where the mutex's lock
 * and unlock cost about 55 and two; none at all while the loop is biased, below). Either gives
 * its holder everything loop->lock guards.
 *
 * Why they exclude each other (the asymmetric Dekker handshake): the loop's thread stores fast
 * and then loads fast_out; a thread that took the mutex stores fast_out and then loads fast; all
 * four are seq_cst, so in their one total order one of the stores comes first and the other
 * thread's load sees it: the loop's thread finds fast_out and leaves (taking the mutex, and so
 * waiting for the other thread to unlock), or the other thread finds fast and waits until the
 * section ends. Its release store of fast, read by the other thread's acquire load (and the
 * release store of fast_out at an unlock, read by the loop's thread's load), orders each holder's
 * accesses after the previous holder's. Only one thread is ever a loop's own (rl_tls_loop), and
 * its fast sections and mutex sections follow each other, so fast sections never overlap each
 * other nor the loop's own mutex sections.
 *
 * The bias: the seq_cst store is a full fence (a locked instruction on x86), which keeps a
 * timeout's re-arm from overlapping the next one's cache misses. While no other thread takes the
 * mutex (the usual state of a loop busy with its own timers), the loop is biased (from its
 * thread's first call, rl_loop_get_current, and again after quiet passes): its thread
 * stores fast with no fence, and the fence is moved to the other side, which pays for it once,
 * when it first takes the mutex: it clears bias and calls membarrier(PRIVATE_EXPEDITED) before
 * it loads fast, which runs a full fence on the loop's thread wherever that thread is. Either
 * the loop's store of fast came before that fence (so the other thread sees it and waits), or
 * the loop's loads after its store come after it (so they see bias cleared and fast_out set: it
 * takes the fenced path, finds fast_out and leaves). The loop's thread loads bias after its
 * store of fast for that reason. Once cleared, both sides use the seq_cst handshake above; the
 * loop's thread biases itself again, under the mutex, after RL_BIAS_QUIET of its passes' locked
 * sections in a row saw no other thread's (a thread that locks the loop now and then pays one
 * membarrier, a few microseconds, each time; one that locks it often keeps it unbiased). No
 * bias where membarrier is missing (old kernels, valgrind) or under ThreadSanitizer, which
 * cannot see the fence the kernel makes: there the seq_cst handshake is all. Should membarrier
 * be refused later (a seccomp filter), the revocation fences by a TLB shootdown instead (an
 * mprotect that interrupts every CPU running the process) and no loop biases again.
 *
 * The contract: a thread other than the loop's takes the lock only through rl_loop_lock or
 * rl_loop_lock_mutex (a bare pthread_mutex_lock would not wait out a fast section); the loop's
 * own thread may use either these or the bare mutex (run.c, which only runs the caller's own
 * loop). A missed rl_loop_unlock by another thread would only leave fast_out set (every fast
 * section then falls back to the mutex): never a race. A fast section must be short (the other
 * threads spin while it lasts) and must not block: the timer and observer operations of the
 * loop's own thread, not a pass's phases.
 */
#if defined(__SANITIZE_THREAD__)
#define RL_BIAS 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RL_BIAS 0
#endif
#endif
#ifndef RL_BIAS
#define RL_BIAS 1
#endif
enum { RL_BIAS_QUIET = 16 };
RL_HIDDEN void rl_loop_exclude_fast(rl_loop_t *loop);
/* Whether membarrier(PRIVATE_EXPEDITED) works in this process (registered at the first ask: a
 * loop's creation); rl_bias_ready only reads the answer. */
RL_HIDDEN bool rl_bias_available(void);
RL_HIDDEN bool rl_bias_ready(void);
/* Tests: revocations use the fallback fence (a TLB shootdown) instead of membarrier. */
RL_HIDDEN extern bool rl_bias_fallback_only;
/* After fork, in the child: ask again (the registration is the process's). */
RL_HIDDEN void rl_bias_after_fork_child(void);
/* The loop's thread, holding loop's mutex, at a pass's locked section: bias the loop again once
 * RL_BIAS_QUIET such sections in a row saw no other thread's. A load when biased already. */
static inline void rl_loop_maybe_bias(rl_loop_t *loop) {
#if RL_BIAS
    if (atomic_load_explicit(&loop->bias, memory_order_relaxed)) return;
    if (loop->cross_locks != loop->cross_seen) {
        loop->cross_seen = loop->cross_locks;
        loop->bias_quiet = 0;
        return;
    }
    if (++loop->bias_quiet >= RL_BIAS_QUIET && rl_bias_ready()) {
        loop->bias_quiet = 0;
        atomic_store_explicit(&loop->bias, true, memory_order_relaxed);
    }
#else
    (void)loop;
#endif
}
/* The mutex (any thread): a thread other than the loop's then waits out a fast section. */
static inline void rl_loop_lock_mutex(rl_loop_t *loop) {
    pthread_mutex_lock(&loop->lock);
    if (rl_tls_loop != loop) rl_loop_exclude_fast(loop);
}
/* The lock on the loop's own thread (rl_tls_loop == loop): its fast section when no other thread
 * holds the mutex, else the mutex. Undo with rl_loop_unlock_own. */
static inline void rl_loop_lock_own(rl_loop_t *loop) {
#if RL_BIAS
    atomic_store_explicit(&loop->fast, true, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst); /* bias is loaded after fast is stored */
    if (__builtin_expect(atomic_load_explicit(&loop->bias, memory_order_relaxed), 1)) {
        if (__builtin_expect(!atomic_load_explicit(&loop->fast_out, memory_order_acquire), 1)) {
            loop->fast_held = true;
            return;
        }
    } else
#endif
    {
        atomic_store_explicit(&loop->fast, true, memory_order_seq_cst);
        if (__builtin_expect(!atomic_load_explicit(&loop->fast_out, memory_order_seq_cst), 1)) {
            loop->fast_held = true;
            return;
        }
    }
    atomic_store_explicit(&loop->fast, false, memory_order_release);
    pthread_mutex_lock(&loop->lock);
}
static inline void rl_loop_unlock_own(rl_loop_t *loop) {
    if (__builtin_expect(loop->fast_held, 1)) {
        loop->fast_held = false;
        atomic_store_explicit(&loop->fast, false, memory_order_release);
        return;
    }
    pthread_mutex_unlock(&loop->lock);
}
/* The lock from any thread: rl_loop_lock_own on the loop's own, rl_loop_lock_mutex elsewhere.
 * Undo with rl_loop_unlock. */
static inline void rl_loop_lock(rl_loop_t *loop) {
    if (rl_tls_loop == loop) rl_loop_lock_own(loop);
    else rl_loop_lock_mutex(loop);
}
static inline void rl_loop_unlock(rl_loop_t *loop) {
    if (rl_tls_loop == loop) {
        rl_loop_unlock_own(loop);
        return;
    }
    atomic_store_explicit(&loop->fast_out, false, memory_order_release);
    pthread_mutex_unlock(&loop->lock);
}

/* Whether a signal came that the loop watches and has not taken yet (rl_signals_take): its
 * handler moves the generation before it writes the signal eventfd, which only a wait sees
 * (signal.c). One load when none came, and nothing at all for a loop that watches no signal. */
static inline bool rl_signals_arrived(rl_loop_t *loop) {
    return atomic_load(&loop->signal_watch) &&
           atomic_load_explicit(&rl_signal_generation, memory_order_relaxed) != loop->signal_seen;
}

/* The mode the loop waits in: its host's, when a host queried since the innermost run's last
 * wait (a host nested in a callout waits for its own mode, not the outer run's), else the
 * running mode, else none. loop locked. */
static inline rl_mode *rl_loop_awaited_mode(rl_loop_t *loop) {
    return loop->host_mode ? loop->host_mode : loop->run ? loop->run->mode : NULL;
}

/* Whether a signalled item joining mode must wake the loop: mode is the one its host waits for,
 * or the running mode (a run whose callout hosted another mode is back, and may be about to
 * sleep before its next wait clears host_mode). loop locked. */
static inline bool rl_loop_may_await(rl_loop_t *loop, rl_mode *mode) {
    return mode && (loop->host_mode == mode || (loop->run && loop->run->mode == mode));
}

static inline rl_mode *rl_mode_find(rl_loop_t *loop, const char *name, bool create) {
    if (name == RL_DEFAULT_MODE && loop->default_mode) return loop->default_mode;
    return rl_mode_find_by_name(loop, name, create);
}

/* The item lock of a timer or observer (locks.c). */
RL_HIDDEN void rl_item_lock(const void *item);
RL_HIDDEN void rl_item_unlock(const void *item);

/* Ownership of a timer or observer (loop.c): its owner pointer is NULL, a loop, or
 * RL_OWNER_BUSY while a thread changes the fields of the unowned item.
 * rl_owner_lock: lock the loop that owns item and return it, retained unless it is the calling
 * thread's own loop (rl_tls_loop, which that thread keeps alive); or, when no loop owns it,
 * mark it BUSY and return NULL (the item's fields are the caller's to change). Undo with
 * rl_owner_unlock. */
#define RL_OWNER_BUSY ((rl_loop_t *)(uintptr_t)1)
RL_HIDDEN rl_loop_t *rl_owner_lock(const void *item, _Atomic(rl_loop_t *) *owner);
RL_HIDDEN void rl_owner_unlock(_Atomic(rl_loop_t *) *owner, rl_loop_t *loop);
/* For a caller that unlocked the loop rl_owner_lock returned itself: drop what rl_owner_lock
 * kept of it (a reference, unless it is the calling thread's own loop). */
RL_HIDDEN void rl_owner_put(rl_loop_t *loop);
/* Claim an item for loop (loop locked): -EBUSY when another loop owns it, -EINVAL when loop is
 * dead. No lock besides the loop's. Releasing the claim: rl_owner_clear (loop locked). */
RL_HIDDEN int rl_owner_claim(rl_loop_t *loop, _Atomic(rl_loop_t *) *owner);
RL_HIDDEN void rl_owner_clear(_Atomic(rl_loop_t *) *owner);
/* Wait until no thread holds an item stripe (rl_loop_destroy, before freeing a loop). */
RL_HIDDEN void rl_items_quiesce(void);

/* The date to arm the timerfd at for mode: its earliest timer, later within tolerances. */
RL_HIDDEN double rl_timers_wake_date(rl_mode *mode);
/* The date of mode's earliest timer, INFINITY when it has none: a pass that polls looks at the
 * heap only once that date is due. loop locked. */
static inline double rl_timers_earliest(rl_mode *mode) {
    const rl_heap_slot *first = rl_heap_first(&mode->timers); /* pops holes at the top */
    return first ? first->when : __builtin_inf();
}
/* The timer phase of a pass of run: fire the timers of run->mode due now, in (fire date, order,
 * scheduling) order, each only if an earlier callout left it due, valid and in this loop. One-shot
 * timers are invalidated after their callout, repeating ones move to their next grid point.
 * Unlocked. Returns false when a due timer could not be taken (out of memory): it stays due for
 * the next pass. The outermost phase takes its timers without a reference (RL_TIMER_TAKEN); a
 * nested one (a callout ran the loop) retains each. */
RL_HIDDEN bool rl_timers_fire_due(rl_loop_t *loop, rl_run_frame *run);
/* The outermost fire phase of loop will never end: its thread exited inside one of its callouts
 * (teardown), or is not in this process (the child of fork). Removals stop handing references
 * to it (those it holds leak with its frame, as a nested phase's retains do) and release them
 * all. Loop locked, or the child of fork. */
static inline void rl_timers_abandon_phase(rl_loop_t *loop) {
    loop->phase_deferred = NULL;
    loop->phase_deferred_n = loop->phase_deferred_cap = 0;
    loop->taken = NULL; /* on that frame: its timers stay parked in a loop that only empties */
    loop->taken_n = 0;
    atomic_store_explicit(&loop->taken_at, 0, memory_order_relaxed);
    loop->taken_mode = NULL;
    loop->firing = NULL; /* the frames went with their thread (or stay in the parent) */
}
/* A timer callout under way on a loop's thread (fire()'s frame): published once its timer's
 * FIRING bit is set by rl_timers_publish_firing, a HELD timer's included (whose callout is also
 * marked under the loop's lock from its start: RL_TIMER_CALLOUT). */
typedef struct rl_firing {
    struct rl_timer *timer;
    struct rl_firing *outer;
    bool published;
} rl_firing;
/* Set FIRING on every timer whose callout is under way on the loop's thread (a run inside one of
 * them is about to wait): from then on another thread reckoning the wake date passes them over,
 * as the loop's thread does. The loop's thread, before it waits (rl_wake_deadline). */
RL_HIDDEN void rl_timers_publish_firing(rl_loop_t *loop);
/* Put the timers the outermost fire phase took and has yet to fire back in its mode's heap order,
 * at their dates (each parked since the phase took it, unless something moved it since): before
 * a run, a wait or a query of the next fire date inside a callout of that phase, which would
 * otherwise not see them, as CF's see its due timers until they fire. The loop's thread, loop
 * locked. rl_timers_restore_taken_if_any: a load when there are none. */
RL_HIDDEN void rl_timers_restore_taken(rl_loop_t *loop);
static inline void rl_timers_restore_taken_if_any(rl_loop_t *loop) {
    if (__builtin_expect(loop->taken_n != 0, 0)) rl_timers_restore_taken(loop);
}
/* Free the list a fire phase kept (the loop's destruction). */
RL_HIDDEN void rl_timers_free_spare(rl_loop_t *loop);
RL_HIDDEN void rl_observers_notify(rl_loop_t *loop, rl_run_frame *run, unsigned activity);
RL_HIDDEN bool rl_sources_perform_signalled(rl_loop_t *loop, rl_run_frame *run);
/* A first look from the loop's thread, without the lock: false when no source is signalled or
 * deferred, and then rl_sources_perform_signalled would do nothing. (deferred is written only by
 * this thread, under the lock; signalled is a seq_cst load, after the pass began: wake.c.) */
static inline bool rl_sources_may_be_signalled(rl_loop_t *loop) {
    return loop->deferred || atomic_load(&loop->signalled);
}
/* A run starts inside a callout of the pass of frame outer: the sources that pass took and has
 * not performed yet go back to the loop's queue too, so that the nested run performs those of
 * its mode (as CF's does); the outer pass skips any it performed. */
RL_HIDDEN void rl_sources_share_held(rl_loop_t *loop, rl_run_frame *outer);
static inline void rl_sources_share_ready(rl_loop_t *loop, rl_run_frame *outer) {
    if (outer && outer->unperformed) rl_sources_share_held(loop, outer);
}
/* Whether a pass in mode would find a signalled source to perform (or signals not yet sorted
 * by mode: a pass sorts them). loop locked. */
RL_HIDDEN bool rl_sources_signalled_in(rl_loop_t *loop, rl_mode *mode);
/* Free the links of a loop being destroyed that are still queued (all dead by then). */
RL_HIDDEN void rl_links_free_queued(rl_loop_t *loop);

/* Blocks (blocks.c). */
RL_HIDDEN void rl_blocks_run(rl_loop_t *loop, rl_run_frame *run);
/* Whether a block is queued for mode (or for the common modes, when mode is common): O(1).
 * Lock-free (the counts are atomic); exact under the loop lock. */
RL_HIDDEN bool rl_blocks_pending(rl_loop_t *loop, rl_mode *mode);
/* A first look without the lock, from the loop's thread: may be true with nothing to run for mode
 * (blocks for the common modes when mode is not common), never false with something. The queues'
 * counts are stored (seq_cst) before a waker posts, and a pass reads them after it begins: a block
 * queued before a wakeup is never missed. */
static inline bool rl_blocks_may_be_pending(rl_loop_t *loop, rl_mode *mode) {
    return atomic_load(&mode->blocks.count) || atomic_load(&loop->common_blocks.count);
}
/* Detach every queued block of loop (teardown) and free them without running them. */
RL_HIDDEN void rl_blocks_drop_all(rl_loop_t *loop);
/* Free the spare blocks (the loop's destruction). */
RL_HIDDEN void rl_blocks_free_spares(rl_loop_t *loop);
RL_HIDDEN int rl_blocks_verify(rl_loop_t *loop, void (*fail)(void *ctx, const char *what, long a), void *ctx);

/* Take every item out of a loop, close its kernel objects and mark it dead (thread exit). Runs
 * every source's cancel; timers and observers stay valid and may join another loop. Allocates
 * nothing, so it cannot fail halfway. */
RL_HIDDEN void rl_loop_teardown(rl_loop_t *loop);
RL_HIDDEN void rl_loop_destroy(rl_loop_t *loop);
RL_HIDDEN void rl_source_destroy(rl_source_t *source);
RL_HIDDEN void rl_timer_destroy(rl_timer_t *timer);
RL_HIDDEN void rl_observer_destroy(rl_observer_t *observer);
/* Mark loop dead and close its kernel objects once no waker is writing to them. loop locked. */
RL_HIDDEN void rl_loop_close(rl_loop_t *loop);

/* Take a source out of every mode of loop and out of its common set (cancel runs). Unlocked;
 * allocates nothing. */
RL_HIDDEN void rl_source_remove_from_loop(rl_loop_t *loop, rl_source_t *source);
/* Take a timer or observer out of every mode of loop; it stays valid. Unlocked. */
RL_HIDDEN void rl_timer_remove_from_loop(rl_loop_t *loop, rl_timer_t *timer);
RL_HIDDEN void rl_observer_remove_from_loop(rl_loop_t *loop, rl_observer_t *observer);

/* Timers in one more mode, and out (timer.c); the timer kind's join and leave. */
RL_HIDDEN int rl_mode_add_timer(rl_loop_t *loop, rl_mode *mode, rl_timer_t *timer);
RL_HIDDEN bool rl_mode_remove_timer(rl_loop_t *loop, rl_mode *mode, rl_timer_t *timer);

/* Registry of live loops and fork (locks.c). */
RL_HIDDEN void rl_loops_register(rl_loop_t *loop);
RL_HIDDEN void rl_loops_unregister(rl_loop_t *loop);
/* In the child of fork (locks.c, loop.c): keep the forking thread's loop with new kernel
 * objects; every other loop is dead; the main loop is the forking thread's. */
RL_HIDDEN void rl_loop_after_fork_child(rl_loop_t *loop, bool survives);
RL_HIDDEN void rl_main_loop_after_fork_child(void);
/* Debug builds verify a loop after each change of membership. */
#ifdef RL_DEBUG
RL_HIDDEN void rl_debug_verify(rl_loop_t *loop, const char *where);
#define RL_DEBUG_VERIFY(loop, where) rl_debug_verify((loop), (where))
#else
#define RL_DEBUG_VERIFY(loop, where) ((void)0)
#endif

/* Relaxed counter bump by the loop's own thread (single writer: no locked instruction). */
#define RL_COUNT(loop, field, n)                                                            \
    atomic_store_explicit(&(loop)->counters.field,                                           \
        atomic_load_explicit(&(loop)->counters.field, memory_order_relaxed) + (n),           \
        memory_order_relaxed)

/* ---- Callouts (callout.c): named so that a stack trace says what the loop was doing ---- */

RL_HIDDEN void __RL_IS_CALLING_OUT_TO_AN_OBSERVER_CALLBACK_FUNCTION__(rl_observer_callback_t fn,
    rl_observer_t *observer, unsigned activity, void *info);
RL_HIDDEN void __RL_IS_CALLING_OUT_TO_A_TIMER_CALLBACK_FUNCTION__(rl_timer_callback_t fn,
    rl_timer_t *timer, void *info);
RL_HIDDEN void __RL_IS_CALLING_OUT_TO_A_SOURCE0_PERFORM_FUNCTION__(void (*fn)(void *), void *info);
RL_HIDDEN void __RL_IS_CALLING_OUT_TO_A_SOURCE1_PERFORM_FUNCTION__(rl_fd_callback_t fn,
    rl_source_t *source, int fd, unsigned events, void *info);
RL_HIDDEN void __RL_IS_CALLING_OUT_TO_A_BLOCK__(void (*fn)(void *), void *arg);
RL_HIDDEN void __RL_IS_CALLING_OUT_TO_A_SIGNAL_CALLBACK_FUNCTION__(rl_signal_callback_t fn,
    rl_source_t *source, int signo, unsigned count, void *info);
RL_HIDDEN void __RL_IS_CALLING_OUT_TO_A_PROCESS_CALLBACK_FUNCTION__(rl_process_callback_t fn,
    rl_source_t *source, int pid, int status, void *info);
RL_HIDDEN void __RL_IS_CALLING_OUT_TO_A_SCHEDULE_OR_CANCEL_FUNCTION__(
    void (*fn)(void *, rl_loop_t *, const char *), void *info, rl_loop_t *loop, const char *mode);

RL_HIDDEN double rl_elapsed_since(double start);

/* ---- Invariants (verify.c) ---- */

/* Check every invariant of loop that its lock guards: each mode's timer heap (order, stored
 * indexes) and its entries' back pointers, per-mode source sets and counts, each mode's observer
 * list order and activity mask, the owner pointers of its timers and observers, the common sets
 * (each member of the right kind, its timers and observers owned by the loop; a member may be
 * missing from a common mode it was removed from by name, as in CF), the fd table (interest unions, parked fds, counts), the
 * signal links of its sources, the queued blocks and their counts, and the fire phase's marks
 * (RL_TIMER_TAKEN only while it runs, within the room it has for references). Appends one line per
 * violation to report (when report is not NULL) and returns how many it found: 0 means
 * consistent. Any thread; takes the loop's lock (callouts hold none, so a callout may call it).
 * Debug builds (-DRL_DEBUG) also call it after every change of membership. */
RL_HIDDEN int rl_loop_verify(rl_loop_t *loop, char *report, size_t size);

#endif
