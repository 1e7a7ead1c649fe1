//! Work split over threads of the calling process: the pure-Rust parts of a whole-table search
//! (signing rows, sorting and deciding the buckets of a band) on every core the caller allows.
//!
//! The calling thread runs no task when there are helpers: it waits, and calls the caller's
//! `check_interrupts` every few milliseconds, so a cancel is served by the thread PostgreSQL
//! expects. If that call does not return (an error unwinds through it), the helpers are told to
//! stop, and they stop within one of their own interrupt ticks; the scope then joins them
//! before the unwind goes on. A task's error stops the other tasks the same way and is returned.
//! Helpers start with every signal blocked, so that the process's signal handlers keep running
//! on the calling thread only. Tasks must not call into PostgreSQL.

use std::any::Any;
use std::panic::{resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

/// How often the waiting thread checks for interrupts.
const WAIT: Duration = Duration::from_millis(5);

/// The unwind payload of a helper told to stop; never seen outside [`run`].
struct Halted;

/// Set by [`halt_all`]: every helper of the process stops, at once and for good.
static HALT_ALL: AtomicBool = AtomicBool::new(false);
/// Helpers that may still read their run's tasks (inside [`helper`]'s body).
static BUSY: AtomicUsize = AtomicUsize::new(0);

/// Stops every helper of the process and returns once none reads its run's data any more. For
/// a process that exits from inside `check_interrupts` (a PostgreSQL FATAL calls `exit` there,
/// without unwinding): its exit handlers free what the tasks read, so the helpers must be
/// stopped first. No later run gets a helper.
pub fn halt_all() {
    HALT_ALL.store(true, Ordering::SeqCst);
    while BUSY.load(Ordering::SeqCst) > 0 {
        std::thread::sleep(Duration::from_micros(200));
    }
}

fn halted(stop: &AtomicBool) -> bool {
    stop.load(Ordering::Relaxed) || HALT_ALL.load(Ordering::SeqCst)
}

/// Runs `task(state, i, check)` for every `i` in `0..tasks` and returns the results in task
/// order, or the first error. With `threads` <= 1 (or a single task) everything runs on the
/// calling thread, with `check_interrupts` as each task's `check`; otherwise on `threads`
/// helper threads, each with its own `state` from `init`, taking tasks in order (on as many as
/// the system lets start, on the calling thread if none). `done(n)` is called on the calling
/// thread each time `n` tasks have finished.
pub fn run<S, T, E>(
    threads: usize,
    tasks: usize,
    check_interrupts: &mut dyn FnMut(),
    done: &mut dyn FnMut(usize),
    init: impl Fn() -> S + Sync,
    task: impl Fn(&mut S, usize, &mut dyn FnMut()) -> Result<T, E> + Sync,
) -> Result<Vec<T>, E>
where
    T: Send,
    E: Send,
{
    let threads = threads.min(tasks);
    let on_calling_thread = |check_interrupts: &mut dyn FnMut(), done: &mut dyn FnMut(usize)| {
        let mut state = init();
        (0..tasks)
            .map(|i| {
                let result = task(&mut state, i, check_interrupts);
                done(i + 1);
                result
            })
            .collect()
    };
    if threads <= 1 {
        return on_calling_thread(check_interrupts, done);
    }
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let (sender, receiver) = mpsc::channel::<(usize, Result<T, E>)>();
    let mut results: Vec<Option<T>> = (0..tasks).map(|_| None).collect();
    let mut started = 0;
    let outcome: Result<(), E> = std::thread::scope(|scope| {
        // told to stop on every way out of this closure, an unwind from check_interrupts too
        let _stop_on_exit = StopOnDrop(&stop);
        let (next, stop, init, task) = (&next, &stop, &init, &task);
        with_signals_blocked(|| {
            for _ in 0..threads {
                let sender = sender.clone();
                let helper = move || helper(next, stop, tasks, init, task, sender);
                // a thread the system refuses (its limit on processes, no memory for a stack)
                // is not an error: the helpers started do the work
                if refuse_threads()
                    || HALT_ALL.load(Ordering::SeqCst)
                    || std::thread::Builder::new()
                        .spawn_scoped(scope, helper)
                        .is_err()
                {
                    break;
                }
                started += 1;
            }
        });
        drop(sender);
        if started == 0 {
            return Ok(());
        }
        let mut received = 0;
        while received < tasks {
            match receiver.recv_timeout(WAIT) {
                Ok((i, Ok(value))) => {
                    results[i] = Some(value);
                    received += 1;
                    done(received);
                }
                Ok((_, Err(e))) => return Err(e),
                Err(mpsc::RecvTimeoutError::Timeout) => check_interrupts(),
                // every helper has ended: they send every task they take, so only a helper
                // that stopped early ends before all are received, and none stops unasked
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        Ok(())
    });
    outcome?;
    if started == 0 {
        return on_calling_thread(check_interrupts, done);
    }
    Ok(results
        .into_iter()
        .map(|r| r.expect("every task sent its result"))
        .collect())
}

/// A helper thread: takes tasks until none is left or it is told to stop.
fn helper<S, T, E>(
    next: &AtomicUsize,
    stop: &AtomicBool,
    tasks: usize,
    init: &(impl Fn() -> S + Sync),
    task: &(impl Fn(&mut S, usize, &mut dyn FnMut()) -> Result<T, E> + Sync),
    sender: mpsc::Sender<(usize, Result<T, E>)>,
) {
    let mut check = || {
        if halted(stop) {
            // (resume_unwind runs no panic hook: a stop is not an error to report)
            resume_unwind(Box::new(Halted));
        }
    };
    // counted busy before it looks at HALT_ALL (both SeqCst): halt_all either waits for it or
    // is seen by it before it reads anything
    BUSY.fetch_add(1, Ordering::SeqCst);
    let ran = std::panic::catch_unwind(AssertUnwindSafe(|| {
        let mut state = init();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= tasks || halted(stop) {
                return;
            }
            let result = task(&mut state, i, &mut check);
            let failed = result.is_err();
            if sender.send((i, result)).is_err() || failed {
                stop.store(true, Ordering::Relaxed);
                return;
            }
        }
    }));
    BUSY.fetch_sub(1, Ordering::SeqCst);
    if let Err(payload) = ran {
        stop.store(true, Ordering::Relaxed);
        if !is_halt(&*payload) {
            // a bug: let the scope re-raise it on the calling thread
            resume_unwind(payload);
        }
    }
}

#[cfg(test)]
thread_local! {
    /// Makes the threads a test's `run` starts fail to start, as the system may refuse them.
    static REFUSE_THREADS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn refuse_threads() -> bool {
    #[cfg(test)]
    return REFUSE_THREADS.with(std::cell::Cell::get);
    #[cfg(not(test))]
    false
}

fn is_halt(payload: &(dyn Any + Send)) -> bool {
    payload.is::<Halted>()
}

/// Sets the flag when dropped.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Runs `f` with every signal blocked on the calling thread (threads it starts inherit the
/// mask), and restores the mask after.
fn with_signals_blocked(f: impl FnOnce()) {
    #[cfg(unix)]
    {
        // SAFETY: sigfillset fills a set we own; pthread_sigmask changes only this thread's
        // mask, and the old mask is put back below.
        let old = unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut old);
            old
        };
        let _restore = Restore(old);
        f();
        struct Restore(libc::sigset_t);
        impl Drop for Restore {
            fn drop(&mut self) {
                // SAFETY: puts back the mask this thread had.
                unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut()) };
            }
        }
    }
    #[cfg(not(unix))]
    f();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_in_task_order_on_any_number_of_threads() {
        for threads in [0, 1, 2, 5] {
            let mut finished = Vec::new();
            let out: Result<Vec<usize>, ()> = run(
                threads,
                37,
                &mut || {},
                &mut |n| finished.push(n),
                || 0usize,
                |seen, i, _| {
                    *seen += 1;
                    Ok(i * i)
                },
            );
            assert_eq!(out.unwrap(), (0..37).map(|i| i * i).collect::<Vec<_>>());
            assert_eq!(
                finished,
                (1..=37).collect::<Vec<_>>(),
                "on {threads} threads"
            );
        }
    }

    #[test]
    fn runs_on_the_calling_thread_where_no_thread_can_start() {
        REFUSE_THREADS.with(|refuse| refuse.set(true));
        let caller = std::thread::current().id();
        let out: Result<Vec<bool>, ()> = run(
            4,
            37,
            &mut || {},
            &mut |_| {},
            || (),
            |_, _, _| Ok(std::thread::current().id() == caller),
        );
        REFUSE_THREADS.with(|refuse| refuse.set(false));
        assert_eq!(out.unwrap(), vec![true; 37]);
    }

    /// As a PostgreSQL FATAL exits from inside `check_interrupts`: once `halt_all` returns, no
    /// helper is inside a task. (In a child process: the halt is for good.)
    #[cfg(target_os = "linux")]
    #[test]
    fn halt_all_returns_once_no_helper_is_in_a_task() {
        struct Inside<'a>(&'a AtomicUsize);
        impl Drop for Inside<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::SeqCst);
            }
        }
        let in_child = || {
            let inside = AtomicUsize::new(0);
            let mut calls = 0;
            let _: Result<Vec<()>, ()> = run(
                2,
                1000,
                &mut || {
                    calls += 1;
                    if calls == 3 {
                        halt_all();
                        let none = inside.load(Ordering::SeqCst) == 0;
                        // SAFETY: ends the child process, as the FATAL's exit would.
                        unsafe { libc::_exit(if none { 0 } else { 1 }) };
                    }
                },
                &mut |_| {},
                || (),
                |_, _, check| {
                    inside.fetch_add(1, Ordering::SeqCst);
                    let _inside = Inside(&inside);
                    loop {
                        check();
                        std::thread::sleep(Duration::from_micros(50));
                    }
                },
            );
        };
        // (in a process of its own, this test alone: the halt is for good, and a fork of the
        // multi-threaded test process could inherit other tests' busy helpers or locks)
        if std::env::var_os(HALT_CHILD).is_some() {
            in_child();
            std::process::exit(2);
        }
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "core::parallel::tests::halt_all_returns_once_no_helper_is_in_a_task",
                "--exact",
                "--test-threads=1",
            ])
            .env(HALT_CHILD, "1")
            .status()
            .unwrap();
        assert_eq!(status.code(), Some(0));
    }

    /// Set in the process `halt_all_returns_once_no_helper_is_in_a_task` runs its halt in.
    const HALT_CHILD: &str = "PG_MINHASH_TEST_HALT_CHILD";

    #[test]
    fn an_error_stops_the_run() {
        let out: Result<Vec<()>, usize> = run(
            3,
            1000,
            &mut || {},
            &mut |_| {},
            || (),
            |_, i, check| {
                check();
                if i == 7 {
                    Err(i)
                } else {
                    std::thread::sleep(Duration::from_micros(100));
                    Ok(())
                }
            },
        );
        assert_eq!(out.unwrap_err(), 7);
    }

    #[test]
    fn an_unwinding_interrupt_check_stops_the_helpers() {
        let started = AtomicUsize::new(0);
        let mut calls = 0;
        let caught = std::panic::catch_unwind(AssertUnwindSafe(|| {
            let _: Result<Vec<()>, ()> = run(
                2,
                1_000_000,
                &mut || {
                    calls += 1;
                    if calls == 3 {
                        resume_unwind(Box::new("cancelled"));
                    }
                },
                &mut |_| {},
                || (),
                |_, _, check| {
                    started.fetch_add(1, Ordering::Relaxed);
                    loop {
                        check();
                        std::thread::sleep(Duration::from_micros(50));
                    }
                },
            );
        }));
        let payload = caught.unwrap_err();
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"cancelled"));
        // each helper took one task and stopped inside it
        assert_eq!(started.load(Ordering::Relaxed), 2);
    }
}
