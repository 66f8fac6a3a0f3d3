"""A competing load for fault drills: bf16 matrix products on one GPU until killed.

    python scripts/gemm_load.py --gpu 2 &
"""

import argparse

import torch


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpu", type=int, required=True)
    parser.add_argument("--size", type=int, default=8192)
    args = parser.parse_args()
    device = torch.device("cuda", args.gpu)
    a = torch.randn(args.size, args.size, device=device, dtype=torch.bfloat16)
    b = torch.randn(args.size, args.size, device=device, dtype=torch.bfloat16)
    print(f"gemm load on gpu{args.gpu}", flush=True)
    while True:
        for _ in range(50):
            a = torch.mm(a, b) * 1e-3  # rescaled so values stay finite
        torch.cuda.synchronize(device)


if __name__ == "__main__":
    main()
