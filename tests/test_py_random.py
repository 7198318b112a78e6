"""Differential cases: Python's ``random`` module in traced code.

Each program is run eagerly and compiled by graphjit (``eager`` and ``aot_eager``
backends), twice per input, and everything observable is compared (see
``_semantics.py``): the return value, the arguments afterwards and ``random``'s state
after each call, both runs starting from the same state.  A second call therefore has to
draw *new* numbers equal to eager's: a compiler that replays the values it saw while
tracing (as TorchDynamo does for ``random.Random`` objects) fails.  Covered:

* module-level draws (``random``, ``randint``, ``uniform``, ``gauss``, ``choice`` and
  ``choices``/``sample`` over constants, ``randrange`` with 1-3 arguments,
  ``getrandbits``, ``triangular``, ``betavariate`` and the other distributions,
  ``randbytes``) meeting tensors on either side of an operator, in ``torch.where``,
  comparisons, ``clamp``, ``lerp``, ``fill_`` and tensor methods;
* arithmetic on drawn values before they meet a tensor (``r * 2 - 1``, ``int``, ``abs``,
  ``round``, unary minus, comparisons), drawn values returned as Python values;
* dtype promotion of drawn ints, floats and bools with integer, bool, float64 and
  float16 tensors;
* ``random.seed`` / ``getstate`` / ``setstate`` inside the function;
* ``random.Random`` generators made inside (constant seed, seed drawn from the module
  generator), passed in, stored on objects, returned;
* draws in inlined helpers, loops, comprehensions and generator expressions;
* graph breaks with eager's results: a branch on a drawn value (also a chained
  comparison), ``random.shuffle``, ``random.choice`` over tensors, a drawn int used as a
  size, ``torch.full_like`` with a drawn fill value.

Besides the cases: three calls of one compiled function give three different values equal
to eager's sequence with no recompile, and TorchDynamo's stale-value bug side by side.
"""

from __future__ import annotations

import math
import random

import pytest
import torch

import graphjit
from _semantics import Case, run_case
from _shared import seeded_randn
from graphjit.testing import CompileCounter, assert_equal

_r = seeded_randn(5300)
X, Y = _r(4), _r(4, seed=1)
M = _r(3, 4)
BIG = _r(256)  # many elements: a rounding difference shows in at least one of them
XI = torch.arange(-3, 5)  # int64
XI32 = torch.arange(-3, 5, dtype=torch.int32)
XU8 = torch.arange(250, 256, dtype=torch.uint8)
XB = torch.tensor([True, False, True, False])
X64 = _r(4, seed=2).double()
X16 = BIG.half()


# --------------------------------------------------------------------------------------
# module-level draws meeting tensors
# --------------------------------------------------------------------------------------

def random_plus_tensor(x):
    r = random.random()
    return x + r, r


def randint_times_tensor(x):
    n = random.randint(1, 10)
    return x * n, n


def uniform_on_the_left(x):
    u = random.uniform(-2, 2)
    return u * x, u - x, u / (x.abs() + 1), u


def gauss_minus(x):
    g = random.gauss(0, 1)
    return x - g, g


def keyword_arguments(x):
    g = random.gauss(mu=1.0, sigma=0.5)
    n = random.randint(a=2, b=9)
    return x * g + n, g, n


def where_greater(x):
    t = random.uniform(-1, 1)
    return torch.where(x > t, x, -x), (t < x).sum(), t


def clamp_min_max(x):
    lo = random.uniform(-1, 0)
    hi = random.uniform(0, 1)
    return x.clamp(min=lo), torch.clamp(x, max=hi), lo, hi


def choice_constants(x):
    c = random.choice([0.5, 1.5, 2.5, 3.5])
    k = random.choice((1, 2, 3))
    return x * c + k, c, k


def choice_strings(x):
    name = random.choice(["relu", "tanh", "sigmoid"])
    return x * random.random(), name


