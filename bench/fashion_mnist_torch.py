#!/usr/bin/env python3
"""PyTorch reference for kiln's Fashion-MNIST training: the same data, model, loss,
optimizer and batching, to compare accuracy and speed on the same machine.

    python3 bench/fashion_mnist_torch.py [--epochs 5] [--threads 2] [--device cpu|cuda]
        [--limit N] [--compile] [--json FILE] [--data DIR] [--seed S]

Data: the gzip IDX files of Debian's dataset-fashion-mnist (train-images-idx3-ubyte.gz
and the rest) from --data, else $KILN_FASHION_MNIST, else
/usr/share/datasets/fashion-mnist, read with gzip and struct as
examples/fashion_mnist_data.cc reads them (plain IDX files work too), pixels scaled to
[0, 1] by /255. --limit keeps the first N training images; the test set is always whole.

Model: the pixels standardized (mean 0.2860, std 0.3530), Conv2d(1,32,3) ReLU MaxPool2d(2)
Conv2d(32,64,3) ReLU MaxPool2d(2) Flatten Linear(64*5*5,128) ReLU Linear(128,10) (no
padding: 28 -> 26 -> 13 -> 11 -> 5), cross entropy, Adam with lr 3e-3 decaying to 0 along
a half cosine over the run (stepped after every batch; --schedule constant keeps it),
batches of 128 with the last partial batch dropped, the order shuffled each epoch by a
torch.Generator seeded with --seed.

Per epoch it prints the mean training loss over the epoch's batches, the test accuracy,
the training images per second and the epoch's training seconds (the test pass is timed
apart, as `eval_seconds` in the JSON); then `test accuracy: 0.XXXX`. With --compile the
model goes through torch.compile, and the first epoch's time includes compiling.
"""
import argparse
import gzip
import json
import os
import struct
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

IMAGES_MAGIC = 0x00000803
LABELS_MAGIC = 0x00000801
DEFAULT_DIR = "/usr/share/datasets/fashion-mnist"


def fail(message):
    print("fashion_mnist_torch.py: error: " + message, file=sys.stderr)
    sys.exit(1)


