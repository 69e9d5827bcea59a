// Rust's std waits with raw futex calls through libc's syscall():
// recv_timeout(3 s), park_timeout(2 s), then Condvar::wait_timeout(1 s).
// Prints "waiting NAME" before each and "NAME SECONDS" after it, the
// seconds read from Instant (CLOCK_MONOTONIC) since the program began.
use std::io::Write;
use std::sync::{mpsc, Condvar, Mutex};
use std::time::{Duration, Instant};

fn say(line: String) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", line).unwrap();
    out.flush().unwrap();
}

fn main() {
    let start = Instant::now();
    let (_sender, receiver) = mpsc::channel::<u32>();
    say("waiting recv_timeout".into());
    let received = receiver.recv_timeout(Duration::from_secs(3));
    say(format!("recv_timeout {:.9} {}", start.elapsed().as_secs_f64(), if received.is_err() { "timeout" } else { "value" }));
    say("waiting park_timeout".into());
    std::thread::park_timeout(Duration::from_secs(2));
    say(format!("park_timeout {:.9}", start.elapsed().as_secs_f64()));
    let pair = (Mutex::new(false), Condvar::new());
    let guard = pair.0.lock().unwrap();
    say("waiting wait_timeout".into());
    let (_guard, result) = pair.1.wait_timeout(guard, Duration::from_secs(1)).unwrap();
    say(format!("wait_timeout {:.9} {}", start.elapsed().as_secs_f64(), if result.timed_out() { "timeout" } else { "woken" }));
}