def randrange_arities(x):
    a = random.randrange(10)
    b = random.randrange(5, 15)
    c = random.randrange(0, 100, 7)
    return x * a + b - c, a, b, c


def getrandbits_int(x):
    b = random.getrandbits(8)
    return x + b, b


def sample_and_choices(x):
    s = random.sample(range(100), 3)
    c = random.choices([1, 2, 3], weights=[5, 1, 1], k=4)
    return x * random.random(), s, c


def distributions(x):
    t = random.triangular(0, 1, 0.2)
    b = random.betavariate(2, 3)
    e = random.expovariate(1.5)
    n = random.normalvariate(0, 2)
    return x * t + b - e * n, t, b, e, n


def more_distributions(x):
    a = random.lognormvariate(0, 0.5)
    b = random.vonmisesvariate(1.0, 4.0)
    c = random.gammavariate(2.0, 1.0)
    d = random.paretovariate(3.0)
    e = random.weibullvariate(1.0, 1.5)
    return (x + a) * b - c + d * e, a, b, c, d, e


def randbytes_returned(x):
    data = random.randbytes(6)
    return x + random.random(), data


def drawn_value_returned(x):
    return x * 2, random.random(), random.randint(0, 1000)


def inplace_on_argument(x):
    x.mul_(random.uniform(0.5, 2.0))
    return x + 1


# --------------------------------------------------------------------------------------
# arithmetic on drawn values before they meet a tensor
# --------------------------------------------------------------------------------------

def arithmetic_before_tensor(x):
    r = random.random()
    s = r * 2 - 1
    return x * s, s


def int_of_draw(x):
    k = int(random.random() * 10)
    return x + k, k


def abs_and_round(x):
    a = abs(random.gauss(0, 1))
    b = round(random.uniform(0, 10))
    c = round(random.uniform(0, 1), 3)
    return x * a + b + c, a, b, c


def negation_and_power(x):
    r = random.uniform(1, 2)
    return x * -r + r ** 2, -r


def two_draws_combined(x):
    a = random.random()
    b = random.randint(1, 4)
    return x * (a + b) / b, a, b


def drawn_bool(x):
    flag = random.random() < 0.5
    return x * flag, XI + flag, flag


