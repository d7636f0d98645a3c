/*
 * report.h - the interface of report/: what the rest of memslope (the
 * command line) uses to read traces and present them. Every other folder
 * includes this header, not the ones it gathers; the headers of report/
 * that it leaves out (attribution.h, growth.h, protobuf.h,
 * html_template.h) are for report/'s own files and the unit tests.
 */
#ifndef MEMSLOPE_REPORT_H
#define MEMSLOPE_REPORT_H

#include "trace_reader.h"  /* a trace file into a trace model */
#include "report_model.h"  /* a trace model into a report; its text and JSON */
#include "formats.h"       /* the formats other tools open: speedscope, pprof, HTML... */
#include "diff.h"          /* two reports side by side (diff, gate --baseline) */
#include "suppressions.h"  /* LeakSanitizer's and Valgrind's suppression files */
#include "site_label.h"    /* one-line names that tell sites apart */
#include "text_escape.h"   /* names from a trace as the text outputs print them */

#endif
