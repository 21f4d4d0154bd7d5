"""A tour of primflow's derivatives, runnable in a second: the main example until the PINN
demo lands (``python examples/derivatives.py``).

1. The seed example: f(x1, x2) = ln(x1) + x1 x2 - sin(x2) and its gradient.
2. d^k/dx^k tanh(x) for k = 1..6 by repeated pf.grad(create_graph=True), against the
   closed forms from the derivative recurrence of tanh.
3. The Laplacian of u(x, y) = sin(pi x) sin(pi y) at random points by nested reverse mode,
   against the exact -2 pi^2 u (the Poisson operator PINNs use).
4. The Hessian of a small tanh network with respect to its input (Paddle-style lazy
   pf.autograd.hessian), checked for symmetry.
"""

import math

import numpy as np

import primflow as pf


def seed_example():
    x1 = pf.to_tensor(2.0, dtype="float64", stop_gradient=False)
    x2 = pf.to_tensor(5.0, dtype="float64", stop_gradient=False)
    y = pf.log(x1) + x1 * x2 - pf.sin(x2)
    g1, g2 = pf.grad(y, [x1, x2])
    print(f"f(2, 5) = {y.item():.15f}   df/dx1 = {g1.item():.15f}   df/dx2 = {g2.item():.15f}")


def tanh_derivatives(order=6, at=0.5):
    # tanh^(k) = P_k(t) with P_0 = t, P_{k+1} = (1 - t^2) P_k'(t): polynomial coefficients
    poly = np.polynomial.Polynomial([0.0, 1.0])
    t = math.tanh(at)
    x = pf.to_tensor(at, dtype="float64", stop_gradient=False)
    y = pf.tanh(x)
    print(f"\nd^k/dx^k tanh(x) at x = {at}")
    for k in range(1, order + 1):
        (y,) = pf.grad(y, x, create_graph=True)
        poly = np.polynomial.Polynomial([1.0, 0.0, -1.0]) * poly.deriv()
        exact = poly(t)
        print(f"  k={k}: primflow {y.item(): .15e}   closed form {exact: .15e}   "
              f"rel err {abs(y.item() - exact) / abs(exact):.1e}")


def laplacian_check(n=5):
    pf.seed(0)
    xy = pf.rand([n, 2], dtype="float64")
    xy.stop_gradient = False
    u = pf.sin(math.pi * xy[:, 0]) * pf.sin(math.pi * xy[:, 1])
    (du,) = pf.grad(u.sum(), xy, create_graph=True)
    lap = 0.0
    for i in range(2):
        (d2,) = pf.grad(du[:, i].sum(), xy, create_graph=True)
        lap = lap + d2[:, i]
    exact = -2 * math.pi ** 2 * u
    err = float(pf.max(pf.abs(lap - exact)))
    print(f"\nLaplacian of sin(pi x) sin(pi y) at {n} points: max abs error {err:.2e}")


def mlp_hessian():
    pf.seed(1)
    w1, b1 = pf.randn([3, 16], "float64") * 0.5, pf.zeros([16], "float64")
    w2 = pf.randn([16, 1], "float64") * 0.5
    x = pf.to_tensor([0.1, -0.2, 0.3], dtype="float64", stop_gradient=False)
    y = (pf.tanh(x @ w1 + b1) @ w2).sum()
    h = pf.autograd.hessian(y, x)[:]
    asym = float(pf.max(pf.abs(h - h.T)))
    print(f"\nHessian of a 3-16-1 tanh MLP w.r.t. its input:\n{h.numpy().round(5)}\n"
          f"  max |H - H^T| = {asym:.1e}")


if __name__ == "__main__":
    print(f"primflow {pf.__version__}: {len(pf.primitives())} primitives")
    seed_example()
    tanh_derivatives()
    laplacian_check()
    mlp_hessian()
