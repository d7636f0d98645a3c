/*
 * wrappers.h - the interface of tracer/wrappers/: the profilers memslope
 * wraps (perf, xctrace) and the conversion of their output. The command
 * line (cli/cmd_perf.c, cli/cmd_instruments.c) includes this header only.
 */
#ifndef MEMSLOPE_WRAPPERS_H
#define MEMSLOPE_WRAPPERS_H

#include "external_tool.h" /* finding, running and waiting for an external profiler */
#include "perf_script.h"   /* `perf script` text to samples, samples to speedscope or collapsed stacks */

#endif
