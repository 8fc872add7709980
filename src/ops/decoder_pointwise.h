// Transitional: rms_norm is in ops/norm.h, silu_mul and gelu_tanh in ops/activations.h. Kept only
// until src/models/decoder.cc includes those; remove at merge.
#pragma once
#include "ops/activations.h"
#include "ops/norm.h"
