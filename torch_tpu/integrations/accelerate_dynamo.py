"""accelerate's torch.compile backends know "tpu".

accelerate (1.15) keeps the torch.compile backends it accepts in the enum
`DynamoBackend` (inductor, aot_eager, ..., hpu_backend, neuron) and
`TorchDynamoPlugin` converts the name it gets through that enum, so
`TrainingArguments(torch_compile=True, torch_compile_backend="tpu")` fails
with `'TPU' is not a valid DynamoBackend` before training starts. Here the
enum gets a TPU member, as its other device backends (HPU_BACKEND, NEURON)
are members; accelerate then calls `torch.compile(model, backend="tpu")`.
(The default backend, inductor, already compiles tpu models with the tpu
backend: torch_tpu.compile routes a graph by its inputs' device.)
"""


def _add_tpu_backend(dataclasses):
    backends = dataclasses.DynamoBackend
    if "TPU" in backends.__members__:
        return
    # An Enum has no public way to grow; this is what EnumType.__new__ does
    # for each member of a str-valued enum.
    member = str.__new__(backends, "TPU")
    member._name_ = "TPU"
    member._value_ = "TPU"
    backends._member_map_["TPU"] = member
    backends._value2member_map_["TPU"] = member
    backends._member_names_.append("TPU")


def install(when_imported):
    when_imported("accelerate.utils.dataclasses", _add_tpu_backend)
