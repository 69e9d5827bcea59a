/*
 * Building short texts without stdio — messages and file paths — for code
 * that may run inside malloc or a signal handler.
 */
#ifndef TIMECTL_TEXT_H
#define TIMECTL_TEXT_H

#include <stddef.h>

struct tc_text {
    char text[512];
    size_t length;       /* text[length] is always NUL */
};

static inline void tc_text_append(struct tc_text *text, const char *s) {
    while (*s && text->length < sizeof(text->text) - 1) text->text[text->length++] = *s++;
    text->text[text->length] = 0;
}

static inline void tc_text_append_number(struct tc_text *text, long value) {
    char digits[24];
    int n = 0;
    unsigned long v = value < 0 ? -(unsigned long)value : (unsigned long)value;
    do digits[n++] = (char)('0' + v % 10); while ((v /= 10) && n < 23);
    if (value < 0) tc_text_append(text, "-");
    while (n > 0) {
        char c[2] = {digits[--n], 0};
        tc_text_append(text, c);
    }
}

#endif
