// libstdc++'s counting_semaphore waits with raw futex calls: try_acquire_for
// (3 s) and try_acquire_until (2 s) on a semaphore nobody releases. Prints
// "NAME ACQUIRED SECONDS", the seconds measured with steady_clock.
#include <chrono>
#include <cstdio>
#include <semaphore>

int main() {
    std::counting_semaphore<4> semaphore(0);
    using seconds = std::chrono::duration<double>;
    auto begin = std::chrono::steady_clock::now();
    bool first = semaphore.try_acquire_for(std::chrono::seconds(3));
    auto middle = std::chrono::steady_clock::now();
    std::printf("try_acquire_for %d %.9f\n", first, seconds(middle - begin).count());
    std::fflush(stdout);
    bool second = semaphore.try_acquire_until(std::chrono::steady_clock::now() + std::chrono::seconds(2));
    auto end = std::chrono::steady_clock::now();
    std::printf("try_acquire_until %d %.9f\n", second, seconds(end - middle).count());
    return 0;
}
