# cython: language_level=3, boundscheck=False, wraparound=False
"""fsync several local paths at once, outside the interpreter lock (Cython, POSIX threads).

A commit syncs its file, its data files and their directories together (issued at once, the
syncs share the disk's cache flushes and a journaling file system's commit). Done on a pool of
Python threads, each sync took and gave back the interpreter lock three times (open, fsync,
close) and handed its result back through a future: in the agent, where every thread shares
one CPU, each of those hand-overs is a context switch. Here the calling thread gives the lock up
once, starts a thread per further path, syncs the first path itself and joins them; or, given
work of its own for the meantime (a committer deriving the state its commit leads to), starts a
thread for every path, does that work holding the lock while the disk is busy, and joins them.
import-linter reads no ``.pyx``: this module imports nothing of lakelog.
"""

import os

from libc.errno cimport errno
from libc.stdlib cimport free, malloc
from posix.unistd cimport close, fsync


cdef extern from "<fcntl.h>" nogil:
    int c_open "open"(const char* path, int flags)
    int O_RDONLY
    int O_DIRECTORY
    int O_CLOEXEC


cdef extern from "<sched.h>" nogil:
    int sched_yield()


cdef extern from "<pthread.h>" nogil:
    ctypedef unsigned long pthread_t
    int pthread_create(pthread_t* thread, const void* attributes, void* (*start)(void*) noexcept nogil, void* arg)
    int pthread_join(pthread_t thread, void** result)


ctypedef struct _Job:
    const char* path
    int flags
    int error


cdef void _sync(_Job* job) noexcept nogil:
    cdef int fd = c_open(job.path, job.flags)
    if fd < 0:
        job.error = errno
        return
    job.error = errno if fsync(fd) != 0 else 0
    if close(fd) != 0 and job.error == 0:
        job.error = errno


cdef void* _run(void* job) noexcept nogil:
    _sync(<_Job*>job)
    return NULL


def sync_paths(paths, directories, meanwhile=None):
    """fsync every local path of ``paths`` (files) and ``directories`` at once: the errno of
    each (0 once it is synced, in the order given, files first). Never raises for a path:
    one that cannot be opened or synced has its errno. A thread that cannot be started has
    its path synced by the caller, after the others started.

    ``meanwhile()``: run by the caller, holding the interpreter lock, while the syncs are in
    flight (every path then gets a thread of its own); what it raises is raised once every
    sync finished."""
    encoded = [os.fsencode(p) for p in paths] + [os.fsencode(d) for d in directories]
    cdef Py_ssize_t n = len(encoded), files = len(paths), i
    cdef bint overlapped = meanwhile is not None
    if n == 0:
        if overlapped:
            meanwhile()
        return []
    cdef _Job* jobs = <_Job*>malloc(n * sizeof(_Job))
    cdef pthread_t* threads = <pthread_t*>malloc(n * sizeof(pthread_t))
    cdef char* started = <char*>malloc(n)
    if jobs == NULL or threads == NULL or started == NULL:
        free(jobs)
        free(threads)
        free(started)
        raise MemoryError()
    try:
        for i in range(n):
            jobs[i].path = encoded[i]  # the bytes objects live in ``encoded`` until the end
            jobs[i].flags = O_RDONLY | O_CLOEXEC | (O_DIRECTORY if i >= files else 0)
            jobs[i].error = 0
            started[i] = 0
        failed = None
        if not overlapped:
            with nogil:
                for i in range(1, n):
                    started[i] = pthread_create(&threads[i], NULL, _run, &jobs[i]) == 0
                _sync(&jobs[0])
        else:
            with nogil:
                for i in range(n):
                    started[i] = pthread_create(&threads[i], NULL, _run, &jobs[i]) == 0
                # The threads issue their syncs before ``meanwhile`` takes the CPU: where they
                # share one CPU with the caller (serve.cpu.affinity) they would otherwise start
                # only once it blocks, after ``meanwhile``.
                sched_yield()
            try:
                meanwhile()
            except BaseException as exc:
                failed = exc
            if not started[0]:
                with nogil:
                    _sync(&jobs[0])
        with nogil:
            for i in range(1, n):
                if started[i]:
                    pthread_join(threads[i], NULL)
                else:
                    _sync(&jobs[i])
            if overlapped and started[0]:
                pthread_join(threads[0], NULL)
        if failed is not None:
            raise failed
        return [jobs[i].error for i in range(n)]
    finally:
        free(jobs)
        free(threads)
        free(started)
