// Splicing a foreign StableHLO module (a JAX export) into a program, as text:
// its functions join the program renamed and private, once per module, and
// `main` calls its entry.
#include <string>

#include "hlo/builder.h"
#include "hlo/foreign_module.h"
#include "test_runner.h"

using namespace torch_tpu::hlo;  // the module under test

namespace {

// As jax.jit(f).lower(...).as_text(debug_info=False) prints it.
const char* kJaxModule = R"(module @jit_f attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4x8xf32>, %arg1: tensor<i64> {mhlo.layout_mode = "default"}) -> (tensor<4x8xf32> {jax.result_info = "result[0]"}, tensor<f32> {jax.result_info = "result[1]"}) {
    %0 = call @helper(%arg0) : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %1 = stablehlo.custom_call @main_kernel(%0) : (tensor<4x8xf32>) -> tensor<f32>
    return %0, %1 : tensor<4x8xf32>, tensor<f32>
  }
  func.func private @helper(%arg0: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %0 = stablehlo.add %arg0, %arg0 : tensor<4x8xf32>
    return %0 : tensor<4x8xf32>
  }
}
)";

}  // namespace

TEST(hlo, foreign_module_reads_its_entry_signature_and_functions) {
  ForeignModule m = parse_foreign_module(kJaxModule);
  CHECK_EQ(m.args.size(), size_t{2});
  CHECK_EQ(m.args[1].str(), std::string("tensor<i64>"));
  CHECK_EQ(m.results.size(), size_t{2});
  CHECK_EQ(m.results[0].str(), std::string("tensor<4x8xf32>"));
  CHECK_EQ(m.names.size(), size_t{2});
  CHECK_EQ(parse_tensor_type("tensor<2x3xbf16>").str(), std::string("tensor<2x3xbf16>"));
}

TEST(hlo, foreign_module_functions_are_renamed_and_private) {
  std::string text = renamed_functions(parse_foreign_module(kJaxModule), "foreign0_");
  CHECK(text.find("func.func private @foreign0_main(") != std::string::npos);
  CHECK(text.find("call @foreign0_helper(") != std::string::npos);
  CHECK(text.find("func.func private @foreign0_helper(") != std::string::npos);
  // A custom_call target is a kernel's name, not one of the module's symbols.
  CHECK(text.find("custom_call @main_kernel(") != std::string::npos);
  CHECK(text.find("public") == std::string::npos);
}

TEST(hlo, program_calls_a_spliced_module_once_per_module_text) {
  Builder b;
  Value x = b.parameter({ElementType::F32, {4, 8}});
  Value i = b.parameter({ElementType::S64, {}});
  std::vector<Value> first = b.call_foreign(kJaxModule, {x, i});
  std::vector<Value> second = b.call_foreign(kJaxModule, {first[0], i});
  CHECK_EQ(second[1].type.str(), std::string("tensor<f32>"));
  std::string program = b.finish({second[0], second[1]});
  CHECK(program.find("%0:2 = \"func.call\"(%arg0, %arg1) {callee = @foreign0_main}") != std::string::npos);
  CHECK(program.find("\"func.call\"(%0#0, %arg1) {callee = @foreign0_main}") != std::string::npos);
  const size_t defined = program.find("func.func private @foreign0_main(");
  CHECK(defined != std::string::npos);
  CHECK(program.find("func.func private @foreign0_main(", defined + 1) == std::string::npos);
}

TEST(hlo, foreign_module_rejects_what_it_cannot_splice) {
  Builder b;
  Value x = b.parameter({ElementType::F32, {4, 4}});
  CHECK_THROWS(b.call_foreign(kJaxModule, {x, x}), std::invalid_argument, "argument 0 is tensor<4x8xf32>");
  CHECK_THROWS(parse_foreign_module("module {\n  sdy.mesh @mesh = <[\"x\"=2]>\n}"), std::invalid_argument,
               "not a function");
  CHECK_THROWS(parse_tensor_type("tensor<?x4xf32>"), std::invalid_argument, "dynamic shape");
  CHECK_THROWS(parse_foreign_module("module {\n  func.func public @main(%arg0: !stablehlo.token) {\n  }\n}"),
               std::invalid_argument, "not a tensor");
  // A failed call leaves the program as it was.
  CHECK(b.finish({x}).find("foreign") == std::string::npos);
}
