/*
 * detached_thread.h - a thread that runs one function and ends on its own,
 * started with every signal blocked.
 *
 * Why blocked: memslope's main thread takes its signals itself, record's
 * with sigtimedwait (SIGCHLD, SIGINT, SIGTERM, the doorbell), perf's to
 * relay them, and may not have blocked them yet when such a thread starts
 * (record publishes its trace during the launch). A thread with them open
 * would take them meanwhile: SIGINT or SIGTERM would kill memslope with the
 * default action, a SIGCHLD or a doorbell would be lost.
 */
#ifndef MEMSLOPE_DETACHED_THREAD_H
#define MEMSLOPE_DETACHED_THREAD_H

/* Starts run(argument) in a detached thread with every signal blocked; the
 * caller's own mask is left as it was. 0, or -1 when no thread started. */
int detached_thread_start(void *(*run)(void *), void *argument);

#endif