def read_file(path):
    """The bytes of `path`, decompressed when it is gzip (like zlib's gzread)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        fail(f"cannot open {path}: {e.strerror}")
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, gzip.BadGzipFile) as e:
            fail(f"cannot read {path}: {e}")
    return data


def read_idx(path, magic, dims, limit=None):
    """An IDX file's dimensions and its first `limit` items' bytes (all when None)."""
    data = read_file(path)
    header_bytes = 4 + 4 * dims
    if len(data) < 4:
        fail(f"{path} is truncated: expected {header_bytes} bytes (the IDX header), read {len(data)}")
    found = struct.unpack(">I", data[:4])[0]
    if found != magic:
        fail(f"{path}: bad magic number 0x{found:08x}, expected 0x{magic:08x}")
    if len(data) < header_bytes:
        fail(f"{path} is truncated: expected {header_bytes} bytes (the IDX header), read {len(data)}")
    shape = list(struct.unpack(">" + "I" * dims, data[4:header_bytes]))
    item = 1
    for d in shape[1:]:
        item *= d
    expected = header_bytes + shape[0] * item
    if len(data) < expected:
        fail(f"{path} is truncated: expected {expected} bytes, read {len(data)}")
    count = shape[0] if limit is None else min(shape[0], limit)
    body = data[header_bytes:header_bytes + count * item]
    return [count] + shape[1:], torch.frombuffer(bytearray(body), dtype=torch.uint8)


def load(directory, prefix, limit=None):
    images_path = os.path.join(directory, f"{prefix}-images-idx3-ubyte.gz")
    labels_path = os.path.join(directory, f"{prefix}-labels-idx1-ubyte.gz")
    (count, rows, cols), pixels = read_idx(images_path, IMAGES_MAGIC, 3, limit)
    (label_count,), labels = read_idx(labels_path, LABELS_MAGIC, 1, limit)
    if label_count != count:
        fail(f"{images_path} holds {count} images but {labels_path} holds {label_count} labels")
    if labels.numel() and int(labels.max()) > 9:
        fail(f"{labels_path}: a label is out of range 0..9")
    images = pixels.reshape(count, 1, rows, cols).to(torch.float32) / 255.0
    return images, labels.to(torch.int64)


# The training images' pixel mean and standard deviation (pixels scaled to [0, 1]).
PIXEL_MEAN, PIXEL_STD = 0.2860, 0.3530


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3)
        self.conv2 = nn.Conv2d(32, 64, 3)
        self.fc1 = nn.Linear(64 * 5 * 5, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = (x - PIXEL_MEAN) / PIXEL_STD  # as examples/fashion_mnist.cc's graph does
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)  # 28 -> 26 -> 13
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)  # 13 -> 11 -> 5
        x = torch.flatten(x, 1)
        return self.fc2(F.relu(self.fc1(x)))


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def evaluate(model, images, labels, batch=1000):
    model.eval()
    correct = 0
    with torch.no_grad():
        for start in range(0, images.shape[0], batch):
            logits = model(images[start:start + batch])
            correct += int((logits.argmax(1) == labels[start:start + batch]).sum())
    model.train()
    return correct / images.shape[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (default 2)")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--limit", type=int, default=None, help="keep the first N training images")
    parser.add_argument("--compile", action="store_true", help="run the model through torch.compile")
    parser.add_argument("--json", metavar="FILE", help="write the per-epoch figures to FILE")
    parser.add_argument("--data", default=os.environ.get("KILN_FASHION_MNIST") or DEFAULT_DIR)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--schedule", choices=["cosine", "constant"], default="cosine")
    args = parser.parse_args()
    if args.epochs < 1:
        fail("--epochs must be at least 1")
    if args.threads < 1:
        fail("--threads must be at least 1")
    if args.limit is not None and args.limit < 0:
        fail("--limit must be at least 0")
    if args.device == "cuda" and not torch.cuda.is_available():
        fail("--device cuda: PyTorch sees no CUDA device")

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    if device.type == "cuda":
        # kiln's f32 matmuls and convolutions are full f32.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False

    train_x, train_y = load(args.data, "train", args.limit)
    test_x, test_y = load(args.data, "t10k")
    train_x, train_y = train_x.to(device), train_y.to(device)
    test_x, test_y = test_x.to(device), test_y.to(device)
    n = train_x.shape[0]
    batches = n // args.batch_size
    if batches == 0:
        fail(f"{n} training images are fewer than one batch of {args.batch_size}")

    model = Net().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    # Stepped after every batch, as kiln's Adam.cosine_decay_steps computes it from the step count.
    scheduler = (torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs * batches)
                 if args.schedule == "cosine" else None)
    forward = torch.compile(model) if args.compile else model
    generator = torch.Generator().manual_seed(args.seed)

    print(f"torch {torch.__version__}, device {args.device}, threads {torch.get_num_threads()}, "
          f"{n} training images ({batches} batches of {args.batch_size}), {test_x.shape[0]} test images"
          f"{', torch.compile' if args.compile else ''}")
    epochs = []
    accuracy = 0.0
    for epoch in range(1, args.epochs + 1):
        order = torch.randperm(n, generator=generator).to(device)
        total_loss = torch.zeros((), device=device)
        sync(device)
        start = time.perf_counter()
        for b in range(batches):
            index = order[b * args.batch_size:(b + 1) * args.batch_size]
            loss = F.cross_entropy(forward(train_x[index]), train_y[index])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            if scheduler:
                scheduler.step()
            total_loss += loss.detach()
        sync(device)
        seconds = time.perf_counter() - start
        mean_loss = float(total_loss) / batches
        eval_start = time.perf_counter()
        accuracy = evaluate(forward, test_x, test_y)
        sync(device)
        eval_seconds = time.perf_counter() - eval_start
        images_per_second = batches * args.batch_size / seconds
        print(f"epoch {epoch}/{args.epochs}: loss {mean_loss:.4f}, test accuracy {accuracy:.4f}, "
              f"{images_per_second:.1f} images/s, {seconds:.2f} s", flush=True)
        epochs.append({"epoch": epoch, "loss": mean_loss, "test_accuracy": accuracy,
                       "images_per_second": images_per_second, "seconds": seconds, "eval_seconds": eval_seconds})
    print(f"test accuracy: {accuracy:.4f}")

    if args.json:
        report = {
            "framework": "pytorch", "torch_version": torch.__version__, "device": args.device,
            "threads": torch.get_num_threads(), "compile": args.compile, "seed": args.seed,
            "batch_size": args.batch_size, "lr": args.lr, "schedule": args.schedule, "train_images": n, "test_images": int(test_x.shape[0]),
            "epochs": epochs, "test_accuracy": accuracy,
        }
        try:
            with open(args.json, "w") as f:
                json.dump(report, f, indent=2)
                f.write("\n")
        except OSError as e:
            fail(f"cannot write {args.json}: {e.strerror}")


if __name__ == "__main__":
    main()