def min_max_floordiv_mod(x):
    r = random.uniform(0, 10)
    return x * min(r, 5.0) + max(r, 2.0) - (r // 3) * (r % 3), r


def math_of_draw(x):
    r = random.random()
    return x * math.sqrt(r), r


# --------------------------------------------------------------------------------------
# drawn values as arguments of tensor functions and methods
# --------------------------------------------------------------------------------------

def tensor_methods_with_draw(x):
    r = random.uniform(0.5, 1.5)
    return x.mul(r), x.add(r), x.abs().pow(r), torch.mul(x, r), torch.sub(r, x), r


def lerp_and_fill(x, y):
    w = random.random()
    z = torch.empty_like(x)
    z.fill_(random.gauss(0, 1))
    return torch.lerp(x, y, w), z, w


# --------------------------------------------------------------------------------------
# dtype promotion
# --------------------------------------------------------------------------------------

def int_tensor_with_draws(xi):
    n = random.randint(-5, 5)
    r = random.random()
    return xi * n, xi + r, xi / (abs(n) + 1), xi > r, n, r


def int32_and_bool_tensors(xi32, xb):
    n = random.randint(1, 9)
    r = random.uniform(-1, 1)
    return xi32 + n, xi32 * r, xb + n, xb * r, n, r


def float64_tensor_with_draws(x64):
    r = random.gauss(0, 1)
    n = random.randint(1, 9)
    return x64 * r, x64 + n, r, n


def float16_tensor_with_int(x16):
    n = random.randint(1, 9)
    return x16 * n, x16 - n, n


def float16_tensor_with_float(x16):
    r = random.uniform(-3, 3)
    return x16 * r, r


def uint8_wraps_like_eager(xu8):
    n = random.randint(256, 300)
    return xu8 + n, n


# --------------------------------------------------------------------------------------
# seed, getstate, setstate
# --------------------------------------------------------------------------------------

def seed_then_draw(x):
    random.seed(42)
    a = random.random()
    b = random.randint(0, 100)
    return x * a + b, a, b


def seed_with_drawn_value(x):
    random.seed(random.randint(0, 10))
    r = random.random()
    return x + r, r


def getstate_setstate(x):
    st = random.getstate()
    a = random.random()
    random.setstate(st)
    b = random.random()
    c = random.random()
    return x * a + b - c, a, b, c


# --------------------------------------------------------------------------------------
# random.Random objects
# --------------------------------------------------------------------------------------

class RngHolder:
    """An object holding a generator, compared by the generator's state."""

    def __init__(self, rng, scale=1.0):
        self.rng, self.scale = rng, scale

    def __eq__(self, other):
        return (type(other) is RngHolder and self.scale == other.scale
                and type(self.rng) is type(other.rng) and self.rng.getstate() == other.rng.getstate())

    __hash__ = None


def own_generator_constant_seed(x):
    g = random.Random(123)
    a = g.random()
    n = g.randint(0, 9)
    return x + a * n, a, n


def own_generator_drawn_seed(x):
    g = random.Random(random.randint(0, 100))
    r = g.random()
    return x * r, r


def generator_argument(x, g):
    r = g.random()
    n = g.randrange(3, 30)
    return x * r + n, r, n


def generator_and_module_interleaved(x, g):
    a = random.random()
    b = g.gauss(0, 1)
    c = random.random()
    return x * a + b * c, a, b, c


def generator_on_object(x, holder):
    return x * holder.rng.random() * holder.scale


def generator_stored_on_object(x, holder):
    holder.rng = random.Random(random.getrandbits(16))
    return x + holder.rng.random()


def generator_returned(x):
    g = random.Random(5)
    r = g.random()
    return x + r, g


# --------------------------------------------------------------------------------------
# helpers, loops, comprehensions
# --------------------------------------------------------------------------------------

def _noise(t, scale):
    return t + scale * random.gauss(0, 1)


def _jitter(t, rng):
    return t * rng.uniform(0.9, 1.1)


def draws_in_helpers(x):
    return _noise(x, 0.1), _noise(x * 2, 0.5)


def generator_through_helper(x):
    g = random.Random(random.randint(0, 50))
    return _jitter(x, g) + _jitter(x, g)


def draws_in_loop(x):
    acc = torch.zeros_like(x)
    for i in range(3):
        acc = acc + x * random.random()
    return acc


def draws_in_list_comprehension(x):
    return torch.stack([x * random.uniform(-1, 1) for _ in range(3)])


def draws_in_generator_expression(x):
    return sum(x * random.random() for _ in range(3))


def drawn_values_in_containers(x):
    ws = {"a": random.random(), "b": random.random()}
    pair = (random.randint(0, 3), random.random())
    return x * ws["a"] + ws["b"] * pair[0] - pair[1], ws, pair


# --------------------------------------------------------------------------------------
# graph breaks
# --------------------------------------------------------------------------------------

def branch_on_draw(x, g):
    y = x * 2
    if g.random() < 0.5:
        y = y + 1
    else:
        y = y - 1
    return y * 3


def branch_after_seed(x):
    random.seed(3)  # the draw below is 0.2379...: the same branch on every call
    y = x * 2
    if random.random() < 0.5:
        y = y + random.random()
    return y * 3


def chained_comparison_of_draw(x, g):
    y = x * 2
    flag = 0.2 < g.random() < 0.9
    return y * flag + 1, flag


def shuffle_list(x, y):
    parts = [x, y, x + y]
    order = [0, 1, 2, 3]
    random.shuffle(parts)
    random.shuffle(order)
    return torch.stack(parts) * 2, order


def choice_of_tensors(x, y):
    t = random.choice([x, y, x + y])
    return t * 2


def drawn_size(x, g):
    y = x + 1
    n = g.randint(1, 4)
    return y[:n] * 2, n


def full_like_of_draw(x):
    r = random.random()
    return x + torch.full_like(x, r), r


def int32_tensor_large_int(xi32):
    b = random.randint(2 ** 32, 2 ** 40)  # eager wraps it to 32 bits
    return xi32 + b, b


# --------------------------------------------------------------------------------------
# the cases
# --------------------------------------------------------------------------------------

_G0, _G1 = random.Random(0), random.Random(1)  # first draws 0.844 and 0.134

CASES = [
    # module-level draws meeting tensors
    Case(random_plus_tensor, [(X,), (M,)], graphs=2),  # one graph per shape
    Case(randint_times_tensor, [(X,)]),
    Case(uniform_on_the_left, [(X,)]),
    Case(gauss_minus, [(X,)]),
    Case(keyword_arguments, [(X,)]),
    Case(where_greater, [(X,)]),
    Case(clamp_min_max, [(X,)]),
    Case(choice_constants, [(X,)]),
    Case(choice_strings, [(X,)]),
    Case(randrange_arities, [(X,)]),
    Case(getrandbits_int, [(X,)]),
    Case(sample_and_choices, [(X,)]),
    Case(distributions, [(X,)]),
    Case(more_distributions, [(X,)]),
    Case(randbytes_returned, [(X,)]),
    Case(drawn_value_returned, [(X,)]),
    Case(inplace_on_argument, [(X,)]),
    # arithmetic on drawn values
    Case(arithmetic_before_tensor, [(X,)]),
    Case(int_of_draw, [(X,)]),
    Case(abs_and_round, [(X,)]),
    Case(negation_and_power, [(X,)]),
    Case(two_draws_combined, [(X,)]),
    Case(drawn_bool, [(X,)]),
    Case(min_max_floordiv_mod, [(X,)]),
    Case(math_of_draw, [(X,)]),
    # tensor functions and methods
    Case(tensor_methods_with_draw, [(X,)]),
    Case(lerp_and_fill, [(X, Y)]),
    # dtype promotion
    Case(int_tensor_with_draws, [(XI,)]),
    Case(int32_and_bool_tensors, [(XI32, XB)]),
    Case(float64_tensor_with_draws, [(X64,)]),
    Case(float16_tensor_with_int, [(X16,)]),
    Case(float16_tensor_with_float, [(X16,)]),
    Case(uint8_wraps_like_eager, [(XU8,)]),
    Case(int32_tensor_large_int, [(XI32,)]),
    # seed, getstate, setstate
    Case(seed_then_draw, [(X,)]),
    Case(seed_with_drawn_value, [(X,)]),
    Case(getstate_setstate, [(X,)]),
    # random.Random objects
    Case(own_generator_constant_seed, [(X,)]),
    Case(own_generator_drawn_seed, [(X,)]),
    Case(generator_argument, [(X, random.Random(7)), (X, random.Random(8))]),
    Case(generator_and_module_interleaved, [(X, random.Random(11))]),
    Case(generator_on_object, [(X, RngHolder(random.Random(3), 2.0))]),
    Case(generator_stored_on_object, [(X, RngHolder(random.Random(4)))]),
    Case(generator_returned, [(X,)]),
    # helpers, loops, comprehensions
    Case(draws_in_helpers, [(X,)]),
    Case(generator_through_helper, [(X,)]),
    Case(draws_in_loop, [(X,)]),
    Case(draws_in_list_comprehension, [(X,)]),
    Case(draws_in_generator_expression, [(X,)]),
    Case(drawn_values_in_containers, [(X,)]),
    # graph breaks
    Case(branch_on_draw, [(X, _G0), (X, _G1)], graphs=3, breaks=1),
    Case(branch_after_seed, [(X,)], graphs=2, breaks=1),
    Case(chained_comparison_of_draw, [(X, _G0)], graphs=2, breaks=1),  # (resumed after JUMP_IF_FALSE_OR_POP)
    Case(shuffle_list, [(X, Y)], graphs=2, breaks=2),  # one break per shuffle
    Case(choice_of_tensors, [(X, Y)], graphs=2, breaks=1),
    Case(drawn_size, [(X, random.Random(5))], graphs=2, breaks=1),
    Case(full_like_of_draw, [(X,)], graphs=1, breaks=1),
]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_eager_backend(case):
    run_case(case)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_aot_eager_backend(case):
    run_case(case, "aot_eager")


# --------------------------------------------------------------------------------------
# new values on every call, no recompile; TorchDynamo side by side
# --------------------------------------------------------------------------------------

def _draw_twice(x, g):
    return x + g.random(), random.random()


def test_three_calls_draw_eager_sequence_without_recompile():
    graphjit.reset()
    cnt = CompileCounter()
    compiled = graphjit.compile(_draw_twice, backend=cnt, fullgraph=True)
    g_eager, g_compiled = random.Random(21), random.Random(21)
    random.seed(1234)
    expected = [_draw_twice(X, g_eager) for _ in range(3)]
    state_eager = random.getstate()
    random.seed(1234)
    actual = [compiled(X, g_compiled) for _ in range(3)]
    assert_equal(actual, expected)
    assert random.getstate() == state_eager
    assert g_compiled.getstate() == g_eager.getstate()
    assert len({r for _, r in actual}) == 3, "three calls must draw three different values"
    assert len({t[0].item() for t, _ in actual}) == 3
    assert cnt.frame_count == 1
    stats = graphjit.stats()
    assert (stats["recompiles"], stats["graph_breaks"], stats["frames_total"]) == (0, 0, 1)


def _add_draw(x, g):
    return x + g.random()


def _generator_seeded_by_draw(x):
    g = random.Random(random.randint(0, 100))
    return x * g.random()


def _dynamo(fn):
    import torch._dynamo
    torch._dynamo.reset()
    return torch.compile(fn, backend="eager")


def test_dynamo_replays_trace_time_draws_graphjit_does_not():
    """torch.compile folds ``g.random()`` to the value it drew while tracing: a second
    call on the same generator returns the same numbers, eager's differ."""
    import torch._dynamo
    g_eager, g_dynamo, g_graphjit = random.Random(0), random.Random(0), random.Random(0)
    expected = [_add_draw(X, g_eager) for _ in range(2)]
    assert not torch.equal(expected[0], expected[1])
    dynamo = _dynamo(_add_draw)
    try:
        stale = [dynamo(X, g_dynamo) for _ in range(2)]
    finally:
        torch._dynamo.reset()
    assert torch.equal(stale[0], stale[1]), "torch.compile now draws new values: update this test"
    graphjit.reset()
    compiled = graphjit.compile(_add_draw, backend="eager", fullgraph=True)
    assert_equal([compiled(X, g_graphjit) for _ in range(2)], expected)
    assert g_graphjit.getstate() == g_eager.getstate()


def test_dynamo_crashes_on_generator_seeded_by_draw_graphjit_does_not():
    """``random.Random(random.randint(0, 100))``: torch.compile raises (the seed is not a
    constant to it); graphjit makes the generator in the prologue."""
    import torch._dynamo
    dynamo = _dynamo(_generator_seeded_by_draw)
    try:
        with pytest.raises(Exception, match="not a constant"):
            dynamo(X)
    finally:
        torch._dynamo.reset()
    graphjit.reset()
    compiled = graphjit.compile(_generator_seeded_by_draw, backend="eager", fullgraph=True)
    random.seed(99)
    expected = [_generator_seeded_by_draw(X) for _ in range(3)]
    random.seed(99)
    assert_equal([compiled(X) for _ in range(3)], expected)
    assert not torch.equal(expected[0], expected[1])
