/* Preloaded into llama.cpp's llama-embedding when making goldens: llama.cpp's
 * logger (common/log.cpp) writes from a worker thread that is never joined, so the
 * last lines of stdout are often lost when main returns. This destructor runs at
 * exit, while the worker still lives, and gives it time to write its queue. */
#include <unistd.h>
__attribute__((destructor)) static void llamars_wait_for_log(void) { usleep(300000); }
