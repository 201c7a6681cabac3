"""ResNet-18 trained in channels_last on a synthetic image set, then evaluated
on held-out images of the same set.

    python examples/resnet/train.py                 # on tpu, tiny default size
    python examples/resnet/train.py --device cpu    # the same run on native CPU
    python examples/resnet/train.py --width 64 --image-size 32 --batch-size 64   # the full CIFAR-size ResNet-18

The network is written here in plain torch.nn (torchvision's PyPI wheels do
not import next to this project's CPU torch): torchvision's resnet18 layout,
[2, 2, 2, 2] BasicBlocks at widths w, 2w, 4w, 8w, with the CIFAR stem (one 3x3
convolution, no max-pool) since the images are small. --width 64 is the
standard ResNet-18 (11M parameters); the default is narrower so it trains in
a minute here.

The images: --classes fixed random colour patterns (smooth, low-frequency),
each image one pattern, shifted at random, plus noise. Everything is drawn on
CPU from the seed, so a tpu run and a cpu run see the same images.
"""

import argparse
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import common  # noqa: E402

# ----------------------------------------------------------------------------
# Model


class BasicBlock(nn.Module):
    def __init__(self, inplanes, planes, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(
                nn.Conv2d(inplanes, planes, 1, stride=stride, bias=False), nn.BatchNorm2d(planes)
            )

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        identity = x if self.downsample is None else self.downsample(x)
        return F.relu(out + identity)


class ResNet18(nn.Module):
    def __init__(self, num_classes, width=64):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        layers, inplanes = [], width
        for i, planes in enumerate((width, 2 * width, 4 * width, 8 * width)):
            stride = 1 if i == 0 else 2
            layers.append(nn.Sequential(BasicBlock(inplanes, planes, stride), BasicBlock(planes, planes, 1)))
            inplanes = planes
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.fc = nn.Linear(8 * width, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        # torchvision's zero_init_residual: each block starts as the identity.
        for m in self.modules():
            if isinstance(m, BasicBlock):
                nn.init.zeros_(m.bn2.weight)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


# ----------------------------------------------------------------------------
# Data


class SyntheticImages:
    """`classes` smooth random colour patterns; a sample is one of them,
    rolled by a random shift, plus Gaussian noise."""

    def __init__(self, classes, size, seed):
        g = torch.Generator().manual_seed(seed)
        coarse = torch.randn(classes, 3, 4, 4, generator=g)
        self.templates = F.interpolate(coarse, size=(size, size), mode="bilinear", align_corners=False)
        self.size = size

    def batch(self, n, generator):
        labels = torch.randint(len(self.templates), (n,), generator=generator)
        shifts = torch.randint(self.size, (n, 2), generator=generator).tolist()
        images = torch.stack([t.roll(s, dims=(1, 2)) for t, s in zip(self.templates[labels], shifts)])
        return images + 0.5 * torch.randn(images.shape, generator=generator), labels


# ----------------------------------------------------------------------------
# Training


def to_device(images, labels, device):
    return images.to(device, memory_format=torch.channels_last), labels.to(device)


def run(args, progress=False):
    """Trains, then evaluates. Returns a dict: losses (one float per step),
    logits (the eval batch's, on CPU), accuracy, images_per_s, params."""
    data = SyntheticImages(args.classes, args.image_size, args.seed)
    model = common.seeded(args.seed, lambda: ResNet18(args.classes, args.width))
    model = model.to(args.device, memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
    generator = torch.Generator().manual_seed(args.seed + 1)
    model.train()

    def step(i):
        x, y = to_device(*data.batch(args.batch_size, generator), args.device)
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss

    losses, images_per_s = common.train_loop(
        step, args.steps, args.batch_size, "img/s", args.device, progress=progress, log_interval=args.log_interval
    )
    model.eval()
    x, y = to_device(*data.batch(args.eval_size, torch.Generator().manual_seed(args.seed + 2)), args.device)
    with torch.no_grad():
        logits = model(x).cpu()
    accuracy = (logits.argmax(1) == y.cpu()).float().mean().item()
    params = sum(p.numel() for p in model.parameters())
    return dict(losses=losses, logits=logits, accuracy=accuracy, images_per_s=images_per_s, params=params)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common.add_device_flags(p, steps=100)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--width", type=int, default=16, help="first stage's channels (64: the standard ResNet-18)")
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--eval-size", type=int, default=64)
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    out = common.run_and_report(args, run, f"resnet-18 (width {args.width})")
    print(f"training: {out['images_per_s']:,.1f} images/s (compilation included)")


if __name__ == "__main__":
    main()
