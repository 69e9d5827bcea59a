# Three threads sleep 1 s each and append their names; exits 0 only if "a" came first.
# A timing bug a seed can find and reproduce (issue 30).
import sys, threading, time

order = []
lock = threading.Lock()

def sleeper(name):
    time.sleep(1)
    with lock:
        order.append(name)

threads = [threading.Thread(target=sleeper, args=(name,)) for name in "abc"]
for thread in threads: thread.start()
for thread in threads: thread.join()
print("".join(order))
sys.exit(0 if order[0] == "a" else 1)
