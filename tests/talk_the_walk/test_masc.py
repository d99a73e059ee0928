import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ttw_jax.talk_the_walk.masc import MASC, OFFSETS, NoMASC, masked_conv3x3

pytestmark = pytest.mark.usefixtures("fast_compile_unless_slow")  # tiny models


def reference_conv(u, mask, kernel):
    """Loops: out[b, x, y] = sum_k mask[b, k] * u[b, x + dx_k, y + dy_k] @ kernel[k], zero padding."""
    b, nx, ny, _ = u.shape
    out = np.zeros((b, nx, ny, kernel.shape[-1]))
    for i in range(b):
        for x in range(nx):
            for y in range(ny):
                for k, (dx, dy) in enumerate(OFFSETS):
                    if 0 <= x + dx < nx and 0 <= y + dy < ny:
                        out[i, x, y] += mask[i, k] * u[i, x + dx, y + dy] @ kernel[k]
    return out


def test_masked_conv_matches_loops():
    rng = np.random.default_rng(0)
    u = rng.normal(size=(3, 4, 4, 5))
    mask = rng.random(size=(3, 9))
    kernel = rng.normal(size=(9, 5, 6))
    got = masked_conv3x3(jnp.asarray(u), jnp.asarray(mask), jnp.asarray(kernel))
    np.testing.assert_allclose(got, reference_conv(u, mask, kernel), rtol=1e-5, atol=1e-5)


def test_one_hot_mask_with_identity_kernel_shifts_the_map():
    u = jnp.arange(16.0).reshape(1, 4, 4, 1)
    kernel = jnp.ones((9, 1, 1))
    k = OFFSETS.index((-1, 0))  # read the western neighbour: the map moves one corner east
    out = masked_conv3x3(u, jax.nn.one_hot(jnp.array([k]), 9), kernel)[0, ..., 0]
    np.testing.assert_array_equal(out[0], 0.0)
    np.testing.assert_array_equal(out[1:], u[0, :3, :, 0])


def test_no_masc_equals_lax_convolution():
    rng = np.random.default_rng(1)
    u = jnp.asarray(rng.normal(size=(2, 4, 4, 3)), jnp.float32)
    layer = NoMASC(4)
    params = layer.init(jax.random.key(0), u)
    kernel = params["params"]["kernel"]  # (9, N, M) in OFFSETS order
    hwio = kernel.reshape(3, 3, 3, 4)
    ref = jax.lax.conv_general_dilated(u, hwio, (1, 1), "SAME",
                                       dimension_numbers=("NHWC", "HWIO", "NHWC"))
    np.testing.assert_allclose(layer.apply(params, u), ref, rtol=1e-5, atol=1e-5)


def test_masc_softmax_mask_and_gradients():
    u = jax.random.normal(jax.random.key(0), (2, 4, 4, 3))
    logits = jax.random.normal(jax.random.key(1), (2, 9))
    layer = MASC(3)
    params = layer.init(jax.random.key(2), u, logits)
    kernel = params["params"]["kernel"]
    expected = masked_conv3x3(u, jax.nn.softmax(logits), kernel)
    np.testing.assert_allclose(layer.apply(params, u, logits), expected, rtol=1e-6)
    g_params, g_logits = jax.grad(lambda p, l: jnp.sum(layer.apply(p, u, l) ** 2), argnums=(0, 1))(params, logits)
    assert float(jnp.abs(g_params["params"]["kernel"]).sum()) > 0
    assert float(jnp.abs(g_logits).sum()) > 0
