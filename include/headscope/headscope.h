// headscope — public API. Frontends (CLI, server, Python) include only this header.
#pragma once
#include "headscope/cpu.h"
#include "headscope/error.h"
#include "headscope/model.h"
#include "headscope/tensor.h"
#include "headscope/tokenizer.h"
