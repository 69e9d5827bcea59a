# Busy-waits 5 ms on time.perf_counter() between 100 ms sleeps, printing what it read
# (issue 30: on a frozen clock the busy-wait never ends unless its own clock creeps).
import time

for round in range(5):
    start = time.perf_counter()
    while time.perf_counter() - start < 0.005:
        pass
    time.sleep(0.1)
    print(round, repr(time.monotonic()), repr(time.perf_counter()), flush=True)
