"""Custom kernels: JAX and Pallas functions as torch ops on tpu tensors.

    @torch_tpu.pallas.jax_op("mylib::rms_norm")
    def rms_norm(x, w, eps: float):
        return x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + eps) * w

    y = rms_norm(x, w, 1e-6)  # x, w: tpu tensors

The function's StableHLO joins the program being built (docs/custom_kernels.md):
one program in Strict, fused with its neighbours under DeferAndFuse and in
torch.compile graphs. JAX is an optional dependency: `pip install torch_tpu[jax]`;
importing this package does not import it.
"""

from .jax_custom_op import JaxOp, export_stats, interpret_pallas, jax_op, reset_export_stats

__all__ = ["JaxOp", "export_stats", "interpret_pallas", "jax_op", "reset_export_stats"]
