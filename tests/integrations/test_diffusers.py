"""Diffusers on tpu: a tiny UNet2DModel, UNet2DConditionModel (cross
attention to a text embedding) and AutoencoderKL compute CPU's outputs and
every parameter's gradient, and a 10-step DDPM pipeline samples
CPU's images (its noise drawn from the same CPU generator)."""

import diffusers
import numpy as np
import pytest
import torch


def _unet():
    torch.manual_seed(0)
    return diffusers.UNet2DModel(
        sample_size=8,
        in_channels=3,
        out_channels=3,
        layers_per_block=1,
        block_out_channels=(8, 16),
        down_block_types=("DownBlock2D", "AttnDownBlock2D"),
        up_block_types=("AttnUpBlock2D", "UpBlock2D"),
        norm_num_groups=4,
        attention_head_dim=8,
    )


def _conditional_unet():
    torch.manual_seed(0)
    return diffusers.UNet2DConditionModel(
        sample_size=8,
        in_channels=4,
        out_channels=4,
        layers_per_block=1,
        block_out_channels=(8, 16),
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=16,
        norm_num_groups=4,
        attention_head_dim=4,
    )


def _autoencoder():
    torch.manual_seed(0)
    return diffusers.AutoencoderKL(
        in_channels=3,
        out_channels=3,
        down_block_types=("DownEncoderBlock2D", "DownEncoderBlock2D"),
        up_block_types=("UpDecoderBlock2D", "UpDecoderBlock2D"),
        block_out_channels=(8, 16),
        latent_channels=4,
        norm_num_groups=4,
        layers_per_block=1,
        sample_size=8,
    )


def _images(channels=3):
    return torch.randn(2, channels, 8, 8, generator=torch.Generator().manual_seed(1))


_TIMESTEPS = torch.tensor([10, 500])
_TEXT = torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(2))  # batch, tokens, cross_attention_dim
_MODELS = {  # name: (constructor, forward inputs)
    "UNet2DModel": (_unet, (_images(), _TIMESTEPS)),
    "UNet2DConditionModel": (_conditional_unet, (_images(4), _TIMESTEPS, _TEXT)),
    "AutoencoderKL": (_autoencoder, (_images(),)),
}


def _forward_backward(model, device, *inputs):
    """The output and each parameter's gradient of a squared-output loss."""
    model = model.to(device)
    output = model(*(x.to(device) for x in inputs)).sample
    output.square().mean().backward()
    return output.detach().cpu(), {name: p.grad.cpu() for name, p in model.named_parameters()}


def _assert_same(tpu, cpu):
    torch.testing.assert_close(tpu[0], cpu[0], rtol=1e-4, atol=1e-5)
    assert tpu[1].keys() == cpu[1].keys()
    for name, grad in tpu[1].items():
        torch.testing.assert_close(grad, cpu[1][name], rtol=1e-4, atol=1e-5, msg=name)


@pytest.mark.parametrize("model", list(_MODELS))
def test_forward_and_backward_match_cpu(model):
    make, inputs = _MODELS[model]
    _assert_same(_forward_backward(make(), "tpu", *inputs), _forward_backward(make(), "cpu", *inputs))


def test_autoencoder_latent_distribution_matches_cpu():
    def latents(device):
        with torch.no_grad():
            dist = _autoencoder().to(device).encode(_images().to(device)).latent_dist
        return dist.mean.cpu(), dist.std.cpu()

    torch.testing.assert_close(latents("tpu"), latents("cpu"), rtol=1e-4, atol=1e-5)


def test_ddpm_pipeline_samples_cpu_images():
    def sample(device):
        scheduler = diffusers.DDPMScheduler(num_train_timesteps=100)
        pipeline = diffusers.DDPMPipeline(unet=_unet(), scheduler=scheduler).to(device)
        pipeline.set_progress_bar_config(disable=True)
        # One CPU generator draws the initial noise and each step's noise on
        # both sides (diffusers draws on the generator's device, then moves).
        generator = torch.Generator().manual_seed(3)
        return pipeline(batch_size=2, generator=generator, num_inference_steps=10, output_type="np").images

    tpu, cpu = sample("tpu"), sample("cpu")
    assert tpu.shape == (2, 8, 8, 3)
    np.testing.assert_allclose(tpu, cpu, rtol=1e-4, atol=1e-5)
