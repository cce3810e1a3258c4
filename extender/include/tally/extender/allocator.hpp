#pragma once
// glibc malloc settings for a server whose requests allocate and free buffers
// of a few hundred KiB each (5,000 node names in, a response as large out):
// without them every such buffer is an mmap/munmap pair or trims the heap, and
// the next request page-faults the memory back in.

#include <malloc.h>

namespace tally::extender {

inline void tuneAllocatorForLargeRequests() {
  mallopt(M_MMAP_THRESHOLD, 64 << 20);   // serve buffers below 64 MiB from the heap
  mallopt(M_TRIM_THRESHOLD, 256 << 20);  // and keep up to 256 MiB of freed top for reuse
  mallopt(M_MXFAST, 0);  // no fastbins: a large request would first consolidate them (tcache still serves small frees)
}

}  // namespace tally::extender
