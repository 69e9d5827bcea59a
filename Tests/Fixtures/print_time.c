/* Prints time(NULL): the smallest program whose clock shows which timeline it runs on (built -static by the containment tests). */
#include <stdio.h>
#include <time.h>

int main(void) {
    printf("%lld\n", (long long)time(NULL));
    return 0;
}
