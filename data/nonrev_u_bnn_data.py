"""Generate data/nonrev_u_bnn_train.csv, the binary classification set of Neal (2020), section 6.

The paper says only: 5 inputs, 300 training cases, two relevant inputs, two "slightly noisy
versions" of them, and one input of independent noise. The rest is this book's choice:

    x1, x2, x5 ~ N(0, 1) independent;  x3 = x1 + 0.1 e3,  x4 = x2 + 0.1 e4,  e ~ N(0, 1);
    P(y = 1 | x) = 1 / (1 + exp(-2.5 (1.4 - x1^2 - x2^2)))      (a disc: not linearly separable)

Run from the repository root:  .venv/bin/python data/nonrev_u_bnn_data.py
"""
from pathlib import Path

import numpy as np

SEED = 20200131
N_CASES = 300
NOISE_SD = 0.1
OUT = Path(__file__).resolve().parent / "nonrev_u_bnn_train.csv"


def generate(seed=SEED, n=N_CASES):
    rng = np.random.default_rng([seed, 6])
    x1, x2, x5 = rng.standard_normal((3, n))
    x3 = x1 + NOISE_SD * rng.standard_normal(n)
    x4 = x2 + NOISE_SD * rng.standard_normal(n)
    prob = 1.0 / (1.0 + np.exp(-2.5 * (1.4 - x1**2 - x2**2)))
    y = (rng.uniform(size=n) < prob).astype(int)
    return np.c_[x1, x2, x3, x4, x5], y


if __name__ == "__main__":
    X, y = generate()
    lines = ["x1,x2,x3,x4,x5,y"] + [",".join(f"{v:.6f}" for v in row) + f",{t}" for row, t in zip(X, y)]
    OUT.write_text("\n".join(lines) + "\n")
    print(f"wrote {OUT.name}: {len(y)} cases, {y.mean():.3f} in class 1")
