// headscope — NumPy .npy writer (format version 1.0, https://numpy.org/doc/stable/reference/
// generated/numpy.lib.format.html): the magic "\x93NUMPY", version 1.0, a little-endian u16
// header length, an ASCII dict {'descr': '<f4', 'fortran_order': False, 'shape': (...), }
// padded with spaces and '\n' so the data starts at a multiple of 64 bytes, then the raw data.
#pragma once
// The declaration is public (frontends write .npy files): headscope/npy.h.
#include "headscope/npy.h"
