"""DDPM on a small diffusers UNet2DModel: trained to predict the noise added
to synthetic images (DDPMScheduler), then sampled with DDPMPipeline.

    python examples/unet/train.py                 # on tpu, tiny default size
    python examples/unet/train.py --device cpu    # the same run on native CPU
    python examples/unet/train.py --steps 2000 --channels 32 --save-samples samples.png

The images: a disc of a random colour at a random place on a dark
background, 16x16, in [-1, 1]. Images, noise and timesteps are drawn on CPU
from the seed, the sampler's noise too (one CPU generator passed to the
pipeline), so a tpu run and a cpu run see the same numbers.
"""

import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import common  # noqa: E402


def discs(n, size, generator):
    """n images [n, 3, size, size] in [-1, 1]: one coloured disc each."""
    centre = torch.rand(n, 2, 1, 1, generator=generator) * size
    radius = (0.15 + 0.2 * torch.rand(n, 1, 1, generator=generator)) * size
    colour = torch.rand(n, 3, 1, 1, generator=generator) * 2 - 1
    ys, xs = torch.meshgrid(torch.arange(size) + 0.5, torch.arange(size) + 0.5, indexing="ij")
    inside = ((ys - centre[:, 0]) ** 2 + (xs - centre[:, 1]) ** 2 <= radius**2).unsqueeze(1)
    return torch.where(inside, colour, torch.full_like(colour, -0.8))


def build_unet(args):
    import diffusers

    c = args.channels
    return diffusers.UNet2DModel(
        sample_size=args.image_size,
        in_channels=3,
        out_channels=3,
        layers_per_block=1,
        block_out_channels=(c, 2 * c),
        down_block_types=("DownBlock2D", "AttnDownBlock2D"),
        up_block_types=("AttnUpBlock2D", "UpBlock2D"),
        norm_num_groups=min(8, c),
        attention_head_dim=8,
    )


def run(args, progress=False):
    """Trains, then samples. Returns a dict: losses (one float per step),
    samples (numpy [n, size, size, 3] in [0, 1]), images_per_s (training),
    sample_images_per_s (sampling, every denoising step counted), params."""
    import diffusers

    model = common.seeded(args.seed, lambda: build_unet(args)).to(args.device)
    scheduler = diffusers.DDPMScheduler(num_train_timesteps=args.train_timesteps)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    generator = torch.Generator().manual_seed(args.seed + 1)
    model.train()

    def step(i):
        clean = discs(args.batch_size, args.image_size, generator)
        noise = torch.randn(clean.shape, generator=generator)
        t = torch.randint(args.train_timesteps, (args.batch_size,), generator=generator)
        noisy = scheduler.add_noise(clean, noise, t)  # on CPU: a few elementwise ops
        pred = model(noisy.to(args.device), t.to(args.device)).sample
        loss = F.mse_loss(pred, noise.to(args.device))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss

    losses, images_per_s = common.train_loop(
        step, args.steps, args.batch_size, "img/s", args.device, progress=progress, log_interval=args.log_interval
    )
    model.eval()
    pipeline = diffusers.DDPMPipeline(unet=model, scheduler=scheduler)
    pipeline.set_progress_bar_config(disable=not progress)
    start = time.perf_counter()
    with torch.no_grad():
        samples = pipeline(
            batch_size=args.samples,
            generator=torch.Generator().manual_seed(args.seed + 2),
            num_inference_steps=args.sample_steps,
            output_type="np",
        ).images
    sample_rate = args.samples * args.sample_steps / max(time.perf_counter() - start, 1e-9)
    params = sum(p.numel() for p in model.parameters())
    return dict(
        losses=losses, samples=samples, images_per_s=images_per_s, sample_images_per_s=sample_rate, params=params
    )


def save_grid(samples, path):
    from PIL import Image

    row = (torch.from_numpy(samples).clamp(0, 1) * 255).round().to(torch.uint8)  # [n, h, w, 3]
    Image.fromarray(torch.cat(list(row), dim=1).numpy()).resize((row.shape[0] * 64, 64), Image.NEAREST).save(path)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common.add_device_flags(p, steps=100)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--image-size", type=int, default=16)
    p.add_argument("--channels", type=int, default=16, help="the first block's channels (the second has twice)")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--train-timesteps", type=int, default=1000)
    p.add_argument("--sample-steps", type=int, default=25, help="denoising steps when sampling")
    p.add_argument("--samples", type=int, default=4, help="images to sample")
    p.add_argument("--save-samples", metavar="PATH", help="write the samples side by side as a PNG")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    out = common.run_and_report(args, run, "unet")
    print(f"training: {out['images_per_s']:,.1f} images/s (compilation included)")
    print(
        f"sampling: {out['sample_images_per_s']:,.1f} image-steps/s ({args.samples} images x {args.sample_steps} steps)"
    )
    if args.save_samples:
        save_grid(out["samples"], args.save_samples)
        print(f"samples: {args.save_samples}")


if __name__ == "__main__":
    main()
