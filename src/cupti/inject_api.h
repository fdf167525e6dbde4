/* The C entry points of libgearshift_inject.so that a program (or Python through ctypes) may call; the driver
 * and NVTX call InitializeInjection / InitializeInjectionNvtx2 themselves. Plain C so that ctypes users can
 * read it. */
#ifndef GEARSHIFT_CUPTI_INJECT_API_H
#define GEARSHIFT_CUPTI_INJECT_API_H

#ifdef __cplusplus
extern "C" {
#endif

/* Results of gearshift_feed_attach. */
enum {
  GEARSHIFT_FEED_ATTACHED = 0,
  GEARSHIFT_FEED_BAD_FD = 1,          /* fd is not an open pipe (or socket) */
  GEARSHIFT_FEED_ALREADY_RUNNING = 2, /* the tracer or a feed already runs in this process (e.g. the driver
                                         injected this library through CUDA_INJECTION64_PATH) */
  GEARSHIFT_FEED_NO_CUPTI = 3,        /* CUPTI not found, or too old */
  GEARSHIFT_FEED_OTHER_SUBSCRIBER = 4, /* another CUPTI client (torch.profiler, Nsight) holds CUPTI */
  GEARSHIFT_FEED_CUPTI_FAILED = 5,    /* CUPTI refused a call (subscribe, activity kinds, callbacks) */
  GEARSHIFT_FEED_FORKED = 6           /* called in a forked child of the process whose feed runs */
};

/* Starts the runtime launch feed (feed-only: no trace file) on an already running CUDA process: launches
 * from now on and their kernels' completions are written to `fd` (protocol: docs/runtime.md). The library
 * writes to its own duplicate of `fd`; the caller keeps, and eventually closes, its own. Returns
 * GEARSHIFT_FEED_ATTACHED, or another code of the enum above after one warning line on stderr (the reason
 * is then also in gearshift_feed_error()). The program runs on either way. */
int gearshift_feed_attach(int fd);

/* Stops a feed started by gearshift_feed_attach: CUPTI flushed, the last lines written, the duplicate fd
 * closed (the reader then sees end of file once the caller closes its end too), CUPTI unsubscribed.
 * Returns 1 when a feed was stopped, 0 when none was attached. A later gearshift_feed_attach may start
 * a new one. */
int gearshift_feed_detach(void);

/* The reason of the last refused gearshift_feed_attach ("" after a successful one). The text stays valid
 * until the next attach. */
const char* gearshift_feed_error(void);

/* Forces a CUPTI flush of the running trace; 1 when one runs. */
int gearshift_trace_flush(void);

/* Ends the trace file now (the program runs on untraced); 1 when a trace was running. */
int gearshift_trace_stop(void);

#ifdef __cplusplus
}
#endif

#endif
