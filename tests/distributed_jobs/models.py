"""Small models the sharding and checkpoint jobs share."""

import torch
import torch.nn as nn


class MLP(nn.Module):
    def __init__(self, dim=16, hidden=32):
        super().__init__()
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


class Stack(nn.Module):
    def __init__(self, n=2):
        super().__init__()
        self.layers = nn.ModuleList(MLP() for _ in range(n))

    def forward(self, x):
        for layer in self.layers:
            x = x + layer(x)
        return x
