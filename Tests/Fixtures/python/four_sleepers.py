# Four threads, each sleeping its own interval ten times, printing its number, the
# round, time.monotonic() and time.time() after each sleep (issue 30), a line in one
# write (print writes each of its arguments apart, so other threads' lines could land
# in the middle of one).
import sys, threading, time

def worker(number, interval):
    for round in range(10):
        time.sleep(interval)
        sys.stdout.write(f"{number} {round} {time.monotonic()!r} {time.time()!r}\n")
        sys.stdout.flush()

threads = [threading.Thread(target=worker, args=(number, interval))
           for number, interval in enumerate([0.1, 0.2, 0.3, 0.25])]
for thread in threads: thread.start()
for thread in threads: thread.join()
