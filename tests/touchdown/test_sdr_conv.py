"""The fast convolutions equal XLA's (values and gradients), and the SDR models that use them equal
their formulation at the start of the performance work (lax convolutions, a stride-1
ConvTranspose, a vmapped per-example convolution) to 1e-5."""
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export, lax

from ttw_jax.touchdown.sdr import models
from ttw_jax.touchdown.sdr.conv import conv_general_dilated, kernel_grad, same_conv, xla_kernel_grad

pytestmark = pytest.mark.usefixtures("fast_compile_unless_slow")


def lax_conv(x, k):
    return lax.conv_general_dilated(x, k, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))


def close(a, b, tol=1e-5):
    a, b = np.asarray(a), np.asarray(b)
    np.testing.assert_allclose(a, b, rtol=0, atol=tol * max(1.0, np.abs(b).max()))


@pytest.mark.parametrize("shape,k,d,rows", [((2, 7, 9, 3), 3, 4, 2), ((3, 5, 11, 6), 5, 2, 2),
                                            ((1, 4, 6, 2), 5, 3, 3), ((2, 6, 5, 4), 1, 5, 4)])
def test_same_conv_equals_lax_with_gradients(shape, k, d, rows):
    x = jax.random.normal(jax.random.key(0), shape)
    w = jax.random.normal(jax.random.key(1), (k, k, shape[-1], d))
    g = jax.random.normal(jax.random.key(2), shape[:-1] + (d,))
    close(same_conv(x, w, rows), lax_conv(x, w))
    loss = lambda f: (lambda x, w: jnp.sum(g * f(x, w)))
    got = jax.grad(loss(lambda x, w: same_conv(x, w, rows)), argnums=(0, 1))(x, w)
    want = jax.grad(loss(lax_conv), argnums=(0, 1))(x, w)
    close(got[0], want[0])
    close(got[1], want[1])
    assert np.abs(np.asarray(got[1])).max() > 0   # not trivially zero


def test_kernel_gradient_is_the_per_tap_scan_on_cpu_and_xlas_elsewhere():
    x = jax.random.normal(jax.random.key(0), (2, 6, 7, 3))
    w = jax.random.normal(jax.random.key(1), (3, 3, 3, 4))
    g = jax.random.normal(jax.random.key(2), (2, 6, 7, 4))
    close(kernel_grad(x, g, 3, 2), xla_kernel_grad(x, g, 3))
    grad = jax.jit(jax.grad(lambda x, w: jnp.sum(g * same_conv(x, w, 2)), argnums=1))
    hlo = {p: export.export(grad, platforms=[p])(x, w).mlir_module() for p in ("cpu", "cuda")}
    # Only the kernel gradient is live: per-tap GEMMs in a scan over row chunks on the CPU, one
    # backward convolution (cuDNN's) on a GPU.
    assert "stablehlo.while" in hlo["cpu"] and "stablehlo.convolution" not in hlo["cpu"]
    assert "stablehlo.while" not in hlo["cuda"]
    assert hlo["cuda"].count("stablehlo.convolution") == 1


def test_conv_general_dilated_falls_back_outside_same_stride_1():
    x = jax.random.normal(jax.random.key(0), (2, 8, 8, 3))
    w = jax.random.normal(jax.random.key(1), (4, 4, 3, 2))   # even kernel: XLA's
    args = ((1, 1), "SAME")
    dn = ("NHWC", "HWIO", "NHWC")
    close(conv_general_dilated(x, w, *args, dimension_numbers=dn),
          lax.conv_general_dilated(x, w, *args, dimension_numbers=dn))
    w = w[:3, :3]
    close(conv_general_dilated(x, w, (2, 2), "SAME", dimension_numbers=dn),
          lax.conv_general_dilated(x, w, (2, 2), "SAME", dimension_numbers=dn))


def test_stride_1_conv_transpose_is_a_same_conv():
    x = jax.random.normal(jax.random.key(0), (2, 6, 7, 5))
    deconv = nn.ConvTranspose(4, (5, 5), padding="SAME")
    params = deconv.init(jax.random.key(1), x)
    close(nn.Conv(4, (5, 5), padding="SAME").apply(params, x), deconv.apply(params, x))


def reference_per_example_conv(images, kernels):
    """The vmapped per-example convolution (a grouped convolution), as before."""
    return jax.vmap(lambda x, k: lax_conv(x[None], k)[0])(images, kernels)


@pytest.mark.parametrize("name", ["lingunet", "unet", "concatconv", "text2conv"])
def test_models_equal_their_earlier_formulation(name, monkeypatch):
    b, h, w, c, length = 2, 9, 13, 6, 5
    model = models.build_sdr_model(name, 30, channels=8, mlp_hidden=8, embed_dim=8, hidden=8,
                                   dropout=0.0)
    tokens = jax.random.randint(jax.random.key(0), (b, length), 1, 30)
    lengths = jnp.array([5, 3])
    images = jax.random.normal(jax.random.key(1), (b, h, w, c))
    params = model.init(jax.random.key(2), tokens, lengths, images)
    target = jax.nn.softmax(jax.random.normal(jax.random.key(3), (b, h * w))).reshape(b, h, w)

    def loss(p):
        out = model.apply(p, tokens, lengths, images)
        return -jnp.sum(target * out), out

    (_, out), grads = jax.value_and_grad(loss, has_aux=True)(params)
    # The earlier formulation: lax convolutions, ConvTranspose decoders, a vmapped conv.
    monkeypatch.setattr(models, "fast_conv", lax.conv_general_dilated)
    monkeypatch.setattr(models, "per_example_conv", reference_per_example_conv)
    monkeypatch.setattr(models.nn, "Conv", _conv_or_transpose)
    (_, ref_out), ref_grads = jax.value_and_grad(loss, has_aux=True)(params)
    close(out, ref_out)
    for got, want in zip(jax.tree_util.tree_leaves(grads), jax.tree_util.tree_leaves(ref_grads)):
        close(got, want)


_Conv = nn.Conv


def _conv_or_transpose(*args, name=None, **kw):
    """In the reference, the decoder layers ('deconv_k') are nn.ConvTranspose as before."""
    kw.pop("conv_general_dilated", None)
    if name and name.startswith("deconv_"):
        return nn.ConvTranspose(*args, name=name, **kw)
    return _Conv(*args, name=name, **kw)
