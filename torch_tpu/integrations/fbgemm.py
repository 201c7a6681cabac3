"""fbgemm_gpu's jagged operators (`fbgemm::asynchronous_complete_cumsum`,
`jagged_to_padded_dense_forward`, `permute_2D_sparse_data` ...) on tpu:
TorchRec's KeyedJaggedTensor, EmbeddingBagCollection and EmbeddingCollection
call them. Each is a lowering (csrc/lower/jagged.cpp) and a row of the op
table (csrc/device/op_table.cpp), registered for the device once
fbgemm_gpu has defined them, that is right after `import fbgemm_gpu`
(`import torchrec` imports it); their meta kernels are fbgemm's own.
"""


def install(when_imported):
    when_imported("fbgemm_gpu", _register_kernels)


def _register_kernels(module):
    from torch_tpu import _C

    _C._register_library_ops("fbgemm")
