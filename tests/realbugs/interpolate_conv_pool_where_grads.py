"""
issue: https://github.com/pytorch/pytorch/issues/185509
title: [inductor] Silent incorrect gradients with interpolate, conv2d, max_pool2d and torch.where
kind: wrong_result
category: accuracy
stage: inductor
culprit: aten.upsample_bilinear2d, aten.convolution, aten.max_pool2d_with_indices, aten.where
fails_on: torch 2.13.0+cpu: input/weight/bias gradients differ from eager
"""

import torch
import torch.nn.functional as F
def inner(x, weight, bias):
    y = F.interpolate(x, scale_factor=(1.5, 1.25), mode="bilinear", align_corners=False)
    y = y[:, :, 1:7, 1:8]
    conv = F.conv2d(y, weight, bias, padding=1)
    pool = F.max_pool2d(conv, kernel_size=3, stride=1, padding=1)
    threshold = pool.mean(dim=(2, 3), keepdim=True)
    return conv, pool, threshold
def make_mask(x, weight, bias):
    conv, _, threshold = inner(x, weight, bias)
    return conv > threshold
def fn(x, weight, bias, mask):
    conv, pool, _ = inner(x, weight, bias)
    return torch.where(mask, conv, pool)
torch.manual_seed(0)
x = torch.randn(2, 3, 6, 8); w = torch.randn(4, 3, 3, 3); b = torch.randn(4)
mask = make_mask(x, w, b)
def grads(f):
    xs = [t.clone().requires_grad_() for t in (x, w, b)]
    f(*xs, mask).sum().backward()
    return [t.grad for t in xs]
for e, c in zip(grads(fn), grads(torch.compile(fn, backend="inductor"))):
    torch.testing.assert_close(e, c, rtol=1e-4, atol=1e-4)
