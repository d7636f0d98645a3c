/* text_escape.c - see text_escape.h. */
#include "text_escape.h"

#include <string.h>

/* The length of the control character at text (1 for C0 and DEL, 2 for a
 * C1 control in UTF-8), or 0. */
static size_t control_at(const unsigned char *text)
{
    if (*text < 0x20 || *text == 0x7f)
        return 1;
    if (*text == 0xc2 && text[1] >= 0x80 && text[1] <= 0x9f)
        return 2;
    return 0;
}

int text_needs_escape(const char *text)
{
    for (const unsigned char *c = (const unsigned char *)text; *c; c++)
        if (control_at(c))
            return 1;
    return 0;
}

/* The escaped form of the character at text into piece (at most 9 bytes
 * with the NUL); *consumed gets the bytes of text it stands for. */
static size_t escape_one(const unsigned char *text, int escaping, char *piece, size_t *consumed)
{
    static const char hex[] = "0123456789abcdef";
    size_t control = control_at(text);
    *consumed = control ? control : 1;
    size_t n = 0;
    for (size_t i = 0; i < control; i++) {
        piece[n++] = '\\';
        piece[n++] = 'x';
        piece[n++] = hex[text[i] >> 4];
        piece[n++] = hex[text[i] & 15];
    }
    if (!control) {
        if (escaping && *text == '\\')
            piece[n++] = '\\';
        piece[n++] = (char)*text;
    }
    piece[n] = '\0';
    return n;
}

int text_put_width(FILE *out, const char *text, int width)
{
    if (!text_needs_escape(text)) {
        int length = (int)strnlen(text, (size_t)width);
        fwrite(text, 1, (size_t)length, out);
        return length;
    }
    int written = 0;
    const unsigned char *c = (const unsigned char *)text;
    while (*c) {
        char piece[9];
        size_t consumed, n = escape_one(c, 1, piece, &consumed);
        if (written + (int)n > width)
            break;
        fwrite(piece, 1, n, out);
        written += (int)n;
        c += consumed;
    }
    return written;
}

int text_escaped_width(const char *text)
{
    if (!text_needs_escape(text))
        return (int)strlen(text);
    int width = 0;
    for (const unsigned char *c = (const unsigned char *)text; *c;) {
        char piece[9];
        size_t consumed;
        width += (int)escape_one(c, 1, piece, &consumed);
        c += consumed;
    }
    return width;
}

int text_put(FILE *out, const char *text)
{
    return text_put_width(out, text, 1 << 30);
}

char *text_escape(const char *text, char *buffer, size_t size)
{
    if (!size)
        return buffer;
    int escaping = text_needs_escape(text);
    size_t used = 0;
    for (const unsigned char *c = (const unsigned char *)text; *c;) {
        char piece[9];
        size_t consumed, n = escape_one(c, escaping, piece, &consumed);
        if (used + n >= size)
            break;
        memcpy(buffer + used, piece, n);
        used += n;
        c += consumed;
    }
    buffer[used] = '\0';
    return buffer;
}
