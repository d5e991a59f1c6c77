#!/usr/bin/env python3
"""PyTorch's side of benches/train-mlp.sh: the train-digits MLP (64-H-10, ReLU,
cross-entropy, AdamW lr 1e-3, batches of B, the same 80/20 test split and 10%
validation) trained for E epochs on N threads; prints
`torch: S optimizer steps of B samples in T s (R steps/s, N threads)` and the test
accuracy."""

import csv
import sys
import time

import torch

data_dir, epochs, threads, hidden, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
torch.set_num_threads(threads)
torch.manual_seed(42)
rows = [list(map(float, r)) for r in csv.reader(open(f"{data_dir}/digits.csv"))]
x = torch.tensor([r[:64] for r in rows]) / 16.0
y = torch.tensor([int(r[64]) for r in rows])
perm = torch.randperm(len(rows))
x, y = x[perm], y[perm]
n_test = int(len(rows) * 0.2) // batch * batch
xt, yt, xtr, ytr = x[-n_test:], y[-n_test:], x[:-n_test], y[:-n_test]
n_train = int(0.9 * (len(xtr) // batch)) * batch
model = torch.nn.Sequential(torch.nn.Linear(64, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 10))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
loss_fn = torch.nn.CrossEntropyLoss()
steps = 0
start = time.perf_counter()
for epoch in range(epochs):
    order = torch.randperm(n_train)
    for i in range(n_train // batch):
        idx = order[i * batch:(i + 1) * batch]
        opt.zero_grad()
        loss = loss_fn(model(xtr[idx]), ytr[idx])
        loss.backward()
        opt.step()
        steps += 1
    with torch.no_grad():
        for i in range(n_train // batch, len(xtr) // batch):
            model(xtr[i * batch:(i + 1) * batch])
elapsed = time.perf_counter() - start
with torch.no_grad():
    acc = (model(xt).argmax(1) == yt).float().mean().item()
print(f"torch: {steps} optimizer steps of {batch} samples in {elapsed:.3f} s ({steps / elapsed:.1f} steps/s, {threads} threads)")
print(f"torch test accuracy: {acc:.3f}")
