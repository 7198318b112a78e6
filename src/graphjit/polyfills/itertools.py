"""Polyfills for the ``itertools`` namespace, after the "roughly equivalent" code of the
Python documentation.  As in CPython, the arguments are checked and the inputs that the C
implementation reads up front (``product``, ``permutations``, ``combinations``...) are
read when the iterator is made; the items are produced lazily by an inner generator.
``chain`` itself is modelled by the tracer (``ChainVariable``)."""

import itertools as _itertools
import operator as _operator

from . import substitute_for


def _check_r(r, n_name="r"):
    if type(r) is not int:
        raise TypeError(f"Expected int as {n_name}")
    if r < 0:
        raise ValueError(f"{n_name} must be non-negative")


@substitute_for(_itertools.product)
def product(*iterables, repeat=1):
    if repeat < 0:
        raise ValueError("repeat argument cannot be negative")
    pools = [tuple(pool) for pool in iterables] * repeat
    return _product(pools)


def _product(pools):
    result = [[]]
    for pool in pools:
        result = [x + [y] for x in result for y in pool]
    for prod in result:
        yield tuple(prod)


@substitute_for(_itertools.permutations)
def permutations(iterable, r=None):
    pool = tuple(iterable)
    n = len(pool)
    r = n if r is None else r
    _check_r(r)
    return _permutations(pool, n, r)


def _permutations(pool, n, r):
    if r > n:
        return
    indices = list(range(n))
    cycles = list(range(n, n - r, -1))
    yield tuple(pool[i] for i in indices[:r])
    while n:
        for i in reversed(range(r)):
            cycles[i] -= 1
            if cycles[i] == 0:
                indices[i:] = indices[i + 1:] + indices[i:i + 1]
                cycles[i] = n - i
            else:
                j = cycles[i]
                indices[i], indices[-j] = indices[-j], indices[i]
                yield tuple(pool[i] for i in indices[:r])
                break
        else:
            return


@substitute_for(_itertools.combinations)
def combinations(iterable, r):
    pool = tuple(iterable)
    _check_r(r)
    return _combinations(pool, r)


def _combinations(pool, r):
    n = len(pool)
    if r > n:
        return
    indices = list(range(r))
    yield tuple(pool[i] for i in indices)
    while True:
        for i in reversed(range(r)):
            if indices[i] != i + n - r:
                break
        else:
            return
        indices[i] += 1
        for j in range(i + 1, r):
            indices[j] = indices[j - 1] + 1
        yield tuple(pool[i] for i in indices)


@substitute_for(_itertools.combinations_with_replacement)
def combinations_with_replacement(iterable, r):
    pool = tuple(iterable)
    _check_r(r)
    return _combinations_with_replacement(pool, r)


def _combinations_with_replacement(pool, r):
    n = len(pool)
    if not n and r:
        return
    indices = [0] * r
    yield tuple(pool[i] for i in indices)
    while True:
        for i in reversed(range(r)):
            if indices[i] != n - 1:
                break
        else:
            return
        indices[i:] = [indices[i] + 1] * (r - i)
        yield tuple(pool[i] for i in indices)


@substitute_for(_itertools.accumulate)
def accumulate(iterable, func=None, *, initial=None):
    return _accumulate(iter(iterable), _operator.add if func is None else func, initial)


def _accumulate(it, func, initial):
    total = initial
    if initial is None:
        try:
            total = next(it)
        except StopIteration:
            return
    yield total
    for element in it:
        total = func(total, element)
        yield total


@substitute_for(_itertools.islice)
def islice(iterable, *args):
    if not 1 <= len(args) <= 3:
        raise TypeError(f"islice expected at most 4 arguments, got {len(args) + 1}" if args
                        else "islice expected at least 2 arguments, got 1")
    start, stop, step = (0, args[0], 1) if len(args) == 1 else (tuple(args) + (None,))[:3]
    if stop is not None and (type(stop) is not int or stop < 0):
        raise ValueError("Stop argument for islice() must be None or an integer: 0 <= x <= sys.maxsize.")
    start = 0 if start is None else start
    step = 1 if step is None else step
    if type(start) is not int or start < 0 or type(step) is not int or step < 0:
        raise ValueError("Indices for islice() must be None or an integer: 0 <= x <= sys.maxsize.")
    if step == 0:
        raise ValueError("Step for islice() must be a positive integer or None.")
    return _islice(iter(iterable), start, stop, step)


