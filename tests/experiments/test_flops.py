"""FLOPs counted from the traced program (`experiments.benchmarks.flops`): hand counts for a
matmul and a convolution, their gradients, and the control flow that XLA's cost analysis gets
wrong (a scan body counted once) or a backend leaves out (cuDNN's convolutions)."""
import jax
import jax.numpy as jnp
import numpy as np

from experiments.benchmarks.flops import flops_by_dtype, program_flops


def test_a_matmul_is_two_flops_per_multiply_add():
    a, b = jnp.ones((7, 5)), jnp.ones((5, 3))
    assert program_flops(lambda x, y: x @ y, a, b) == 2 * 7 * 5 * 3
    # a batched einsum: batch 4, contracted 5
    x, y = jnp.ones((4, 7, 5)), jnp.ones((4, 5, 3))
    assert program_flops(lambda x, y: jnp.einsum("bik,bkj->bij", x, y), x, y) == 2 * 4 * 7 * 5 * 3
    # a loss and its gradient w.r.t. both: the forward and two matmuls of the same size
    grad = jax.value_and_grad(lambda x, y: jnp.sum(x @ y), argnums=(0, 1))
    assert program_flops(grad, a, b) == 3 * 2 * 7 * 5 * 3
    # the gradient alone of a linear function needs no forward pass (dead code, as in XLA)
    assert program_flops(jax.grad(lambda x, y: jnp.sum(x @ y), argnums=(0, 1)), a, b) == \
        2 * 2 * 7 * 5 * 3


def test_a_convolution_by_hand():
    # NHWC 2 x 8 x 8 x 3, a 3 x 3 kernel to 16 features, SAME padding, stride 1:
    # each of the 2 * 8 * 8 * 16 outputs sums 3 * 3 * 3 products
    x, k = jnp.ones((2, 8, 8, 3)), jnp.ones((3, 3, 3, 16))
    conv = lambda x, k: jax.lax.conv_general_dilated(x, k, (1, 1), "SAME",
                                                     dimension_numbers=("NHWC", "HWIO", "NHWC"))
    assert program_flops(conv, x, k) == 2 * (2 * 8 * 8 * 16) * (3 * 3 * 3)
    # stride 2, VALID: a 3 x 3 output per image
    strided = lambda x, k: jax.lax.conv_general_dilated(
        x, k, (2, 2), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    assert program_flops(strided, x, k) == 2 * (2 * 3 * 3 * 16) * 27
    # grouped (depthwise over 3 groups): each output sums 3 * 3 * 1 products
    dk = jnp.ones((3, 3, 1, 6))
    depthwise = lambda x, k: jax.lax.conv_general_dilated(
        x, k, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=3)
    assert program_flops(depthwise, x, dk) == 2 * (2 * 8 * 8 * 6) * 9
    # forward and backward (input and kernel gradients): three convolutions of the same work
    grad = jax.value_and_grad(lambda x, k: jnp.sum(conv(x, k)), argnums=(0, 1))
    assert program_flops(grad, x, k) == 3 * 2 * (2 * 8 * 8 * 16) * 27
    # the project's `same_conv` (per-tap GEMMs for the kernel gradient on XLA:CPU, XLA's own
    # elsewhere: `lax.platform_dependent`) counts as the convolution it computes
    from ttw_jax.touchdown.sdr.conv import same_conv
    ours = jax.value_and_grad(lambda x, k: jnp.sum(same_conv(x, k)), argnums=(0, 1))
    assert program_flops(ours, x, k) == program_flops(grad, x, k)


def test_control_flow_counts_every_trip_and_the_costliest_branch():
    a = jnp.ones((4, 4))

    def scanned(x):
        return jax.lax.scan(lambda c, _: (c @ a, None), x, None, length=10)[0]
    assert program_flops(jax.jit(scanned), a) == 10 * 2 * 4 ** 3
    cond = lambda p, x: jax.lax.cond(p, lambda x: x @ a @ a, lambda x: x @ a, x)
    assert program_flops(cond, True, a) == 2 * 2 * 4 ** 3
    loop = lambda x: jax.lax.while_loop(lambda c: c[0] < 5, lambda c: (c[0] + 1, c[1] @ a),
                                        (0, x))[1]
    assert program_flops(loop, a) == 2 * 4 ** 3
    assert program_flops(loop, a, while_trips=5) == 5 * 2 * 4 ** 3
    # vmap folds into the batch dimension; nothing is counted twice through jit
    batched = jax.jit(jax.vmap(lambda x: x @ a))
    assert program_flops(batched, jnp.ones((6, 3, 4))) == 6 * 2 * 3 * 4 * 4


def test_the_count_per_dtype_weighs_each_scan_trip_like_the_total():
    """A float32 matmul in a 10-step scan and one bfloat16 matmul of the same size outside it:
    by hand, float32 does 10 of the 11 units of work, so bfloat16's share is 1/11 (9.1%), not
    the 50% a count of the scan body once would give; the same across a while loop's trips
    and a shard_map's devices."""
    a = jnp.ones((4, 4))
    unit = 2 * 4 ** 3

    def mixed(x):
        y = jax.lax.scan(lambda c, _: (c @ a, None), x, None, length=10)[0]
        return y.astype(jnp.bfloat16) @ a.astype(jnp.bfloat16)
    counts = flops_by_dtype(jax.jit(mixed), a)
    assert counts == {"float32": 10 * unit, "bfloat16": unit}
    assert sum(counts.values()) == program_flops(jax.jit(mixed), a)
    assert abs(counts["bfloat16"] / sum(counts.values()) - 1 / 11) < 1e-12
    # nested: a 3-step scan around a 4-step scan of bfloat16 matmuls, and a while loop
    nested = lambda x: jax.lax.scan(
        lambda c, _: (jax.lax.scan(lambda d, _: (d @ a.astype(jnp.bfloat16), None), c, None,
                                   length=4)[0], None), x.astype(jnp.bfloat16), None, length=3)[0]
    assert flops_by_dtype(nested, a) == {"bfloat16": 12 * unit}
    loop = lambda x: jax.lax.while_loop(lambda c: c[0] < 5, lambda c: (c[0] + 1, c[1] @ a),
                                        (0, x))[1]
    assert flops_by_dtype(loop, a, while_trips=5) == {"float32": 5 * unit}
    # a shard_map body runs once per device of its mesh
    from jax.sharding import Mesh, PartitionSpec as P
    mesh = Mesh(np.array(jax.devices()[:2]), ("d",))
    sharded = jax.shard_map(lambda x: x @ a, mesh=mesh, in_specs=P("d"), out_specs=P("d"))
    counts = flops_by_dtype(jax.jit(sharded), jnp.ones((8, 4)))
    assert counts == {"float32": 2 * 2 * 4 * 4 * 4}
    assert sum(counts.values()) == program_flops(jax.jit(sharded), jnp.ones((8, 4)))


def test_the_count_does_not_depend_on_what_runs_the_program():
    """The same count with and without XLA's optimisations, jitted or not: it is read from the
    traced program, before any backend (XLA:CPU here; cuDNN elsewhere) sees it."""
    x, k = jnp.ones((1, 16, 16, 8)), jnp.ones((3, 3, 8, 8))

    def f(x, k):
        y = jax.lax.conv_general_dilated(x, k, (1, 1), "SAME",
                                         dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return jnp.sum(y.reshape(1, -1) @ np.ones((16 * 16 * 8, 2), np.float32))
    plain, jitted = program_flops(f, x, k), program_flops(jax.jit(f), x, k)
    assert plain == jitted == 2 * (16 * 16 * 8) * 72 + 2 * (16 * 16 * 8) * 2
