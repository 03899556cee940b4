// The host CPU's two roofline ceilings, measured by two C kernels that the CPU device compiles
// like any other (same compiler, same -march=native, same vector profile):
//   peak:  independent chains of vector FMAs, enough of them to keep every FMA unit busy
//          (a register's lanes x 2 FLOPs per FMA x chains per iteration)
//   triad: a[i] = b[i] + s*c[i] over arrays several times the last-level cache, bytes counted
//          as a kernel's are (each buffer once, as STREAM counts them)
// Each is timed as the best of a few runs on `threads` threads.
#pragma once
#include "engine/device.h"

namespace mg {

DeviceLimits measure_host_limits(int threads);

// The probes' C source, for the tests and for the curious.
std::string peak_probe_source(int lanes, int chains);
std::string triad_probe_source();

} // namespace mg