def _islice(it, start, stop, step):
    i = 0
    nexti = start
    while stop is None or i < stop:
        if i == nexti:
            try:
                element = next(it)
            except StopIteration:
                return
            yield element
            nexti += step
        else:
            try:
                next(it)
            except StopIteration:
                return
        i += 1


@substitute_for(_itertools.count)
def count(start=0, step=1):
    return _count(start, step)


def _count(n, step):
    while True:
        yield n
        n += step


@substitute_for(_itertools.repeat)
def repeat(obj, times=None):
    return _repeat(obj, times)


def _repeat(obj, times):
    if times is None:
        while True:
            yield obj
    for _ in range(times):
        yield obj


@substitute_for(_itertools.cycle)
def cycle(iterable):
    return _cycle(iter(iterable))


def _cycle(it):
    saved = []
    for element in it:
        yield element
        saved.append(element)
    while saved:
        for element in saved:
            yield element


@substitute_for(_itertools.tee)
def tee(iterable, n=2):
    if not isinstance(n, int):
        raise TypeError(f"'{type(n).__name__}' object cannot be interpreted as an integer")
    if n < 0:
        raise ValueError("n must be >= 0")
    iterator = iter(iterable)
    link = [None, None]  # [value, next link]: the values one copy has read, shared
    return tuple(_tee(iterator, link) for _ in range(n))


def _tee(iterator, link):
    while True:
        if link[1] is None:
            try:
                link[0] = next(iterator)
            except StopIteration:
                return
            link[1] = [None, None]
        value, link = link
        yield value


@substitute_for(_itertools.zip_longest)
def zip_longest(*iterables, fillvalue=None):
    return _zip_longest([iter(it) for it in iterables], fillvalue)


def _zip_longest(iterators, fillvalue):
    num_active = len(iterators)
    if not num_active:
        return
    while True:
        values = []
        for i, it in enumerate(iterators):
            try:
                value = next(it)
            except StopIteration:
                num_active -= 1
                if not num_active:
                    return
                iterators[i] = _repeat(fillvalue, None)
                value = fillvalue
            values.append(value)
        yield tuple(values)


@substitute_for(_itertools.starmap)
def starmap(function, iterable):
    return _starmap(function, iter(iterable))


def _starmap(function, it):
    for args in it:
        yield function(*args)


@substitute_for(_itertools.takewhile)
def takewhile(predicate, iterable):
    return _takewhile(predicate, iter(iterable))


def _takewhile(predicate, it):
    for x in it:
        if predicate(x):
            yield x
        else:
            return


@substitute_for(_itertools.dropwhile)
def dropwhile(predicate, iterable):
    return _dropwhile(predicate, iter(iterable))


def _dropwhile(predicate, it):
    for x in it:
        if not predicate(x):
            yield x
            break
    for x in it:
        yield x


@substitute_for(_itertools.filterfalse)
def filterfalse(predicate, iterable):
    return _filterfalse(bool if predicate is None else predicate, iter(iterable))


def _filterfalse(predicate, it):
    for x in it:
        if not predicate(x):
            yield x


@substitute_for(_itertools.compress)
def compress(data, selectors):
    return _compress(iter(data), iter(selectors))


def _compress(data, selectors):
    for d, s in zip(data, selectors):
        if s:
            yield d


@substitute_for(_itertools.pairwise)
def pairwise(iterable):
    return _pairwise(iter(iterable))


def _pairwise(it):
    try:
        a = next(it)
    except StopIteration:
        return
    for b in it:
        yield a, b
        a = b


@substitute_for(_itertools.groupby)
def groupby(iterable, key=None):
    """Lazy, as CPython's: a group is read while it is consumed (the next key skips what is
    left of the current group)."""
    return _groupby(iter(iterable), (lambda x: x) if key is None else key)


def _groupby(iterator, keyfunc):
    exhausted = False
    curr_value = curr_key = None

    def _grouper(target_key):
        nonlocal curr_value, curr_key, exhausted
        yield curr_value
        for curr_value in iterator:
            curr_key = keyfunc(curr_value)
            if curr_key != target_key:
                return
            yield curr_value
        exhausted = True

    try:
        curr_value = next(iterator)
    except StopIteration:
        return
    curr_key = keyfunc(curr_value)
    while not exhausted:
        target_key = curr_key
        curr_group = _grouper(target_key)
        yield curr_key, curr_group
        if curr_key == target_key:
            for _ in curr_group:
                pass


@substitute_for(_itertools.chain.from_iterable)
def chain_from_iterable(iterables):
    return _chain_from_iterable(iter(iterables))


def _chain_from_iterable(iterables):
    for it in iterables:
        for element in it:
            yield element
