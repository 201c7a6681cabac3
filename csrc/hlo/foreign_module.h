// A StableHLO module made elsewhere (a JAX function's export), read far
// enough to splice its functions into a program the builder makes: their
// names, and its entry function's signature. Knows MLIR text only.
#pragma once

#include <string>
#include <vector>

#include "hlo/builder.h"

namespace torch_tpu::hlo {

struct ForeignModule {
  // The module's functions as written, each a whole `func.func` op.
  std::string functions;
  std::vector<std::string> names;         // every function's symbol name (without @)
  std::vector<TensorType> args, results;  // of its public `main`
};

// Parses `text`, a `module { func.func ... }` whose entry is a public
// function `main` over static-shaped tensors. Throws std::invalid_argument,
// saying what it could not read, for anything else (a token argument, a
// dynamic shape, a module-level op besides functions).
ForeignModule parse_foreign_module(const std::string& text);

// The module's functions with every symbol `@name` renamed `@<prefix>name`
// and every function made private: a program may splice several modules
// (each has a `main`) and keeps one public entry of its own.
std::string renamed_functions(const ForeignModule& module, const std::string& prefix);

// The tensor type a `tensor<4x8xf32>` spells; throws std::invalid_argument.
TensorType parse_tensor_type(const std::string& text);

}  // namespace torch_tpu::hlo
