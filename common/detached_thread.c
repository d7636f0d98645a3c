/* detached_thread.c - see detached_thread.h. */
#include "detached_thread.h"

#include <pthread.h>
#include <signal.h>

int detached_thread_start(void *(*run)(void *), void *argument)
{
    sigset_t all, old;
    sigfillset(&all);
    /* a new thread inherits its creator's mask */
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t attributes;
    pthread_t thread;
    int started = 0;
    if (pthread_attr_init(&attributes) == 0) {
        started = pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED) == 0 &&
                  pthread_create(&thread, &attributes, run, argument) == 0;
        pthread_attr_destroy(&attributes);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return started ? 0 : -1;
}
