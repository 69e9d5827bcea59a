# Two threads take two locks in opposite orders: a deadlock.
import threading, time

first, second = threading.Lock(), threading.Lock()

def take(one, other):
    with one:
        time.sleep(0.1)
        with other:
            pass

threads = [threading.Thread(target=take, args=(first, second)), threading.Thread(target=take, args=(second, first))]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print("not deadlocked")
