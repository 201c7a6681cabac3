#!/usr/bin/env bash
# Compiles (syntax only) every translation unit that includes torch headers
# against another torch's headers, e.g. an unpacked torch 2.11 or 2.12 wheel:
#   pip download --no-deps torch==2.11.0 -d /tmp/t && unzip -q /tmp/t/torch-*.whl 'torch/include/*' -d /tmp/t
#   bash scripts/check_torch_headers.sh /tmp/t/torch/include [FILE.cpp ...]
set -euo pipefail
cd "$(dirname "$0")/.."
include=${1:?usage: check_torch_headers.sh TORCH_INCLUDE_DIR}
pjrt=$(.venv/bin/python -c "import xla_plugins.xla_cpu_pjrt as p, os; print(os.path.join(os.path.dirname(p.__file__), 'include'))")
python_include=$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['include'])")
# The language standard CMakeLists.txt builds with.
std=$(sed -n 's/^set(CMAKE_CXX_STANDARD \([0-9]*\))/\1/p' CMakeLists.txt)
status=0
shopt -s nullglob
# csrc/python/*.cpp include torch's Python binding headers. A list of files
# as arguments after the include dir checks only those.
files=("${@:2}")
[ ${#files[@]} -eq 0 ] && files=(csrc/device/*.cpp csrc/distributed/*.cpp csrc/python/*.cpp)
for f in "${files[@]}"; do
  if ! g++ -std=gnu++"$std" -fsyntax-only -D_GLIBCXX_USE_CXX11_ABI=1 -Icsrc -I"$pjrt" -I"$include" \
       -I"$include/torch/csrc/api/include" -I"$python_include" "$f"; then
    echo "FAILED: $f" >&2
    status=1
  fi
done
[ $status -eq 0 ] && echo "all torch-facing sources compile against $include"
exit $status
