/*
 * GLib's timed waits, which it makes with raw futex calls through libc's
 * syscall(): g_cond_wait_until 3 s ahead, then g_async_queue_timeout_pop
 * for 2 s on an empty queue. Prints "NAME RESULT SECONDS", the seconds
 * measured with g_get_monotonic_time().
 */
#include <glib.h>
#include <stdio.h>

int main(void) {
    GMutex mutex;
    GCond condition;
    g_mutex_init(&mutex);
    g_cond_init(&condition);
    gint64 begin = g_get_monotonic_time();
    g_mutex_lock(&mutex);
    gboolean signalled = g_cond_wait_until(&condition, &mutex, begin + 3 * G_TIME_SPAN_SECOND);
    g_mutex_unlock(&mutex);
    gint64 middle = g_get_monotonic_time();
    printf("g_cond_wait_until %d %.6f\n", signalled, (double)(middle - begin) / G_TIME_SPAN_SECOND);
    fflush(stdout);
    GAsyncQueue *queue = g_async_queue_new();
    gpointer item = g_async_queue_timeout_pop(queue, 2 * G_TIME_SPAN_SECOND);
    printf("g_async_queue_timeout_pop %s %.6f\n", item ? "item" : "none",
           (double)(g_get_monotonic_time() - middle) / G_TIME_SPAN_SECOND);
    return 0;
}
