/* progress.h - a progress bar on stderr, drawn only when stderr is a
 * terminal: a pipe or a log file never sees a byte of it. */
#ifndef TOOLS_PROGRESS_H
#define TOOLS_PROGRESS_H

#include <stdint.h>

typedef struct tools_progress {
    int on;                 /* stderr is a tty */
    char label[64];
    uint64_t total, done;   /* bytes */
    double t0, last;        /* start, last redraw (seconds, monotonic) */
} tools_progress;

/* Starts a bar for 'total' bytes labelled 'label' (cut to 63 bytes). */
void tools__progress_start(tools_progress *p, const char *label, uint64_t total);
/* Sets the bytes done; redraws at most 10 times a second and at the end. */
void tools__progress_update(tools_progress *p, uint64_t done);
/* Ends the bar: on success it stays as a finished line, otherwise the line
 * is erased so an error message starts clean. */
void tools__progress_end(tools_progress *p, int ok);

#endif
