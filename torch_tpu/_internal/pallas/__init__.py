"""`tpu_torch_pallas`: the custom-kernel registry Inductor's Pallas code generator calls."""
