/* progress.c - the progress bar (see progress.h). */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "progress.h"
#include "util.h"         /* tools__now_s */

#define BAR_WIDTH 30

static void
human(char *buf, size_t len, double bytes)
{
    static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;

    while (bytes >= 1024 && u < 4) {
        bytes /= 1024;
        u++;
    }
    snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", bytes, unit[u]);
}

static void
draw(tools_progress *p, double t)
{
    double frac = p->total ? (double)p->done / (double)p->total : 1.0;
    int fill = (int)(frac * BAR_WIDTH);
    char bar[BAR_WIDTH + 1], d[32], tot[32], rate[32];

    if (frac > 1)
        frac = 1, fill = BAR_WIDTH;
    memset(bar, '#', (size_t)fill);
    memset(bar + fill, '.', (size_t)(BAR_WIDTH - fill));
    bar[BAR_WIDTH] = '\0';
    human(d, sizeof d, (double)p->done);
    human(tot, sizeof tot, (double)p->total);
    human(rate, sizeof rate, t > p->t0 ? (double)p->done / (t - p->t0) : 0);
    /* \r then erase-line: the bar is one line, redrawn in place */
    fprintf(stderr, "\r\033[K%s [%s] %3d%%  %s / %s  %s/s", p->label, bar,
            (int)(frac * 100), d, tot, rate);
    fflush(stderr);
    p->last = t;
}

void
tools__progress_start(tools_progress *p, const char *label, uint64_t total)
{
    memset(p, 0, sizeof *p);
    p->on = isatty(STDERR_FILENO);
    snprintf(p->label, sizeof p->label, "%s", label ? label : "");
    p->total = total;
    p->t0 = tools__now_s();
    if (p->on)
        draw(p, p->t0);
}

void
tools__progress_update(tools_progress *p, uint64_t done)
{
    double t;

    p->done = done;
    if (!p->on)
        return;
    t = tools__now_s();
    if (t - p->last >= 0.1 || done >= p->total)
        draw(p, t);
}

void
tools__progress_end(tools_progress *p, int ok)
{
    if (!p->on)
        return;
    if (ok) {
        p->done = p->total;
        draw(p, tools__now_s());
        fputc('\n', stderr);
    } else {
        fputs("\r\033[K", stderr);
    }
    fflush(stderr);
    p->on = 0;
}
